"""Figures of notebook 5 (model comparison): a forest plot per metric with intervals, null value and tie groups."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def forest_plot(rows: pd.DataFrame, groups: pd.DataFrame | None = None, title: str = "", ax=None):
    """One metric: each model's estimate and interval (rows of ``compare.model_metric_table``), models ordered from
    most to least biased, the metric's null value as a dotted line, and each model's tie-group letters."""
    rows = rows.copy()
    orient = int(rows["orientation"].iloc[0])
    rows = rows.sort_values("estimate", ascending=orient < 0).reset_index(drop=True)
    n = len(rows)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.5, 0.55 * n + 1.6))
    else:
        fig = ax.figure
    y = np.arange(n)[::-1]
    lo = (rows["estimate"] - rows["ci_low"]).clip(lower=0).fillna(0)
    hi = (rows["ci_high"] - rows["estimate"]).clip(lower=0).fillna(0)
    ax.errorbar(rows["estimate"], y, xerr=[lo, hi], fmt="o", color="#1f4e79", ecolor="#6b8fb5", capsize=3)
    ax.axvline(rows["null"].iloc[0], color="grey", ls=":", lw=1)
    letters = {} if groups is None else dict(zip(groups["model"], groups["groups"]))
    labels = [f"{m}  [{letters.get(m, '-')}]" for m in rows["model"]]
    no_ci = rows["ci_low"].isna()
    for yy, flag in zip(y, no_ci):
        if flag:
            ax.annotate("no interval", (0, yy), xycoords=("axes fraction", "data"), fontsize=7, color="grey",
                        xytext=(2, 6), textcoords="offset points")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    r0 = rows.iloc[0]
    ax.set_xlabel(f"{r0['metric']} (estimate and 95 % interval)\n{r0['direction']}; dotted line: null value "
                  f"{r0['null']:g}", fontsize=8)
    ax.set_ylabel("model  [tie group]", fontsize=8)
    ax.set_title(title or r0["label"], fontsize=9)
    fig.tight_layout()
    return fig
