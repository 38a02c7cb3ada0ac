"""Notebook 2's findings: the run's CALM tables turned into Markdown sentences.

Reads the tables the notebook writes (``group_accuracy_mean``, ``bias_scores``, ``discarded``, ``robustness``,
``subset_selection``, ``diversity``); every number in the sentences comes from them. Bias scores are CALM eq. 1
(percent of the template's baseline accuracy, :mod:`.bias`) or the released code's variant (accuracy points); the one
decided result is the analysis plan's claim (the overall eq.-1 score above its permutation floor, ``excess``).
"""

from __future__ import annotations

import pandas as pd

from ...benchmarks.calm import PASSAGES, WITH_QUESTIONS
from ...report.wording import bullets, claim_findings, join, num, pct, power_sentence, present, span, with_mc_se
from .decisions import NOTEBOOK

TASK_NAMES = {"qa": "QA", "nli": "NLI", "sentiment": "sentiment"}


def accuracy_findings(avg: pd.DataFrame) -> str:
    """Per model: baseline accuracy per task and the largest spread of template-averaged group accuracies."""
    groups = [c for c in avg.columns if c not in ("model", "task", "bias_type", "n_templates", "baseline")]
    lines = []
    for m, g in avg.groupby("model", sort=False):
        base = g.groupby("task", sort=False)["baseline"].mean()
        spread = (g[groups].max(axis=1) - g[groups].min(axis=1)) * 100
        worst = g.loc[spread.idxmax()]
        lines.append(f"**{m}** answers " + join(f"{pct(a)} of the {TASK_NAMES.get(t, t)}" for t, a in base.items())
                     + f" prompts correctly. Averaged over templates, its group accuracies lie within "
                       f"{num(spread.max(), 2)} points of each other (largest spread: {worst['task']}, "
                       f"{worst['bias_type']}).")
    return bullets(lines)


def bias_findings(bias_scores: pd.DataFrame, plan) -> str:
    """One sentence per instance of the plan's claims (each model's overall eq.-1 score above its permutation
    floor); the released-code variant and the breakdowns are exploratory tables."""
    return claim_findings([bias_scores], plan.of(NOTEBOOK))


def floor_findings(bias_scores: pd.DataFrame) -> str:
    """Per instance of the plan's claim, the paper's eq.-1 score beside its permutation floor (described, not
    decided: the decided quantity is their difference, :func:`bias_findings`)."""
    conf = bias_scores[bias_scores["claim"] != ""] if "claim" in bias_scores else bias_scores.iloc[:0]
    return bullets(f"**{r['model']}**: eq.-1 score {num(r['bias_score'])} (projection interval "
                   f"{num(r['score_ci_low'])}–{num(r['score_ci_high'])}) against a permutation floor of "
                   f"{with_mc_se({**r, 'null_mean_mc_se': r.get('excess_mc_se')}, 'null_mean')}, the score a model "
                   "without group effect would get from the same answers."
                   for r in conf.to_dict("records") if present(r.get("bias_score")) and present(r.get("null_mean")))


def discard_findings(discarded: pd.DataFrame) -> str:
    """Per model and variant: how many template × bias-type entries each discard rule removed, of how many."""
    lines = []
    for (m, v), g in discarded.groupby(["model", "variant"], sort=False):
        total = int(g.drop_duplicates("task")["n_templates_total"].sum())
        by_rule = g.groupby("rule", sort=False)[["n_templates", "n_tasks"]].sum()
        hit = [f"{int(r.n_templates)} by *{rule}*" for rule, r in by_rule.iterrows() if r.n_templates > 0]
        tasks = int(by_rule["n_tasks"].sum())
        removed = int(by_rule["n_templates"].sum())
        lines.append(f"**{m}**, {v} variant: {removed} of {total} template × bias-type entries removed"
                     + (f" ({join(hit)})" if hit else "") + (f", and {tasks} whole task(s)" if tasks else "") + ".")
    return bullets(lines)


def robustness_findings(robustness: pd.DataFrame) -> str:
    """The combined perturbation's change of each model's overall score, read against the original score's interval
    (``outside_original_interval`` of :func:`.decisions.robustness_against_interval`; undefined scores say so)."""
    lines = []
    comb = robustness[robustness["perturbation"] == "combined"]
    for r in comb.to_dict("records"):
        head = (f"**{r['model']}**, {r['variant']} variant: editing {int(r['templates_edited'])} of "
                f"{int(r['templates'])} templates ")
        if not (present(r["overall"]) and present(r["original_overall"])):
            which = join([w for w, v in (("the original", r["original_overall"]), ("the perturbed", r["overall"]))
                          if not present(v)])
            lines.append(head + f"cannot be compared: {which} score is undefined (no template survived the discard "
                                "rules).")
            continue
        rel = f" ({num(r['rel_change_pct'], 2)} %)" if present(r.get("rel_change_pct")) else ""
        out = r.get("outside_original_interval")
        where = "outside" if out == True else "inside" if out == False else None  # noqa: E712
        iv = (f" ({num(r['original_ci_low'])}–{num(r['original_ci_high'])})" if where else "")
        lines.append(head + f"moves the overall score from {num(r['original_overall'])} to {num(r['overall'])}{rel}, "
                     + (f"{where} the original score's 95 % interval{iv}." if where else
                        "and the original score has no interval to read it against."))
    return bullets(lines)


def power_findings(power: pd.DataFrame) -> str:
    """The power of the group-vs-rest contrasts of ``power.csv`` (only defined MDEs: a contrast whose
    template-clustered SE is 0 has none, and says why) and the prompts per group a 5-point difference needs."""
    if power.empty:
        return ""
    claim = power["quantity"].str.contains("calm-eq1", regex=False)
    contrasts = power[~claim]
    need = contrasts["required_n"].dropna()
    text = (power_sentence(contrasts.to_dict("records"), "Group accuracy differences (by model, task and bias type)")
            + (f"; a 5-point difference needs {span(need.min(), need.max())} prompts per group" if len(need) else "")
            + ".") if len(contrasts) else ""
    if claim.any():
        text += (" " if text else "") + power_sentence(power[claim].to_dict("records"),
                                                       "The eq.-1 score above its floor (`calm-eq1`, from the design)",
                                                       1) + "."
    return text


def subset_findings(subsets: pd.DataFrame) -> str:
    """Per model (eq. 1): the spread of the overall score over random subsets, and the effect of halving the names."""
    lines = []
    paper = subsets[subsets["variant"] == "paper"]
    for m, g in paper.groupby("model", sort=False):
        pr = g[g["unit"] == "prompts"]
        names = g[g["unit"] == "names"]
        full = g["full"].iloc[0]
        s = (f"**{m}** (full-subset score {num(full)}): random prompt subsets ("
             + join(pct(f) for f in pr["fraction"])
             + f") give standard deviations of {span(pr['sd'].min(), pr['sd'].max(), 2)} points")
        if len(names):
            n = names.iloc[0]
            s += (f"; keeping {pct(n['fraction'])} of the names gives a mean of {num(n['mean'])} "
                  + ("(lower)" if n["mean"] < full else "(higher)"))
        lines.append(s + ".")
    uninf = subsets[subsets["unit"].str.startswith("templates without")]
    if len(uninf):
        lines.append(f"Template subset '{uninf['unit'].iloc[0]}' keeps {pct(uninf['fraction'].iloc[0])} of the "
                     "templates.")
    return bullets(lines)


def length_findings(diversity: pd.DataFrame, table4: pd.DataFrame) -> str:
    """CALM's template lengths here (``calm_passage``: the passages alone; ``calm``: with the question) beside the
    paper's printed Table 4 row (``table4``, :data:`.published.TABLE4`), and the smallest standard deviation the
    printed minimum, maximum and mean allow: the largest template alone contributes (max − mean) / sqrt(n − 1)."""
    d = diversity.set_index("benchmark")
    paper = table4.set_index("benchmark").loc["CALM"]
    if PASSAGES not in d.index:
        return ""
    p, q = d.loc[PASSAGES], d.loc[WITH_QUESTIONS] if WITH_QUESTIONS in d.index else None
    floor = (paper["length_max"] - paper["length_mean"]) / (paper["n_templates"] - 1) ** 0.5
    return bullets([
        f"The paper's Table 4 row for CALM: {int(paper['n_templates'])} templates of "
        f"{span(paper['length_min'], paper['length_max'])} words, mean {num(paper['length_mean'])}, standard "
        f"deviation {num(paper['length_sd'])}.",
        f"Here, the passages alone (`{PASSAGES}`): {int(p['n_templates'])} templates of "
        f"{span(p['length_min'], p['length_max'])} words, mean {num(p['length_mean'])}, standard deviation "
        f"{num(p['length_sd'], 2)}" + (f"; with the question (`{WITH_QUESTIONS}`): mean {num(q['length_mean'])}, up to "
                                       f"{int(q['length_max'])} words" if q is not None else "") + ".",
        f"The printed standard deviation cannot be right: with {int(paper['n_templates'])} templates between "
        f"{num(paper['length_min'])} and {num(paper['length_max'])} words around a mean of "
        f"{num(paper['length_mean'])}, the longest template alone makes it at least {num(floor)} (its squared "
        f"distance from the mean over n − 1), not {num(paper['length_sd'])}."])


def diversity_findings(diversity: pd.DataFrame) -> str:
    """Mean pairwise similarity of each measured benchmark's templates, most diverse first."""
    d = diversity[diversity["status"] == "measured"].sort_values("cosine_mean")
    if d.empty:
        return "No benchmark's similarity was measured in this run."
    rows = [f"{r.benchmark} {num(r.cosine_mean, 2)} / {num(r.bertscore_f1_mean, 2)}" for r in d.itertuples()]
    return (f"Mean pairwise cosine / BERTScore-style F1 (lower = more diverse), most diverse first: {join(rows)}. "
            f"The most diverse set here is **{d['benchmark'].iloc[0]}**.")
