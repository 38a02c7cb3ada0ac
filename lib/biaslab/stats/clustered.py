"""Cluster-robust inference for means, rates and contrasts: the one rule every interval and test in ``stats/`` follows
where prompts share a generating unit (Cameron & Miller 2015, "A practitioner's guide to cluster-robust
inference", J. Human Resources 50(2)).

The rule
--------
* **Standard error.** The Liang-Zeger sandwich with the CR1 small-sample factor ``G / (G - 1)`` (what statsmodels'
  ``cov_type="cluster"`` applies to an intercept-only OLS; Cameron & Miller eq. 11-12). Where a benchmark's design is
  *crossed* (SSQA: every stigma with every template), two-way clustering (Cameron, Gelbach & Miller 2011, "Robust
  inference with multiway clustering", J. Bus. Econ. Stat. 29(2), eq. 2.11): ``V = V_A + V_B - V_AB``, each term CR1
  with its own G (statsmodels' ``cov_type="cluster"`` with a two-column ``groups`` array gives the same numbers),
  floored at the larger one-way variance (:func:`cr1_variance`).
* **Reference distribution.** t with ``G - 1`` degrees of freedom, ``G`` the number of clusters (two-way: the smaller
  dimension; Cameron, Gelbach & Miller 2011 §2.3), never the normal: with 37 templates t(36) and N(0, 1) differ by
  4 % in the critical value, with 4 templates by 62 %. A contrast of a group against the rest (a subgroup's log
  disparity, a factor level's coefficient) takes G from the clusters it rests on (:func:`contrast_clusters`): a
  level held by 4 of 37 templates gets t(3), as its rate does (simulated: t(36) rejects about 14 % of true nulls at
  nominal 5 %, t(3) about 4 %).
* **Few clusters** (fewer than :data:`FEW_CLUSTERS` = 30 in a one-way design): the sandwich is itself noisy and
  t(G - 1) still over-rejects when clusters are unequal (MacKinnon & Webb 2017, "Wild bootstrap inference for wildly
  different cluster sizes", J. Appl. Econometrics 32(2)). Means and mean differences then get the **wild cluster
  restricted (WCR) bootstrap-t** with Webb's six-point weights (Webb 2023, "Reworking wild bootstrap-based inference
  for clustered errors", Can. J. Econ. 56(3); all 6^G weight vectors are enumerated when G <= 5): the p-value of
  H0: mean = null, and the interval that inverts that test (the set of nulls not rejected; Roodman, MacKinnon,
  Nielsen & Webb 2019, "Fast and wild", Stata J. 19(1), §3.5), which contains the estimate by construction.
  statsmodels has no wild bootstrap; the ``wildboottest`` package gives p-values for OLS but no test inversion, so
  the intercept-only case is written out here (cluster totals only, vectorised) and checked against a naive loop.
* **Rates** (0/1 outcomes) get the Korn-Graubard interval (Korn & Graubard 1998, "Confidence intervals for
  proportions with small expected number of positive counts estimated from survey data", Survey Methodology 24):
  Clopper-Pearson on the *degrees-of-freedom adjusted* effective sample size
  ``n* = n / deff * (t_{n-1} / t_{G-1})^2`` (quantiles at 1 - alpha/2; deff = CR1 variance over p(1-p)/n, floored
  at 1). It keeps the interval inside [0, 1] near 0 and 1, where a Wald interval fails, and carries the t(G - 1)
  reference: with 4 templates the factor (1.96 / 3.18)^2 = 0.38 shrinks n* to the information 4 clusters have.
  R's ``survey::svyciprop(method = "beta")`` computes the same interval.

* **Counts over categories** (which of k answers a prompt's top choice is) get Pearson's goodness-of-fit chi-square
  with the first-order **Rao-Scott** correction (Rao & Scott 1981, "The analysis of categorical data from complex
  sample surveys: chi-squared tests for goodness of fit and independence in two-way tables", JASA 76(374), §3):
  ``X2 / delta``, the generalized design effect ``delta = n / (k - 1) * sum_j V(p_j) / pi_j`` estimated from the CR1
  variance of each category's share (:func:`rao_scott_gof`), referred to F(k - 1, (k - 1)(G - 1)) (Thomas & Rao
  1987, JASA 82; R's ``survey::svygofchisq``/``svychisq`` default). statsmodels has no such test. Its effect size is
  **Cohen's w** of the shares against ``pi`` (``w = sqrt(X2 / n)``, Cohen 1988 §7.2), with the interval that inverts
  the same test: ``X2 / (delta (k - 1))`` is noncentral F(k - 1, (k - 1)(G - 1), lambda) with ``lambda = n w^2 /
  delta``, and the lambdas whose F distribution puts the observed statistic between its alpha and 1 - alpha quantiles
  form the interval (Steiger & Fouladi 1997, "Noncentrality interval estimation and the evaluation of statistical
  models", in *What if there were no significance tests?*; Steiger 2004, Psychol. Methods 9(2): the 1 - 2 alpha
  interval matches the level-alpha F test). So its lower bound is above 0 exactly when the test rejects at alpha; the
  estimate is the median-unbiased lambda of the same inversion, inside its interval by construction
  (:func:`noncentrality_interval`; the plug-in ``sqrt(X2 / n)`` is kept as ``cohens_w_plugin``).
* **Statistics that are not means of units** (a difference of two models' deviation metrics): the cluster swap
  randomization test (:func:`cluster_swap_p`): the statistic recomputed from the raw data with the two arms exchanged
  inside random clusters, exact under exchangeability whatever the statistic (a t on linearized pseudo-values
  over-rejected there at small levels; docs/calibration.md).

Every result says what it did in ``ci_method`` / ``p_method`` and carries ``n_clusters`` and ``df``.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

#: fewer clusters than this in a one-way design: wild cluster bootstrap for means, the t(G - 1) rule otherwise
FEW_CLUSTERS = 30
#: Webb's six-point weights: +-sqrt(1/2), +-1, +-sqrt(3/2), each with probability 1/6 (mean 0, variance 1)
WEBB = np.array([-math.sqrt(1.5), -1.0, -math.sqrt(0.5), math.sqrt(0.5), 1.0, math.sqrt(1.5)])
#: bootstrap draws of the wild cluster bootstrap (when the 6^G weight vectors are not enumerated)
N_WILD = 9999
#: random swaps of a cluster swap randomization test (when the 2^G swaps are not enumerated): p resolves 1e-5, so a
#: level of 0.0005 is decided on about 50 hits
N_SWAP = 99_999


def codes(clusters) -> np.ndarray:
    """Integer codes 0..G-1 of a cluster label array (``None``: every unit its own cluster)."""
    return pd.factorize(np.asarray(clusters), sort=True)[0]


def _as_code_list(clusters, n: int) -> list[np.ndarray]:
    """One code array per clustering dimension: None -> units; an (n, 2) array or a list of two arrays -> two-way."""
    if clusters is None:
        return [np.arange(n)]
    if isinstance(clusters, (list, tuple)) and len(clusters) in (1, 2) and np.ndim(clusters[0]) == 1 \
            and len(clusters[0]) == n:
        return [codes(c) for c in clusters]
    arr = np.asarray(clusters, dtype=object) if not isinstance(clusters, np.ndarray) else clusters
    if arr.ndim == 2:
        return [codes(arr[:, j]) for j in range(arr.shape[1])]
    return [codes(arr)]


def cr1_variance(scores, clusters) -> tuple[float, int]:
    """Cluster-robust (CR1) variance of a linear statistic ``sum_i scores_i`` and the number of clusters G used for
    its reference distribution.

    ``scores`` are the statistic's per-unit influence values (a mean: ``(y_i - ybar) / n``). One-way:
    ``G/(G-1) sum_g (sum_{i in g} s_i)^2``. Two-way (``clusters`` an (n, 2) array or two arrays): the
    Cameron-Gelbach-Miller sum ``V_A + V_B - V_AB`` (intersection clusters for V_AB), each CR1 with its own G, but
    never less than either one-way variance: the sum can fall below them (and below 0) when one side of a contrast
    lies in a single cluster of a dimension (SSQA's no-stigma prompts are one stigma), where that dimension's
    variation cannot be estimated (CGM 2011 §2.3 note the problem; taking the larger is the conservative choice). G is
    the smaller dimension's count; where one dimension has a single cluster in these rows, the other's one-way CR1."""
    s = np.asarray(scores, dtype=float)
    dims = _as_code_list(clusters, s.size)

    def one(c):
        g = int(c.max() + 1) if c.size else 0
        if g < 2:
            return np.nan, g
        return g / (g - 1) * float(np.sum(np.bincount(c, weights=s) ** 2)), g

    if len(dims) == 1:
        return one(dims[0])
    (va, ga), (vb, gb) = one(dims[0]), one(dims[1])
    if min(ga, gb) < 2:            # one dimension constant here (e.g. SSQA's 37 no-stigma prompts): one-way on the other
        return (va, ga) if ga >= gb else (vb, gb)
    inter = codes(dims[0].astype(np.int64) * (int(dims[1].max()) + 1) + dims[1])
    vab, _ = one(inter)
    return float(max(va + vb - vab, va, vb)), min(ga, gb)


def contrast_clusters(in_group, clusters) -> int:
    """The number of clusters a contrast "group vs rest" rests on, for its t(G - 1) reference: per clustering
    dimension the smaller of the number of clusters holding units of the group and the number holding units of the
    rest; over two dimensions the smaller of those, leaving out a dimension where one side lies in a single cluster
    (its variation is not estimable there and :func:`cr1_variance` reads the other dimension, as a rate does). A level
    constant within clusters (SSQA's gender: "male" is held by 4 of 37 templates) gets G = 4, t(3), as its rate's
    Korn-Graubard interval does; a level crossed with the clusters keeps every cluster. Returns 0 without clusters.

    The CR1 sandwich of such a contrast sums over all G clusters, but its variance on the group's side is estimated
    from the few clusters that hold the group: referred to t(G_all - 1) it over-rejects (about 14 % at nominal 5 %
    with 4 of 37 templates, tests/test_subgroups.py), referred to t(G_group - 1) it does not."""
    m = np.asarray(in_group, dtype=bool)
    if clusters is None:
        return 0
    counts = []
    for c in _as_code_list(clusters, m.size):
        counts.append(min(np.unique(c[m]).size, np.unique(c[~m]).size))
    usable = [g for g in counts if g >= 2]
    return min(usable) if usable else max(counts)


def exact_zero(v: float, v_naive: float, rel: float = 1e-12) -> float:
    """``v`` with round-off read as 0: a cluster-robust variance below ``rel`` times the naive variance is the sum of
    cluster totals that cancel exactly (arms that answer alike inside every cluster), left at 1e-31 by floating
    point. Reported as 0 so that it is recognised as a variance of 0 (no estimable noise), not a tiny one."""
    return 0.0 if np.isfinite(v) and v_naive > 0 and v <= rel * v_naive else v


#: the head of the words of an estimate whose variance is estimated as 0 (the verdict layer reads it)
NOT_ESTIMABLE = "not estimable"


def no_variation(n: int, unit: str = "items", clusters: int | None = None) -> str:
    """``not estimable (no variation in 12 items)``: what a row says in place of a test and an interval whose
    variance is estimated as 0; ``clusters``: the items vary but their G cluster totals do not ("no variation
    between the 3 clusters of 15 items")."""
    where = f"between the {int(clusters):,} clusters of" if clusters else "in"
    return f"{NOT_ESTIMABLE} (no variation {where} {int(n):,} {unit})"


def without_variance(out: dict, n: int, unit: str = "items", p=("p_value", "statistic"),
                     ci=("ci_low", "ci_high"), notes=("ci_method", "p_method"), clusters: int | None = None) -> dict:
    """The one treatment of an estimate whose variance is estimated as 0: a constant outcome, arms that answer alike
    inside every cluster (cluster totals that cancel, :func:`exact_zero`), a permutation or bootstrap distribution
    of one value, too few items to vary. A standard error of 0 would make any departure from the null infinitely
    significant (p = 0) and the interval [estimate, estimate], i.e. certainty from no information. The estimate
    stays; the columns ``p`` (p-value, test statistic) and ``ci`` are NaN (never 0, never a zero-width interval),
    and each of ``notes`` says :func:`no_variation`, which the verdict layer (:mod:`biaslab.stats.verdict`) turns
    into the row's verdict, so no such row is tested, decided or screened as significant."""
    note = no_variation(n, unit, clusters)
    return {**out, **{k: np.nan for k in (*p, *ci)}, **{k: note for k in notes}}


def t_quantile(df: float, q: float) -> float:
    """Quantile of t(df) (the normal where df is infinite or missing)."""
    return float(stats.norm.ppf(q) if df is None or not np.isfinite(df) else stats.t.ppf(q, df))


# ----------------------------------------------------------------------------------------------------------------
# wild cluster restricted bootstrap of a mean (intercept-only model)
# ----------------------------------------------------------------------------------------------------------------

def webb_weights(g: int, n_boot: int = N_WILD, seed: int = 0) -> np.ndarray:
    """(B x G) Webb weights: all 6^G vectors when 6^G <= n_boot (exact enumeration), else n_boot random draws."""
    if 6 ** g <= n_boot:
        return np.array(list(itertools.product(WEBB, repeat=g)), dtype=float)
    return np.random.default_rng(seed).choice(WEBB, size=(n_boot, g))


def resampling_p(t_draws, t_obs, group: int):
    """p-value from (..., B) resampled statistics ``t_draws`` and ``t_obs`` (larger = further from H0), the draws
    taken from a resampling group of ``group`` elements (6^G Webb weight vectors, 2^G sign vectors): the exact share
    #{t* >= t} / B when all B = ``group`` are enumerated (the identity reproduces t: counted even where rounding loses
    it, so p >= 1 / group), else (1 + #{t* >= t}) / (B + 1) (Davison & Hinkley 1997, eq. 4.11); never 0."""
    t_draws = np.asarray(t_draws, dtype=float)
    hits = np.sum(t_draws >= np.asarray(t_obs, dtype=float)[..., None] * (1 - 1e-12), axis=-1)
    b = t_draws.shape[-1]
    return np.maximum(hits, 1) / b if b == group else (1 + hits) / (b + 1)


# ----------------------------------------------------------------------------------------------------------------
# randomization tests over cluster swaps (sign flips)
# ----------------------------------------------------------------------------------------------------------------

def swap_vectors(g: int, n_max: int = N_WILD, seed: int = 0, chunk: int = 10_000):
    """The swap vectors of a G-cluster randomization test, in blocks of at most ``chunk`` rows: (rows x G) int8,
    1 where the cluster's two arms are exchanged (its sign flipped). All 2^G vectors when ``2^G <= n_max`` (in
    binary order, the first the identity), else ``n_max`` uniform random ones (seeded)."""
    if 2 ** g <= n_max:
        for lo in range(0, 2 ** g, chunk):
            yield ((np.arange(lo, min(lo + chunk, 2 ** g))[:, None] >> np.arange(g)) & 1).astype(np.int8)
        return
    rng = np.random.default_rng(seed)
    for lo in range(0, n_max, chunk):             # one random bit per cluster (the bytes' bits, first bit first)
        m = min(chunk, n_max - lo)
        raw = np.frombuffer(rng.bytes(m * ((g + 7) // 8)), dtype=np.uint8).reshape(m, -1)
        yield np.unpackbits(raw, axis=1, count=g).astype(np.int8)


def sign_flip_p(totals, n_max: int = N_WILD, seed: int = 0):
    """Two-sided cluster sign-flip randomization p of H0 "every cluster's total T_g is symmetric about 0" (Fisher's
    randomization test; Canay, Romano & Shaikh 2017, "Randomization tests under an approximate symmetry assumption",
    Econometrica 85(3), for few clusters): the share of sign vectors s with ``|sum s_g T_g| >= |sum T_g|``
    (:func:`resampling_p`), all 2^G vectors when ``2^G <= n_max``, else ``n_max`` random ones
    (:func:`swap_vectors`). ``totals``: (..., G); returns p of the same leading shape; NaN where every total is 0 (no
    variation: the randomization distribution is one value and the test has no size, :func:`without_variance`)."""
    t = np.asarray(totals, dtype=float)
    g = t.shape[-1]
    draws = np.concatenate([np.abs(t @ (1.0 - 2.0 * s).T) for s in swap_vectors(g, n_max, seed)], axis=-1)
    p = resampling_p(draws, np.abs(t.sum(axis=-1)), 2 ** g)
    return np.where(np.all(t == 0, axis=-1), np.nan, p)


def swap_statistics(sums_a, sums_b, statistic, swaps) -> np.ndarray:
    """``statistic`` of the two arms' totals after exchanging the arms inside the clusters each row of ``swaps``
    (R x G, 1: exchanged) marks: ``statistic(A, B)`` takes (R x p) totals of arm a and arm b, ``sums_a`` and
    ``sums_b`` are the (G x p) cluster sums of the arms' raw data. Returns (R,)."""
    a, b = np.asarray(sums_a, dtype=float), np.asarray(sums_b, dtype=float)
    s = np.asarray(swaps, dtype=float)
    moved = s @ (b - a)
    return np.asarray(statistic(a.sum(axis=0) + moved, b.sum(axis=0) - moved), dtype=float)


def cluster_swap_p(sums_a, sums_b, statistic, n_max: int = N_SWAP, seed: int = 0) -> dict:
    """Two-sided randomization test of H0 "inside every cluster the two arms' data are exchangeable" (two models'
    answers to a template's prompts; Fisher's randomization test over the 2^G cluster swaps, Lehmann & Romano 2005
    §15.2; with few clusters Canay, Romano & Shaikh 2017) for any statistic of the arms' totals (a difference of two
    models' deviation metrics, of two ratio scores): ``T`` recomputed after exchanging the arms in each swapped
    cluster, ``p`` = the share of swaps with ``|T*| >= |T|`` (:func:`resampling_p`: exact over all 2^G swaps when
    ``2^G <= n_max``, else ``(1 + hits) / (n_max + 1)`` from ``n_max`` random swaps; a swap whose statistic is
    undefined counts as a hit). Exact under H0 whatever the statistic; the statistic's sign flips when every cluster
    is swapped. No p where every swap gives the same statistic (arms that answer alike in every cluster: the
    randomization distribution is one value, the test has no size; ``no_variation`` True). ``sums_a``, ``sums_b``:
    (G x p) cluster sums of each arm's raw data; ``statistic(A, B)``: (R x p) totals -> (R,). Returns p_value,
    statistic, n_clusters, n_draws, enumerated, no_variation."""
    a = np.asarray(sums_a, dtype=float)
    g = a.shape[0]
    t_obs = float(swap_statistics(a, sums_b, statistic, np.zeros((1, g)))[0])
    draws = np.concatenate([swap_statistics(a, sums_b, statistic, s) for s in swap_vectors(g, n_max, seed)])
    p = resampling_p(np.nan_to_num(np.abs(draws), nan=np.inf), abs(t_obs), 2 ** g)
    flat = bool(np.all(np.isclose(draws, t_obs, rtol=1e-12, atol=1e-15)))
    return {"p_value": float(p) if np.isfinite(t_obs) and not flat else np.nan, "statistic": t_obs,
            "n_clusters": g, "n_draws": int(draws.size), "enumerated": draws.size == 2 ** g, "no_variation": flat}


class _WCR:
    """Bootstrap t statistics of H0: mean = mu0 under the restricted wild cluster bootstrap ``y* = mu0 + v_g (y - mu0)``
    for any mu0, from cluster totals T_g and sizes m_g and one fixed (B x G) weight matrix v. With
    ``S_g = T_g - m_g mu0``, the bootstrap mean minus mu0 is ``delta = sum_g v_g S_g / n`` and the bootstrap sample's
    residual cluster sums are ``u_g = v_g S_g - m_g delta``; every sum over g is a polynomial in mu0 whose
    coefficients (B-vectors) are computed once, so each mu0 costs O(B) (test inversion evaluates many)."""

    def __init__(self, totals: np.ndarray, sizes: np.ndarray, v: np.ndarray):
        t_, m = totals, sizes
        self.n, self.g = m.sum(), m.size
        self.vt, self.vm = v @ t_, v @ m                       # sum v S = vt - mu0 vm
        v2 = v * v
        self.q0, self.q1, self.q2 = v2 @ (t_ * t_), v2 @ (t_ * m), v2 @ (m * m)   # sum v^2 S^2
        self.r0, self.r1 = v @ (t_ * m), v @ (m * m)          # sum v S m
        self.mm = float(m @ m)

    def t(self, mu0: float) -> np.ndarray:
        n = self.n
        vs = self.vt - mu0 * self.vm
        delta = vs / n
        vss = self.q0 - 2 * mu0 * self.q1 + mu0 * mu0 * self.q2
        vsm = self.r0 - mu0 * self.r1
        uu = np.maximum(vss - 2 * delta * vsm + delta * delta * self.mm, 0.0)
        se = np.sqrt(self.g / (self.g - 1) * uu) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(se > 0, delta / se, np.where(delta == 0, 0.0, np.sign(delta) * np.inf))


def _wcr_observed(totals: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    """The estimate and its CR1 standard error from cluster totals and sizes."""
    g, n = totals.size, sizes.sum()
    ybar = totals.sum() / n
    return ybar, math.sqrt(g / (g - 1) * np.sum((totals - sizes * ybar) ** 2)) / n


def wild_cluster_mean_test(totals, sizes, null: float = 0.0, v: np.ndarray | None = None, n_boot: int = N_WILD,
                           seed: int = 0) -> float:
    """Symmetric WCR bootstrap-t p-value of H0: mean = ``null`` from cluster totals and sizes (Webb weights): the
    bootstrap |t*| at least the observed |t| (:func:`resampling_p`)."""
    t_ = np.asarray(totals, dtype=float)
    m = np.asarray(sizes, dtype=float)
    if t_.size < 2:
        return float("nan")
    ybar, se = _wcr_observed(t_, m)
    if se == 0:                  # no variance to refer the estimate to: no test (:func:`without_variance`)
        return float("nan")
    w = _WCR(t_, m, webb_weights(t_.size, n_boot, seed) if v is None else v)
    return float(resampling_p(np.abs(w.t(null)), abs(ybar - null) / se, 6 ** t_.size))


def wild_cluster_mean_interval(totals, sizes, alpha: float = 0.05, n_boot: int = N_WILD, seed: int = 0,
                               tol: float = 1e-4) -> tuple[float, float]:
    """The interval that inverts :func:`wild_cluster_mean_test`: every null whose WCR p-value exceeds alpha
    (bisection on each side of the estimate to ``tol`` standard errors, with one fixed set of weights so that p is a
    step function of the null). Contains the estimate (p = 1 there). +-inf where no null is rejected."""
    t_ = np.asarray(totals, dtype=float)
    m = np.asarray(sizes, dtype=float)
    if t_.size < 2:
        return float("nan"), float("nan")
    ybar, se = _wcr_observed(t_, m)
    if se == 0:                  # not [ybar, ybar]: no interval (:func:`without_variance`)
        return float("nan"), float("nan")
    w = _WCR(t_, m, webb_weights(t_.size, n_boot, seed))

    def p(mu):
        return float(resampling_p(np.abs(w.t(mu)), abs(ybar - mu) / se, 6 ** t_.size))

    bounds = []
    for sign in (-1.0, 1.0):
        inner, step = ybar, se
        outer = ybar + sign * step
        for _ in range(60):                      # widen until rejected
            if p(outer) <= alpha:
                break
            inner, step = outer, step * 2
            outer = ybar + sign * step
        else:
            bounds.append(sign * np.inf)
            continue
        for _ in range(200):                     # bisection; float spacing ends it at the latest
            if abs(outer - inner) <= tol * se:
                break
            mid = (inner + outer) / 2
            if p(mid) > alpha:
                inner = mid
            else:
                outer = mid
        bounds.append(inner)
    return float(bounds[0]), float(bounds[1])


# ----------------------------------------------------------------------------------------------------------------
# means, mean differences, contrasts, rates
# ----------------------------------------------------------------------------------------------------------------

def mean_inference(y, clusters=None, null: float = 0.0, alpha: float = 0.05, few: int = FEW_CLUSTERS,
                   n_boot: int = N_WILD, seed: int = 0, name: str = "") -> dict:
    """Mean of ``y`` (a value per unit, e.g. a paired difference) with the rule of the module docstring.

    ``clusters``: None (units independent), one label array, or two (crossed design). Returns n, n_clusters, df,
    estimate, sd, se_naive (s / sqrt(n)), se (CR1, one- or two-way), design_effect (se^2 / se_naive^2 with the
    naive variance ``sum e^2 / n^2``), ci_low, ci_high, ci_method, statistic (t), p_value (H0: mean = null),
    p_method. ``name`` names the clusters in the method strings ("template"); an interval at a level other than 95 %
    says so in ``ci_method`` ("90% two-sided"). A variance of 0: no test and no interval (:func:`without_variance`)."""
    y = np.asarray(y, dtype=float)
    n = int(y.size)
    out = {"n": n, "n_clusters": np.nan, "df": np.nan, "estimate": float(y.mean()) if n else np.nan,
           "sd": float(y.std(ddof=1)) if n > 1 else np.nan, "se_naive": np.nan, "se": np.nan,
           "design_effect": np.nan, "ci_low": np.nan, "ci_high": np.nan, "ci_method": "undefined (fewer than 2 values)",
           "statistic": np.nan, "p_value": np.nan, "p_method": ""}
    if n < 2:
        return out
    dims = _as_code_list(clusters, n)
    two_way = len(dims) == 2
    e = (y - y.mean()) / n
    v, g = cr1_variance(e, dims if two_way else dims[0])
    v_naive = float(np.sum(e ** 2))
    v = 0.0 if np.ptp(y) == 0 and np.isfinite(v) else exact_zero(v, v_naive)   # constant: round-off is no variance
    se = math.sqrt(v) if np.isfinite(v) else np.nan
    out.update(n_clusters=g, df=g - 1, se_naive=out["sd"] / math.sqrt(n), se=se,
               design_effect=v / v_naive if v_naive > 0 else np.nan)
    if g < 2:
        out["ci_method"] = f"undefined ({g} cluster)"
        return out
    if se == 0:
        return without_variance(out, n, clusters=None if np.ptp(y) == 0 else g)
    label = "units" if clusters is None else clusters_label(name) + (" (crossed)" if two_way else "")
    label += "" if alpha == 0.05 else f"; {1 - alpha:.0%} two-sided"       # a level other than 95 % is stated
    if not two_way and clusters is not None and g < few:
        c = dims[0]
        tot, size = np.bincount(c, weights=y), np.bincount(c).astype(float)
        lo, hi = wild_cluster_mean_interval(tot, size, alpha=alpha, n_boot=n_boot, seed=seed)
        nw = min(6 ** g, n_boot)
        method = (f"wild cluster bootstrap-t, restricted, Webb weights ({'all ' if 6 ** g <= n_boot else ''}{nw} "
                  f"draws), test inversion; G = {g} {label}")
        out.update(ci_low=lo, ci_high=hi, ci_method=method, statistic=(out["estimate"] - null) / se,
                   p_value=wild_cluster_mean_test(tot, size, null, n_boot=n_boot, seed=seed),
                   p_method=f"wild cluster bootstrap-t (restricted, Webb), G = {g}")
        return out
    q = t_quantile(g - 1, 1 - alpha / 2)
    desc = "CR1 two-way (CGM)" if two_way else "CR1"
    out.update(ci_low=out["estimate"] - q * se, ci_high=out["estimate"] + q * se,
               ci_method=f"cluster-robust t({g - 1}), {desc} SE; G = {g} {label}")
    tstat = (out["estimate"] - null) / se
    out.update(statistic=tstat, p_value=float(2 * stats.t.sf(abs(tstat), g - 1)))
    out["p_method"] = f"Wald t({g - 1}) on the {desc} SE"
    return out


def contrast_inference(y, in_group, clusters=None, alpha: float = 0.05) -> dict:
    """Difference of means ``mean(y | in group) - mean(y | rest)`` (a subgroup against the rest of the same model)
    with its cluster-robust (CR1, one- or two-way) SE and the contrast's *own* design effect.

    The influence value of unit i is ``(y_i - ybar_g) / n_g`` inside the group and ``-(y_i - ybar_r) / n_r`` outside,
    so a factor crossed with the cluster (every template in both arms) has its cluster effects cancel inside each
    cluster sum, and a factor constant within clusters (SSQA's gender) does not: the design effect of a contrast is
    that of its own influence values, not the design effect of the model's overall rate. Returns estimate, se,
    se_naive, design_effect, n_group, n_rest, n_clusters, df, ci_low, ci_high (t(G - 1), G the clusters the
    contrast rests on: :func:`contrast_clusters`; none where the SE is 0: :func:`without_variance`)."""
    y = np.asarray(y, dtype=float)
    gmask = np.asarray(in_group, dtype=bool)
    ng, nr = int(gmask.sum()), int((~gmask).sum())
    if ng < 1 or nr < 1:
        return {"estimate": np.nan, "se": np.nan, "se_naive": np.nan, "design_effect": np.nan, "n_group": ng,
                "n_rest": nr, "n_clusters": np.nan, "df": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                "ci_method": "undefined (an empty arm)"}
    mg, mr = y[gmask].mean(), y[~gmask].mean()
    psi = np.where(gmask, (y - mg) / ng, -(y - mr) / nr)
    v, g = cr1_variance(psi, clusters if clusters is not None else None)
    v_naive = float(np.sum(psi ** 2))
    flat = np.ptp(y[gmask]) == 0 and np.ptp(y[~gmask]) == 0      # constant in each arm: round-off is no variance
    v = 0.0 if flat and np.isfinite(v) else exact_zero(v, v_naive)
    se = math.sqrt(v) if np.isfinite(v) else np.nan
    if clusters is not None:
        g = min(g, contrast_clusters(gmask, clusters))
    q = t_quantile(g - 1, 1 - alpha / 2) if g >= 2 else np.nan
    out = {"estimate": float(mg - mr), "se": se, "se_naive": math.sqrt(v_naive), "design_effect":
           v / v_naive if v_naive > 0 else np.nan, "n_group": ng, "n_rest": nr, "n_clusters": g, "df": g - 1,
           "ci_low": float(mg - mr - q * se), "ci_high": float(mg - mr + q * se), "ci_method": ""}
    return (without_variance(out, ng + nr, p=(), notes=("ci_method",), clusters=None if flat else g) if se == 0
            else out)


def clopper_pearson(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson 1934) interval for ``k`` successes in ``n`` trials, the Beta-quantile form
    ``[B(a/2; k, n-k+1), B(1-a/2; k+1, n-k)]`` (= ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``
    for integer counts); vectorised, non-integer ``k``/``n``
    allowed (for effective sample sizes). ``n = 0`` gives ``(nan, nan)``."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k <= 0, 0.0, stats.beta.ppf(alpha / 2, np.maximum(k, 1e-12), n - k + 1))
        hi = np.where(k >= n, 1.0, stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1e-12)))
    return np.where(n <= 0, np.nan, lo), np.where(n <= 0, np.nan, hi)


def korn_graubard(k: float, n: float, deff: float, df: float, alpha: float = 0.05) -> tuple[float, float, float]:
    """Korn-Graubard interval of a clustered proportion: Clopper-Pearson at ``p = k/n`` on the degrees-of-freedom
    adjusted effective size ``n* = n / max(deff, 1) * (t_{n-1} / t_df)^2`` (quantiles at 1 - alpha/2). Returns
    (low, high, n*)."""
    if n <= 0:
        return float("nan"), float("nan"), float("nan")
    d = 1.0 if not np.isfinite(deff) else max(float(deff), 1.0)
    n_eff = n / d
    if df is not None and np.isfinite(df) and df >= 1 and n > 1:
        n_eff *= (t_quantile(n - 1, 1 - alpha / 2) / t_quantile(df, 1 - alpha / 2)) ** 2
    lo, hi = clopper_pearson(k / n * n_eff, n_eff, alpha)
    return float(lo), float(hi), float(n_eff)


def rate_inference(y, clusters=None, alpha: float = 0.05) -> dict:
    """A 0/1 (or [0, 1]) outcome's rate with the cluster-robust SE (CR1, one- or two-way), its design effect over
    the binomial variance p(1-p)/n, and the Korn-Graubard interval with df = G - 1 (units independent: plain
    Clopper-Pearson). Returns n, n_clusters, df, k, rate, se_naive, se, design_effect, n_effective, ci_low,
    ci_high, ci_method."""
    y = np.asarray(y, dtype=float)
    n = int(y.size)
    k = float(y.sum())
    p = k / n if n else np.nan
    se_naive = math.sqrt(p * (1 - p) / n) if n else np.nan
    out = {"n": n, "n_clusters": np.nan, "df": np.nan, "k": k, "rate": p, "se_naive": se_naive, "se": np.nan,
           "design_effect": np.nan, "n_effective": np.nan, "ci_low": np.nan, "ci_high": np.nan,
           "ci_method": "undefined (no responses)"}
    if n == 0:
        return out
    if clusters is None:
        lo, hi = clopper_pearson(k, n, alpha)
        return {**out, "n_clusters": n, "df": n - 1, "se": se_naive, "design_effect": 1.0, "n_effective": n,
                "ci_low": float(lo), "ci_high": float(hi), "ci_method": f"Clopper-Pearson (units independent, n = {n})"}
    dims = _as_code_list(clusters, n)
    v, g = cr1_variance((y - p) / n, dims if len(dims) == 2 else dims[0])
    v_bin = p * (1 - p) / n
    deff = v / v_bin if v_bin > 0 and np.isfinite(v) else np.nan
    lo, hi, n_eff = korn_graubard(k, n, deff, g - 1 if g >= 2 else np.nan, alpha)
    two = " two-way (CGM)" if len(dims) == 2 else ""
    return {**out, "n_clusters": g, "df": g - 1, "se": math.sqrt(v) if np.isfinite(v) else np.nan,
            "design_effect": deff, "n_effective": n_eff, "ci_low": lo, "ci_high": hi,
            "ci_method": f"Korn-Graubard (Clopper-Pearson on n/deff x (t_n-1/t_{g - 1})^2, CR1{two} deff); "
                         f"G = {g} clusters, t({g - 1})"}


def cluster_labels(df: pd.DataFrame, cluster: str | Sequence[str] | None):
    """The label array(s) of ``cluster`` (one column name, or two for a crossed design) from ``df``; None stays
    None. Raises a KeyError naming a missing column."""
    if cluster is None:
        return None
    cols = [cluster] if isinstance(cluster, str) else list(cluster)
    for c in cols:
        if c not in df.columns:
            raise KeyError(f"cluster column {c!r} not in the table; columns are {list(df.columns)}")
    if len(cols) == 1:
        return df[cols[0]].to_numpy()
    if len(cols) != 2:
        raise ValueError(f"one or two cluster columns, got {cols}")
    return [df[cols[0]].to_numpy(), df[cols[1]].to_numpy()]


def clusters_label(name: str | None) -> str:
    """"template clusters" for method strings; plain "clusters" for an unnamed or generic (``cluster``) column."""
    return f"{name} clusters" if name and name != "cluster" else "clusters"


def cluster_name(cluster: str | Sequence[str] | None) -> str:
    """``template`` or ``template x stigma`` (for method strings)."""
    if cluster is None:
        return "unit"
    return cluster if isinstance(cluster, str) else " x ".join(cluster)


def noncentrality_interval(f_obs: float, df1: float, df2: float, alpha: float = 0.05) -> tuple[float, float, float]:
    """(low, median, high) of the noncentrality lambda of an F(df1, df2) statistic, by test inversion (Steiger &
    Fouladi 1997): ``low`` solves ``ncf.cdf(f_obs, df1, df2, low) = 1 - alpha``, ``median`` ``... = 1/2`` (the
    median-unbiased estimate, inside the interval by construction, unlike the plug-in ``df1 * f_obs``, which lies
    above ``high`` when the statistic is far below its df) and ``high`` ``... = alpha`` (each 0 where the central F
    already puts ``f_obs`` below that quantile). ``ncf.cdf`` decreases in lambda, so ``low >
    0`` exactly when the central F test rejects, ``f.sf(f_obs) < alpha``: the one-sided bounds each hold with
    probability 1 - alpha, the interval with 1 - 2 alpha. ``df2 = inf`` is the noncentral chi-square case
    (``df1 * f_obs`` ~ ncx2(df1, lambda))."""
    from scipy.optimize import brentq
    if not (np.isfinite(f_obs) and df1 > 0 and df2 > 0):
        return float("nan"), float("nan")
    if np.isinf(df2):
        def cdf(lam):
            return float(stats.chi2.cdf(f_obs * df1, df1)) if lam == 0 else float(stats.ncx2.cdf(f_obs * df1, df1, lam))
    else:
        def cdf(lam):
            return float(stats.f.cdf(f_obs, df1, df2)) if lam == 0 else float(stats.ncf.cdf(f_obs, df1, df2, lam))

    def solve(target):
        if cdf(0.0) <= target:
            return 0.0
        hi = max(1.0, f_obs * df1)
        while cdf(hi) > target:
            hi *= 2
        return float(brentq(lambda lam: cdf(lam) - target, 0.0, hi, xtol=1e-10, rtol=1e-12))

    return solve(1 - alpha), solve(0.5), solve(alpha)


def rao_scott_gof(labels, clusters, categories: Sequence, p0: Sequence[float] | None = None,
                  alpha: float = 0.05) -> dict:
    """Goodness of fit of clustered categorical outcomes to ``p0`` (uniform by default) with the first-order Rao-Scott
    correction (Rao & Scott 1981, §3; see the module docstring).

    ``labels``: one category per unit; ``clusters``: one cluster label per unit (None: units independent). Pearson's
    ``X2 = n sum_j (p_j - pi_j)^2 / pi_j``; the mean generalized design effect
    ``delta = n / (k - 1) * sum_j V(p_j) / pi_j``, with ``V(p_j)`` the CR1 variance of the share of category j
    (influence values ``(1[y_i = j] - p_j) / n``); under multinomial sampling ``n V(p_j) = p_j (1 - p_j)`` and
    delta is about 1. ``delta`` is floored at 1 (the corrected test is never more liberal than the naive one, as the
    Korn-Graubard rate interval floors its design effect). ``X2 / delta`` is referred to F(k - 1, (k - 1)(G - 1)) as
    ``X2 / delta / (k - 1)`` (the df-adjusted form, Thomas & Rao 1987), which with many clusters is chi-square(k - 1).
    Returns n, k, n_clusters, chi2 (naive), p_naive (chi-square(k - 1), units independent), design_effect (delta,
    unfloored), chi2_rao_scott, df1, df2, p_value, p_method, and Cohen's w of the shares against ``p0``: ``cohens_w``
    (median-unbiased) with ``w_ci_low``/``w_ci_high``, the 1 - 2 ``alpha`` noncentral-F interval that inverts this
    test (lower bound > 0 exactly when ``p_value`` < ``alpha``; :func:`noncentrality_interval`, w = sqrt(lambda delta
    / n)), and the plug-in ``cohens_w_plugin`` = sqrt(X2 / n) (also ``cohens_w`` where fewer than 2 clusters leave
    no test to invert)."""
    y = pd.Series(np.asarray(labels, dtype=object))
    cats = list(categories)
    k, n = len(cats), int(y.size)
    pi = np.full(k, 1.0 / k) if p0 is None else np.asarray(p0, dtype=float)
    out = {"n": n, "k": k, "n_clusters": np.nan, "chi2": np.nan, "p_naive": np.nan, "design_effect": np.nan,
           "chi2_rao_scott": np.nan, "df1": k - 1, "df2": np.nan, "p_value": np.nan, "p_method": "",
           "cohens_w": np.nan, "w_ci_low": np.nan, "w_ci_high": np.nan, "w_ci_method": "", "cohens_w_plugin": np.nan}
    if n == 0 or k < 2:
        return out
    ind = np.column_stack([(y == c).to_numpy(dtype=float) for c in cats])
    p = ind.mean(axis=0)
    chi2 = float(n * np.sum((p - pi) ** 2 / pi))
    out.update(chi2=chi2, p_naive=float(stats.chi2.sf(chi2, k - 1)))
    c = codes(clusters) if clusters is not None else np.arange(n)
    v = np.array([cr1_variance((ind[:, j] - p[j]) / n, c)[0] for j in range(k)])
    g = int(c.max() + 1)
    delta = float(n / (k - 1) * np.sum(v / pi)) if g >= 2 else np.nan
    d = max(delta, 1.0) if np.isfinite(delta) else np.nan
    df2 = (k - 1) * (g - 1)
    x_rs = chi2 / d
    out.update(n_clusters=g, design_effect=delta, chi2_rao_scott=x_rs, df2=df2,
               p_value=float(stats.f.sf(x_rs / (k - 1), k - 1, df2)) if np.isfinite(x_rs) else np.nan,
               p_method=f"Rao-Scott first-order chi-square (X2 / {d:.3g}, CR1 design effect), F({k - 1}, {df2}); "
                        f"G = {g} clusters", cohens_w_plugin=math.sqrt(chi2 / n), cohens_w=math.sqrt(chi2 / n),
               w_ci_method="no interval: fewer than 2 clusters (plug-in estimate)")
    if np.isfinite(x_rs) and df2 > 0:
        lo, mid, hi = noncentrality_interval(x_rs / (k - 1), k - 1, df2, alpha)
        out.update(cohens_w=math.sqrt(mid * d / n), w_ci_low=math.sqrt(lo * d / n), w_ci_high=math.sqrt(hi * d / n),
                   w_ci_method=f"noncentral F({k - 1}, {df2}) inverted (Steiger & Fouladi 1997), "
                               f"{1 - 2 * alpha:.0%} two-sided (each bound one-sided {1 - alpha:.0%}), "
                               f"median-unbiased estimate; w = sqrt(lambda x {d:.3g} / n)")
    return out
