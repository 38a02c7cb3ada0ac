"""Subgroup figures: sunburst of log disparities (multi-factor paper, Fig. 1a) and eCDFs (Fig. 1b)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib import colors, cm

from ..stats.subgroups import deviation_metric, ecdf
from .labels import state_result


def _norm(values, limit=None):
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    lim = limit or (float(np.nanmax(np.abs(v))) if v.size else 1.0) or 1.0
    return colors.TwoSlopeNorm(vmin=-lim, vcenter=0.0, vmax=lim)


#: Wedge labels in points: 9 pt (12 CSS px) or more in the report, where the saved figure (110 dpi) is shown at its
#: own size (tests/helpers.smallest_text_px).
LABEL_PT = 8

def sunburst(sub: pd.DataFrame, inner: str, outer: str, value: str = "log_disparity", title: str = "",
             ax=None, limit: float | None = None, min_label_share: float = 0.03, cmap: str = "RdBu_r"):
    """Nested rings: the inner ring holds the first-level subgroups of ``inner``, the outer ring the second-level
    subgroups ``inner`` x ``outer`` inside their parent's wedge. Wedge angles are proportional to the number of
    responses; colours show ``value`` (log disparity): red = disadvantaged (more deviation than the rest), blue =
    advantaged. ``sub`` is one model's rows of :func:`biaslab.stats.subgroups.subgroups` with levels 1 and 2.
    """
    first = sub[(sub["level"] == 1) & (sub["factors"] == inner)].copy()
    second = sub[(sub["level"] == 2) & (sub["factors"] == f"{inner} x {outer}")].copy()
    if first.empty or second.empty:
        raise ValueError(f"sunburst needs level-1 subgroups of {inner!r} and level-2 subgroups of "
                         f"'{inner} x {outer}'")
    first = first.sort_values(value)
    order = list(first[inner])
    norm = _norm(pd.concat([first[value], second[value]]), limit)
    cmap_ = plt.get_cmap(cmap)
    fig, ax = plt.subplots(figsize=(7.5, 7.5)) if ax is None else (ax.figure, ax)
    total = first["n"].sum()
    in_sizes = first["n"].to_numpy()
    wedges, _ = ax.pie(in_sizes, radius=0.62, colors=cmap_(norm(first[value].to_numpy())),
                       wedgeprops=dict(width=0.32, edgecolor="white", linewidth=1), startangle=90,
                       counterclock=False)
    out_sizes, out_cols, out_lab = [], [], []
    for lv in order:
        part = second[second[inner] == lv].sort_values(outer)
        out_sizes += list(part["n"])
        out_cols += list(part[value])
        out_lab += list(part[outer])
    ow, _ = ax.pie(out_sizes, radius=1.0, colors=cmap_(norm(np.asarray(out_cols, dtype=float))),
                   wedgeprops=dict(width=0.38, edgecolor="white", linewidth=0.6), startangle=90,
                   counterclock=False)
    for w, lab, n in zip(wedges, order, in_sizes):
        if n / total < min_label_share:
            continue
        ang = np.deg2rad((w.theta1 + w.theta2) / 2)
        ax.text(0.46 * np.cos(ang), 0.46 * np.sin(ang), str(lab).replace(" ", "\n", 1), ha="center",
                va="center", fontsize=LABEL_PT + 1)
    for w, lab, n in zip(ow, out_lab, out_sizes):
        if n / total < min_label_share:
            continue
        ang = np.deg2rad((w.theta1 + w.theta2) / 2)
        ax.text(0.81 * np.cos(ang), 0.81 * np.sin(ang), str(lab), ha="center", va="center", fontsize=LABEL_PT,
                rotation=np.rad2deg(ang) - 90 if np.sin(ang) >= 0 else np.rad2deg(ang) + 90)
    sm = cm.ScalarMappable(norm=norm, cmap=cmap_)
    cb = fig.colorbar(sm, ax=ax, shrink=0.7, pad=0.02)
    cb.set_label("log disparity (log odds ratio of deviating vs. all other prompts)\nred: disadvantaged, "
                 "blue: advantaged")
    ax.set_title(title or f"Log disparity: {inner} (inner) and {inner} x {outer} (outer)")
    ax.set_aspect("equal")
    state_result(fig, "; ".join(_largest(ring, value, cols) for ring, cols in ((first, [inner]),
                                                                              (second, [inner, outer]))))
    return fig


def _largest(ring: pd.DataFrame, value: str, cols: list[str]) -> str:
    """"largest log disparity of gender x race: female x black +0.41 (disadvantaged, 30 responses)": the ring's
    subgroup farthest from 0 (the figure's stated result)."""
    what = f"largest log disparity of {' x '.join(cols)}"
    v = pd.to_numeric(ring[value], errors="coerce")
    if not np.isfinite(v).any():
        return f"{what}: none finite"
    r = ring.loc[v.abs().idxmax()]
    x = float(r[value])
    side = "disadvantaged" if x > 0 else "advantaged" if x < 0 else "no disparity"
    return f"{what}: {' x '.join(str(r[c]) for c in cols)} {x:+.3g} ({side}, {int(r['n']):,} responses)"


def ecdf_plot(sub: pd.DataFrame, by: str = "model", rate: str = "deviation_rate", ideal: float = 0.0,
              title: str = "", ax=None, ks: pd.DataFrame | None = None):
    """One eCDF of subgroup deviation rates per model, with the deviation metric (eq. 4) in the legend."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5)) if ax is None else (ax.figure, ax)
    for key, part in sub.groupby(by, sort=False):
        x, y = ecdf(part[rate])
        dm = deviation_metric(part[rate], ideal)
        ax.step(np.r_[0, x, 1], np.r_[0, y, 1], where="post", label=f"{key} (DM = {dm:.3f}, {len(part)} subgroups)")
    ax.axvline(ideal, color="grey", ls=":", lw=1)
    ax.axvline(0.2, color="grey", ls="--", lw=0.8)
    ax.text(0.205, 0.02, "0.2", color="grey", fontsize=7)
    ax.set(xlim=(-0.01, 1.01), ylim=(0, 1.02), xlabel="subgroup deviation rate (share of biased answers)",
           ylabel="fraction of subgroups (eCDF)")
    t = title or "eCDF of subgroup deviation rates"
    if ks is not None and len(ks):
        r = ks.iloc[0]
        t += f"\nKS {r['model_a']} vs {r['model_b']}: D = {r['ks_statistic']:.3f}, p = {r['p_value']:.2g}"
    ax.set_title(t, fontsize=10)
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)   # below the axes, off the data
    fig.tight_layout()
    return fig
