"""Notebook 2's decisions: how its tables state their effects and which responder rule judges them (the verdict
layer, :mod:`biaslab.stats.verdict`). What is confirmatory is the analysis plan's (``analysis_plan.yaml``, notebook
``02_calm``: ``excess`` = score − permutation floor); everything else (the released-code variant, per task and bias
type) is exploratory, and the paper's score with its projection interval and the floor stand beside it, described.

**Responders.** A bias score is a range of group *accuracies*: it reads the answers, so the answer check of each task
(``responders.csv``, per model × task) judges the task's rows, and the overall row is degenerate when any task is.
The robustness table's ``outside_original_interval`` (the perturbed score outside the original's 95 % interval; NA
when undefined) is a descriptive comparison, not a test.
"""

from __future__ import annotations

import pandas as pd

from ...stats import responders as R
from ...stats import verdict as V

NOTEBOOK = "02_calm"


def _undefined(df: pd.DataFrame) -> pd.Series:
    why = df["undefined_reason"].fillna("").astype(str) if "undefined_reason" in df else pd.Series("", df.index)
    why = why.str.removeprefix("undefined: ")
    if "n_templates_used" in df:
        none = (pd.to_numeric(df["n_templates_used"], errors="coerce").fillna(0) == 0) & (why == "")
        why = why.where(~none, "no template survived the discard rules")
    return why


BIAS_SCORES = V.Effects(estimate="excess", null=("null_value", 0.0), undefined=_undefined)


def answer_check(resp: pd.DataFrame, thresholds: dict | None = None) -> pd.DataFrame:
    """The responder check of each model x task (``responders.csv``) on CALM's normalised outputs (an empty output
    is unparseable), with :data:`biaslab.stats.responders.THRESHOLDS` or ``thresholds``."""
    from .bias import normalised_outputs
    checked = resp.assign(output_checked=[o or None for o in normalised_outputs(resp)])
    return R.responder_check(checked, answer="output_checked", by=["model", "task"],
                             label_mass="label_mass" if "label_mass" in resp else None, thresholds=thresholds)


def task_status(check: pd.DataFrame | None) -> pd.DataFrame | None:
    """responder_status per model × task, plus task "all" (degenerate when any task is)."""
    if check is None or check.empty or "task" not in check:
        return None
    per = V.responder_status(check, ("model", "task"))
    overall = V.responder_status(check, ("model",)).assign(task="all")
    return pd.concat([per, overall[["model", "task", "responder_status"]]], ignore_index=True)


def decide(bias_scores: pd.DataFrame, check: pd.DataFrame | None = None, *, plan) -> pd.DataFrame:
    """``bias_scores`` with its verdict columns."""
    return V.decide(bias_scores, BIAS_SCORES, "bias_scores", task_status(check), plan=plan, notebook=NOTEBOOK)


def robustness_against_interval(robustness: pd.DataFrame, bias_scores: pd.DataFrame) -> pd.DataFrame:
    """``robustness`` with ``original_ci_low``/``original_ci_high`` (the overall score's projection interval,
    ``score_ci_low``/``score_ci_high``, per model and variant) and ``outside_original_interval`` (NA where the perturbed score or the interval is undefined)."""
    ref = bias_scores[(bias_scores["task"] == "all") & (bias_scores["bias_type"] == "all")][
        ["model", "variant", "score_ci_low", "score_ci_high"]].rename(columns={"score_ci_low": "original_ci_low",
                                                                               "score_ci_high": "original_ci_high"})
    out = robustness.drop(columns=[c for c in ("original_ci_low", "original_ci_high", "outside_original_interval")
                                   if c in robustness]).merge(ref, on=["model", "variant"], how="left")
    out["outside_original_interval"] = V.excludes_null(out["original_ci_low"], out["original_ci_high"],
                                                       out["overall"]).to_numpy()
    return out
