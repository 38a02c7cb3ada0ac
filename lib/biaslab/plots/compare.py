"""Figures of notebook 5 (model comparison): a forest plot per metric with intervals, null value and tie groups —
one panel per comparison group (models on the same prompts with the same answer mode), so that only like is ranked
with like."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .labels import state_result


def result_sentence(rows: pd.DataFrame) -> str:
    """Each model's estimate [interval] and its side of the null, in plain words ("smollm2's stereotype share is
    0.6 [0.55, 0.65], above 0.5")."""
    def side(r) -> str:
        if pd.isna(r["ci_low"]) or pd.isna(r["ci_high"]):
            return "no interval"
        return ("above" if r["ci_low"] > r["null"] else "below" if r["ci_high"] < r["null"] else "includes") + \
            f" {r['null']:.3g}"
    return "; ".join(f"{r['model']}'s {r['metric']} is {r['estimate']:.3g}"
                     + (f" [{r['ci_low']:.3g}, {r['ci_high']:.3g}]" if pd.notna(r["ci_low"]) else "")
                     + f", {side(r)}" for r in rows.to_dict("records"))


def _panel(ax, rows: pd.DataFrame, labels: dict, orient: int, title: str) -> None:
    rows = rows.sort_values("estimate", ascending=orient < 0).reset_index(drop=True)
    n = len(rows)
    y = np.arange(n)[::-1]
    lo = (rows["estimate"] - rows["ci_low"]).clip(lower=0).fillna(0)
    hi = (rows["ci_high"] - rows["estimate"]).clip(lower=0).fillna(0)
    ax.errorbar(rows["estimate"], y, xerr=[lo, hi], fmt="o", color="#1f4e79", ecolor="#6b8fb5", capsize=3)
    ax.axvline(rows["null"].iloc[0], color="grey", ls=":", lw=1)
    for yy, flag in zip(y, rows["ci_low"].isna()):
        if flag:
            ax.annotate("no interval", (0, yy), xycoords=("axes fraction", "data"), fontsize=8, color="grey",
                        xytext=(2, 6), textcoords="offset points")
    ax.set_yticks(y)
    ax.set_yticklabels([f"{m}  [{labels.get(m, '-')}]" for m in rows["model"]], fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    if title:
        ax.set_title(title, fontsize=8, loc="left")


def forest_plot(rows: pd.DataFrame, groups: pd.DataFrame | None = None, title: str = ""):
    """One metric: each model's estimate and interval (rows of the model × metric table), models ordered from most
    to least biased, the metric's null value as a dotted line, and each model's tie-group letters ("not ranked" for
    a model the tie-group table does not rank, "not decided" on a metric the plan decides no comparison of). With a
    ``comparison_group`` column holding several groups, one panel per group, sharing the x axis."""
    rows = rows.copy()
    orient = int(rows["orientation"].iloc[0])
    labels = {}
    if groups is not None and len(groups):
        ranked = groups["ranked"].astype(bool) if "ranked" in groups else pd.Series(True, index=groups.index)
        undecided = groups.get("note", pd.Series("", index=groups.index)).astype(str).str.contains(
            "plan decides no comparison")
        labels = {m: (g if r else "not decided" if u else "not ranked")
                  for m, g, r, u in zip(groups["model"], groups["groups"], ranked, undecided)}
    parts = (list(rows.groupby("comparison_group", sort=False)) if "comparison_group" in rows else [("", rows)])
    heights = [len(p) + 0.9 for _, p in parts]
    fig, axes = plt.subplots(len(parts), 1, figsize=(6.5, 0.55 * sum(heights) + 1.2), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for a, (grp, part) in zip(axes[:, 0], parts):
        _panel(a, part, labels, orient, grp if len(parts) > 1 else "")
        a.set_ylabel("model  [tie group]", fontsize=8)
    r0 = rows.iloc[0]
    axes[-1, 0].set_xlabel(f"{r0['metric']} (estimate and 95 % interval)\n{r0['direction']}; dotted line: null value "
                           f"{r0['null']:g}" + ("\none panel per comparison group (models ranked within it only)"
                                                if len(parts) > 1 else ""), fontsize=8)
    fig.suptitle(title or r0["label"], fontsize=9)
    fig.tight_layout()
    state_result(fig, result_sentence(rows))
    return fig
