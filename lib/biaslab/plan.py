"""The analysis plan: the confirmatory claims of every notebook, read from one versioned YAML file.

``analysis_plan.yaml`` (repository root) declares, per notebook, at most three claims, each with its estimand (items,
variable, summary measure and the handling of intercurrent events: unparseable answers, degenerate responders,
position preference), its test, null and sidedness, and the table rows it decides (optionally an
``estimate_label`` naming the estimate in the claim's sentence). The verdict layer
(:mod:`biaslab.stats.verdict`) decides only rows that match a claim; every other tested row is exploratory. Claims
are templates over a run's models and datasets: a family is one notebook x the values of its ``family_by`` columns
(a model, a model pair), so a user's own models get the same plan.

**One error budget** (``budget.shares``): the project's alpha is split across the notebooks with claims before any
run (a Bonferroni split; shares sum to 1); a notebook's share is split equally over the run's families, and Holm
(1979) runs inside each family at ``alpha * share / n_families`` (:func:`biaslab.stats.verdict.budget_decisions`).
A plan whose claims all sit in one notebook may omit the block (that notebook's share is 1).
:meth:`Plan.method_text` states the procedure from these fields, so no report types it.

A run records the plan's sha256 and version in its MANIFEST (:func:`manifest_entry`); :func:`changed_since` says
"plan changed since these results" when the file no longer hashes to what a MANIFEST recorded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import yaml

from . import paths

DEFAULT = paths.ROOT / "analysis_plan.yaml"
MAX_CLAIMS = 3
ESTIMAND_FIELDS = ("items", "variable", "summary", "unparseable", "degenerate", "position")
CLAIM_FIELDS = ("id", "label", "table", "rows", "estimate", "p", "ci", "null_value", "sides", "test", "estimand")
CHANGED = "plan changed since these results"


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

    def family(self, row: Mapping, context: Mapping | None = None) -> str:
        """The family id of one matched row: the notebook and its ``family_by`` values."""
        ctx = {**(context or {}), **row}
        return f"{self.notebook} · " + " · ".join(str(ctx.get(k, "?")) for k in self.family_by)


@dataclass(frozen=True)
class Plan:
    version: str
    alpha: float
    procedure: str
    rationale: str
    notebooks: Mapping[str, Mapping]
    claims: tuple
    path: Path | None = None
    sha256: str = ""
    titles: Mapping = field(default_factory=dict)
    shares: Mapping = field(default_factory=dict)

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
        head = (f"**Analysis plan** v{self.version} (`{self.path.name if self.path else 'analysis_plan.yaml'}`, "
                f"sha256 {self.sha256[:12]}): ")
        claims = self.of(notebook)
        shown = [c for c in self.claims if any(s.get("notebook") == notebook for s in c.shown_in)]
        if not claims:
            lines = [head + "no confirmatory claim; every test here is exploratory (estimate, interval, p; not "
                     "decided)."]
        else:
            lines = [head + f"{len(claims)} confirmatory claim{'s' if len(claims) != 1 else ''}. "
                     + self.method_text(notebook)]
            lines += [f"- `{c.id}`: {c.label}; {c.test}; null {c.null}, {c.sides}." for c in claims]
        lines += [f"- shown here, decided in {c.notebook}: `{c.id}` ({c.label})." for c in shown]
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
        text = (f"Confirmatory ({ids}): this notebook's share of the project's error budget is {share:g} of "
                f"α = {self.alpha:g} (α·share = {self.alpha * share:.4g}), split equally over its families (one per "
                f"{by}); {self.procedure.capitalize()} within each family at α·share / number of families. "
                "Adjusted p (`p_adjusted`) is on the project's scale, compared with α; each claim's adjusted "
                "interval (`ci_adj_low`, `ci_adj_high`) is at the level at which Holm tested it (`ci_level`).")
        if table is not None and "family_kind" in getattr(table, "columns", ()):
            conf = table[table["family_kind"] == "confirmatory"].drop_duplicates("family")
            if len(conf) and {"n_families", "alpha_family", "family_size"} <= set(conf.columns):
                n = int(conf["n_families"].iloc[0])
                sizes = ", ".join(f"{f} ({int(m)} test{'s' if m != 1 else ''}, level {a:.4g})"
                                  for f, m, a in zip(conf["family"], conf["family_size"], conf["alpha_family"]))
                text += f" This run: {n} famil{'ies' if n != 1 else 'y'}: {sizes}."
        return text + " Every other test is exploratory (estimate, interval, p; not decided)."


def _fail(path: Path, where: str, what: str) -> ValueError:
    return ValueError(f"{path}: {where}: {what}. Fix the analysis plan (see the shipped analysis_plan.yaml).")


def _claim(path: Path, nb: str, family_by: tuple, raw: Mapping) -> Claim:
    where = f"notebook {nb}, claim {raw.get('id', '?')!r}"
    missing = [f for f in CLAIM_FIELDS if f not in raw]
    if missing:
        raise _fail(path, where, f"missing field(s) {', '.join(missing)}")
    est = raw["estimand"] or {}
    gone = [f for f in ESTIMAND_FIELDS if f not in est]
    if gone:
        raise _fail(path, where, f"estimand lacks {', '.join(gone)}")
    ci = tuple(raw["ci"] or ())
    if len(ci) not in (0, 2):
        raise _fail(path, where, f"ci must name two columns (low, high) or none, not {list(ci)}")
    return Claim(id=str(raw["id"]), notebook=nb, label=str(raw["label"]), table=str(raw["table"]),
                 rows=dict(raw["rows"] or {}), estimate=str(raw["estimate"]), p=raw["p"], ci=ci, null=raw["null_value"],
                 sides=str(raw["sides"]), test=str(raw["test"]), estimand=dict(est), family_by=family_by,
                 shown_in=tuple(raw.get("shown_in") or ()), estimate_label=str(raw.get("estimate_label") or ""))


def load(path: str | Path | None = None) -> Plan:
    """The plan at ``path`` (default: the repository's ``analysis_plan.yaml``), validated: at most three claims per
    notebook, unique ids, every estimand field present."""
    path = Path(path or DEFAULT).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"analysis plan {path} not found: pass an existing YAML file (the shipped one is "
                                f"{DEFAULT})")
    data = path.read_bytes()
    raw = yaml.safe_load(data) or {}
    for k in ("version", "rationale", "notebooks"):
        if k not in raw:
            raise _fail(path, "top level", f"missing {k!r}")
    procedure = str(raw.get("procedure", "holm"))
    if procedure != "holm":
        raise _fail(path, "procedure", f"only 'holm' is implemented, not {procedure!r}")
    claims, titles, seen = [], {}, set()
    for nb, spec in (raw["notebooks"] or {}).items():
        spec = spec or {}
        titles[nb] = spec.get("title", nb)
        items = spec.get("claims") or []
        if len(items) > MAX_CLAIMS:
            raise _fail(path, f"notebook {nb}", f"{len(items)} claims; at most {MAX_CLAIMS} are confirmatory")
        fb = tuple(spec.get("family_by") or ("model",))
        for c in items:
            claim = _claim(path, str(nb), fb, c)
            if claim.id in seen:
                raise _fail(path, f"notebook {nb}", f"claim id {claim.id!r} used twice")
            seen.add(claim.id)
            claims.append(claim)
    return Plan(version=str(raw["version"]), alpha=float(raw.get("alpha", 0.05)), procedure=procedure,
                rationale=" ".join(str(raw["rationale"]).split()), notebooks=dict(raw["notebooks"]),
                claims=tuple(claims), path=path, sha256=hashlib.sha256(data).hexdigest(), titles=titles,
                shares=_shares(path, raw.get("budget"), {c.notebook for c in claims}))


def _shares(path: Path, budget, with_claims: set) -> dict:
    """``budget.shares``, checked: one share in (0, 1] per notebook with claims, none for another, summing to 1. A
    plan whose claims all sit in one notebook may omit the block (its share is 1)."""
    if budget is None and len(with_claims) <= 1:
        return {nb: 1.0 for nb in with_claims}
    shares = (budget or {}).get("shares") if isinstance(budget, Mapping) else None
    if not isinstance(shares, Mapping):
        raise _fail(path, "budget", "missing budget.shares (alpha's split across the notebooks with claims, "
                                    "e.g. {01_multifactor: 0.2, ...}, summing to 1)")
    try:
        shares = {str(k): float(v) for k, v in shares.items()}
    except (TypeError, ValueError):
        raise _fail(path, "budget.shares", f"every share must be a number, not {dict(shares)}") from None
    if set(shares) != with_claims:
        raise _fail(path, "budget.shares", f"names {sorted(shares)}; it must name exactly the notebooks with claims "
                                           f"{sorted(with_claims)}")
    bad = [k for k, v in shares.items() if not 0 < v <= 1]
    if bad:
        raise _fail(path, "budget.shares", f"share(s) of {bad} outside (0, 1]")
    if abs(sum(shares.values()) - 1) > 1e-9:
        raise _fail(path, "budget.shares", f"shares sum to {sum(shares.values()):g}, not 1")
    return shares


_ACTIVE: list[Plan] = []


def use(path: str | Path | None = None) -> Plan:
    """Load the plan at ``path`` and make it the one the verdict layer reads in this process (a notebook's
    ``analysis_plan`` parameter)."""
    _ACTIVE[:] = [load(path)]
    return _ACTIVE[0]


def show(path: str | Path | None, notebook: str) -> Plan:
    """:func:`use`, and display ``notebook``'s part of the plan (the cell the report puts above its findings)."""
    from IPython.display import Markdown, display
    plan = use(path)
    display(Markdown(plan.render(notebook)))
    return plan


def active() -> Plan:
    """The plan in use (the repository's file unless :func:`use` chose another)."""
    if not _ACTIVE:
        _ACTIVE.append(load())
    return _ACTIVE[0]


def manifest_entry(path: str | Path | None = None) -> dict:
    """``{"path", "sha256", "version"}`` for a MANIFEST."""
    p = load(path)
    where = next((p.path.relative_to(r) for r in (paths.ROOT, DEFAULT.parent) if p.path.is_relative_to(r)),
                 p.path)           # a path in the repository is recorded relative to it (no machine path)
    return {"path": str(where), "sha256": p.sha256, "version": p.version}


def changed_since(manifest: Mapping, path: str | Path | None = None) -> str:
    """"plan changed since these results (…)" when the plan file at ``path`` (default: the one the MANIFEST names,
    else the repository's) no longer hashes to the MANIFEST's ``analysis_plan.sha256``; "" when it does. A MANIFEST
    written before plans were recorded says so."""
    rec = manifest.get("analysis_plan") if isinstance(manifest, Mapping) else None
    if not isinstance(rec, Mapping) or not rec.get("sha256"):
        return "no analysis plan recorded in this MANIFEST (written before plans were hashed)"
    where = Path(path or rec.get("path") or DEFAULT)
    where = where if where.is_absolute() else paths.ROOT / where
    if not where.is_file():
        where = DEFAULT
    now = hashlib.sha256(where.read_bytes()).hexdigest()
    if now == rec["sha256"]:
        return ""
    return (f"{CHANGED} (recorded v{rec.get('version', '?')} sha256 {str(rec['sha256'])[:12]}, {where.name} now "
            f"{now[:12]}): re-run to decide under the current plan")
