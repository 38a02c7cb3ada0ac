"""Coefficient plots of factor importance (multi-factor paper, Fig. 1c) and of the Bayesian model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt


def coefficient_plot(table: pd.DataFrame, alpha: float = 0.01, title: str = "", max_terms: int = 60,
                     highlight: tuple = ()):
    """Coefficients (log odds ratios) with Wald intervals for the terms with p <= ``alpha``.

    ``table`` is :func:`biaslab.stats.importance.logistic_regression`'s table. Risk factors (positive) in red,
    protective factors (negative) in blue; factors named in ``highlight`` are drawn with filled bars.
    """
    t = table[(table["p_value"] <= alpha) & ~table["separated"] & (table["factor"] != "Intercept")].copy()
    intercept = table.loc[table["factor"] == "Intercept", "coef"]
    if len(t) > max_terms:
        t = t.reindex(t["coef"].abs().sort_values(ascending=False).index[:max_terms])
    t = t.sort_values(["factor", "coef"])
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.22 * max(len(t), 1)))
    if t.empty:
        ax.text(0.5, 0.5, f"no term with p <= {alpha}", ha="center", va="center", transform=ax.transAxes)
    y = np.arange(len(t))
    lo = np.log(t["ci_low"].to_numpy())
    hi = np.log(t["ci_high"].to_numpy())
    col = np.where(t["coef"] > 0, "#c0392b", "#2e6fba")
    for i, (c, f) in enumerate(zip(t["coef"], t["factor"])):
        ax.barh(i, c, color=col[i], alpha=0.85 if f in highlight else 0.35, height=0.7)
    ax.errorbar(t["coef"], y, xerr=[t["coef"] - lo, hi - t["coef"]], fmt="none", ecolor="k", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(t["term"], fontsize=7)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("coefficient (log odds ratio vs. reference level); > 0 risk, < 0 protective")
    sub = f"terms with p <= {alpha}" + (f"; intercept {intercept.iloc[0]:.3f}" if len(intercept) else "")
    ax.set_title((title + "\n" if title else "") + sub, fontsize=10)
    return fig


def posterior_plot(summary: pd.DataFrame, title: str = ""):
    """Posterior means and highest-density intervals of the common terms of a bambi fit (sigmas excluded)."""
    s = summary[~summary["term"].str.contains("sigma") & (summary["term"] != "Intercept")].copy()
    lo_col = [c for c in s.columns if c.startswith("hdi_")][0]
    hi_col = [c for c in s.columns if c.startswith("hdi_")][1]
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.3 * max(len(s), 1)))
    y = np.arange(len(s))
    ax.errorbar(s["mean"], y, xerr=[s["mean"] - s[lo_col], s[hi_col] - s["mean"]], fmt="o", color="k",
                ecolor="grey", capsize=3)
    ax.set_yticks(y)
    ax.set_yticklabels(s["term"], fontsize=8)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel(f"posterior mean and {lo_col[4:]}-{hi_col[4:]} HDI (log odds ratio vs. reference)")
    ax.set_title(title or "Hierarchical logistic model (bambi)", fontsize=10)
    return fig
