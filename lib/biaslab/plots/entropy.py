"""Figures for notebook 4 (the agentic benchmark's entropy metric). Each function takes result tables from
:mod:`biaslab.stats.entropy` and returns a matplotlib Figure; the notebook saves it with ``out.figure``."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .labels import interval_label, legend_below


def _models(table: pd.DataFrame) -> tuple[list, dict]:
    """The table's models in their order, and a tab10 colour for each."""
    models = list(dict.fromkeys(table["model"]))
    cmap = plt.get_cmap("tab10")
    return models, {m: cmap(i) for i, m in enumerate(models)}


def entropy_distributions(per_prompt: pd.DataFrame, paper_means: dict[str, float] | None = None,
                          bins: int = 50):
    """The paper's Figs. 3-6 as one comparative figure: per model a histogram of the per-prompt normalized entropy
    (shared axes, mean and median marked), plus a panel comparing the mean entropies with those the paper reports
    for its four models."""
    models, col = _models(per_prompt)
    n = len(models) + (1 if paper_means else 0)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
    axes = axes[0]
    edges = np.linspace(0, 1, bins + 1)
    ymax = 0
    for ax, m in zip(axes, models):
        x = per_prompt.loc[per_prompt.model == m, "entropy"].dropna()
        h, _, _ = ax.hist(x, bins=edges, color=col[m], alpha=0.8, edgecolor="white")
        ymax = max(ymax, h.max())
        ax.axvline(x.mean(), color="black", lw=1.5, label=f"mean {x.mean():.3f}")
        ax.axvline(x.median(), color="black", lw=1.2, ls="--", label=f"median {x.median():.3f}")
        ax.set_title(f"{m}\n({len(x):,} prompts)", fontsize=10)
        ax.set_xlabel("normalized entropy H / log k (1 = uniform)")
        ax.legend(fontsize=8, loc="upper left")
    for ax in axes[: len(models)]:
        ax.set(ylim=(0, ymax * 1.15), xlim=(0, 1))
    axes[0].set_ylabel("number of prompts")
    if paper_means:
        ax = axes[-1]
        means = per_prompt.groupby("model", sort=False)["entropy"].agg(["mean", "sem"])
        names = list(paper_means) + models
        vals = list(paper_means.values()) + means["mean"].tolist()
        errs = [0] * len(paper_means) + (1.96 * means["sem"]).tolist()
        colors = ["0.6"] * len(paper_means) + [col[m] for m in models]
        y = np.arange(len(names))
        ax.barh(y, vals, xerr=errs, color=colors)
        ax.set_yticks(y, [f"{nm} (paper)" if i < len(paper_means) else nm for i, nm in enumerate(names)],
                      fontsize=8)
        ax.axvline(1, color="black", lw=0.8, ls=":")
        ax.set_xlim(0, 1.05)
        ax.set_xlabel(f"mean normalized entropy (bars: {interval_label()})")
        ax.set_title("Mean entropy: paper vs here", fontsize=10)
    fig.suptitle("Distribution of the normalized Shannon entropy of the answer distribution, per model")
    fig.tight_layout()
    return fig


def entropy_breakdown(breakdown: pd.DataFrame, factors: list[str]):
    """Mean normalized entropy (95 % CI) per level of each factor, one panel per factor, one colour per model."""
    models, col = _models(breakdown)
    widths = [max(2.5, 0.32 * breakdown[breakdown.factor == f]["level"].nunique() + 1.5) for f in factors]
    fig, axes = plt.subplots(1, len(factors), figsize=(sum(widths) + 1, 4.4), sharey=True,
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    for ax, f in zip(axes[0], factors):
        b = breakdown[breakdown.factor == f]
        levels = list(dict.fromkeys(b["level"]))
        x = np.arange(len(levels))
        off = np.linspace(-0.15, 0.15, len(models)) if len(models) > 1 else [0]
        for dx, m in zip(off, models):
            bm = b[b.model == m].set_index("level").reindex(levels)
            err = np.vstack([bm["mean_entropy"] - bm["ci95_low"], bm["ci95_high"] - bm["mean_entropy"]])
            ax.errorbar(x + dx, bm["mean_entropy"], yerr=np.nan_to_num(err), fmt="o", color=col[m], ms=4,
                        capsize=2, label=m)
        ax.set_xticks(x, [str(l).replace("_", " ") for l in levels], rotation=60, ha="right", fontsize=8)
        ax.set_title(f.replace("_", " "), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("mean normalized entropy (95 % CI)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Normalized entropy by class type, question type, polarity and domain")
    fig.tight_layout()
    return fig


def group_preference(gp: pd.DataFrame):
    """Mean probability per group for positive vs negative questions; rows models, columns class types; the dashed
    line is the uniform 1/k."""
    models = list(dict.fromkeys(gp["model"]))
    classes = list(dict.fromkeys(gp["class_type"]))
    widths = [gp[gp.class_type == c]["group"].nunique() + 0.6 for c in classes]
    fig, axes = plt.subplots(len(models), len(classes), figsize=(2.6 * len(classes) + 2, 3.1 * len(models) + 0.8),
                             squeeze=False, gridspec_kw={"width_ratios": widths}, sharey=True)
    for i, m in enumerate(models):
        for j, c in enumerate(classes):
            ax = axes[i][j]
            g = gp[(gp.model == m) & (gp.class_type == c)]
            x = np.arange(len(g))
            for tag, col, dx, colour, label in (("pos", "mean_p_positive", -0.2, "tab:green", "positive question"),
                                                ("neg", "mean_p_negative", 0.2, "tab:red", "negative question")):
                err = None
                if f"{tag}_ci_low" in g:    # 95 % intervals (clustered on the scenario) where the table has them
                    err = np.vstack([(g[col] - g[f"{tag}_ci_low"]).clip(lower=0),
                                     (g[f"{tag}_ci_high"] - g[col]).clip(lower=0)])
                ax.bar(x + dx, g[col], 0.4, color=colour, label=label, yerr=err, capsize=2, error_kw={"lw": 0.8})
            ax.axhline(g["uniform"].iloc[0], color="black", ls="--", lw=0.8)
            for xi, q in zip(x, g["bh_q"]):
                if pd.notna(q) and q < 0.05:
                    ax.text(xi, 0.02, "*", ha="center", fontsize=12)
            ax.set_xticks(x, [s.replace(" or ", "/\n") for s in g["group"]], rotation=60, ha="right", fontsize=7)
            if i == 0:
                ax.set_title(c.replace("_", " "), fontsize=10)
            if j == 0:
                ax.set_ylabel(f"{m}\nmean probability")
    handles, labels = axes[0][0].get_legend_handles_labels()
    n_sig = int((gp["bh_q"] < 0.05).sum())
    marks = (f"*: paired Wilcoxon, BH q < 0.05 ({n_sig} marked)" if n_sig else
             "no difference reaches BH q < 0.05, none marked")
    fig.suptitle("Which group receives the probability: positive vs negative questions\n"
                 f"(dashed: uniform 1/k; bars: 95 % interval clustered on scenario; {marks})")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9, frameon=False)
    return fig


def position_bias(pb: pd.DataFrame):
    """Mean probability by answer position, whatever group is listed there; one panel per k."""
    models, col = _models(pb)
    ks = sorted(pb["k"].unique())
    fig, axes = plt.subplots(1, len(ks), figsize=(4.5 * len(ks), 3.6), squeeze=False)
    for ax, k in zip(axes[0], ks):
        for m in models:
            g = pb[(pb.model == m) & (pb.k == k)]
            err = np.vstack([g["mean_p"] - g["ci95_low"], g["ci95_high"] - g["mean_p"]])
            ax.errorbar(g["position"], g["mean_p"], yerr=np.nan_to_num(err), marker="o", capsize=3, color=col[m],
                        label=m)
        ax.axhline(1 / k, color="black", ls="--", lw=0.8, label="uniform 1/k")
        ax.set_xticks(range(1, k + 1))
        ax.set_xlabel("answer position (label the model would emit)")
        ax.set_title(f"{k} choices", fontsize=10)
        part = pb[pb.k == k]                          # every marker and interval end drawn whole
        lo = min(0.0, np.nanmin(part["ci95_low"].to_numpy(float), initial=0.0))
        hi = max(1.0, np.nanmax(part["ci95_high"].to_numpy(float), initial=1.0))
        ax.set_ylim(lo - 0.04 * (hi - lo), hi + 0.04 * (hi - lo))
    axes[0][0].set_ylabel(f"mean probability ({interval_label()})")
    return legend_below(fig, axes[0][0], "Position bias: probability by answer position regardless of content",
                        ncol=len(models) + 1)


def cyclic_comparison(cyc: pd.DataFrame):
    """Per prompt: entropy in the stored order (x) vs after averaging over all cyclic rotations (y)."""
    models, col = _models(cyc)
    fig, ax = plt.subplots(figsize=(5, 4.6))
    for m in models:
        g = cyc[cyc.model == m]
        ax.scatter(g["entropy_stored"], g["entropy_cyclic_avg"], s=18, alpha=0.75, color=col[m], label=m)
    # zoom on the data (entropies of small models sit near 1): the axes start just below the smallest value
    lo = float(np.nanmin(cyc[["entropy_stored", "entropy_cyclic_avg"]].to_numpy())) if len(cyc) else 0.0
    pad = max((1 - lo) * 0.08, 0.002)
    lim = (max(lo - pad, 0), 1 + pad)
    ax.plot(lim, lim, color="black", lw=0.8, ls=":", label="no change (y = x)")
    ax.axhline(1, color="grey", lw=0.6, ls="--")
    ax.axvline(1, color="grey", lw=0.6, ls="--")
    ax.set(xlim=lim, ylim=lim, xlabel="entropy, stored answer order",
           ylabel="entropy of the group distribution\naveraged over all k cyclic orders",
           title=f"Removing position effects ({cyc['prompt_id'].nunique()} prompts)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
