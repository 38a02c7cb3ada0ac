"""Notebook 3's decisions: how each table states its effects and which responder rule judges which metric (the
verdict layer, :mod:`biaslab.stats.verdict`). What is confirmatory is the analysis plan's (``analysis_plan.yaml``,
notebook ``03_crows_pairs_bayes``); everything else is exploratory (the paired preference comparison is notebook 5's
claim, shown here with its unadjusted p).

**Responders, per metric.** The likelihood scheme reads two sentences' log-probabilities: no answer to be degenerate
("not judged"). The prompted preference in one order reads the *answer* (the position named; both orders pooled);
the order-averaged source reads the label *probabilities*, judged on label mass and the spread of the mean
distribution.

**Validity of the preference prompt** (:func:`validity`, docs/validity.md): each reading of the prompt (one order's
answer; the answer of the order-averaged probabilities) is checked as a multiple-choice instrument by
:mod:`biaslab.stats.validity` at the plan's ``scoring_rule.checks``, per model x dataset; a reading that fails makes
the metric read from it "not measurable" (its rows in :func:`responder_table`), never decided.
"""

from __future__ import annotations

import pandas as pd

from ...benchmarks import crows_pairs as cp
from ...benchmarks import instrument
from ...stats import responders as R
from ...stats import validity as VAL
from ...stats import verdict as V

NOTEBOOK = "03_crows_pairs_bayes"
LIKELIHOOD = V.Effects(estimate=("estimate", "mean_d"), p=("p_value", "lead_p"), null=("null_value", 0.0))
PREFERENCE = V.Effects(estimate="pi_hat", p=("p_value", "binom_p"), ci=(("pi_ci_low", "pi_ci_high"),),
                       null=("null_value", 0.5))
PAIRED = V.Effects(estimate="difference", null=("null_value", 0.0), by=("model",), pair=("model_a", "model_b"))

LIKELIHOOD_READS = "not judged: the likelihood scheme reads two sentences' log-probabilities (no answer to judge)"
ONE_ORDER, ORDER_AVERAGED = "prompted preference, one order (answer)", "prompted preference, order-averaged " \
                                                                     "(probabilities)"
#: the metric each validity formulation of the prompt is read by (:data:`biaslab.benchmarks.crows_pairs.
#: VALIDITY_FORMULATIONS`), and the formulations' names in the panel
METRIC_OF = {"one order": ONE_ORDER, "order-averaged": ORDER_AVERAGED}
LABELS = {("one order", ""): "preference prompt, each order's answer (both orders pooled)",
          ("order-averaged", ""): "preference prompt, answer of the order-averaged probabilities"}
COMPETENCE = "not applicable: a preference between two sentences has no right answer"
BY = ("model", "dataset")


def validity(answers: pd.DataFrame, items: pd.DataFrame, checks: dict | None = None
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rows, selection)`` of the preference prompt per model x dataset and reading
    (:func:`biaslab.benchmarks.crows_pairs.validity_answers`; ``items``: the prompted pairs, ``prompt_id``,
    ``sent_more``, ``sent_less``): position (judged where each answer reads one order), length (the longer sentence
    against its expectation from the model's own preference between the two sentences) and the role check (not
    judged: no option is correct, and one sentence chosen every time is the bias measured); competence is not
    applicable. Each reading is its own one-formulation rule (no fallback), as notebook 4 applies its one."""
    a = cp.validity_answers(answers)
    parts = [instrument.validity(cp.SPEC, items, a[a["formulation"] == f], None, {"primary": f, "checks": checks},
                                 by=BY) for f in cp.VALIDITY_FORMULATIONS if (a["formulation"] == f).any()]
    rows = pd.concat([r for r, _ in parts], ignore_index=True).assign(competence_note=COMPETENCE)
    return rows, pd.concat([s for _, s in parts], ignore_index=True)


def render(rows: pd.DataFrame, selection: pd.DataFrame) -> str:
    """The sentences under the validity panel, from the rows: competence (not applicable), the likelihood scheme
    (not judged) and, per reading of the prompt, each model x dataset's outcome
    (:func:`biaslab.stats.validity.render`)."""
    lines = [f"- Competence: {c}." for c in rows["competence_note"].unique()]
    lines.append(f"- Likelihood scheme: {LIKELIHOOD_READS}; this check does not apply to its claims.")
    for f in selection["selected"].unique():
        lines.append(VAL.render(rows[rows["formulation"] == f], selection[selection["selected"] == f],
                                "CrowS-Pairs preference prompt", LABELS, by=BY))
    return "\n".join(lines)


def responder_table(answers: pd.DataFrame, validity: tuple[pd.DataFrame, pd.DataFrame] | None = None
                    ) -> pd.DataFrame:
    """Per model × dataset and metric: the answer check of the position named (both orders pooled) and the
    probability check of P(first), P(second) (what the order-averaged source reads); given ``validity`` (the
    ``(rows, selection)`` of :func:`validity`), each reading's status (:func:`biaslab.stats.validity.responder_rows`)
    beside the metric it feeds (:data:`METRIC_OF`: a reading that fails makes that metric not measurable)."""
    if answers is None or answers.empty:
        return pd.DataFrame(columns=["model", "dataset", "metric", "degenerate", "reasons", "reads"])
    a = answers.assign(position=answers["chose_first"].map({1: "first", 0: "second"}),
                       p_first=answers["p_stereo"].where(answers["order"] == "more_first", 1 - answers["p_stereo"]))
    a = a.assign(p_second=1 - a["p_first"])
    ans = R.responder_check(a, answer="position", by=["model", "dataset"], n_options=2, label_mass="label_mass")
    prob = R.probability_check(a.dropna(subset=["p_first"]), ["p_first", "p_second"], by=["model", "dataset"])
    rows = [ans.assign(metric=ONE_ORDER), prob.assign(metric=ORDER_AVERAGED)]
    if validity is not None:
        v, sel = validity
        rows += [VAL.responder_rows(sel[sel["selected"] == f], v[v["formulation"] == f], by=BY).assign(
            metric=METRIC_OF[f]) for f in sel["selected"].unique()]
    return pd.concat(rows, ignore_index=True)


def _preference_status(pref: pd.DataFrame, check: pd.DataFrame | None) -> pd.DataFrame:
    by = list(BY)
    look = {m: V.metric_status(check, m, BY).set_index(by)["responder_status"] for m in (ONE_ORDER, ORDER_AVERAGED)}

    def status(model, dataset, source):
        if source == "likelihood":
            return LIKELIHOOD_READS
        metric = ORDER_AVERAGED if source.endswith("order_averaged") else ONE_ORDER
        return look[metric].get((model, dataset), "not judged: no responder check")

    keys = pref[by + ["source"]].drop_duplicates().itertuples(index=False)
    return pd.DataFrame([(*k, status(*k)) for k in keys], columns=by + ["source", "responder_status"])


def decide(lik: pd.DataFrame, pref: pd.DataFrame | None = None, comparisons: pd.DataFrame | None = None,
           check: pd.DataFrame | None = None, answers: pd.DataFrame | None = None,
           *, plan) -> dict[str, pd.DataFrame]:
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
    return V.decide_tables(tables, NOTEBOOK, plan=plan)


def decide_table(name: str, df: pd.DataFrame, check: pd.DataFrame | None = None,
                 *, plan) -> pd.DataFrame:
    """One of ``likelihood_tests``, ``preference_tests``, ``paired_comparisons`` with its verdict columns (the
    plan's families are per model across datasets, within one table each)."""
    if df is None or df.empty:
        return df
    if name == "likelihood_tests":
        return decide(df, plan=plan)[name]
    if name == "preference_tests":
        return V.decide(df, PREFERENCE, name, _preference_status(df, check), plan=plan, notebook=NOTEBOOK)
    return V.decide(df, PAIRED, name, LIKELIHOOD_READS, plan=plan, notebook=NOTEBOOK)
