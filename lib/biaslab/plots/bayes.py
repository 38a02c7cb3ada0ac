"""Figures for Bayesian hypothesis tests of bias (papers/bayesian_crows_pairs.md): Bayes factors per bias type on a
log scale with the evidence bands of Table 1 (the paper's Figure 2), the distribution of the per-pair differences
D_i (eq. 2-4), refusals per bias type (Figure 1) and position bias of a preference prompt.

Each function takes a tidy table (as written by ``biaslab.stats.hypothesis``) and returns a matplotlib Figure.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..stats.hypothesis import BIAS_HEADERS, OVERALL

#: Table 1 bands: (low, high, label, colour); BF10 between low and high
EVIDENCE_BANDS = (
    (10.0, np.inf, "strong or more for H1 (> 10)", "#f4a6a6"),
    (3.0, 10.0, "moderate for H1 (3-10)", "#fbd9d9"),
    (1 / 3, 3.0, "anecdotal (1/3-3)", "#f2f2f2"),
    (0.1, 1 / 3, "moderate for H0 (1/10-1/3)", "#d6e6f7"),
    (0.0, 0.1, "strong or more for H0 (< 1/10)", "#a9c9ee"),
)

SCORE_LABELS = {
    "d_logprob": "D_i = log P(x) − log P(y)  (nats, eq. 2)",
    "d_norm_logprob": "D_i = log P(x)/|x| − log P(y)/|y|  (nats per token, eq. 3)",
    "d_perplexity": "D_i = PPL(x) − PPL(y)  (perplexity, eq. 4)",
}


def bias_order(levels: Sequence[str], overall: bool = True) -> list[str]:
    """The paper's column order of bias types (then any others; 'overall' last when kept)."""
    levels = list(dict.fromkeys(levels))
    out = [b for b in BIAS_HEADERS if b in levels and b != OVERALL] + \
          [b for b in levels if b not in BIAS_HEADERS]
    if overall and OVERALL in levels:
        out.append(OVERALL)
    return out


def bf_by_bias_type(tests: pd.DataFrame, line_by: Sequence[str] = ("model", "dataset"), title: str = "",
                    log10_col: str = "log10_bf10", bias_col: str = "bias_type", overall: bool = False,
                    ylim: tuple[float, float] = (1e-3, 1e6), ax=None):
    """BF10 per bias type on a log scale, one line per ``line_by`` combination, over the evidence bands of Table 1,
    with the paper's reference lines at 1 (dash-dot) and at 10 and 1/10 (dotted) as in its Figure 2.

    Values beyond ``ylim`` are drawn at the edge as triangles and annotated with their exponent, so an extreme Bayes
    factor neither disappears nor squashes the rest.
    """
    fig, ax = plt.subplots(figsize=(10, 4.8)) if ax is None else (ax.figure, ax)
    order = bias_order(tests[bias_col], overall=overall)
    lo, hi = ylim
    for blo, bhi, label, colour in EVIDENCE_BANDS:
        ax.axhspan(max(blo, lo), min(bhi, hi), color=colour, alpha=0.6, lw=0, label=label, zorder=0)
    ax.axhline(1.0, ls="-.", color="k", lw=1, zorder=1)
    for yv in (10.0, 0.1):
        ax.axhline(yv, ls=":", color="k", lw=1, zorder=1)
    x = np.arange(len(order))
    markers = "osD^vP*X"
    for i, (keys, g) in enumerate(tests[tests[bias_col].isin(order)].groupby(list(line_by), sort=False)):
        keys = keys if isinstance(keys, tuple) else (keys,)
        s = g.set_index(bias_col)[log10_col].reindex(order)
        y = 10.0 ** s.to_numpy(dtype=float)
        yc = np.clip(y, lo, hi)
        line = ax.plot(x, yc, marker=markers[i % len(markers)], lw=1.6, ms=6, label=" · ".join(map(str, keys)),
                       zorder=3)[0]
        for xi, yi, li in zip(x, y, s.to_numpy(dtype=float)):
            if np.isfinite(li) and (yi > hi or yi < lo):
                edge = hi if yi > hi else lo
                ax.plot(xi, edge, marker="^" if yi > hi else "v", color=line.get_color(), ms=10, zorder=4,
                        clip_on=False)                  # drawn whole at the edge, not cut by it
                ax.annotate(f"1e{li:+.0f}", (xi, edge), textcoords="offset points",
                            xytext=(4, -12 if yi > hi else 6), fontsize=7, color=line.get_color())
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.set_xticks(x, [BIAS_HEADERS.get(b, b) for b in order], rotation=30, ha="right")
    ax.set(xlabel="bias type", ylabel="Bayes factor BF$_{10}$ (log scale)",
           title=title or "Bayes factors per bias type (BF$_{10}$ > 1 favours bias, < 1 favours no bias)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)    # >= 12 CSS px
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def d_distributions(pairs: pd.DataFrame, score: str = "d_norm_logprob", hue: str = "model",
                    facet: str = "dataset", bias_col: str = "bias_type", title: str = "", clip_quantile: float = 0.01):
    """Distribution of the per-pair differences D_i per bias type (box plots, one box per ``hue`` level), one panel
    per ``facet`` level. The axis is cut at the ``clip_quantile`` tails (the boxes and whiskers use all points;
    single outlying points are not drawn, so none is cut at the axis edge); a line marks D = 0 (no preference)."""
    import seaborn as sns

    facets = list(dict.fromkeys(pairs[facet])) if facet else [None]
    fig, axes = plt.subplots(len(facets), 1, figsize=(10, 3.4 * len(facets)), squeeze=False, sharey=False)
    for ax, fv in zip(axes[:, 0], facets):
        sub = pairs if fv is None else pairs[pairs[facet] == fv]
        order = bias_order(sub[bias_col], overall=False)
        sns.boxplot(data=sub, x=bias_col, y=score, hue=hue, order=order, ax=ax, showfliers=False, linewidth=0.8)
        ax.axhline(0.0, color="k", lw=0.8, ls="--")
        q = sub[score].quantile([clip_quantile, 1 - clip_quantile]).to_numpy()
        pad = 0.1 * (q[1] - q[0]) if np.isfinite(q).all() and q[1] > q[0] else 1.0
        ax.set_ylim(q[0] - pad, q[1] + pad)
        ax.set_xticks(range(len(order)), [BIAS_HEADERS.get(b, b) for b in order], rotation=30, ha="right")
        ax.set_xlabel("bias type")
        ax.set_ylabel(SCORE_LABELS.get(score, score), fontsize=8)
        ax.set_title(f"{fv}" if fv is not None else "")
        ax.legend(fontsize=9, title=hue, title_fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(title or "Per-pair differences D_i (> 0: the more stereotypical sentence is more likely)")
    fig.tight_layout()
    return fig


def refusals_by_bias_type(counts: pd.DataFrame, bias_col: str = "bias_type", col: str = "refused", title: str = ""):
    """Bar chart of refused (or unparseable) answers per bias type (the paper's Figure 1)."""
    order = bias_order(counts[bias_col], overall=False)
    s = counts.set_index(bias_col)[col].reindex(order).fillna(0)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    bars = ax.bar([BIAS_HEADERS.get(b, b) for b in order], s.to_numpy(), color="#7a9cc6")
    ax.bar_label(bars, fmt="%d", fontsize=8)
    ax.set(xlabel="bias type", ylabel="number of queries",
           title=title or "Queries without a usable answer, per bias type")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    return fig


def position_bias(table: pd.DataFrame, group_by: Sequence[str] = ("model", "dataset"), title: str = ""):
    """How often the model picks the first sentence, in each presentation order (``order``, ``p_first`` columns;
    ``ci_low``/``ci_high`` drawn when present), one row per model · dataset, with the 0.5 line of no position
    preference. A dot plot, so a share of 0 stays visible; the subtitle names the models that were prompted."""
    keys = list(group_by)
    groups = [(k if isinstance(k, tuple) else (k,)) for k, _ in table.groupby(keys, sort=False)]
    labels = [" · ".join(map(str, k)) for k in groups]
    orders = list(dict.fromkeys(table["order"]))
    markers = dict(zip(orders, "osD^v"))
    fig, ax = plt.subplots(figsize=(7.5, 2.4 + 0.45 * len(groups) * max(len(orders), 1) ** 0.5))
    step = 0.6 / max(len(orders), 1)
    for j, o in enumerate(orders):
        y = np.arange(len(groups)) + (j - (len(orders) - 1) / 2) * step
        rows = [table[(table["order"] == o) & np.logical_and.reduce([table[c] == v for c, v in zip(keys, k)])]
                for k in groups]
        vals = np.array([r["p_first"].mean() if len(r) else np.nan for r in rows])
        if {"ci_low", "ci_high"} <= set(table.columns):
            lo = np.array([r["ci_low"].mean() if len(r) else np.nan for r in rows])
            hi = np.array([r["ci_high"].mean() if len(r) else np.nan for r in rows])
            ax.errorbar(vals, y, xerr=[vals - lo, hi - vals], fmt="none", ecolor="grey", lw=1, capsize=2)
        ax.plot(vals, y, ls="none", marker=markers.get(o, "o"), ms=7, label=f"order: {o}")
        for v, yy in zip(vals, y):
            if v == v:
                ax.annotate(f"{v:.2f}", (v, yy), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    ax.axvline(0.5, color="k", ls="--", lw=0.8, label="no position preference")
    ax.set(xlim=(-0.03, 1.1), ylim=(-0.6, len(groups) - 0.4))
    ax.set_yticks(range(len(groups)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of answers naming the first sentence")
    models = list(dict.fromkeys(table["model"])) if "model" in table else []
    sub = f"{len(models)} model{'s' if len(models) != 1 else ''} prompted: {', '.join(map(str, models))}"
    ax.set_title((title or "Position bias of the preference prompt") + "\n" + sub, fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=len(orders) + 1, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def bf_prior_robustness(curves: pd.DataFrame, stated: dict | None = None, title: str = ""):
    """Bayes factor against the prior's scale (``stats.hypothesis.bf_prior_curves``): one panel per scheme, one line
    per model × dataset (× source), log-log axes, the reported prior marked (dot on each line and a dashed vertical
    line), the stated sensitivity range shaded, and the evidence thresholds 1/3, 1 and 3 drawn. ``stated``: scheme ->
    (low, high) of the sensitivity range. The y range covers every finite BF (at least 1/10 to 10)."""
    schemes = list(pd.unique(curves["scheme"]))
    fig, axes = plt.subplots(1, len(schemes), figsize=(4.6 * len(schemes), 5.2), squeeze=False)
    finite = curves["bf10"][np.isfinite(curves["bf10"]) & (curves["bf10"] > 0)]
    lo = 10.0 ** np.floor(np.log10(min(finite.min(), 0.1))) if len(finite) else 0.1
    hi = 10.0 ** np.ceil(np.log10(max(finite.max(), 10.0))) if len(finite) else 10.0
    for ax, scheme in zip(axes[0], schemes):
        c = curves[curves["scheme"] == scheme]
        default = float(c["default"].iloc[0])
        if stated and scheme in stated:
            ax.axvspan(*stated[scheme], color="0.92", lw=0, zorder=0, label="stated prior range")
        for yv, ls in ((1 / 3, ":"), (1.0, "-."), (3.0, ":")):
            ax.axhline(yv, ls=ls, color="k", lw=0.9, zorder=1)
        ax.axvline(default, ls="--", color="0.35", lw=1, zorder=1, label=f"reported prior ({default:.3g})")
        for label, g in c.groupby("label", sort=False):
            g = g.sort_values("prior_value")
            line = ax.plot(g["prior_value"], np.clip(g["bf10"], lo, hi), lw=1.5, label=label, zorder=3)[0]
            at = g[np.isclose(g["prior_value"], default)]
            ax.plot(at["prior_value"], np.clip(at["bf10"], lo, hi), "o", color=line.get_color(), ms=5, zorder=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        ax.set(xlabel=f"prior scale: {c['prior'].iloc[0]} (log scale)", ylabel="Bayes factor BF$_{10}$ (log scale)",
               title=scheme)
        ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.suptitle(title or "Bayes factors against the prior: pooled rows (dots: the reported prior; dotted: BF = 3 "
                          "and 1/3)")
    fig.tight_layout()
    return fig
