"""Design-based estimation of a population mean from a stratified random sample (Cochran 1977, *Sampling
Techniques*, 3rd ed., ch. 5).

A profile that scores a sample of each file (e.g. CrowS-Pairs: the same number of pairs per bias type) estimates
the mean over *every item of the file* by weighting each stratum back to its share of the file:

* stratum weights W_h = N_h / N, N_h the stratum's items in the file after the file's exclusions (eq. 5.1);
* the stratified mean  ȳ_st = Σ_h W_h ȳ_h  (eq. 5.1), ȳ_h the mean of the n_h sampled items of stratum h;
* its variance  v(ȳ_st) = Σ_h W_h² s_h² / n_h  (eq. 5.7 without the (1 - f_h) factor), s_h² the stratum's sample
  variance (ddof 1).

**Superpopulation inference, no finite-population correction** in the primary analysis: the file is one draw of
the pairs such a protocol produces, so a census (every item scored, the ``paper`` profile) still has sampling
variance and reduces to the ordinary stratified analysis. The FPC variant, Σ_h W_h² (1 - f_h) s_h² / n_h with
f_h = n_h / N_h (eq. 5.7), is a sensitivity analysis (``fpc=True``).

**Degrees of freedom**: Satterthwaite's effective df of the stratified variance (Cochran 1977, §5.4, eq. 5.16),
    ν = (Σ_h g_h s_h²)² / Σ_h (g_h s_h²)² / (n_h - 1),  g_h = W_h² (1 - f_h) / n_h  (f_h = 0 without the FPC),
which lies between min(n_h - 1) and n - H and, unlike n - H, shrinks when a few heavily weighted strata carry the
variance. Test and interval use t(ν).

**Effective sample size** (Kish 1965, §8.2): n_eff = n / deff, deff = v(ȳ_st) / (S²_w / n), S²_w the weighted
estimate of the population variance; the Bayes factors of a weighted estimate use it (:mod:`.hypothesis`).

**Missing outcomes** (NaN: a tie in a preference) are left out within their stratum, which keeps its population
weight (weighting-class adjustment: within a stratum, the missing items are taken to be like the others); n_h counts
the items with an outcome.

The inputs are one row per sampled item: the outcome, its stratum and its design weight w_i = N_h / n_h (the
inverse of its inclusion probability), so N_h = Σ_{i in h} w_i is recovered from the sample table itself. Pure
numpy/scipy; nothing imports torch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .clustered import N_SWAP, without_variance

PRIMARY = "stratified, design-weighted (W_h = N_h/N), no FPC, t(Satterthwaite df)"
FPC = "stratified, design-weighted (W_h = N_h/N), with FPC (1 - n_h/N_h), t(Satterthwaite df)"


def _undefined(why: str, **known) -> dict:
    base = {"estimate": np.nan, "se": np.nan, "df": np.nan, "t": np.nan, "p_value": np.nan, "ci_low": np.nan,
            "ci_high": np.nan, "n": 0, "n_strata": 0, "n_population": np.nan, "n_eff": np.nan,
            "design_effect": np.nan, "method": why}
    return {**base, **known}


def stratified_mean(y, stratum, weight, null: float = 0.0, fpc: bool = False, alpha: float = 0.05) -> dict:
    """The stratified (design-weighted) mean of ``y`` with its variance, Satterthwaite df, two-sided t test of
    ``null`` and 1 - ``alpha`` interval (module docstring; Cochran 1977, eqs. 5.1, 5.7, 5.16).

    ``y``: outcome per sampled item (NaN = missing, left out within its stratum); ``stratum``: its stratum;
    ``weight``: its design weight N_h / n_h (constant within a stratum). Returns estimate, se, df, t, p_value, ci_low,
    ci_high, n (items with an outcome), n_strata, n_population (N), n_eff (Kish), design_effect and ``method``. An
    estimate is undefined (NaN, ``method`` says why) when a stratum has no item with an outcome; its variance when a
    stratum has a single one; a variance of 0 gives no test and no interval (``method``: "not estimable (…)",
    :func:`biaslab.stats.clustered.without_variance`)."""
    y = np.asarray(y, dtype=float)
    h = np.asarray(stratum)
    w = np.asarray(weight, dtype=float)
    if not (len(y) == len(h) == len(w)):
        raise ValueError(f"stratified_mean: y, stratum and weight differ in length ({len(y)}, {len(h)}, {len(w)})")
    if len(y) == 0:
        return _undefined("undefined: no item")
    if not np.all(np.isfinite(w) & (w >= 1 - 1e-9)):
        raise ValueError("stratified_mean: every design weight N_h/n_h must be a finite number >= 1")
    df = pd.DataFrame({"y": y, "h": h, "w": w})
    g = df.groupby("h", sort=True)
    spread = g["w"].agg(lambda s: s.max() - s.min())
    if (spread > 1e-9 * g["w"].max()).any():
        raise ValueError(f"stratified_mean: stratum {spread.idxmax()!r} has unequal design weights; a stratified "
                         "random sample has one weight N_h/n_h per stratum")
    N_h = g["w"].sum()                                   # n_h(sampled) x N_h / n_h(sampled)
    N = float(N_h.sum())
    ok = df[np.isfinite(df["y"])]
    n_h = ok.groupby("h")["y"].size().reindex(N_h.index, fill_value=0)
    if (n_h == 0).any():
        return _undefined(f"undefined: stratum {n_h[n_h == 0].index[0]!r} has no sampled item with an outcome, so "
                          "its share of the population is not estimated", n=int(n_h.sum()),
                          n_strata=int(len(N_h)), n_population=N)
    W = N_h / N
    mean_h = ok.groupby("h")["y"].mean().reindex(N_h.index)
    est = float((W * mean_h).sum())
    var_h = ok.groupby("h")["y"].var(ddof=1).reindex(N_h.index)
    var_h[ok.groupby("h")["y"].agg(np.ptp).reindex(N_h.index) == 0] = 0.0     # constant: round-off is no variance
    n = int(n_h.sum())
    known = dict(estimate=est, n=n, n_strata=int(len(N_h)), n_population=N)
    if (n_h < 2).any():
        return _undefined(f"undefined variance: stratum {n_h[n_h < 2].index[0]!r} has a single sampled item with "
                          "an outcome (s_h² is not estimable)", **known)
    f = (n_h / N_h).clip(upper=1.0) if fpc else 0.0
    g_h = W ** 2 * (1 - f) / n_h
    parts = g_h * var_h
    var = float(parts.sum())
    se = float(np.sqrt(var))
    den = float((parts ** 2 / (n_h - 1)).sum())
    nu = var ** 2 / den if den > 0 else np.nan
    # Kish's design effect against a simple random sample of n from the population (weighted S², respondents)
    w_resp = (N_h / n_h).reindex(ok["h"]).to_numpy()
    s2_pop = float(np.sum(w_resp * (ok["y"].to_numpy() - est) ** 2) / (N - 1)) if N > 1 else np.nan
    deff = var / (s2_pop / n) if s2_pop > 0 and var > 0 else np.nan
    out = {**known, "se": se, "df": nu, "n_eff": n / deff if np.isfinite(deff) else np.nan, "design_effect": deff,
           "method": FPC if fpc else PRIMARY}
    if se == 0:                                          # no variance within any stratum: no test, no interval
        return without_variance(out, n, p=("t", "p_value"), notes=("method",))
    if not np.isfinite(nu):
        return {**out, "t": np.nan, "p_value": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    t = (est - null) / se
    q = stats.t.ppf(1 - alpha / 2, nu)
    return {**out, "t": float(t), "p_value": float(2 * stats.t.sf(abs(t), nu)), "ci_low": est - q * se,
            "ci_high": est + q * se}


def has_design(df: pd.DataFrame, stratum: str = "stratum", weight: str = "weight") -> bool:
    """Whether a table carries a stratified design (its ``stratum`` and ``weight`` columns, weights present)."""
    return stratum in df.columns and weight in df.columns and bool(df[weight].notna().all()) and len(df) > 0


def share_swap_null(n_h, W, n_max: int = N_SWAP, rng: np.random.Generator | None = None) -> tuple:
    """The randomization distribution of ``D = |sum_h W_h (k_h / n_h - 1/2)|``, the stratified share's distance from
    1/2, under the sentence swap: exchanging a pair's two sentences turns its preference x into 1 - x, so over the
    2^n swaps every pair's preference is a fair coin and k_h ~ Binomial(n_h, 1/2), independently over strata, whatever
    the data. Returns ``(values, probabilities)``: all prod(n_h + 1) points with their exact probabilities where they
    number at most ``n_max + 1``; else ``n_max`` random draws (from ``rng``) and None. The values are summed stratum
    by stratum in a fixed order (:func:`_share_terms`), so an observed D is one of them to the last bit."""
    n_h, W = np.asarray(n_h, dtype=int), np.asarray(W, dtype=float)
    terms = _share_terms(n_h, W)
    if np.prod((n_h + 1).astype(float)) <= n_max + 1:
        vals, probs = np.zeros(1), np.ones(1)
        for n, v in zip(n_h, terms):
            vals = (vals[:, None] + v[None, :]).ravel()
            probs = (probs[:, None] * stats.binom.pmf(np.arange(n + 1), n, 0.5)[None, :]).ravel()
        return np.abs(vals), probs
    rng = rng if rng is not None else np.random.default_rng(0)
    vals = np.zeros(n_max)
    for n, v in zip(n_h, terms):                     # k_h by its inverse CDF (numpy's binomial sampler is slower)
        cdf = stats.binom.cdf(np.arange(n + 1), n, 0.5)
        vals = vals + v[np.minimum(np.searchsorted(cdf, rng.random(n_max), side="right"), n)]
    return np.abs(vals), None


def _share_terms(n_h: np.ndarray, W: np.ndarray) -> list[np.ndarray]:
    """Per stratum, ``W_h (k / n_h - 1/2)`` for k = 0..n_h."""
    return [w * (np.arange(n + 1) / n - 0.5) for n, w in zip(n_h, W)]


def share_swap_p(x, stratum, weight, n_max: int = N_SWAP, seed: int = 0) -> dict:
    """Two-sided sentence-swap randomization test of "the two sentences of every pair are exchangeable" (so the share
    of pairs preferring the more stereotyped one is 1/2) for a stratified share ``sum_h W_h k_h / n_h`` (Fisher's
    randomization test, Lehmann & Romano 2005 §15.2): ``p = P(D* >= D)`` over the swap distribution
    (:func:`share_swap_null`), exact where it is enumerated (one stratum, or equal weights: the exact binomial test)
    and ``(1 + #{D* >= D}) / (n_max + 1)`` from ``n_max`` random swaps otherwise, a p whose size is at most its level
    at any level (Phipson & Smyth 2010). ``x``: 0/1 per sampled pair, NaN (a tie) left out within its stratum, which
    keeps its population size N_h = the sum of its design weights (:func:`stratified_mean`'s weighting-class rule).
    Under the weaker null "the file's share is 1/2" with strata whose shares differ, D's variance is below the swap
    distribution's, so the test is conservative there. Returns estimate, p_value, n, n_strata and ``method``."""
    df = pd.DataFrame({"x": np.asarray(x, dtype=float), "h": np.asarray(stratum), "w": np.asarray(weight, float)})
    fin = df["x"].dropna()
    if not np.isin(fin, (0.0, 1.0)).all():
        raise ValueError("share_swap_p: x must be 0, 1 or NaN")
    N_h = df.groupby("h", sort=True)["w"].sum()
    ok = df[df["x"].notna()]
    n_h = ok.groupby("h")["x"].size().reindex(N_h.index, fill_value=0)
    if ok.empty or (n_h == 0).any():
        return {"estimate": np.nan, "p_value": np.nan, "n": int(n_h.sum()), "n_strata": int(len(N_h)),
                "method": "undefined: a stratum has no pair with a preference"}
    W = (N_h / N_h.sum()).to_numpy()
    k_h = ok.groupby("h")["x"].sum().reindex(N_h.index).to_numpy().astype(int)
    n = n_h.to_numpy()
    if np.ptp(W / n) <= 1e-12 * np.max(W / n):      # a self-weighting sample: one binomial, the exact binomial test
        W, k_h, n = np.ones(1), k_h.sum(keepdims=True), n.sum(keepdims=True)
    obs = 0.0
    for t, k in zip(_share_terms(n, W), k_h):        # the order share_swap_null sums in
        obs += t[k]
    vals, probs = share_swap_null(n, W, n_max, np.random.default_rng(seed))
    hit = vals >= abs(obs) - 1e-12
    if probs is not None:
        p, how = float(probs[hit].sum()), f"exact, all {vals.size:,} points"
    else:
        p, how = (1 + int(hit.sum())) / (n_max + 1), f"{n_max:,} random swaps"
    return {"estimate": float(obs + 0.5), "p_value": min(1.0, p), "n": int(n.sum()), "n_strata": int(len(N_h)),
            "method": f"sentence-swap randomization test ({how}; "
                      + (f"{len(n)} strata)" if len(n) > 1 else "weights equal: the exact binomial test)")}
