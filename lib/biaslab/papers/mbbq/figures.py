"""Notebook 7's figures and the sentences it states about a run, each computed from the run's tables."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...plots.labels import interval_label, legend_below, state_result
from ...report.wording import interval_level, level_pct
from ...stats.validity import NOT_MEASURABLE
from . import analysis as A

LANG_NAMES = {"en": "English", "es": "Spanish", "nl": "Dutch", "tr": "Turkish"}
LABELS = {"accuracy_ambig": "accuracy, ambiguous", "accuracy_disambig": "accuracy, disambiguated",
          "bias_score_ambig": "bias score, ambiguous", "bias_score_disambig": "BBQ's s_DIS, disambiguated",
          "accuracy_gap": "bias score, disambiguated (accuracy biased - counter-biased)"}
#: the panels of :func:`bias_beside_control`: (set, metric, title)
PANELS = (("bias", "bias_score_ambig", "ambiguous bias score (bias set)"),
          ("bias", "accuracy_gap", "disambiguated bias score (bias set)"),
          ("control", "accuracy_disambig", "control-set accuracy, disambiguated"))
WEIGHTED = "design weighted to every MBBQ item"


def _summary(metrics: pd.DataFrame) -> str:
    """The prompt rows a figure's points show: the five-prompt mean where the run has several prompts."""
    return A.MEAN if (metrics["prompt"] == A.MEAN).any() else A.PLAN_PROMPT


def _lang(metrics: pd.DataFrame) -> list[str]:
    return [lang for lang in LANG_NAMES if lang in set(metrics["language"])]


UNREAD = "not measurable"          # a language whose instrument failed the validity checks, in a figure's labels


def not_measurable_pairs(selection: pd.DataFrame | None) -> set:
    """(model, language) pairs the validity rule found not measurable (``selection``: ``model``, ``language``,
    ``status``; None: none)."""
    if selection is None or not len(selection):
        return set()
    bad = selection[selection["status"].astype(str).str.startswith(NOT_MEASURABLE)]
    return set(zip(bad["model"], bad["language"]))


def _tick(model: str, lang: str, bad: set) -> str:
    return LANG_NAMES[lang] + (f"\n({UNREAD})" if (model, lang) in bad else "")


def bias_beside_control(metrics: pd.DataFrame, title: str, selection: pd.DataFrame | None = None):
    """Per model (a row of panels) and language: the paper's two bias scores and the control set's disambiguated
    accuracy with chance (1/3), all categories pooled and design weighted; each point the five-prompt mean with its
    interval (:func:`biaslab.papers.mbbq.analysis.bounded`), the small grey marks the five prompts' own values. A
    language not measurable for the model (``selection``, the validity rule's) is drawn hollow and named so."""
    bad = not_measurable_pairs(selection)
    d = metrics[metrics["category"] == "all"]
    models, langs, head = sorted(d["model"].unique()), _lang(d), _summary(d)
    fig, axes = plt.subplots(len(models), len(PANELS), figsize=(4.4 * len(PANELS), 3.0 * len(models)), squeeze=False)
    said = []
    for i, m in enumerate(models):
        for ax, (s, metric, name) in zip(axes[i], PANELS):
            r = d[(d["model"] == m) & (d["set"] == s) & (d["metric"] == metric)]
            x = np.arange(len(langs))
            top = r[r["prompt"] == head].set_index("language").reindex(langs)
            err = np.vstack([top["estimate"] - top["ci_low"], top["ci_high"] - top["estimate"]])
            ax.errorbar(x, top["estimate"], yerr=np.nan_to_num(err), fmt="o", color="C0", capsize=3,
                        label=f"{'mean over the prompts' if head == A.MEAN else 'prompt ' + head} "
                              f"({interval_label()})")
            hollow = [k for k, lang in enumerate(langs) if (m, lang) in bad]
            if hollow:
                ax.plot(x[hollow], top["estimate"].to_numpy()[hollow], "o", color="C0", mfc="white",
                        label=f"{UNREAD} (validity): shown, not read")
            each = r[r["prompt"] != A.MEAN]
            if head == A.MEAN and len(each):
                ax.scatter([langs.index(lang) + 0.18 for lang in each["language"]], each["estimate"], s=9,
                           color="grey", label="each prompt")
            lo, hi = A.RANGE[metric]
            ref = A.CHANCE if metric.startswith("accuracy_") and metric != "accuracy_gap" else 0.0
            ax.axhline(ref, color="grey", lw=0.8, ls=":" if ref else "-",
                       label="chance (1/3)" if ref else None)
            ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
            ax.set_xticks(x, [_tick(m, lang, bad) for lang in langs], fontsize=8)
            ax.set_title(f"{m}\n{name}", fontsize=9)
            if metric == "accuracy_disambig" and top["estimate"].notna().any():
                best = [LANG_NAMES[lang] for lang, v in top["estimate"].items() if v == top["estimate"].max()]
                said.append(f"{m}'s control accuracy is highest in {' and '.join(best)} "
                            f"({top['estimate'].max():.2f})")
    state_result(fig, "; ".join(said))
    return legend_below(fig, axes[0][-1], title, ncol=3)


def by_category(spread: pd.DataFrame, title: str):
    """Per model and context, each category's bias score per language: the mean over the prompts (dot) and the range
    of the prompts' values (line), bias set, unweighted within the category (its items are a simple random sample of
    its stratum); "undefined" where the score is (no answer naming a person, or the disambiguated score without an
    item in one of its two arms)."""
    d = spread[(spread["set"] == "bias") & (spread["category"] != "all")
               & spread["metric"].isin(["bias_score_ambig", "accuracy_gap"])]
    models, langs = sorted(d["model"].unique()), _lang(d)
    cats = sorted(d["category"].unique())
    fig, axes = plt.subplots(len(models), 2, figsize=(10, 0.5 * len(cats) * len(models) + 1.6), squeeze=False)
    for i, m in enumerate(models):
        for ax, metric in zip(axes[i], ("bias_score_ambig", "accuracy_gap")):
            r = d[(d["model"] == m) & (d["metric"] == metric)]
            for k, lang in enumerate(langs):
                t = r[r["language"] == lang].set_index("category").reindex(cats)
                y = np.arange(len(cats)) + (k - (len(langs) - 1) / 2) * 0.18
                ax.hlines(y, t["min"], t["max"], color=f"C{k}", lw=1)
                ax.plot(t["estimate"], y, "o", color=f"C{k}", ms=4, label=f"{LANG_NAMES[lang]}: mean, min-max of "
                        "the prompts")
                for yy in y[t["estimate"].isna().to_numpy()]:       # no value: a stratum without both arms
                    ax.text(0.02, yy, "undefined", color=f"C{k}", fontsize=6, va="center")
            ax.axvline(0, color="grey", lw=0.8)
            ax.set_xlim(-1.05, 1.05)
            ax.set_yticks(range(len(cats)), [c.replace("_", " ") for c in cats], fontsize=8)
            ax.set_title(f"{m}: {LABELS[metric]}", fontsize=9)
    return legend_below(fig, axes[0][0], title, ncol=len(langs))


def contrast_forest(contrasts: pd.DataFrame, adjusted: pd.DataFrame, title: str,
                    selection: pd.DataFrame | None = None):
    """Each language minus English on the bias set (all categories, design weighted), paired on the same items with
    the options in the same order: the five-prompt mean (the headline), the plan's prompt alone, and the
    plan's prompt regressed on the control-accuracy difference (a sensitivity analysis), with 95 % intervals. A
    contrast with a language not measurable for the model (``selection``), English or the other, is named so."""
    bad = not_measurable_pairs(selection)
    metrics = [m for m in A.ADJUSTED if m in set(contrasts["metric"])]
    c = contrasts[(contrasts["set"] == "bias") & (contrasts["category"] == "all")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.4 * len(metrics), 4.0), squeeze=False)
    pairs = list(c[["model", "language"]].drop_duplicates().itertuples(index=False))
    marks = [(A.MEAN, "o", "C0", "paired, mean over the prompts"),
             (A.PLAN_PROMPT, "D", "C2", f"paired, prompt {A.PLAN_PROMPT}")]
    for ax, metric in zip(axes[0], metrics):
        for i, (m, lang) in enumerate(pairs):
            for j, (p, fmt, color, label) in enumerate(marks):
                u = c[(c["metric"] == metric) & (c["model"] == m) & (c["language"] == lang) & (c["prompt"] == p)]
                if len(u):
                    ax.errorbar(u["estimate"], [i + 0.2 - 0.2 * j], fmt=fmt, color=color, capsize=2,
                                xerr=[u["estimate"] - u["ci_low"], u["ci_high"] - u["estimate"]],
                                label=label if i == 0 else None)
            v = adjusted[(adjusted["metric"] == metric) & (adjusted["model"] == m) & (adjusted["language"] == lang)]
            if len(v) and "adjusted" in v and np.isfinite(v["adjusted"].iloc[0]):
                ax.errorbar(v["adjusted"], [i - 0.2], xerr=[v["adjusted"] - v["ci_low"], v["ci_high"] - v["adjusted"]],
                            fmt="s", color="C3", capsize=2, mfc="none",
                            label=f"sensitivity: prompt {A.PLAN_PROMPT} at equal control accuracy" if i == 0 else None)
        ax.set_yticks(range(len(pairs)), [f"{m}: {lang} - en" + (f" ({UNREAD})" if {(m, lang), (m, "en")} & bad
                                                                 else "") for m, lang in pairs], fontsize=7)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_ylim(-0.6, len(pairs) - 0.4)
        ax.set_xlabel(f"language minus English ({interval_label()})")
        ax.set_title(LABELS[metric], fontsize=10)
    return legend_below(fig, axes[0][0], title, ncol=2)


# ------------------------------------------------------------------------------- sentences
def _fmt(r, est: str = "estimate") -> str:
    """The estimate with its interval; the estimate alone where there is none (the verdict says why)."""
    if not (np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"])):
        return f"{r[est]:+.3f}"
    return f"{r[est]:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"


def _verdict(r) -> str:
    """The row's verdict as the verdict layer wrote it; a confirmatory row names its claim and adjusted p."""
    v = str(r.get("verdict", "exploratory"))
    if r.get("claim"):
        p = r.get("p_adjusted", np.nan)
        return f"`{r['claim']}`: {v}" + (f", adjusted p {p:.3g}" if np.isfinite(p) else "")
    return v


def _levels(rows: pd.DataFrame) -> str:
    """The confidence of the rows' intervals as a sentence quotes it, read from each row ('95 %', '90 %/95 %')."""
    return "/".join(sorted({level_pct(interval_level(r)) for _, r in rows.iterrows()})) or "no"


def score_line(rows: pd.DataFrame, what: str, unread=()) -> str:
    """``what`` per language (one row each): the estimate, its interval at the rows' own confidence and, where the
    row pools several prompts, their range; a language whose score is undefined is left out, one in ``unread`` (not
    measurable) is marked so."""
    parts = []
    for _, x in rows[np.isfinite(rows["estimate"].astype(float))].iterrows():
        rng = (f"; prompts {x['min']:+.3f} ({x['prompt_min']}) to {x['max']:+.3f} ({x['prompt_max']})"
               if x.get("n_prompts", 1) > 1 else "")
        parts.append(f"{LANG_NAMES[x['language']]} {_fmt(x)}{rng}"
                     + (" (not measurable: shown, not read)" if x["language"] in unread else ""))
    return f"{what}, {_levels(rows)} CI): " + "; ".join(parts) + "."


def chat_sentence(timings: pd.DataFrame) -> str:
    """How each model was asked, from the run's ``timings`` (its ``chat`` column: the paper's rule applied)."""
    t = timings.drop_duplicates("model")
    return " ".join(f"{r['model']} was asked {'in its chat template' if r['chat'] else 'the raw prompt'}"
                    f"{'' if r['chat'] else ' (a base model, or one whose chat template cannot be read)'}."
                    for _, r in t.iterrows())


def cost_sentence(timings: pd.DataFrame, paper_prompts: int) -> str:
    """Per model, from the run's ``timings`` (one row per model x prompt wording): the seconds per prompt of each
    wording, the run's scoring seconds, and what ``paper_prompts`` (every item x language x set x wording) would
    take at this run's mean seconds per prompt (wall time on this machine; the scorer's cache shares nothing
    between wordings). A wording whose scores all came from the score cache (``positions_computed`` 0) measured no
    cost: it is named, not counted."""
    out = []
    for model, t in timings.groupby("model", sort=False):
        cached = t[t.get("positions_computed", pd.Series(1, index=t.index)) == 0]
        t = t.drop(cached.index)
        note = f" (read from the score cache, no cost measured: {', '.join(cached['prompt'])})" if len(cached) else ""
        if t.empty:
            out.append(f"- {model}: every score read from the score cache; this run measured no cost.")
            continue
        each = ", ".join(f"{r['prompt']} {r['seconds_per_prompt']:.3f} s ({r['prompts']:,} prompts)"
                         for _, r in t.iterrows()) + note
        per = t["score_s"].sum() / max(t["prompts"].sum(), 1)
        out.append(f"- {model}: seconds per prompt {each}; {t['score_s'].sum():.0f} s of scoring in all, "
                   f"{per:.3f} s per prompt; the paper's design ({paper_prompts:,} prompts) would take about "
                   f"{per * paper_prompts / 3600:.1f} h at that rate.")
    return "\n".join(out)


def findings(beside: pd.DataFrame, spread: pd.DataFrame, contrasts: pd.DataFrame, metrics: pd.DataFrame,
             prompts=(), selection: pd.DataFrame | None = None) -> str:
    """Per model, every number from the run's tables: the languages where the instrument is not measurable
    (``selection``: the validity rule's rows per model x language), the control set's disambiguated accuracy per
    language against chance and which language answers it best; the paper's two bias scores per language
    (five-prompt mean, its interval and the prompts' range; a not measurable language's marked); each language minus
    English (paired, same option order); the plan's claims as decided (prompt p2)."""
    out = []
    sel = selection if selection is not None else pd.DataFrame(columns=["model", "language", "status"])
    bad = not_measurable_pairs(sel)
    head = A.MEAN if (beside["prompt"] == A.MEAN).any() else A.PLAN_PROMPT
    b = beside[(beside["category"] == "all") & (beside["prompt"] == head)]
    what = f"mean of the prompts {', '.join(prompts)}" if head == A.MEAN else f"prompt {head}"
    for model in sorted(b["model"].unique()):
        r = b[b["model"] == model].set_index("language").reindex([x for x in LANG_NAMES if x in set(b["language"])])
        c = "control_accuracy_disambig"
        acc = ", ".join(f"{LANG_NAMES[lang]} {x[c]:.2f} [{x[c + '_ci_low']:.2f}, {x[c + '_ci_high']:.2f}]"
                        for lang, x in r.iterrows())
        above = [LANG_NAMES[lang] for lang, x in r.iterrows() if x["control_above_chance"]]
        top = r["control_accuracy_disambig"]
        best = [LANG_NAMES[lang] for lang, v in top.items() if v == top.max()]
        mine = sel[sel["model"] == model]
        unread = [lang for lang in mine["language"] if (model, lang) in bad]
        measurable = (f" Not measurable (the validity checks fail; scores shown, never read): "
                      f"{', '.join(LANG_NAMES[lang] for lang in unread)}." if unread else
                      (" The instrument passes the validity checks in every language." if len(mine) else ""))
        out.append(f"- **{model}** ({what}, all categories, {WEIGHTED}).{measurable} Control-set accuracy in "
                   f"disambiguated contexts (chance 1/3): {acc}; its interval lies above chance in "
                   f"{', '.join(above) if above else 'no language'}; it is highest in {' and '.join(best)}"
                   f"{' (tied)' if len(best) > 1 else ''}.")
        for metric, context in A.PAPER_SCORES.items():
            s = spread[(spread["model"] == model) & (spread["metric"] == metric) & (spread["set"] == "bias")
                       & (spread["category"] == "all")].set_index("language")
            s = s.reindex([lang for lang in r.index if lang in s.index]).reset_index()
            out.append("  - " + score_line(s, f"{context.capitalize()} bias score (bias set", unread))
        c = contrasts[(contrasts["model"] == model) & (contrasts["set"] == "bias") & (contrasts["category"] == "all")
                      & (contrasts["prompt"] == head) & contrasts["metric"].isin(list(A.PAPER_SCORES))]
        for metric, context in A.PAPER_SCORES.items():
            parts = [f"{LANG_NAMES[x['language']]} - English {_fmt(x)}"
                     + (" (not measurable)" if {x["language"], A.REFERENCE} & set(unread) else "")
                     for _, x in c[c["metric"] == metric].iterrows()]
            if parts:
                out.append(f"  - {context.capitalize()} bias score, each language minus English on the same items "
                           f"with the options in the same order ({_levels(c[c['metric'] == metric])} CI, "
                           f"template-clustered): " + "; ".join(parts) + ".")
        claims = metrics[(metrics["model"] == model) & metrics.get("claim", pd.Series("", index=metrics.index))
                         .fillna("").astype(bool)]
        for _, x in claims.iterrows():
            out.append(f"  - The plan's claim on prompt {A.PLAN_PROMPT}, {LANG_NAMES[x['language']]} ambiguous bias "
                       f"score {_fmt(x)}: {_verdict(x)}.")
    return "\n".join(out)


def adjusted_findings(adjusted: pd.DataFrame) -> str:
    """The sensitivity analysis's rows (the plan's ``mbbq-adjusted-contrast``), each with the templates whose
    control-accuracy difference is 0."""
    out = []
    a = adjusted[adjusted["metric"] == "bias_score_ambig"]
    for _, r in a.iterrows():
        if np.isfinite(r.get("adjusted", np.nan)):
            out.append(f"- {r['model']}, {LANG_NAMES[r['language']]} - English: {r['unadjusted']:+.3f} paired, "
                       f"{r['adjusted']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] at equal control accuracy "
                       f"({r['n_templates']} templates, {r['n_templates_da_zero']} of them with a control-accuracy "
                       f"difference of 0; {_verdict(r)}).")
        else:
            out.append(f"- {r['model']}, {LANG_NAMES[r['language']]} - English: {r['method']}.")
    return "\n".join(out)
