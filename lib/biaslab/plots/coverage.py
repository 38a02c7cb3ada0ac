"""Coverage figures (multi-factor paper, §3.2): pairwise count heatmaps and per-factor Gini indices."""

from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib import colors


def coverage_heatmap(counts: pd.DataFrame, title: str = "", annotate: bool | None = None, max_labels: int = 60):
    """Heatmap of prompt counts for every pair of levels (``biaslab.stats.coverage.pairwise_counts``).
    Empty combinations (count 0) are drawn in black; colours use a log scale."""
    c = counts.to_numpy(dtype=float)
    h, w = c.shape
    fig, ax = plt.subplots(figsize=(min(max(6.0, 2 + 0.28 * w), 16), min(max(3.5, 1.5 + 0.22 * h), 20)))
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("black")
    shown = np.ma.masked_where(c <= 0, c)
    vmax = max(c.max(), 2)
    im = ax.imshow(shown, aspect="auto", cmap=cmap, norm=colors.LogNorm(vmin=1, vmax=vmax), interpolation="none")
    if annotate is None:
        annotate = h * w <= 120
    if annotate:
        for i in range(h):
            for j in range(w):
                ax.text(j, i, f"{int(c[i, j])}", ha="center", va="center", fontsize=6,
                        color="white" if c[i, j] <= 0 or c[i, j] < vmax ** 0.5 else "black")
    ax.set_xticks(range(w) if w <= max_labels else [])
    ax.set_xticklabels([str(x) for x in counts.columns] if w <= max_labels else [], rotation=90, fontsize=6)
    ax.set_yticks(range(h) if h <= max_labels else [])
    ax.set_yticklabels([str(x) for x in counts.index] if h <= max_labels else [], fontsize=6)
    ax.set(xlabel=f"{counts.columns.name} ({w} levels)", ylabel=f"{counts.index.name} ({h} levels)")
    covered = (c > 0).mean()
    ax.set_title((title or f"Prompts per combination: {counts.index.name} x {counts.columns.name}") +
                 f"\ncoverage {covered:.1%} of {h * w} combinations (black = none)", fontsize=10)
    fig.colorbar(im, ax=ax, label="number of prompts (log scale)", shrink=0.8)
    return fig


def gini_bars(table: pd.DataFrame, title: str = "", paper: dict | None = None):
    """Per-factor Gini index (eq. 2), with the paper's Table 1 values beside ours where given."""
    t = table.copy()
    fig, ax = plt.subplots(figsize=(6.5, 0.8 + 0.35 * len(t)))
    y = np.arange(len(t))
    ax.barh(y - 0.18, t["gini"], height=0.36, label="ours", color="#4c72b0")
    if paper:
        pv = [paper.get(f, np.nan) for f in t["factor"]]
        ax.barh(y + 0.18, pv, height=0.36, label="paper (Table 1)", color="#dd8452")
        ax.legend(fontsize=8)
    for yi, g in zip(y, t["gini"]):         # the value beside its bar: a balanced factor's bar has no width
        ax.text((g if np.isfinite(g) else 0) + 0.01, yi - 0.18, f"{g:.3f}" if np.isfinite(g) else "n/a",
                va="center", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(t["factor"])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("Gini index of prompt counts over the factor's levels (0 = balanced)")
    ax.set_title(title or "Per-factor Gini index", fontsize=10)
    return fig
