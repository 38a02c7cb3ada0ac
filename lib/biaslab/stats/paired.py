"""Paired model comparisons (beyond the four papers; Miller 2024, "Adding Error Bars to Evals", §4).

Two models scored on the same prompts are a *paired* design: comparing them prompt by prompt removes the variance
that comes from which prompts were drawn, and the comparison's interval must respect the same clusters for both.

* :func:`paired_difference` mean of per-prompt differences ``y_a - y_b`` over prompts both models answered, with the
  one rule of :mod:`biaslab.stats.clustered` applied to the differences (changed in issue 18): cluster-robust CR1
  standard error (one-way, or two-way for a crossed design such as SSQA's template x stigma) with a t(G - 1) interval
  and Wald t(G - 1) test, or, with fewer than 30 clusters in a one-way design, the wild cluster restricted bootstrap
  (Webb weights; p-value and the interval that inverts it). Before, the interval was a percentile cluster bootstrap
  and the test a Wald *z* with 10+ clusters (normal reference with 37 templates, where ``mean_intervals`` used
  t(G - 1)). Where every cluster holds one prompt (independent units) the ``p_value`` is the exact test: McNemar
  (binary outcomes; Edwards 1948 / statsmodels ``mcnemar(exact=True)``) or the Wilcoxon signed-rank test (scipy);
  where prompts share clusters that exact test is kept as ``p_naive``. Each row carries the MDE of this paired
  design (:func:`biaslab.stats.power.mde_from_se` on the paired SE and its df).
* :func:`paired_subgroup_test` the paired alternative to the two-sample KS test of the multi-factor paper (§3.3):
  both models answer the same subgroups, so compare ``d_a(g) - d_b(g)`` subgroup by subgroup (Wilcoxon signed-rank
  over subgroups) and give the difference of the two deviation metrics a cluster-paired bootstrap interval, tested
  by the Wald t(G - 1) on the bootstrap standard error.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from .clustered import cluster_labels, cluster_name, mean_inference
from .power import mde_design, mde_from_se, mde_undefined_reason

WALD = "Wald t(G - 1) on the cluster-paired bootstrap standard error"


def mcnemar_exact(y_a, y_b) -> dict:
    """Exact McNemar test of paired 0/1 outcomes: b = a-only successes, c = b-only, p = binomial test of b vs c."""
    y_a = np.asarray(y_a).astype(int)
    y_b = np.asarray(y_b).astype(int)
    table = np.array([[np.sum((y_a == 1) & (y_b == 1)), np.sum((y_a == 1) & (y_b == 0))],
                      [np.sum((y_a == 0) & (y_b == 1)), np.sum((y_a == 0) & (y_b == 0))]])
    b, c = int(table[0, 1]), int(table[1, 0])
    p = float(mcnemar(table, exact=True).pvalue) if b + c else 1.0
    return {"discordant_a": b, "discordant_b": c, "statistic": float(min(b, c)), "p_value": p,
            "test": "McNemar exact (binomial on discordant pairs)"}


def wilcoxon_paired(x, y=None) -> dict:
    """Wilcoxon signed-rank test of paired differences ``x - y`` (or of ``x`` when ``y`` is None); zero differences
    dropped (Wilcoxon's convention, scipy ``zero_method="wilcox"``)."""
    d = np.asarray(x, dtype=float) - (0 if y is None else np.asarray(y, dtype=float))
    d = d[np.isfinite(d)]
    nz = d[d != 0]
    if nz.size == 0:
        return {"statistic": np.nan, "p_value": 1.0, "n_nonzero": 0, "test": "Wilcoxon signed-rank"}
    r = stats.wilcoxon(nz)
    return {"statistic": float(r.statistic), "p_value": float(r.pvalue), "n_nonzero": int(nz.size),
            "test": "Wilcoxon signed-rank"}


def wald_p(diff: float, se: float, df: float | None = None) -> float:
    """Two-sided p of ``diff / se`` against t(df) (the normal where df is None); NaN when undefined."""
    if not np.isfinite(diff) or not np.isfinite(se):
        return np.nan
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    z = abs(diff) / se
    return float(2 * (stats.norm.sf(z) if df is None or not np.isfinite(df) else stats.t.sf(z, df)))


def _paired_frame(df, outcome, model, a, b, unit):
    wide = df[df[model].isin([a, b])].pivot_table(index=unit, columns=model, values=outcome, aggfunc="mean")
    return wide.dropna(subset=[a, b]) if a in wide and b in wide else wide.iloc[:0]


def paired_difference(df: pd.DataFrame, outcome: str, a: str, b: str, cluster: str | Sequence[str] | None,
                      model: str = "model", unit: str = "prompt_id", binary: bool | None = None,
                      seed: int = 0, alpha: float = 0.05, n_boot: int | None = None) -> dict:
    """Model ``a`` minus model ``b`` on ``outcome``, paired by ``unit`` (the prompt), inference clustered on
    ``cluster`` (a column constant within each unit, or two columns for a crossed design). Returns model_a, model_b,
    n_pairs, n_clusters, df, mean_a, mean_b, difference, se_naive, se_cluster, design_effect, ci_low, ci_high,
    ci_method, test (= p_method), statistic, p_value, null_value (0), mde, mde_note (why it is undefined), mde_design,
    and, where clusters hold several prompts, p_naive / test_naive (the exact test over prompts; see the module
    docstring). ``n_boot``: the wild bootstrap's draws where it is used (default 9,999)."""
    wide = _paired_frame(df, outcome, model, a, b, unit)
    out = {"model_a": a, "model_b": b, "n_pairs": len(wide)}
    if wide.empty:
        return {**out, "difference": np.nan, "ci_method": "no prompt answered by both models"}
    first = df.drop_duplicates(unit).set_index(unit)
    labels = cluster_labels(first.reindex(wide.index), cluster) if cluster else None
    d = (wide[a] - wide[b]).to_numpy(dtype=float)
    kw = {"n_boot": n_boot} if n_boot else {}
    r = mean_inference(d, labels, null=0.0, alpha=alpha, seed=seed, name=cluster_name(cluster) if cluster else "", **kw)
    if binary is None:
        binary = set(pd.unique(df[outcome].dropna())) <= {0, 1, True, False}
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
            "mde": mde_from_se(r["se"], r["df"] if clustered else None, alpha),
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


def _subgroup_cells(df, outcome, factors, cluster, model):
    from .intervals import cluster_totals
    tot, idx = cluster_totals(df, [outcome], cluster, cells=[model] + list(factors))
    return tot, idx


def _model_columns(idx, m, common=None):
    mask = np.asarray(idx.get_level_values(0) == m)
    keys = idx[mask].droplevel(0)
    if common is None:
        return np.where(mask)[0], keys
    return np.where(mask)[0][keys.get_indexer(common)], keys


def deviation_metric_rows(rates: np.ndarray, ideal: float = 0.0) -> np.ndarray:
    """The multi-factor paper's deviation metric (eq. 4: the mean of |rate - C| over subgroups) along the last axis,
    NaN-skipping (a subgroup absent from a bootstrap resample does not count)."""
    with np.errstate(invalid="ignore"):
        return np.nanmean(np.abs(np.asarray(rates, dtype=float) - ideal), axis=-1)


def subgroup_metric_intervals(df: pd.DataFrame, outcome: str, factors: Sequence[str], cluster: str,
                              model: str = "model", metric: Callable[[np.ndarray], np.ndarray] = deviation_metric_rows,
                              n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Per model: ``metric`` of its subgroup rates (default: the deviation metric, eq. 4) with a cluster-bootstrap
    percentile interval (clusters resampled, subgroup rates recomputed from the resampled totals)."""
    from .intervals import bootstrap_totals
    tot, idx = _subgroup_cells(df, outcome, factors, cluster, model)
    rows = []
    for m in pd.unique(df[model]):
        cols, keys = _model_columns(idx, m)
        b = bootstrap_totals({k: v[:, cols] for k, v in tot.items()},
                             lambda t: metric(t[outcome] / np.where(t["_n"] > 0, t["_n"], np.nan)),
                             n_boot=n_boot, seed=seed, alpha=alpha, label=cluster)
        rows.append({model: m, "factors": " x ".join(factors), "n_subgroups": len(cols), **b})
    return pd.DataFrame(rows)


def paired_subgroup_test(df: pd.DataFrame, outcome: str, factors: Sequence[str], a: str, b: str,
                         cluster: str, metric: Callable[[np.ndarray], np.ndarray] = deviation_metric_rows,
                         model: str = "model", n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Paired comparison of two models' subgroup rates over the subgroups defined by ``factors`` (the paired
    alternative to the paper's two-sample KS test).

    A cluster-paired bootstrap interval for ``metric(rates_a) - metric(rates_b)`` (default: the deviation metric,
    eq. 4): each replicate resamples the clusters once and recomputes both models' subgroup rates on that resample,
    so the interval keeps the pairing and the clustering; ``p_value`` is the Wald z of the difference on that
    bootstrap's standard error. The Wilcoxon signed-rank test over subgroups of ``rate_a(g) - rate_b(g)`` (subgroups
    both models answered) is kept as ``p_naive``: it treats subgroups as independent, which they are not when they
    share templates. ``metric`` maps an array of rates (last axis: subgroups) to one value per leading index.
    """
    from .intervals import bootstrap_totals
    factors = list(factors)
    sub = df[df[model].isin([a, b])]
    tot, idx = _subgroup_cells(sub, outcome, factors, cluster, model)
    _, ka = _model_columns(idx, a)
    _, kb = _model_columns(idx, b)
    common = ka.intersection(kb)
    out = {"model_a": a, "model_b": b, "factors": " x ".join(factors), "n_subgroups": len(common)}
    if len(common) == 0:
        return {**out, "p_value": np.nan}
    ia, _ = _model_columns(idx, a, common)
    ib, _ = _model_columns(idx, b, common)

    def rates(t, cols):
        return t[outcome][..., cols] / np.where(t["_n"][..., cols] > 0, t["_n"][..., cols], np.nan)

    full = {k: v.sum(axis=0) for k, v in tot.items()}
    ra, rb = rates(full, ia), rates(full, ib)
    w = wilcoxon_paired(ra, rb)
    boot = bootstrap_totals(tot, lambda t: metric(rates(t, ia)) - metric(rates(t, ib)), n_boot=n_boot, seed=seed,
                            alpha=alpha, label=f"{cluster}, paired")
    return {**out, "metric_a": float(metric(ra)), "metric_b": float(metric(rb)),
            "metric_difference": boot["estimate"], "ci_low": boot["ci_low"], "ci_high": boot["ci_high"],
            "ci_method": boot["ci_method"], "mean_rate_difference": float(np.mean(ra - rb)),
            "test": WALD, "statistic": boot["estimate"] / boot["se"] if boot["se"] else np.nan,
            "p_value": wald_p(boot["estimate"], boot["se"], boot["n_clusters"] - 1), "n_clusters": boot["n_clusters"],
            "test_naive": w["test"] + " over subgroups (subgroups treated as independent)", "p_naive": w["p_value"]}
