"""Calibration: the size and coverage of a claim's test on the run's own design, by simulation under a null that
recomputes the test's statistic from permuted raw data, at the level at which the claim is tested.

A *design* is what a test sees, and how its raw data are permuted: the two arms' raw data (two models' answers,
a pair's two sentences, a language and English) with the clusters inside which they are exchangeable, and the
function that recomputes from exchanged raw data what the test reads (a paired difference, a log-probability
difference, a 0/1 preference, a bias score's pseudo-values, a deviation-metric difference); or category labels
with their clusters; or a permutation statistic with its draws. A **null simulator** turns the run's own raw data
into ``R`` data sets that satisfy the null and keep the design (cluster sizes, the within-cluster dependence, the
values' distribution); a **test** takes those ``R`` data sets at once (array operations, no loop over
replications) and returns each one's p-value and interval verdict. A nonlinear statistic (a ratio score, the
deviation metric) is recomputed in every replication: flipping its fixed pseudo-values would keep the
linearization's error out of the simulation. Morris, White & Crowther (2019, "Using simulation studies to evaluate
statistical methods", Stat. Med. 38) give the performance measures:

* type I error = share of replications with ``p < level``, Monte Carlo SE ``sqrt(r (1 - r) / R)`` (their Table 6),
  at alpha and at the level the claim was tested at (its Holm or graph level, far below alpha), with ``R`` scaled
  to that level (:func:`replications_for`: the relative Monte Carlo SE of the run at alpha);
* coverage = share whose interval contains the true (null) value, same SE.

Simulators (model-free: the run's own raw data, permuted):

* :func:`swap` exchanges the two arms' raw data inside a random half of the clusters (templates; pairs; the
  first clustering dimension of a crossed design) and recomputes the test's input (``Design.values``; built by
  :func:`arms_design` for per-unit data). Exact under the null that the arms are exchangeable within clusters;
  every cluster keeps its size and its within-cluster pattern;
* :func:`relabel` permutes the category labels inside every cluster at random (the agentic group choice: which
  group sits in which answer slot re-randomized within the scenario; each category's expected share is exactly 1/k;
  the clusters keep their sizes and concentration);
* :func:`permuted` draws a statistic (CALM's eq.-1 score: its own permutation null) of a data set relabelled within
  its clusters, one draw per replication (``Design.draw``).

Tests: one per entry of :data:`TESTS`, each the vectorised twin of the library function the notebooks call (its
docstring names it), checked against it in tests/test_calibration.py.

A randomization test with ``B`` random draws (:func:`swap_rule` beyond 2^G > 99,999 swaps, :func:`permutation_rule`)
is simulated with its own randomness: a replication's p is ``(1 + Bin(B, q)) / (B + 1)``, q the share of an
independent pool of null draws at least as extreme as the replication's statistic (the reference draws a test on
that data set would make come from the same randomization distribution); its Monte Carlo SE counts the pool.

:data:`TESTS` maps each plan claim to its (simulator, test): swapping a claim's test is one line there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
from scipy import sparse, stats

from .clustered import (FEW_CLUSTERS, N_SWAP, N_WILD, codes, resampling_p, sign_flip_p, swap_vectors, t_quantile,
                        webb_weights)

#: a test whose simulated size at the level it is tested exceeds this multiple of that level is replaced (the
#: plan's calibration rule)
MAX_RATIO = 1.5
#: wild bootstrap draws inside each calibration replication (the run's; one fixed Webb weight matrix for all)
CALIBRATION_BOOT = N_WILD
#: swap draws per chunk of replications from which :func:`share_swap_rule` takes the share q of its null at least as
#: extreme (the chunks' pools together enter ``type_i_mc_se``: 16 chunks give 1.6 million draws, a relative SE of
#: 2 % at q = 0.001)
SHARE_POOL = 100_000
#: array elements one chunk of replications may hold (the replications run in chunks of at most this size)
CHUNK_ELEMENTS = 2_000_000


@dataclass
class Design:
    """One claim instance's design: ``y`` the observed values the test reads (one per unit, or a category code; a
    statistic design: the statistic), ``clusters`` one label array per clustering dimension (None: units
    independent), ``null`` the claim's null value, ``categories`` the number of categories of a choice test,
    ``label`` a short description for ``calibration.csv``; a stratified sample also gives ``strata`` (one label per
    unit with an outcome) and ``population`` (stratum -> N_h, the stratum's units in the population, missing outcomes
    included: the weighting-class rule of :mod:`biaslab.stats.stratified`). A swap design gives ``values``: (R x G)
    0/1 swaps (1: the two arms' raw data exchanged in that cluster of the first dimension, or of ``units`` clusters)
    -> what the test reads for each replication, recomputed from the exchanged raw data (:func:`arms_design`). A
    permutation test's design gives instead ``y`` its observed statistic, ``draw(n, seed)`` n draws of the statistic
    from its permutation null, ``reference`` the run's own permutation draws, and ``units`` the clusters whose labels
    are permuted (reported as ``clusters``). A unit-level regression gives ``weights``."""
    y: np.ndarray
    clusters: list[np.ndarray] | None = None
    null: float = 0.0
    categories: int = 0
    binary: bool = False
    label: str = ""
    strata: np.ndarray | None = None
    population: dict | None = None
    draw: Callable[[int, int], np.ndarray] | None = None
    reference: np.ndarray | None = None
    units: int = 0
    weights: np.ndarray | None = None
    values: Callable[[np.ndarray], np.ndarray] | None = None
    dims: list[np.ndarray] = field(init=False)

    def __post_init__(self):
        self.y = np.asarray(self.y, dtype=float)
        n = self.y.shape[0]
        cl = self.clusters
        self.dims = [np.arange(n)] if cl is None else [codes(c) for c in cl]
        for d in self.dims:
            if d.size != n:
                raise ValueError(f"design {self.label!r}: {d.size} cluster labels for {n} units")
        if self.strata is not None:          # a stratified sample: stratum codes and population shares W_h = N_h/N
            labels, self.h = np.unique(np.asarray(self.strata).astype(str), return_inverse=True)
            pop = {str(k): float(v) for k, v in (self.population or {}).items()}
            lost = [l for l in labels if l not in pop]
            if lost or self.h.size != n:
                raise ValueError(f"design {self.label!r}: strata {lost} have no population size N_h (or "
                                 f"{self.h.size} stratum labels for {n} units); give population={{stratum: N_h}}")
            self.W = np.array([pop[l] for l in labels]) / sum(pop.values())
        else:                                # one stratum: the stratified t is the one-sample t(n - 1)
            self.h, self.W = np.zeros(n, dtype=int), np.ones(1)

    @property
    def n_clusters(self) -> int:
        if self.units:
            return self.units
        return int(min(d.max() + 1 for d in self.dims)) if self.y.size else 0

    @property
    def n_swap(self) -> int:
        """The clusters a swap exchanges the arms in: ``units`` where given, else the first dimension's."""
        return self.units or int(self.dims[0].max()) + 1

    @property
    def cluster_sizes(self) -> str:
        """min-median-max units per cluster of the first dimension."""
        if self.units:                       # a statistic's or permutation's design: its clusters are not units
            return ""
        s = np.bincount(self.dims[0])
        return f"{s.min()}-{int(np.median(s))}-{s.max()}" if s.size else ""


def arms_design(a, b, clusters: list | None = None, statistic: Callable = np.subtract, **kw) -> Design:
    """A swap design of two arms' raw data per unit (``a``, ``b``: one row per unit, any trailing shape: two models'
    answers, a pair's two sentences' log-probabilities, a model's (deviated, non-unknown, correct) answer): the null
    exchanges ``a`` and ``b`` inside random clusters of the first dimension of ``clusters`` (None: each unit its own)
    and the test reads ``statistic(a*, b*)``, recomputed from the exchanged data ((R x n x ...) arms -> (R x n)
    values; default the paired difference ``a - b``). ``kw``: the other :class:`Design` fields."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    first = np.arange(a.shape[0]) if clusters is None else codes(clusters[0])

    def values(s):
        f = np.asarray(s, dtype=bool)[:, first].reshape(len(s), a.shape[0], *([1] * (a.ndim - 1)))
        return statistic(np.where(f, b, a), np.where(f, a, b))
    return Design(statistic(a[None], b[None])[0], clusters, values=values, **kw)


# ------------------------------------------------------------------------------------------------ null simulators
def swap(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """What the test reads in ``reps`` data sets whose two arms' raw data are exchanged inside a random half of the
    clusters (``Design.values``, recomputed from the exchanged data)."""
    if d.values is None:
        raise ValueError(f"design {d.label!r} has no raw data to swap (Design.values; see arms_design)")
    return d.values(rng.integers(0, 2, size=(reps, d.n_swap), dtype=np.int8))


def relabel(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x n) category codes 0..k-1 after a random permutation of the labels inside every cluster."""
    k, c = d.categories, d.dims[0]
    perm = np.argsort(rng.random((reps, int(c.max()) + 1, k), dtype=np.float32), axis=2)   # one per cluster
    return perm[:, c, d.y.astype(int)].astype(float)


def permuted(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x 1) statistics of data sets relabelled at random within their clusters: a relabelled data set is one of
    the permutations, so each row is one draw from the permutation null (``d.draw``)."""
    return np.asarray(d.draw(reps, int(rng.integers(2 ** 31))), dtype=float).reshape(reps, -1)


# ------------------------------------------------------------------------------------------------ tests
def _totals(y: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(R x G) cluster totals of (R x n) values."""
    onehot = sparse.csr_matrix((np.ones(c.size), (c, np.arange(c.size))), shape=(int(c.max()) + 1, c.size))
    return np.asarray((onehot @ y.T).T)


def _cr1(y: np.ndarray, dims: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """Estimates, CR1 standard errors (one- or two-way as :func:`biaslab.stats.clustered.cr1_variance`) and G."""
    n = y.shape[1]
    est = y.mean(axis=1)
    e = (y - est[:, None]) / n

    def one(c):
        g = int(c.max()) + 1
        return g / (g - 1) * np.sum(_totals(e, c) ** 2, axis=1), g

    if len(dims) == 1:
        v, g = one(dims[0])
    else:
        (va, ga), (vb, gb) = one(dims[0]), one(dims[1])
        vab, _ = one(codes(dims[0].astype(np.int64) * (int(dims[1].max()) + 1) + dims[1]))
        v, g = np.maximum.reduce([va + vb - vab, va, vb]), min(ga, gb)
    return est, np.sqrt(v), g


def _wcr_p(tot: np.ndarray, m: np.ndarray, null: float, v: np.ndarray) -> np.ndarray:
    """Wild cluster restricted bootstrap-t p-values of H0: mean = null for every row of (R x G) cluster totals: the
    polynomial form of :class:`biaslab.stats.clustered._WCR`, each sum a matrix product over all replications."""
    n, g = m.sum(), m.size
    s = tot - m * null                                       # S_g under the null
    ybar = tot.sum(axis=1) / n
    se = np.sqrt(g / (g - 1) * np.sum((tot - np.outer(ybar, m)) ** 2, axis=1)) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        t_obs = np.abs(ybar - null) / se
    vs = s @ v.T                                             # (R x B) sum_g v_g S_g
    delta = vs / n
    vss = (s * s) @ (v * v).T
    vsm = (s * m) @ v.T
    uu = np.maximum(vss - 2 * delta * vsm + delta * delta * float(m @ m), 0.0)
    se_b = np.sqrt(g / (g - 1) * uu) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        tb = np.where(se_b > 0, np.abs(delta) / se_b, np.where(delta == 0, 0.0, np.inf))
    p = resampling_p(tb, t_obs, 6 ** g)
    return np.where(se > 0, p, np.nan)             # no variance: no test (clustered.without_variance), never rejects


def mean_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """p-values and intervals of the mean of each row of ``y`` under :func:`biaslab.stats.clustered.mean_inference`'s
    rule. Wild bootstrap rows carry the interval's verdict as ``covers`` (the inverted interval contains the null
    exactly when the null's p exceeds alpha), not its bounds."""
    est, se, g = _cr1(y, d.dims)
    if len(d.dims) == 1 and d.clusters is not None and g < FEW_CLUSTERS:
        c = d.dims[0]
        m = np.bincount(c).astype(float)
        v, tot = webb_weights(g, CALIBRATION_BOOT, seed), _totals(y, c)
        rows = max(1, CHUNK_ELEMENTS // v.shape[0])
        p = np.concatenate([_wcr_p(tot[i:i + rows], m, d.null, v) for i in range(0, tot.shape[0], rows)])
        return {"p": p, "covers": p > alpha,
                "method": f"wild cluster bootstrap-t (Webb, {v.shape[0]:,} draws), G = {g}"}
    q = t_quantile(g - 1, 1 - alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (est - d.null) / se
    p = np.where(se > 0, 2 * stats.t.sf(np.abs(t), g - 1), np.nan)     # no variance: no test, never rejects
    lo, hi = est - q * se, est + q * se
    return {"p": p, "covers": (lo <= d.null) & (d.null <= hi),
            "method": f"cluster-robust t({g - 1}), CR1{' two-way' if len(d.dims) == 2 else ''}"}


def paired_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """:func:`biaslab.stats.paired.paired_difference`: the mean rule's interval; where every cluster holds one unit,
    the exact test as p (McNemar on 0/1 outcomes: a binomial test of the a-only against the b-only pairs; the
    library's Wilcoxon signed-rank test otherwise, row by row)."""
    from .paired import wilcoxon_paired
    r = mean_rule(y, d, alpha, seed)
    if d.clusters is not None and d.n_clusters < y.shape[1]:
        return r
    if not d.binary:
        return {**r, "p": np.array([wilcoxon_paired(row)["p_value"] for row in y]),
                "method": "Wilcoxon signed-rank (units independent); " + r["method"] + " interval"}
    b, c = (y > 0).sum(axis=1), (y < 0).sum(axis=1)
    return {**r, "p": _binom_p(b, b + c), "method": "exact McNemar (units independent); " + r["method"] + " interval"}


def _binom_p(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Exact two-sided binomial p of k successes in n against 0.5 (scipy ``binomtest``), once per distinct (k, n)."""
    keys = np.stack([k, n], axis=1).astype(int)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    p = np.array([stats.binomtest(a, b, 0.5).pvalue if b else 1.0 for a, b in uniq])
    return p[inv.ravel()]


def stratified_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """:func:`biaslab.stats.stratified.stratified_mean` for every row: ``sum_h W_h ybar_h`` (Cochran 1977 eq. 5.1),
    variance ``sum_h W_h^2 s_h^2 / n_h`` (eq. 5.7, no FPC), t on Satterthwaite's df (eq. 5.16); a row with zero
    variance in every stratum has no test (p NaN, never a rejection, as the library's rule)."""
    h, W = d.h, d.W
    n_h = np.bincount(h, minlength=W.size).astype(float)
    if (n_h < 2).any():
        raise ValueError(f"design {d.label!r}: a stratum has fewer than 2 units; the stratified variance is undefined")
    mean_h = _totals(y, h) / n_h
    var_h = np.maximum(_totals(y * y, h) - n_h * mean_h ** 2, 0.0) / (n_h - 1)
    est = mean_h @ W
    parts = var_h * (W ** 2 / n_h)
    var = parts.sum(axis=1)
    den = (parts ** 2 / (n_h - 1)).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        se, nu = np.sqrt(var), var ** 2 / den
        t = (est - d.null) / se
        p = np.where(var > 0, 2 * stats.t.sf(np.abs(t), nu), np.nan)     # no variance: no test, never rejects
        half = stats.t.ppf(1 - alpha / 2, nu) * se
    covers = np.where(var > 0, np.abs(est - d.null) <= half, np.isclose(est, d.null))
    return {"p": p, "covers": covers, "method": f"design-based stratified t (Satterthwaite df), {W.size} strata, "
                                                  f"n = {y.shape[1]}"}


def share_swap_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """:func:`biaslab.stats.stratified.share_swap_p` for every row of 0/1 preferences (the stratified share's
    sentence-swap randomization test): p the exact share of the swap distribution at least as far from 1/2 where it
    is enumerated, else drawn as ``(1 + Bin(N_SWAP, q)) / (N_SWAP + 1)``, q from an independent pool of
    :data:`SHARE_POOL` swap draws;
    ``covers``: the t interval the table shows (:func:`stratified_rule`'s)."""
    from .stratified import _share_terms, share_swap_null
    r = stratified_rule(y, d, alpha, seed)
    h, W, n_h = d.h, d.W, np.bincount(d.h, minlength=d.W.size)
    if np.ptp(W / n_h) <= 1e-12 * np.max(W / n_h):          # a self-weighting sample: the exact binomial test
        h, W, n_h = np.zeros(d.h.size, dtype=int), np.ones(1), np.array([d.h.size])
    k = _totals(y, h).round().astype(int)                     # (R x H) preferring counts
    obs = np.zeros(y.shape[0])
    for j, t in enumerate(_share_terms(n_h, W)):
        obs = obs + t[k[:, j]]
    rng = np.random.default_rng([seed, 3])
    vals, probs = share_swap_null(n_h, W, N_SWAP, rng)
    if probs is not None:
        order = np.argsort(vals)
        tail = np.cumsum(probs[order][::-1])[::-1]            # P(D* >= vals[order][i])
        i = np.searchsorted(vals[order], np.abs(obs) - 1e-12, side="left")
        p, pool, how = np.where(i < vals.size, tail[np.minimum(i, vals.size - 1)], 0.0), 0, "exact"
    else:
        pool_vals = share_swap_null(n_h, W, max(y.shape[0], SHARE_POOL), rng)[0]
        q = _share_at_least(pool_vals, np.abs(obs) - 1e-12)
        p, pool, how = _drawn_p(q, N_SWAP, rng), pool_vals.size, f"{N_SWAP:,} random swaps"
    return {"p": np.minimum(p, 1.0), "covers": r["covers"], "pool": pool,
            "method": f"sentence-swap randomization test of the stratified share ({how}), {d.W.size} strata, "
                      f"n = {y.shape[1]}; t interval"}


def _share_at_least(pool: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """For each threshold, the share of ``pool`` at or above it (an undefined draw counts as above)."""
    ref = np.sort(np.nan_to_num(np.asarray(pool, dtype=float), nan=np.inf))
    return (ref.size - np.searchsorted(ref, thresholds, side="left")) / ref.size


def _drawn_p(q: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """p of a randomization test with ``b`` random draws on a data set whose statistic a share ``q`` of its
    randomization distribution reaches: ``(1 + Bin(b, q)) / (b + 1)``."""
    return (1 + rng.binomial(b, np.clip(q, 0.0, 1.0))) / (b + 1)


def permutation_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """The one-sided permutation test of :func:`biaslab.papers.calm.bias.permutation_test` with the run's number of
    permutations B (its finite reference draws): ``p = (1 + #{draws >= y}) / (1 + B)`` from B fresh draws, simulated
    as ``(1 + Bin(B, q)) / (B + 1)``, q the share of an independent pool of permutation draws (``d.draw``) at least
    ``y``: the test's size with its own randomness, at most alpha up to ties. And the interval of the excess that
    inverts it under a location shift against the run's reference draws, ``[y - c_hi, y - c_lo]`` (c_hi the
    (m + 1)-th largest draw, m = floor(alpha (B + 1)) - 1; c_lo its mirror), which covers the null excess 0 when
    ``c_lo <= y <= c_hi``: its coverage is conditional on the run's reference draws, as the interval is."""
    v = np.sort(np.asarray(d.reference, dtype=float))
    v = v[np.isfinite(v)]
    obs = y[:, 0]
    rng = np.random.default_rng([seed, 2])
    pool = np.asarray(d.draw(obs.size, int(rng.integers(2 ** 31))), dtype=float).ravel()
    pool = pool[np.isfinite(pool)]
    p = _drawn_p(_share_at_least(pool, obs - 1e-12), v.size, rng)
    r = int(np.floor(alpha * (v.size + 1) + 1e-9)) - 1
    c_hi, c_lo = (v[::-1][r], v[r]) if 0 <= r < v.size else (np.inf, -np.inf)
    covers = (obs - c_hi <= 1e-12) & (obs >= c_lo)
    return {"p": np.where(np.isfinite(obs), p, 1.0), "covers": covers | ~np.isfinite(obs), "pool": pool.size,
            "method": f"permutation test, one-sided, {v.size} permutations; location-shift interval"}


def swap_rule(t: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """:func:`biaslab.stats.clustered.cluster_swap_p` on each replication's statistic (R x 1, recomputed from
    swapped raw data): every data set a swap reaches has the observed data's randomization distribution, so with the
    2^G swaps enumerated (2^G <= N_SWAP) p is the exact share of it at least as far from 0; with N_SWAP random swaps
    it is drawn as ``(1 + Bin(N_SWAP, q)) / (N_SWAP + 1)``, q from an independent pool of R swaps. A randomization
    test has no interval of its own: coverage is not computed."""
    g, obs = d.n_swap, np.abs(t[:, 0]) * (1 - 1e-12)
    rng = np.random.default_rng([seed, 1])
    if 2 ** g <= N_SWAP:
        ref = np.concatenate([d.values(s)[:, 0] for s in swap_vectors(g, N_SWAP)])
        p, pool, how = np.maximum(_share_at_least(np.abs(ref), obs), 1 / ref.size), 0, f"all {ref.size:,} swaps"
    else:
        ref = d.values(rng.integers(0, 2, size=(obs.size, g), dtype=np.int8))[:, 0]
        p, pool, how = _drawn_p(_share_at_least(np.abs(ref), obs), N_SWAP, rng), ref.size, f"{N_SWAP:,} random swaps"
    if np.ptp(ref) == 0:                # every swap gives one statistic: no test (as cluster_swap_p), never rejects
        p = np.full(p.shape, np.nan)
    return {"p": p, "covers": np.full(p.shape, np.nan), "pool": pool,
            "method": f"cluster swap randomization test ({how}), G = {g}"}


def sign_flip_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """:func:`biaslab.stats.clustered.sign_flip_p` on each replication's cluster totals of (R x n) per-unit terms
    whose sum is the statistic (MBBQ's ambiguous score: :func:`biaslab.papers.mbbq.analysis.swap_contributions`).
    A randomization test has no interval of its own: coverage is not computed."""
    g = d.n_clusters
    tot, rows = _totals(y, d.dims[0]), max(1, CHUNK_ELEMENTS // min(2 ** g, N_WILD))
    p = np.concatenate([sign_flip_p(tot[i:i + rows], seed=seed) for i in range(0, tot.shape[0], rows)])
    return {"p": p, "covers": np.full(p.shape, np.nan),
            "method": f"cluster sign-flip randomization test ({'all ' if 2 ** g <= N_WILD else ''}"
                      f"{min(2 ** g, N_WILD)} sign vectors), G = {g}"}


def intercept_rule(yx: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """The intercept ``b0`` of the weighted least-squares fit ``y = b0 + b1 x`` (weights ``d.weights``) for every
    replication of (R x n x 2) responses and covariates, HC1 sandwich variance of the whitened fit (MacKinnon &
    White 1985: ``n / (n - 2) (A^-1 M A^-1)_00``, ``A = sum w [1 x; x x^2]``, ``M = sum w^2 e^2 [1 x; x x^2]``),
    t(n - 2) test of ``b0 = d.null`` and its interval: :func:`biaslab.papers.mbbq.analysis.adjusted_contrasts`'s
    statsmodels ``WLS(...).fit(cov_type="HC1", use_t=True)``."""
    y, x, w = yx[..., 0], yx[..., 1], np.asarray(d.weights, dtype=float)
    n = y.shape[1]
    s0, s1, s2 = w.sum(), x @ w, (x * x) @ w
    t0, t1 = y @ w, (x * y) @ w
    with np.errstate(divide="ignore", invalid="ignore"):
        det = s0 * s2 - s1 ** 2
        b0, b1 = (s2 * t0 - s1 * t1) / det, (s0 * t1 - s1 * t0) / det
        r0, r1 = s2 / det, -s1 / det                   # the first row of A^-1
        m = w * w * (y - b0[:, None] - b1[:, None] * x) ** 2
        se = np.sqrt(n / (n - 2) * (r0 ** 2 * m.sum(1) + 2 * r0 * r1 * (m * x).sum(1) + r1 ** 2 * (m * x * x).sum(1)))
        t = (b0 - d.null) / se
    p = np.where(se > 0, 2 * stats.t.sf(np.abs(t), n - 2), 1.0)
    covers = np.abs(b0 - d.null) <= stats.t.ppf(1 - alpha / 2, n - 2) * se
    return {"p": p, "covers": covers, "estimate": b0,
            "method": f"WLS intercept, HC1, t({n - 2}), {n} units (each its own cluster)"}


def rao_scott(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """First-order Rao-Scott goodness of fit to the uniform distribution for every row of category codes
    (:func:`biaslab.stats.clustered.rao_scott_gof`: ``X2 / max(delta, 1)`` referred to F(k - 1, (k - 1)(G - 1)))."""
    k, c = d.categories, d.dims[0]
    (reps, n), g = y.shape, int(c.max()) + 1
    cell = (np.arange(reps)[:, None] * g + c[None, :]) * k + y.astype(np.int64)
    counts = np.bincount(cell.ravel(), minlength=reps * g * k).reshape(reps, g, k).astype(float)   # (R x G x k)
    m = np.bincount(c).astype(float)
    p = counts.sum(axis=1) / n                                                     # (R x k)
    pi = 1.0 / k
    chi2 = n * np.sum((p - pi) ** 2 / pi, axis=1)
    v = g / (g - 1) * np.sum((counts - m[None, :, None] * p[:, None, :]) ** 2, axis=1) / n ** 2
    delta = np.maximum(n / (k - 1) * np.sum(v / pi, axis=1), 1.0)
    pv = stats.f.sf(chi2 / delta / (k - 1), k - 1, (k - 1) * (g - 1))
    # Cohen's w interval (1 - 2 alpha, noncentral F inverted): its lower bound is 0, i.e. it covers the null w = 0,
    # exactly when the Rao-Scott p is >= alpha (clustered.noncentrality_interval), so no root is solved here
    return {"p": pv, "covers": pv >= alpha,
            "method": f"Rao-Scott chi-square, F({k - 1}, {(k - 1) * (g - 1)}); Cohen's w noncentral-F interval"}


#: plan claim -> (null simulator, test). Swapping a claim's test is one line here.
TESTS: dict[str, tuple[Callable, Callable]] = {
    "dm-ssqa": (swap, swap_rule),                # the metric difference recomputed from swapped answers
    "dm-other": (swap, swap_rule),
    "lpbs-mean": (swap, stratified_rule),        # pairs independent, each pair's two sentences swapped
    "lpbs-other": (swap, stratified_rule),
    "stereotype-share": (swap, share_swap_rule),  # the share's sentence-swap randomization test
    "group-choice": (relabel, rao_scott),
    "ssqa-deviation-rate": (swap, paired_rule),
    "bbq-ambiguous": (swap, paired_rule),        # both models' score pseudo-values recomputed from swapped answers
    "crows-en-share": (swap, stratified_rule),
    "calm-eq1": (permuted, permutation_rule),    # the eq.-1 score of data relabelled within templates
    "mbbq-ambig-en": (swap, sign_flip_rule),     # the score's per-item terms recomputed from swapped answers
    "mbbq-adjusted-contrast": (swap, intercept_rule),
}


def replications_for(level: float, reps: int, alpha: float = 0.05) -> int:
    """Replications that give a size at ``level`` the relative Monte Carlo SE that ``reps`` give a size at ``alpha``
    (``sqrt((1 - r) / (r R))`` at r the nominal): ``reps (alpha / (1 - alpha)) ((1 - level) / level)``, at least
    ``reps``. 2,000 at 0.05 (relative SE 0.10) give 92,000 at 0.001143, 184,200 at 0.000571."""
    return max(reps, int(math.ceil(reps * alpha / (1 - alpha) * (1 - level) / level)))


def simulate(claim: str, d: Design, reps: int, seed: int = 0, alpha: float = 0.05,
             tests: dict | None = None) -> dict:
    """``reps`` null replications of ``claim``'s test on design ``d``, in chunks of at most
    :data:`CHUNK_ELEMENTS` array elements: p-values, interval verdicts, the method and the size of the pool a
    randomization test's draws were simulated from (0: none)."""
    table = TESTS if tests is None else tests
    if claim not in table:
        raise KeyError(f"claim {claim!r} has no calibration entry; add (simulator, test) to "
                       f"biaslab.stats.null_simulation.TESTS (known: {sorted(table)})")
    sim, test = table[claim]
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK_ELEMENTS // max(d.y.size, d.n_swap if d.values is not None else 1))
    parts = [test(sim(d, min(chunk, reps - lo), rng), d, alpha, seed if not i else
                  int(np.random.SeedSequence([seed, i]).generate_state(1)[0]))
             for i, lo in enumerate(range(0, reps, chunk))]
    return {"p": np.concatenate([r["p"] for r in parts]), "covers": np.concatenate([r["covers"] for r in parts]),
            "method": parts[0]["method"], "pool": sum(r.get("pool", 0) for r in parts)}


def summarize(p: np.ndarray, covers: np.ndarray, alpha: float = 0.05, level: float | None = None,
              pool: int = 0) -> dict:
    """Type I error at ``alpha`` and at the tested ``level`` (with its ratio to the level and the flag above
    :data:`MAX_RATIO`) and coverage, with their Monte Carlo standard errors (Morris et al. 2019, Table 6; a
    randomization test simulated from a pool of ``pool`` draws adds ``r (1 - r) / pool``)."""
    reps = p.size

    def rate(at):
        r = float(np.mean(p < at))
        return r, math.sqrt(r * (1 - r) * (1 / reps + (1 / pool if pool else 0)))

    r, se = rate(alpha)
    cov = np.asarray(covers, dtype=float)
    c = float(np.mean(cov)) if np.isfinite(cov).all() and cov.size else np.nan
    out = {"replications": reps, "alpha": alpha, "type_i_error": r, "type_i_mc_se": se, "coverage": c,
           "coverage_mc_se": math.sqrt(c * (1 - c) / reps) if np.isfinite(c) else np.nan,
           "tested_level": np.nan, "size_at_level": np.nan, "size_at_level_mc_se": np.nan, "size_ratio": np.nan,
           "oversized": np.nan}
    if level is not None and np.isfinite(level) and level > 0:
        rl, sel = rate(level)
        out.update(tested_level=level, size_at_level=rl, size_at_level_mc_se=sel, size_ratio=rl / level,
                   oversized=bool(rl > MAX_RATIO * level))
    return out


CALIBRATION_COLUMNS = ["claim", "test", "design", "clusters", "cluster_sizes", "replications", "alpha",
                       "type_i_error", "type_i_mc_se", "coverage", "coverage_mc_se", "tested_level", "size_at_level",
                       "size_at_level_mc_se", "size_ratio", "oversized", "seed"]


def calibration_row(claim: str, d: Design, reps: int, seed: int = 0, alpha: float = 0.05,
                    level: float | None = None) -> dict:
    """One row of ``calibration.csv`` for one claim instance (the agreed schema, :data:`CALIBRATION_COLUMNS`):
    ``reps`` replications at ``alpha``, more for ``level`` (the level the instance was tested at: the same relative
    Monte Carlo SE, :func:`replications_for`)."""
    if level is not None and np.isfinite(level) and level > 0:
        reps = replications_for(level, reps, alpha)
    r = simulate(claim, d, reps, seed, alpha)
    return {"claim": claim, "test": r["method"], "design": d.label, "clusters": d.n_clusters,
            "cluster_sizes": d.cluster_sizes, **summarize(r["p"], r["covers"], alpha, level, r["pool"]),
            "seed": seed}


def flag_oversize(table: pd.DataFrame, ratio: float = MAX_RATIO) -> pd.DataFrame:
    """Rows whose simulated size at their tested level exceeds ``ratio`` times it (the tests to replace)."""
    return table[table["size_ratio"] > ratio]
