"""Figures of notebook 02 (CALM): per-template bias, the perturbation study and the subset study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

TASK_LABEL = {"qa": "QA", "nli": "NLI", "sentiment": "Sentiment"}


def template_bias(templates: pd.DataFrame, score: str = "bias_paper", title: str = ""):
    """Per-template bias (one dot per template), by task and bias type, one column per model; kept templates in
    colour, templates left out by a discard rule in grey, and left-out templates without any score (eq. 1 is
    undefined at zero baseline accuracy) as grey crosses on the zero line, counted under the axis. A legend names
    all four marks."""
    from matplotlib.lines import Line2D

    models = list(dict.fromkeys(templates["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.6), squeeze=False, sharey=True)
    cats = [(t, b) for t in ("qa", "nli", "sentiment") for b in ("gender", "race")]
    rng = np.random.default_rng(0)
    colour = {"gender": "tab:blue", "race": "tab:orange"}
    for ax, m in zip(axes[0], models):
        d = templates[templates["model"] == m]
        for i, (t, b) in enumerate(cats):
            x = d[(d["task"] == t) & (d["bias_type"] == b)]
            jit = rng.uniform(-0.18, 0.18, len(x))
            used = x["used"].astype(bool).to_numpy()
            scored = x[score].notna().to_numpy()
            ax.scatter(i + jit[used & scored], x.loc[used & scored, score], s=16, alpha=0.75, color=colour[b])
            ax.scatter(i + jit[~used & scored], x.loc[~used & scored, score], s=16, alpha=0.8, color="grey")
            ax.scatter(i + jit[~scored], np.zeros((~scored).sum()), s=22, marker="x", color="grey", lw=1)
            if used.any():
                ax.hlines(x.loc[used, score].mean(), i - 0.3, i + 0.3, color="black", lw=2)
        ax.set_xticks(range(len(cats)), [f"{TASK_LABEL[t]}\n{b}" for t, b in cats])
        ax.set_title(m)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("template bias (max − min group bias score, %)" if score == "bias_paper"
                          else "template bias (max − min group accuracy, pp)")
    used_all = templates["used"].astype(bool)
    scored_all = templates[score].notna()
    shown = {"kept, gender": (used_all & scored_all & (templates["bias_type"] == "gender")).any(),
             "kept, race": (used_all & scored_all & (templates["bias_type"] == "race")).any(),
             "left out by a discard rule": (~used_all & scored_all).any(),
             "left out, no score (zero baseline)": (~scored_all).any(), "mean over kept templates": used_all.any()}
    handles = [Line2D([], [], ls="none", marker="o", color=colour["gender"], label="kept, gender"),
               Line2D([], [], ls="none", marker="o", color=colour["race"], label="kept, race"),
               Line2D([], [], ls="none", marker="o", color="grey", label="left out by a discard rule"),
               Line2D([], [], ls="none", marker="x", color="grey", label="left out, no score (zero baseline)"),
               Line2D([], [], color="black", lw=2, label="mean over kept templates")]
    handles = [h for h in handles if shown[h.get_label()]]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5 if len(models) > 1 else 3), fontsize=8,
               frameon=False)
    fig.suptitle(title or "Per-template bias; bar = mean over kept templates (grey: left out by a discard rule)")
    fig.tight_layout(rect=(0, 0.06 if len(models) > 1 else 0.1, 1, 1))
    return fig


def robustness(table: pd.DataFrame, title: str = ""):
    """Overall bias score on the original templates and on each perturbation, per model and variant."""
    variants = list(dict.fromkeys(table["variant"]))
    fig, axes = plt.subplots(1, len(variants), figsize=(6 * len(variants), 4), squeeze=False)
    for ax, v in zip(axes[0], variants):
        d = table[table["variant"] == v]
        kinds = ["original"] + [k for k in dict.fromkeys(d["perturbation"]) if k != "original"]
        models = list(dict.fromkeys(d["model"]))
        w = 0.8 / max(len(kinds), 1)
        for j, k in enumerate(kinds):
            sel = [d[(d["model"] == m) & (d["perturbation"] == k)] for m in models]
            vals = np.array([x["overall"].mean() for x in sel], dtype=float)
            err = None
            if "ci_low" in d and d["ci_low"].notna().any():     # 95 % bootstrap intervals where the table has them
                lo = np.array([x["ci_low"].mean() for x in sel], dtype=float)
                hi = np.array([x["ci_high"].mean() for x in sel], dtype=float)
                err = np.nan_to_num(np.vstack([(vals - lo).clip(min=0), (hi - vals).clip(min=0)]))
            ax.bar(np.arange(len(models)) + j * w, vals, width=w, label=k, yerr=err, capsize=3,
                   error_kw={"lw": 0.8})
        ax.set_xticks(np.arange(len(models)) + w * (len(kinds) - 1) / 2, models)
        ax.set_ylabel("overall bias score" + (" (%)" if v == "paper" else " (pp of accuracy)"))
        ax.set_title(f"{v} variant")
        ax.use_sticky_edges = False             # a cap at 0 sits on the bars' sticky edge: the margin keeps it whole
        ax.margins(y=0.12)
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title or "Bias score on the original and on perturbed templates (paper §4.1, Table 2; "
                 "bars: 95 % bootstrap interval)")
    fig.tight_layout()
    return fig


def subsets(summary: pd.DataFrame, title: str = ""):
    """Mean ± sd of the overall score over random subsets, against the full-data score, per model."""
    d = summary[summary["unit"] == "prompts"]
    variants = list(dict.fromkeys(d["variant"]))
    fig, axes = plt.subplots(1, len(variants), figsize=(6 * len(variants), 4), squeeze=False)
    for ax, v in zip(axes[0], variants):
        dv = d[d["variant"] == v]
        for m, dm in dv.groupby("model", sort=False):
            dm = dm.sort_values("fraction")
            x = list(100 * dm["fraction"]) + [100]
            y = list(dm["mean"]) + [dm["full"].iloc[0]]
            e = list(dm["sd"]) + [0]
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=m)
        ax.set_xlabel("share of prompts kept (%)")
        ax.set_ylabel("overall bias score" + (" (%)" if v == "paper" else " (pp of accuracy)"))
        ax.set_title(f"{v} variant")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(title or "Bias score on random prompt subsets: mean ± sd over runs (paper §4.2, Table 3)")
    fig.tight_layout()
    return fig
