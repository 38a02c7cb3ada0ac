"""Paired model comparisons (beyond the four papers; Miller 2024, "Adding Error Bars to Evals", §4).

Two models scored on the same prompts are a *paired* design: comparing them prompt by prompt removes the variance
that comes from which prompts were drawn, and the comparison's interval must respect the same clusters for both.

* :func:`paired_difference` mean of per-prompt differences ``y_a - y_b`` over prompts both models answered, with the
  one rule of :mod:`biaslab.stats.clustered` applied to the differences: cluster-robust CR1 standard error (one-way,
  or two-way for a crossed design such as SSQA's template x stigma) with a t(G - 1) interval and Wald t(G - 1) test,
  or the wild cluster restricted bootstrap below 30 clusters. Where every cluster holds one prompt the ``p_value``
  is the exact test: McNemar (binary outcomes; Edwards 1948 / statsmodels ``mcnemar(exact=True)``) or Wilcoxon;
  where prompts share clusters that exact test is kept as ``p_naive``. Each row carries the MDE of this paired
  design (:func:`biaslab.stats.power.mde_from_se` on the paired SE and its df).
* :func:`paired_subgroup_test` the paired alternative to the two-sample KS test of the multi-factor paper (§3.3):
  both models answer the same subgroups, so compare ``d_a(g) - d_b(g)`` subgroup by subgroup (Wilcoxon signed-rank
  over subgroups, kept as naive); the difference of the two deviation metrics is tested by the template-swap
  randomization test (the models' answers exchanged within templates, the metric recomputed) and given the
  interval of the same rule through the metric's linearization (:func:`subgroup_metric_intervals` for one model's
  metric).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from .clustered import (N_SWAP, NOT_ESTIMABLE, cluster_labels, cluster_name, cluster_swap_p, codes, mean_inference,
                        no_variation)
from .power import mde_design, mde_from_se, mde_undefined_reason

def mcnemar_exact(y_a, y_b) -> dict:
    """Exact McNemar test of paired 0/1 outcomes: b = a-only successes, c = b-only, p = binomial test of b vs c."""
    y_a = np.asarray(y_a).astype(int)
    y_b = np.asarray(y_b).astype(int)
    table = np.array([[np.sum((y_a == 1) & (y_b == 1)), np.sum((y_a == 1) & (y_b == 0))],
                      [np.sum((y_a == 0) & (y_b == 1)), np.sum((y_a == 0) & (y_b == 0))]])
    b, c = int(table[0, 1]), int(table[1, 0])
    if not b + c:                    # every pair alike: the exact test has nothing to refer to
        return {"discordant_a": 0, "discordant_b": 0, "statistic": np.nan, "p_value": np.nan,
                "test": no_variation(y_a.size, "pairs")}
    return {"discordant_a": b, "discordant_b": c, "statistic": float(min(b, c)),
            "p_value": float(mcnemar(table, exact=True).pvalue), "test": "McNemar exact (binomial on discordant pairs)"}


def wilcoxon_paired(x, y=None) -> dict:
    """Wilcoxon signed-rank test of paired differences ``x - y`` (or of ``x`` when ``y`` is None); zero differences
    dropped (Wilcoxon's convention, scipy ``zero_method="wilcox"``)."""
    d = np.asarray(x, dtype=float) - (0 if y is None else np.asarray(y, dtype=float))
    d = d[np.isfinite(d)]
    nz = d[d != 0]
    if nz.size == 0:                 # every difference 0: no test (its p is not 1 but undefined)
        return {"statistic": np.nan, "p_value": np.nan, "n_nonzero": 0, "test": no_variation(d.size, "pairs")}
    r = stats.wilcoxon(nz)
    return {"statistic": float(r.statistic), "p_value": float(r.pvalue), "n_nonzero": int(nz.size),
            "test": "Wilcoxon signed-rank"}


def _paired_frame(df, outcome, model, a, b, unit):
    wide = df[df[model].isin([a, b])].pivot_table(index=unit, columns=model, values=outcome, aggfunc="mean")
    return wide.dropna(subset=[a, b]) if a in wide and b in wide else wide.iloc[:0]


def stratified_paired_difference(df: pd.DataFrame, outcome: str, a: str, b: str, model: str = "model",
                                 unit: str = "prompt_id", stratum: str = "stratum", weight: str = "weight",
                                 alpha: float = 0.05, fpc: bool = False) -> dict:
    """Model ``a`` minus model ``b`` on ``outcome`` over *every unit of the population* a stratified sample was
    drawn from: the per-unit differences of the units both answered, averaged by the stratified estimator
    (:func:`biaslab.stats.stratified.stratified_mean`: W_h = N_h/N from the sample's design weights, stratified
    variance, t on Satterthwaite's df; Cochran 1977 ch. 5; no FPC unless ``fpc``). A unit either model left
    without an outcome (a tie) is left out within its stratum, which keeps its weight. Units are independent (each
    its own cluster). Returns the columns of :func:`paired_difference` (``mean_a``/``mean_b`` weighted alike)."""
    from .stratified import stratified_mean
    sub = df[df[model].isin([a, b])]
    design = sub.drop_duplicates(unit).set_index(unit)[[stratum, weight]]
    wide = sub.pivot_table(index=unit, columns=model, values=outcome, aggfunc="mean").reindex(design.index)
    wide = wide.reindex(columns=[a, b])
    both = wide[a].notna() & wide[b].notna()
    d = (wide[a] - wide[b]).where(both)
    h, w = design[stratum].to_numpy(), design[weight].to_numpy(float)
    r = stratified_mean(d.to_numpy(float), h, w, null=0.0, alpha=alpha, fpc=fpc)
    ma = stratified_mean(wide[a].where(both).to_numpy(float), h, w)["estimate"]
    mb = stratified_mean(wide[b].where(both).to_numpy(float), h, w)["estimate"]
    method = r["method"] if r["method"].startswith("stratified") else f"stratified, design-weighted: {r['method']}"
    ci_method, test = "t interval of the " + method, "design-based t (two-sided): " + method
    if r["method"].startswith(NOT_ESTIMABLE):
        ci_method = test = r["method"]
    return {"model_a": a, "model_b": b, "n_pairs": int(both.sum()), "n_clusters": int(both.sum()), "df": r["df"],
            "mean_a": ma, "mean_b": mb, "difference": r["estimate"], "se_naive": np.nan, "se_cluster": r["se"],
            "design_effect": r["design_effect"], "n_population": r["n_population"], "n_eff": r["n_eff"],
            "ci_low": r["ci_low"], "ci_high": r["ci_high"], "ci_method": ci_method, "test": test, "p_method": test,
            "statistic": r["t"], "p_value": r["p_value"], "null_value": 0.0, "estimator": method,
            "mde": mde_from_se(r["se"], r["df"], alpha), "mde_note": mde_undefined_reason(r["se"]),
            "mde_design": f"paired, stratified sample of {int(both.sum()):,} units weighted to "
                          f"{r['n_population']:,.0f}, t({r['df']:.1f})"}


def paired_difference(df: pd.DataFrame, outcome: str, a: str, b: str, cluster: str | Sequence[str] | None,
                      model: str = "model", unit: str = "prompt_id", binary: bool | None = None,
                      seed: int = 0, alpha: float = 0.05, n_boot: int | None = None, stratified: bool = False) -> dict:
    """Model ``a`` minus model ``b`` on ``outcome``, paired by ``unit`` (the prompt), inference clustered on
    ``cluster`` (a column constant within each unit, or two columns for a crossed design). Returns model_a, model_b,
    n_pairs, n_clusters, df, mean_a, mean_b, difference, se_naive, se_cluster, design_effect, ci_low, ci_high,
    ci_method, test (= p_method), statistic, p_value, null_value (0), mde, mde_note (why it is undefined), mde_design,
    and, where clusters hold several prompts, p_naive / test_naive (the exact test over prompts; see the module
    docstring). ``n_boot``: the wild bootstrap's draws where it is used (default 9,999). ``stratified``: ``df``
    is a stratified sample (``stratum``, ``weight`` columns) whose population is the estimand:
    :func:`stratified_paired_difference`, with the exact test of the sampled units (unweighted) kept as
    ``p_naive``."""
    if binary is None:
        binary = set(pd.unique(df[outcome].dropna())) <= {0, 1, True, False}
    wide = _paired_frame(df, outcome, model, a, b, unit)
    if stratified:
        res = stratified_paired_difference(df, outcome, a, b, model=model, unit=unit, alpha=alpha)
        exact = mcnemar_exact(wide[a], wide[b]) if binary else wilcoxon_paired((wide[a] - wide[b]).to_numpy(float))
        return {**res, "p_naive": exact["p_value"],
                "test_naive": exact["test"] + " (the sampled units, unweighted)"}
    out = {"model_a": a, "model_b": b, "n_pairs": len(wide)}
    if wide.empty:
        return {**out, "difference": np.nan, "ci_method": "no prompt answered by both models"}
    first = df.drop_duplicates(unit).set_index(unit)
    labels = cluster_labels(first.reindex(wide.index), cluster) if cluster else None
    d = (wide[a] - wide[b]).to_numpy(dtype=float)
    kw = {"n_boot": n_boot} if n_boot else {}
    r = mean_inference(d, labels, null=0.0, alpha=alpha, seed=seed, name=cluster_name(cluster) if cluster else "", **kw)
    exact = mcnemar_exact(wide[a], wide[b]) if binary else wilcoxon_paired(d)
    clustered = bool(labels is not None and r["n_clusters"] < len(d))     # some cluster holds several prompts
    test = ({"test": r["p_method"], "statistic": r["statistic"], "p_value": r["p_value"]} if clustered else exact)
    naive = ({"p_naive": exact["p_value"], "test_naive": exact["test"] + " (prompts treated as independent)"}
             if clustered else {})
    g = r["n_clusters"]
    return {**out, "n_clusters": g, "df": r["df"], "mean_a": float(wide[a].mean()), "mean_b": float(wide[b].mean()),
            "difference": r["estimate"], "se_naive": r["se_naive"], "se_cluster": r["se"],
            "design_effect": r["design_effect"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "ci_method": r["ci_method"], "test": test["test"], "p_method": test["test"], "statistic": test["statistic"],
            "p_value": test["p_value"], "null_value": 0.0,
            "mde": mde_from_se(r["se"], r["df"] if clustered else None, alpha, se_naive=r["se_naive"]),
            "mde_note": mde_undefined_reason(r["se"], g if clustered else None, r["se_naive"]),
            "mde_design": mde_design("paired", len(d), g if clustered else None, r["design_effect"],
                                     cluster_name(cluster)), **naive}


def paired_differences(df: pd.DataFrame, outcome: str, cluster: str | None, by: Sequence[str] | str | None = None,
                       model: str = "model", **kw) -> pd.DataFrame:
    """:func:`paired_difference` for every pair of models, within each group of ``by``."""
    by = [by] if isinstance(by, str) else list(by or [])
    parts = [((), df)] if not by else df.groupby(by, sort=False, observed=True)
    rows = []
    for key, part in parts:
        key = key if isinstance(key, tuple) else (key,)
        models = list(pd.unique(part[model]))
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                rows.append({**dict(zip(by, key)), **paired_difference(part, outcome, a, b, cluster, model=model, **kw)})
    return pd.DataFrame(rows)


def _subgroup_labels(df: pd.DataFrame, factors: Sequence[str]) -> np.ndarray:
    """One label per row: the subgroup (combination of ``factors``) it belongs to."""
    return df.groupby(list(factors), sort=True, observed=True, dropna=False).ngroup().to_numpy()


def subgroup_metric_intervals(df: pd.DataFrame, outcome: str, factors: Sequence[str],
                              cluster: str | Sequence[str] | None, model: str = "model", ideal: float = 0.0,
                              alpha: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Per model: the deviation metric (eq. 4, ideal value ``ideal``) of its subgroup rates, with the interval of
    the mean of its linearization pseudo-values (:func:`biaslab.stats.subgroups.deviation_metric_pseudo_values`)
    under the rule of :mod:`biaslab.stats.clustered`: CR1 (one-way, or two-way for a crossed ``cluster``) with
    t(G - 1), or the wild cluster restricted bootstrap with fewer than 30 clusters. Columns: model, factors,
    n_subgroups, estimate, se, ci_low, ci_high (within the metric's range), n_clusters, df, ci_method."""
    from .subgroups import deviation_metric_pseudo_values
    rows = []
    for m, part in df[df[outcome].notna()].groupby(model, sort=False):      # units without an outcome: left out
        labels = _subgroup_labels(part, factors)
        dm, pseudo, single = deviation_metric_pseudo_values(part[outcome], labels, ideal)
        r = _metric_inference(pseudo, part, cluster, single, np.unique(labels).size, alpha, seed)
        # the metric's range: [0, max(C, 1 - C)] for 0/1 outcomes (a symmetric interval can leave it with few
        # clusters); clipping keeps the coverage and says so
        top = max(ideal, 1 - ideal) if set(pd.unique(part[outcome])) <= {0, 1} else np.inf
        lo, hi = (max(r["ci_low"], 0.0), min(r["ci_high"], top)) if np.isfinite(r["ci_low"]) else (np.nan, np.nan)
        clipped = f" (clipped to the metric's range [0, {top:g}])" if (lo, hi) != (r["ci_low"], r["ci_high"]) \
            and np.isfinite(lo) else ""
        rows.append({model: m, "factors": " x ".join(factors), "n_subgroups": int(np.unique(labels).size),
                     "estimate": dm, "se": r["se"], "ci_low": lo, "ci_high": hi, "n_clusters": r["n_clusters"],
                     "df": r["df"], "ci_method": r["ci_method"] + clipped})
    return pd.DataFrame(rows)


def _metric_inference(pseudo: np.ndarray, rows: pd.DataFrame, cluster, single: int, n_sub: int, alpha: float,
                      seed: int, null: float = 0.0) -> dict:
    """:func:`biaslab.stats.clustered.mean_inference` of a metric's pseudo-values (its interval), or its undefined
    result (NaN interval, ``ci_method`` saying why) where ``single`` subgroups of one unit leave the variance
    unestimable."""
    labels = cluster_labels(rows, cluster)
    if not single:
        return mean_inference(pseudo, labels, null=null, alpha=alpha, seed=seed,
                              name=cluster_name(cluster) if cluster else "")
    g = len(pd.unique(np.asarray(labels if not isinstance(labels, list) else labels[0]))) if cluster else len(rows)
    why = (f"undefined: {single} of {n_sub} subgroups hold one prompt, which its own rate fits exactly (leverage 1): "
           "the linearized variance is not estimable")
    return {"se": np.nan, "ci_low": np.nan, "ci_high": np.nan, "n_clusters": g, "df": g - 1, "ci_method": why}


def paired_metric_pseudo_values(df: pd.DataFrame, outcome: str, factors: Sequence[str], a: str, b: str,
                                model: str = "model", ideal: float = 0.0):
    """The linearized pseudo-values of ``DM_a - DM_b`` (eq. 4) over the subgroups both models answered: one value per
    response row of either model (``diff + N psi_i``, ``psi_i`` the row's influence on the difference, N the rows of
    both), whose mean is the difference. Returns (values, the stacked rows, subgroups of one unit, the common
    subgroups, {model: (metric, subgroup rates)}), or None when no subgroup is common."""
    from .subgroups import deviation_metric_pseudo_values
    factors = list(factors)
    sub = df[df[model].isin([a, b]) & df[outcome].notna()]
    keys = {m: set(map(tuple, g[factors].astype(str).drop_duplicates().to_numpy())) for m, g in sub.groupby(model)}
    common = keys.get(a, set()) & keys.get(b, set())
    if not common:
        return None
    sub = sub[[k in common for k in map(tuple, sub[factors].astype(str).to_numpy())]]
    parts, rates, single = [], {}, 0
    for m, sign in ((a, 1.0), (b, -1.0)):
        p = sub[sub[model] == m]
        labels = _subgroup_labels(p, factors)
        dm, pseudo, k = deviation_metric_pseudo_values(p[outcome], labels, ideal)
        rates[m], single = (dm, p.groupby(factors, sort=True, observed=True)[outcome].mean()), single + k
        parts.append((sign * (pseudo - dm) / len(p), p))       # each row's influence on DM_a - DM_b
    psi = np.concatenate([x for x, _ in parts])
    stacked = pd.concat([p for _, p in parts], ignore_index=True)
    return rates[a][0] - rates[b][0] + psi.size * psi, stacked, single, common, rates


def deviation_metric_swap_design(df: pd.DataFrame, outcome: str, factors: Sequence[str], a: str, b: str,
                                 cluster: str | Sequence[str] | None, model: str = "model", ideal: float = 0.0):
    """The raw answers the template-swap test of ``DM_a - DM_b`` (eq. 4) exchanges: per cluster (the first column of
    ``cluster``: SSQA's template, not its crossed stigma; None: each ``prompt_id``) and subgroup both models answered,
    each model's sum of ``outcome`` (two G x S arrays), and the statistic of the two models' totals, ``DM_a - DM_b``
    from the subgroup rates ``total / n_s``. Returns (sums_a, sums_b, statistic), or a sentence saying why there is
    no test: no common subgroup, or cells where the two models answered different numbers of prompts (the swap
    exchanges a cluster's answers, so both must answer the same prompts)."""
    factors = list(factors)
    sub = df[df[model].isin([a, b]) & df[outcome].notna()]
    keys = pd.Series(list(map(tuple, sub[factors].astype(str).to_numpy())), index=sub.index)
    common = set(keys[sub[model] == a]) & set(keys[sub[model] == b])
    if not common:
        return "no subgroup answered by both models"
    sub, keys = sub[keys.isin(common)], keys[keys.isin(common)]
    first = "prompt_id" if cluster is None else cluster if isinstance(cluster, str) else list(cluster)[0]
    g_codes, s_codes = codes(sub[first].to_numpy()), codes(keys.map(str))
    g, k = int(g_codes.max()) + 1, int(s_codes.max()) + 1
    cell = g_codes * k + s_codes
    arm = {m: (np.bincount(cell[w], weights=sub.loc[w, outcome].to_numpy(float), minlength=g * k).reshape(g, k),
               np.bincount(cell[w], minlength=g * k).reshape(g, k))
           for m in (a, b) for w in [(sub[model] == m).to_numpy()]}
    unpaired = int((arm[a][1] != arm[b][1]).sum())
    if unpaired:
        return (f"no swap test: in {unpaired} {first} x subgroup cells the two models answered different numbers of "
                "prompts (the swap exchanges a cluster's answers)")
    n_s = arm[a][1].sum(axis=0).astype(float)

    def statistic(ta, tb):
        return np.abs(ta / n_s - ideal).mean(axis=-1) - np.abs(tb / n_s - ideal).mean(axis=-1)
    return arm[a][0], arm[b][0], statistic


def paired_subgroup_test(df: pd.DataFrame, outcome: str, factors: Sequence[str], a: str, b: str,
                         cluster: str | Sequence[str] | None, model: str = "model", ideal: float = 0.0,
                         alpha: float = 0.05, seed: int = 0, n_swaps: int = N_SWAP) -> dict:
    """Paired comparison of two models' subgroup rates over the subgroups defined by ``factors`` that both answered
    (the paired alternative to the paper's two-sample KS test).

    **Test**: the template-swap randomization test of ``DM_a - DM_b`` (eq. 4; :func:`deviation_metric_swap_design`,
    :func:`biaslab.stats.clustered.cluster_swap_p`): the two models' answers exchanged inside a random subset of the
    clusters (all 2^G subsets when ``2^G <= n_swaps``), the difference recomputed from the swapped answers, two-sided
    ``p = (1 + #{|T*| >= |T|}) / (B + 1)`` (the exact share when enumerated). Exact under the null that the two
    models' answers are exchangeable within each template, with any number of templates (Canay, Romano & Shaikh
    2017); a t on the metric's linearized pseudo-values rejected a true null up to 5 times too often at the plan's
    levels (docs/calibration.md). **Interval** (not the test's dual): the difference is linear, to first order, in
    both models' influence values (:func:`biaslab.stats.subgroups.deviation_metric_pseudo_values`), so the mean of
    their paired pseudo-values gets the interval of a mean under the rule of :mod:`biaslab.stats.clustered` — CR1
    (one- or two-way) with t(G - 1), or the wild cluster restricted bootstrap with fewer than 30 clusters; it can
    under-cover where rates lie near the ideal value. The Wilcoxon signed-rank test over subgroups of
    ``rate_a(g) - rate_b(g)`` is kept as ``p_naive``: it treats subgroups as independent, which they are not when
    they share templates."""
    factors = list(factors)
    out = {"model_a": a, "model_b": b, "factors": " x ".join(factors)}
    lin = paired_metric_pseudo_values(df, outcome, factors, a, b, model, ideal)
    if lin is None:
        return {**out, "n_subgroups": 0, "p_value": np.nan}
    values, stacked, single, common, rates = lin
    out["n_subgroups"] = len(common)
    diff = rates[a][0] - rates[b][0]
    r = _metric_inference(values, stacked, cluster, single, 2 * len(common), alpha, seed)
    design = deviation_metric_swap_design(df, outcome, factors, a, b, cluster, model, ideal)
    if isinstance(design, str):
        test = {"p_value": np.nan, "statistic": np.nan, "n_clusters": r["n_clusters"], "test": design}
    else:
        test = cluster_swap_p(*design, n_max=n_swaps, seed=seed)
        first = "prompt" if cluster is None else cluster if isinstance(cluster, str) else list(cluster)[0]
        test["test"] = (f"{NOT_ESTIMABLE} (no variation between the two models' answers in any of the "
                        f"{test['n_clusters']} {first} clusters)" if test["no_variation"] else
                        f"randomization test, the two models' answers swapped within {first} clusters ("
                        f"{'all ' if test['enumerated'] else ''}{test['n_draws']:,} "
                        f"{'' if test['enumerated'] else 'random '}swaps), G = {test['n_clusters']}, two-sided")
    w = wilcoxon_paired(rates[a][1].to_numpy(), rates[b][1].reindex(rates[a][1].index).to_numpy())
    return {**out, "metric_a": rates[a][0], "metric_b": rates[b][0], "metric_difference": diff,
            "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "ci_method": r["ci_method"] + " on the paired linearized pseudo-values (not the test's dual)",
            "mean_rate_difference": float(np.mean(rates[a][1].to_numpy() - rates[b][1].reindex(rates[a][1].index))),
            "test": test["test"], "statistic": test["statistic"], "p_value": test["p_value"], "null_value": 0.0,
            "n_clusters": test["n_clusters"], "df": r["df"],
            "test_naive": w["test"] + " over subgroups (subgroups treated as independent)", "p_naive": w["p_value"]}
