"""Notebook 7's figures and the sentences it states about a run, each computed from the run's tables."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...report.wording import interval_level, level_pct
from ...plots.labels import interval_label, legend_below

LANG_NAMES = {"en": "English", "es": "Spanish", "nl": "Dutch", "tr": "Turkish"}
LABELS = {"accuracy_ambig": "accuracy, ambiguous", "accuracy_disambig": "accuracy, disambiguated",
          "bias_score_ambig": "bias score, ambiguous", "bias_score_disambig": "bias score, disambiguated",
          "accuracy_gap": "accuracy gap (consistent - inconsistent)"}


def by_language(metrics: pd.DataFrame, names: list[str], title: str):
    """One panel per metric: each model's value per language on the bias (filled) and control (open) sets, pooled
    over categories, with its 95 % template-clustered interval."""
    d = metrics[(metrics["category"] == "all") & metrics["metric"].isin(names)]
    models = sorted(d["model"].unique())
    langs = [lang for lang in LANG_NAMES if lang in set(d["language"])]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        for j, m in enumerate(models):
            for k, (s, face) in enumerate([("bias", None), ("control", "none")]):
                r = d[(d["metric"] == name) & (d["model"] == m) & (d["set"] == s)].set_index("language").reindex(langs)
                x = np.arange(len(langs)) + (j - (len(models) - 1) / 2) * 0.25 + (k - 0.5) * 0.1
                err = np.vstack([r["estimate"] - r["ci_low"], r["ci_high"] - r["estimate"]])
                ax.errorbar(x, r["estimate"], yerr=np.nan_to_num(err), fmt="o", color=f"C{j}", mfc=face, capsize=2,
                            label=f"{m}, {s} set")
        ax.set_xticks(range(len(langs)), [LANG_NAMES[lang] for lang in langs])
        ax.set_title(LABELS[name], fontsize=10)
        ax.set_ylabel(f"{LABELS[name].split(',')[0]} ({interval_label()})")
        if name.startswith("bias") or name == "accuracy_gap":
            ax.axhline(0, color="grey", lw=0.8)
    return legend_below(fig, axes[0][0], title)


def contrast_forest(adjusted: pd.DataFrame, contrasts: pd.DataFrame, title: str):
    """Each language minus English on the bias set (pooled): unadjusted (paired, clustered) and adjusted for
    control-set accuracy, with 95 % intervals, per model and metric."""
    metrics = list(adjusted["metric"].unique())
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        a = adjusted[adjusted["metric"] == metric]
        c = contrasts[(contrasts["metric"] == metric) & (contrasts["set"] == "bias") & (contrasts["category"] == "all")]
        rows = list(a[["model", "language"]].itertuples(index=False))
        for i, (m, lang) in enumerate(rows):
            u = c[(c["model"] == m) & (c["language"] == lang)]
            v = a[(a["model"] == m) & (a["language"] == lang)]
            if len(u):
                ax.errorbar(u["estimate"], [i + 0.15], xerr=[u["estimate"] - u["ci_low"], u["ci_high"] - u["estimate"]],
                            fmt="o", color="C0", capsize=2, label="paired" if i == 0 else None)
            if len(v) and "adjusted" in v and np.isfinite(v["adjusted"].iloc[0]):
                ax.errorbar(v["adjusted"], [i - 0.15], xerr=[v["adjusted"] - v["ci_low"], v["ci_high"] - v["adjusted"]],
                            fmt="s", color="C3", capsize=2, label="adjusted for control accuracy" if i == 0 else None)
        ax.set_yticks(range(len(rows)), [f"{m}: {lang} - en" for m, lang in rows], fontsize=7)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlabel(f"language minus English ({interval_label()})")
        ax.set_title(LABELS[metric], fontsize=10)
    return legend_below(fig, axes[0][0], title)


def _fmt(r) -> str:
    """The estimate with its interval; the estimate alone where there is none (the verdict says why)."""
    if not (np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"])):
        return f"{r['estimate']:+.3f}"
    return f"{r['estimate']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"


def _verdict(r) -> str:
    """The row's verdict as the verdict layer wrote it; a confirmatory row names its claim and adjusted p."""
    v = str(r.get("verdict", "exploratory"))
    if r.get("claim"):
        return f"`{r['claim']}`: {v}, adjusted p {r['p_adjusted']:.3g}"
    return v


def findings(metrics: pd.DataFrame, adjusted: pd.DataFrame) -> str:
    """Per model: control-set accuracy per language (how well it answers each language at all: SmolLM2 is trained
    mostly on English, Gemma 3 on many languages), the ambiguous bias score per language, and each language minus
    English adjusted for control accuracy, each with its verdict (the plan's claims decided, the rest exploratory);
    every number from the run's tables."""
    out = []
    m = metrics[metrics["category"] == "all"]
    for model in sorted(m["model"].unique()):
        acc = m[(m["model"] == model) & (m["metric"] == "accuracy_disambig") & (m["set"] == "control")]
        bias = m[(m["model"] == model) & (m["metric"] == "bias_score_ambig") & (m["set"] == "bias")]
        accs = ", ".join(f"{LANG_NAMES[r['language']]} {r['estimate']:.2f}" for _, r in acc.iterrows())
        scores = "; ".join(f"{LANG_NAMES[r['language']]} {_fmt(r)} ({_verdict(r)})" for _, r in bias.iterrows())
        level = "/".join(sorted({level_pct(interval_level(r)) for _, r in bias.iterrows()}))
        out.append(f"- **{model}**: control-set accuracy in disambiguated contexts (chance 1/3): {accs}. "
                   f"Ambiguous bias score (bias set, {level} CI): {scores}.")
        a = adjusted[(adjusted["model"] == model) & (adjusted["metric"] == "bias_score_ambig")]
        for _, r in a.iterrows():
            if np.isfinite(r.get("adjusted", np.nan)):
                out.append(f"  - {LANG_NAMES[r['language']]} - English: {r['unadjusted']:+.3f} paired, "
                           f"{r['adjusted']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] at equal control "
                           f"accuracy ({r['n_templates']} templates; {_verdict(r)}).")
    return "\n".join(out)
