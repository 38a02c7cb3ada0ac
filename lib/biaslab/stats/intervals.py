"""Intervals for rates that respect how the prompts were generated (beyond the four papers).

Template-generated benchmarks are *clustered*: prompts filled from one template (or one scenario) share wording, so
their outcomes are correlated and the ``n`` prompts carry less information than ``n`` independent draws. Every
interval here takes the benchmark's generating unit (``Benchmark.cluster``) and says how it was computed in a
``ci_method`` column.

* :func:`clopper_pearson` exact binomial interval (Clopper & Pearson 1934), the Beta-quantile form
  ``[B(a/2; k, n-k+1), B(1-a/2; k+1, n-k)]`` = ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``.
* :func:`design_effect` Kish's design effect of a mean, ``deff = V_cluster / V_naive``: the cluster-robust
  (Liang-Zeger sandwich) variance of the mean over the iid variance ``s^2 / n`` (Cameron & Miller 2015, "A
  practitioner's guide to cluster-robust inference", §II; Miller 2024, "Adding Error Bars to Evals", eq. 4). For
  equal clusters of size m and intra-cluster correlation rho it estimates ``1 + (m - 1) rho``.
* :func:`cluster_bootstrap` the cluster (block) bootstrap: resample whole clusters with replacement and recompute
  the statistic (Davison & Hinkley 1997, §3.8; Field & Welsh 2007). **Percentile** intervals: BCa needs a jackknife
  over clusters for every statistic and subgroup, and the statistics here (rates, deviation metrics, paired
  differences) are not pivotal enough for BCa's acceleration estimate to be stable with 20-40 clusters.
* :func:`rate_intervals` a rate and its interval per group (model, subgroup, ...): the cluster bootstrap when the
  group has at least ``min_clusters`` clusters (a bootstrap over fewer clusters under-covers), otherwise
  Clopper-Pearson on the *effective* sample size ``n / deff`` (Korn & Graubard 1998, "Confidence intervals for
  proportions with small expected number of positive counts estimated from survey data"), with deff from the same
  data floored at 1.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

#: fewest clusters for which a group's interval comes from the cluster bootstrap (below: effective-n Clopper-Pearson)
MIN_CLUSTERS = 10


def clopper_pearson(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson) interval for ``k`` successes in ``n`` trials; vectorised, non-integer ``k``/``n``
    allowed (for effective sample sizes). ``n = 0`` gives ``(nan, nan)``."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k <= 0, 0.0, stats.beta.ppf(alpha / 2, np.maximum(k, 1e-12), n - k + 1))
        hi = np.where(k >= n, 1.0, stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1e-12)))
    bad = n <= 0
    lo = np.where(bad, np.nan, lo)
    hi = np.where(bad, np.nan, hi)
    return lo, hi


def _cluster_codes(df: pd.DataFrame, cluster: str | None) -> np.ndarray:
    if cluster is None:
        return np.arange(len(df))
    if cluster not in df.columns:
        raise KeyError(f"cluster column {cluster!r} not in the table; columns are {list(df.columns)}")
    return pd.factorize(df[cluster], sort=True)[0]


def design_effect(y, clusters) -> float:
    """Kish's design effect of the mean of ``y``: cluster-robust variance over naive variance.

    ``V_naive = sum (y_i - ybar)^2 / n^2``; ``V_cluster = sum_g (sum_{i in g} (y_i - ybar))^2 / n^2`` (the
    Liang-Zeger sandwich for an intercept-only model, without small-sample factor). Returns NaN when ``y`` is
    constant (both variances 0). Cameron & Miller 2015, eq. (6); Miller 2024 §2.2.
    """
    y = np.asarray(y, dtype=float)
    codes = pd.factorize(np.asarray(clusters))[0]
    e = y - y.mean()
    v_naive = np.sum(e ** 2)
    v_cl = np.sum(np.bincount(codes, weights=e) ** 2)
    return float(v_cl / v_naive) if v_naive > 0 else float("nan")


def _multinomial_weights(n_clusters: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot x G) counts of how often each cluster is drawn in a resample of G clusters with replacement."""
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot).astype(float)


def bootstrap_rate(y, clusters, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Cluster-bootstrap replicates of the mean of ``y`` (ratio of resampled cluster sums to cluster sizes)."""
    y = np.asarray(y, dtype=float)
    codes = pd.factorize(np.asarray(clusters))[0]
    s = np.bincount(codes, weights=y)
    m = np.bincount(codes).astype(float)
    w = _multinomial_weights(len(s), n_boot, np.random.default_rng(seed))
    return (w @ s) / (w @ m)


def rate_intervals(df: pd.DataFrame, outcome: str, cluster: str | None, by: Sequence[str] | str | None = None,
                   alpha: float = 0.05, n_boot: int = 2000, seed: int = 0,
                   min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """A 0/1 (or [0, 1]) outcome's rate per group of ``by`` with a cluster-aware interval.

    Columns: [by...], n, n_clusters, k (sum of the outcome), rate, se_naive (``sqrt(p(1-p)/n)``), se_cluster
    (bootstrap standard deviation, or ``se_naive * sqrt(deff)`` where the analytic deff is used), design_effect,
    n_effective (``n / max(deff, 1)``), ci_low, ci_high, ci_method.
    """
    by = [by] if isinstance(by, str) else list(by or [])
    if df[outcome].isna().any():
        raise ValueError(f"{outcome!r} has missing values: drop or code them first")
    parts = [((), df)] if not by else df.groupby(by, sort=True, observed=True, dropna=False)
    rows = []
    for i, (key, part) in enumerate(parts):
        key = key if isinstance(key, tuple) else (key,)
        y = part[outcome].to_numpy(dtype=float)
        cl = _cluster_codes(part, cluster)
        n, k = len(y), float(y.sum())
        p = k / n if n else np.nan
        g = int(len(np.unique(cl)))
        se_naive = float(np.sqrt(p * (1 - p) / n)) if n else np.nan
        deff = design_effect(y, cl) if n > 1 else np.nan
        deff_floor = 1.0 if not np.isfinite(deff) else max(deff, 1.0)
        n_eff = n / deff_floor
        if cluster is not None and g >= min_clusters and 0 < p < 1:
            reps = bootstrap_rate(y, cl, n_boot=n_boot, seed=seed + i)
            lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
            se_cl = float(reps.std(ddof=1))
            method = f"cluster bootstrap percentile ({cluster}, {n_boot} resamples)"
        else:
            lo, hi = clopper_pearson(p * n_eff, n_eff, alpha)
            lo, hi = float(lo), float(hi)
            se_cl = se_naive * np.sqrt(deff_floor)
            method = ("Clopper-Pearson" if cluster is None or deff_floor == 1.0 else
                      f"Clopper-Pearson on effective n = n/deff ({cluster})")
        rows.append({**dict(zip(by, key)), "n": n, "n_clusters": g, "k": k, "rate": p, "se_naive": se_naive,
                     "se_cluster": se_cl, "design_effect": deff, "n_effective": n_eff,
                     "ci_low": float(lo), "ci_high": float(hi), "ci_method": method})
    return pd.DataFrame(rows)


def resample_clusters(df: pd.DataFrame, cluster: str, rng: np.random.Generator) -> pd.DataFrame:
    """One cluster-bootstrap resample of ``df``: G clusters drawn with replacement, all their rows kept. A cluster
    drawn twice appears twice, with the copy's cluster id suffixed (``#1``) so downstream groupings stay apart."""
    groups = df.groupby(cluster, sort=True, observed=True).indices
    keys = list(groups)
    pick = rng.integers(0, len(keys), size=len(keys))
    seen: dict[int, int] = {}
    pieces = []
    for j in pick:
        c = seen.get(j, 0)
        seen[j] = c + 1
        piece = df.iloc[groups[keys[j]]]
        if c:
            piece = piece.assign(**{cluster: piece[cluster].astype(str) + f"#{c}"})
        pieces.append(piece)
    return pd.concat(pieces, ignore_index=True)


def cluster_bootstrap(df: pd.DataFrame, statistic: Callable[[pd.DataFrame], float], cluster: str,
                      n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Percentile cluster bootstrap of any scalar ``statistic(df)`` (e.g. a deviation metric, a difference of two
    models' metrics on the same resampled templates: resampling clusters once for both models keeps the pairing).

    Returns estimate, se (bootstrap SD), ci_low, ci_high, n_clusters, n_boot (finite replicates), ci_method.
    """
    rng = np.random.default_rng(seed)
    est = float(statistic(df))
    reps = np.array([statistic(resample_clusters(df, cluster, rng)) for _ in range(n_boot)], dtype=float)
    reps = reps[np.isfinite(reps)]
    lo, hi = (np.quantile(reps, [alpha / 2, 1 - alpha / 2]) if reps.size else (np.nan, np.nan))
    return {"estimate": est, "se": float(reps.std(ddof=1)) if reps.size > 1 else np.nan, "ci_low": float(lo),
            "ci_high": float(hi), "n_clusters": int(df[cluster].nunique()), "n_boot": int(reps.size),
            "ci_method": f"cluster bootstrap percentile ({cluster}, {n_boot} resamples)"}


def mean_intervals(df: pd.DataFrame, value: str, cluster: str | None, by: Sequence[str] | str | None = None,
                   alpha: float = 0.05, n_boot: int = 2000, seed: int = 0,
                   min_clusters: int = MIN_CLUSTERS) -> pd.DataFrame:
    """Mean of a continuous ``value`` per group with a cluster-aware interval: cluster bootstrap percentile with at
    least ``min_clusters`` clusters, otherwise a t interval on ``G - 1`` degrees of freedom with the cluster-robust
    (design-effect inflated) standard error (Cameron & Miller 2015 §VI recommend t(G-1) critical values with few
    clusters). Columns: [by...], n, n_clusters, mean, sd, se_naive, se_cluster, design_effect, ci_low, ci_high,
    ci_method."""
    by = [by] if isinstance(by, str) else list(by or [])
    parts = [((), df)] if not by else df.groupby(by, sort=True, observed=True, dropna=False)
    rows = []
    for i, (key, part) in enumerate(parts):
        key = key if isinstance(key, tuple) else (key,)
        ok = np.isfinite(part[value].to_numpy(dtype=float))
        y = part[value].to_numpy(dtype=float)[ok]
        cl = _cluster_codes(part, cluster)[ok]
        n, g = len(y), int(len(np.unique(cl)))
        mean = float(y.mean()) if n else np.nan
        sd = float(y.std(ddof=1)) if n > 1 else np.nan
        se_naive = sd / np.sqrt(n) if n > 1 else np.nan
        deff = design_effect(y, cl) if n > 1 else np.nan
        if cluster is not None and g >= min_clusters and n > 1:
            reps = bootstrap_rate(y, cl, n_boot=n_boot, seed=seed + i)
            lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
            se_cl = float(reps.std(ddof=1))
            method = f"cluster bootstrap percentile ({cluster}, {n_boot} resamples)"
        elif n > 1:
            se_cl = se_naive * np.sqrt(max(deff, 1.0) if np.isfinite(deff) else 1.0)
            dfree = max(g - 1, 1)
            q = stats.t.ppf(1 - alpha / 2, dfree)
            lo, hi = mean - q * se_cl, mean + q * se_cl
            method = f"t interval, {dfree} df" + (f", deff-inflated SE ({cluster})" if cluster else "")
        else:
            lo = hi = se_cl = np.nan
            method = "undefined (fewer than 2 values)"
        rows.append({**dict(zip(by, key)), "n": n, "n_clusters": g, "mean": mean, "sd": sd, "se_naive": se_naive,
                     "se_cluster": se_cl, "design_effect": deff, "ci_low": float(lo), "ci_high": float(hi),
                     "ci_method": method})
    return pd.DataFrame(rows)


def cluster_totals(df: pd.DataFrame, columns: Sequence[str], cluster: str,
                   cells: Sequence[str] | None = None) -> tuple[dict[str, np.ndarray], pd.Index]:
    """Per-cluster sums of ``columns`` and the row count ``_n``, as (G x C) arrays over the ``cells`` (groups of
    rows, e.g. subgroups x model; one cell when None). The cluster bootstrap of any function of totals is then a
    matrix product with multinomial cluster counts (:func:`bootstrap_totals`)."""
    codes = pd.factorize(df[cluster], sort=True)[0]
    if cells:
        ckey = pd.MultiIndex.from_frame(df[list(cells)]) if len(cells) > 1 else pd.Index(df[cells[0]])
        ccodes, cindex = pd.factorize(ckey, sort=True)
    else:
        ccodes, cindex = np.zeros(len(df), dtype=int), pd.Index(["all"])
    g, c = int(codes.max() + 1), len(cindex)
    flat = codes * c + ccodes
    out = {"_n": np.bincount(flat, minlength=g * c).reshape(g, c).astype(float)}
    for col in columns:
        out[col] = np.bincount(flat, weights=df[col].to_numpy(dtype=float), minlength=g * c).reshape(g, c)
    return out, cindex


def bootstrap_totals(totals: dict[str, np.ndarray], statistic: Callable[[dict], np.ndarray], n_boot: int = 2000,
                     seed: int = 0, alpha: float = 0.05, label: str = "") -> dict:
    """Percentile cluster bootstrap of ``statistic(totals)``, where ``totals`` maps names to arrays whose first axis is
    the cluster (from :func:`cluster_totals`) and ``statistic`` maps summed totals (arrays of shape (..., C)) to a
    scalar per replicate (it receives arrays with a leading replicate axis). Vectorised: one matmul per column."""
    g = next(iter(totals.values())).shape[0]
    rng = np.random.default_rng(seed)
    w = rng.multinomial(g, np.full(g, 1.0 / g), size=n_boot).astype(float)
    full = {k: v.sum(axis=0)[None, ...] for k, v in totals.items()}
    est = float(np.asarray(statistic(full)).ravel()[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = np.asarray(statistic({k: w @ v for k, v in totals.items()}), dtype=float).ravel()
    reps = reps[np.isfinite(reps)]
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2]) if reps.size else (np.nan, np.nan)
    return {"estimate": est, "se": float(reps.std(ddof=1)) if reps.size > 1 else np.nan, "ci_low": float(lo),
            "ci_high": float(hi), "n_clusters": g, "n_boot": int(reps.size),
            "ci_method": f"cluster bootstrap percentile ({label or 'cluster'}, {n_boot} resamples)"}
