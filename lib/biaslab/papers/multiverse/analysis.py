"""From the universes' responses to the multiverse's tables: estimates per universe, agreement with the paper's
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
  the agreement table, pooled over groups (so its agreement counts universe x class type x group rows,
  :data:`GROUP_ROWS`).

The verdict columns of each estimate (families, adjusted p, responder status per universe) come from the verdict
layer through :mod:`.decisions`; :func:`agreement_with_paper` reads them.

The metric ids are those of notebook 5 (``bbq_bias_ambig``, ``crows_en_stereotype_preferred``, ...), so its
model x metric table can read the robustness verdict per metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ...benchmarks.bbq import bias_score_from_totals
from ...stats import agreement as agree_stats
from ...stats import importance as imp
from ...stats import intervals, ranking
from ...stats import verdict as V
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
                        n_unparsed=int((part["answer_kind"].isin(["unparsed", "unmatched", "multiple"])).sum()),
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
    asked in both polarities, t interval and paired t test over scenarios (the pairing unit)."""
    d = long.merge(items[["prompt_id", "scenario_id", "class_type", "polarity"]], on="prompt_id").dropna(
        subset=["p"])
    rows = []
    for (ct, grp), g in d.groupby(["class_type", "group"], sort=False):
        w = g.pivot_table(index="scenario_id", columns="polarity", values="p", aggfunc="mean")
        if not {"positive", "negative"} <= set(w.columns):
            continue
        diff = (w["positive"] - w["negative"]).dropna().to_numpy(float)
        n = len(diff)
        est = float(diff.mean()) if n else np.nan
        if n > 1 and diff.std() > 0:
            se = diff.std(ddof=1) / np.sqrt(n)
            q = stats.t.ppf(0.975, n - 1)
            lo, hi, p = est - q * se, est + q * se, float(stats.ttest_1samp(diff, 0.0).pvalue)
        else:
            lo = hi = p = np.nan
        rows.append({"class_type": ct, "group": grp, "estimate": est, "ci_low": lo, "ci_high": hi,
                     "ci_method": f"t interval over scenarios, {max(n - 1, 1)} df", "null_value": 0.0,
                     "p_value": p, "p_method": "paired t test over scenarios", "n": n, "n_clusters": n})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------- agreement with the paper
UNIVERSES = "universes"
GROUP_ROWS = "rows (universe × class type × group)"
NULL_SIGN = "undefined: the paper's estimate equals the null (it has no sign to agree with)"


def _degenerate(status: pd.Series) -> pd.Series:
    return status.astype(str).str.startswith("degenerate")


def compare_to_paper(est: pd.DataFrame, keys=("model", "metric")) -> pd.DataFrame:
    """One row per estimate of a universe other than the paper's, beside the paper's row with the same ``keys``:
    ``degenerate`` (it or the paper's row is a degenerate responder for the metric: not judged), ``same_sign`` (its
    estimate on the paper's side of the null; NA where the paper's estimate equals the null: a reference at the
    null has no sign, so no estimate can agree or disagree with it) and ``same_verdict`` (the same exploratory
    reading, :func:`biaslab.stats.verdict.screen`: no universe is decided, notebook 6 has no claim in the plan)."""
    keys, cols = list(keys), ["estimate", "null_value", "verdict", "responder_status"]
    d = est if "responder_status" in est else est.assign(responder_status="not judged")
    d = d.assign(verdict=V.screen(d))
    ref = d.loc[d["universe"] == "paper", keys + cols].rename(columns={c: f"paper_{c}" for c in cols})
    o = d[(d["universe"] != "paper") & d["estimate"].notna()].merge(ref, on=keys)
    o["degenerate"] = _degenerate(o["responder_status"]) | _degenerate(o["paper_responder_status"])
    s_ref = np.sign(o["paper_estimate"] - o["paper_null_value"])
    same = pd.Series(np.sign(o["estimate"] - o["null_value"]) == s_ref, index=o.index, dtype="boolean")
    o["same_sign"] = same.where(s_ref.fillna(0) != 0)
    o["same_verdict"] = o["verdict"] == o["paper_verdict"]
    return o


def _robustness(paper, n: int, flips: float, changes: float, flip_share: float, unit: str, no_sign: bool) -> str:
    if paper is not None and not np.isfinite(paper["estimate"]):
        return "undefined (no estimate in the paper's universe)"
    if paper is not None and _degenerate(pd.Series([paper.get("responder_status")])).iloc[0]:
        return "undefined (the paper's universe is a degenerate responder for this metric)"
    if not n:
        return "undefined (no other universe judged)"
    if np.isfinite(flips) and flips >= flip_share:
        return f"sign flips in many {unit}"
    if changes >= flip_share:
        return f"verdict changes in many {unit}"
    return "robust" + (" in verdict (sign agreement undefined: the paper's estimate equals the null)" if no_sign
                       else "")


def _agreement_row(g: pd.DataFrame, c: pd.DataFrame, flip_share: float, unit: str) -> dict:
    paper = g[g["universe"] == "paper"]
    p = paper.iloc[0] if len(paper) == 1 else None
    judged = c[~c["degenerate"]]
    signed = judged[judged["same_sign"].notna()]
    n, n_s, same = len(judged), len(signed), int(signed["same_sign"].sum())
    flips = (n_s - same) / n_s if n_s else np.nan
    changes = float((~judged["same_verdict"]).mean()) if n else np.nan
    note = NULL_SIGN if n and not n_s else (f"{n - n_s} of {n} {unit}: the paper's estimate equals the null (no "
                                            "sign)" if n_s < n else "")
    get = (lambda k: p[k] if p is not None and k in p else np.nan)      # noqa: E731
    return {"model": g["model"].iloc[0], "metric": g["metric"].iloc[0], "unit": unit,
            "paper_estimate": get("estimate"), "paper_ci_low": get("ci_low"), "paper_ci_high": get("ci_high"),
            "paper_verdict": get("verdict"), "paper_responder_status": get("responder_status"),
            "n_universes": int(judged["universe"].nunique()), "n_compared": n,
            "n_excluded_degenerate": int(c["degenerate"].sum()), "n_sign_compared": n_s, "n_same_sign": same,
            "share_same_sign": 1 - flips, "sign_flips": n_s - same, "sign_agreement": note,
            "n_same_verdict": int(judged["same_verdict"].sum()), "share_same_verdict": 1 - changes,
            "min_estimate": float(judged["estimate"].min()) if n else np.nan,
            "max_estimate": float(judged["estimate"].max()) if n else np.nan, "flip_threshold": flip_share,
            "robustness": _robustness(p, n, flips, changes, flip_share, unit, bool(n) and not n_s)}


def agreement_with_paper(est: pd.DataFrame, flip_share: float = 0.25, keys=("model", "metric"),
                         unit: str = UNIVERSES) -> pd.DataFrame:
    """Per model x metric, the other universes against the paper's (:func:`compare_to_paper`; ``keys`` name the
    paper's row each estimate is compared with: model x metric, or for the agentic group preference also class type
    x group, pooled per model x metric with ``unit`` = :data:`GROUP_ROWS`).

    Counted over the compared ``unit`` that are *judged* (``n_compared``; ``n_universes`` the distinct universes
    among them); a degenerate responder is not judged and is counted in ``n_excluded_degenerate``. ``share_same_sign``
    is over ``n_sign_compared``, the compared units whose paper's estimate has a sign (NA with ``sign_agreement``
    saying so when the paper's estimate equals the null), ``share_same_verdict`` over ``n_compared``.
    ``robustness``: "sign flips in many <unit>" when at least ``flip_share`` of them flip, "verdict changes in many
    <unit>" when the sign holds (or has none) but at least ``flip_share`` change the verdict, else "robust"
    ("robust in verdict" when only the verdict could be compared); "undefined (...)" when the paper's universe has
    no estimate or is itself degenerate, or no other universe is judged."""
    cmp = compare_to_paper(est, keys)
    rows = [_agreement_row(g, cmp[(cmp["model"] == m) & (cmp["metric"] == met)], flip_share, unit)
            for (m, met), g in est.groupby(["model", "metric"], sort=False)]
    return pd.DataFrame(rows)


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
    res.update(n_items=len(d), n_matched=len(matched), n_unmatched=int((d["answer_kind"] == "unmatched").sum()),
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
