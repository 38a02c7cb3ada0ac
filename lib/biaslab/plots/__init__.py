"""Figures: matplotlib/seaborn functions that take result tables and return a Figure (no statistics here).

Multi-factor analysis (notebook 1):
* :func:`sunburst`            nested rings of subgroup log disparities (inner ring one factor, outer ring the next).
* :func:`ecdf_plot`           eCDFs of subgroup deviation rates per model, with deviation metrics.
* :func:`coefficient_plot`    logistic-regression coefficients with confidence intervals.
* :func:`coverage_heatmap`    prompt counts for every pair of levels of two factors.
* :func:`gini_bars`           per-factor Gini indices (ours against the paper's).

Other notebooks' figures live in their own modules (:mod:`.bayes`, :mod:`.entropy`, :mod:`.calm`).
"""

from .coverage import coverage_heatmap, gini_bars
from .importance import coefficient_plot, posterior_plot
from .subgroups import ecdf_plot, sunburst

__all__ = ["sunburst", "ecdf_plot", "coefficient_plot", "posterior_plot", "coverage_heatmap", "gini_bars"]
