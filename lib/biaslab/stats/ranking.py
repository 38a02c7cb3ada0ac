"""Ranking models honestly: tie groups, rank agreement between benchmarks, cluster-sum bootstraps (beyond the papers).

* :func:`tie_groups` the *compact letter display* of a ranking (Piepho 2004, "An algorithm for a letter-based
  representation of all-pairwise comparisons"; the tie groups HELM users ask for). Models are sorted by their
  estimate; a tie group is a maximal run of consecutive models in that order of which *no pair* differs
  significantly (adjusted p > alpha, or a pair that could not be compared). Groups may overlap: with A > B > C where
  only A-C differ, the groups are {A, B} and {B, C}, and B shares a letter with both. Each model gets the letters of
  the groups it belongs to ("a", "ab", "b", ...); models sharing a letter cannot be told apart.
* :func:`spearman_interval` Spearman's rank correlation over models with the Fisher-z interval of Bonett & Wright
  (2000, "Sample size requirements for estimating Pearson, Kendall and Spearman correlations", eq. 3):
  ``se(z) = sqrt((1 + r^2 / 2) / (n - 3))``, ``z = atanh(r)``. Below ``MIN_MODELS`` models no interval is given
  (and the function says so): four points cannot show agreement between benchmarks.
* :func:`cluster_sum_bootstrap` percentile cluster bootstrap of any statistic that is a function of column *sums*
  (ratios, differences of ratios, BBQ's bias scores): each replicate draws G clusters with replacement, as
  multinomial counts, so a replicate's sums are ``counts @ cluster_sums`` and no table is ever resampled. Pass two
  aligned sum matrices (same clusters, two models) to get the cluster-paired bootstrap of a difference.
* :func:`kendall_w` Kendall's coefficient of concordance W of m raters ranking n objects (Kendall & Babington Smith
  1939; with the tie correction of Kendall 1948, eq. 6.14): ``W = 12 S / (m^2 (n^3 - n) - m sum_j T_j)``, S the sum
  of squared deviations of the objects' rank sums from their mean, ``T_j = sum (t^3 - t)`` over rater j's ties.
  W = 1: every rater orders the objects alike; 0: no agreement. Related to the mean pairwise Spearman correlation
  by ``rho_bar = (m W - 1) / (m - 1)`` (untied ranks), which the tests use as an independent check.
* :func:`pairwise_order_agreement` for every pair of objects, the share of raters that order the pair as a
  reference rater does (ties count as not agreeing).
"""

from __future__ import annotations

import itertools
import string
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from .clustered import without_variance

#: fewest models for which a rank correlation between two metrics gets an interval
MIN_MODELS = 5


def _letters(i: int) -> str:
    a = string.ascii_lowercase
    return a[i] if i < 26 else a[i // 26 - 1] + a[i % 26]


def tie_groups(estimates: pd.Series, pairs: pd.DataFrame, alpha: float = 0.05, higher_first: bool = True,
               p_col: str = "p_adjusted", a_col: str = "model_a", b_col: str = "model_b",
               differ_col: str | None = None) -> pd.DataFrame:
    """Tie groups of the models in ``estimates`` (index = model) from pairwise tests in ``pairs``.

    A pair differs when its ``p_col`` is <= ``alpha`` — or, with ``differ_col``, when that boolean column is True
    (a decision already made, e.g. ``verdict == "distinguishable"``); a pair missing from ``pairs`` or with a NaN
    p-value is *not* known to differ (it cannot separate the two models). Returns one row per model in rank order:
    model, estimate, rank (1 = highest estimate when ``higher_first``), groups (letters), n_groups_shared_with (how
    many other models share a letter with it).
    """
    est = estimates.dropna()
    order = list(est.sort_values(ascending=not higher_first, kind="mergesort").index)
    differ = set()
    for r in pairs.itertuples(index=False):
        if differ_col is not None:
            v = getattr(r, differ_col)
            hit = isinstance(v, (bool, np.bool_)) and bool(v)
        else:
            p = getattr(r, p_col)
            hit = p is not None and np.isfinite(p) and p <= alpha
        if hit:
            a, b = getattr(r, a_col), getattr(r, b_col)
            differ |= {(a, b), (b, a)}
    runs = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and all((order[k], order[j + 1]) not in differ for k in range(i, j + 1)):
            j += 1
        if not runs or j > runs[-1][1]:          # maximal: not contained in the previous run
            runs.append((i, j))
    letters = {m: "" for m in order}
    for g, (i, j) in enumerate(runs):
        for m in order[i:j + 1]:
            letters[m] += _letters(g)
    rows = []
    for rank, m in enumerate(order, 1):
        shared = sum(1 for o in order if o != m and set(letters[o]) & set(letters[m]))
        rows.append({"model": m, "estimate": float(est[m]), "rank": rank, "groups": letters[m],
                     "n_tied_with": shared})
    return pd.DataFrame(rows)


def spearman_interval(x: Sequence[float], y: Sequence[float], alpha: float = 0.05,
                      min_models: int = MIN_MODELS) -> dict:
    """Spearman's rho of paired values (models with both), with a Bonett-Wright Fisher-z interval from
    ``min_models`` models on; below that rho is still given (when n >= 3) but the interval is NaN and ``status``
    says there are too few models."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = int(x.size)
    out = {"n_models": n, "rho": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p_value": np.nan,
           "ci_method": f"Fisher z, Bonett-Wright se, level {1 - alpha:g}"}
    if n >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
        r = stats.spearmanr(x, y)
        out["rho"], out["p_value"] = float(r.statistic), float(r.pvalue)
    if n < min_models:
        out["status"] = f"too few models (n = {n}; an interval needs at least {min_models})"
        return out
    if not np.isfinite(out["rho"]):
        out["status"] = "a metric is constant over these models"
        return out
    rho = float(np.clip(out["rho"], -0.999999, 0.999999))
    se = np.sqrt((1 + rho ** 2 / 2) / (n - 3))
    z = np.arctanh(rho)
    q = stats.norm.ppf(1 - alpha / 2)
    out["ci_low"], out["ci_high"] = float(np.tanh(z - q * se)), float(np.tanh(z + q * se))
    out["status"] = "ok"
    return out


def cluster_sums(df: pd.DataFrame, columns: Sequence[str], cluster: str | None, clusters=None) -> pd.DataFrame:
    """Per-cluster sums of ``columns`` (rows = clusters, sorted; ``cluster=None``: every row its own cluster).
    ``clusters`` (optional) fixes the row order / set, with zeros for clusters absent from ``df``."""
    key = df[cluster] if cluster else pd.Series(np.arange(len(df)), index=df.index)
    s = df[list(columns)].astype(float).groupby(key.to_numpy()).sum()
    return s.reindex(clusters, fill_value=0.0) if clusters is not None else s


def cluster_sum_bootstrap(statistic: Callable[[np.ndarray], np.ndarray], sums: np.ndarray,
                          sums_b: np.ndarray | None = None, n_boot: int = 2000, seed: int = 0,
                          alpha: float = 0.05) -> dict:
    """Percentile cluster bootstrap of ``statistic(total_sums)`` (or of ``statistic(a) - statistic(b)`` when
    ``sums_b`` is given: the same clusters drawn for both, the cluster-paired bootstrap).

    ``sums`` is (G clusters x C columns); ``statistic`` maps an (R x C) array of column totals to R values. Returns
    estimate, se, ci_low, ci_high, p_boot (two-sided percentile-bootstrap p of the estimate against 0:
    ``2 * min((#{T* <= 0} + 1) / (B + 1), (#{T* >= 0} + 1) / (B + 1))``, capped at 1; meaningful for differences),
    n_clusters, n_boot and ``ci_method`` ("" or, where every resample gives one value, "not estimable (…)": no
    interval and no p, :func:`biaslab.stats.clustered.without_variance`; "undefined: …" where none gives a value).
    """
    sums = np.asarray(sums, float)
    g = sums.shape[0]

    def stat(w):
        t = statistic(w @ sums)
        return t - statistic(w @ np.asarray(sums_b, float)) if sums_b is not None else t

    est = float(stat(np.ones((1, g)))[0])
    rng = np.random.default_rng(seed)
    w = rng.multinomial(g, np.full(g, 1.0 / g), size=n_boot).astype(float)
    reps = stat(w)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return {"estimate": est, "se": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p_boot": np.nan,
                "n_clusters": g, "n_boot": 0, "ci_method": "undefined: no resample of the clusters defines it"}
    if np.ptp(reps) == 0:
        return without_variance({"estimate": est, "se": 0.0, "n_clusters": g, "n_boot": int(reps.size)}, g,
                                "clusters", p=("p_boot",), notes=("ci_method",))
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    # (count + 1) / (B + 1): a bootstrap p-value is never 0 (Davison & Hinkley 1997, eq. 4.11)
    p = min(1.0, 2 * min((np.sum(reps <= 0) + 1) / (reps.size + 1), (np.sum(reps >= 0) + 1) / (reps.size + 1)))
    return {"estimate": est, "se": float(reps.std(ddof=1)) if reps.size > 1 else np.nan, "ci_low": float(lo),
            "ci_high": float(hi), "p_boot": float(p), "n_clusters": g, "n_boot": int(reps.size), "ci_method": ""}


def kendall_w(scores: np.ndarray | pd.DataFrame, higher_first: bool = True) -> dict:
    """Kendall's W of a (raters x objects) table of scores (ranked within each rater, average ranks for ties).
    Rows with a missing score are left out. Returns w, n_raters, n_objects, chi2 = m (n - 1) W and its p-value
    (chi-square on n - 1 df, Kendall's large-sample test)."""
    x = np.asarray(scores, dtype=float)
    x = x[np.isfinite(x).all(axis=1)] if x.ndim == 2 else x.reshape(1, -1)
    m, n = x.shape
    out = {"w": np.nan, "n_raters": int(m), "n_objects": int(n), "chi2": np.nan, "p_value": np.nan}
    if m < 2 or n < 2:
        return out
    ranks = np.vstack([stats.rankdata(-r if higher_first else r) for r in x])
    sums = ranks.sum(axis=0)
    s = float(((sums - sums.mean()) ** 2).sum())
    ties = 0.0
    for r in ranks:
        _, t = np.unique(r, return_counts=True)
        ties += float((t ** 3 - t).sum())
    denom = m ** 2 * (n ** 3 - n) - m * ties
    if denom <= 0:
        return out
    w = 12 * s / denom
    out.update(w=float(w), chi2=float(m * (n - 1) * w), p_value=float(stats.chi2.sf(m * (n - 1) * w, n - 1)))
    return out


def pairwise_order_agreement(scores: pd.DataFrame, reference: str) -> pd.DataFrame:
    """``scores``: rows = raters (e.g. universes), columns = objects (e.g. models). For every pair of objects (a, b):
    the reference rater's order (sign of a - b), how many other raters score both, and the share of them that order
    the pair the same way (a tie, or a tie in the reference, does not agree)."""
    ref = scores.loc[reference]
    others = scores.drop(index=reference)
    rows = []
    for a, b in itertools.combinations(scores.columns, 2):
        d = (others[a] - others[b]).dropna()
        s_ref = np.sign(ref[a] - ref[b])
        agree = int((np.sign(d) == s_ref).sum()) if s_ref != 0 else 0
        rows.append({"object_a": a, "object_b": b, "reference_order": {1.0: "a > b", -1.0: "a < b"}.get(
            float(s_ref), "tie"), "n_raters": int(len(d)), "n_agree": agree,
            "share_agree": agree / len(d) if len(d) else np.nan})
    return pd.DataFrame(rows, columns=["object_a", "object_b", "reference_order", "n_raters", "n_agree",
                                       "share_agree"])
