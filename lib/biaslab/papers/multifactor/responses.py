"""Notebook 1's response-level helpers: SSQA's released-answer sensitivity analysis, the plan's recoding before
regression and the reference levels. What notebook 1 analyses per benchmark is its ``FactorPlan``
(``biaslab.benchmarks.spec``); every benchmark is asked through its module's ``respond``."""

from __future__ import annotations

import numpy as np
import pandas as pd


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


def recode(df: pd.DataFrame, plan) -> pd.DataFrame:
    """Apply the plan's level recodes (before regression) and return a copy."""
    out = df.copy()
    for f, m in plan.recode.items():
        if f in out:
            out[f] = out[f].replace(m)
    return out


def references(spec, plan, responses: pd.DataFrame | None = None) -> dict:
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
