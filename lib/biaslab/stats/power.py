"""Power, minimum detectable effect (MDE) and sample-size planning (beyond the four papers; Miller 2024, "Adding
Error Bars to Evals", §5; Cohen 1988, ch. 6 for the arcsine effect size ``h = 2 asin sqrt(p1) - 2 asin sqrt(p0)``).

Clustering enters through the design effect: ``n`` clustered prompts carry the information of ``n / deff``
independent ones (Kish 1965), so every function takes ``deff`` (1 = independent units, e.g. CrowS pairs). The MDE of
the design *actually analysed* (:func:`mde_from_se`) comes from the standard error as the analysis computes it
(paired where the contrast is paired, cluster-robust with that contrast's own design effect) on its t(df) reference
(noncentral t; Bloom 1995, "Minimum detectable effects", Evaluation Review 19(5)). Before the run, the plan states
each claim instance's **power for its smallest effect of interest at the level it is tested** from its planning design
alone (:func:`design_power`; the level it needs, :func:`level_for_power`; the n that would power it,
:func:`n_for_power`); :func:`required_n_proportion` and :func:`required_n_two_proportions` plan.

Every MDE is an absolute value (statsmodels' root finder can return the negative root of the symmetric power
equation), and **undefined** (NaN) where the analysed design has no usable standard error: fewer than 2 clusters, an
SE that cannot be estimated, or an SE of 0 (a constant outcome, or arms that answer alike inside every cluster). An
SE of 0 means the data carry no estimate of the noise, not that every effect is detectable, so an MDE of 0 is never
reported: :func:`mde_undefined_reason` says which case it was (``mde_note`` of ``power.csv``).
"""

from __future__ import annotations

import functools
import math
from typing import Mapping

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
    """Units a one-sample test of p0 needs to detect a true rate p1 (``n_independent * deff``, rounded up):
    :func:`required_n_two_proportions` with ``ratio = 0``, statsmodels' one-sample case."""
    return required_n_two_proportions(p1, p0, alpha, power, deff, ratio=0)


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


# ------------------------------------------------------------------ CALM's eq.-1 range statistic, simulated

@functools.lru_cache(maxsize=16)
def _range_sim(n_templates: int, per_group: int, groups: tuple, accuracy: float, n_sim: int, seed: int):
    """The eq.-1 score of ``n_sim`` simulated runs as a function of the accuracy gap ``delta`` of one group per bias
    type (common random numbers, so the score is monotone in delta): see :func:`mde_range_excess`."""
    rng = np.random.default_rng(seed)
    u = [rng.random((n_sim, n_templates, k, per_group)) for k in groups]

    def score(delta: float) -> np.ndarray:
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

    return score


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
    score = _range_sim(int(n_templates), int(per_group), tuple(groups), float(accuracy), int(n_sim), int(seed))
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


@functools.lru_cache(maxsize=64)
def _range_at_excess(n_templates: int, per_group: int, groups: tuple, accuracy: float, excess: float, n_sim: int,
                     seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(null scores, scores at the gap whose mean excess over the null mean is ``excess``), simulated; the
    alternative is NaN where even the largest gap gives less."""
    score = _range_sim(n_templates, per_group, groups, accuracy, n_sim, seed)
    null = score(0.0)
    gain = lambda d: float(score(d).mean() - null.mean())              # noqa: E731 (increasing in d)
    if gain(accuracy) < excess:
        return null, np.full(n_sim, np.nan)
    lo, hi = 0.0, accuracy
    for _ in range(20):                                                # the gap to 1e-6 of its range
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gain(mid) < excess else (lo, mid)
    return null, score(hi)


# ------------------------------------------------------------------ power of a claim's test for its SESOI

#: the power models a plan's planning design may name (``model``): a t test (df from the clusters, else n - 1), a
#: z test (normal: randomization tests by their normal approximation), a chi-square test of Cohen's w, CALM's
#: eq.-1 range statistic against its permutation null (simulated)
DESIGN_MODELS = ("t", "z", "chi2", "range")


def power_t(effect: float, se: float, df: float | None = None, level: float = ALPHA,
            sides: str = "two-sided") -> float:
    """Power of a t test (``df``; the normal where None or infinite) at ``level`` for a true effect ``effect`` on
    an estimate with standard error ``se``: ``P(|T'| > t_{1-level/2, df})`` two-sided, ``P(T' > t_{1-level, df})``
    one-sided, T' noncentral t with noncentrality ``effect / se`` (Cohen 1988, ch. 2; Bloom 1995)."""
    if not (se > 0 and np.isfinite(se)) or not 0 < level < 1:
        return float("nan")
    nc = abs(effect) / se
    one = str(sides).startswith("one-sided")
    if df is None or not np.isfinite(df) or df > 1e6:
        q = stats.norm.isf(level if one else level / 2)
        return float(stats.norm.sf(q - nc) + (0.0 if one else stats.norm.cdf(-q - nc)))
    q = stats.t.isf(level if one else level / 2, df)
    # the far tail: scipy's noncentral t cdf is NaN where it underflows (below 1e-16), so the normal's stands in
    low = 0.0 if one else stats.nct.cdf(-q, df, nc)
    return float(stats.nct.sf(q, df, nc) + (low if np.isfinite(low) else stats.norm.cdf(-q - nc)))


def power_chi2(w: float, n: float, df: int, level: float = ALPHA, deff: float = 1.0) -> float:
    """Power of a chi-square test on ``df`` degrees of freedom at ``level`` for Cohen's ``w`` with ``n`` units and
    design effect ``deff`` (first-order Rao-Scott): noncentral chi-square with noncentrality ``(n / deff) w^2``
    (Cohen 1988, ch. 7)."""
    if not 0 < level < 1 or n <= 0:
        return float("nan")
    return float(stats.ncx2.sf(stats.chi2.isf(level, df), df, n / max(deff, 1.0) * w ** 2))


def power_range_excess(n_templates: int, per_group: int, excess: float, level: float, groups: tuple = (3, 4),
                       accuracy: float = 0.7, n_sim: int = 4000, seed: int = 0) -> float:
    """Power of the level-``level`` permutation test of a CALM eq.-1 score (one-sided, above its floor) when the
    true excess over the floor is ``excess`` points, simulated as :func:`mde_range_excess` does: the share of the
    alternative's scores above the null's ``1 - level`` quantile. NaN where no accuracy gap gives that excess."""
    null, alt = _range_at_excess(int(n_templates), int(per_group), tuple(groups), float(accuracy), float(excess),
                                 int(n_sim), int(seed))
    if np.isnan(alt).all():
        return float("nan")
    return float(np.mean(alt > np.quantile(null, 1 - level)))


def _scaled(design: Mapping, n: float) -> dict:
    """``design`` at ``n`` units: the clusters grow with n at the design's cluster size, the design effect stays,
    a stated SE shrinks as ``1 / sqrt(n)``; CALM's range design grows in templates."""
    d = dict(design)
    if d["model"] == "range":
        d["templates"] = int(n)
        return d
    n0 = float(d["n"])
    d["n"] = float(n)
    if d.get("clusters"):
        d["clusters"] = max(2, int(round(d["clusters"] * n / n0)))
    if d.get("se"):
        d["se"] = d["se"] * math.sqrt(n0 / n)
    return d


def design_power(design: Mapping, sesoi: float, level: float, sides: str = "two-sided") -> float:
    """Power of a claim instance's test for its smallest effect of interest ``sesoi`` at ``level``, from its
    planning design (the plan's ``design``: ``model`` one of :data:`DESIGN_MODELS`):

    * ``t`` / ``z``: standard error ``se``, or ``sd * sqrt(deff / n)`` (``sd``: one unit's SD on the estimate's
      scale, from the scale's bound or a pilot; ``deff``: the design effect, default 1); t on ``clusters - 1``
      degrees of freedom where the design names clusters, else ``n - 1``; ``z`` the normal (:func:`power_t`);
    * ``chi2``: ``n`` units, ``df``, ``deff``; ``sesoi`` is Cohen's w (:func:`power_chi2`);
    * ``range``: ``templates``, ``per_group`` names, ``groups`` (default 3 and 4), ``accuracy`` (default 0.7),
      ``draws`` and ``seed`` of the simulation; ``sesoi`` in eq.-1 points (:func:`power_range_excess`)."""
    m = design["model"]
    if m in ("t", "z"):
        se = design.get("se") or design["sd"] * math.sqrt(float(design.get("deff", 1.0)) / float(design["n"]))
        df = None if m == "z" else (design["clusters"] - 1 if design.get("clusters") else design["n"] - 1)
        return power_t(sesoi, se, df, level, sides)
    if m == "chi2":
        return power_chi2(sesoi, float(design["n"]), int(design["df"]), level, float(design.get("deff", 1.0)))
    if m == "range":
        return power_range_excess(design["templates"], design["per_group"], sesoi, level,
                                  tuple(design.get("groups", (3, 4))), float(design.get("accuracy", 0.7)),
                                  int(design.get("draws", 4000)), int(design.get("seed", 0)))
    raise ValueError(f"design model {m!r}: use one of {', '.join(DESIGN_MODELS)}")


def level_for_power(design: Mapping, sesoi: float, sides: str = "two-sided", target: float = POWER) -> float:
    """The smallest level at which the design's test has power ``target`` for ``sesoi`` (power grows with the
    level): solved by bisection on the log of the level in [1e-12, 0.5]; 1 where even 0.5 gives less."""
    f = lambda lv: design_power(design, sesoi, lv, sides)              # noqa: E731
    if not f(0.5) >= target:
        return 1.0
    lo, hi = math.log(1e-12), math.log(0.5)
    if f(1e-12) >= target:
        return 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(math.exp(mid)) < target else (lo, mid)
    return math.exp(hi)


def n_for_power(design: Mapping, sesoi: float, level: float, sides: str = "two-sided", target: float = POWER,
                most: float = 1e7) -> float:
    """The smallest n (CALM's range design: templates) at which the design's test has power ``target`` for
    ``sesoi`` at ``level``, the design otherwise unchanged (:func:`_scaled`); NaN where even ``most`` is not
    enough."""
    base = float(design["templates"] if design["model"] == "range" else design["n"])
    if design["model"] == "range":          # a simulation per n: fewer draws, n up to the templates the data hold
        design = {**design, "draws": min(int(design.get("draws", 4000)), 1000)}
        most = min(most, float(design.get("max_n", 1000)))
    f = lambda n: np.nan_to_num(design_power(_scaled(design, n), sesoi, level, sides))      # noqa: E731
    if f(base) >= target:
        lo, hi = 1.0, base
    else:
        lo, hi = base, base
        while f(hi) < target:
            if hi >= most:
                return float("nan")
            lo, hi = hi, min(most, hi * 2)
    while hi - lo > 1:
        mid = math.floor((lo + hi) / 2)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return float(hi)
