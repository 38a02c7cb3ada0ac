"""Power, minimum detectable effect (MDE) and sample-size planning (beyond the four papers; Miller 2024, "Adding
Error Bars to Evals", §5; Cohen 1988, ch. 6 for the arcsine effect size ``h = 2 asin sqrt(p1) - 2 asin sqrt(p0)``).

Clustering enters through the design effect: ``n`` clustered prompts carry the information of ``n / deff``
independent ones (Kish 1965), so every function takes ``deff`` (1 = independent units, e.g. CrowS pairs). The MDE of
the design *actually analysed* (:func:`mde_from_se`) comes from the standard error as the analysis computes it
(paired where the contrast is paired, cluster-robust with that contrast's own design effect) on its t(df) reference
(noncentral t; Bloom 1995, "Minimum detectable effects", Evaluation Review 19(5)); :func:`planned_mde` is the plan's
MDE from the design alone, before the run; :func:`required_n_proportion` and :func:`required_n_two_proportions` plan.

Every MDE is an absolute value (statsmodels' root finder can return the negative root of the symmetric power
equation), and **undefined** (NaN) where the analysed design has no usable standard error: fewer than 2 clusters, an
SE that cannot be estimated, or an SE of 0 (a constant outcome, or arms that answer alike inside every cluster). An
SE of 0 means the data carry no estimate of the noise, not that every effect is detectable, so an MDE of 0 is never
reported: :func:`mde_undefined_reason` says which case it was (``mde_note`` of ``power.csv``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize

from .clustered import clusters_label

ALPHA, POWER = 0.05, 0.80


def _scalar(x) -> float:
    """statsmodels' solve_power returns a float or a one-element array depending on the root finder used, and for a
    two-sided test either root of the symmetric power equation: the absolute value."""
    return abs(float(np.asarray(x, dtype=float).ravel()[0]))


def _p_from_h(p0: float, h: float) -> float:
    """The rate p1 with Cohen's h(p1, p0) = h (clipped to [0, 1])."""
    phi = 2 * math.asin(math.sqrt(p0)) + h
    phi = min(max(phi, 0.0), math.pi)
    return math.sin(phi / 2) ** 2


@functools.lru_cache(maxsize=64)
def _rejection_region(n: int, p0: float, alpha: float) -> np.ndarray:
    ks = np.arange(n + 1)
    return ks[np.array([stats.binomtest(int(k), n, p0).pvalue <= alpha for k in ks])]


def exact_binomial_power(n: int, p1: float, p0: float = 0.5, alpha: float = ALPHA) -> float:
    """Power of the two-sided exact binomial test (scipy ``binomtest``'s p-value definition) at true rate p1."""
    n = int(n)
    if n <= 0:
        return float("nan")
    return float(stats.binom.pmf(_rejection_region(n, float(p0), float(alpha)), n, p1).sum())


def mde_proportion(n: float, p0: float = 0.5, alpha: float = ALPHA, power: float = POWER, deff: float = 1.0,
                   exact: bool = False) -> float:
    """Minimum detectable ``p1 - p0`` (> 0) of a one-sample test of a rate against p0 with ``n`` units."""
    n_eff = n / max(deff, 1.0)
    if n_eff < 2:
        return float("nan")
    if exact:
        if deff != 1.0:
            raise ValueError("exact=True is for independent units (deff = 1)")
        grid = np.arange(p0 + 0.001, 1.0, 0.001)
        for p1 in grid:
            if exact_binomial_power(int(n), p1, p0, alpha) >= power:
                return float(p1 - p0)
        return float("nan")
    h = _scalar(NormalIndPower().solve_power(effect_size=None, nobs1=n_eff, alpha=alpha, power=power, ratio=0))
    return _p_from_h(p0, h) - p0


def mde_paired_mean(n: float, alpha: float = ALPHA, power: float = POWER, deff: float = 1.0) -> float:
    """Minimum detectable standardized paired mean difference d_z (mean / SD of the differences)."""
    n_eff = n / max(deff, 1.0)
    if n_eff < 3:
        return float("nan")
    return _scalar(TTestPower().solve_power(effect_size=None, nobs=n_eff, alpha=alpha, power=power))


def mde_from_se(se: float, df: float | None = None, alpha: float = ALPHA, power: float = POWER,
                se_naive: float | None = None) -> float:
    """Minimum detectable |effect| of an estimate with standard error ``se`` tested by a two-sided t test on ``df``
    degrees of freedom (the normal where df is None or infinite): the effect delta at which
    ``P(|T'| > t_{1-alpha/2, df}) = power`` for T' ~ noncentral t(df, delta / se). Solved by statsmodels'
    ``TTestPower`` (nobs = df + 1, so its noncentrality d * sqrt(nobs) is delta / se). Same scale as ``se``. NaN
    (undefined, never 0) where ``se`` is 0 or not finite or df < 1 (:func:`mde_undefined_reason` says why).

    ``se_naive`` (the SE treating units as independent): ``se`` is floored at it, so the design effect in an MDE is
    never below 1, as in the planner (a cluster-robust variance below the naive one is noise of a variance with few
    degrees of freedom, e.g. a design effect of 0.03 from 4 templates, not information beyond independent units)."""
    if se is None or not np.isfinite(se) or se <= 0:       # undefined: see mde_undefined_reason
        return float("nan")
    if se_naive is not None and np.isfinite(se_naive):
        se = max(se, se_naive)
    if df is None or not np.isfinite(df) or df > 1e6:
        return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * se)
    if df < 1:
        return float("nan")
    nobs = float(df) + 1.0
    d = _scalar(TTestPower().solve_power(effect_size=None, nobs=nobs, alpha=alpha, power=power))
    return float(d * math.sqrt(nobs) * se)


#: Standard error of one unit on each planning scale, from the scale alone (no data): a share tested against 0.5 has
#: variance p(1 - p) <= 0.25; a paired difference of two shares at most 0.25 + 0.25 (a positive correlation between
#: the two models' answers, the usual case, only lowers it); a mean in SD units has SD 1 (a standardized MDE).
PLANNING_SD = {"share": 0.5, "share_difference": math.sqrt(0.5), "standardized": 1.0}


def kish_deff(population: "pd.Series | np.ndarray", sample: "pd.Series | np.ndarray") -> float:
    """Kish's (1965) design effect of unequal weights, ``n sum(w_h^2 n_h) / (sum w_h n_h)^2`` with stratum weight
    ``w_h = N_h / n_h`` (``population`` N_h and ``sample`` n_h per stratum): the variance inflation a stratified
    sample weighted back to its population pays for unequal sampling fractions (1 for proportional allocation)."""
    N, n = np.asarray(population, dtype=float), np.asarray(sample, dtype=float)
    keep = n > 0
    w, n = N[keep] / n[keep], n[keep]
    return float(n.sum() * (w ** 2 * n).sum() / (w * n).sum() ** 2)


def planned_mde(n: int, scale: str, clusters: int | None = None, deff_weights: float = 1.0, alpha: float = ALPHA,
                power: float = POWER) -> float:
    """Minimum detectable effect of a claim instance from its design alone, before the run (the plan's ``mde``):
    the two-sided test at ``alpha`` with the given power (:func:`mde_from_se`) on the standard error
    ``PLANNING_SD[scale] / sqrt(n_eff)``. ``n_eff = n / (deff_weights * deff_cluster)``: Kish's weights design
    effect (:func:`kish_deff`) times the cluster design effect at its bound ``n / clusters`` (intraclass correlation
    1, Kish 1965: ``1 + (m - 1) ICC <= m``), so an MDE holds however alike the answers within a cluster are; the
    reference distribution is t(clusters - 1) for clustered designs, the normal otherwise (Bloom 1995). Shares and
    share differences are on the share's scale; ``standardized`` in SD units of the analysed unit's outcome."""
    if scale not in PLANNING_SD:
        raise ValueError(f"scale {scale!r}: use one of {', '.join(PLANNING_SD)}")
    clustered = clusters is not None and clusters < n
    n_eff = (clusters if clustered else n) / max(float(deff_weights), 1.0)
    df = clusters - 1 if clustered else None
    return mde_from_se(PLANNING_SD[scale] / math.sqrt(n_eff), df, alpha, power)


def mde_equivalence(se: float, df: float | None = None, alpha: float = ALPHA, power: float = POWER,
                    se_naive: float | None = None) -> float:
    """The smallest equivalence margin a TOST at ``alpha`` shows with the given ``power`` when the true difference
    is 0: ``(t_{1-alpha} + t_{(1+power)/2}) SE`` on ``df`` (normal where None; Schuirmann 1987's two one-sided
    tests, large-sample power). ``se`` floored at ``se_naive`` as in :func:`mde_from_se`; NaN where undefined."""
    if se is None or not np.isfinite(se) or se <= 0 or (df is not None and np.isfinite(df) and df < 1):
        return float("nan")
    se = max(se, se_naive) if se_naive is not None and np.isfinite(se_naive) else se
    q = stats.norm if df is None or not np.isfinite(df) else stats.t(df)
    return float((q.ppf(1 - alpha) + q.ppf((1 + power) / 2)) * se)


def mde_gof_w(n: float, k: int, deff: float = 1.0, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable Cohen's w of a chi-square goodness-of-fit test over ``k`` categories (df = k - 1) with n
    units and design effect ``deff``: statsmodels' ``GofChisquarePower`` on the effective n / deff, which is the
    power of the first-order Rao-Scott test (X2 / deff; Rao & Scott 1981) in its chi-square form. NaN when the
    effective n does not exceed k."""
    n_eff = n / max(deff, 1.0) if deff is not None and np.isfinite(deff) else n
    if not n_eff > k:
        return float("nan")
    from statsmodels.stats.power import GofChisquarePower
    return _scalar(GofChisquarePower().solve_power(effect_size=None, nobs=n_eff, alpha=alpha, power=power,
                                                   n_bins=int(k)))


def mde_undefined_reason(se: float, n_clusters: float | None = None, se_naive: float | None = None) -> str:
    """Why the MDE of an analysis with standard error ``se`` (on ``n_clusters`` clusters; ``se_naive`` the SE that
    treats units as independent) is undefined, or "" when it is defined."""
    if n_clusters is not None and np.isfinite(n_clusters) and n_clusters < 2:
        return f"undefined: {int(n_clusters)} cluster, so the design's SE is not estimable"
    if se is None or not np.isfinite(se):
        return "undefined: the design's SE is not estimable"
    if se > 0:
        return ""
    if se_naive is None or not np.isfinite(se_naive) or se_naive == 0:
        return "undefined: zero variance, the outcome is constant (e.g. a degenerate responder)"
    return ("undefined: zero cluster-robust variance, the compared arms answer alike inside every cluster (the "
            "design estimates no noise)")


def summarize_contrast_mdes(c: pd.DataFrame) -> dict:
    """One ``power.csv`` row's numbers from the per-level MDEs of :func:`subgroup_contrast_mdes`: the median MDE over
    the levels where it is defined, the level closest to it (its n_group, n_clusters, design effect), the range of
    the defined levels' design effects and a note naming the undefined levels (all undefined: the MDE is NaN and the
    note gives the reason)."""
    ok = c[c["mde"].notna()]
    bad = c[c["mde"].isna()]
    why = "; ".join(f"{lv}: {r.removeprefix('undefined: ')}" for lv, r in zip(bad["level"], bad["mde_note"]))
    out = {"n_levels": len(c), "n_defined": len(ok), "note": (f"{len(bad)} of {len(c)} levels undefined ({why})"
                                                              if len(bad) else "")}
    if ok.empty:
        typ = c.iloc[0] if len(c) else None
        return {**out, "mde": np.nan, "n_group": typ["n_group"] if typ is not None else np.nan,
                "n_clusters": typ["n_clusters"] if typ is not None else np.nan, "design_effect": np.nan,
                "deff_range": "", "note": (bad["mde_note"].iloc[0] if len(bad) and bad["mde_note"].nunique() == 1
                                           else out["note"]) or "undefined: no level"}
    typ = ok.iloc[(ok["mde"] - ok["mde"].median()).abs().argsort().iloc[0]]
    return {**out, "mde": float(ok["mde"].median()), "n_group": int(typ["n_group"]),
            "n_clusters": int(typ["n_clusters"]), "design_effect": float(typ["design_effect"]),
            "deff_range": f"{ok['design_effect'].min():.1f}-{ok['design_effect'].max():.1f}"}


def mde_design(kind: str, n: int, n_clusters: int | None = None, deff: float | None = None,
               cluster: str = "") -> str:
    """The analysed design in words, for the ``mde_design`` column: "paired, 10,360 prompts in 37 template clusters,
    deff 41.1, t(36)"."""
    parts = [kind, f"{int(n):,} units"]
    if n_clusters is not None and np.isfinite(n_clusters) and n_clusters != n:
        parts[-1] += f" in {int(n_clusters)} {clusters_label(cluster)}"
    if deff is not None and np.isfinite(deff):      # the design effect in an MDE is never below 1 (mde_from_se)
        parts.append(f"deff {max(deff, 1.0):.2f}" + (f" (estimated {deff:.2f}, floored at 1)" if deff < 1 else ""))
    if n_clusters is not None and np.isfinite(n_clusters):
        parts.append(f"t({int(n_clusters) - 1})")
    return ", ".join(parts)


def subgroup_contrast_mdes(df: pd.DataFrame, outcome: str, factor: str, cluster, alpha: float = ALPHA,
                           power: float = POWER) -> pd.DataFrame:
    """For every level of ``factor``: the MDE of the contrast "this subgroup vs the rest" as the analysis sees it,
    from the contrast's own cluster-robust SE (:func:`biaslab.stats.clustered.contrast_inference`, one- or two-way
    ``cluster``) on t(G - 1). A level crossed with the clusters (a prompt style in every template) has a small
    design effect; a level constant within clusters (a template-level gender) a large one — never the design effect
    of the model's overall rate. The design effect is floored at 1 (shown and used so, :func:`mde_from_se`). Columns: level, n_group, n_rest, n_clusters, design_effect, se, mde, mde_note (why
    an MDE is undefined: :func:`mde_undefined_reason`)."""
    from .clustered import cluster_labels, contrast_inference
    labels = cluster_labels(df, cluster)
    y = df[outcome].to_numpy(dtype=float)
    rows = []
    for level in pd.unique(df[factor]):
        r = contrast_inference(y, (df[factor] == level).to_numpy(), labels, alpha=alpha)
        note = mde_undefined_reason(r["se"], r["n_clusters"], r["se_naive"])
        rows.append({"level": level, "n_group": r["n_group"], "n_rest": r["n_rest"], "n_clusters": r["n_clusters"],
                     "design_effect": max(r["design_effect"], 1.0) if np.isfinite(r["design_effect"]) else np.nan,
                     "se": r["se"],
                     "mde": np.nan if note else mde_from_se(r["se"], r["df"], alpha, power, r["se_naive"]),
                     "mde_note": note})
    return pd.DataFrame(rows, columns=["level", "n_group", "n_rest", "n_clusters", "design_effect", "se", "mde",
                                       "mde_note"])


def required_n_proportion(p1: float, p0: float = 0.5, alpha: float = ALPHA, power: float = POWER,
                          deff: float = 1.0) -> int:
    """Units a one-sample test of p0 needs to detect a true rate p1 (``n_independent * deff``, rounded up)."""
    h = abs(proportion_effectsize(p1, p0))
    n = _scalar(NormalIndPower().solve_power(effect_size=h, nobs1=None, alpha=alpha, power=power, ratio=0))
    return int(math.ceil(n * max(deff, 1.0)))


def required_n_two_proportions(p1: float, p2: float, alpha: float = ALPHA, power: float = POWER,
                               deff: float = 1.0, ratio: float = 1.0) -> int:
    """Units in the first group (the second gets ``ratio`` times as many) to detect rates p1 vs p2."""
    h = abs(proportion_effectsize(p1, p2))
    n = _scalar(NormalIndPower().solve_power(effect_size=h, nobs1=None, alpha=alpha, power=power, ratio=ratio))
    return int(math.ceil(n * max(deff, 1.0)))


def power_row(benchmark: str, profile: str, quantity: str, n: float, mde: float, *, n_clusters: int | None = None,
              deff: float = 1.0, scale: str = "", test: str = "", alpha: float = ALPHA, power: float = POWER,
              target: float | None = None, required_n: int | None = None, design: str = "", note: str = "") -> dict:
    """One row of ``tables/power.csv``; ``mde`` is stored as its absolute value, NaN where it is undefined (0 or
    missing: ``mde_note`` says why, "undefined" when ``note`` gives no reason), ``design`` (``mde_design``) says
    which design it is the MDE of."""
    deff = 1.0 if deff is None or not np.isfinite(deff) else max(deff, 1.0)     # never below 1 beside an MDE
    mde = abs(mde) if mde is not None and np.isfinite(mde) and mde != 0 else np.nan
    if np.isnan(mde) and not note:
        note = "undefined"
    return {"benchmark": benchmark, "profile": profile, "quantity": quantity, "test": test, "n": n,
            "n_clusters": n_clusters, "design_effect": deff, "n_effective": n / max(deff, 1.0), "alpha": alpha,
            "power": power, "mde": mde, "mde_note": note, "mde_scale": scale, "mde_design": design,
            "target_effect": target, "required_n": required_n}


def mde_range_excess(n_templates: int, per_group: int, groups: tuple = (3, 4), accuracy: float = 0.7,
                     alpha: float = ALPHA, power: float = POWER, n_sim: int = 4000, seed: int = 0) -> dict:
    """Minimum detectable excess of a CALM eq.-1 score over its permutation floor, from the design alone (before
    any data): ``n_templates`` templates, each with ``per_group`` names in each group of every bias type
    (``groups``: 3 gender, 4 race), answers independent Bernoulli(``accuracy``) under the null. The score
    (Gupta et al. 2024, eq. 1) is the mean over templates and bias types of ``100 (max_g a_tg - min_g a_tg) /
    a_t``, ``a_t`` the template's accuracy over all its prompts (templates with ``a_t = 0`` left out, as the
    paper's rule does). Simulated (``n_sim`` draws, common random numbers): the level-``alpha`` critical value of
    the score under the null, then by bisection the accuracy gap ``delta`` of one group per bias type (answered
    worse: ``accuracy - delta``, the others at ``accuracy``) that the score exceeds the critical value for with
    probability ``power``; NaN when even ``delta = accuracy`` is detected less often. Returns ``gap`` (delta,
    accuracy points as a share) and ``mde`` (the mean score at delta minus the null mean: the claim's scale, bias
    above the floor)."""
    rng = np.random.default_rng(seed)
    u = [rng.random((n_sim, n_templates, k, per_group)) for k in groups]

    def score(delta):
        acc, hits, total = [], 0.0, 0.0
        for ub, k in zip(u, groups):
            p = np.full(k, accuracy)
            p[0] = max(0.0, accuracy - delta)
            a = (ub < p[None, None, :, None]).mean(axis=3)            # [sim, template, group]
            acc.append(a)
            hits = hits + a.sum(axis=2) * per_group
            total += k * per_group
        base = hits / total
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.mean([np.where(base > 0, 100 * (a.max(axis=2) - a.min(axis=2)) / base, np.nan) for a in acc],
                        axis=0)
        return np.nanmean(s, axis=1)                                   # [sim]

    null = score(0.0)
    crit = float(np.quantile(null, 1 - alpha))
    lo, hi = 0.0, accuracy
    if np.mean(score(hi) > crit) < power:
        return {"gap": float("nan"), "mde": float("nan"), "critical_value": crit, "null_mean": float(null.mean())}
    for _ in range(25):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.mean(score(mid) > crit) < power else (lo, mid)
    return {"gap": hi, "mde": float(score(hi).mean() - null.mean()), "critical_value": crit,
            "null_mean": float(null.mean())}
