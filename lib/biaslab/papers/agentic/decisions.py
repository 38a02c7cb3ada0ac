"""Notebook 4's decisions: how each table states its effects and which responder rule judges which metric (the
verdict layer, :mod:`biaslab.stats.verdict`). What is confirmatory is the analysis plan's (``analysis_plan.yaml``,
notebook ``04_agentic_entropy``: the group choice); everything else is exploratory.

**Responders, per metric** (:mod:`biaslab.stats.responders`): the entropy, the mean probabilities, the cyclic gain,
the group preference and the paired comparison read the renormalized *probabilities* (per model and number of
choices k); the group counts read the top *answer*, judged per model over all its prompts, as notebook 1's agentic
variant does (``responder_check`` of the top group, ``by="model"``), so the two agree by construction. A constant
group *within* a class type is the strongest form of the departure the group test measures, not a reason to leave
it out; the position counts and probabilities are not judged, since a constant position is what they test.
"""

from __future__ import annotations

import pandas as pd

from ...stats import responders as R
from ...stats import verdict as V

PROBABILITIES = "label probabilities (entropy, mean probabilities, cyclic gain, group preference)"
BY_GROUP = "top answer by group"
BY_POSITION = "top answer by position"
POSITION_NOT_JUDGED = ("a constant position is the departure from uniform these tests measure, not a failure to "
                       "answer")

NOTEBOOK = "04_agentic_entropy"
EFFECTS = {
    "uniformity_tests": V.Effects(estimate="cohens_w", null=("null_value", 0.0), screen_by=("unit",)),
    "top_group_shares": V.Effects(estimate="share", p=None, null=("null_value",)),
    "cyclic_by_model": V.Effects(estimate="mean_gain", p=("p_value", "wilcoxon_p"), null=("null_value", 0.0)),
    "paired_comparisons": V.Effects(estimate="difference", null=("null_value", 0.0), pair=("model_a", "model_b")),
    "group_preference": V.Effects(estimate="diff_pos_minus_neg", p=("p_value", "wilcoxon_p"),
                                  ci=(("diff_ci_low", "diff_ci_high"),), null=("null_value", 0.0)),
    "entropy_breakdown": V.Effects(estimate="mean_entropy", p=("wald_p",), ci=(), null=None, test=("model", "factor")),
    "position_bias": V.Effects(estimate="mean_p", p=None, null=("uniform",)),
    "entropy_by_model": V.Effects(estimate="mean_entropy", p=None, null=("null_value", 1.0)),
}


def group_answer_check(per_prompt: pd.DataFrame, thresholds: dict | None = None) -> pd.DataFrame:
    """The answer check of the top group per model over all its prompts: notebook 1's agentic check (its ``answer``
    is the top group) on notebook 4's answers, so both judge a model alike."""
    return R.responder_check(per_prompt, answer="top_group", by="model",
                             label_mass="label_mass" if "label_mass" in per_prompt else None, thresholds=thresholds)


def responder_table(per_prompt: pd.DataFrame, thresholds: dict | None = None,
                    validity: pd.DataFrame | None = None) -> pd.DataFrame:
    """The per-metric responder table of notebook 4 (``metric``, ``reads`` and the check's measures): probabilities
    and position per model × k, the top group per model (:func:`group_answer_check`, with ``thresholds``) and, given
    ``validity`` (:func:`biaslab.stats.validity.responder_rows`), its status per model on the probabilities and the
    top group (a position-driven model is not measurable there; the position rows are not judged)."""
    probs = [c for c in per_prompt.columns if c.startswith("p_") and c[2:].isdigit()]
    rows = []
    for k, part in per_prompt.groupby("k", sort=True):
        rows.append(R.probability_check(part, probs, by="model").assign(k=int(k), metric=PROBABILITIES))
        pos = R.responder_check(part, answer="top_position", by="model", n_options=int(k)).assign(k=int(k))
        rows.append(pos.assign(degenerate=False, reasons=f"not judged: {POSITION_NOT_JUDGED}", reads="none",
                               metric=BY_POSITION))
    rows.append(group_answer_check(per_prompt, thresholds).assign(metric=BY_GROUP))
    if validity is not None:
        # read as the rows they stand beside (notebook 5 filters a metric's rows by what it reads)
        rows += [validity.assign(metric=m, reads=r) for m, r in ((PROBABILITIES, "probabilities"), (BY_GROUP, "answer"))]
    return pd.concat(rows, ignore_index=True)


def statuses(name: str, df: pd.DataFrame, check: pd.DataFrame | None):
    """The responder status of each row of table ``name`` (a frame for :func:`biaslab.stats.verdict.decide`)."""
    if check is None or "metric" not in check:
        return None
    if name == "position_bias":
        return f"not judged: {POSITION_NOT_JUDGED}"
    if name == "top_group_shares":
        return V.metric_status(check, BY_GROUP, ("model",))
    if name == "uniformity_tests":
        grp = V.metric_status(check, BY_GROUP, ("model",)).assign(unit="group")
        pos = df[["model"]].drop_duplicates().assign(unit="position",
                                                      responder_status=f"not judged: {POSITION_NOT_JUDGED}")
        return pd.concat([grp, pos], ignore_index=True)[["model", "unit", "responder_status"]]
    return V.metric_status(check, PROBABILITIES, ("model",))


def decide(name: str, df: pd.DataFrame, check: pd.DataFrame | None, *, plan) -> pd.DataFrame:
    """One of notebook 4's tables with its verdict columns (the plan's families lie within one table)."""
    if df is None or df.empty:
        return df
    return V.decide(df, EFFECTS[name], name, statuses(name, df, check), plan=plan, notebook=NOTEBOOK)


#: a stricter answer check than :data:`biaslab.stats.responders.THRESHOLDS` (the sensitivity analysis)
STRICT = {"modal_share_max": 0.90, "answer_entropy_min": 0.30, "unparseable_share_max": 0.25}


def sensitivity(ut: pd.DataFrame, per_prompt: pd.DataFrame, prompts: pd.DataFrame, check: pd.DataFrame,
                cluster: str | None, cyc: pd.DataFrame | None = None, *, plan) -> pd.DataFrame:
    """``sensitivity.csv`` rows of ``group-choice`` (collected by :func:`biaslab.stats.reanalysis.rows`, decided by
    :func:`biaslab.stats.reanalysis.decide`: each alternative's p swapped into its family's primaries): the decided
    ``uniformity_tests`` ``ut`` and the claim re-decided (a) on the top group with the model's position prior divided
    out (:func:`biaslab.stats.entropy.position_calibrated_top`), (b) on the top group of the cyclic average over all
    rotations (``cyc``, :func:`biaslab.stats.entropy.cyclic_summary` rows, a subset of prompts; skipped without
    it), (c) with the stricter responder check :data:`STRICT` and (d) with none."""
    from ...stats import entropy as E
    from ...stats import reanalysis as S
    claims = plan.of(NOTEBOOK, "uniformity_tests")
    cal = E.uniformity_tests(E.position_calibrated_top(per_prompt, prompts), prompts, cluster=cluster,
                             units={"group": "top_group_calibrated"})
    analyses = [S.Analysis("position-calibrated top answer", "position preference",
                           "top group after dividing out the model's mean probability per slot (Zheng et al. 2024)",
                           decide("uniformity_tests", cal, check, plan=plan))]
    if cyc is not None and len(cyc):
        cy = E.uniformity_tests(cyc, prompts, cluster=cluster, units={"group": "top_group_cyclic"})
        analyses.append(S.Analysis("cyclic average", "position preference",
                                   f"top group of the probabilities averaged over all rotations "
                                   f"({cyc['prompt_id'].nunique()} prompts)",
                                   decide("uniformity_tests", cy, check, plan=plan)))
    base = E.uniformity_tests(per_prompt, prompts, cluster=cluster, units={"group": "top_group"})
    analyses += [S.Analysis("stricter responder check", "degenerate responder",
                            "degenerate when " + ", ".join(f"{k} {v}" for k, v in STRICT.items()),
                            decide("uniformity_tests", base, responder_table(per_prompt, STRICT), plan=plan)),
                 S.Analysis("no responder check", "degenerate responder", "every model tested",
                            decide("uniformity_tests", base, None, plan=plan))]
    keys = [c for c in ("model", "class_type", "polarity", "unit") if c in ut]
    return S.decide(S.rows(ut, analyses, claims, keys), plan=plan)
