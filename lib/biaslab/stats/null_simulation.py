"""Calibration: the size and coverage of a claim's test on the run's own design, by simulation under the null.

A *design* is what a test sees: one value per unit (a paired difference, a log-probability difference, a 0/1
preference, a pseudo-value, or a category label) and the units' clusters (one-way or crossed). A **null simulator**
turns the run's own values into ``R`` data sets that satisfy the null and keep the design (cluster sizes, the
within-cluster dependence, the values' distribution); a **test** takes those ``R`` data sets at once (array
operations, no loop over replications) and returns each one's p-value and interval. Morris, White & Crowther
(2019, "Using simulation studies to evaluate statistical methods", Stat. Med. 38) give the performance measures:

* type I error = share of replications with ``p < alpha``, Monte Carlo SE ``sqrt(r (1 - r) / R)`` (their Table 6);
* coverage = share whose interval contains the true (null) value, same SE.

Simulators (model-free: the run's own values, resampled):

* :func:`swap` exchanges the two arms inside a random half of the clusters: ``y* = null + s_g (y - null)``,
  ``s_g = +-1`` (a paired difference of two models, a log-probability difference of the two sentences, a 0/1
  preference about 0.5). Exact under the null that the arms are exchangeable; every cluster keeps its size and
  its within-cluster pattern. Crossed designs flip the first clustering dimension (template), the one G counts.
* :func:`permuted` draws a statistic (CALM's eq.-1 score: its own permutation null) of a data set relabelled within
  its clusters, one draw per replication (``Design.draw``);
* :func:`swap_pairs` is :func:`swap` for a unit-level regression whose response and covariate are both differences
  of the same two arms (MBBQ's language-minus-English bias and control-accuracy differences per template): one sign
  flips both, so the slope is kept and the intercept's null holds;
* :func:`relabel` permutes the category labels inside every cluster at random (the uniform null of a choice among
  ``k`` categories: each category's expected share is exactly 1/k; the clusters keep their sizes and concentration).

Tests (each the vectorised twin of the library function the notebooks call, checked against it in
tests/test_calibration.py):

* :func:`mean_rule` the one rule of :mod:`biaslab.stats.clustered` (``mean_inference``): CR1 one- or two-way with
  t(G - 1), or the wild cluster restricted bootstrap-t (Webb weights; p at the null, and the interval that inverts
  it, which contains the null exactly when p > alpha) in a one-way design with fewer than 30 clusters;
* :func:`paired_rule` :func:`biaslab.stats.paired.paired_difference`: the mean rule, with the exact McNemar test as
  the p-value where every cluster is one unit and the outcome is 0/1;
* :func:`stratified_rule` :func:`biaslab.stats.stratified.stratified_mean`: the design-based t of a stratified
  sample's weighted mean (the CrowS-Pairs claims; a unit's sign flip keeps it in its stratum, so every stratum's
  mean is symmetric about the null and the weighted mean's null holds);
* :func:`permutation_rule` the one-sided permutation test of the eq.-1 excess and its location-shift interval,
  against the run's own reference permutations;
* :func:`sign_flip_rule` the cluster sign-flip randomization test (MBBQ's English ambiguous score, whose per-item
  terms the answer swap negates: exact under the swap null, so its size is at most alpha by construction);
* :func:`intercept_rule` the intercept of :func:`biaslab.papers.mbbq.analysis.adjusted_contrasts`'s weighted
  least squares with HC1 standard errors and t(n - 2) (statsmodels ``WLS(...).fit(cov_type="HC1", use_t=True)``);
* :func:`rao_scott` :func:`biaslab.stats.clustered.rao_scott_gof` against the uniform null, with the coverage of
  Cohen's w's noncentral-F interval (it covers w = 0 exactly when p >= alpha).

:data:`TESTS` maps each plan claim to its (simulator, test): swapping a claim's test is one line there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
from scipy import sparse, stats

from .clustered import FEW_CLUSTERS, N_WILD, codes, resampling_p, sign_flip_p, t_quantile, webb_weights

#: a test whose simulated size exceeds this at alpha = 0.05 is replaced (the plan's calibration rule)
MAX_SIZE = 0.075
#: wild bootstrap draws inside each calibration replication (one fixed Webb weight matrix for all replications)
CALIBRATION_BOOT = 999


@dataclass
class Design:
    """One claim instance's design: ``y`` one value (or category code) per unit, ``clusters`` one label array per
    clustering dimension (None: units independent), ``null`` the claim's null value, ``categories`` the number of
    categories of a choice test, ``label`` a short description for ``calibration.csv``; a stratified sample also
    gives ``strata`` (one label per unit with an outcome) and ``population`` (stratum -> N_h, the stratum's units in
    the population, missing outcomes included: the weighting-class rule of :mod:`biaslab.stats.stratified`). A
    permutation test's design gives instead ``y`` its observed statistic, ``draw(n, seed)`` n draws of the statistic
    from its permutation null, ``reference`` the run's own permutation draws its p was computed against, and
    ``units`` the clusters whose labels are permuted (reported as ``clusters``); a ``draw`` without ``reference``
    returns one row of per-unit values per draw. A unit-level regression gives ``covariate`` and ``weights``."""
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
    covariate: np.ndarray | None = None
    weights: np.ndarray | None = None
    dims: list[np.ndarray] = field(init=False)

    def __post_init__(self):
        self.y = np.asarray(self.y, dtype=float)
        n = self.y.size
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
    def cluster_sizes(self) -> str:
        """min-median-max units per cluster of the first dimension."""
        if self.units:                       # a permutation design: the clusters' labels are permuted, not resampled
            return ""
        s = np.bincount(self.dims[0])
        return f"{s.min()}-{int(np.median(s))}-{s.max()}" if s.size else ""


# ------------------------------------------------------------------------------------------------ null simulators
def _cluster_signs(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x n) signs +-1, one per cluster of the first dimension, repeated for its units."""
    return rng.choice([-1.0, 1.0], size=(reps, int(d.dims[0].max()) + 1))[:, d.dims[0]]


def swap(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x n) values with the two arms exchanged in a random half of the clusters of the first dimension."""
    return d.null + _cluster_signs(d, reps, rng) * (d.y - d.null)


def relabel(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x n) category codes 0..k-1 after a random permutation of the labels inside every cluster."""
    k, c = d.categories, d.dims[0]
    perm = np.argsort(rng.random((reps, int(c.max()) + 1, k)), axis=2)        # one permutation per cluster
    return np.take_along_axis(perm[:, c, :], d.y.astype(int)[None, :, None], axis=2)[:, :, 0].astype(float)


def permuted(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x 1) statistics, or (R x n) per-unit values, of data sets relabelled at random within their clusters: a
    relabelled data set is one of the permutations, so each row is one draw from the permutation null
    (``d.draw``)."""
    return np.asarray(d.draw(reps, int(rng.integers(2 ** 31))), dtype=float).reshape(reps, -1)


def swap_pairs(d: Design, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(R x n x 2) responses and covariates with the two arms exchanged in a random half of the clusters, both
    flipped by one sign (each a difference of the same two arms)."""
    s = _cluster_signs(d, reps, rng)
    return np.stack([d.null + s * (d.y - d.null), s * d.covariate], axis=2)


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
        p = _wcr_p(_totals(y, c), m, d.null, webb_weights(g, CALIBRATION_BOOT, seed))
        return {"p": p, "covers": p > alpha, "method": f"wild cluster bootstrap-t (Webb, {min(6 ** g, CALIBRATION_BOOT)} "
                                                         f"draws), G = {g}"}
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


def permutation_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """The one-sided permutation test of :func:`biaslab.papers.calm.bias.permutation_test` against the run's own
    reference draws (``d.reference``): ``p = (1 + #{reference >= y}) / (1 + B)``, and the interval of the excess
    that inverts it under a location shift, ``[y - c_hi, y - c_lo]`` (c_hi the (m + 1)-th largest draw, m =
    floor(alpha (B + 1)) - 1; c_lo its mirror), which covers the null excess 0 when ``c_lo <= y <= c_hi``. Size
    and coverage are conditional on the run's reference draws, as its verdict is."""
    v = np.sort(np.asarray(d.reference, dtype=float))
    v = v[np.isfinite(v)]
    obs = y[:, 0]
    p = (1 + (v[None, :] >= obs[:, None] - 1e-12).sum(axis=1)) / (1 + v.size)
    r = int(np.floor(alpha * (v.size + 1) + 1e-9)) - 1
    c_hi, c_lo = (v[::-1][r], v[r]) if 0 <= r < v.size else (np.inf, -np.inf)
    covers = (obs - c_hi <= 1e-12) & (obs >= c_lo)
    return {"p": np.where(np.isfinite(obs), p, 1.0), "covers": covers | ~np.isfinite(obs),
            "method": f"permutation test, one-sided, {v.size} reference permutations; location-shift interval"}


def sign_flip_rule(y: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """:func:`biaslab.stats.clustered.sign_flip_p` on each replication's cluster totals of (R x n) per-unit terms
    whose sum is the statistic (MBBQ's ambiguous score: :func:`biaslab.papers.mbbq.analysis.swap_contributions`).
    A randomization test has no interval of its own: coverage is not computed."""
    g = d.n_clusters
    p = sign_flip_p(_totals(y, d.dims[0]), seed=seed)
    return {"p": p, "covers": np.full(p.shape, np.nan),
            "method": f"cluster sign-flip randomization test ({'all ' if 2 ** g <= N_WILD else ''}"
                      f"{min(2 ** g, N_WILD)} sign vectors), G = {g}"}


def intercept_rule(yx: np.ndarray, d: Design, alpha: float = 0.05, seed: int = 0) -> dict:
    """The intercept ``b0`` of the weighted least-squares fit ``y = b0 + b1 x`` (weights ``d.weights``) for every
    replication of (R x n x 2) responses and covariates, HC1 sandwich variance of the whitened fit (MacKinnon &
    White 1985: ``n / (n - 2) (A^-1 M A^-1)_00``, ``A = sum w [1 x; x x^2]``, ``M = sum w^2 e^2 [1 x; x x^2]``),
    t(n - 2) test of ``b0 = d.null`` and its interval."""
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
    n, g = y.shape[1], int(c.max()) + 1
    ind = y[:, :, None] == np.arange(k)[None, None, :]                             # (R x n x k)
    counts = np.stack([_totals(ind[:, :, j].astype(float), c) for j in range(k)], axis=2)   # (R x G x k)
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
    "dm-difference": (swap, mean_rule),          # the metric difference's linearized pseudo-values
    "lpbs-mean": (swap, stratified_rule),        # pairs independent, each its own stratum's sign flip
    "stereotype-share": (swap, stratified_rule),
    "group-choice": (relabel, rao_scott),
    "ssqa-deviation-rate": (swap, paired_rule),
    "bbq-ambiguous": (swap, paired_rule),
    "crows-en-share": (swap, stratified_rule),
    "calm-eq1": (permuted, permutation_rule),    # the eq.-1 score against the run's own permutation floor
    "mbbq-ambig-en": (swap, sign_flip_rule),     # the score's per-item terms, negated in swapped templates
    "mbbq-adjusted-contrast": (swap_pairs, intercept_rule),
}


def simulate(claim: str, d: Design, reps: int, seed: int = 0, alpha: float = 0.05,
             tests: dict | None = None) -> dict:
    """``reps`` null replications of ``claim``'s test on design ``d``: p-values, interval verdicts and the method."""
    table = TESTS if tests is None else tests
    if claim not in table:
        raise KeyError(f"claim {claim!r} has no calibration entry; add (simulator, test) to "
                       f"biaslab.stats.null_simulation.TESTS (known: {sorted(table)})")
    sim, test = table[claim]
    rng = np.random.default_rng(seed)
    return test(sim(d, reps, rng), d, alpha, seed)


def summarize(p: np.ndarray, covers: np.ndarray, alpha: float = 0.05) -> dict:
    """Type I error and coverage with their Monte Carlo standard errors (Morris et al. 2019, Table 6)."""
    reps = p.size
    r = float(np.mean(p < alpha))
    cov = np.asarray(covers, dtype=float)
    c = float(np.mean(cov)) if np.isfinite(cov).all() and cov.size else np.nan
    return {"replications": reps, "alpha": alpha, "type_i_error": r, "type_i_mc_se": math.sqrt(r * (1 - r) / reps),
            "coverage": c, "coverage_mc_se": math.sqrt(c * (1 - c) / reps) if np.isfinite(c) else np.nan}


CALIBRATION_COLUMNS = ["claim", "test", "design", "clusters", "cluster_sizes", "replications", "alpha",
                       "type_i_error", "type_i_mc_se", "coverage", "coverage_mc_se", "seed"]


def calibration_row(claim: str, d: Design, reps: int, seed: int = 0, alpha: float = 0.05) -> dict:
    """One row of ``calibration.csv`` for one claim instance (the agreed schema, :data:`CALIBRATION_COLUMNS`)."""
    r = simulate(claim, d, reps, seed, alpha)
    return {"claim": claim, "test": r["method"], "design": d.label, "clusters": d.n_clusters,
            "cluster_sizes": d.cluster_sizes, **summarize(r["p"], r["covers"], alpha), "seed": seed}


def flag_oversize(table: pd.DataFrame, limit: float = MAX_SIZE) -> pd.DataFrame:
    """Rows whose simulated size exceeds ``limit`` (the tests to replace)."""
    return table[table["type_i_error"] > limit]
