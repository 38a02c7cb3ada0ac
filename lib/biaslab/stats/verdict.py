"""The verdict layer: from a table of effects to the decision columns that sentences may use.

**A plan decides.** Only rows that match a confirmatory claim of the analysis plan (:mod:`biaslab.plan`) are
decided, by the plan's **graph** (Bretz et al. 2009; Holm 1979 for a plan without one; family-wise error under any
dependence) within the claim's family at its share of the one error budget (:func:`budget_decisions`), as
"distinguishable" or "not distinguishable", and under a graphical plan only where the test has 80 % power for the
claim's SESOI at the level it was tested (:func:`plan_family`, :func:`_plan`): an instance without that power at its
planned level is "descriptive (…)" (not in the graph), one the graph leaves at level 0 "not reached (…)", one below
0.8 at the level it reached "not decided (…)". Every other tested row
is **exploratory**: it keeps its estimate, interval and p, with a Benjamini-Hochberg p (``p_adjusted``, screening
only), and its verdict says "exploratory"; a row another notebook's claim decides (the same test shown twice) says
"exploratory (decided in <notebook>, claim <id>)", so one test has one verdict everywhere.

Columns written (cite this module, ``biaslab.stats.verdict``):

* ``claim``: the plan's claim id of a confirmatory row ("" otherwise);
* ``family``, ``family_kind``, ``family_size``: the claim's family (confirmatory) or the table's exploratory screen;
* ``n_families``, ``share``, ``alpha_family``: a confirmatory family's budget (the notebook's share, the number of
  its families (a graphical plan: those its profile lists), and the level ``alpha * share / n_families`` at which
  the graph runs inside the family);
* ``sesoi``, ``planned_level``, ``tested_level``, ``power``, ``level_for_power``: the claim's smallest effect of
  interest; the level the instance is planned at; the level the graph tested it at (0: not reached); its test's
  power for the SESOI there (a descriptive instance: at its planned level), from the plan's design for the run's
  profile; the smallest level at which that power reaches 0.8;
* ``p_adjusted``, ``p_adjust_method``: confirmatory: the graph's adjusted p within the family on the project's scale,
  ``min(1, p_graph * n_families / share)``, compared with the plan's one alpha; exploratory: BH via
  :func:`biaslab.stats.multiplicity.adjust`; an untested row is left out of its family;
* ``ci_level``, ``ci_adj_low``, ``ci_adj_high``, ``ci_adj_note``: a confirmatory row's interval at the level at which
  the graph tested it (:func:`budget_decisions`), dual to the claim's t/z test (estimate, standard error, df; a table
  carries ``se`` or the test statistic, and ``df``), so it excludes the null exactly when the verdict is
  "distinguishable";
  where no dual interval exists (a bootstrap, permutation or chi-square p) the bounds are empty and the note says why;
* ``excludes_null``: the interval excludes the null (NA without an interval or a null);
* ``significant``: confirmatory: rejected by the graph (``p_adjusted <= alpha``; NA for a descriptive, not reached
  or not decided row); exploratory: ``p_adjusted < alpha``, a screen, not a decision;
* ``bf_direction``: "H1"/"H0" only when every Bayes factor of the stated prior range agrees (beyond 3 or below
  1/3; Lee & Wagenmakers 2013), "inconclusive" otherwise, NA without a prior range;
* ``responder_status``, ``comparable``, ``comparability``: as judged for this metric ("informative", "degenerate:
  <why>", or "not measurable: <why>" where the instrument failed the validity checks of the plan's scoring rule,
  :mod:`biaslab.stats.validity`);
* ``verdict``: "distinguishable" / "not distinguishable" (confirmatory rows only), "descriptive (…)", "not reached
  (…)", "not decided (…)", "exploratory" (or "exploratory (decided in …)"), "undefined (<why>)", "not estimable
  (no variation in <n> items)", "not tested (<why>)" or "not measurable (<why>)" (never decided, ranked or compared).

**No certainty from zero variance.** A row whose test is undefined because its variance is estimated as 0 carries
"not estimable (no variation in n items)" in a method column (:func:`biaslab.stats.clustered.without_variance`, the
one place every test's p and interval pass through for that case); such a row has no p and no interval, and this
layer makes that note its verdict (:func:`not_estimable`), so it is neither decided nor screened: ``significant`` is
set only from a p of a test that has a size.

A confirmatory row is decided on the claim's own columns (its ``estimate``, ``p`` and ``ci`` in the plan: e.g. the
t-test on the mean where the table's lead test is a Wilcoxon), so the decision, the interval and the Bayes factor are
about one estimand. Rows are never dropped. :func:`decide` derives the columns for one table, :func:`decide_tables`
for several whose rows share a family; both are pure and idempotent (old verdict columns are re-derived from the
inference columns).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import multiplicity
from .clustered import NOT_ESTIMABLE
from .validity import NOT_MEASURABLE

log = logging.getLogger(__name__)

#: a Bayes factor beyond these is at least "moderate" evidence (Lee & Wagenmakers 2013, Table 1)
BF_H1, BF_H0 = 3.0, 1 / 3
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
INTERVAL_ONLY = "none: 95 % interval, not adjusted"
DECIDED_ELSEWHERE = "none: unadjusted p shown; the decision is another notebook's claim"

DISTINGUISHABLE, NOT_DISTINGUISHABLE = "distinguishable", "not distinguishable"

#: the columns this layer writes (in this order, after the table's own columns)
VERDICT_COLUMNS = ["claim", "family", "family_kind", "family_size", "n_families", "share", "alpha_family", "sesoi",
                   "planned_level", "tested_level", "power", "level_for_power", "p_adjusted", "p_adjust_method",
                   "ci_level", "ci_adj_low", "ci_adj_high", "ci_adj_note", "excludes_null", "significant",
                   "bf_direction", "responder_status", "comparable", "comparability", "verdict"]
BUDGET = "Holm within the family, at its share of the error budget (p on the project's scale)"
GRAPH = "the plan's graph within the family, at its share of the error budget (p on the project's scale)"


@dataclass(frozen=True)
class Effects:
    """How one table states its effects (for every row; a plan's claim may name other columns for its rows). Each
    name may be a tuple of alternatives (the first column present is used), so a table before and after the
    inference columns (``ci_low`` vs ``ci95_low``, ``p_value`` vs ``lead_p``) reads the same.

    ``null``: a number, or column name(s) holding it (``null_value``), optionally ending in a number used when no
    column is present. ``bf``: BF10 column(s); ``log10_bf``: log10 BF10 column(s), used when no BF10 column is
    present. ``undefined``: a function of the table returning, per row, a reason the estimate is undefined ("" when
    it is defined); an estimate that is NaN is always undefined. ``pair``: the two model columns of a comparison table
    (responder status then names either model). ``test``: columns identifying one test where a table repeats a
    test's p on several rows (a factor's Wald test on each of its levels): the test counts once in its family.
    ``screen_by``: columns whose values split the table's exploratory rows into separate BH screens. ``se``,
    ``stat``, ``df``: the standard error, test statistic and degrees of freedom of a t/z test (the first column
    present; the standard error is derived from the statistic where the table has none; ``df`` absent or infinite:
    a z test), read for a confirmatory row's adjusted interval."""
    estimate: str | tuple
    p: str | tuple | None = ("p_value",)
    ci: tuple = (("ci_low", "ci_high"), ("ci95_low", "ci95_high"))
    null: float | str | tuple | None = ("null_value",)
    bf: str | tuple | None = ("bf10",)
    log10_bf: str | tuple | None = ("log10_bf10",)
    undefined: Callable | None = None
    by: tuple = ("model",)
    pair: tuple | None = None
    test: tuple | None = None
    screen_by: tuple = ()
    se: tuple = ("se", "se_cluster")
    stat: tuple = ("statistic", "t")
    df: tuple = ("df",)


def _first(df: pd.DataFrame, names) -> str | None:
    if names is None:
        return None
    for n in ((names,) if isinstance(names, str) else names):
        if n in df.columns:
            return n
    return None


def _col(df: pd.DataFrame, names, default=np.nan) -> pd.Series:
    c = _first(df, names)
    return pd.to_numeric(df[c], errors="coerce") if c else pd.Series(default, index=df.index, dtype=float)


def _null(df: pd.DataFrame, names) -> pd.Series:
    """The null value per row: the first of ``names`` that is a column of ``df``, or a number (a constant, e.g. the
    fallback after ``"null_value"``); NaN when none applies."""
    if names is None:
        return pd.Series(np.nan, index=df.index)
    for n in ((names,) if isinstance(names, (str, int, float)) else names):
        if isinstance(n, str) and n in df.columns:
            return pd.to_numeric(df[n], errors="coerce")
        if isinstance(n, (int, float)) and not isinstance(n, bool):
            return pd.Series(float(n), index=df.index)
    return pd.Series(np.nan, index=df.index)


#: the columns a table states why a row has no test or no interval in (the first note found is the row's)
NOTE_COLUMNS = ("p_method", "ci_method", "method", "test", "estimator", "undefined_reason")
#: verdicts of rows that are neither decided nor screened
UNTESTED = ("not tested", "undefined", NOT_ESTIMABLE)
_NOT_ESTIMABLE = re.compile("(" + NOT_ESTIMABLE + r" \(no variation [^)]+\))")


def not_estimable(df: pd.DataFrame) -> pd.Series:
    """Per row: the "not estimable (no variation in n items)" its method columns (:data:`NOTE_COLUMNS`) state, else
    ""."""
    out = pd.Series("", index=df.index, dtype=object)
    for c in (c for c in NOTE_COLUMNS if c in df.columns):
        found = df[c].astype(str).str.extract(_NOT_ESTIMABLE, expand=False).fillna("")
        out = out.where(out != "", found)
    return out


def interval_columns(df: pd.DataFrame, spec: Effects) -> tuple[str, str] | None:
    for lo, hi in spec.ci:
        if lo in df.columns and hi in df.columns:
            return lo, hi
    return None


def excludes_null(lo, hi, null) -> pd.Series:
    """Per row: True when [lo, hi] excludes ``null``, False when it contains it, NA when any of the three is
    missing."""
    lo, hi, null = (pd.Series(np.asarray(x, dtype=float)) for x in np.broadcast_arrays(lo, hi, null))
    ok = lo.notna() & hi.notna() & null.notna()
    out = pd.Series(pd.NA, index=lo.index, dtype="boolean")
    out[ok] = ~((lo[ok] <= null[ok]) & (null[ok] <= hi[ok]))
    return out


def bf_direction(bf10, bf_min=None, bf_max=None) -> pd.Series:
    """"H1" when the whole prior range lies above 3, "H0" when it lies below 1/3, else "inconclusive"; NA without a
    BF10 or without its range (``bf_min``/``bf_max`` None or NaN)."""
    bf10 = pd.Series(np.asarray(bf10, dtype=float))
    lo = pd.Series(np.asarray(bf_min if bf_min is not None else np.full(len(bf10), np.nan), dtype=float))
    hi = pd.Series(np.asarray(bf_max if bf_max is not None else np.full(len(bf10), np.nan), dtype=float))
    out = pd.Series(pd.NA, index=bf10.index, dtype="object")
    ranged = bf10.notna() & lo.notna() & hi.notna()
    out[ranged] = "inconclusive"
    out[ranged & (lo > BF_H1)] = "H1"
    out[ranged & (hi < BF_H0)] = "H0"
    return out


def _status_text(row: Mapping) -> str:
    """One responder row (``degenerate``, ``reasons``, optional ``judged``/``status``) as a status string."""
    if isinstance(row.get("status"), str) and row["status"]:
        return row["status"]
    reasons = row.get("reasons") if isinstance(row.get("reasons"), str) else ""
    deg = str(row.get("degenerate")).lower() in ("true", "1")
    if deg:
        return f"degenerate: {reasons}" if reasons else "degenerate"
    return reasons if reasons.startswith("not judged") else "informative"


def excluded(status) -> bool:
    """A responder status that keeps a model's rows from being decided, ranked or compared: degenerate, or not
    measurable (its instrument failed the plan's scoring rule)."""
    return str(status).startswith(("degenerate", NOT_MEASURABLE))


def responder_status(check: pd.DataFrame | None, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """A responder table (:func:`biaslab.stats.responders.responder_check` or ``probability_check``, already
    restricted to the rows that judge one metric) as ``by`` + ``responder_status``: several rows of one key (e.g.
    k = 3 and k = 5 prompts) combine to "not measurable" or else "degenerate" when any is, naming which."""
    by = list(by)
    if check is None or check.empty or not set(by) <= set(check.columns):
        return pd.DataFrame(columns=by + ["responder_status"])
    rows = []
    for key, part in check.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        extra = [c for c in part.columns if c not in by and c in ("k", "cot", "dataset", "task")]
        # the language an instrument was judged in alone (MBBQ's) is named where the rows' languages differ
        lang = "language" not in by and "language" in part and part["language"].nunique() > 1
        parts = []
        for r in part.to_dict("records"):
            t = _status_text(r)
            if t.startswith(NOT_MEASURABLE):
                who = f"language = {r['language']}: " if lang and pd.notna(r["language"]) else ""
            else:
                who = ", ".join(f"{c} = {r[c]}" for c in extra) + ": " if extra and len(part) > 1 else ""
            parts.append((who, t))
        rows.append({**dict(zip(by, key)), "responder_status": _combined(parts).rstrip(": ")})
    return pd.DataFrame(rows)


def _combined(parts: list[tuple[str, str]]) -> str:
    """Several responder statuses as one, each ``(prefix naming whose it is, status)``: "not measurable" when any
    is, else "degenerate" when any is (naming which), the first "not judged" when all are, else "informative"."""
    unmeasured = [who + s.removeprefix(NOT_MEASURABLE).lstrip(": ") for who, s in parts
                  if s.startswith(NOT_MEASURABLE)]
    # a bare "degenerate" keeps its word where a prefix names whose it is ("A: degenerate")
    bad = [who + (s.removeprefix("degenerate: ").removeprefix("degenerate") or who and "degenerate")
           for who, s in parts if s.startswith("degenerate")]
    if unmeasured:
        return f"{NOT_MEASURABLE}: " + "; ".join(unmeasured)
    if bad:
        return "degenerate: " + "; ".join(bad)
    if parts and all(s.startswith("not judged") for _, s in parts):
        return parts[0][1]
    return "informative"


def metric_status(check: pd.DataFrame | None, metric: str, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """:func:`responder_status` of the rows of a per-metric responder table (column ``metric``) that judge
    ``metric``; empty when none do."""
    if check is None or check.empty or "metric" not in check:
        return pd.DataFrame(columns=list(by) + ["responder_status"])
    return responder_status(check[check["metric"] == metric], by)


def _attach_status(df: pd.DataFrame, status: pd.DataFrame | str | None, spec: Effects) -> pd.Series:
    """responder_status per row of ``df``: a constant string, or looked up by ``spec.by`` (for a comparison table,
    both models of ``spec.pair``: degenerate when either is)."""
    if status is None:
        return pd.Series("not judged: no responder check for this metric", index=df.index)
    if isinstance(status, str):
        return pd.Series(status, index=df.index)
    by = [c for c in status.columns if c != "responder_status"]
    look = {tuple(k if isinstance(k, tuple) else (k,)): s
            for k, s in zip(status[by].itertuples(index=False, name=None), status["responder_status"])}

    def one(row, model_col):
        key = tuple(row[model_col] if c == "model" else row.get(c) for c in by)
        return look.get(key, "not judged: no responder row for this model")

    out = [_combined([(f"{row[c]}: ", one(row, c)) for c in spec.pair]) if spec.pair else one(row, "model")
           for _, row in df.iterrows()]
    return pd.Series(out, index=df.index, dtype=object)


def _claims(out: pd.DataFrame, table: str, notebook: str | None, context: Mapping | None, plan) -> tuple:
    """Per row: the claim id ("" for none), its family, and the other notebook's claim that decides it ("")."""
    claim, family, elsewhere = (pd.Series("", index=out.index, dtype=object) for _ in range(3))
    if not notebook:
        return claim, family, elsewhere, {}
    found = {}
    for c in plan.of(notebook, table):
        m = c.mask(out, context) & (claim == "")
        claim[m] = c.id
        family[m] = [c.family(r, context) for r in out.loc[m].to_dict("records")]
        found[c.id] = c
        if not m.any() and not c.about_another_run(out.columns, context):
            # a deviation from the plan, never silence: shown in the notebook and a MANIFEST note
            log.warning("deviation from the analysis plan: claim %s (%s) matched no row of %s (rows %s%s); it is "
                        "not decided in this run", c.id, notebook, table, dict(c.rows),
                        f", {dict(context)}" if context else "")
    for c, rows in plan.shown(notebook, table):
        m = c.mask(out, context, rows) & (claim == "") & (elsewhere == "")
        elsewhere[m] = f"decided in {c.notebook}, claim {c.id}"
    return claim, family, elsewhere, found


def _base(df: pd.DataFrame, spec: Effects, table: str, responders, comparable, notebook, context,
          plan) -> pd.DataFrame:
    """Every verdict column except the adjusted p and what depends on it; ``_p`` holds the p that enters its family
    (NaN for rows that are not tested)."""
    out = df.drop(columns=[c for c in VERDICT_COLUMNS if c in df.columns]).copy()
    est = _col(out, spec.estimate)
    p = _col(out, spec.p)
    lo, hi = (_col(out, c) for c in (interval_columns(out, spec) or (None, None)))      # none: NaN
    null = _null(out, spec.null)
    claim, family, elsewhere, found = _claims(out, table, notebook, context, plan)
    design = pd.Series(None, index=out.index, dtype=object)
    for cid, c in found.items():           # a claim is decided on its own columns (one estimand per claim)
        m = claim == cid
        est[m] = _col(out, c.estimate)[m]
        p[m] = _col(out, c.p)[m] if c.p else np.nan
        if c.ci:
            lo[m], hi[m] = _col(out, c.ci[0])[m], _col(out, c.ci[1])[m]
        for i, row in zip(out.index[m], out.loc[m].to_dict("records")):     # each instance's own null
            v = c.instance_of(row, context)["null_value"]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                null[i] = float(v)
            if plan.graphical:                                               # its planning design
                label = family[i].split(" · ", 1)[1] if " · " in family[i] else family[i]
                design[i] = c.design_of(c.key_of(row, context), plan.profile, label)
    conf = claim != ""
    screen = (out[list(spec.screen_by)].astype(str).agg(" · ".join, axis=1) + " · "
              if spec.screen_by and set(spec.screen_by) <= set(out.columns) else "")
    out["claim"] = claim
    out["family"] = family.where(conf, (f"{notebook} · " if notebook else "") + screen + f"{table}: exploratory")
    out.loc[elsewhere != "", "family"] = elsewhere[elsewhere != ""]
    out["family_kind"] = np.where(conf, CONFIRMATORY, EXPLORATORY)
    out["excludes_null"] = excludes_null(lo, hi, null).to_numpy()
    bf_c = _first(out, spec.bf)
    bf = (_col(out, bf_c) if bf_c else 10 ** _col(out, spec.log10_bf))
    out["bf_direction"] = bf_direction(bf, _col(out, ("bf10_min",)), _col(out, ("bf10_max",))).to_numpy()
    out["responder_status"] = _attach_status(out, responders, spec).to_numpy()
    if isinstance(comparable, pd.DataFrame):
        out["comparable"] = comparable["comparable"].to_numpy()
        out["comparability"] = comparable["comparability"].to_numpy()
    else:                                   # None: every row comparable
        out["comparable"], out["comparability"] = comparable is None or bool(comparable), ""
    why_undefined = (pd.Series(spec.undefined(out), index=out.index).fillna("").astype(str) if spec.undefined
                     else pd.Series("", index=out.index))
    why_undefined = why_undefined.where(est.notna() | (why_undefined != ""), "estimate not computable")
    verdict = pd.Series("", index=out.index, dtype=object)
    nm = out["responder_status"].astype(str).str.startswith(NOT_MEASURABLE)
    verdict[nm] = f"{NOT_MEASURABLE} (" + out.loc[nm, "responder_status"].str.removeprefix(NOT_MEASURABLE).str.lstrip(
        ": ") + ")"
    deg = out["responder_status"].astype(str).str.startswith("degenerate")
    verdict[deg] = "not tested (degenerate responder: " + out.loc[deg, "responder_status"].str.removeprefix(
        "degenerate: ") + ")"
    nc = (verdict == "") & ~out["comparable"].astype(bool)
    verdict[nc] = "not tested (not comparable: " + out.loc[nc, "comparability"].astype(str) + ")"
    und = (verdict == "") & (why_undefined != "")
    verdict[und] = "undefined (" + why_undefined[und] + ")"
    flat = not_estimable(out)
    ne = (verdict == "") & p.isna() & (flat != "")      # no variance: no test, so no decision and no screen
    verdict[ne] = flat[ne]
    has_ci = lo.notna() & hi.notna()
    none = (verdict == "") & p.isna() & ~(has_ci & null.notna())
    verdict[none] = ("not tested (the test could not be computed here)" if _first(out, spec.p)
                     else "not tested (no test and no interval against a null in this table)")
    out["_p"] = p.where(verdict == "")
    out["_test"] = (out[list(spec.test)].astype(str).agg("|".join, axis=1) if spec.test
                    else pd.Series(out.index.astype(str), index=out.index))
    out["_interval_only"] = (verdict == "") & p.isna()
    out["_elsewhere"] = elsewhere
    out["_est"], out["_null"] = est, null
    se, stat = _col(out, spec.se), _col(out, spec.stat)
    out["_se"] = se.where(se.notna(), ((est - null) / stat).abs())
    out["_df"] = _col(out, spec.df, np.inf).fillna(np.inf)
    out["_sides"] = claim.map({cid: c.sides for cid, c in found.items()}).fillna("")
    out["_design"] = design
    out["sesoi"] = claim.map({cid: c.sesoi for cid, c in found.items()}).astype(float)
    out["_testname"] = claim.map({cid: c.test for cid, c in found.items()}).fillna("")
    out["verdict"] = verdict
    return out


def budget_decisions(rows: pd.DataFrame, alpha: float, shares: Mapping[str, float],
                     n_families: Mapping[str, int] | None = None,
                     graphs: Mapping[str, tuple] | None = None) -> pd.DataFrame:
    """The project's error budget over a table of confirmatory claim rows (a run's, or a simulation's): the one
    place it is applied.

    ``rows``: one per claim instance in the graph with ``notebook``, ``family``, ``p`` (NaN: not tested, so not in
    the graph), optionally ``test`` (rows with one key are one test, counted once), ``claim`` (the instance's claim:
    its node in the notebook's graph) and ``level_for_power`` (the smallest level at which its test has 80 % power
    for its smallest effect of interest: below it the instance is not rejected, :func:`biaslab.stats.multiplicity.
    graphical`'s ``min_level``). ``shares``: each notebook's share of ``alpha`` (the plan's ``budget.shares``,
    summing to 1); ``n_families``: per notebook, the number of its families (default: the distinct families of its
    rows; per ``replicate`` where rows carry one, a simulation's replications, each with its own family ids);
    ``graphs``: per notebook, the plan's claim-level graph ``(weights, then)`` (:meth:`biaslab.plan.Plan.graph`),
    expanded over each family's instances (:func:`biaslab.stats.multiplicity.expand_graph`); a notebook without
    one is decided by Holm (:func:`biaslab.stats.multiplicity.holm_graph`).

    Bonferroni across families, the graph within: a family's level is ``alpha_family = alpha * share /
    n_families``; the graphical procedure (Bretz et al. 2009) runs at that level, giving ``tested_level`` (the
    level each row was tested at; 0: never reached) and ``rejected``; its adjusted p is put on the project's scale,
    ``p_adjusted = min(1, p_graph * n_families / share)``, so ``rejected`` is ``p_adjusted <= alpha``. The
    familywise error over all rows is at most ``alpha`` (the shares sum to 1). Returns ``rows`` with ``share``,
    ``n_families``, ``alpha_family``, ``family_size``, ``p_adjusted``, ``tested_level``, ``rejected``."""
    out = rows.copy()
    for c in ("notebook", "family", "p"):
        if c not in out:
            raise KeyError(f"budget_decisions: rows lack the column {c!r} (need notebook, family, p)")
    graphs = graphs or {}
    if graphs and "claim" not in out:
        raise KeyError("budget_decisions: rows lack the column 'claim' (a graph's nodes are claims)")
    by = ["replicate", "notebook"] if "replicate" in out else ["notebook"]
    seen = out.groupby(by)["family"].nunique().groupby(level="notebook").max().to_dict()
    nf = {nb: int((n_families or {}).get(nb, k)) for nb, k in seen.items()}
    short = {nb: (nf[nb], k) for nb, k in seen.items() if nf[nb] < k}
    if short:
        raise ValueError(f"budget_decisions: n_families below the families present (given, present): {short}")
    missing = sorted(set(seen) - set(shares))
    if missing:
        raise KeyError(f"budget_decisions: no budget share for notebook(s) {missing}: add them to budget.shares")
    out["share"] = out["notebook"].map(lambda nb: float(shares[nb]))
    out["n_families"] = out["notebook"].map(nf).astype(int)
    out["alpha_family"] = alpha * out["share"] / out["n_families"]
    key = out["test"].astype(str) if "test" in out else pd.Series(out.index.astype(str), index=out.index)
    t = out.assign(_key=key)[out["p"].notna()].drop_duplicates("_key")     # a test repeated on rows counts once
    need = (pd.to_numeric(t["level_for_power"], errors="coerce").fillna(0.0).to_numpy(float)
            if "level_for_power" in t else np.zeros(len(t)))
    level, p_graph, rejected = np.zeros(len(t)), np.ones(len(t)), np.zeros(len(t), dtype=bool)
    fam, nbs, ps = t["family"].to_numpy(), t["notebook"].to_numpy(), t["p"].to_numpy(float)
    cl = t["claim"].to_numpy() if "claim" in t else np.zeros(len(t))
    a_f = t["alpha_family"].to_numpy(float)
    order = np.argsort(fam, kind="stable")
    cuts = np.flatnonzero(fam[order][1:] != fam[order][:-1]) + 1
    groups = np.split(order, cuts) if len(order) else []
    expanded: dict = {}
    one = np.array([ix[0] for ix in groups if len(ix) == 1], dtype=int)
    if len(one):                                    # one instance in its family: its claim's whole weight, at once
        for nb, c in set(zip(nbs[one], cl[one])):
            expanded[(nb, (c,) if nb in graphs else 1)] = (multiplicity.expand_graph((c,), *graphs[nb])
                                                           if nb in graphs else multiplicity.holm_graph(1))
        w = np.array([expanded[(nb, (c,) if nb in graphs else 1)][0][0] for nb, c in zip(nbs[one], cl[one])])
        lv = w * a_f[one]
        ok = (w > 0) & (lv >= need[one] * (1 - 1e-12))
        level[one], rejected[one] = lv, ok & (ps[one] <= lv * (1 + 1e-12))
        p_graph[one] = np.where(ok, np.minimum(1.0, ps[one] / np.where(w > 0, w, 1.0)), 1.0)
    for ix in groups:
        if len(ix) == 1:
            continue
        nb = nbs[ix[0]]
        claims = tuple(cl[ix]) if nb in graphs else len(ix)
        if (nb, claims) not in expanded:                    # one graph per notebook and set of instances
            expanded[(nb, claims)] = (multiplicity.expand_graph(claims, *graphs[nb]) if nb in graphs
                                      else multiplicity.holm_graph(len(ix)))
        w, g = expanded[(nb, claims)]
        r = multiplicity.graphical(ps[ix], w, g, a_f[ix[0]], need[ix])
        level[ix], p_graph[ix], rejected[ix] = r["level"], r["p_adjusted"], r["rejected"]
    t["tested_level"], t["rejected"] = level, rejected
    t["p_adjusted"] = np.minimum(1.0, p_graph * t["n_families"] / t["share"])
    by_key = t.set_index("_key")
    for c in ("p_adjusted", "tested_level"):
        out[c] = key.map(by_key[c]).where(out["p"].notna())
    out["family_size"] = out["family"].map(t.groupby("family").size()).fillna(0).astype(int)
    out["rejected"] = key.map(by_key["rejected"]).where(out["p"].notna())
    return out


def plan_family(claims: Sequence[str], designs: Sequence[Mapping | None], sesoi: Sequence[float],
                sides: Sequence[str], graph: tuple, alpha_family: float, target: float = 0.8) -> pd.DataFrame:
    """Which instances of one family enter the graph, from their planning designs alone (no outcome enters).

    Per instance (its ``claims``, ``designs`` from the plan, ``sesoi``, ``sides``): the **planned level**, the level
    it is tested at once the claims that pass it α (its predecessors in ``graph = (weights, then)``, any path) are
    rejected and its own claim's other instances are not: ``alpha_family`` times its weight in the expanded graph
    (:func:`biaslab.stats.multiplicity.expand_graph`) after the predecessors' instances leave it; its **power** there
    for its SESOI (:func:`biaslab.stats.power.design_power`). Instances without a design are descriptive; then,
    while some instance has power below ``target``, the least powered one (with any tied with it) becomes
    descriptive and the graph is re-expanded without it (the others' levels can only grow). Returns per instance
    ``descriptive``, ``planned_level``, ``planned_power`` (at the level it had when it left, for a descriptive one) and
    ``level_for_power`` (:func:`biaslab.stats.power.level_for_power`)."""
    from . import power as W
    weights, then = graph
    n = len(claims)
    level, pw, need = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    live = [i for i in range(n) if designs[i] is not None]
    preds = {c: _ancestors(c, then) for c in weights}
    for i in live:
        need[i] = W.level_for_power(designs[i], sesoi[i], sides[i], target)
    while live:
        cl = [claims[i] for i in live]
        w, g = multiplicity.expand_graph(cl, weights, then)
        for a, i in enumerate(live):
            wi, gi = w, g
            for b, j in enumerate(live):
                if claims[j] in preds[claims[i]]:
                    wi, gi = multiplicity.remove(wi, gi, b)
            level[i] = wi[a] * alpha_family
            pw[i] = W.design_power(designs[i], sesoi[i], level[i], sides[i]) if level[i] > 0 else 0.0
        low = [i for i in live if not pw[i] >= target]
        if not low:
            break
        least = min(pw[i] for i in low)                     # the least powered leave (ties together: symmetric
        live = [i for i in live if not pw[i] <= least + 1e-12]      # instances share one fate)
    return pd.DataFrame({"descriptive": [i not in live for i in range(n)], "planned_level": level,
                         "planned_power": pw, "level_for_power": need})


def _ancestors(claim: str, then: Mapping) -> set:
    """The claims with a path of ``then`` edges (fraction > 0) to ``claim`` (itself excluded)."""
    found, todo = set(), [claim]
    while todo:
        c = todo.pop()
        for src, targets in then.items():
            if (targets or {}).get(c, 0) > 0 and src not in found and src != claim:
                found.add(src)
                todo.append(src)
    return found


def dual_interval(est, se, df, level, sides: str = "two-sided") -> tuple[np.ndarray, np.ndarray]:
    """The interval at confidence ``1 - level`` dual to a t test (``df`` finite) or z test (``df`` infinite) of the
    estimate with standard error ``se``: ``est -/+ t_{1-level/2, df} * se`` two-sided; one-sided "above" the null:
    ``[est - t_{1-level, df} * se, inf)``, "below": ``(-inf, est + t_{1-level, df} * se]``."""
    from scipy import stats
    est, se, df, level = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(est, se, df, level))
    one = sides.startswith("one-sided")
    q = stats.t.ppf(1 - level / (1 if one else 2), df)
    lo, hi = est - q * se, est + q * se
    if one and "below" in sides:
        lo = np.full(est.shape, -np.inf)
    elif one:
        hi = np.full(est.shape, np.inf)
    return lo, hi


def _dual_p(est, null, se, df, sides: str) -> np.ndarray:
    from scipy import stats
    z = (np.asarray(est, float) - np.asarray(null, float)) / np.asarray(se, float)
    if sides.startswith("one-sided"):
        return stats.t.sf(-z if "below" in sides else z, df)
    return 2 * stats.t.sf(np.abs(z), df)


def _adjusted_intervals(f: pd.DataFrame) -> None:
    """ci_level, ci_adj_low, ci_adj_high, ci_adj_note for the confirmatory rows of ``f`` (in place): the interval
    dual to the row's t/z test at the level the graph tested it at, where the row's p is that test's (checked: the p
    recomputed from estimate, standard error and df equals it); otherwise no interval and the reason."""
    for c in ("ci_level", "ci_adj_low", "ci_adj_high"):
        f[c] = np.nan
    f["ci_adj_note"] = ""
    conf = (f["family_kind"] == CONFIRMATORY) & (f["_elsewhere"] == "")
    tested = conf & (f["_level"] > 0)
    f.loc[conf & ~tested, "ci_adj_note"] = np.where(
        f.loc[conf & ~tested, "_status"].str.startswith("descriptive"), "descriptive: no adjusted interval",
        np.where(f.loc[conf & ~tested, "_level"] == 0, "not reached: no adjusted interval",
                 "not tested: no adjusted interval"))
    f.loc[tested, "ci_level"] = 1 - f.loc[tested, "_level"]
    for sides, g in f[tested].groupby("_sides"):
        has = g["_se"].notna() & (g["_se"] > 0) & g["_est"].notna() & g["_null"].notna()
        p_dual = pd.Series(np.nan, index=g.index)
        p_dual[has] = _dual_p(g.loc[has, "_est"], g.loc[has, "_null"], g.loc[has, "_se"], g.loc[has, "_df"], sides)
        dual = has & np.isclose(p_dual, g["_p"], rtol=1e-6, atol=1e-12)
        lo, hi = dual_interval(g.loc[dual, "_est"], g.loc[dual, "_se"], g.loc[dual, "_df"], g.loc[dual, "_level"],
                               sides)
        f.loc[g.index[dual], "ci_adj_low"], f.loc[g.index[dual], "ci_adj_high"] = lo, hi
        f.loc[g.index[dual], "ci_adj_note"] = np.where(np.isfinite(g.loc[dual, "_df"]), "t interval dual to the test",
                                                       "z interval dual to the test")
        f.loc[g.index[~has], "ci_adj_note"] = ("no dual interval computed for this test (not a t/z test with a "
                                               "standard error in the table): " + g.loc[~has, "_testname"])
        f.loc[g.index[has & ~dual], "ci_adj_note"] = ("no dual interval computed: this row's p is not the t/z test's "
                                                      "on its estimate (a bootstrap, exact or other p): "
                                                      + g.loc[has & ~dual, "_testname"])


def _adjust(frames: list[pd.DataFrame], alpha: float, plan, n_families: Mapping[str, int] | None) -> None:
    """p_adjusted, p_adjust_method, family_size, the budget columns and the planning columns in place, each family
    adjusted over all ``frames`` together (a claim's family by :func:`budget_decisions`, after :func:`_plan` took
    the descriptive instances out; an exploratory screen by Benjamini-Hochberg; none for a test decided
    elsewhere)."""
    cols = ["family", "family_kind", "_p", "_test", "_elsewhere", "claim", "_design", "sesoi", "_sides"]
    pool = pd.concat([f[cols].assign(_t=i, _i=f.index) for i, f in enumerate(frames)], ignore_index=True)
    pool["p_adjusted"], pool["family_size"], pool["p_adjust_method"], pool["_status"] = np.nan, 0, "", ""
    for c in ("n_families", "share", "alpha_family", "_level", "planned_level", "power", "level_for_power"):
        pool[c] = np.nan
    pool["_key"] = pool["_t"].astype(str) + "#" + pool["_test"]
    conf = (pool["_elsewhere"] == "") & (pool["family_kind"] == CONFIRMATORY)
    if conf.any():
        rows = pool[conf].assign(notebook=pool.loc[conf, "family"].str.split(" · ").str[0], p=pool.loc[conf, "_p"],
                                 test=pool.loc[conf, "_key"])
        shares = {nb: plan.share(nb) for nb in rows["notebook"].unique()}
        graphs, nf = {}, n_families
        if plan.graphical:
            nf = {nb: len(plan.families(nb) or []) for nb in shares}
            graphs = {nb: plan.graph(nb) for nb in shares}
            _plan(rows, plan, alpha, shares, nf)
            for c in ("planned_level", "level_for_power", "_status"):
                pool.loc[conf, c] = rows[c].to_numpy()
            pool.loc[conf, "power"] = rows["planned_power"].to_numpy()
            pool.loc[conf, "alpha_family"] = rows["alpha_family"].to_numpy()
            pool.loc[conf, "n_families"] = rows["notebook"].map(nf).to_numpy()
            pool.loc[conf, "share"] = rows["notebook"].map(shares).to_numpy()
        graph = rows[rows["_status"].eq("")] if plan.graphical else rows
        if len(graph):
            b = budget_decisions(graph, alpha, shares, nf, graphs)
            where = graph.index
            for c in ("p_adjusted", "family_size", "n_families", "share", "alpha_family"):
                pool.loc[where, c] = b[c].to_numpy()
            pool.loc[where, "_level"] = b["tested_level"].to_numpy()
            pool.loc[where, "p_adjust_method"] = GRAPH if plan.graphical else BUDGET
            if plan.graphical:
                _after_the_graph(pool, b, plan)
        pool.loc[conf, "family_size"] = pool.loc[conf, "family"].map(
            pool[conf & pool["_level"].notna()].drop_duplicates("_key").groupby("family").size()).fillna(0)
        described = conf & pool["_status"].str.startswith("descriptive")
        pool.loc[described, "p_adjust_method"] = "none: descriptive (not in the graph)"
    for fam, g in pool[(pool["_elsewhere"] == "") & ~conf].groupby("family", sort=False):
        one = g.drop_duplicates("_key")                 # a test repeated on several rows counts once
        adj = pd.Series(multiplicity.adjust(one["_p"].to_numpy(float), "fdr_bh"), index=one["_key"])
        pool.loc[g.index, "p_adjusted"] = g["_key"].map(adj).where(g["_p"].notna()).to_numpy()
        pool.loc[g.index, "family_size"] = int(one["_p"].notna().sum())
        pool.loc[g.index, "p_adjust_method"] = multiplicity.METHODS["fdr_bh"]
    pool.loc[pool["_elsewhere"] != "", "p_adjust_method"] = DECIDED_ELSEWHERE
    out_cols = ("p_adjusted", "family_size", "p_adjust_method", "n_families", "share", "alpha_family", "_level",
                "planned_level", "power", "level_for_power", "_status")
    for i, f in enumerate(frames):
        part = pool[pool["_t"] == i].set_index("_i")
        for c in out_cols:
            f[c] = part[c].reindex(f.index).to_numpy()
        f["tested_level"] = f["_level"]
        _adjusted_intervals(f)
        untested = f["_p"].isna() & (f["_elsewhere"] == "") & (f["_status"] == "")
        f.loc[untested, "p_adjust_method"] = np.where(f.loc[untested, "verdict"] == "", INTERVAL_ONLY,
                                                      "not in the family (not tested)")


def _num(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}g}" if abs(x) < 1e-3 or abs(x) >= 1e4 else f"{float(f'{x:.{digits}g}'):g}"


def _plan(rows: pd.DataFrame, plan, alpha: float, shares: Mapping, n_families: Mapping) -> None:
    """Per confirmatory row (in place): ``alpha_family``, ``planned_level``, ``planned_power``,
    ``level_for_power`` and ``_status``, "descriptive (…)" for an instance that is not in the graph (its family
    not among the plan's families for the profile, no planning design, or power below 0.8 at its planned level:
    :func:`plan_family`), "" otherwise. A test repeated on several rows is planned once."""
    for c in ("planned_level", "planned_power", "level_for_power", "alpha_family"):
        rows[c] = np.nan
    rows["_status"] = ""
    for fam, g in rows.groupby("family", sort=False):
        nb = g["notebook"].iloc[0]
        label = fam.split(" · ", 1)[1] if " · " in fam else fam
        fams = plan.families(nb) or []
        if label not in fams:
            rows.loc[g.index, "_status"] = (f"descriptive (family {label} is not among the plan's families for "
                                            f"profile {plan.profile})")
            continue
        a_f = alpha * shares[nb] / n_families[nb]
        rows.loc[g.index, "alpha_family"] = a_f
        one = g.drop_duplicates("test")
        got = plan_family(list(one["claim"]), list(one["_design"]), list(one["sesoi"].astype(float)),
                          list(one["_sides"]), plan.graph(nb), a_f).set_index(one["test"])
        for c in ("planned_level", "planned_power", "level_for_power"):
            rows.loc[g.index, c] = g["test"].map(got[c]).to_numpy()
        for i in g.index:
            if not got.loc[rows.at[i, "test"], "descriptive"]:
                continue
            d, lv, pw = rows.at[i, "_design"], rows.at[i, "planned_level"], rows.at[i, "planned_power"]
            if d is None:
                rows.at[i, "_status"] = f"descriptive (no planning design for profile {plan.profile})"
                continue
            sesoi, sides = float(rows.at[i, "sesoi"]), rows.at[i, "_sides"]
            if not lv > 0:
                rows.at[i, "_status"] = ("descriptive (planned level 0: no weight, and no claim that passes it α "
                                         "has power)")
                continue
            rows.at[i, "_status"] = f"descriptive (power {pw:.2f} for SESOI {sesoi:g} at level {_num(lv)}; "
            rows.at[i, "_status"] += _n_that_would(d, sesoi, lv, sides) + ")"


def _n_that_would(d: Mapping, sesoi: float, level: float, sides: str) -> str:
    """What n would power a descriptive instance at ``level``, against the units the data hold (``max_n``: then no
    profile can decide it)."""
    from . import power as W
    n = W.n_for_power(d, sesoi, level, sides)
    unit = " templates" if d["model"] == "range" else ""
    held = d.get("max_n")
    if not np.isfinite(n):
        return ("no n within the design's limit would power it" if not held else
                f"no n up to the {held:,}{unit} the data hold would power it"
                + (f" at {d['per_group']} names per group" if unit else ": no profile decides it"))
    say = f"n ≈ {int(float(f'{n:.2g}')):,}{unit} would power it"
    return say + (f", more than the {held:,} the data hold: no profile decides it" if held and n > held else "")


def _after_the_graph(pool: pd.DataFrame, b: pd.DataFrame, plan) -> None:
    """The graph's rows after the run (in place): ``power`` at the level each was tested at, and ``_status`` "not
    reached (…)" for a row the graph left at level 0 (naming the claims that passed it no α: not rejected), "not
    decided (…)" for one whose power at its tested level is below 0.8 (not rejected, its level not passed on)."""
    from . import power as W
    for i, r in b.iterrows():
        lv = r["tested_level"]
        if not np.isfinite(lv):
            continue
        d, sesoi, sides = pool.at[i, "_design"], float(pool.at[i, "sesoi"]), pool.at[i, "_sides"]
        if lv <= 0:
            pool.at[i, "power"] = np.nan
            nb = r["notebook"]
            then = plan.graph(nb)[1]
            fam = b[(b["family"] == r["family"]) & b["p"].notna()]
            preds = sorted({c for c in fam.loc[fam["rejected"] != True, "claim"]                 # noqa: E712
                            if (then.get(c) or {}).get(r["claim"], 0) > 0})
            pool.at[i, "_status"] = ("not reached (α not propagated: "
                                     + (", ".join(f"`{c}`" for c in preds)
                                        + (" was" if len(preds) == 1 else " were") + " not rejected)"
                                        if preds else "no claim that passes it α was rejected)"))
            continue
        pool.at[i, "power"] = W.design_power(d, sesoi, lv, sides)
        if not r["rejected"] and lv < pool.at[i, "level_for_power"] * (1 - 1e-12):
            pool.at[i, "_status"] = (f"not decided (power {pool.at[i, 'power']:.2f} for SESOI {sesoi:g} at its "
                                     f"tested level {_num(lv)})")


def _finish(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    io = out.pop("_interval_only").astype(bool)
    elsewhere = out.pop("_elsewhere")
    status = out.pop("_status").fillna("")
    out.drop(columns=["_p", "_test", "_est", "_null", "_se", "_df", "_sides", "_testname", "_level", "_design"],
             inplace=True)
    sig = pd.Series(pd.NA, index=out.index, dtype="boolean")
    tested = out["p_adjusted"].notna()
    # a confirmatory row is rejected by the graph, p_adjusted <= alpha (Bretz et al.); a screen: BH < alpha
    sig[tested] = np.where(out.loc[tested, "family_kind"] == CONFIRMATORY, out.loc[tested, "p_adjusted"] <= alpha,
                           out.loc[tested, "p_adjusted"] < alpha)
    todo = out["verdict"] == ""
    conf = out["family_kind"] == CONFIRMATORY
    held = todo & conf & (status != "")         # descriptive, not reached, not decided: never significant
    out.loc[held, "verdict"] = status[held]
    sig[held] = pd.NA
    out["significant"] = sig
    todo = out["verdict"] == ""
    decide_by = sig.where(~io, out["excludes_null"].astype("boolean"))
    out.loc[todo & conf & (decide_by == True), "verdict"] = DISTINGUISHABLE          # noqa: E712 (nullable boolean)
    out.loc[todo & conf & (decide_by == False), "verdict"] = NOT_DISTINGUISHABLE     # noqa: E712
    out.loc[todo & ~conf & (elsewhere == ""), "verdict"] = EXPLORATORY
    out.loc[todo & ~conf & (elsewhere != ""), "verdict"] = EXPLORATORY + " (" + elsewhere + ")"
    return out[[c for c in out.columns if c not in VERDICT_COLUMNS] + VERDICT_COLUMNS]


def decide(df: pd.DataFrame, spec: Effects, table: str, responders: pd.DataFrame | str | None = None,
           comparable: pd.DataFrame | bool | None = None, notebook: str | None = None,
           context: Mapping | None = None, n_families: int | None = None, *, plan) -> pd.DataFrame:
    """The table with the verdict columns derived (see the module docstring); its own columns are kept as they
    are. ``responders``: :func:`responder_status` output (or one status for every row); ``comparable``: a frame of
    ``comparable``/``comparability`` aligned with ``df``, or one bool; ``notebook``: whose claims decide (none: every
    row exploratory); ``context``: constants the plan's rows may name (notebook 1's ``benchmark``); ``n_families``:
    the notebook's families in the run where they are more than the table's (default: the families of its rows);
    ``plan``: the :class:`biaslab.plan.Plan` that decides (its claims and its one alpha)."""
    return decide_tables({table: (df, spec, responders, comparable)}, notebook, context, n_families,
                         plan=plan)[table]


def decide_tables(tables: Mapping[str, tuple], notebook: str | None = None, context: Mapping | None = None,
                  n_families: int | None = None, *, plan) -> dict[str, pd.DataFrame]:
    """Several tables whose rows may share families (a claim's family spanning two tables):
    ``{name: (df, spec, responders, comparable)}`` -> ``{name: decided df}``; ``n_families``, ``plan``: see
    :func:`decide`."""
    alpha = plan.alpha
    base = {name: _base(t[0], t[1], name, *(list(t[2:]) + [None, None])[:2], notebook, context, plan)
            for name, t in tables.items()}
    frames = list(base.values())
    if frames:
        _adjust(frames, alpha, plan, {notebook: n_families} if notebook and n_families else None)
    return {name: _finish(f, alpha) for name, f in base.items()}


def screen(df: pd.DataFrame) -> pd.Series:
    """Per row, what an exploratory comparison of rows may key on (notebook 6's universes): "departs from the null"
    when the row's screen (BH, or its interval where there is no p) says so, "no departure shown" when not, else the
    verdict itself (undefined / not estimable / not tested). Never a decision."""
    v = df["verdict"].astype(str)
    sig = df["significant"].astype("boolean")
    by = sig.where(sig.notna(), df["excludes_null"].astype("boolean")).fillna(False).astype(bool)
    out = v.where(v.str.startswith(UNTESTED), "")
    out[(out == "") & by] = "departs from the null"
    out[(out == "") & ~by] = "no departure shown"
    return out
