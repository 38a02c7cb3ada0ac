"""Figures of the multi-factor analysis (matplotlib only; statistics come from :mod:`biaslab.stats`).

* :func:`sunburst`            nested rings of subgroup log disparities (inner ring one factor, outer ring the next).
* :func:`ecdf_plot`           eCDFs of subgroup deviation rates per model, with deviation metrics.
* :func:`coefficient_plot`    logistic-regression coefficients with confidence intervals.
* :func:`coverage_heatmap`    prompt counts for every pair of levels of two factors.
* :func:`gini_bars`           per-factor Gini indices (ours against the paper's).
"""

from .coverage import coverage_heatmap, gini_bars
from .importance import coefficient_plot, posterior_plot
from .subgroups import ecdf_plot, sunburst

__all__ = ["sunburst", "ecdf_plot", "coefficient_plot", "posterior_plot", "coverage_heatmap", "gini_bars"]
