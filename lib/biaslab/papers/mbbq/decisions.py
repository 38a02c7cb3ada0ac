"""Notebook 7's decisions (the verdict layer, :mod:`biaslab.stats.verdict`): the analysis plan's claims for
``07_mbbq`` decide their rows of ``metrics`` (English ambiguous bias score, prompt p2) and ``adjusted_contrasts``
(each language minus English at equal control-set accuracy: in notebook 7 a labelled sensitivity analysis, decided
because the plan declares it), one family per model; every other row is exploratory.

**Responders.** Every metric reads the answer (the option chosen): a model whose answers in a language are
degenerate (:func:`biaslab.stats.responders.responder_check`, per model x language, bias set) is flagged on that
language's rows; a language where the instrument fails its checks (notebook 7's validity rows,
:func:`biaslab.stats.validity.responder_rows`) is "not measurable" there; a contrast is excluded when either of its
languages is.

**Sensitivity** (:func:`sensitivity`, ``sensitivity.csv``; the analyses each claim lists in the plan): the claims
re-decided with the items unweighted (the sampled items' estimand instead of every MBBQ item's), and the adjusted
contrast replaced by the unadjusted paired contrast (``contrasts``: bias set, all categories). Every row is decided
by :func:`biaslab.stats.reanalysis.decide`.
"""

from __future__ import annotations

import pandas as pd

from ...stats import responders as R
from ...stats import reanalysis as S
from ...stats import verdict as V
from . import analysis as A

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
    """(per model x language, per model x contrast language): a contrast is excluded (degenerate or not measurable)
    when either language is."""
    own = V.responder_status(check, ("model", "language"))
    ref = own[own["language"] == A.REFERENCE].set_index("model")["responder_status"]
    pair = own.assign(responder_status=[s if V.excluded(s) else ref.get(m, s) for m, s in
                                        zip(own["model"], own["responder_status"])])
    return own, pair


def _in_range(t: pd.DataFrame, difference: bool) -> pd.DataFrame:
    """``t`` with each claim's interval at its adjusted level (``ci_adj_low``, ``ci_adj_high``: the t interval dual
    to its test) intersected with the values its metric (or a difference of two: ``difference``) can take, as
    :func:`biaslab.papers.mbbq.analysis.bounded` does at 95 %."""
    if "ci_adj_low" not in t or not len(t):
        return t
    t = t.copy()
    lo, hi = (t["metric"].map(lambda m, i=i: A.RANGE[m][i]) for i in (0, 1))
    if difference:
        lo, hi = lo - hi, hi - lo
    cut = (t["ci_adj_low"] < lo) | (t["ci_adj_high"] > hi)
    t["ci_adj_low"], t["ci_adj_high"] = t["ci_adj_low"].clip(lower=lo), t["ci_adj_high"].clip(upper=hi)
    t.loc[cut, "ci_adj_note"] = t.loc[cut, "ci_adj_note"] + "; intersected with the metric's range"
    return t


def decide(metrics: pd.DataFrame, adjusted: pd.DataFrame, check: pd.DataFrame, *, plan) -> dict[str, pd.DataFrame]:
    """Verdict columns for ``metrics`` and ``adjusted_contrasts`` (the plan's claims share a family per model),
    every interval inside its metric's range."""
    own, pair = _status(check)
    tables = {"metrics": (metrics, METRICS, own)}
    if len(adjusted) and "adjusted" in adjusted:
        tables["adjusted_contrasts"] = (adjusted, ADJUSTED, pair)
    out = V.decide_tables(tables, NOTEBOOK, plan=plan)
    return {k: _in_range(t, k == "adjusted_contrasts") for k, t in out.items()}


def sensitivity(responses: pd.DataFrame, metrics: pd.DataFrame, adjusted: pd.DataFrame, contrasts: pd.DataFrame,
                check: pd.DataFrame, seed: int = 0, *, plan) -> pd.DataFrame:
    """``sensitivity.csv`` rows of the plan's claims (module docstring): the decided ``metrics`` and ``adjusted``
    as primaries, each alternative recomputed from ``responses`` (or read from ``contrasts``), decided under
    ``plan``."""
    flat = responses.drop(columns=["weight"])                 # pseudo-values then weight every item alike
    amb = flat[(flat["set"] == "bias") & (flat["context_condition"] == "ambig")]
    unweighted = decide(A.metric_table(amb, seed), A.adjusted_contrasts(flat), check, plan=plan)
    pooled = contrasts[(contrasts["set"] == "bias") & (contrasts["category"] == "all")]
    plain = decide(metrics, pooled.rename(columns={"estimate": "adjusted"}).assign(null_value=0.0), check, plan=plan)
    analyses = {"unweighted items": ("design weights", "the sampled items weighted alike (estimand: the sampled "
                                     "items, not every MBBQ item)", unweighted),
                "no control-accuracy adjustment": ("control-set accuracy", "the paired contrast of the bias set, all "
                                                   "categories, template-clustered (contrasts.csv)", plain)}
    keys = {"metrics": ["model", "metric", "language", "set", "category"],
            "adjusted_contrasts": ["model", "metric", "language"]}
    rows = []
    for name, t in (("metrics", metrics), ("adjusted_contrasts", adjusted)):
        for c in plan.of(NOTEBOOK, name):
            if set(c.sensitivity) - set(analyses):
                raise ValueError(f"analysis plan, notebook {NOTEBOOK}, claim {c.id!r}: unknown sensitivity analysis "
                                 f"{sorted(set(c.sensitivity) - set(analyses))}; known: {list(analyses)}")
            alt = [S.Analysis(a, *analyses[a][:2], analyses[a][2].get(name, t.iloc[:0])) for a in c.sensitivity]
            rows.append(S.rows(t, alt, [c], keys[name]))
    rows = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return S.decide(rows, plan=plan) if len(rows) else pd.DataFrame(columns=S.COLUMNS)
