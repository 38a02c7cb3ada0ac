"""From the universes' responses to the multiverse's tables: estimates per universe, equivalence to the paper's
universe, factor importance of the evaluation choices, stability of the model ordering, and the agreement of the
multiple-choice and open-ended formats on the same items (the RUTEd question).

Metrics (one estimate, interval and test per model x universe):

* ``bbq_bias_ambig`` / ``bbq_bias_disambig``: BBQ's bias scores (Parrish et al. 2022, §4; ``s_AMB = (1 - acc)
  s_DIS``, ``s_DIS = 2 n_biased / n_person - 1`` over the answers naming a person), percentile cluster bootstrap of
  the ratio over templates, two-sided bootstrap p against 0. An unparsed or unmatched answer names no person: it
  leaves the bias ratio's denominator and counts as not correct (counted in ``n_unparsed``).
* ``crows_en_stereotype_preferred``: share of pairs whose more stereotypical sentence is preferred, over pairs
  with an answer (ties and unanswered pairs counted, left out), cluster bootstrap over pairs, exact binomial test
  against 0.5 (pairs are independent).
* ``agentic_mean_entropy``: mean normalized entropy (formats with a distribution only), cluster bootstrap over
  scenarios, t test of the scenario means against 1 on G - 1 df.
* ``agentic_group_preference``: per class type and group, the mean share of a group's probability (or choices) in
  positive minus negative questions, paired by scenario; reported per group in ``group_preference.csv`` and, for
  robustness, pooled over groups (its counts are universe x class type x group rows, :data:`GROUP_ROWS`).

The verdict columns of each estimate (exploratory screens, responder status per universe) come from the verdict
layer through :mod:`.decisions`. **Robustness is equivalence** (:func:`equivalence_to_paper`): each universe's
paired difference from the paper's protocol on the same items, TOST within the margin the analysis plan declares.

The metric ids are those of notebook 5 (``bbq_bias_ambig``, ``crows_en_stereotype_preferred``, ...), so its
model x metric table can read the robustness verdict per metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ...benchmarks.bbq import bias_score_from_totals, bias_score_pseudo_values
from ...stats import agreement as agree_stats
from ...stats import importance as imp
from ...stats import intervals, paired, power, ranking
from ...stats.hypothesis import preference_test

METRICS = {
    "bbq_bias_ambig": dict(benchmark="bbq", null=0.0, label="BBQ bias score, ambiguous contexts",
                           unit="bias score (−1 to 1)"),
    "bbq_bias_disambig": dict(benchmark="bbq", null=0.0, label="BBQ bias score, disambiguated contexts",
                              unit="bias score (−1 to 1)"),
    "crows_en_stereotype_preferred": dict(benchmark="crows_pairs", null=0.5,
                                          label="CrowS-Pairs (original English): share preferring the stereotype",
                                          unit="share of pairs (0 to 1)"),
    "agentic_mean_entropy": dict(benchmark="agentic", null=1.0, label="Agentic: mean normalized entropy",
                                 unit="normalized entropy (0 to 1)"),
}
GROUP_PREFERENCE = "agentic_group_preference"
CLUSTER = {"bbq": "template", "crows_pairs": "pair_id", "agentic": "scenario_id"}
OUTCOME = {"bbq": ("deviated", "logistic"), "crows_pairs": ("stereotype_preferred", "logistic"),
           "agentic": ("entropy", "linear")}
BBQ_COLUMNS = ["deviated", "non_unknown", "correct", "one"]     # the totals bias_score_from_totals reads
SEPARATED = "separated: effect not estimable"


def _bbq_stat(ambig: bool):
    return lambda t: bias_score_from_totals(t, ambig)


def _row(metric, est, lo, hi, how, p, p_how, n, g, **extra) -> dict:
    return {"metric": metric, "estimate": est, "ci_low": lo, "ci_high": hi, "ci_method": how,
            "null_value": METRICS.get(metric, {}).get("null", 0.0), "p_value": p, "p_method": p_how,
            "n": n, "n_clusters": g, **extra}


def bbq_estimates(r: pd.DataFrame, items: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    d = r.merge(items[["prompt_id", "template", "context_condition"]], on="prompt_id").assign(one=1.0)
    out = []
    for cond in ("ambig", "disambig"):
        part = d[d["context_condition"] == cond]
        s = ranking.cluster_sums(part, BBQ_COLUMNS, "template")
        b = ranking.cluster_sum_bootstrap(_bbq_stat(cond == "ambig"), s.to_numpy(), n_boot=n_boot, seed=seed)
        out.append(_row(f"bbq_bias_{cond}", b["estimate"], b["ci_low"], b["ci_high"],
                        f"cluster bootstrap percentile of the ratio (template, {n_boot} resamples)", b["p_boot"],
                        "two-sided cluster bootstrap p against 0", len(part), b["n_clusters"],
                        n_unparsed=int((~part["answer_kind"].isin(["option", "unknown"])).sum()),
                        accuracy=float(part["correct"].mean())))
    return out


def crows_estimates(r: pd.DataFrame, items: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    d = r.merge(items[["prompt_id", "pair_id"]], on="prompt_id")
    ok = d[d["stereotype_preferred"].notna()]
    if not len(ok):
        return [_row("crows_en_stereotype_preferred", np.nan, np.nan, np.nan, "", np.nan, "", 0, 0,
                     n_unparsed=len(d))]
    # every pair is its own cluster: the exact (Clopper-Pearson) interval that goes with the binomial test
    ci = intervals.rate_intervals(ok, "stereotype_preferred", None).iloc[0]
    t = preference_test(ok["stereotype_preferred"].to_numpy(float))
    return [_row("crows_en_stereotype_preferred", float(ci["rate"]), float(ci["ci_low"]), float(ci["ci_high"]),
                 ci["ci_method"] + " (pairs independent)", t["binom_p"], "exact binomial test against 0.5",
                 len(ok), len(ok), n_unparsed=int(len(d) - len(ok)))]


def agentic_estimates(per: pd.DataFrame, items: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> list[dict]:
    d = per.merge(items[["prompt_id", "scenario_id"]], on="prompt_id")
    ok = d[d["entropy"].notna()]
    if not len(ok):
        return [_row("agentic_mean_entropy", np.nan, np.nan, np.nan, "undefined: this format gives no distribution",
                     np.nan, "", 0, 0, n_unparsed=int((d["answer_kind"] != "option").sum()))]
    ci = intervals.mean_intervals(ok, "entropy", "scenario_id", seed=seed).iloc[0]   # stats.clustered rule
    sm = ok.groupby("scenario_id")["entropy"].mean() - 1.0
    p = float(stats.ttest_1samp(sm, 0.0).pvalue) if len(sm) > 1 and sm.std() > 0 else np.nan
    return [_row("agentic_mean_entropy", float(ci["mean"]), float(ci["ci_low"]), float(ci["ci_high"]),
                 ci["ci_method"], p, "t test of scenario means against 1, G - 1 df", len(ok),
                 int(ci["n_clusters"]), n_unparsed=0)]


def group_preference(long: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Per class type and group: mean p (or 0/1 choice) in positive minus negative questions over the scenarios
    asked in both polarities (:func:`group_values`), t interval and paired t test over scenarios (the pairing
    unit). ``long``: one model x universe's slot rows."""
    rows = []
    for met, g in group_values(long, items).groupby("metric", sort=False):
        diff, n = g["value"].to_numpy(float), len(g)
        t = stats.ttest_1samp(diff, 0.0) if n > 1 and diff.std() > 0 else None
        lo, hi = t.confidence_interval(0.95) if t else (np.nan, np.nan)
        rows.append({"class_type": met.split(":")[1], "group": met.split(":", 2)[2], "estimate": float(diff.mean()),
                     "ci_low": lo, "ci_high": hi, "ci_method": f"t interval over scenarios, {max(n - 1, 1)} df",
                     "null_value": 0.0, "p_value": float(t.pvalue) if t else np.nan,
                     "p_method": "paired t test over scenarios", "n": n, "n_clusters": n})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- equivalence to the paper's universe
NOTEBOOK = "06_multiverse"
UNIVERSES = "universes"
GROUP_ROWS = "rows (universe × class type × group)"
EQUIVALENT, DIFFERS, OPPOSITE, INCONCLUSIVE = "equivalent", "differs", "opposite direction", "inconclusive"


def margins(p) -> dict:
    """The equivalence margin of each metric, declared in the analysis plan ``p`` (notebook 6's ``equivalence``
    block)."""
    m = ((p.notebooks.get(NOTEBOOK) or {}).get("equivalence") or {}).get("margins")
    if not m:
        raise ValueError(f"{p.path}: notebook {NOTEBOOK} declares no equivalence margins (equivalence: margins: "
                         "metric: margin); declare them in the plan before the run, as the shipped analysis_plan.yaml does")
    return {k: float(v) for k, v in m.items()}


def item_values(benchmark: str, r: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Per model x universe x metric, one value per item whose mean is the universe's estimate: ``unit`` (the
    pairing unit), ``cluster`` (NA: units independent) and ``value``: BBQ's bias-score pseudo-values
    (``bias_score_pseudo_values``, per context), CrowS-Pairs' 0/1 preference per pair (both orders averaged where a
    pair was asked twice), the agentic entropy per prompt."""
    keys = ["model", "universe"]
    r = r.drop(columns=[c for c in ("template", "context_condition", "pair_id", "scenario_id") if c in r])
    if benchmark == "bbq":
        d = r.merge(items[["prompt_id", "template", "context_condition"]], on="prompt_id")
        parts = []
        for (m, u, cond), g in d.groupby(keys + ["context_condition"], sort=False):
            v = bias_score_pseudo_values(g["deviated"], g["non_unknown"], g["correct"], cond == "ambig")
            parts.append(pd.DataFrame({"model": m, "universe": u, "metric": f"bbq_bias_{cond}",
                                       "unit": g["prompt_id"].to_numpy(), "cluster": g["template"].to_numpy(),
                                       "value": v}))
        return pd.concat(parts, ignore_index=True)
    if benchmark == "crows_pairs":
        d = r.merge(items[["prompt_id", "pair_id"]], on="prompt_id").dropna(subset=["stereotype_preferred"])
        d = d.groupby(keys + ["pair_id"], as_index=False, sort=False)["stereotype_preferred"].mean()
        return pd.DataFrame({"model": d["model"], "universe": d["universe"], "metric": "crows_en_stereotype_preferred",
                             "unit": d["pair_id"], "cluster": pd.NA, "value": d["stereotype_preferred"]})
    d = r.merge(items[["prompt_id", "scenario_id"]], on="prompt_id").dropna(subset=["entropy"])
    return pd.DataFrame({"model": d["model"], "universe": d["universe"], "metric": "agentic_mean_entropy",
                         "unit": d["prompt_id"], "cluster": d["scenario_id"], "value": d["entropy"]})


def group_values(long: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The group preference's per-scenario values (positive minus negative mean share; :func:`group_preference`),
    one metric per class type x group (``agentic_group_preference:<class type>:<group>``)."""
    d = long.merge(items[["prompt_id", "scenario_id", "class_type", "polarity"]], on="prompt_id").dropna(subset=["p"])
    w = d.pivot_table(index=["model", "universe", "class_type", "group", "scenario_id"], columns="polarity",
                      values="p", aggfunc="mean")
    if not {"positive", "negative"} <= set(w.columns):
        return pd.DataFrame(columns=["model", "universe", "metric", "unit", "cluster", "value"])
    w = (w["positive"] - w["negative"]).dropna().rename("value").reset_index()
    return w.assign(metric=GROUP_PREFERENCE + ":" + w["class_type"] + ":" + w["group"], unit=w["scenario_id"],
                    cluster=pd.NA)[["model", "universe", "metric", "unit", "cluster", "value"]]


def _degenerate(status: pd.Series) -> pd.Series:
    return status.astype(str).str.startswith("degenerate")


def _sign(x: pd.Series, null: pd.Series) -> pd.Series:
    return np.sign(x.astype(float) - null.astype(float))


def _agreement(o: pd.DataFrame) -> pd.Series:
    """Per universe: "not judged" (it or the paper's universe is a degenerate responder), "opposite direction" (its
    own interval excludes the null on the other side from the paper's estimate), "equivalent" (the TOST interval
    inside +-margin), "differs" (the TOST interval wholly beyond the margin), else "inconclusive"."""
    own = _sign(o["estimate"], o["null_value"])
    sig = (o["ci_low"] > o["null_value"]) | (o["ci_high"] < o["null_value"])
    ref = _sign(o["paper_estimate"], o["null_value"])
    lo, hi, m = o["tost_ci_low"], o["tost_ci_high"], o["margin"]
    return pd.Series(np.select(
        [_degenerate(o["responder_status"]) | _degenerate(o["paper_responder_status"]), lo.isna() | hi.isna(),
         sig & (ref != 0) & (own == -ref), (lo > -m) & (hi < m), (lo > m) | (hi < -m)],
        ["not judged (degenerate responder)", "undefined (no paired interval)", OPPOSITE, EQUIVALENT, DIFFERS],
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
        rows.append({"model": m, "metric": met, "unit": GROUP_ROWS if met == GROUP_PREFERENCE else UNIVERSES,
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
    its own two-sided test detects with 80 % power, ``stats.power.mde_from_se`` on the SE its 95 % interval implies)
    and ``equivalence_mde`` (the margin within which the paired TOST shows equivalence with 80 % power, median over
    universes: :func:`robustness`; its largest, ``equivalence_mde_max``, and how many universes reach the margin)
    beside the plan's ``margin``."""
    p = est[(est["universe"] == "paper") & est["metric"].isin(METRICS)]
    se = (p["ci_high"] - p["ci_low"]) / (2 * stats.norm.ppf(1 - alpha / 2))
    own = p.assign(own_mde=[power.mde_from_se(x, alpha=alpha) for x in se])[["model", "metric", "n", "own_mde"]]
    extra = [c for c in ("equivalence_mde_max", "n_equivalence_powered", "n_equivalence_universes") if c in rob]
    return own.merge(rob[["model", "metric", "margin", "equivalence_mde", *extra]], on=["model", "metric"])


# ---------------------------------------------------------------------------------------- factor importance
def factor_importance(long: pd.DataFrame, spec, benchmark: str) -> pd.DataFrame:
    """Treatment-coded regression of the per-item outcome on the evaluation choices (reference = the paper's
    protocol), with cluster-robust standard errors on the benchmark's generating unit: logistic for 0/1 outcomes
    (``stats.importance.logistic_regression``), OLS for the entropy (``stats.importance.linear_regression``).
    Factors constant in the data (a level not available here) are left out (``identifiable_subset``)."""
    outcome, kind = OUTCOME[benchmark]
    cluster = CLUSTER[benchmark]
    d = long[long[outcome].notna()].copy()
    if benchmark == "bbq":                       # the bias score's numerator: answers that name a person
        d = d[d["non_unknown"] == 1]
    refs = {f.name: f.reference for f in spec.factors}
    fs, left = imp.identifiable_subset(d, [f for f in spec.names if f in d], refs)
    if not fs or d[outcome].nunique() < 2:
        return pd.DataFrame()
    if kind == "logistic":
        d[outcome] = d[outcome].astype(int)
        t = imp.logistic_regression(d, fs, refs, outcome=outcome, cluster=cluster).table
        t = t.rename(columns={"se_cluster": "se_cluster", "p_cluster": "p_cluster"})
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
        sums.append(ranking.cluster_sums(part, BBQ_COLUMNS, "template"))
    idx = sums[0].index.union(sums[1].index)
    s_open, s_mc = (s.reindex(idx, fill_value=0.0).to_numpy() for s in sums)
    diff = ranking.cluster_sum_bootstrap(_bbq_stat(True), s_open, s_mc, n_boot=n_boot, seed=seed)
    res.update(ambig_bias_open=float(_bbq_stat(True)(s_open.sum(axis=0))[0]),
               ambig_bias_mc=float(_bbq_stat(True)(s_mc.sum(axis=0))[0]),
               ambig_bias_difference=diff["estimate"], difference_ci_low=diff["ci_low"],
               difference_ci_high=diff["ci_high"], difference_p=diff["p_boot"])
    return res
