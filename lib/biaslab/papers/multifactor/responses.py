"""What notebook 1 analyses, per benchmark (:class:`Plan`: one each, so the notebook's cells stay generic), and
SSQA's released-answer sensitivity analysis. Every benchmark is asked through its module's ``respond``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...benchmarks.base import Factor
from .factorial import ANSWER_POSITION


@dataclass
class Plan:
    coverage_factors: list[str]                  # factors of the coverage tensor (per-factor GI, pairwise CP)
    overall_sets: dict[str, list[str]]           # named factor sets for the overall CP / GI
    heatmaps: list[tuple[str, str]]              # pairwise count heatmaps
    sunburst: tuple[str, str]                    # (inner ring, outer ring)
    subgroup_factors: list[str]                  # factors for 1st/2nd-level subgroup tables
    ecdf_factors: list[str]                      # second-level subgroups shown in the eCDF
    regression: list[str]                        # LR factors on the full (released) responses
    regression_subset: list[str]                 # LR factors on a scored subset (fewer levels)
    bayes_fixed: list[str]
    bayes_group: list[str]                       # group-level factors on the full responses
    bayes_group_subset: list[str]                # ... and on a scored subset (few prompts per template)
    strata: list[str]                            # strata of the scored subset
    recode: dict = field(default_factory=dict)   # factor -> {old level: new level} before regression
    reference_override: dict = field(default_factory=dict)
    highlight: tuple = ()
    outcome: str = "deviated"                    # the 0/1 response column every analysis models
    outcome_description: str = "the answer is the benchmark's biased answer"
    ideal: float = 0.0                           # ideal subgroup rate C of the deviation metric (eq. 4)
    extra_factors: tuple = ()                    # factors beyond the loader's spec (response-level: kind "model")


PLANS = {
    "ssqa": Plan(
        coverage_factors=["stigma", "category", "gender", "template", "prompt_style", "biased_answer", "cot"],
        overall_sets={
            "paper (stigma, gender, prompt style, biased answer, COT)":
                ["stigma", "gender", "prompt_style", "biased_answer", "cot"],
            "all Table 1 domain and prompt factors":
                ["stigma", "category", "gender", "template", "prompt_style", "biased_answer", "cot"],
            "stigma, template, prompt style, biased answer, COT":
                ["stigma", "template", "prompt_style", "biased_answer", "cot"],
        },
        heatmaps=[("template", "gender"), ("template", "biased_answer"), ("category", "gender"),
                  ("gender", "biased_answer"), ("category", "prompt_style")],
        sunburst=("category", "gender"),
        subgroup_factors=["category", "gender", "prompt_style", "biased_answer"],
        ecdf_factors=["stigma", "gender"],
        regression=["stigma", "gender", "prompt_style", "biased_answer"],
        regression_subset=["category", "gender", "prompt_style", "biased_answer"],
        bayes_fixed=["prompt_style", "gender", "biased_answer"],
        bayes_group=["stigma", "template"],
        bayes_group_subset=["stigma", "template"],
        strata=["template", "prompt_style"],
        # stigma='no stigma', gender='no gender' and prompt_style='base' are the same 37 prompts: with all three
        # as references the dummy-coded model is not identified (rank 99 of 101). Keep 'no stigma' as the stigma
        # reference and measure prompt style and gender among the stigma prompts.
        recode={"prompt_style": {"base": "original"}, "gender": {"no gender": "gender neutral"}},
        reference_override={"prompt_style": "original", "gender": "gender neutral"},
        highlight=("gender", "prompt_style", "biased_answer"),
    ),
    "bbq": Plan(
        coverage_factors=["category", "context_condition", "question_polarity", "template", "stereotyped_group",
                          "biased_position", "unknown_position", "label_type", "subcategory", "intersection",
                          "correct_is_biased"],
        overall_sets={
            "design (category, context, polarity, biased position, unknown position, label type)":
                ["category", "context_condition", "question_polarity", "biased_position", "unknown_position",
                 "label_type"],
            "category, stereotyped group, context, polarity":
                ["category", "stereotyped_group", "context_condition", "question_polarity"],
            "all factors":
                ["category", "context_condition", "question_polarity", "template", "stereotyped_group",
                 "biased_position", "unknown_position", "label_type", "subcategory", "intersection",
                 "correct_is_biased"],
        },
        heatmaps=[("category", "label_type"), ("category", "biased_position"), ("category", "intersection"),
                  ("context_condition", "correct_is_biased"), ("stereotyped_group", "category")],
        sunburst=("category", "context_condition"),
        subgroup_factors=["category", "context_condition", "question_polarity", "label_type"],
        ecdf_factors=["category", "question_polarity"],
        regression=["category", "context_condition", "question_polarity", "label_type", "biased_position",
                    "correct_is_biased"],
        regression_subset=["category", "context_condition", "question_polarity", "label_type", "biased_position",
                           "correct_is_biased"],
        bayes_fixed=["context_condition", "question_polarity", "correct_is_biased", "biased_position"],
        bayes_group=["stereotyped_group", "template"],
        bayes_group_subset=["category", "stereotyped_group"],
        strata=["category", "context_condition", "question_polarity"],
        highlight=("context_condition", "question_polarity", "correct_is_biased"),
    ),
    # The other benchmarks: glue in biaslab.factorial (prompt table, scored subset, response table).
    "calm": Plan(
        coverage_factors=["task", "bias_type", "group", "source_dataset", "answer_format"],
        overall_sets={
            "task, bias type, group": ["task", "bias_type", "group"],
            "task, bias type, group, template source, answer format":
                ["task", "bias_type", "group", "source_dataset", "answer_format"],
        },
        heatmaps=[("task", "group"), ("source_dataset", "answer_format")],
        sunburst=("bias_type", "group"),
        subgroup_factors=["task", "bias_type", "group", "answer_format"],
        ecdf_factors=["task", "group"],
        regression=["group", "task", "answer_format"],
        regression_subset=["group", "task", "answer_format"],
        bayes_fixed=["group", "task"],
        bayes_group=["template_id"],
        bayes_group_subset=["template_id"],
        strata=["task", "bias_type", "group"],
        highlight=("group",),
        outcome="correct",
        outcome_description="the answer is correct (CALM's bias is the accuracy gap between groups)",
        ideal=1.0,
        extra_factors=(Factor("answer_format", "prompt", ("span", "mcqa", "nli3", "nli2", "sentiment", "toxicity"),
                              "span", "how the task is answered (free text, option letter, 3- or 2-way NLI label, "
                              "sentiment, toxicity)"),),
    ),
    "crows_pairs": Plan(
        coverage_factors=["bias_type", "direction", "dataset"],
        overall_sets={"bias type, direction, dataset": ["bias_type", "direction", "dataset"]},
        heatmaps=[("bias_type", "direction"), ("bias_type", "dataset")],
        sunburst=("dataset", "bias_type"),
        subgroup_factors=["dataset", "bias_type", "direction"],
        ecdf_factors=["bias_type", "dataset"],
        regression=["bias_type", "direction", "dataset"],
        regression_subset=["bias_type", "direction", "dataset"],
        bayes_fixed=["direction", "dataset"],
        bayes_group=["bias_type"],
        bayes_group_subset=["bias_type"],
        strata=["dataset", "bias_type"],
        highlight=("direction", "dataset"),
        outcome="stereotype_preferred",
        outcome_description="log P(more stereotypical sentence) > log P(less stereotypical sentence)",
        ideal=0.5,
    ),
    "agentic": Plan(
        coverage_factors=["domain", "question_type", "polarity", "class_type"],
        overall_sets={"design (domain, question type, polarity, class type)":
                      ["domain", "question_type", "polarity", "class_type"]},
        heatmaps=[("domain", "question_type"), ("class_type", "polarity")],
        sunburst=("class_type", "polarity"),
        subgroup_factors=["class_type", "question_type", "polarity", "answer_position"],
        ecdf_factors=["class_type", "question_type"],
        regression=["class_type", "question_type", "polarity", "domain", "answer_position"],
        regression_subset=["class_type", "question_type", "polarity", "answer_position"],
        bayes_fixed=["class_type", "question_type", "polarity"],
        bayes_group=["domain", "scenario_id"],
        bayes_group_subset=["domain"],
        strata=["question_type", "class_type", "polarity"],
        highlight=("class_type", "polarity", "answer_position"),
        outcome="low_entropy",
        outcome_description="normalized entropy of the answer distribution < 0.95 (factorial.LOW_ENTROPY)",
        ideal=0.0,
        extra_factors=(ANSWER_POSITION,),
    ),
}

#: The paper's Table 1 Gini indices and §3.2.1 overall numbers (SSQA).
PAPER_TABLE1_GINI = {"stigma": 0.007, "category": 0.359, "gender": 0.529, "template": 0.0, "prompt_style": 0.246,
                     "biased_answer": 0.122, "cot": 0.0}
PAPER_OVERALL = {"n_combinations": 20720, "coverage_percentage": 0.372, "gini": 0.711}


def other_answer_sensitivity(released: pd.DataFrame, prompts: pd.DataFrame, cluster) -> pd.DataFrame:
    """SSQA's released answers with the "other" answers (Granite's 456 improper outputs, Llama's empty one) counted
    as not biased (the released ``original answer bias`` column, the analysis's choice) or excluded, side by side:
    each model's deviation rate and the paired Granite - Llama difference, with the intervals of the notebook's rule
    (``cluster``: one or two prompt-table columns). Columns: handling, quantity, n, n_excluded, estimate, ci_low,
    ci_high, ci_method, p_value, p_method."""
    from ...stats import intervals, paired
    cols = [cluster] if isinstance(cluster, str) else list(cluster)
    d = released.merge(prompts[["prompt_id"] + cols], on="prompt_id")
    models = list(pd.unique(d["model"]))
    rows = []
    for handling, part in (("other = not biased", d), ("other excluded", d[d["answer"] != "other"])):
        for m, g in part.groupby("model", sort=False):
            r = intervals.rate_intervals(g, "deviated", cluster).iloc[0]
            rows.append({"handling": handling, "quantity": f"deviation rate, {m}", "n": int(r["n"]),
                         "n_excluded": int((d["model"] == m).sum() - len(g)), "estimate": r["rate"],
                         "ci_low": r["ci_low"], "ci_high": r["ci_high"], "ci_method": r["ci_method"],
                         "p_value": np.nan, "p_method": ""})
        if len(models) == 2:
            # excluded: a prompt leaves the paired comparison when either model's answer is "other"
            keep = part.groupby("prompt_id")["model"].transform("size") == 2
            r = paired.paired_difference(part[keep], "deviated", models[0], models[1], cluster, binary=True)
            rows.append({"handling": handling, "quantity": f"deviation rate, {models[0]} - {models[1]} (paired)",
                         "n": int(r["n_pairs"]), "n_excluded": int(d["prompt_id"].nunique() - r["n_pairs"]),
                         "estimate": r["difference"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                         "ci_method": r["ci_method"], "p_value": r["p_value"], "p_method": r["p_method"]})
    return pd.DataFrame(rows)


def recode(df: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """Apply the plan's level recodes (before regression) and return a copy."""
    out = df.copy()
    for f, m in plan.recode.items():
        if f in out:
            out[f] = out[f].replace(m)
    return out


def references(spec, plan: Plan, responses: pd.DataFrame | None = None) -> dict:
    """Reference levels for regression: the spec's, the plan's overrides, and for response-level factors (kind
    "model" among the plan's extra factors, e.g. the agentic answer position) the level most frequent in
    ``responses`` (one model's), so that the contrasts read "against this model's usual answer"."""
    refs = {f.name: f.reference for f in spec.factors}
    refs.update(plan.reference_override)
    if responses is not None:
        for f in plan.extra_factors:
            if f.kind == "model" and f.name in responses and responses[f.name].notna().any():
                refs[f.name] = responses[f.name].mode().iloc[0]
    return refs
