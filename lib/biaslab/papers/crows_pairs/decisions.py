"""Notebook 3's decisions: which tests are its headline, how each table states its effects, and which responder
rule judges which metric (the verdict layer, :mod:`biaslab.stats.verdict`).

**Confirmatory family** (Holm): the likelihood scheme's pooled LPBS (eq. 3, all bias types) per model × dataset —
the paper's headline test (§4.2). Everything else is exploratory (Benjamini–Hochberg within its table): LPBS per
bias type and the other scores (eqs. 2 and 4), the preference scheme, the paired model comparisons.

**Responders, per metric.** The likelihood scheme reads two sentences' log-probabilities: there is no answer to be
degenerate ("not judged"). The prompted preference in one order reads the *answer* (the position named; both orders
pooled): a model that always names the second sentence is degenerate for it. The order-averaged source reads the
label *probabilities* of the two orders, judged on their label mass and the spread of the mean distribution.
"""

from __future__ import annotations

import pandas as pd

from ...stats import hypothesis as hyp
from ...stats import responders as R
from ...stats import verdict as V

CONFIRMATORY = V.Family("03 · LPBS (eq. 3), all bias types pooled, per model × dataset", V.CONFIRMATORY,
                        lambda d: (d["bias_type"] == hyp.OVERALL) & (d["score"] == "norm_logprob"))
LIKELIHOOD = V.Effects(estimate=("estimate", "mean_d"), p=("p_value", "lead_p"), null=("null_value", 0.0),
                       families=(CONFIRMATORY,),
                       default=V.Family("03 · likelihood scheme: bias types and other scores", V.EXPLORATORY))
PREFERENCE = V.Effects(estimate="pi_hat", p=("p_value", "binom_p"), ci=(("pi_ci_low", "pi_ci_high"),),
                       null=("null_value", 0.5),
                       families=(V.Family("03 · preference scheme (π vs 0.5), all bias types pooled", V.EXPLORATORY,
                                          {"bias_type": hyp.OVERALL}),),
                       default=V.Family("03 · preference scheme (π vs 0.5), by bias type", V.EXPLORATORY))
PAIRED = V.Effects(estimate="difference", null=("null_value", 0.0), by=("model",), pair=("model_a", "model_b"),
                   default=V.Family("03 · paired model comparisons", V.EXPLORATORY))

LIKELIHOOD_READS = "not judged: the likelihood scheme reads two sentences' log-probabilities (no answer to judge)"
ONE_ORDER, ORDER_AVERAGED = "prompted preference, one order (answer)", "prompted preference, order-averaged " \
                                                                     "(probabilities)"


def responder_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Per model × dataset and metric: the answer check of the position named (both orders pooled) and the
    probability check of P(first), P(second) (what the order-averaged source reads)."""
    if answers is None or answers.empty:
        return pd.DataFrame(columns=["model", "dataset", "metric", "degenerate", "reasons", "reads"])
    a = answers.assign(position=answers["chose_first"].map({1: "first", 0: "second"}),
                       p_first=answers["p_stereo"].where(answers["order"] == "more_first", 1 - answers["p_stereo"]))
    a = a.assign(p_second=1 - a["p_first"])
    ans = R.responder_check(a, answer="position", by=["model", "dataset"], n_options=2, label_mass="label_mass")
    prob = R.probability_check(a.dropna(subset=["p_first"]), ["p_first", "p_second"], by=["model", "dataset"])
    return pd.concat([ans.assign(metric=ONE_ORDER), prob.assign(metric=ORDER_AVERAGED)], ignore_index=True)


def _preference_status(pref: pd.DataFrame, check: pd.DataFrame | None) -> pd.DataFrame:
    keys = pref[["model", "dataset", "source"]].drop_duplicates()
    one = V.metric_status(check, ONE_ORDER, ("model", "dataset")).set_index(["model", "dataset"])["responder_status"]
    avg = V.metric_status(check, ORDER_AVERAGED, ("model", "dataset")).set_index(["model", "dataset"])[
        "responder_status"]
    rows = []
    for r in keys.itertuples(index=False):
        if r.source == "likelihood":
            s = LIKELIHOOD_READS
        else:
            s = (avg if r.source.endswith("order_averaged") else one).get((r.model, r.dataset),
                                                                           "not judged: no responder check")
        rows.append({"model": r.model, "dataset": r.dataset, "source": r.source, "responder_status": s})
    return pd.DataFrame(rows, columns=["model", "dataset", "source", "responder_status"])


def decide(lik: pd.DataFrame, pref: pd.DataFrame | None = None, comparisons: pd.DataFrame | None = None,
           check: pd.DataFrame | None = None, answers: pd.DataFrame | None = None,
           alpha: float = V.ALPHA) -> dict[str, pd.DataFrame]:
    """Verdict columns for ``likelihood_tests``, ``preference_tests`` and ``paired_comparisons``. ``check``: the
    per-metric responder table (:func:`responder_table`); computed from ``answers`` when it is missing or has no
    ``metric`` column (tables written before responders were judged per metric)."""
    if (check is None or "metric" not in check) and answers is not None and len(answers):
        check = responder_table(answers)
    tables = {"likelihood_tests": (lik, LIKELIHOOD, LIKELIHOOD_READS)}
    if pref is not None and len(pref):
        tables["preference_tests"] = (pref, PREFERENCE, _preference_status(pref, check))
    if comparisons is not None and len(comparisons):
        tables["paired_comparisons"] = (comparisons, PAIRED, LIKELIHOOD_READS)
    return V.decide_tables(tables, alpha)


def decide_table(name: str, df: pd.DataFrame, check: pd.DataFrame | None = None,
                 alpha: float = V.ALPHA) -> pd.DataFrame:
    """One of ``likelihood_tests``, ``preference_tests``, ``paired_comparisons`` with its verdict columns (each
    table's families lie within it)."""
    if df is None or df.empty:
        return df
    if name == "likelihood_tests":
        return decide(df, alpha=alpha)[name]
    if name == "preference_tests":
        return V.decide(df, PREFERENCE, name, _preference_status(df, check), alpha=alpha)
    return V.decide(df, PAIRED, name, LIKELIHOOD_READS, alpha=alpha)
