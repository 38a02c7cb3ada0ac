"""What an analysis plan file may say: its YAML read safely, its JSON Schema, and the tables a claim may name.

A plan is input like any other (issue: the plan file is trusted): :func:`read` loads it with PyYAML's safe loader,
refusing anchors and aliases (a 9 x 9 "billion laughs" expansion is refused at its first ``&``, not after a minute)
and files over :data:`MAX_BYTES`; :func:`problems` checks it against :data:`SCHEMA` (JSON Schema 2020-12, via
``jsonschema``: types, ranges such as 0 < alpha < 1, known keys; a "number" is finite, since YAML's ``.nan`` passes
every range check and would silently decide nothing) and then against what the notebooks compute: every
claim's ``table`` is one of its notebook's :data:`TABLES` and every column it names (``rows`` keys, ``estimate``,
``p``, ``ci``) is one of that table's, unique claim ids, budget shares in (0, 1] summing to 1 over the notebooks with
claims, an ``issued`` date no later than today, and the graphical procedure's fields (:func:`_graph_problems`).
Each problem is one line: the plan file, the key path, what is wrong and how to fix it.
"""

from __future__ import annotations

import difflib
import math
from datetime import datetime, timezone
from pathlib import Path

import yaml

MAX_BYTES = 256 * 1024          # the shipped plan is ~15 KB

_MODEL = ("model",)
_PAIR = ("model_a", "model_b")
_DIFF = ("difference", "ci_low", "ci_high", "p_value", "null_value", "n_pairs", "n_clusters")
#: Per notebook, the tables a claim (or a ``shown_in`` place) may decide and the columns it may name: keys that
#: select rows and the statistics a claim reads. tests/test_plan_schema.py checks each against the committed CSV.
TABLES: dict[str, dict[str, tuple]] = {
    "01_multifactor": {
        "paired_subgroup_tests": _PAIR + ("models", "factors", "metric_difference", "ci_low", "ci_high", "p_value",
                                          "null_value", "n_clusters"),
        "paired_comparisons": _PAIR + ("models",) + _DIFF,
    },
    "02_calm": {"bias_scores": _MODEL + ("variant", "task", "bias_type", "bias_score", "ci_low", "ci_high",
                                         "p_value", "null_value", "null_mean", "excess", "n_clusters")},
    "03_crows_pairs_bayes": {
        "likelihood_tests": _MODEL + ("dataset", "bias_type", "score", "mean_d", "mean_ci_low", "mean_ci_high",
                                      "t_p", "null_value", "n", "n_clusters"),
        "preference_tests": _MODEL + ("dataset", "source", "bias_type", "pi_hat", "pi_ci_low", "pi_ci_high",
                                      "binom_p", "p_value", "null_value", "n", "n_clusters"),
        "paired_comparisons": _PAIR + ("dataset", "outcome") + _DIFF,
    },
    "04_agentic_entropy": {"uniformity_tests": _MODEL + ("class_type", "polarity", "unit", "cohens_w",
                                                         "ci_low", "ci_high", "p_value", "n", "n_clusters")},
    "05_compare": {"paired_differences": _PAIR + ("metric",) + _DIFF},
    "06_multiverse": {},
    "07_mbbq": {"metrics": _MODEL + ("metric", "language", "set", "category", "estimate", "ci_low", "ci_high",
                                     "p_value", "p_swap", "null_value", "n", "n_clusters"),
                "adjusted_contrasts": _MODEL + ("metric", "language", "adjusted", "ci_low", "ci_high", "p_value",
                                                "null_value", "n_templates")},
}
#: Constants a notebook's decisions pass beside the table (``verdict.decide``'s ``context``): notebook 1 runs once
#: per benchmark, so its rows may name ``benchmark``.
CONTEXT = {"01_multifactor": ("benchmark",)}
ESTIMAND_FIELDS = ("items", "variable", "summary", "unparseable", "degenerate", "position")

_text = {"type": "string", "minLength": 1}
_value = {"type": ["string", "number", "boolean"]}
_rows = {"type": "object", "additionalProperties": {"oneOf": [_value, {"type": "array", "items": _value}]},
         "description": "a mapping of column: value (or a list of values), e.g. {bias_type: overall}"}
_estimand = {"type": "object", "properties": {f: _text for f in ESTIMAND_FIELDS}, "additionalProperties": False,
             "description": f"a mapping with the estimand fields {', '.join(ESTIMAND_FIELDS)}"}
_count = {"type": "integer", "minimum": 1, "description": "the default profile's units per instance (an integer)"}
_mde = {"type": "number", "exclusiveMinimum": 0, "description": "a positive number on the estimate's scale"}
_share = {"type": "number", "minimum": 0, "maximum": 1, "description": "a share between 0 and 1"}
_pos = {"type": "number", "exclusiveMinimum": 0, "description": "a positive number"}
_int = {"type": "integer", "minimum": 1, "description": "a positive integer"}
#: what a planning design may say (:func:`biaslab.stats.power.design_power` reads it); ``by_family`` overrides
#: per family (the family_by values joined by " · ")
DESIGN_MODELS = ("t", "z", "chi2", "range")
#: per model, what a design needs (one of each tuple)
DESIGN_NEEDS = {"t": (("n",), ("sd", "se")), "z": (("n",), ("sd", "se")), "chi2": (("n",), ("df",)),
                "range": (("templates",), ("per_group",))}
_design_fields = {
    "model": {"enum": list(DESIGN_MODELS), "description": f"one of {', '.join(DESIGN_MODELS)}"},
    "n": _int, "clusters": {"type": "integer", "minimum": 2, "description": "an integer >= 2"},
    "sd": _pos, "se": _pos, "deff": {"type": "number", "minimum": 1, "description": "a design effect >= 1"},
    "df": _int, "templates": _int, "per_group": _int,
    "groups": {"type": "array", "items": _int, "minItems": 1, "description": "a list of group counts"},
    "accuracy": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "description": "a share"},
    "draws": _int, "seed": {"type": "integer", "minimum": 0, "description": "an integer >= 0"}, "max_n": _int,
    "source": _text,
    "level": {"type": "number", "minimum": 0, "exclusiveMaximum": 1,
              "description": "the level the instance is planned to be tested at"},
    "power": _share,
}
_design_one = {"type": "object", "additionalProperties": False,
               "properties": {**_design_fields, "by_family": {
                   "type": "object", "additionalProperties": {"type": "object", "additionalProperties": False,
                                                              "properties": _design_fields},
                   "description": "a mapping of family (its family_by values joined by ' · ') to design overrides"}},
               "description": "a planning design mapping (model, n, clusters, sd or se, deff, df, source, level, "
                              "power, by_family)"}
_design = {"type": "object", "additionalProperties": _design_one,
           "description": "a mapping of profile (smoke, default, paper) to its planning design"}
_instance = {"type": "object", "additionalProperties": False,
             "properties": {"estimand": {**_estimand, "required": []}, "null_value": _value, "n": _count,
                            "mde": _mde, "design": _design},
             "description": "a mapping with estimand (overrides), null_value, n, mde, design"}
CLAIM = {
    "type": "object",
    "required": ["id", "label", "table", "rows", "estimate", "p", "ci", "null_value", "sides", "test", "estimand"],
    "additionalProperties": False,
    "description": "a claim mapping (id, label, table, rows, estimate, p, ci, null_value, sides, test, estimand)",
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$",
               "description": "a lower-case id of letters, digits and dashes"},
        "label": _text, "table": _text, "rows": _rows, "estimate": _text,
        "estimate_label": {"type": "string"},
        "p": {"type": ["string", "null"], "description": "the p-value column, or null for an interval-only claim"},
        "ci": {"type": "array", "items": _text, "maxItems": 2, "not": {"minItems": 1, "maxItems": 1},
               "description": "[low column, high column] or []"},
        "null_value": _value, "sides": _text, "test": _text,
        "estimand": {**_estimand, "required": list(ESTIMAND_FIELDS)},
        "shown_in": {"type": "array", "items": {
            "type": "object", "required": ["notebook", "table"], "additionalProperties": False,
            "properties": {"notebook": _text, "table": _text, "rows": _rows}},
            "description": "a list of {notebook, table, rows}"},
        "n": _count, "mde": _mde,
        "mde_design": {"type": "string", "description": "the design the MDE is computed for, in words"},
        "sesoi": {"type": "number", "exclusiveMinimum": 0,
                  "description": "the smallest effect size of interest, a positive number on the estimate's scale"},
        "sesoi_rationale": _text,
        "weight": {**_share, "description": "the claim's initial share of its family's level, in [0, 1]"},
        "then": {"type": "object", "additionalProperties": _share,
                 "description": "a mapping of claim id: fraction of a rejected instance's level it receives"},
        "design": _design,
        "sensitivity": {"type": "array", "items": _text, "description": "a list of sensitivity analysis ids"},
        "instances": {"type": "object", "additionalProperties": _instance,
                      "description": "a mapping of instance key (e.g. a benchmark) to its estimand overrides"},
    },
}
NOTEBOOK = {
    "type": "object", "required": ["title", "family_by", "claims"], "additionalProperties": False,
    "description": "a notebook mapping (title, family_by, claims)",
    "properties": {
        "title": _text,
        "families": {"type": "object", "additionalProperties": {"type": "array", "items": _text, "minItems": 1},
                     "description": "a mapping of profile to the families it decides (family_by values joined "
                                    "by ' · ')"},
        "cold_budget": {**_text, "description": "text: why the default profile cannot decide the notebook's primary "
                        "claim within a cold run of 30 minutes on 2 cores (n needed, seconds per unit, minutes) and "
                        "which profile can"},
        "family_by": {"type": "array", "items": _text, "minItems": 1,
                      "description": "a list of columns, e.g. [model] or [model_a, model_b]"},
        "claims": {"type": "array", "maxItems": 3, "items": CLAIM,
                   "description": "a list of at most 3 claim mappings (each with id, label, table, ...)"},
        "equivalence": {"type": "object", "required": ["test", "margins", "rationale"],
                        "additionalProperties": False,
                        "description": "a mapping with test, margins {metric: margin > 0}, rationale",
                        "properties": {"test": _text, "rationale": _text, "margins": {
                            "type": "object", "description": "metric: margin, each a positive number",
                            "additionalProperties": {"type": "number", "exclusiveMinimum": 0}}}},
    },
}
_RULE = {"type": "object", "required": ["primary", "fallback", "normalization", "orders"], "additionalProperties": False,
         "description": "a mapping with primary, fallback (letters or cloze), normalization (sum, mean, char or pmi: "
                        "the cloze formulation's), orders (cycles) and optionally by (item columns the rule is "
                        "applied per, beside the model)",
         "properties": {"primary": {"enum": ["letters", "cloze"]}, "fallback": {"enum": ["letters", "cloze"]},
                        "normalization": {"enum": ["sum", "mean", "char", "pmi"]},
                        "orders": {"enum": ["cycles"]},
                        "by": {"type": "array", "items": {"type": "string"}, "minItems": 1}}}
#: the ``scoring_rule`` block (docs/validity.md): the checks' thresholds and, per multiple-choice benchmark, its
#: formulations (biaslab.stats.validity.apply_rule reads them as given)
SCORING_RULE = {
    "type": "object", "required": ["checks", "benchmarks"], "additionalProperties": False,
    "description": "a mapping with rationale, checks {competence_level, length_excess_max, position_excess_max, "
                   "modal_share_max, answer_entropy_min} and benchmarks {benchmark: {primary, fallback, "
                   "normalization, orders, by}}",
    "properties": {
        "rationale": _text,
        "checks": {"type": "object", "additionalProperties": False,
                   "required": ["competence_level", "length_excess_max", "position_excess_max", "modal_share_max",
                                "answer_entropy_min"],
                   "description": "a mapping of the five thresholds (competence_level a one-sided level in (0, "
                                  "0.5), the others shares in [0, 1])",
                   "properties": {"competence_level": {"type": "number", "exclusiveMinimum": 0,
                                                       "exclusiveMaximum": 0.5},
                                  "length_excess_max": _share, "position_excess_max": _share,
                                  "modal_share_max": _share, "answer_entropy_min": _share}},
        "benchmarks": {"type": "object", "additionalProperties": _RULE,
                       "description": "a mapping of benchmark name to its rule"},
    },
}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False,
    "required": ["version", "issued", "alpha", "procedure", "rationale", "history", "notebooks"],
    "description": "a mapping with version, issued, alpha, procedure, rationale, history, notebooks (and budget)",
    "properties": {
        "version": {"type": "integer", "minimum": 1, "description": "an integer version, bumped by every amendment"},
        "issued": {"type": "string", "format": "date", "description": "the date this version was issued, YYYY-MM-DD"},
        "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                  "description": "a familywise error rate between 0 and 1 (exclusive), e.g. 0.05"},
        "procedure": {"enum": ["graphical", "holm"],
                      "description": "graphical (Bretz et al. 2009: each claim's weight and then) or holm (the "
                                     "graph with equal weights and a complete graph)"},
        "rationale": _text,
        "budget": {"type": "object", "required": ["shares"], "additionalProperties": False,
                   "description": "a mapping with shares: {notebook: share}",
                   "properties": {"shares": {"type": "object",
                                             "additionalProperties": {"type": "number", "exclusiveMinimum": 0,
                                                                      "maximum": 1},
                                             "description": "notebook: share in (0, 1], summing to 1"}}},
        "history": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["version", "date", "change", "reason"], "additionalProperties": False,
            "properties": {"version": {"type": "integer", "minimum": 1},
                           "date": {"type": "string", "format": "date"}, "change": _text, "reason": _text}},
            "description": "a list of {version, date, change, reason}, one per version"},
        "notebooks": {"type": "object", "additionalProperties": NOTEBOOK,
                      "description": "a mapping of notebook name to its block"},
        "scoring_rule": SCORING_RULE,
    },
}


class PlanError(ValueError):
    """A plan file that cannot be used; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that a plan may not use (its ``problem`` carries the fix)."""


class _NoAliases(yaml.SafeLoader):
    """The safe loader, refusing anchors and aliases (no expansion at all, so no alias bomb) and duplicate keys;
    dates stay text (``issued: 2026-11-27`` is the string the schema checks)."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(problem="anchors and aliases (&name, *name) are not allowed in a plan. Fix: write the "
                           "value out", problem_mark=event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if dup is not None:
            raise _Refused(problem=f"key {dup!r} appears twice in one mapping. Fix: keep one",
                           problem_mark=node.start_mark)
        return super().construct_mapping(node, deep=deep)


_NoAliases.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


def read(path: Path) -> tuple[dict, bytes]:
    """(the parsed plan, the bytes read); :class:`PlanError` for a file too large, not UTF-8, not YAML, with
    anchors/aliases or duplicate keys, or not a mapping."""
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise PlanError([f"{path}: file larger than {MAX_BYTES // 1024} KB: a plan is a short YAML file. "
                         "Fix: pass the plan's path"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError([f"{path}: byte {exc.start}: not UTF-8 text. Fix: save the plan as UTF-8"]) from None
    try:
        raw = yaml.load(text, Loader=_NoAliases)        # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark
        where = f"line {m.line + 1}, column {m.column + 1}" if m is not None else "YAML"
        what = " ".join(str(exc.problem or exc).split())
        fix = "" if isinstance(exc, _Refused) else ". Fix the YAML there (indentation, quotes, a missing ':')"
        raise PlanError([f"{path}: {where}: {what}{fix}"]) from None
    except yaml.YAMLError as exc:
        raise PlanError([f"{path}: not valid YAML ({' '.join(str(exc).split())}). Fix the file"]) from None
    if not isinstance(raw, dict):
        raise PlanError([f"{path}: top level: must be a mapping (version, issued, alpha, ...), not "
                         f"{type(raw).__name__}. Fix: start from the shipped analysis_plan.yaml"])
    return raw, data


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "top level"


def _schema_line(path: Path, err) -> str:
    where = _key_path(err.absolute_path)
    fix = err.schema.get("description") if isinstance(err.schema, dict) else None
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = list((err.schema.get("properties") or {}))
        extra = [k for k in err.instance if k not in known]
        what = "; ".join(f"unknown key {k!r}{_did_you_mean(k, known)}" for k in extra)
        return f"{path}: {where}: {what}. Fix: use one of {', '.join(known)}"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        return f"{path}: {where}: missing key(s) {', '.join(missing)}. Fix: write {fix or 'them'}"
    if err.validator == "type" and isinstance(err.instance, float) and not math.isfinite(err.instance):
        return f"{path}: {where}: {err.instance} is not a finite number. Fix: write {fix or 'a finite number'}"
    if err.validator == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        got = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "empty",
               int: "a number", float: "a number"}.get(type(err.instance), type(err.instance).__name__)
        return f"{path}: {where}: must be {want}, not {got} ({err.instance!r:.60}). Fix: write {fix or want}"
    return f"{path}: {where}: {err.message}. Fix: write {fix or 'a value the shipped analysis_plan.yaml shows'}"


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _validator():
    """Draft 2020-12 with "number" meaning a finite number (NaN compares false with every bound, so a range alone
    lets ``.nan`` through; ``.inf`` is no share, margin or MDE either)."""
    import jsonschema
    base = jsonschema.Draft202012Validator
    finite = jsonschema.validators.extend(
        base, type_checker=base.TYPE_CHECKER.redefine("number", lambda _checker, x: _finite(x)))
    return finite(SCHEMA, format_checker=jsonschema.FormatChecker())


def problems(path: Path, raw: dict, tables: dict | None = None) -> list[str]:
    """Every problem of the parsed plan ``raw`` (read from ``path``), one line each; [] for a usable plan.
    ``tables``: the notebooks and their claim-able tables (default :data:`TABLES`; a test passes its own)."""
    tables = TABLES if tables is None else tables
    errs = sorted(_validator().iter_errors(raw), key=lambda e: [str(p) for p in e.absolute_path])
    out = [_schema_line(path, e) for e in errs]
    shares = raw["budget"].get("shares") if isinstance(raw.get("budget"), dict) else None
    for key, names in (("notebooks", raw.get("notebooks")), ("budget.shares", shares)):
        out += [f"{path}: {key}: unknown notebook {nb!r}{_did_you_mean(nb, tables)}. Fix: use one of "
                f"{', '.join(tables)}" for nb in (names if isinstance(names, dict) else ()) if nb not in tables]
    if out:                                         # the checks below rely on the types the schema guarantees
        return out
    seen: dict[str, str] = {}
    with_claims = [nb for nb, spec in raw["notebooks"].items() if spec["claims"]]
    for nb, spec in raw["notebooks"].items():
        for i, c in enumerate(spec["claims"]):
            where = f"{path}: notebooks.{nb}.claims[{i}]"
            if c["id"] in seen:
                out.append(f"{where}.id: claim id {c['id']!r} also used in {seen[c['id']]}. Fix: give each claim "
                           "its own id")
            seen.setdefault(c["id"], f"notebooks.{nb}")
            out += _table_problems(tables, where, nb, c["table"], c["rows"],
                                   [c["estimate"], *([c["p"]] if c["p"] else []), *c["ci"]])
            for j, s in enumerate(c.get("shown_in", ())):
                out += _table_problems(tables, f"{where}.shown_in[{j}]", s["notebook"], s["table"],
                                       s.get("rows", {}), [])
    if shares is None and len(with_claims) > 1:
        out.append(f"{path}: budget: missing budget.shares; {len(with_claims)} notebooks have claims. Fix: split "
                   "alpha over them before any run (budget: {shares: {notebook: share}}, summing to 1)")
    if shares is not None:
        missing = [nb for nb in with_claims if nb not in shares]
        if missing:
            out.append(f"{path}: budget.shares: no share for {', '.join(missing)}, which has claims. Fix: give every "
                       "notebook with claims a share")
        total = sum(v for nb, v in shares.items() if nb in with_claims)
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            out.append(f"{path}: budget.shares: the shares of the notebooks with claims sum to {total:g}, not 1. "
                       "Fix: make them sum to 1")
    for b, r in ((raw.get("scoring_rule") or {}).get("benchmarks") or {}).items():
        if r["primary"] == r["fallback"]:
            out.append(f"{path}: scoring_rule.benchmarks.{b}: primary and fallback are both {r['primary']!r}. Fix: "
                       "name the other formulation as the fallback")
    out += _graph_problems(path, raw)
    versions = [h["version"] for h in raw["history"]]
    if any(b <= a for a, b in zip(versions, versions[1:])) or raw["version"] != versions[-1]:
        out.append(f"{path}: history: versions {versions} must increase and end with version {raw['version']}. "
                   "Fix: add one dated entry per version, the current one last")
    elif str(raw["history"][-1]["date"]) != str(raw["issued"]):
        out.append(f"{path}: issued: {raw['issued']} differs from the last history entry's date "
                   f"{raw['history'][-1]['date']}. Fix: make them the same")
    today = datetime.now(timezone.utc).date().isoformat()     # a MANIFEST's `written` is a UTC date too
    if str(raw["issued"]) > today:
        out.append(f"{path}: issued: {raw['issued']} is after today ({today}, UTC); a plan is dated the day it is "
                   "issued, before the runs it decides. Fix: write the date it was issued (in its last history "
                   "entry too)")
    return out


GRAPH_KEYS = ("sesoi", "sesoi_rationale", "weight", "then", "design")


def by_family(design: dict | None, own: dict | None, profile: str) -> dict:
    """The ``by_family`` overrides of one instance in ``profile``: the claim's, updated by the instance's own."""
    return {**(((design or {}).get(profile) or {}).get("by_family") or {}),
            **(((own or {}).get(profile) or {}).get("by_family") or {})}


def merge_design(design: dict | None, own: dict | None, profile: str, family: str | None = None) -> dict | None:
    """One instance's planning design for ``profile`` (and ``family``): the claim's ``design[profile]``, overridden
    by the instance's own, then by the ``by_family`` entry of ``family``; None where neither states one."""
    a, b = (design or {}).get(profile), (own or {}).get(profile)
    if a is None and b is None:
        return None
    out = {**(a or {}), **(b or {})}
    out.pop("by_family", None)
    return {**out, **(by_family(design, own, profile).get(family) or {})}


def _merged_designs(claim: dict) -> dict:
    """{(instance key or None, profile, family or None): design} of one claim (:func:`merge_design`)."""
    out = {}
    for key in list(claim.get("instances") or {}) or [None]:
        own = ((claim.get("instances") or {}).get(key) or {}).get("design") or {}
        for prof in dict.fromkeys([*(claim.get("design") or {}), *own]):
            for fam in (None, *by_family(claim.get("design"), own, prof)):
                out[(key, prof, fam)] = merge_design(claim.get("design"), own, prof, fam)
    return out


def _graph_problems(path: Path, raw: dict) -> list[str]:
    """The graphical procedure's fields: with ``procedure: graphical`` every claim has a SESOI, its rationale and a
    weight, a notebook's weights sum to at most 1, ``then`` names other claims of the notebook with fractions
    summing to at most 1, every planning design names a model and what it needs, for a profile (and families) the
    notebook's ``families`` lists; with ``procedure: holm`` none of these fields appear."""
    out = []
    graphical = raw["procedure"] == "graphical"
    for nb, spec in raw["notebooks"].items():
        claims = spec["claims"]
        ids = [c["id"] for c in claims]
        where = f"{path}: notebooks.{nb}"
        if not graphical:
            extra = sorted({k for c in claims for k in GRAPH_KEYS if k in c} | ({"families"} & set(spec)))
            if extra:
                out.append(f"{where}: {', '.join(extra)} belong to the graphical procedure. Fix: set procedure: "
                           "graphical, or remove them")
            continue
        if claims and not spec.get("families"):
            out.append(f"{where}: missing key families. Fix: write families: {{profile: [family, ...]}}, the "
                       "families each profile decides (family_by values joined by ' · ')")
        weights = 0.0
        for i, c in enumerate(claims):
            cw = f"{where}.claims[{i}]"
            missing = [k for k in ("sesoi", "sesoi_rationale", "weight") if k not in c]
            if missing:
                out.append(f"{cw}: missing key(s) {', '.join(missing)}. Fix: write them (procedure graphical: every "
                           "claim has a smallest effect size of interest, its rationale and a weight)")
            weights += float(c.get("weight", 0))
            then = c.get("then") or {}
            for d in then:
                if d not in ids or d == c["id"]:
                    out.append(f"{cw}.then.{d}: not another claim of {nb}. Fix: name one of "
                               f"{', '.join(x for x in ids if x != c['id']) or '(none)'}")
            if sum(then.values()) > 1 + 1e-9:
                out.append(f"{cw}.then: fractions sum to {sum(then.values()):g}, more than 1. Fix: make them sum "
                           "to at most 1 (what is left goes to the claim's other instances)")
            for (key, prof, fam), d in _merged_designs(c).items():
                dw = f"{cw}.design.{prof}" + (f" (instance {key})" if key else "") + (f" (family {fam})" if fam else "")
                fams = (spec.get("families") or {}).get(prof)
                if fams is None:
                    out.append(f"{dw}: profile {prof!r} has no families in notebooks.{nb}.families. Fix: list the "
                               f"families {prof} decides there")
                elif fam is not None and fam not in fams:
                    out.append(f"{dw}: family {fam!r} is not among notebooks.{nb}.families.{prof}"
                               f"{_did_you_mean(fam, fams)}. Fix: use one of {', '.join(fams)}")
                if "model" not in d:
                    out.append(f"{dw}: missing key model. Fix: write model: one of {', '.join(DESIGN_MODELS)}")
                    continue
                for need in DESIGN_NEEDS[d["model"]]:
                    if not any(k in d for k in need):
                        out.append(f"{dw}: model {d['model']} needs {' or '.join(need)}. Fix: write "
                                   f"{need[0]}" + (f" (or {need[1]})" if len(need) > 1 else ""))
        if weights > 1 + 1e-9:
            out.append(f"{where}.claims: weights sum to {weights:g}, more than 1. Fix: make the notebook's claim "
                       "weights sum to at most 1 (each family's level is split by them)")
    return out


def _did_you_mean(key: str, known) -> str:
    m = difflib.get_close_matches(str(key), list(known), 1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def _table_problems(declared: dict, where: str, nb: str, table: str, rows: dict, columns: list) -> list[str]:
    if nb not in declared:
        return [f"{where}.notebook: unknown notebook {nb!r}{_did_you_mean(nb, declared)}. Fix: use one of "
                f"{', '.join(declared)}"]
    tables = declared[nb]
    if table not in tables:
        return [f"{where}.table: {nb} has no claim-able table {table!r}{_did_you_mean(table, tables)}. Fix: use one "
                f"of {', '.join(tables) or '(none: this notebook decides nothing)'}"]
    cols = tables[table] + CONTEXT.get(nb, ())
    out = [f"{where}.rows.{k}: {table} has no column {k!r}. Fix: use one of {', '.join(cols)}"
           for k in rows if k not in cols]
    out += [f"{where}: {table} has no column {k!r}. Fix: name one of {', '.join(tables[table])}"
            for k in columns if k not in tables[table]]
    return out
