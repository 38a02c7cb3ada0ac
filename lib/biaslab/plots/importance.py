"""Coefficient plots of factor importance (multi-factor paper, Fig. 1c) and of the Bayesian model."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

from .labels import hdi_prob, interval_label


def reference_note(references: dict | None, factors) -> str:
    """'reference levels: stigma = no stigma; gender = gender neutral' for the factors drawn."""
    if not references:
        return ""
    parts = [f"{f} = {references[f]}" for f in dict.fromkeys(factors) if f in references]
    return textwrap.fill("reference levels: " + "; ".join(parts), 95) if parts else ""


def coefficient_plot(table: pd.DataFrame, alpha: float = 0.01, title: str = "", max_terms: int = 60,
                     highlight: tuple = (), references: dict | None = None):
    """Coefficients (log odds ratios) with Wald intervals for the terms with p <= ``alpha`` (every term when
    ``alpha`` >= 1), against the reference levels named under the axis.

    ``table`` is :func:`biaslab.stats.importance.logistic_regression`'s table. Risk factors (positive) in red,
    protective factors (negative) in blue; factors named in ``highlight`` are drawn with filled bars. Separated terms
    (a level whose deviation rate is 0 or 1: no finite maximum-likelihood estimate) are not drawn but named; when
    every term is separated the figure says so instead of drawing an empty axis.
    """
    terms = table[table["factor"] != "Intercept"]
    separated = terms[terms["separated"].astype(bool)]
    t = terms[(terms["p_value"] <= alpha) & ~terms["separated"].astype(bool)].copy()
    intercept = table.loc[table["factor"] == "Intercept", "coef"]
    if len(t) > max_terms:
        t = t.reindex(t["coef"].abs().sort_values(ascending=False).index[:max_terms])
    t = t.sort_values(["factor", "coef"])
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.22 * max(len(t), 4)))
    shown = "all terms" if alpha >= 1 else f"terms with p <= {alpha}"
    if t.empty:
        if len(separated) and len(separated) == len(terms):
            extreme = separated[separated["rate_level"].isin([0.0, 1.0])]
            ex = (extreme if len(extreme) else separated).iloc[0]
            msg = "\n".join(textwrap.wrap(
                f"no finite estimate: all {len(terms)} terms are separated (a level answered biased always or "
                f"never, e.g. {ex['factor']} = {ex['level']}: rate {ex['rate_level']:.2f}); maximum likelihood "
                "cannot rank the factors here", 60))
        else:
            msg = f"no term with p <= {alpha}" if alpha < 1 else "no estimable term"
        ax.text(0.5, 0.5, msg, ha="center", va="center", transform=ax.transAxes, fontsize=9)
        ax.set_xticks([])
    y = np.arange(len(t))
    lo = np.log(t["ci_low"].to_numpy())
    hi = np.log(t["ci_high"].to_numpy())
    col = np.where(t["coef"] > 0, "#c0392b", "#2e6fba")
    for i, (c, f) in enumerate(zip(t["coef"], t["factor"])):
        ax.barh(i, c, color=col[i], alpha=0.85 if f in highlight else 0.35, height=0.7)
    if len(t):
        ax.errorbar(t["coef"], y, xerr=[t["coef"] - lo, hi - t["coef"]], fmt="none", ecolor="k", lw=0.8)
        ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(t["term"], fontsize=7)
    note = reference_note(references, terms["factor"])
    drop = (f"not drawn: {len(separated)} separated term{'s' if len(separated) != 1 else ''}"
            if len(separated) and len(t) else "")
    ax.set_xlabel("coefficient (log odds ratio vs. reference level) with " + interval_label("CI", 0.95, "Wald")
                  + "; > 0 risk, < 0 protective" + "".join(f"\n{x}" for x in (note, drop) if x), fontsize=8)
    sub = "; ".join(x for x in (shown if shown not in title else "",
                                f"intercept {intercept.iloc[0]:.3f}" if len(intercept) and len(t) else "") if x)
    ax.set_title("\n".join(x for x in (title, sub) if x), fontsize=10)
    return fig


def posterior_plot(summary: pd.DataFrame, title: str = "", references: dict | None = None):
    """Posterior means and highest-density intervals of the common terms of a bambi fit (sigmas excluded)."""
    s = summary[~summary["term"].str.contains("sigma") & (summary["term"] != "Intercept")].copy()
    lo_col, hi_col = [c for c in s.columns if c.startswith("hdi_")][:2]
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.3 * max(len(s), 1)))
    y = np.arange(len(s))
    ax.errorbar(s["mean"], y, xerr=[s["mean"] - s[lo_col], s[hi_col] - s["mean"]], fmt="o", color="k",
                ecolor="grey", capsize=3)
    ax.set_yticks(y)
    ax.set_yticklabels(s["term"], fontsize=8)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel(f"posterior mean and {interval_label('HDI', hdi_prob(lo_col, hi_col))} "
                  "(log odds ratio vs. reference level)"
                  + (f"\n{reference_note(references, s['term'].str.split('[').str[0])}" if references else ""),
                  fontsize=8)
    ax.set_title(title or "Hierarchical logistic model (bambi)", fontsize=10)
    return fig
