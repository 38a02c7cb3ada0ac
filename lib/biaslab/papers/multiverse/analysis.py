"""From the universes' responses to the multiverse's tables: estimates per universe, equivalence to the paper's
universe, factor importance of the evaluation choices, stability of the model ordering, and the agreement of the
multiple-choice and open-ended formats on the same items (the RUTEd question).

Metrics are each spec's metrics with ``item_values`` (ids as in notebook 5): one estimate per model x universe
(``Metric.estimate``), or, for a family of per-group values (the agentic group preference), one per group
(:func:`group_preference`). Verdict columns come from :mod:`.decisions`; **robustness is equivalence**
(:func:`equivalence_to_paper`: TOST of each universe's paired difference from the paper's protocol within the
plan's margin).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
from scipy import stats

from ... import benchmarks
from ...benchmarks import bbq
from ...stats import agreement as agree_stats
from ...stats import importance as imp
from ...stats import paired, power, ranking
from ...stats.clustered import NOT_ESTIMABLE, no_variation

SEPARATED = "separated: effect not estimable"


def multiverse_metrics(names) -> list:
    """The metrics of the named benchmarks that the multiverse computes (those with ``item_values``), in order."""
    return [m for b in names for m in benchmarks.spec(b).metrics if m.item_values]


def family_values(m, r: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The per-unit values of a metric without ``estimate``: a family of per-group values, each id
    ``<metric>:<class type>:<group>`` (:func:`group_preference`); any other id is a metric missing its estimate."""
    v = m.item_values(r, items)
    bad = sorted({x for x in v["metric"].astype(str) if x.count(":") < 2})
    if bad:
        raise TypeError(f"metric {m.id!r} declares item_values but no Metric.estimate, so notebook 6 (06_multiverse) "
                        f"reads it as a family of per-group values, ids '<metric>:<class type>:<group>', but its "
                        f"item_values returned {bad[:3]}; give it an estimate (one row per model x universe; "
                        "docs/adding_a_benchmark.md)")
    return v


def universe_values(responses: dict, item_sets: dict, family: bool = False) -> pd.DataFrame:
    """Every multiverse metric's per-unit values (``Metric.item_values``; ``family``: those of the metrics without
    an ``estimate``, one value per unit and group, :func:`family_values`), model by model. ``responses``,
    ``item_sets``: benchmark -> table."""
    values = family_values if family else (lambda m, r, its: m.item_values(r, its))
    parts = [values(m, part, item_sets[b]) for b, d in responses.items() if len(d)
             for _, part in d.groupby("model", sort=False)
             for m in multiverse_metrics([b]) if (m.estimate is None) == family]
    return (pd.concat(parts, ignore_index=True) if parts else
            pd.DataFrame(columns=["model", "universe", "metric", "unit", "cluster", "value"]))


def group_preference(values: pd.DataFrame) -> pd.DataFrame:
    """The estimates of a family of per-group values (:class:`~biaslab.benchmarks.spec.Metric` without ``estimate``,
    ids ``<metric>:<class type>:<group>``; the agentic group preference: mean share in positive minus negative
    questions), per model x universe x member: the mean over units (scenarios), t interval and paired t test over
    them (the pairing unit)."""
    rows = []
    for (m, u), mu in values.groupby(["model", "universe"], sort=False):
        for met, g in mu.groupby("metric", sort=False):
            diff, n = g["value"].to_numpy(float), len(g)
            t = stats.ttest_1samp(diff, 0.0) if n > 1 and diff.std() > 0 else None
            lo, hi = t.confidence_interval(0.95) if t else (np.nan, np.nan)
            family, class_type, group = met.split(":", 2)
            flat = no_variation(n, "scenarios") if n > 1 and not t else ""     # every scenario alike: no test
            rows.append({"class_type": class_type, "group": group, "estimate": float(diff.mean()),
                         "ci_low": lo, "ci_high": hi,
                         "ci_method": flat or f"t interval over scenarios, {max(n - 1, 1)} df",
                         "null_value": 0.0, "p_value": float(t.pvalue) if t else np.nan,
                         "p_method": flat or "paired t test over scenarios", "n": n, "n_clusters": n, "model": m,
                         "universe": u, "metric": family})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- equivalence to the paper's universe
NOTEBOOK = "06_multiverse"
UNIVERSES = "universes"
GROUP_ROWS = "rows (universe × class type × group)"
EQUIVALENT, DIFFERS, OPPOSITE, INCONCLUSIVE = "equivalent", "differs", "opposite direction", "inconclusive"
NO_MARGIN = "not judged (the analysis plan declares no equivalence margin for this metric)"


def margins(p) -> dict:
    """The equivalence margin of each metric, declared in the analysis plan ``p`` (notebook 6's ``equivalence``
    block)."""
    m = ((p.notebooks.get(NOTEBOOK) or {}).get("equivalence") or {}).get("margins")
    if not m:
        raise ValueError(f"{p.path}: notebook {NOTEBOOK} declares no equivalence margins (equivalence: margins: "
                         "metric: margin); declare them in the plan before the run, as the shipped analysis_plan.yaml does")
    return {k: float(v) for k, v in m.items()}


def _degenerate(status: pd.Series) -> pd.Series:
    return status.astype(str).str.startswith("degenerate")


def _sign(x: pd.Series, null: pd.Series) -> pd.Series:
    return np.sign(x.astype(float) - null.astype(float))


def _agreement(o: pd.DataFrame) -> pd.Series:
    """Per universe: "not judged" (it or the paper's universe is a degenerate responder), "not estimable (…)" (the
    paired differences do not vary: no standard error, no TOST interval, so neither equivalence nor a difference is
    shown), "opposite direction" (its own interval excludes the null on the other side from the paper's estimate),
    :data:`NO_MARGIN`, "equivalent" (the TOST interval inside +-margin), "differs" (the TOST interval wholly beyond
    the margin), else "inconclusive"."""
    own = _sign(o["estimate"], o["null_value"])
    sig = (o["ci_low"] > o["null_value"]) | (o["ci_high"] < o["null_value"])
    ref = _sign(o["paper_estimate"], o["null_value"])
    lo, hi, m = o["tost_ci_low"], o["tost_ci_high"], o["margin"]
    flat = o["ci_method"].astype(str).str.startswith(NOT_ESTIMABLE)
    return pd.Series(np.select(
        [_degenerate(o["responder_status"]) | _degenerate(o["paper_responder_status"]), flat, lo.isna() | hi.isna(),
         sig & (ref != 0) & (own == -ref), m.isna(), (lo > -m) & (hi < m), (lo > m) | (hi < -m)],
        ["not judged (degenerate responder)", o["ci_method"].astype(str), "undefined (no paired interval)", OPPOSITE,
         NO_MARGIN, EQUIVALENT, DIFFERS],
        INCONCLUSIVE), index=o.index)


def equivalence_to_paper(values: pd.DataFrame, est: pd.DataFrame, margin: dict, alpha: float = 0.05,
                         seed: int = 0) -> pd.DataFrame:
    """One row per model x metric x universe other than the paper's: the paired difference (universe - paper) of
    the per-item values (:func:`item_values`, :func:`group_values`) on the items both answered
    (``stats.paired.paired_difference``: cluster-robust t(G - 1), the wild cluster bootstrap below 30 clusters),
    its 1 - 2 alpha interval (``tost_ci_low``, ``tost_ci_high``: TOST at ``alpha`` against the metric's ``margin``),
    ``equivalence_mde`` (the smallest margin this design shows with 80 % power when the universes agree,
    ``stats.power.mde_equivalence``), ``same_sign`` (NA where either estimate is exactly at the null: no sign) and
    ``agreement`` (:func:`_agreement`). ``est``: the decided estimates (estimate, interval, null, responder status)
    of the same model x universe x metric."""
    rows = []
    for (m, met), g in values.groupby(["model", "metric"], sort=False):
        mg = margin.get(met.split(":")[0], np.nan)
        clustered = g["cluster"].notna().all()
        for u in [u for u in pd.unique(g["universe"]) if u != "paper"]:
            d = paired.paired_difference(g[g["universe"].isin([u, "paper"])], "value", u, "paper",
                                         "cluster" if clustered else None, model="universe", unit="unit",
                                         binary=False, seed=seed, alpha=2 * alpha)
            rows.append({"model": m, "metric": met, "universe": u, "margin": mg, "difference": d["difference"],
                         "tost_ci_low": d.get("ci_low", np.nan), "tost_ci_high": d.get("ci_high", np.nan),
                         "ci_method": d["ci_method"], "n_pairs": d["n_pairs"], "n_clusters": d.get("n_clusters"),
                         "equivalence_mde": power.mde_equivalence(d.get("se_cluster", np.nan), d.get("df"), alpha,
                                                                  se_naive=d.get("se_naive"))})
    cols = ["estimate", "ci_low", "ci_high", "null_value", "responder_status"]
    if not rows:
        return pd.DataFrame(columns=["model", "metric", "universe", "margin", "difference", "tost_ci_low",
                                     "tost_ci_high", "equivalence_mde", "same_sign", "agreement"])
    e = est.assign(responder_status=est.get("responder_status", "not judged"))[["model", "metric", "universe"] + cols]
    o = pd.DataFrame(rows).merge(e, on=["model", "metric", "universe"], how="left").merge(
        e[e["universe"] == "paper"].drop(columns="universe").rename(columns={c: f"paper_{c}" for c in cols}),
        on=["model", "metric"], how="left")
    own, ref = _sign(o["estimate"], o["null_value"]), _sign(o["paper_estimate"], o["null_value"])
    o["same_sign"] = pd.Series(own == ref, index=o.index, dtype="boolean").where((own != 0) & (ref != 0))
    o["agreement"] = _agreement(o)
    return o.drop(columns="paper_null_value")


def robustness(eq: pd.DataFrame) -> pd.DataFrame:
    """Per model x metric (the group preference pooled over class type x group, counted in rows): how many
    universes are equivalent, inconclusive, differ, go the other way or are not judged, and ``robustness``:
    "robust" when every judged universe is equivalent (an intersection-union test at the plan's alpha, whatever
    the number of universes), "not robust" when one differs beyond the margin or goes the other way, else
    "inconclusive" (the design cannot tell; ``equivalence_mde`` says which margin it could have shown)."""
    rows = []
    for (m, met), g in eq.assign(base=eq["metric"].astype(str).str.split(":").str[0]).groupby(["model", "base"],
                                                                                              sort=False):
        n = g["agreement"].value_counts()
        judged = int(n.get(EQUIVALENT, 0) + n.get(INCONCLUSIVE, 0) + n.get(DIFFERS, 0) + n.get(OPPOSITE, 0))
        bad, mg = int(n.get(DIFFERS, 0) + n.get(OPPOSITE, 0)), float(g["margin"].iloc[0])
        label = ("undefined (no other universe judged)" if not judged else
                 f"not robust: {bad} of {judged} beyond ±{mg:g} or the other way" if bad else
                 f"robust: every universe equivalent within ±{mg:g}" if n.get(EQUIVALENT, 0) == judged else
                 f"inconclusive: {int(n.get(INCONCLUSIVE, 0))} of {judged} neither equivalent nor different")
        family = g["metric"].astype(str).str.contains(":").any()     # per-group values: counted in rows
        rows.append({"model": m, "metric": met, "unit": GROUP_ROWS if family else UNIVERSES,
                     "margin": mg, "n_universes": int(g["universe"].nunique()), "n_judged": judged,
                     **{f"n_{k.replace(' ', '_')}": int(n.get(k, 0)) for k in (EQUIVALENT, INCONCLUSIVE, DIFFERS,
                                                                              OPPOSITE)},
                     "n_not_judged": int(len(g) - judged), "n_same_sign": int(g["same_sign"].sum()),
                     "n_sign_compared": int(g["same_sign"].notna().sum()),
                     "min_difference": g["difference"].min(), "max_difference": g["difference"].max(),
                     "equivalence_mde": g["equivalence_mde"].median(),
                     "equivalence_mde_max": g["equivalence_mde"].max(),
                     "n_equivalence_powered": int((g["equivalence_mde"] <= mg).sum()),
                     "n_equivalence_universes": int(g["equivalence_mde"].notna().sum()), "robustness": label})
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else ["model", "metric", "margin", "equivalence_mde",
                                                                  "robustness"])

def design_power(est: pd.DataFrame, rob: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """What the design can detect, per model x metric: ``n`` (the paper's universe's items), ``own_mde`` (the effect
    its own two-sided test at ``alpha`` detects with ``power`` (80 %), ``stats.power.mde_from_se`` on the SE its 95 %
    interval implies)
    and ``equivalence_mde`` (the margin within which the paired TOST shows equivalence with 80 % power, median over
    universes: :func:`robustness`; its largest, ``equivalence_mde_max``, and how many universes reach the margin)
    beside the plan's ``margin``."""
    p = est[est["universe"] == "paper"]
    se = (p["ci_high"] - p["ci_low"]) / (2 * stats.norm.ppf(1 - alpha / 2))
    own = p.assign(own_mde=[power.mde_from_se(x, alpha=alpha) for x in se], alpha=alpha, power=power.POWER)[
        ["model", "metric", "n", "alpha", "power", "own_mde"]]
    extra = [c for c in ("equivalence_mde_max", "n_equivalence_powered", "n_equivalence_universes") if c in rob]
    return own.merge(rob[["model", "metric", "margin", "equivalence_mde", *extra]], on=["model", "metric"])


# ---------------------------------------------------------------------------------------- factor importance
def factor_importance(long: pd.DataFrame, spec, metric) -> pd.DataFrame:
    """Treatment-coded regression of the metric's per-item outcome (``Metric.factor_outcome``: column, model and
    optionally a 0/1 column selecting the rows) on the evaluation choices (reference = the paper's protocol), with
    cluster-robust standard errors on the metric's generating unit (``Metric.cluster``): logistic for 0/1 outcomes
    (``stats.importance.logistic_regression``), OLS for the entropy (``stats.importance.linear_regression``).
    Factors constant in the data (a level not available here) are left out (``identifiable_subset``)."""
    outcome, kind, *where = metric.factor_outcome
    cluster = metric.cluster
    d = long[long[outcome].notna()].copy()
    if where:                                    # e.g. BBQ: the bias score's numerator, answers that name a person
        d = d[d[where[0]] == 1]
    refs = {f.name: f.reference for f in spec.factors}
    fs, left = imp.identifiable_subset(d, [f for f in spec.names if f in d], refs)
    if not fs or d[outcome].nunique() < 2:
        return pd.DataFrame()
    if kind == "logistic":
        d[outcome] = d[outcome].astype(int)
        t = imp.logistic_regression(d, fs, refs, outcome=outcome, cluster=cluster).table
        t["effect_scale"] = "log odds"
    else:
        t = imp.linear_regression(d, fs, refs, outcome=outcome, cluster=cluster)
        t = t.rename(columns={"se": "se_cluster", "p_value": "p_cluster"})
        t["effect_scale"] = "difference in mean"
    t["outcome"] = outcome
    t["n"] = len(d)
    t["left_out"] = "; ".join(f"{f}: {w[:80]}" for f, w in left.items())
    return t


def importance_by_factor(terms: pd.DataFrame) -> pd.DataFrame:
    """Which choice moves the number most: per model x benchmark x factor, the level with the largest |coefficient|
    (on the regression's scale) among its *estimable* levels, with that level's clustered p, ranked within model x
    benchmark. A separated term (``stats.importance``: a level whose outcome rate is 0 or 1, or a standard error
    above 50) has no finite estimate, so it is never ranked (its coefficient, e.g. 53 with an SE of 53,000, only
    says where the optimizer stopped); ``n_separated`` counts a factor's separated levels, and a factor whose every
    level is separated is listed after the ranked ones with ``status`` "separated: effect not estimable", no rank."""
    t = terms[terms["factor"] != "Intercept"].copy()
    if t.empty:
        return pd.DataFrame()
    keys = ["model", "benchmark", "factor"]
    t["separated"] = t["separated"].fillna(False).astype(bool) if "separated" in t else False
    t["abs_coef"] = t["coef"].abs()
    n_sep = t.groupby(keys, sort=False)["separated"].sum().rename("n_separated").reset_index()
    cols = keys + ["level", "coef", "abs_coef", "p_cluster", "effect_scale", "outcome"]
    top = t[~t["separated"]].sort_values("abs_coef", ascending=False).groupby(keys, sort=False).head(1)[cols]
    top = top.assign(status="ranked", rank=top.groupby(["model", "benchmark"])["abs_coef"].rank(
        ascending=False, method="first").astype("Int64"))
    sep = t[t["separated"]].groupby(keys, sort=False).agg(
        level=("level", lambda x: ", ".join(map(str, x))), effect_scale=("effect_scale", "first"),
        outcome=("outcome", "first")).reset_index()
    sep = sep[~sep.set_index(keys).index.isin(top.set_index(keys).index)].assign(
        coef=np.nan, abs_coef=np.nan, p_cluster=np.nan, status=SEPARATED, rank=pd.NA)
    out = pd.concat([top, sep[top.columns]], ignore_index=True).merge(n_sep, on=keys, how="left")
    out["rank"] = out["rank"].astype("Int64")
    return out.sort_values(["model", "benchmark", "rank"], na_position="last").reset_index(drop=True)


# ------------------------------------------------------------------------------------------- model ordering
def ordering_stability(est: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per metric: Kendall's W over the universes that ran for every model (universes as raters, models as
    objects), and for each pair of models the share of universes ordering them as the paper's universe does."""
    wrows, prows = [], []
    for met, g in est.groupby("metric", sort=False):
        wide = g.pivot_table(index="universe", columns="model", values="estimate", aggfunc="first")
        n_models = wide.shape[1]
        if n_models < 2 or "paper" not in wide.index:
            wrows.append({"metric": met, "n_models": n_models, "w": np.nan,
                          "status": "fewer than two models with a paper's universe"})
            continue
        full = wide.dropna()
        kw = ranking.kendall_w(full.to_numpy())
        wrows.append({"metric": met, "n_models": n_models, **kw,
                      "status": "ok" if n_models > 2 else "two models: W = 1 when every universe orders them "
                                                          "alike, and the pairwise table says the same"})
        po = ranking.pairwise_order_agreement(wide, "paper").rename(columns={"object_a": "model_a",
                                                                             "object_b": "model_b",
                                                                             "n_raters": "n_universes"})
        prows.append(po.assign(metric=met))
    pairs = pd.concat(prows, ignore_index=True) if prows else pd.DataFrame()
    return pd.DataFrame(wrows), pairs


# --------------------------------------------------------------------------------------------- the RUTEd check
def _category(r: pd.DataFrame, items: pd.DataFrame) -> pd.Series:
    x = r.merge(items[["prompt_id", "biased_index", "unknown_index"]], on="prompt_id", how="left")
    return pd.Series(np.select([x["choice"] < 0, x["choice"] == x["unknown_index"],
                                x["choice"] == x["biased_index"]],
                               ["no answer", "unknown", "biased"], "counter-biased"), index=r.index)


def format_agreement(mc: pd.DataFrame, open_: pd.DataFrame, items: pd.DataFrame, n_boot: int = 2000,
                     seed: int = 0) -> dict:
    """Multiple-choice (the paper's universe) against open-ended answers on the same BBQ items, one model: the
    answer category (biased / counter-biased / unknown) agreement and Cohen's kappa over the items the open answer
    could be matched on, with template-cluster bootstrap intervals; the unmatched count; and the paired difference
    of the ambiguous-context bias scores (open - multiple choice) with a template-paired cluster bootstrap."""
    a = mc.assign(cat_mc=_category(mc, items))[["prompt_id", "cat_mc"]]
    b = open_.assign(cat_open=_category(open_, items))[["prompt_id", "cat_open", "answer_kind"]]
    d = a.merge(b, on="prompt_id").merge(items[["prompt_id", "template", "context_condition"]], on="prompt_id")
    matched = d[d["cat_open"] != "no answer"]
    res = agree_stats.agreement_intervals(matched, "cat_mc", "cat_open", "template", n_boot=n_boot, seed=seed)
    res.update(n_items=len(d), n_matched=len(matched),        # unmatched: no option read ("neither" included)
               n_unmatched=int((~d["answer_kind"].isin(["option", "unknown", "multiple"])).sum()),
               n_multiple=int((d["answer_kind"] == "multiple").sum()))
    amb_ids = set(items.loc[items["context_condition"] == "ambig", "prompt_id"])
    sums = []
    for r in (open_, mc):
        part = r[r["prompt_id"].isin(amb_ids)].merge(items[["prompt_id", "template"]], on="prompt_id").assign(one=1.0)
        sums.append(ranking.cluster_sums(part, bbq.TOTALS, "template"))
    idx = sums[0].index.union(sums[1].index)
    s_open, s_mc = (s.reindex(idx, fill_value=0.0).to_numpy() for s in sums)
    ambig = partial(bbq.bias_score_from_totals, ambig=True)
    diff = ranking.cluster_sum_bootstrap(ambig, s_open, s_mc, n_boot=n_boot, seed=seed)
    res.update(ambig_bias_open=float(ambig(s_open.sum(axis=0))[0]), ambig_bias_mc=float(ambig(s_mc.sum(axis=0))[0]),
               ambig_bias_difference=diff["estimate"], difference_ci_low=diff["ci_low"],
               difference_ci_high=diff["ci_high"], difference_p=diff["p_boot"])
    return res
