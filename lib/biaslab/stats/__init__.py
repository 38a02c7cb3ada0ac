"""Statistics over prompt tables and response tables: pure functions over pandas/numpy (no torch).

* :mod:`.coverage`    coverage percentage and Gini index of the factor tensor (multi-factor paper §3.2, eqs. 1-2),
  pairwise counts, aliasing (functional dependency) detection.
* :mod:`.subgroups`   k-level subgroups, deviation rates, log disparity (eq. 3), eCDF and deviation metric (eq. 4),
  two-sample KS tests (§3.3).
* :mod:`.importance`  logistic regression with treatment coding at reference levels, refusing aliased factor sets
  (§3.4).
* :mod:`.bayesian`    hierarchical Bayesian logistic regression with bambi (beyond the paper); imported lazily since
  it pulls in pymc.
"""

from . import coverage, importance, subgroups

__all__ = ["coverage", "subgroups", "importance"]
