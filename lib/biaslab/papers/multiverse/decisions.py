"""Notebook 6's decisions: its families, and which responder rule judges which metric in each universe (the verdict
layer, :mod:`biaslab.stats.verdict`, as in notebooks 1-5).

**Exploratory only.** The analysis plan (``analysis_plan.yaml``) gives notebook 6 no claim: the universes are
alternative analyses of questions the other notebooks decide. Each model x metric's universes form one
Benjamini-Hochberg screen (the agentic group preference: one per model x universe), shown, never decided; robustness
is not read from these screens but from each universe's equivalence to the paper's protocol
(:func:`biaslab.papers.multiverse.analysis.equivalence_to_paper`).

**Responders, per metric and universe** (:mod:`biaslab.stats.responders`, thresholds stated there; the rules of the
notebooks whose metric it is):

* BBQ's bias scores read the *answer*: the answer check of the option chosen (no option: unparseable), per model x
  universe, both contexts pooled (notebook 1's check);
* CrowS-Pairs' stereotype preference, in a likelihood universe, reads two sentences' log-probabilities: not judged
  (notebook 3's rule); in a prompted universe (label distribution, generated label) it reads the *position* named:
  the answer check over the two positions (notebook 3's one-order rule). A model naming one position for every pair
  gives an estimate of exactly 0 or 1 that restates the order the sentences were shown in;
* the agentic mean entropy and, in the distribution formats, the group preference read the *probabilities*: the
  probability check of the slot probabilities per number of choices k (notebook 4's rule); in the generated and
  open-ended formats the group preference reads the group named: the answer check per class type (notebook 4's
  top-answer-by-group rule), and the entropy is undefined (no distribution).

A universe degenerate for a metric keeps its row, with ``responder_status`` "degenerate: <reason>" and the verdict
"not tested (degenerate responder: ...)"; :func:`biaslab.papers.multiverse.analysis.equivalence_to_paper` marks it
"not judged" rather than agreeing or disagreeing with the paper's universe.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...stats import responders as R
from ...stats import verdict as V

#: notebook 3's rule for its likelihood scheme (``papers/crows_pairs/decisions.py``; a paper's glue imports no other's)
LIKELIHOOD_READS = "the likelihood scheme reads two sentences' log-probabilities (no answer to judge)"
BBQ_ANSWER = "BBQ: option chosen (answer)"
CROWS_POSITION = "CrowS-Pairs prompted: position named (answer)"
CROWS_LIKELIHOOD = "CrowS-Pairs likelihood (log-probabilities)"
AGENTIC_PROBABILITIES = "agentic: slot probabilities"
AGENTIC_GROUP = "agentic: group named (answer)"
#: which responder rows judge each metric (agentic group preference: by answer format, see ``_gp_status``)
READS = {"bbq_bias_ambig": BBQ_ANSWER, "bbq_bias_disambig": BBQ_ANSWER,
         "crows_en_stereotype_preferred": (CROWS_LIKELIHOOD, CROWS_POSITION),
         "agentic_mean_entropy": AGENTIC_PROBABILITIES}
DISTRIBUTION_FORMATS = ("label_dist", "option_ll")
NO_DISTRIBUTION = "this format gives no distribution (the entropy is undefined)"
KEYS = ["model", "universe"]


# --------------------------------------------------------------------------------------------- responder rows
def _bbq(d: pd.DataFrame) -> pd.DataFrame:
    chosen = d.assign(option=d["choice"].where(d["choice"] >= 0))       # -1: no option named (unparseable)
    return R.responder_check(chosen, answer="option", by=KEYS, n_options=3).assign(metric=BBQ_ANSWER)


def _crows(d: pd.DataFrame) -> pd.DataFrame:
    lik = d["answer_format"] == "likelihood"
    rows = [R.not_judged(d.loc[lik, KEYS], LIKELIHOOD_READS).assign(
        metric=CROWS_LIKELIHOOD)]
    p = d[~lik]
    if len(p):
        # the positions named: one per order asked (``chose_first`` is their mean when both orders were asked)
        both = (p["order"] == "both").to_numpy()
        cf = p["chose_first"].to_numpy(float)
        pos = lambda hit: np.where(np.isnan(cf), None, np.where(hit, "first", "second"))
        asked = pd.concat([p.assign(position=pos(cf >= 0.5)), p[both].assign(position=pos(cf == 1)[both])])
        rows.append(R.responder_check(asked, answer="position", by=KEYS, n_options=2).assign(metric=CROWS_POSITION))
    return pd.concat(rows, ignore_index=True)


def _agentic(d: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    d = d.drop(columns=[c for c in ("k", "class_type") if c in d]).merge(
        items[["prompt_id", "k", "class_type"]], on="prompt_id", how="left")
    dist = d["answer_format"].isin(DISTRIBUTION_FORMATS)
    # option log-likelihoods are renormalized over the choices: no next-token label mass to judge (the per-prompt
    # column there is exp(logsumexp) of mean per-token log-probabilities, not a probability)
    d.loc[d["answer_format"] == "option_ll", "label_mass"] = np.nan
    probs = [c for c in d.columns if c.startswith("p_") and c[2:].isdigit()]
    rows = []
    for k, part in d[dist].groupby("k"):
        rows.append(R.probability_check(part, probs, by=KEYS).assign(k=int(k), metric=AGENTIC_PROBABILITIES))
    for (ct, k), part in d[~dist].groupby(["class_type", "k"]):
        rows.append(R.responder_check(part, answer="top_group", by=KEYS, n_options=int(k)).assign(
            class_type=ct, k=int(k), metric=AGENTIC_GROUP))
    if (~dist).any():
        rows.append(R.not_judged(d.loc[~dist, KEYS], NO_DISTRIBUTION).assign(metric=AGENTIC_PROBABILITIES))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=KEYS + ["metric"])


def responder_table(responses: dict, items: dict) -> pd.DataFrame:
    """Per model x universe (agentic answers: x class type) and what a metric reads (``metric``): the check's row
    (``degenerate``, ``reasons``, ``reads`` and its measures). ``responses`` and ``items``: benchmark -> table."""
    make = {"bbq": _bbq, "crows_pairs": _crows, "agentic": lambda d: _agentic(d, items["agentic"])}
    rows = [make[b](d) for b, d in responses.items() if b in make and len(d)]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=KEYS + ["metric"])


# ------------------------------------------------------------------------------------------ status per row
def _status(check: pd.DataFrame, reads, by=KEYS) -> pd.DataFrame:
    keys = (reads,) if isinstance(reads, str) else reads
    parts = [V.metric_status(check, r, by) for r in keys]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(by) + ["responder_status"])


def estimate_status(est: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """``model``, ``universe``, ``metric``, ``responder_status`` for the rows of the estimates table."""
    rows = [_status(check, reads).assign(metric=met) for met, reads in READS.items() if met in set(est["metric"])]
    return pd.concat(rows, ignore_index=True) if rows else None


def group_status(gp: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """``model``, ``universe``, ``class_type``, ``responder_status`` for the group-preference rows: the probability
    check where the universe gives a distribution, the group-named check per class type where it does not."""
    keys = gp[KEYS + ["class_type"]].drop_duplicates()
    named = _status(check, AGENTIC_GROUP, KEYS + ["class_type"])
    prob = _status(check, AGENTIC_PROBABILITIES).merge(keys, on=KEYS)     # "not judged" where no distribution
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
