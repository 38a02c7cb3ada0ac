"""Power, minimum detectable effect (MDE) and sample-size planning (beyond the four papers; Miller 2024, "Adding
Error Bars to Evals", §5; Cohen 1988, ch. 6 for the arcsine effect size ``h = 2 asin sqrt(p1) - 2 asin sqrt(p0)``).

Clustering enters through the design effect: ``n`` clustered prompts carry the information of ``n / deff``
independent ones (Kish 1965), so every function takes ``deff`` (1 = independent units, e.g. CrowS pairs).

* :func:`exact_binomial_power` power of the two-sided exact binomial test of ``p0`` (CrowS stereotype score vs 0.5)
  at a true ``p1``: the probability of the test's rejection region under ``Binomial(n, p1)``.
* :func:`mde_proportion` smallest ``|p1 - p0|`` a one-sample test detects with the given power (normal
  approximation on ``h``, statsmodels ``NormalIndPower(ratio=0)``), with an ``exact`` option that searches the
  exact binomial test's power.
* :func:`mde_two_proportions` smallest difference between two rates (a subgroup vs the rest, two models unpaired)
  around a base rate ``p``, with ``n1`` and ``n2`` units, under a design effect.
* :func:`mde_paired_mean` smallest standardized paired mean difference (Cohen's d_z) a paired t test detects
  (statsmodels ``TTestPower``); multiply by the SD of the differences for the raw scale.
* :func:`required_n_proportion`, :func:`required_n_two_proportions` the planner: units needed for a target effect.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize

ALPHA, POWER = 0.05, 0.80


def _scalar(x) -> float:
    """statsmodels' solve_power returns a float or a one-element array depending on the root finder used."""
    return float(np.asarray(x, dtype=float).ravel()[0])


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


def mde_two_proportions(n1: float, n2: float, p: float, alpha: float = ALPHA, power: float = POWER,
                        deff: float = 1.0) -> float:
    """Minimum detectable increase of a rate above a base rate ``p`` when comparing n1 and n2 units (two-sided
    two-sample test on Cohen's h, effective sizes ``n / deff``)."""
    n1e, n2e = n1 / max(deff, 1.0), n2 / max(deff, 1.0)
    if min(n1e, n2e) < 2:
        return float("nan")
    h = _scalar(NormalIndPower().solve_power(effect_size=None, nobs1=n1e, alpha=alpha, power=power,
                                             ratio=n2e / n1e))
    return _p_from_h(p, h) - p


def mde_paired_mean(n: float, alpha: float = ALPHA, power: float = POWER, deff: float = 1.0) -> float:
    """Minimum detectable standardized paired mean difference d_z (mean / SD of the differences)."""
    n_eff = n / max(deff, 1.0)
    if n_eff < 3:
        return float("nan")
    return _scalar(TTestPower().solve_power(effect_size=None, nobs=n_eff, alpha=alpha, power=power))


def power_proportion(n: float, p1: float, p0: float = 0.5, alpha: float = ALPHA, deff: float = 1.0) -> float:
    """Power of the one-sample test of p0 at true p1 (normal approximation on Cohen's h)."""
    return float(NormalIndPower().power(effect_size=proportion_effectsize(p1, p0), nobs1=n / max(deff, 1.0),
                                        alpha=alpha, ratio=0))


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
              target: float | None = None, required_n: int | None = None) -> dict:
    """One row of ``tables/power.csv``."""
    return {"benchmark": benchmark, "profile": profile, "quantity": quantity, "test": test, "n": n,
            "n_clusters": n_clusters, "design_effect": deff, "n_effective": n / max(deff, 1.0), "alpha": alpha,
            "power": power, "mde": mde, "mde_scale": scale, "target_effect": target, "required_n": required_n}
