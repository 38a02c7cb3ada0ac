"""The analysis plan: the confirmatory claims of every notebook, read from one versioned YAML file with a history
(``analysis_plan.yaml``; docs/reliability.md, "The analysis plan is input").

Per notebook at most three claims, each with its estimand (items, variable, summary measure, and the handling of
intercurrent events: unparseable answers, degenerate responders, position preference), test, null and sidedness, the
table rows it decides, per-instance overrides (:meth:`Claim.instance`), and under the graphical procedure its smallest
effect size of interest (``sesoi``), its node in its family's graph (``weight``, ``then``) and per profile each
instance's planning design with the level and power it is planned at (:meth:`Claim.design_of`). Claims are templates
over a run's models and datasets: a family is one notebook x the values of its ``family_by`` columns; a graphical
plan lists the families each profile decides (:meth:`Plan.families`) and is read for one run profile.
**One error budget** (``budget.shares``; optional when one notebook has every claim): alpha is split across
notebooks before any run (Bonferroni; shares sum to 1), equally over a notebook's families, and the plan's graph
(Bretz et al. 2009; ``procedure: holm``: Holm 1979) runs inside each family
(:func:`biaslab.stats.verdict.budget_decisions`); :meth:`Plan.method_text` states it.

:func:`load` validates the file first (:mod:`biaslab.plan.schema`); a kernel records the hash of the bytes it parsed
(:meth:`Plan.entry`) in its MANIFEST, and :func:`changed_since` says when that plan is missing, changed, or issued
after the results. The plan travels as an argument: a notebook loads it once (:func:`show`) and passes it on.

The package: this module and :mod:`.schema` import only :mod:`biaslab.paths` (papers and reports may read the plan);
:mod:`.calibration` (each claim's test and the familywise error on a run's tables) and :mod:`.sensitivity` (the
sensitivity analyses of notebooks 1 and 5) read papers' tables, so they may import papers, and no paper imports them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .. import paths
from . import schema

DEFAULT = paths.ROOT / "analysis_plan.yaml"
MAX_CLAIMS = schema.NOTEBOOK["properties"]["claims"]["maxItems"]
ESTIMAND_FIELDS = schema.ESTIMAND_FIELDS
CHANGED = "plan changed since these results"
ISSUED_AFTER = "plan issued after these results"     # a record that contradicts itself: `biaslab verify` fails it


@dataclass(frozen=True)
class Claim:
    """One confirmatory claim of a notebook (a template: one instance per model, or model pair, and dataset)."""
    id: str
    notebook: str
    label: str
    table: str
    rows: Mapping
    estimate: str
    p: str | None
    ci: tuple
    null: object
    sides: str
    test: str
    estimand: Mapping
    family_by: tuple
    shown_in: tuple = ()
    estimate_label: str = ""
    n: int | None = None                # the default profile's units per instance (instances may say their own)
    mde: float | None = None            # minimum detectable effect at 80 % power, from the design, before the run
    mde_design: str = ""
    sensitivity: tuple = ()
    instances: Mapping = field(default_factory=dict)
    sesoi: float | None = None          # the smallest effect size of interest, on the estimate's scale
    sesoi_rationale: str = ""
    weight: float | None = None         # the claim's initial share of its family's level (graphical procedure)
    then: Mapping = field(default_factory=dict)     # {claim id: fraction of a rejected instance's level}
    design: Mapping = field(default_factory=dict)   # {profile: planning design} (instances may override)

    def instance(self, key: str | None = None) -> dict:
        """The claim as it applies to one instance (notebook 1's benchmark, a dataset): ``estimand`` with that
        instance's overrides, its ``null_value``, ``n`` and ``mde`` (the claim's own where it says none)."""
        own = self.instances.get(key, {}) if key is not None else {}
        return {"key": key, "estimand": {**self.estimand, **own.get("estimand", {})},
                "null_value": own.get("null_value", self.null), "n": own.get("n", self.n),
                "mde": own.get("mde", self.mde)}

    def design_of(self, key: str | None, profile: str, family: str | None = None) -> dict | None:
        """The planning design of instance ``key`` in ``profile`` (and ``family``, its family_by values joined by
        " · "): the claim's, overridden by the instance's and the family's (:func:`biaslab.plan.schema.merge_design`);
        None where the plan states none (the instance is then descriptive in that profile)."""
        own = (self.instances.get(key) or {}).get("design") if key is not None else None
        return schema.merge_design(dict(self.design), own, profile, family)

    def design_text(self, profile: str = "default") -> str:
        """The claim's planned sizes in ``profile``, from the plan's stated numbers: with planning designs, "; SESOI
        0.1; planned (default): en n 400, power 0.93 at level 0.004, ..." (an instance below 0.8 power is marked
        descriptive); otherwise "; n 400, MDE 0.111 at 80 % power" ("" where the plan states neither)."""
        keys = list(self.instances) or [None]
        if self.sesoi is not None:
            parts = []
            for k in keys:
                own = (self.instances.get(k) or {}).get("design") if k is not None else None
                for fam in (None, *schema.by_family(dict(self.design), own, profile)):
                    d = self.design_of(k, profile, fam)
                    who = " ".join(x for x in (k, f"({fam})" if fam else None) if x)
                    if d is None:
                        parts.append(f"{who + ': ' if who else ''}no planning design")
                        continue
                    size = f"n {int(d['n']):,}" if "n" in d else f"{d['templates']} templates"
                    if "power" in d and "level" in d:
                        size += (f", power {d['power']:.2f} at level {d['level']:.2g}"
                                 + (" (descriptive)" if d["power"] < 0.8 else ""))
                    parts.append(f"{who + ' ' if who else ''}{size}")
            then = (", then " + ", ".join(f"`{d}` {f:g}" for d, f in self.then.items())) if self.then else ""
            return (f"; SESOI {self.sesoi:g}; weight {self.weight or 0:g}{then}; planned ({profile}): "
                    + "; ".join(parts))
        sizes = [(k, self.instance(k)["n"], self.instance(k)["mde"]) for k in keys]
        sizes = [(k, n, m) for k, n, m in sizes if n is not None and m is not None]
        if not sizes:
            return ""
        if len({(n, m) for _, n, m in sizes}) == 1:
            return f"; n {sizes[0][1]:,}, MDE {sizes[0][2]:g} at 80 % power"
        return "; n / MDE at 80 % power: " + ", ".join(f"{k} {n:,} / {m:g}" for k, n, m in sizes)

    def key_of(self, row: Mapping, context: Mapping | None = None) -> str | None:
        """The instance key of one decided row: the first of the row's (or ``context``'s) values that names one of
        the claim's ``instances`` (notebook 1's ``benchmark``, notebook 3's ``dataset``); None where none does."""
        vals = [str(v) for v in {**(context or {}), **row}.values()]
        return next((v for v in vals if v in self.instances), None)

    def instance_of(self, row: Mapping, context: Mapping | None = None) -> dict:
        """:meth:`instance` of one decided row (:meth:`key_of`); the claim's own where it names no instance."""
        return self.instance(self.key_of(row, context))

    def mask(self, df, context: Mapping | None = None, rows: Mapping | None = None):
        """Boolean mask of the rows of ``df`` this claim (or one of its ``shown_in`` places: ``rows``) covers;
        ``context`` supplies constants a table does not hold as columns (notebook 1's ``benchmark``)."""
        import pandas as pd
        m = pd.Series(True, index=df.index)
        for col, val in (self.rows if rows is None else rows).items():
            vals = {str(v) for v in (val if isinstance(val, (list, tuple)) else (val,))}
            if col in df.columns:
                m &= df[col].astype(str).isin(vals)
            elif context is not None and col in context:
                m &= str(context[col]) in vals
            else:
                return pd.Series(False, index=df.index)
        return m

    def about_another_run(self, columns, context: Mapping | None) -> bool:
        """Whether the claim is about another run than the one ``context`` describes (a ``rows`` constant the table
        lacks as a column and the context gives another value: notebook 1's dm-ssqa in its BBQ run)."""
        for col, val in self.rows.items():
            vals = {str(v) for v in (val if isinstance(val, (list, tuple)) else (val,))}
            if col not in columns and context is not None and col in context and str(context[col]) not in vals:
                return True
        return False

    def family(self, row: Mapping, context: Mapping | None = None) -> str:
        """The family id of one matched row: the notebook and its ``family_by`` values."""
        ctx = {**(context or {}), **row}
        return f"{self.notebook} · " + " · ".join(str(ctx.get(k, "?")) for k in self.family_by)


@dataclass(frozen=True)
class Plan:
    """The plan, read for the runs of one ``profile`` (the planning designs and families that apply)."""
    version: str
    alpha: float
    procedure: str
    rationale: str
    notebooks: Mapping[str, Mapping]
    claims: tuple
    path: Path | None = None
    sha256: str = ""
    issued: str = ""
    history: tuple = ()
    budget: Mapping = field(default_factory=dict)
    profile: str = "default"
    shares: Mapping = field(default_factory=dict)
    scoring: Mapping = field(default_factory=dict)

    @property
    def graphical(self) -> bool:
        """True for the graphical procedure (each claim's weight and ``then``, decided only where powered)."""
        return self.procedure == "graphical"

    def families(self, notebook: str) -> list[str] | None:
        """The families ``notebook`` decides in this plan's profile (family_by values joined by " · "); None for a
        plan without planned families (Holm: every family of the run)."""
        fams = (self.notebooks.get(notebook) or {}).get("families")
        return None if fams is None else list(fams.get(self.profile) or [])

    def graph(self, notebook: str) -> tuple[dict, dict] | None:
        """(weights, then) of ``notebook``'s claims for the graphical procedure, None for Holm."""
        if not self.graphical:
            return None
        claims = self.of(notebook)
        return {c.id: float(c.weight or 0.0) for c in claims}, {c.id: dict(c.then) for c in claims}

    def entry(self) -> dict:
        """``{"path", "sha256", "version", "issued"}`` for a MANIFEST: the hash of the bytes this plan was parsed
        from; a path inside the repository is recorded relative to it (no machine path)."""
        where = self.path
        # the repository's plan names no machine path, also where paths.ROOT was pointed elsewhere (a test's folder)
        for base in (paths.ROOT, DEFAULT.parent):
            if where is not None and where.is_absolute() and where.is_relative_to(base):
                where = where.relative_to(base)
        return {"path": str(where), "sha256": self.sha256, "version": self.version, "issued": self.issued}

    def scoring_rule(self, benchmark: str) -> dict | None:
        """The ``scoring_rule`` the plan declares for a multiple-choice benchmark (docs/validity.md): ``primary``,
        ``fallback``, the cloze ``normalization``, ``orders`` and the checks' thresholds (``checks``); None where it
        declares none (the benchmark's answers are read at its paper's protocol)."""
        rule = (self.scoring.get("benchmarks") or {}).get(benchmark)
        return None if rule is None else {**rule, "checks": dict(self.scoring["checks"])}

    def share(self, notebook: str) -> float:
        """The notebook's share of the project's alpha (``budget.shares``)."""
        if notebook not in self.shares:
            raise KeyError(f"{self.path}: budget.shares has no share for notebook {notebook!r}: add one (the shares "
                           "of the notebooks with claims sum to 1)")
        return float(self.shares[notebook])

    def of(self, notebook: str, table: str | None = None) -> list[Claim]:
        """The claims a notebook owns (of one table, when given)."""
        return [c for c in self.claims if c.notebook == notebook and (table is None or c.table == table)]

    def shown(self, notebook: str, table: str) -> list[tuple[Claim, Mapping]]:
        """(claim, rows) for every other notebook's claim that this notebook's ``table`` shows as exploratory."""
        return [(c, s.get("rows", {})) for c in self.claims for s in c.shown_in
                if s.get("notebook") == notebook and s.get("table") == table]

    def render(self, notebook: str) -> str:
        """The plan's block for the top of a notebook's report (Markdown)."""
        head = (f"**Analysis plan** v{self.version}{f' issued {self.issued}' if self.issued else ''} "
                f"(`{self.path.name if self.path else 'analysis_plan.yaml'}`, "
                f"sha256 {self.sha256[:12]}): ")
        claims = self.of(notebook)
        shown = [c for c in self.claims if any(s.get("notebook") == notebook for s in c.shown_in)]
        if not claims:
            lines = [head + "no confirmatory claim; every test here is exploratory (estimate, interval, p; not "
                     "decided)."]
        else:
            lines = [head + f"{len(claims)} confirmatory claim{'s' if len(claims) != 1 else ''}. "
                     + self.method_text(notebook)]
            lines += [f"- `{c.id}`: {c.label}; {c.test}; null {c.null}, {c.sides}{c.design_text(self.profile)}."
                      for c in claims]
        lines += [f"- shown here, decided in {c.notebook}: `{c.id}` ({c.label})." for c in shown]
        budget = (self.notebooks.get(notebook) or {}).get("cold_budget")
        if budget and self.profile != "paper":
            lines.append(f"\n**What this profile cannot decide** (the plan's cold-budget arithmetic): {budget}")
        return "\n".join(lines)

    def method_text(self, notebook: str, table=None) -> str:
        """The sentence that states how ``notebook``'s results are decided, from the plan's fields (procedure,
        alpha, budget share, ``family_by``); with a decided ``table`` (verdict columns), its families and their
        sizes and levels as they ran. Every report sentence naming a family, procedure or adjustment is this one."""
        claims = self.of(notebook)
        if not claims:
            return ("No confirmatory claim: every test here is exploratory (estimate, interval, unadjusted p; a "
                    "Benjamini–Hochberg p is a screen, never a decision).")
        share = self.share(notebook)
        by = " × ".join(claims[0].family_by)
        ids = ", ".join(f"`{c.id}`" for c in claims)
        head = (f"Confirmatory ({ids}): this notebook's share of the project's error budget is {share:g} of "
                f"α = {self.alpha:g} (α·share = {self.alpha * share:.4g}), split equally over its families (one per "
                f"{by}")
        if self.graphical:
            fams = self.families(notebook) or []
            weights = ", ".join(f"`{c.id}` {c.weight or 0:g}" for c in claims)
            then = "; ".join(f"`{c.id}` → " + ", ".join(f"`{d}` {f:g}" for d, f in c.then.items())
                             for c in claims if c.then)
            text = (head + f"; {len(fams)} in profile {self.profile}: {', '.join(fams) or 'none'}); within each "
                    "family a graph (Bretz et al. 2009): each claim starts with its weight of the family's level "
                    f"({weights}), split equally over its instances; a rejected instance passes its level on"
                    + (f" ({then}; what `then` leaves goes to the claim's other instances)" if then else
                       " to the claim's other instances")
                    + ". An instance is decided only where its test has 80 % power for its smallest effect of "
                    "interest (`sesoi`) at the level it is tested (`tested_level`, `power`): below 0.8 at its "
                    "planned level (`planned_level`) it is descriptive (not in the graph), left at level 0 it is "
                    "not reached, and below 0.8 at the level it reached it is not decided. Adjusted p "
                    "(`p_adjusted`) is on the project's scale, compared with α; each claim's adjusted interval "
                    "(`ci_adj_low`, `ci_adj_high`) is at the level at which the graph tested it (`ci_level`).")
        else:
            text = (head + f"); {self.procedure.capitalize()} within each family at α·share / number of "
                    "families. Adjusted p (`p_adjusted`) is on the project's scale, compared with α; each claim's "
                    "adjusted interval (`ci_adj_low`, `ci_adj_high`) is at the level at which Holm tested it "
                    "(`ci_level`).")
        if table is not None and "family_kind" in getattr(table, "columns", ()):
            conf = table[table["family_kind"] == "confirmatory"].drop_duplicates("family")
            if len(conf) and {"n_families", "alpha_family", "family_size"} <= set(conf.columns):
                n = int(conf["n_families"].iloc[0])
                sizes = ", ".join(f"{f} ({int(m)} test{'s' if m != 1 else ''}, level {a:.4g})"
                                  for f, m, a in zip(conf["family"], conf["family_size"], conf["alpha_family"]))
                text += f" This run: {n} famil{'ies' if n != 1 else 'y'}: {sizes}."
        return text + " Every other test is exploratory (estimate, interval, p; not decided)."


def resolve(path: str | Path | None = None, cwd: str | Path | None = None) -> Path:
    """The plan's absolute path, resolved once: ``path`` relative to ``cwd`` (default: the directory the command
    ran in), the repository's ``analysis_plan.yaml`` when None. The runner passes the result to every kernel, whose
    working directory is ``notebooks/``, so both read the same file."""
    if path is None or str(path).strip() in ("", "None"):
        return DEFAULT.resolve()
    p = Path(str(path)).expanduser()
    return (p if p.is_absolute() else Path(cwd or Path.cwd()) / p).resolve()


def load(path: str | Path | None = None, tables: Mapping | None = None, profile: str = "default") -> Plan:
    """The plan at ``path`` (:func:`resolve`; default the repository's ``analysis_plan.yaml``), validated by
    :mod:`biaslab.plan.schema` before anything reads it; :class:`~biaslab.plan.schema.PlanError` (a ValueError)
    holds one line per problem (file, key path, fix). ``sha256`` is the hash of the bytes parsed. ``tables``: the
    notebooks and the tables their claims may name (default :data:`biaslab.plan.schema.TABLES`); ``profile``: the
    run profile whose planning designs and families apply."""
    path = resolve(path)
    if not path.is_file():
        raise FileNotFoundError(f"analysis plan {path} not found: pass an existing YAML file (the shipped one is "
                                f"{DEFAULT})")
    raw, data = schema.read(path)
    bad = schema.problems(path, raw, tables)
    if bad:
        raise schema.PlanError(bad)
    claims = []
    for nb, spec in raw["notebooks"].items():
        for c in spec["claims"]:
            claims.append(Claim(
                id=c["id"], notebook=nb, label=c["label"], table=c["table"], rows=dict(c["rows"]),
                estimate=c["estimate"], p=c["p"], ci=tuple(c["ci"]), null=c["null_value"], sides=c["sides"],
                test=c["test"], estimand=dict(c["estimand"]), family_by=tuple(spec["family_by"]),
                shown_in=tuple(c.get("shown_in", ())), estimate_label=c.get("estimate_label", ""),
                n=c.get("n"), mde=c.get("mde"), mde_design=c.get("mde_design", ""),
                sensitivity=tuple(c.get("sensitivity", ())), instances=dict(c.get("instances", {})),
                sesoi=c.get("sesoi"), sesoi_rationale=" ".join(str(c.get("sesoi_rationale", "")).split()),
                weight=c.get("weight"), then=dict(c.get("then") or {}), design=dict(c.get("design") or {})))
    return Plan(version=str(raw["version"]), alpha=float(raw["alpha"]), procedure=raw["procedure"],
                rationale=" ".join(raw["rationale"].split()), notebooks=dict(raw["notebooks"]),
                claims=tuple(claims), path=path, sha256=hashlib.sha256(data).hexdigest(),
                issued=str(raw["issued"]), history=tuple(raw["history"]), budget=dict(raw.get("budget") or {}),
                shares=_shares(raw, {c.notebook for c in claims}), scoring=dict(raw.get("scoring_rule") or {}),
                profile=str(profile))


def _shares(raw: Mapping, with_claims: set) -> dict:
    """``budget.shares`` (validated by :mod:`biaslab.plan.schema`: one share in (0, 1] per notebook with claims,
    summing to 1); a plan whose claims all sit in one notebook may omit the block (its share is 1)."""
    shares = ((raw.get("budget") or {}).get("shares") or {})
    if not shares and len(with_claims) <= 1:
        return {nb: 1.0 for nb in with_claims}
    return {str(k): float(v) for k, v in shares.items()}


def show(path: str | Path | None, notebook: str, profile: str = "default") -> Plan:
    """The plan at ``path`` (:func:`load`; a notebook's ``analysis_plan`` parameter) for the run's ``profile``, with
    ``notebook``'s part displayed (the cell the report puts above its findings). The notebook passes the plan it
    returns to every call that decides, and to its :class:`~biaslab.report.outputs.OutputDir`, which records its hash."""
    from IPython.display import Markdown, display
    plan = load(path, profile=profile)
    display(Markdown(plan.render(notebook)))
    return plan


def recorded(manifest: Mapping) -> Plan:
    """The plan a run's MANIFEST (or provenance) says it decided with (a path relative to the project root, as
    :func:`changed_since` reads it; the repository's when none is recorded), for the run's profile."""
    rec = manifest.get("analysis_plan")
    where = Path(rec.get("path") or DEFAULT) if isinstance(rec, Mapping) else DEFAULT
    return load(where if where.is_absolute() else paths.ROOT / where, profile=str(manifest.get("profile") or "default"))


def changed_since(manifest: Mapping, path: str | Path | None = None) -> str:
    """What ``biaslab verify`` says about the plan a run decided with, "" when it still holds: the plan file the
    MANIFEST names (or ``path``) is missing, or no longer hashes to the recorded sha256 ("plan changed since these
    results"; "issued after these results" when the current file's ``issued`` date is later than the MANIFEST's
    ``written`` date). A MANIFEST written before plans were recorded says so; one whose recorded plan was issued
    after the results were written says :data:`ISSUED_AFTER` (no run decides under a plan not yet issued)."""
    rec = manifest.get("analysis_plan") if isinstance(manifest, Mapping) else None
    if not isinstance(rec, Mapping) or not rec.get("sha256"):
        return "no analysis plan recorded in this MANIFEST (written before plans were hashed)"
    written = str(manifest.get("written") or "")[:10]
    if written and str(rec.get("issued") or "") > written:
        return (f"{ISSUED_AFTER}: the MANIFEST records plan v{rec.get('version', '?')} issued {rec['issued']}, after "
                f"these results were written ({written}). Fix: re-run under a plan dated no later than the run")
    where = Path(path or rec.get("path") or DEFAULT)
    where = where if where.is_absolute() else paths.ROOT / where
    recorded = f"recorded v{rec.get('version', '?')} sha256 {str(rec['sha256'])[:12]}"
    if not where.is_file():
        return (f"{CHANGED}: the analysis plan this run decided with, {where}, is missing ({recorded}): restore it "
                "or re-run under a plan that exists")
    data = where.read_bytes()
    now = hashlib.sha256(data).hexdigest()
    if now == rec["sha256"]:
        return ""
    issued = ""
    try:
        issued = str(schema.read(where)[0].get("issued") or "")
    except schema.PlanError:
        pass
    when = (f"; the plan was issued {issued}, after these results were written ({written})"
            if issued and written and issued > written else "")
    return f"{CHANGED} ({recorded}, {where.name} now {now[:12]}{when}): re-run to decide under the current plan"
