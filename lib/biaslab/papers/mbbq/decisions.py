"""Notebook 7's decisions (the verdict layer, :mod:`biaslab.stats.verdict`): the analysis plan's claims for
``07_mbbq`` decide their rows of ``metrics`` (English ambiguous bias score) and ``adjusted_contrasts`` (each
language minus English at equal control-set accuracy), one family per model; every other row is exploratory.

**Responders.** Every metric reads the answer (the option chosen): a model whose answers in a language are
degenerate (:func:`biaslab.stats.responders.responder_check`, per model x language, bias set) is flagged on that
language's rows, and a contrast is degenerate when either of its languages is.
"""

from __future__ import annotations

import pandas as pd

from ...stats import responders as R
from ...stats import verdict as V
from .analysis import REFERENCE

NOTEBOOK = "07_mbbq"
METRICS = V.Effects(estimate="estimate", null=("null_value", 0.0), screen_by=("metric",))
ADJUSTED = V.Effects(estimate="adjusted", null=("null_value", 0.0), screen_by=("metric",))


def responder_table(responses: pd.DataFrame) -> pd.DataFrame:
    """The answer check per model x language on the bias set (the option position chosen; -1, no option, as
    unparsed)."""
    b = responses[responses["set"] == "bias"]
    return R.responder_check(b.assign(position=b["choice"].where(b["choice"] >= 0)), answer="position",
                             by=["model", "language"], n_options=3)


def _status(check: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per model x language, per model x contrast language): a contrast is degenerate when either language is."""
    own = V.responder_status(check, ("model", "language"))
    ref = own[own["language"] == REFERENCE].set_index("model")["responder_status"]
    pair = own.assign(responder_status=[s if s.startswith("degenerate") else ref.get(m, s) for m, s in
                                        zip(own["model"], own["responder_status"])])
    return own, pair


def decide(metrics: pd.DataFrame, adjusted: pd.DataFrame, check: pd.DataFrame, *, plan) -> dict[str, pd.DataFrame]:
    """Verdict columns for ``metrics`` and ``adjusted_contrasts`` (the plan's claims share a family per model)."""
    own, pair = _status(check)
    tables = {"metrics": (metrics, METRICS, own)}
    if len(adjusted) and "adjusted" in adjusted:
        tables["adjusted_contrasts"] = (adjusted, ADJUSTED, pair)
    return V.decide_tables(tables, NOTEBOOK, plan=plan)
