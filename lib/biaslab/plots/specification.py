"""The specification curve (Simonsohn, Simmons & Nelson 2020, "Specification curve analysis", Nat. Hum. Behav.):
one estimate and interval per universe, sorted, the reference universe marked, with an indicator panel below saying
which choice each universe changed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd



def specification_curve(est: pd.DataFrame, title: str, null: float | None = None, reference: str = "paper",
                        models_col: str = "model", changed_col: str = "universe"):
    """``est``: one row per model x universe with estimate, ci_low, ci_high and the universe id (``paper`` or
    ``factor=level+...``). One column of panels per model; the top panel the sorted estimates with 95 % intervals
    (reference universe black, others grey-blue; a hollow marker: the interval includes the null), the bottom panel
    the changed factor=level of each universe."""
    models = list(dict.fromkeys(est[models_col]))
    d = est[np.isfinite(est["estimate"].astype(float))]
    changes = sorted({c for u in d[changed_col] for c in str(u).split("+") if u != reference})
    fig, axes = plt.subplots(2, len(models), figsize=(4.6 * len(models) + 1.4, 3.2 + 0.22 * len(changes)),
                             squeeze=False, gridspec_kw={"height_ratios": [3, max(1.0, 0.22 * len(changes))]},
                             sharey="row")
    for j, m in enumerate(models):
        part = d[d[models_col] == m].sort_values("estimate").reset_index(drop=True)
        top, bottom = axes[0, j], axes[1, j]
        x = np.arange(len(part))
        is_ref = (part[changed_col] == reference).to_numpy()
        lo, hi = part["ci_low"].to_numpy(float), part["ci_high"].to_numpy(float)
        y = part["estimate"].to_numpy(float)
        has_ci = np.isfinite(lo) & np.isfinite(hi)
        top.vlines(x[has_ci], lo[has_ci], hi[has_ci], color=np.where(is_ref[has_ci], "black", "#5b7fa8"), lw=1.4)
        covers = has_ci & (lo <= (null if null is not None else -np.inf)) & (hi >= (null if null is not None else np.inf))
        for k in range(len(part)):
            col = "black" if is_ref[k] else "#2f5f98"
            top.plot(x[k], y[k], "o", ms=6 if is_ref[k] else 4.5, color=col,
                     mfc="white" if covers[k] else col, zorder=3)
        if null is not None:
            top.axhline(null, ls="--", lw=0.9, color="#b03a2e", label=f"null ({null:g})")
        top.set_title(str(m)[:32], fontsize=10)
        top.set_xticks([])
        top.set_xlim(-0.6, len(part) - 0.4)
        if j == 0:
            top.set_ylabel("estimate (95 % CI)")
            top.legend(loc="best", fontsize=7, frameon=False)
        for k, u in enumerate(part[changed_col]):
            for c in str(u).split("+"):
                if u != reference and c in changes:
                    bottom.plot(k, changes.index(c), "s", ms=4, color="#2f5f98")
            if u == reference:
                bottom.axvline(k, color="black", lw=0.8)
        bottom.set_yticks(range(len(changes)))
        bottom.set_yticklabels(changes if j == 0 else [], fontsize=7)
        bottom.set_ylim(-0.6, len(changes) - 0.4)
        bottom.set_xlim(-0.6, len(part) - 0.4)
        bottom.set_xlabel("universes sorted by estimate; black: the paper's protocol; hollow: CI includes the null",
                          fontsize=8)
        bottom.set_xticks([])
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig
