"""Notebook 6's decisions: its families, and which responder rule judges which metric in each universe (the verdict
layer, :mod:`biaslab.stats.verdict`).

**Exploratory only.** The plan gives notebook 6 no claim: each model x metric's universes form one
Benjamini-Hochberg screen (the agentic group preference: one per model x universe), shown, never decided; robustness
is each universe's equivalence to the paper's protocol (:func:`.analysis.equivalence_to_paper`).
**Responders, per metric and universe**: each spec's ``responder_check`` gives rows per model x universe labelled by
what they read, and each metric's ``responder_reads`` which of them judge it (the rules of the metric's notebook). A
degenerate universe keeps its row ("not tested (degenerate responder: ...)"), and equivalence marks it "not judged".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import benchmarks as registry
from ...stats import verdict as V

KEYS = ["model", "universe"]


def _reads() -> dict:
    """metric id -> the responder rows that judge it in a universe (``Metric.responder_reads``), registry order."""
    return {m.id: m.responder_reads for s in registry.SPECS.values() for m in s.metrics if m.responder_reads}


def responder_table(responses: dict, items: dict) -> pd.DataFrame:
    """Per model x universe (agentic answers: x class type) and what a metric reads (``metric``): the check's row
    (``degenerate``, ``reasons``, ``reads`` and its measures), from each benchmark spec's ``responder_check``.
    ``responses`` and ``items``: benchmark -> table."""
    rows = [registry.spec(b).responder_check(d, items.get(b)) for b, d in responses.items()
            if registry.spec(b).responder_check and len(d)]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=KEYS + ["metric"])


# ------------------------------------------------------------------------------------------ status per row
def _status(check: pd.DataFrame, reads, by=KEYS) -> pd.DataFrame:
    keys = (reads,) if isinstance(reads, str) else reads
    parts = [V.metric_status(check, r, by) for r in keys]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(by) + ["responder_status"])


def estimate_status(est: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """``model``, ``universe``, ``metric``, ``responder_status`` for the rows of the estimates table."""
    rows = [_status(check, reads).assign(metric=met) for met, reads in _reads().items() if met in set(est["metric"])]
    return pd.concat(rows, ignore_index=True) if rows else None


def group_status(gp: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """``model``, ``universe``, ``class_type``, ``responder_status`` for the group-preference rows: the family
    metric's first ``responder_reads`` per class type (the group named, where the format gives no distribution),
    else its second per universe (the probability check)."""
    keys = gp[KEYS + ["class_type"]].drop_duplicates()
    per_type, per_universe = _reads()[gp["metric"].iloc[0]]
    named = _status(check, per_type, KEYS + ["class_type"])
    prob = _status(check, per_universe).merge(keys, on=KEYS)     # "not judged" where no distribution
    return pd.concat([named, prob], ignore_index=True).drop_duplicates(KEYS + ["class_type"])


# ---------------------------------------------------------------------------------------------- verdicts
NOTEBOOK = "06_multiverse"


def _undefined(df: pd.DataFrame) -> pd.Series:
    return pd.Series(np.where(df["estimate"].isna(), "no estimate in this universe", ""), index=df.index)


def decide_estimates(est: pd.DataFrame, check: pd.DataFrame | None, *, plan) -> pd.DataFrame:
    """The estimates table (one row per model x universe x metric) with the verdict columns of
    :mod:`biaslab.stats.verdict`; families: each model x metric's universes (Benjamini-Hochberg)."""
    spec = V.Effects(estimate="estimate", undefined=_undefined, screen_by=("model", "metric"))
    status = estimate_status(est, check) if check is not None and len(check) else None
    return V.decide(est, spec, "estimates", status, plan=plan, notebook=NOTEBOOK)


def decide_group_preference(gp: pd.DataFrame, check: pd.DataFrame | None, *, plan) -> pd.DataFrame:
    """The group-preference table (model x universe x class type x group) with the verdict columns; families:
    each model x universe's groups (Benjamini-Hochberg)."""
    spec = V.Effects(estimate="estimate", undefined=_undefined, screen_by=tuple(KEYS))
    status = group_status(gp, check) if check is not None and len(check) else None
    return V.decide(gp, spec, "group_preference", status, plan=plan, notebook=NOTEBOOK)
