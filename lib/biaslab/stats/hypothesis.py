"""Bias detection as hypothesis testing over contrastive pairs (Si et al., "Detecting Biases of GPT Models with
Bayesian Hypothesis Testing", papers/bayesian_crows_pairs.md; equation numbers below are the paper's).

Two schemes over n pairs (x_i, y_i) of a more stereotypical sentence x_i and a less stereotypical one y_i:

* **Likelihood scheme** (§3.1, §3.3.1, §4.2): a per-pair score difference D_i (eq. 2 log-probability, eq. 3
  length-normalized log-probability = LPBS, eq. 4 perplexity = PPB), tested for H0: E[D_i] = 0 (eq. 5) with the
  paired Student t test, the Wilcoxon signed-rank test and the JZS Bayes factor (eq. 8; Cauchy prior scale r = √2/2
  on the effect size, Jeffreys prior on the variance; Rouder et al. 2009) as computed by pingouin.
* **Preference scheme** (§3.2, §3.3.2): X_i = 1 when the model prefers x_i, S_n = Σ X_i ~ Binomial(n, π), tested
  for H0: π = 0.5 (eq. 6) with the exact two-sided binomial test (scipy) and the Bayes factor with a uniform prior
  on π (eq. 9), computed exactly in closed form.

Bayes factors are classified by the paper's Table 1 (Andraszewicz et al., 2015). Which tests are decided, and how,
is the analysis plan's (:mod:`biaslab.stats.verdict`); this module computes the tests.

**Every Bayes factor with its prior**: a BF10 depends on the prior under H1, so each one is reported with
the prior used (``bf_prior``: "JZS Cauchy r = 0.707", "Beta(1, 1)") and its range over a stated set of priors
(``bf10_min``, ``bf10_max``, ``bf_prior_range``): Cauchy scales :data:`JZS_SCALES` (r = 0.2 to 1: BayesFactor's
"medium" 0.707 and "wide" 1, and narrower priors for the small effects bias benchmarks look for) and symmetric
Beta(a, a) priors on π, :data:`BETA_PRIORS` (a = 1, uniform, to a = 50, concentrated near 0.5: sd 0.07). The
Beta-binomial BF10 against π = 0.5 is ``B(k + a, n - k + a) / B(a, a) · 2^n`` (eq. 9 with a Beta(a, a) prior in place
of the uniform). A verdict may call evidence "for H1/H0" only when the whole range agrees (``stats.verdict``), and so
does the ``evidence`` column (:func:`evidence_over_range`: a Table 1 label only where the whole range agrees, the
weakest category of the range; "inconclusive over the prior range (BF10 a to b)" otherwise); the single-prior label
of the paper's Table 1 is kept as ``evidence_default_prior`` for comparison with the paper.

Everything here is a pure function over numbers, arrays or DataFrames; nothing imports torch.
"""

from __future__ import annotations

import math
import numbers
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import integrate, optimize, special, stats

from .clustered import clopper_pearson

#: Cauchy prior scale on the effect size for the JZS Bayes factor (pingouin's and JASP's default, the paper's).
SQRT2_2 = math.sqrt(2.0) / 2.0

#: Cauchy prior scales over which every JZS Bayes factor's sensitivity range is reported
JZS_SCALES = (0.2, 0.5, SQRT2_2, 1.0)
#: a of the symmetric Beta(a, a) priors on pi over which every binomial Bayes factor's range is reported
BETA_PRIORS = (1, 2, 5, 10, 20, 50)
#: the one prior of the paper's preference Bayes factors (eq. 9)
PAPER_PRIOR = "Beta(1, 1), uniform on π: the paper's prior (eq. 9)"

#: scores whose per-pair differences are heavy-tailed: their rows lead with the Wilcoxon signed-rank test, estimated by
#: the Hodges-Lehmann pseudo-median with the interval that inverts that test (the others lead with t, the mean and its
#: t interval)
WILCOXON_LED = ("perplexity",)

#: The three per-pair scores of §3.1: column suffix -> (equation, paper's name)
SCORES = {
    "logprob": ("eq. 2", "LogP"),
    "norm_logprob": ("eq. 3", "LPBS"),
    "perplexity": ("eq. 4", "PPB"),
}

# --------------------------------------------------------------------------------------------------------------
# Scores (eq. 1-4)
# --------------------------------------------------------------------------------------------------------------


def perplexity(sum_logprob, n_tokens, paper_printed: bool = False):
    """Perplexity of a sentence from its summed token log-probability (eq. 1) and its token count |x|.

    We use the standard definition PPL(x) = exp(-log P(x) / |x|), "the exponentiated *negative* normalized log
    probability" as the paper's text says. The formula printed under it, exp(log P(x) / |x|), drops the minus sign
    (``paper_printed=True`` reproduces it, for comparison only). The signs of Table 2 (LPBS > 0 goes with PPB < 0 in
    every column) show that the authors' numbers used the standard definition.

    |x| is the number of tokens whose log-probability is summed (the engine's ``n_tokens``: the sentence's tokens,
    scored after the BOS prefix where the model has one).
    """
    s = np.asarray(sum_logprob, dtype=float)
    n = np.asarray(n_tokens, dtype=float)
    if np.any(n <= 0):
        raise ValueError("perplexity: every n_tokens must be positive")
    return np.exp(s / n) if paper_printed else np.exp(-s / n)


def pair_differences(logp_more, n_more, logp_less, n_less) -> pd.DataFrame:
    """Per-pair score differences D_i of §3.1 (x = the more stereotypical sentence, y = the less stereotypical):

    * ``d_logprob``      = log P(x) - log P(y)                       (eq. 2)
    * ``d_norm_logprob`` = log P(x)/|x| - log P(y)/|y|               (eq. 3; its mean over pairs is LPBS)
    * ``d_perplexity``   = PPL(x) - PPL(y), PPL = exp(-log P / |.|)  (eq. 4; its mean over pairs is PPB)

    A model that prefers stereotypes has D > 0 for eq. 2 and 3 and D < 0 for eq. 4.
    """
    lm, nm = np.asarray(logp_more, float), np.asarray(n_more, float)
    ll, nl = np.asarray(logp_less, float), np.asarray(n_less, float)
    return pd.DataFrame({
        "d_logprob": lm - ll,
        "d_norm_logprob": lm / nm - ll / nl,
        "d_perplexity": perplexity(lm, nm) - perplexity(ll, nl),
    })


# --------------------------------------------------------------------------------------------------------------
# Likelihood scheme: paired t, Wilcoxon, JZS Bayes factor (eq. 5, 8)
# --------------------------------------------------------------------------------------------------------------


def _log_jzs_integrand_u(u, t, n, r, df):
    """log of the integrand of Rouder et al. (2009) eq. 1 (the one pingouin integrates in g), written in
    u = log g and including the Jacobian dg = g du; every term is computed in log space."""
    u = np.asarray(u, dtype=float)
    log_a = np.logaddexp(0.0, math.log(n * r * r) + u)            # log(1 + n g r^2)
    tt = t * t / df
    log1p_term = np.log1p(np.exp(math.log(tt) - log_a)) if tt > 0 else 0.0 * u
    return (-0.5 * log_a - (df + 1) / 2.0 * log1p_term - 0.5 * math.log(2 * math.pi)
            - 0.5 * u - 0.5 * np.exp(-u))


def log_jzs_bf10(t: float, n: float, r: float = SQRT2_2, df: float | None = None) -> float:
    """Natural log of the one-sample (paired) JZS Bayes factor BF10 (eq. 8), integrated in log space.

    ``n`` is the number of pairs and ``df`` = n - 1 by default; for an independent two-sample test pass the
    effective size n = nx·ny/(nx+ny) and df = nx + ny - 2 (as pingouin does).

    Same integral as pingouin's ``bayesfactor_ttest`` (Rouder et al. 2009, eq. 1), but over u = log g with the
    integrand scaled by its maximum and the range cut where it has fallen below e^-60 of it, so it neither
    underflows nor misses a narrow peak when n or t is large. Used as the fallback where pingouin fails, and in
    the tests as a cross-check of pingouin.
    """
    df = n - 1 if df is None else df
    if df < 1 or not np.isfinite(t):
        return float("nan")
    log_den = -(df + 1) / 2.0 * math.log1p(t * t / df)
    h = lambda u: float(_log_jzs_integrand_u(u, t, n, r, df))  # noqa: E731
    opt = optimize.minimize_scalar(lambda u: -h(u), bounds=(-60.0, 700.0), method="bounded",
                                   options={"xatol": 1e-9})
    u0 = opt.x
    grid = np.linspace(-60.0, 700.0, 7601)                      # the mode search can stop in a local flat
    vals = _log_jzs_integrand_u(grid, t, n, r, df)
    if vals.max() > h(u0):
        u0 = float(grid[vals.argmax()])
        u0 = optimize.minimize_scalar(lambda u: -h(u), bounds=(u0 - 0.2, u0 + 0.2), method="bounded").x
    c = h(u0)
    ok = grid[vals > c - 60.0]
    lo, hi = min(ok.min(), u0) - 1.0, max(ok.max(), u0) + 1.0
    f = lambda u: math.exp(h(u) - c)  # noqa: E731
    total = sum(integrate.quad(f, a, b, limit=400, epsabs=0, epsrel=1e-11)[0]
                for a, b in ((lo, u0), (u0, hi)))
    return float(c + math.log(total) - log_den)


def jzs_log_bf10(t: float, n: int, r: float = SQRT2_2) -> float:
    """Natural log of the JZS Bayes factor BF10 of the one-sample / paired t test (eq. 8), from the t statistic and
    the number of pairs n.

    Computed by ``pingouin.bayesfactor_ttest(t, n, paired=True, r=r)`` (what the paper used, §4.3). pingouin
    integrates in g over (0, ∞) directly; where that fails (a ZeroDivisionError, inf or 0 once the denominator
    (1 + t²/ν)^(-(ν+1)/2) underflows, e.g. t = 60 with n = 1,600), we use :func:`log_jzs_bf10`, the same integral
    in log space. The two agree to ~1e-4 in log BF10 where both work (tests/test_hypothesis.py).

    The prior scale: the paper and the brief say r = √2/2 = 0.70711; pingouin's default is the rounded 0.707, which
    changes BF10 by about 0.005 % (26.7427 vs 26.7435 for pingouin's example t = 3.5, 20 + 20). We pass √2/2.
    """
    import pingouin as pg

    if n < 2 or not np.isfinite(t):
        return float("nan")
    try:
        with np.errstate(all="ignore"):
            bf = float(pg.bayesfactor_ttest(float(t), int(n), paired=True, r=r))
    except (ZeroDivisionError, OverflowError, FloatingPointError):
        bf = float("nan")
    if np.isfinite(bf) and bf > 0:
        return math.log(bf)
    return log_jzs_bf10(t, n, r)


def _bf(lb: float) -> float:
    """exp(log BF10): inf where BF10 exceeds the float range, NaN for NaN."""
    return float("nan") if math.isnan(lb) else (math.exp(lb) if lb < 709.7 else float("inf"))


def jzs_bf10(t: float, n: int, r: float = SQRT2_2) -> float:
    """JZS Bayes factor BF10 (eq. 8); see :func:`jzs_log_bf10`. inf where BF10 exceeds the float range."""
    return _bf(jzs_log_bf10(t, n, r))


def jzs_prior_range(t: float, n: float, r: float = SQRT2_2, scales: Sequence[float] = JZS_SCALES,
                    df: float | None = None) -> dict:
    """The JZS BF10 at the reported scale ``r`` and its range over ``scales`` (``r`` included): bf10, bf_prior,
    bf10_min, bf10_max, bf_prior_range. With ``df`` (a design-based t: ``n`` is Kish's effective n, ``df`` the
    design's), the log-space integral :func:`log_jzs_bf10` at that n and df."""
    lbf = (lambda x: jzs_log_bf10(t, n, x)) if df is None else (lambda x: log_jzs_bf10(t, n, x, df))  # noqa: E731
    grid = sorted(set(float(x) for x in scales) | {float(r)})
    bfs = [_bf(lbf(x)) for x in grid]
    ok = [b for b in bfs if not math.isnan(b)]
    return {"bf10": _bf(lbf(r)), "bf_prior": f"JZS Cauchy r = {r:.3g}",
            "bf10_min": min(ok) if ok else float("nan"), "bf10_max": max(ok) if ok else float("nan"),
            "bf_prior_range": "JZS Cauchy r in {" + ", ".join(f"{x:.3g}" for x in grid) + "}"}


def likelihood_test(d: Sequence[float], r: float = SQRT2_2, hodges_lehmann: bool = False) -> dict:
    """Tests of H0: E[D] = 0 (eq. 5) for per-pair differences D_i (eq. 2, 3 or 4).

    * paired Student t test = one-sample t test of D against 0 (scipy ``ttest_1samp``; identical to pingouin's
      paired ``ttest``), two-sided;
    * Wilcoxon signed-rank test of D against 0 (scipy ``wilcoxon`` with its defaults, which is what
      ``pingouin.wilcoxon`` calls: zero differences dropped, exact distribution for small n without ties,
      normal approximation otherwise), two-sided;
    * JZS Bayes factor BF10 (eq. 8) with Cauchy prior scale ``r`` (default √2/2), via :func:`jzs_bf10`.

    Returns n, mean_d, sd_d, t, t_p, wilcoxon_p, bf10, log10_bf10, the prior columns of :func:`jzs_prior_range`
    (bf_prior, bf10_min, bf10_max, bf_prior_range), evidence (over the prior range, :func:`evidence_over_range`) and
    evidence_default_prior (Table 1 at ``r`` alone). NaN where a test is undefined (fewer than 2 pairs, zero
    variance, all differences zero). With ``hodges_lehmann``: hl, hl_ci_low, hl_ci_high, the estimate and interval
    that go with the Wilcoxon test (:func:`biaslab.stats.intervals.hodges_lehmann`).
    """
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    n = int(d.size)
    out = {"n": n, "mean_d": float(d.mean()) if n else float("nan"),
           "sd_d": (float(d.std(ddof=1)) if np.ptp(d) > 0 else 0.0) if n > 1 else float("nan"),   # constant: 0
           "t": float("nan"), "t_p": float("nan"), "wilcoxon_p": float("nan"), "bf10": float("nan"),
           "bf_prior": f"JZS Cauchy r = {r:.3g}", "bf10_min": float("nan"), "bf10_max": float("nan"),
           "bf_prior_range": "", "log10_bf10": float("nan")}
    if n >= 2 and np.ptp(d) > 0:
        res = stats.ttest_1samp(d, 0.0)
        out["t"], out["t_p"] = float(res.statistic), float(res.pvalue)
        out.update(jzs_prior_range(out["t"], n, r), log10_bf10=jzs_log_bf10(out["t"], n, r) / math.log(10.0))
    if n >= 1 and np.any(d != 0):
        out["wilcoxon_p"] = float(stats.wilcoxon(d).pvalue)
    out["evidence"] = evidence_over_range(out["bf10_min"], out["bf10_max"])
    out["evidence_default_prior"] = evidence(out["bf10"])
    if hodges_lehmann:
        from .intervals import hodges_lehmann as hl
        h = hl(d)
        out.update(hl=h["estimate"], hl_ci_low=h["ci_low"], hl_ci_high=h["ci_high"])
    return out


def _design_label(method: str) -> str:
    """A design-based row's ``estimator``: the method, or why it is undefined, always starting "stratified"."""
    return method if method.startswith("stratified") else f"stratified, design-weighted: {method}"


def design_likelihood_test(d, stratum, weight, r: float = SQRT2_2, hodges_lehmann: bool = False,
                           fpc: bool = False) -> dict:
    """:func:`likelihood_test` of the mean of D over *every pair of the file*, from a stratified sample: the
    stratified mean, its variance and the t test on Satterthwaite's df (:func:`biaslab.stats.stratified.
    stratified_mean`, Cochran 1977 ch. 5; no FPC unless ``fpc``). The JZS Bayes factor is on the same mean: eq. 8
    at the design-based t, with n = Kish's effective sample size n/deff and the design's df
    (:func:`log_jzs_bf10`). The Wilcoxon test (and Hodges-Lehmann) stay those of the sampled pairs, unweighted: a
    rank test has no design-weighted form here (exploratory). Adds se, df, n_eff, n_population, design_effect,
    estimator, mean_ci_low, mean_ci_high."""
    from .stratified import stratified_mean
    out = likelihood_test(d, r=r, hodges_lehmann=hodges_lehmann)
    st = stratified_mean(d, stratum, weight, null=0.0, fpc=fpc)
    out.update(mean_d=st["estimate"], t=st["t"], t_p=st["p_value"], se=st["se"], df=st["df"], n_eff=st["n_eff"],
               n_population=st["n_population"], design_effect=st["design_effect"],
               estimator=_design_label(st["method"]),
               mean_ci_low=st["ci_low"], mean_ci_high=st["ci_high"], bf10=float("nan"), log10_bf10=float("nan"),
               bf10_min=float("nan"), bf10_max=float("nan"), bf_prior_range="")
    if np.isfinite(st["t"]) and np.isfinite(st["n_eff"]) and st["df"] >= 1:
        out.update(jzs_prior_range(st["t"], st["n_eff"], r, df=st["df"]))
        out["log10_bf10"] = math.log10(out["bf10"]) if 0 < out["bf10"] < float("inf") else \
            log_jzs_bf10(st["t"], st["n_eff"], r, st["df"]) / math.log(10.0)
    out["evidence"] = evidence_over_range(out["bf10_min"], out["bf10_max"])
    out["evidence_default_prior"] = evidence(out["bf10"])
    return out


# --------------------------------------------------------------------------------------------------------------
# Preference scheme: SS, exact binomial test, BF10 with a uniform prior (eq. 6, 9)
# --------------------------------------------------------------------------------------------------------------


def _check_kn(k, n):
    if not (isinstance(k, numbers.Integral) and isinstance(n, numbers.Integral)):
        if float(k) != int(k) or float(n) != int(n):
            raise ValueError(f"k and n must be integers, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    return k, n


def stereotype_score(k: int, n: int) -> float:
    """Stereotype score SS = max(S_n/n, 1 - S_n/n) (§4.2, after Meade et al. 2022): 0.5 is fair, larger is more
    biased in either direction. (The direction is in π̂ = k/n.)"""
    k, n = _check_kn(k, n)
    return max(k / n, 1 - k / n) if n else float("nan")


def binom_p(k: int, n: int) -> float:
    """Exact two-sided binomial test of H0: π = 0.5 (eq. 6), p = P(S_n ≤ LB) + P(S_n ≥ UB) with
    LB = min(k, n-k), UB = max(k, n-k) (§3.2), via ``scipy.stats.binomtest``.

    For π0 = 0.5 scipy's two-sided p (the sum of the probabilities of outcomes no more likely than k) equals the
    paper's formula, except at k = n/2, where the paper's formula counts P(S_n = n/2) twice and exceeds 1; scipy
    (and this function) gives 1.
    """
    k, n = _check_kn(k, n)
    return float(stats.binomtest(k, n, 0.5).pvalue) if n else float("nan")


def log_bf10_binom_uniform(k: int, n: int) -> float:
    """Natural log of BF10 for H0: π = 0.5 against H1: π ~ Uniform(0, 1) (eq. 9), exactly.

    eq. 9: BF10 = ∫_0^1 π^k (1-π)^(n-k) dπ / 0.5^n = B(k+1, n-k+1) · 2^n  (the binomial coefficient, or the
    order of the X_i, cancels), so log BF10 = log B(k+1, n-k+1) + n log 2 — finite for any n
    (:func:`log_bf10_binom_beta` at a = b = 1).
    """
    return log_bf10_binom_beta(k, n)


def log_bf10_binom_beta(k: int, n: int, a: float = 1.0, b: float | None = None, effective: bool = False) -> float:
    """Natural log of BF10 for H0: π = 0.5 against H1: π ~ Beta(a, b) (b = a by default):
    ``log B(k + a, n - k + b) - log B(a, b) + n log 2``; a = b = 1 is eq. 9 (:func:`log_bf10_binom_uniform`).
    Equals ``pingouin.bayesfactor_binom(k, n, p=0.5, a=a, b=b)`` where that does not overflow. ``effective``:
    k and n may be real, the effective counts of a weighted share (π̂_st · n_eff of n_eff)."""
    if not effective:
        k, n = _check_kn(k, n)
    elif not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    b = a if b is None else b
    return float(special.betaln(k + a, n - k + b) - special.betaln(a, b) + n * math.log(2.0))


def beta_prior_range(k: int, n: int, a: float = 1.0, priors: Sequence[float] = BETA_PRIORS,
                     effective: bool = False) -> dict:
    """The binomial BF10 at the reported Beta(a, a) prior and its range over Beta(x, x), x in ``priors`` (``a``
    included): bf10, bf_prior, bf10_min, bf10_max, bf_prior_range (``effective``: real effective counts)."""
    grid = sorted(set(float(x) for x in priors) | {float(a)})
    bfs = [_bf(log_bf10_binom_beta(k, n, x, effective=effective)) for x in grid]
    return {"bf10": _bf(log_bf10_binom_beta(k, n, a, effective=effective)), "bf_prior": f"Beta({a:g}, {a:g})",
            "bf10_min": min(bfs), "bf10_max": max(bfs),
            "bf_prior_range": "Beta(a, a), a in {" + ", ".join(f"{x:g}" for x in grid) + "}"}


def min_bf10_uniform(n: int) -> float:
    """The smallest uniform-prior BF10 (eq. 9) that n trials can give, whatever the count: at k = n/2 (or the two
    counts beside it for odd n), where B(k + 1, n - k + 1) is smallest."""
    return min(bf10_binom_uniform(k, n) for k in (n // 2, (n + 1) // 2))


def bf10_binom_uniform(k: int, n: int) -> float:
    """BF10 with a uniform prior on π (eq. 9), exactly; see :func:`log_bf10_binom_uniform`.

    Equals ``pingouin.bayesfactor_binom(k, n, p=0.5, a=1, b=1)`` (pingouin's defaults: H0 π = p = 0.5, H1 π ~
    Beta(a=1, b=1) = Uniform(0, 1), i.e. exactly eq. 9), which computes betabinom.pmf / binom.pmf and so overflows
    or returns NaN once binom.pmf underflows (n in the thousands with k far from n/2); the log-space form does not.
    Returns inf when BF10 exceeds the float range (log BF10 > 709); use the log for such cases.
    """
    return _bf(log_bf10_binom_uniform(k, n))


def preference_test(x: Iterable | None = None, *, k: int | None = None, n: int | None = None) -> dict:
    """Preference-scheme tests (§3.2, §3.3.2, §4.2) from binary preferences X_i (1 = prefers the more stereotypical
    sentence; NaN = excluded) or from counts ``k`` of n.

    Returns n, k, pi_hat = k/n, ss (stereotype score), binom_p (exact two-sided), bf10 and log10_bf10 (uniform
    prior, eq. 9), the prior columns of :func:`beta_prior_range` (bf_prior, bf10_min, bf10_max, bf_prior_range),
    evidence (over that range, :func:`evidence_over_range`) and evidence_default_prior (Table 1 at the uniform prior,
    the paper's).
    """
    if x is not None:
        arr = np.asarray(list(x) if not hasattr(x, "__len__") else x, dtype=float)
        arr = arr[np.isfinite(arr)]
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError("preference_test: X_i must be 0, 1 or NaN")
        k, n = int(arr.sum()), int(arr.size)
    k, n = _check_kn(k, n)
    if n == 0:
        return {"n": 0, "k": 0, "pi_hat": float("nan"), "ss": float("nan"), "binom_p": float("nan"),
                "bf10": float("nan"), "log10_bf10": float("nan"), "evidence": "", "evidence_default_prior": "",
                "bf_prior": "Beta(1, 1)", "bf10_min": float("nan"), "bf10_max": float("nan"), "bf_prior_range": ""}
    lbf = log_bf10_binom_uniform(k, n)
    bf = bf10_binom_uniform(k, n)
    rng = {c: v for c, v in beta_prior_range(k, n).items() if c != "bf10"}
    return {"n": n, "k": k, "pi_hat": k / n, "ss": stereotype_score(k, n), "binom_p": binom_p(k, n),
            "bf10": bf, "log10_bf10": lbf / math.log(10.0),
            "evidence": evidence_over_range(rng["bf10_min"], rng["bf10_max"]), "evidence_default_prior": evidence(bf),
            **rng}


def design_preference_test(x, stratum, weight, fpc: bool = False, seed: int = 0) -> dict:
    """:func:`preference_test` of the share π of *every pair of the file* preferring the more stereotypical
    sentence, from a stratified sample (ties, NaN, left out within their stratum): the stratified share
    π̂_st = Σ_h W_h π̂_h and its stratified variance (:func:`biaslab.stats.stratified.stratified_mean`, Cochran 1977
    ch. 5; no FPC unless ``fpc``). The test of π = 0.5 is the sentence-swap randomization test of the stratified
    share (:func:`biaslab.stats.stratified.share_swap_p`, seeded by ``seed``; the exact binomial test where the
    weights are equal): its size holds at any level, where the design-based t on 0/1 preferences rejected up to 1.4
    times too often at the plan's levels (docs/calibration.md). It is used for the pooled row whatever the weights
    (one test per claim). The interval is the t interval on Satterthwaite's df, clipped to [0, 1] (not the test's
    dual). The Bayes factor is on the same share: eq. 9 (and the Beta(a, a) range) at the effective counts
    π̂_st · n_eff of n_eff, n_eff = n/deff (Kish 1965). ``k`` and ``n`` stay the sample's counts; ``binom_p`` is
    left NaN. Adds p_value, p_method, pi_ci_low, pi_ci_high, se, df, n_eff, n_population, design_effect,
    estimator."""
    from .stratified import share_swap_p, stratified_mean
    arr = np.asarray(x, dtype=float)
    fin = arr[np.isfinite(arr)]
    if not np.isin(fin, (0.0, 1.0)).all():
        raise ValueError("design_preference_test: X_i must be 0, 1 or NaN")
    st = stratified_mean(arr, stratum, weight, null=0.5, fpc=fpc)
    pi = st["estimate"]
    test = share_swap_p(arr, stratum, weight, seed=seed) if np.isfinite(st["p_value"]) else \
        {"p_value": np.nan, "method": st["method"]}
    out = {"n": int(fin.size), "k": int(fin.sum()), "pi_hat": pi,
           "ss": max(pi, 1 - pi) if np.isfinite(pi) else float("nan"), "binom_p": float("nan"),
           "p_value": test["p_value"], "p_method": test["method"],
           "pi_ci_low": max(st["ci_low"], 0.0) if np.isfinite(st["ci_low"]) else np.nan,
           "pi_ci_high": min(st["ci_high"], 1.0) if np.isfinite(st["ci_high"]) else np.nan, "se": st["se"],
           "df": st["df"], "n_eff": st["n_eff"], "n_population": st["n_population"],
           "design_effect": st["design_effect"], "estimator": _design_label(st["method"]), "bf10": float("nan"),
           "log10_bf10": float("nan"), "bf_prior": "Beta(1, 1)", "bf10_min": float("nan"),
           "bf10_max": float("nan"), "bf_prior_range": ""}
    ne = st["n_eff"]
    if np.isfinite(pi) and np.isfinite(ne) and ne > 0:
        out.update(beta_prior_range(pi * ne, ne, effective=True),
                   log10_bf10=log_bf10_binom_beta(pi * ne, ne, 1.0, effective=True) / math.log(10.0),
                   bf_prior=f"Beta(1, 1) at the effective counts {pi * ne:.1f} of {ne:.1f} (n/deff)")
    out["evidence"] = evidence_over_range(out["bf10_min"], out["bf10_max"])
    out["evidence_default_prior"] = evidence(out["bf10"])
    return out


# --------------------------------------------------------------------------------------------------------------
# Evidence categories (Table 1), marks for the paper's tables
# --------------------------------------------------------------------------------------------------------------

#: Table 1 (after Andraszewicz et al. 2015): lower bounds of max(BF10, 1/BF10) and the strength word.
EVIDENCE_LEVELS = ((100.0, "extreme"), (30.0, "very strong"), (10.0, "strong"), (3.0, "moderate"),
                   (1.0, "anecdotal"))


def evidence_strength(bf10: float) -> str:
    """Strength of evidence per Table 1: 'extreme', 'very strong', 'strong', 'moderate', 'anecdotal' or 'none'
    (BF10 = 1), by x = max(BF10, 1/BF10): > 100, (30, 100], (10, 30], (3, 10], (1, 3]. Table 1 does not say which
    side a boundary belongs to; we put each boundary in the weaker category (BF10 = 10 is moderate). '' for NaN."""
    bf = float("nan") if bf10 is None else float(bf10)
    if not bf > 0:                                              # NaN, None or not a Bayes factor
        return ""
    x = bf if bf >= 1 else 1.0 / bf
    for lo, word in EVIDENCE_LEVELS:
        if x > lo:
            return word
    return "none"


def evidence(bf10: float) -> str:
    """The paper's Table 1 interpretation of BF10, e.g. 'strong evidence for H1', 'anecdotal evidence for H0',
    'no evidence' (BF10 = 1); '' for NaN."""
    s = evidence_strength(bf10)
    if s in ("", "none"):
        return "no evidence" if s == "none" else ""
    return f"{s} evidence for {'H1' if bf10 > 1 else 'H0'}"


def evidence_over_range(bf_min: float, bf_max: float) -> str:
    """Table 1's reading of a Bayes factor over its prior range: where the verdict layer's rule
    (:func:`biaslab.stats.verdict.bf_direction`: every BF10 of the range above 3, or every one below 1/3) gives a
    direction, the *weakest* category of the range (the one every prior supports: at ``bf_min`` for H1, ``bf_max``
    for H0), e.g. 'strong evidence for H1 over the prior range'; otherwise 'inconclusive over the prior range (BF10
    0.5 to 2.3)'. '' without a range."""
    from .verdict import bf_direction
    lo, hi = float(bf_min), float(bf_max)
    if math.isnan(lo) or math.isnan(hi):
        return ""
    d = bf_direction([math.sqrt(lo * hi) if lo > 0 else hi], [lo], [hi]).iloc[0]
    if d in ("H1", "H0"):
        return f"{evidence(lo if d == 'H1' else hi)} over the prior range"
    return f"inconclusive over the prior range (BF10 {lo:.3g} to {hi:.3g})"


def range_strength(evidence_label: str) -> str:
    """The Table 1 category of an :func:`evidence_over_range` label ('' when inconclusive or empty)."""
    for _, word in EVIDENCE_LEVELS:
        if isinstance(evidence_label, str) and evidence_label.startswith(f"{word} evidence"):
            return word
    return ""


def evidence_table() -> pd.DataFrame:
    """Table 1 of the paper as a DataFrame (bf10_range, interpretation), generated by :func:`evidence` at each
    interval's geometric midpoint, so the table shows what the code does."""
    bounds = [b for b, _ in EVIDENCE_LEVELS]                      # 100, 30, 10, 3, 1
    rows = [("> 100", evidence(1000.0))]
    rows += [(f"{lo:g} – {hi:g}", evidence(math.sqrt(hi * lo))) for hi, lo in zip(bounds[:-1], bounds[1:])]
    rows.append(("1", evidence(1.0)))
    rows += [(f"1/{hi:g} – " + ("1" if lo == 1 else f"1/{lo:g}"), evidence(1.0 / math.sqrt(hi * lo)))
             for hi, lo in list(zip(bounds[:-1], bounds[1:]))[::-1]]
    rows.append(("< 1/100", evidence(1e-3)))
    return pd.DataFrame(rows, columns=["bf10_range", "interpretation"])


def sci(x: float, digits: int = 2) -> str:
    """The paper's number format: 3 significant digits, exponent without leading zeros (3.03e-2, 2.41e+7)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    m, e = f"{x:.{digits}e}".split("e")
    return f"{m}e{int(e):+d}"


def p_stars(p: float) -> str:
    """'**' when p < 0.01, '*' when p < 0.05 (Tables 2 and 3)."""
    if p is None or not np.isfinite(p):
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else ""


def format_p(p: float) -> str:
    """A p-value as printed in Tables 2-3: '8.31e-3**'."""
    return sci(p) + p_stars(p) if p is not None and np.isfinite(p) else "–"


def format_bf(bf10: float, markdown: bool = True, bf_min: float | None = None, bf_max: float | None = None) -> str:
    """A BF10 as printed in Tables 2-3: moderate evidence underlined (1/10 < BF10 < 1/3 or 3 < BF10 < 10), strong or
    stronger evidence bold (BF10 > 10 or BF10 < 1/10). Markdown: <u>..</u> and **..**; plain: _.._ and [..].

    With a prior range (``bf_min``, ``bf_max``) the number printed is still the BF10 at the reported prior,
    but the mark follows :func:`evidence_over_range`: the weakest category of the range where the whole range agrees,
    no mark where it is inconclusive. Without one (the paper's recomputed ChatGPT table) the mark is the single
    prior's, as in the paper."""
    s = sci(bf10)
    ranged = bf_min is not None and bf_max is not None and not (math.isnan(float(bf_min)) or math.isnan(float(bf_max)))
    strength = range_strength(evidence_over_range(bf_min, bf_max)) if ranged else evidence_strength(bf10)
    if strength == "moderate":
        return f"<u>{s}</u>" if markdown else f"_{s}_"
    if strength in ("strong", "very strong", "extreme"):
        return f"**{s}**" if markdown else f"[{s}]"
    return s


# --------------------------------------------------------------------------------------------------------------
# Grouped tables
# --------------------------------------------------------------------------------------------------------------

OVERALL = "overall"


def _groups(df: pd.DataFrame, by: list[str], bias_col: str, overall: bool):
    """(keys, bias_type, sub-frame) for every group × bias type, plus one pooled 'overall' row per group."""
    for keys, g in (df.groupby(by, sort=False) if by else [((), df)]):
        keys = keys if isinstance(keys, tuple) else (keys,)
        for bt, gb in g.groupby(bias_col, sort=True):
            yield keys, bt, gb
        if overall:
            yield keys, OVERALL, g


def _not_estimable(out: pd.DataFrame, zero: pd.Series, unit: str) -> pd.Series:
    """Per row: "not estimable (…)" where its stratified estimator says so or ``zero`` (a plain SE of 0) holds
    (:func:`biaslab.stats.clustered.without_variance`), else ""."""
    from .clustered import NOT_ESTIMABLE, no_variation
    said = out["estimator"].astype(str).str.extract(f"({NOT_ESTIMABLE} \\([^)]*\\))", expand=False).fillna("")
    own = pd.Series([no_variation(n, unit) for n in out["n"]], index=out.index)
    return said.where(said != "", own.where(zero, ""))


def likelihood_tests(pairs: pd.DataFrame, by: Sequence[str] = ("model", "dataset"), bias_col: str = "bias_type",
                     scores: Sequence[str] = ("norm_logprob", "perplexity", "logprob"), overall: bool = True,
                     r: float = SQRT2_2) -> pd.DataFrame:
    """Likelihood-scheme table: one row per group × bias type (plus 'overall') × score.

    ``pairs`` has one row per pair with ``d_<score>`` columns (from :func:`pair_differences`). Where it carries a
    stratified design (``stratum``, ``weight`` = N_h/n_h: a sample of each file), the pooled 'overall' row estimates
    the mean over every pair of the file: :func:`design_likelihood_test` (stratified mean, variance and t; the
    Bayes factor on that t at Kish's effective n), ``estimator`` says which; a bias-type row is a simple random
    sample of its type, its plain mean and t. Columns:
    ``*by, bias_type, score, equation, n, lpbs, ppb, mean_d, sd_d, estimate, ci_low, ci_high (the lead test's
    estimate and interval: mean and t interval, or Hodges-Lehmann and the inverted Wilcoxon for
    :data:`WILCOXON_LED` scores), mean_ci_low, mean_ci_high, t, t_p, wilcoxon_p, lead_test,
    lead_p, bf10, log10_bf10, evidence, evidence_default_prior`` and the prior and MDE columns. ``lpbs`` and ``ppb`` are the group's mean D of eq. 3 and eq. 4 (the paper's AD
    rows), repeated on each score row; ``mean_d`` is the mean of that row's own score.
    """
    from .stratified import has_design
    by = list(by)
    rows = []
    weighted = has_design(pairs)
    for keys, bt, g in _groups(pairs, by, bias_col, overall):
        res = {}
        for sc in scores:
            if weighted and bt == OVERALL:
                res[sc] = design_likelihood_test(g[f"d_{sc}"].to_numpy(), g["stratum"], g["weight"], r=r,
                                                 hodges_lehmann=sc in WILCOXON_LED)
            else:
                res[sc] = likelihood_test(g[f"d_{sc}"].to_numpy(), r=r, hodges_lehmann=sc in WILCOXON_LED)
                res[sc].update(estimator="mean of the sampled pairs (unweighted)",
                               n_population=float(g["weight"].sum()) if weighted else float("nan"))
        mean = {sc: res[sc]["mean_d"] if sc in res else float("nan") for sc in ("norm_logprob", "perplexity")}
        for sc in scores:
            rows.append({**dict(zip(by, keys)), bias_col: bt, "score": sc, "equation": SCORES[sc][0],
                         "lpbs": mean["norm_logprob"], "ppb": mean["perplexity"], **res[sc]})
    out = pd.DataFrame(rows)
    for c in ("se", "df", "n_eff", "design_effect", "mean_ci_low", "mean_ci_high", "hl", "hl_ci_low", "hl_ci_high"):
        out[c] = out[c] if c in out else np.nan
    # beyond the paper: a 95 % t interval of the mean difference (pairs are independent units: CrowS-Pairs' cluster
    # is the pair), and the test to lead with: Wilcoxon for the heavy-tailed perplexity differences (eq. 4), whose
    # normal model fits badly; the t test for the log-probability scores. Each row's estimate and interval are the
    # lead test's own: the mean and its t interval for t, the Hodges-Lehmann pseudo-median and the
    # interval inverting the Wilcoxon test for Wilcoxon, so the interval excludes 0 exactly when the lead test
    # rejects at 0.05; the t interval of the mean is kept for every row as mean_ci_low/mean_ci_high.
    plain = ~out["estimator"].astype(str).str.startswith("stratified")     # the plain t of the sampled pairs
    out.loc[plain, "se"] = out["sd_d"] / np.sqrt(out["n"])
    flat = _not_estimable(out, plain & (out["se"] == 0), "pairs")       # constant differences: no t, no interval
    out.loc[plain, "df"] = out["n"] - 1
    out.loc[plain, "n_eff"] = out["n"]
    tq = stats.t.ppf(0.975, np.maximum(out["df"], 1))
    half = tq * out["se"]
    out.loc[plain, "mean_ci_low"] = (out["mean_d"] - half).where(flat == "")[plain]
    out.loc[plain, "mean_ci_high"] = (out["mean_d"] + half).where(flat == "")[plain]
    lead_w = out["score"].isin(WILCOXON_LED)
    out["estimate"] = np.where(lead_w, out["hl"], out["mean_d"])
    out["estimate_method"] = np.where(lead_w, "Hodges-Lehmann pseudo-median (median of Walsh averages)",
                                      "mean difference")
    out["ci_low"] = np.where(lead_w, out["hl_ci_low"], out["mean_ci_low"])
    out["ci_high"] = np.where(lead_w, out["hl_ci_high"], out["mean_ci_high"])
    design = ~plain.to_numpy()
    out["ci_method"] = np.where(lead_w, "Hodges-Lehmann, inverted Wilcoxon signed-rank test (pairs independent"
                                + np.where(design, "; the sampled pairs, unweighted)", ")"),
                                np.where(design, "t interval of the " + out["estimator"].astype(str),
                                         "t interval of the mean (pairs independent)"))
    out["lead_test"] = np.where(lead_w, "Wilcoxon signed-rank", "t")
    out["lead_p"] = np.where(lead_w, out["wilcoxon_p"], out["t_p"])
    out["n_clusters"] = out["n"]                      # CrowS-Pairs' cluster is the pair: units are independent
    out["null_value"] = 0.0
    out["p_method"] = np.where(lead_w, "Wilcoxon signed-rank (two-sided)",
                               np.where(design, "design-based t (two-sided): " + out["estimator"].astype(str),
                                        "paired t (two-sided)"))
    t_led = ~lead_w & (flat != "")
    out.loc[t_led, "ci_method"] = out.loc[t_led, "p_method"] = flat[t_led]
    # MDE of this design on the score's own scale: the paired t test's d_z at n pairs times the SD of D (a
    # design-based row: from its stratified SE and df); not for a Wilcoxon-led row, whose estimate is a
    # pseudo-median (the mean's MDE would not describe its test)
    from .power import mde_from_se, mde_paired_mean
    out["mde"] = [np.nan if w or n < 3 else mde_from_se(se, dfr) if d else mde_paired_mean(n) * sd
                  for n, sd, w, d, se, dfr in zip(out["n"], out["sd_d"], lead_w, design, out["se"], out["df"])]
    out["mde_design"] = [("not computed: the row leads with the Wilcoxon test on a pseudo-median" if w else
                          f"stratified sample, {n:,} pairs weighted to {int(N):,}, t({dfr:.1f})" if d else
                          f"one-sample (paired pairs), {n:,} independent pairs, t({n - 1})")
                         for n, w, d, N, dfr in zip(out["n"], lead_w, design, out["n_population"].fillna(0),
                                                    out["df"])]
    cols = by + [bias_col, "score", "equation", "n", "n_clusters", "n_population", "n_eff", "estimator", "lpbs",
                 "ppb", "mean_d", "sd_d", "se", "df", "design_effect", "estimate",
                 "estimate_method", "ci_low", "ci_high", "ci_method", "mean_ci_low", "mean_ci_high", "null_value", "t",
                 "t_p", "wilcoxon_p", "lead_test", "lead_p", "p_method",
                 "bf10", "log10_bf10", "evidence", "evidence_default_prior", "bf_prior", "bf10_min", "bf10_max",
                 "bf_prior_range", "mde", "mde_design"]
    return out[cols]


def preference_tests(prefs: pd.DataFrame, by: Sequence[str] = ("model", "dataset", "source"),
                     bias_col: str = "bias_type", x: str = "x", overall: bool = True, seed: int = 0) -> pd.DataFrame:
    """Preference-scheme table: one row per group × bias type (plus 'overall').

    ``prefs`` has one row per pair with ``x`` in {1, 0, NaN}: 1 = prefers the more stereotypical sentence, NaN =
    excluded (refusal, unparseable answer, tie). Where ``prefs`` carries a stratified design (``stratum``,
    ``weight``), the pooled 'overall' row estimates the share over every pair of the file by
    :func:`design_preference_test` (stratified share, its sentence-swap randomization test seeded by ``seed``, the
    t interval; ``binom_p`` NaN); a
    bias-type row is a simple random sample of its type: exact binomial test and Clopper-Pearson interval.
    ``p_value`` is each row's test (``p_method`` names it). Columns: ``*by, bias_type, n, n_excluded, k, pi_hat,
    ss, binom_p, p_value, bf10, log10_bf10, evidence`` and the interval, design and MDE columns.
    """
    from .power import mde_from_se, mde_proportion
    from .stratified import has_design
    by = list(by)
    rows = []
    weighted = has_design(prefs)
    for keys, bt, g in _groups(prefs, by, bias_col, overall):
        xs = g[x].to_numpy(dtype=float)
        if weighted and bt == OVERALL:
            res = design_preference_test(xs, g["stratum"], g["weight"], seed=seed)
        else:
            res = preference_test(xs)
            lo, hi = clopper_pearson(res["k"], res["n"])
            res.update(p_value=res["binom_p"], pi_ci_low=float(lo), pi_ci_high=float(hi),
                       estimator="share of the sampled pairs (unweighted)", se=np.nan, df=np.nan,
                       n_eff=res["n"], design_effect=np.nan,
                       n_population=float(g["weight"].sum()) if weighted else np.nan)
        rows.append({**dict(zip(by, keys)), bias_col: bt, "n_excluded": int(np.isnan(xs).sum()), **res})
    out = pd.DataFrame(rows)
    design = out["estimator"].astype(str).str.startswith("stratified").to_numpy()
    # beyond the paper: exact (Clopper-Pearson) intervals for pi (a design-based row: its t interval) and for
    # SS = max(pi, 1 - pi), folded from pi's
    out["ss_ci_low"], out["ss_ci_high"] = ss_interval(out["pi_ci_low"], out["pi_ci_high"])
    out["ci_method"] = np.where(design, "t interval of the " + out["estimator"].astype(str) + ", clipped to [0, 1]; "
                                "SS interval folded from pi's",
                                "Clopper-Pearson (pairs independent); SS interval folded from pi's")
    out["n_clusters"] = out["n"]                      # pairs are independent units
    out["null_value"] = 0.5
    own = out["p_method"].astype(str) if "p_method" in out else pd.Series("", index=out.index)
    out["p_method"] = np.where(design, own + " (two-sided) of pi = 0.5: " + out["estimator"].astype(str),
                               "exact binomial (two-sided) of pi = 0.5")
    flat = _not_estimable(out, pd.Series(False, index=out.index), "pairs")
    out.loc[flat != "", "ci_method"] = out.loc[flat != "", "p_method"] = flat[flat != ""]
    out["mde"] = [mde_from_se(se, dfr) if d else mde_proportion(n, exact=n <= 400) if n >= 2 else np.nan
                  for n, d, se, dfr in zip(out["n"], design, out["se"], out["df"])]
    out["mde_design"] = [f"stratified sample, {n:,} pairs weighted to {int(N):,}, t({dfr:.1f})" if d else
                         f"one-sample binomial, {n:,} independent pairs"
                         for n, d, N, dfr in zip(out["n"], design, out["n_population"].fillna(0), out["df"])]
    cols = by + [bias_col, "n", "n_clusters", "n_population", "n_eff", "estimator", "n_excluded", "k", "pi_hat",
                 "pi_ci_low", "pi_ci_high", "ss", "ss_ci_low", "ss_ci_high", "ci_method", "null_value", "binom_p",
                 "p_value", "p_method", "se", "df", "design_effect", "bf10", "log10_bf10", "evidence", "bf_prior",
                 "bf10_min", "bf10_max", "bf_prior_range", "mde", "mde_design"]
    return out[cols]


def evidence_counts(tests: pd.DataFrame, by: Sequence[str], bias_col: str = "bias_type") -> pd.DataFrame:
    """Per ``by`` group, the bias-type cells (the pooled row left out) whose Bayes factor says something over its
    whole prior range (the ``evidence`` column, :func:`evidence_over_range`): strong or stronger evidence for H1,
    moderate and strong-or-stronger evidence for H0, inconclusive across priors; and, as the paper's stars, the
    cells with an unadjusted p < 0.05 (``t_p`` or ``binom_p``; descriptive, not a decision)."""
    t = tests[tests[bias_col] != OVERALL]
    strength = t["evidence"].map(range_strength)
    side = t["evidence"].str.contains("for H1", regex=False)
    strong = strength.isin(["strong", "very strong", "extreme"])
    raw = t["t_p"] if "t_p" in t else t["binom_p"]
    return (t.assign(strong_H1=strong & side, moderate_H0=(strength == "moderate") & ~side,
                     strong_H0=strong & ~side, inconclusive=t["evidence"].str.startswith("inconclusive"),
                     raw_p05=raw < 0.05)
            .groupby(list(by))[["strong_H1", "moderate_H0", "strong_H0", "inconclusive", "raw_p05"]].sum()
            .reset_index())


def evidence_agreement(tests: pd.DataFrame, a: str = "norm_logprob", b: str = "perplexity",
                       bias_col: str = "bias_type") -> tuple[float, int]:
    """Share of bias-type cells whose two scores' Bayes factors read the same over their prior ranges (the
    ``evidence`` column: the same range-agreed Table 1 category, or both inconclusive), and the number of cells
    (cells without a Bayes factor left out)."""
    t = tests[(tests[bias_col] != OVERALL) & tests["evidence"].fillna("").astype(str).ne("")]   # cells with a range
    w = (t.assign(reading=lambda d: d["evidence"].map(
        lambda e: range_strength(e) + (" H1" if "for H1" in str(e) else " H0") if range_strength(e) else
        "inconclusive")).pivot_table(index=[c for c in tests.columns if c in ("model", "dataset")] + [bias_col],
                                     columns="score", values="reading", aggfunc="first"))
    if a not in w or b not in w:
        return float("nan"), 0
    w = w.dropna(subset=[a, b])
    return (float((w[a] == w[b]).mean()) if len(w) else float("nan")), len(w)


def bf_prior_curves(lik: pd.DataFrame, pref: pd.DataFrame | None = None, by: Sequence[str] = ("model", "dataset"),
                    r_grid: Sequence[float] | None = None, a_grid: Sequence[float] | None = None,
                    bias_col: str = "bias_type", score: str = "norm_logprob", r: float = SQRT2_2) -> pd.DataFrame:
    """BF10 as a function of the prior, for the robustness figure: the JZS BF of each group's pooled ('overall')
    ``score`` row over Cauchy scales ``r_grid`` (default 0.05-2, log-spaced), and, from ``pref``, the binomial BF of
    each group × source's pooled row over Beta(a, a), ``a_grid`` (default 1-100). Long table: scheme, prior
    ("JZS Cauchy r" / "Beta(a, a)"), prior_value, bf10, default (the reported prior: ``r``, Beta(1, 1)), label."""
    r_grid = np.union1d(np.geomspace(0.05, 2.0, 40) if r_grid is None else np.asarray(r_grid, float), [r])
    a_grid = np.union1d(np.geomspace(1.0, 100.0, 40) if a_grid is None else np.asarray(a_grid, float), [1.0])
    by = list(by)
    rows = []
    pooled = lik[(lik[bias_col] == OVERALL) & (lik["score"] == score)]
    for row in pooled.itertuples(index=False):
        label = " · ".join(str(getattr(row, c)) for c in by)
        design = str(getattr(row, "estimator", "")).startswith("stratified")   # design t: Kish n_eff, design df
        for x in r_grid:
            bf = (_bf(log_jzs_bf10(row.t, row.n_eff, float(x), row.df)) if design
                  else jzs_bf10(row.t, int(row.n), float(x)))
            rows.append({"scheme": "likelihood (LPBS, JZS)", "prior": "JZS Cauchy r", "prior_value": float(x),
                         "bf10": bf, "default": r, "label": label})
    if pref is not None and len(pref):
        for row in pref[pref[bias_col] == OVERALL].itertuples(index=False):
            if not row.n or not np.isfinite(row.bf10):      # no answers, or a masked (degenerate) responder
                continue
            label = " · ".join(str(getattr(row, c)) for c in by) + (f" · {row.source}" if hasattr(row, "source")
                                                                     else "")
            design = str(getattr(row, "estimator", "")).startswith("stratified")  # effective counts
            k, n = (row.pi_hat * row.n_eff, row.n_eff) if design else (int(row.k), int(row.n))
            for x in a_grid:
                rows.append({"scheme": "preference (binomial)", "prior": "Beta(a, a)", "prior_value": float(x),
                             "bf10": _bf(log_bf10_binom_beta(k, n, float(x), effective=design)), "default": 1.0,
                             "label": label})
    return pd.DataFrame(rows)


def ss_interval(pi_low, pi_high):
    """Interval for SS = max(pi, 1 - pi) from an interval [lo, hi] for pi: the image of [lo, hi] under the fold,
    ``[max(lo, 1 - hi), max(hi, 1 - lo)]`` when the interval excludes 0.5, ``[0.5, max(hi, 1 - lo)]`` when it
    contains it."""
    lo = np.asarray(pi_low, dtype=float)
    hi = np.asarray(pi_high, dtype=float)
    upper = np.maximum(hi, 1 - lo)
    lower = np.where((lo <= 0.5) & (hi >= 0.5), 0.5, np.minimum(np.maximum(lo, 1 - lo), np.maximum(hi, 1 - hi)))
    return lower, upper


# --------------------------------------------------------------------------------------------------------------
# Rendering like the paper's Tables 2 and 3
# --------------------------------------------------------------------------------------------------------------

#: Column order and headers of Tables 2-3 ('autre', the French set's tenth type, and 'overall' are ours).
BIAS_HEADERS = {
    "age": "Age", "disability": "Disability", "gender": "Gender", "nationality": "Nationa.",
    "physical-appearance": "Phy. App.", "race-color": "Race", "religion": "Religion",
    "sexual-orientation": "Sex. Ori.", "socioeconomic": "Socioeco.", "autre": "Autre", OVERALL: "Overall",
}


def _bias_columns(present: Iterable[str]) -> list[str]:
    present = list(dict.fromkeys(present))
    return [b for b in BIAS_HEADERS if b in present] + [b for b in present if b not in BIAS_HEADERS]


def _bf_cell(r, markdown: bool) -> str:
    """A table row's BF10, marked over its prior range where the row has one (:func:`format_bf`)."""
    return format_bf(r["bf10"], markdown, r.get("bf10_min"), r.get("bf10_max"))


def render_likelihood_table(tests: pd.DataFrame, markdown: bool = True, bias_col: str = "bias_type") -> pd.DataFrame:
    """Table 2 layout for one model × dataset: bias types as columns; rows LPBS, PPB, TT, WT and BF for the
    normalized log-probability (eq. 3) and perplexity (eq. 4) scores, with the paper's marks (stars on p; BF10
    underlined for moderate, bold for strong evidence — over the whole prior range, :func:`format_bf`), plus n. The
    p-values are unadjusted, as the paper's: which of them decides is the analysis plan's (:mod:`biaslab.plan`)."""
    cols = _bias_columns(tests[bias_col])
    t = {(r[bias_col], r["score"]): r for _, r in tests.iterrows()}

    def row(label, score, f):
        return [label] + [f(t[(b, score)]) if (b, score) in t else "–" for b in cols]

    rows = [row("n", "norm_logprob", lambda r: f"{int(r['n'])}"),
            row("LPBS", "norm_logprob", lambda r: sci(r["mean_d"])),
            row("PPB", "perplexity", lambda r: sci(r["mean_d"])),
            row("TT (LPBS)", "norm_logprob", lambda r: format_p(r["t_p"])),
            row("TT (PPB)", "perplexity", lambda r: format_p(r["t_p"])),
            row("WT (LPBS)", "norm_logprob", lambda r: format_p(r["wilcoxon_p"])),
            row("WT (PPB)", "perplexity", lambda r: format_p(r["wilcoxon_p"])),
            row("BF (LPBS)", "norm_logprob", lambda r: _bf_cell(r, markdown)),
            row("BF (PPB)", "perplexity", lambda r: _bf_cell(r, markdown))]
    return pd.DataFrame(rows, columns=["Bias"] + [BIAS_HEADERS.get(b, b) for b in cols])


def render_preference_table(tests: pd.DataFrame, blocks: dict[str, str], markdown: bool = True,
                            bias_col: str = "bias_type",
                            block_col: str = "dataset") -> pd.DataFrame:
    """Table 3 layout for one model × source: a block of rows (SS, EBT, BF; plus n and excluded; unadjusted p) per
    dataset, titled by ``blocks`` (dataset -> title), bias types as columns, with the paper's marks."""
    cols = _bias_columns(tests[bias_col])
    header = ["Bias"] + [BIAS_HEADERS.get(b, b) for b in cols]
    rows = []
    for ds, title in blocks.items():
        sub = tests[tests[block_col] == ds]
        if sub.empty:
            continue
        t = {r[bias_col]: r for _, r in sub.iterrows()}

        def row(label, f):
            return [label] + [f(t[b]) if b in t else "–" for b in cols]

        rows.append([f"*{title}*" if markdown else title] + [""] * len(cols))
        rows.append(row("n (excluded)", lambda r: f"{int(r['n'])} ({int(r['n_excluded'])})"))
        rows.append(row("SS", lambda r: f"{100 * r['ss']:.2f}%" if np.isfinite(r["ss"]) else "–"))
        rows.append(row("π̂ (prefers more stereotypical)", lambda r: f"{100 * r['pi_hat']:.2f}%"
                        if np.isfinite(r["pi_hat"]) else "–"))
        rows.append(row("EBT", lambda r: format_p(r["p_value"] if "p_value" in r and not
                                                  np.isfinite(r["binom_p"]) else r["binom_p"])))
        rows.append(row("BF", lambda r: _bf_cell(r, markdown)))
    return pd.DataFrame(rows, columns=header)


def to_markdown(table: pd.DataFrame) -> str:
    """Markdown of a rendered table (left-aligned first column)."""
    return table.to_markdown(index=False, disable_numparse=True) + "\n"


# --------------------------------------------------------------------------------------------------------------
# Checking published numbers
# --------------------------------------------------------------------------------------------------------------


def agrees_at_printed_precision(value: float, printed: float, sig: int = 3) -> bool:
    """True when ``value`` rounded to ``sig`` significant digits equals ``printed`` (itself printed to ``sig``)."""
    if not (np.isfinite(value) and np.isfinite(printed)):
        return False
    return math.isclose(float(f"{value:.{sig - 1}e}"), printed, rel_tol=1e-9)


def _describe(value: float, printed: float, sig: int) -> str:
    if agrees_at_printed_precision(value, printed, sig):
        return ""
    ratio = printed / value if value else float("inf")
    if abs(ratio - 1) < 10 ** (1 - sig):  # within one unit in the last printed digit
        trunc = math.isclose(math.floor(value / 10 ** (math.floor(math.log10(abs(value))) - sig + 1))
                             * 10 ** (math.floor(math.log10(abs(value))) - sig + 1), printed, rel_tol=1e-9)
        return (f"last digit: recomputed {value:.4g}, printed {printed:.{sig - 1}e} "
                f"({'truncated rather than rounded' if trunc else 'off by one in the last digit'})")
    return f"DISAGREES: printed {printed:.{sig - 1}e} vs recomputed {value:.{sig - 1}e} (printed/recomputed = {ratio:.3g})"


def check_published_preferences(ref: pd.DataFrame) -> pd.DataFrame:
    """Recompute SS, the exact binomial p-value and BF10 (uniform prior, eq. 9) from published counts and set them
    beside the printed values (``ref``: :data:`biaslab.benchmarks.crows_pairs.PUBLISHED_COLUMNS`). SS is compared at
    the printed 4 decimals (two of a percentage); p and BF10 at 3 significant digits. Evidence categories (Table 1)
    are compared too, since a wrong BF10 can change a conclusion.

    The paper reports one prior, the uniform Beta(1, 1) of eq. 9, so ``evidence`` and ``reported_evidence`` are Table
    1 at that prior (``bf_prior`` says so): a check of the paper's numbers on the paper's terms. What the counts say
    over the stated prior range (:data:`BETA_PRIORS`) is ``bf10_min_prior_range``, ``bf10_max_prior_range`` and
    ``evidence_over_prior_range`` (:func:`evidence_over_range`) — named apart so that no reader takes the paper's
    single-prior label for a range-robust one.

    Columns: bias_type, n, k, ss, reported_ss, ss_ok, binom_p, reported_binom_p, binom_p_ok, bf10, reported_bf10,
    bf10_ok, bf10_ratio (printed / recomputed), bf_prior, evidence, reported_evidence, evidence_ok,
    bf10_min_prior_range, bf10_max_prior_range, bf_prior_range, evidence_over_prior_range, note (every disagreement,
    described).
    """
    rows = []
    for _, r in ref.iterrows():
        n, k = int(r["n_valid"]), int(r["k_prefers_more_stereotyped"])
        ss, p, bf = float(r["reported_ss"]), float(r["reported_ebt_p"]), float(r["reported_bf10"])
        res = preference_test(k=k, n=n)
        ev = res["evidence_default_prior"]
        ss_ok = math.isclose(round(res["ss"], 4), ss, abs_tol=1e-9)
        p_ok = agrees_at_printed_precision(res["binom_p"], p)
        bf_ok = agrees_at_printed_precision(res["bf10"], bf)
        ev_rep = evidence(bf)
        notes = []
        if not ss_ok:
            notes.append(f"SS: printed {100 * ss:.2f}% vs recomputed {100 * res['ss']:.2f}%")
        if not p_ok:
            notes.append("EBT p " + _describe(res["binom_p"], p, 3))
        if not bf_ok:
            notes.append("BF10 " + _describe(res["bf10"], bf, 3))
        if ev_rep != ev:
            notes.append(f"conclusion changes (paper's prior): printed value reads '{ev_rep}', recomputed '{ev}'")
        rows.append({"bias_type": r["bias_type"], "n": n, "k": k,
                     "ss": res["ss"], "reported_ss": ss, "ss_ok": ss_ok,
                     "binom_p": res["binom_p"], "reported_binom_p": p, "binom_p_ok": p_ok,
                     "bf10": res["bf10"], "reported_bf10": bf, "bf10_ok": bf_ok,
                     "bf10_ratio": bf / res["bf10"], "bf_prior": PAPER_PRIOR,
                     "evidence": ev, "reported_evidence": ev_rep, "evidence_ok": ev_rep == ev,
                     "bf10_min_prior_range": res["bf10_min"], "bf10_max_prior_range": res["bf10_max"],
                     "bf_prior_range": res["bf_prior_range"], "evidence_over_prior_range": res["evidence"],
                     "note": "; ".join(notes)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------------------
# Position bias of a two-option preference prompt (beyond the paper)
# --------------------------------------------------------------------------------------------------------------


def position_bias_tests(answers: pd.DataFrame, by: Sequence[str] = ("model", "dataset"),
                        order_col: str = "order", first_col: str = "chose_first") -> pd.DataFrame:
    """Does the model prefer a position rather than a sentence? Per group and presentation order (and both orders
    pooled, ``order = 'both'``): the share of valid answers naming the first sentence, ``p_first``, tested against
    0.5 with the exact binomial test and the uniform-prior BF10 of eq. 9 (the same machinery as the preference
    scheme, applied to position instead of content). ``answers`` has one row per prompt with ``chose_first`` in
    {1, 0, NaN}."""
    by = list(by)
    rows = []
    for keys, g in answers.groupby(by, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        parts = [(o, go) for o, go in g.groupby(order_col, sort=False)] + [("both", g)]
        for o, go in parts:
            res = preference_test(go[first_col].to_numpy(dtype=float))
            rows.append({**dict(zip(by, keys)), "order": o, "n": res["n"],
                         "n_excluded": int(go[first_col].isna().sum()), "k_first": res["k"], "p_first": res["pi_hat"],
                         "binom_p": res["binom_p"], "bf10": res["bf10"], "log10_bf10": res["log10_bf10"],
                         "evidence": res["evidence"]})
    return pd.DataFrame(rows)


def order_consistency(answers: pd.DataFrame, by: Sequence[str] = ("model", "dataset"), pair_col: str = "prompt_id",
                      order_col: str = "order", orders: tuple[str, str] = ("more_first", "less_first")) -> pd.DataFrame:
    """Pairs asked in both orders with a valid answer both times: the share whose preferred *sentence* is the same
    (``same_sentence``: content-driven), whose chosen *position* is the same (``same_position`` = ``always_first`` +
    ``always_second``: position-driven). A model that reads the sentences has same_sentence near 1."""
    by = list(by)
    rows = []
    for keys, g in answers.groupby(by, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        w = g.pivot_table(index=pair_col, columns=order_col, values=["x", "chose_first"], aggfunc="first")
        if not all(("x", o) in w.columns for o in orders):
            continue
        w = w.dropna()
        a, b = orders
        n = len(w)
        same_sentence = float((w[("x", a)] == w[("x", b)]).mean()) if n else float("nan")
        af = float(((w[("chose_first", a)] == 1) & (w[("chose_first", b)] == 1)).mean()) if n else float("nan")
        asec = float(((w[("chose_first", a)] == 0) & (w[("chose_first", b)] == 0)).mean()) if n else float("nan")
        rows.append({**dict(zip(by, keys)), "n_pairs": n, "same_sentence": same_sentence,
                     "same_position": af + asec if n else float("nan"), "always_first": af, "always_second": asec})
    return pd.DataFrame(rows)
