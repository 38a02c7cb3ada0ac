"""The specification curve (Simonsohn, Simmons & Nelson 2020, "Specification curve analysis", Nat. Hum. Behav.):
one estimate and interval per universe, sorted, the reference universe marked, with an indicator panel below saying
which choice each universe changed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from .labels import state_result

REF, OTHER, DEGENERATE = "black", "#2f5f98", "#9a9a9a"


def _legend(null: float | None, degenerate: bool) -> list:
    """Proxy handles for what the markers mean (one legend, right of the last panel: outside the data)."""
    h = [Line2D([], [], marker="o", ls="-", color=REF, label="paper's protocol (95 % CI)"),
         Line2D([], [], marker="o", ls="-", color=OTHER, label="other universe (95 % CI)"),
         Line2D([], [], marker="o", ls="", color=OTHER, mfc="white", label="hollow: CI includes the null")]
    if degenerate:
        h.append(Line2D([], [], marker="x", ls="", color=DEGENERATE, label="degenerate responder (not judged)"))
    if null is not None:
        h.append(Line2D([], [], ls="--", lw=0.9, color="#b03a2e", label=f"null ({null:g})"))
    return h


def _curve(top, part: pd.DataFrame, null: float | None, is_ref: np.ndarray, flagged: np.ndarray) -> None:
    """The sorted estimates with their 95 % intervals on one model's top panel."""
    x = np.arange(len(part))
    lo, hi = part["ci_low"].to_numpy(float), part["ci_high"].to_numpy(float)
    y = part["estimate"].to_numpy(float)
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    colour = np.where(is_ref, REF, np.where(flagged, DEGENERATE, OTHER))
    top.vlines(x[has_ci], lo[has_ci], hi[has_ci], color=colour[has_ci], lw=1.4)
    covers = has_ci & (lo <= null) & (hi >= null) if null is not None else np.zeros(len(part), bool)
    for k in range(len(part)):
        if flagged[k] and not is_ref[k]:
            top.plot(x[k], y[k], "x", ms=6, color=DEGENERATE, zorder=3)
            continue
        top.plot(x[k], y[k], "o", ms=6 if is_ref[k] else 4.5, color=colour[k],
                 mfc="white" if covers[k] else colour[k], zorder=3)
    if null is not None:
        top.axhline(null, ls="--", lw=0.9, color="#b03a2e")
    top.set_xticks([])
    top.set_xlim(-0.6, len(part) - 0.4)


def _indicators(bottom, part: pd.DataFrame, changes: list[str], reference: str, changed_col: str) -> None:
    """Which factor=level each universe changed (a square), the paper's universe as a vertical line."""
    for k, u in enumerate(part[changed_col]):
        if u == reference:
            bottom.axvline(k, color=REF, lw=0.8)
            continue
        for c in str(u).split("+"):
            if c in changes:
                bottom.plot(k, changes.index(c), "s", ms=4, color=OTHER)
    bottom.set(ylim=(-0.6, len(changes) - 0.4), xlim=(-0.6, len(part) - 0.4))
    bottom.set_xticks([])
    bottom.set_xlabel("universes, sorted by estimate", fontsize=8)


def specification_curve(est: pd.DataFrame, title: str, null: float | None = None, reference: str = "paper",
                        models_col: str = "model", changed_col: str = "universe", unit: str = "estimate",
                        flag_col: str = "responder_status"):
    """``est``: one row per model x universe with estimate, ci_low, ci_high and the universe id (``paper`` or
    ``factor=level+...``). One column of panels per model; the top panel the sorted estimates with 95 % intervals
    (y axis: ``unit``; the reference universe black, others blue; hollow: the interval includes the null; a grey
    cross: a universe whose ``flag_col`` says it is a degenerate responder for the metric, not judged), the bottom
    panel the changed factor=level of each universe, labelled on the first column (the rows are shared)."""
    models = list(dict.fromkeys(est[models_col]))
    d = est[np.isfinite(est["estimate"].astype(float))]
    changes = sorted({c for u in d[changed_col] for c in str(u).split("+") if u != reference})
    fig, axes = plt.subplots(2, len(models), figsize=(4.6 * len(models) + 1.4, 3.2 + 0.22 * len(changes)),
                             squeeze=False, gridspec_kw={"height_ratios": [3, max(1.0, 0.22 * len(changes))]},
                             sharey="row")
    flags = (d[flag_col].astype(str).str.startswith("degenerate") if flag_col in d
             else pd.Series(False, index=d.index))
    axes[1, 0].set_yticks(range(len(changes)))
    axes[1, 0].set_yticklabels(changes, fontsize=7)
    said = []
    for j, m in enumerate(models):
        part = d[d[models_col] == m].sort_values("estimate")
        ref = part.loc[part[changed_col] == reference, "estimate"]
        said.append(f"{m}: {unit} from {part['estimate'].min():.3g} to {part['estimate'].max():.3g} across "
                    f"{len(part)} universes" + (f", the paper's protocol {ref.iloc[0]:.3g}" if len(ref) else ""))
        is_ref = (part[changed_col] == reference).to_numpy()
        top, bottom = axes[0, j], axes[1, j]
        _curve(top, part.reset_index(drop=True), null, is_ref, flags.loc[part.index].to_numpy())
        _indicators(bottom, part.reset_index(drop=True), changes, reference, changed_col)
        top.set_title(str(m)[:32], fontsize=10)
        top.tick_params(labelleft=j == 0)
        bottom.tick_params(labelleft=j == 0)           # the labels are shared: hide, never clear, on later columns
    axes[0, 0].set_ylabel(f"{unit}\n(point estimate, 95 % CI)")
    axes[1, 0].set_ylabel("choice changed\n(factor=level)", fontsize=8)
    axes[0, -1].legend(handles=_legend(null, bool(flags.any())), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       fontsize=9, frameon=False, borderaxespad=0)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    state_result(fig, "; ".join(said))
    return fig
