"""Intervals for rates and means that respect how the prompts were generated (beyond the four papers).

Template-generated benchmarks are *clustered*: prompts filled from one template (or one scenario) share wording, so
their outcomes are correlated and ``n`` prompts carry less information than ``n`` independent draws. Every interval
here takes the benchmark's generating unit (``Benchmark.cluster``), follows the one rule of
:mod:`biaslab.stats.clustered` (:func:`rate_intervals`: Korn-Graubard; :func:`mean_intervals`: CR1 t(G - 1), or the
wild cluster bootstrap below 30 clusters) and says how it was computed in ``ci_method``. Without the t(G - 1)
adjustment, Clopper-Pearson on n/deff covers under 84 % with 4 templates (tests/test_clustered.py).

Statistics that are not means (the deviation metric of subgroup rates, BBQ's bias-score ratios) get the rule through
their linearization pseudo-values, not a percentile cluster bootstrap (Davison & Hinkley 1997, §3.8; kept in
``tests/oracles.py`` as a reference), which under-covers with 12 clusters and would give one effect two intervals.
:func:`hodges_lehmann` is the estimate and interval that go with a Wilcoxon signed-rank test.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .clustered import FEW_CLUSTERS, cluster_labels, cluster_name, mean_inference, rate_inference


def rate_intervals(df: pd.DataFrame, outcome: str, cluster: str | Sequence[str] | None,
                   by: Sequence[str] | str | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """A 0/1 (or [0, 1]) outcome's rate per group of ``by`` with the cluster-robust interval of
    :func:`biaslab.stats.clustered.rate_inference` (Korn-Graubard: Clopper-Pearson on the df-adjusted effective n,
    CR1 design effect, t(G - 1); ``cluster`` one column, or two for a crossed design; None: units independent).

    Columns: [by...], n, n_clusters, df, k, rate, se_naive (``sqrt(p(1-p)/n)``), se_cluster (CR1), design_effect,
    n_effective (Korn-Graubard's n*), ci_low, ci_high, ci_method.
    """
    by = [by] if isinstance(by, str) else list(by or [])
    if df[outcome].isna().any():
        raise ValueError(f"{outcome!r} has missing values: drop or code them first")
    parts = [((), df)] if not by else df.groupby(by, sort=True, observed=True, dropna=False)
    rows = []
    for key, part in parts:
        key = key if isinstance(key, tuple) else (key,)
        r = rate_inference(part[outcome].to_numpy(dtype=float), cluster_labels(part, cluster), alpha=alpha)
        rows.append({**dict(zip(by, key)), "n": r["n"], "n_clusters": r["n_clusters"], "df": r["df"], "k": r["k"],
                     "rate": r["rate"], "se_naive": r["se_naive"], "se_cluster": r["se"],
                     "design_effect": r["design_effect"], "n_effective": r["n_effective"], "ci_low": r["ci_low"],
                     "ci_high": r["ci_high"], "ci_method": r["ci_method"]})
    return pd.DataFrame(rows)


def mean_intervals(df: pd.DataFrame, value: str, cluster: str | Sequence[str] | None,
                   by: Sequence[str] | str | None = None, alpha: float = 0.05, seed: int = 0,
                   few: int = FEW_CLUSTERS, n_boot: int | None = None) -> pd.DataFrame:
    """Mean of a continuous ``value`` per group with the interval of
    :func:`biaslab.stats.clustered.mean_inference`: cluster-robust (CR1) t(G - 1), or the wild cluster restricted
    bootstrap (Webb weights, test inversion) with fewer than ``few`` clusters in a one-way design. NaN values are
    left out (counted in ``n_missing``). Columns: [by...], n, n_missing, n_clusters, df, mean, sd, se_naive,
    se_cluster, design_effect, ci_low, ci_high, ci_method. ``n_boot``: the wild bootstrap's draws (None: the rule's
    9,999)."""
    by = [by] if isinstance(by, str) else list(by or [])
    parts = [((), df)] if not by else df.groupby(by, sort=True, observed=True, dropna=False)
    rows = []
    for i, (key, part) in enumerate(parts):
        key = key if isinstance(key, tuple) else (key,)
        ok = np.isfinite(part[value].to_numpy(dtype=float))
        part = part[ok]
        r = mean_inference(part[value].to_numpy(dtype=float), cluster_labels(part, cluster), alpha=alpha,
                           few=few, seed=seed + i, name=cluster_name(cluster) if cluster else "",
                           **({"n_boot": n_boot} if n_boot else {}))
        rows.append({**dict(zip(by, key)), "n": r["n"], "n_missing": int((~ok).sum()), "n_clusters": r["n_clusters"],
                     "df": r["df"], "mean": r["estimate"], "sd": r["sd"], "se_naive": r["se_naive"],
                     "se_cluster": r["se"], "design_effect": r["design_effect"], "ci_low": r["ci_low"],
                     "ci_high": r["ci_high"], "ci_method": r["ci_method"]})
    return pd.DataFrame(rows)


def _walsh_averages(d: np.ndarray) -> np.ndarray:
    """The n(n + 1)/2 Walsh averages (d_i + d_j)/2, i <= j, sorted."""
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def hodges_lehmann(d, alpha: float = 0.05) -> dict:
    """One-sample Hodges-Lehmann estimate and the confidence interval that inverts the Wilcoxon signed-rank test
    (Hodges & Lehmann 1963, "Estimates of location based on rank tests", Ann. Math. Stat. 34; Hollander, Wolfe &
    Chicken 2014, *Nonparametric Statistical Methods*, 3rd ed., §3.2-3.3; Bauer 1972, JASA 67).

    The estimate is the median of the Walsh averages W = (d_i + d_j)/2, i <= j. The Wilcoxon statistic of
    d - theta is T+(theta) = #{W > theta} (Tukey), so the test's p-value is a step function of theta that changes
    only at Walsh averages, and the interval {theta: the test of d - theta does not reject at ``alpha``} is
    [W_(l), W_(u)]. It is found by bisection over the gaps between the distinct sorted Walsh averages, each step
    one call of ``scipy.stats.wilcoxon`` (its defaults: exact null distribution for small n without ties, normal
    approximation with tie correction otherwise) at a point inside a gap, so the interval agrees with the p-value
    the table reports by construction. statsmodels, scipy and pingouin have no one-sample Hodges-Lehmann interval
    (R: ``wilcox.test(conf.int = TRUE)``). Returns estimate, ci_low, ci_high (+-inf where no shift is rejected) and
    n (zero differences included in the Walsh averages; the test at the null drops them, scipy's default)."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    out = {"estimate": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "n": int(d.size)}
    if d.size < 2 or np.ptp(d) == 0:
        return out
    w = _walsh_averages(d)
    est, u = float(np.median(w)), np.unique(w)
    out["estimate"] = est

    def accepted(j: int) -> bool:                      # the test of d - theta at a point of gap j: (u[j-1], u[j])
        lo = u[j - 1] if j > 0 else u[0] - 1.0
        hi = u[j] if j < u.size else u[-1] + 1.0
        theta = (lo + hi) / 2.0 if 0 < j < u.size else (hi if j == 0 else lo) + (-1.0 if j == 0 else 1.0)
        return bool(stats.wilcoxon(d - theta).pvalue >= alpha)

    mid = int(np.searchsorted(u, est, side="right"))
    a, b = 0, mid                                      # first accepted gap in [0, mid]
    while a < b:
        c = (a + b) // 2
        a, b = (a, c) if accepted(c) else (c + 1, b)
    first = a
    a, b = mid, u.size                                 # last accepted gap in [mid, len(u)]
    while a < b:
        c = (a + b + 1) // 2
        a, b = (c, b) if accepted(c) else (a, c - 1)
    last = a
    out["ci_low"] = float(u[first - 1]) if first > 0 else -np.inf
    out["ci_high"] = float(u[last]) if last < u.size else np.inf
    return out
