"""The pre-specified sensitivity analyses of notebook 2's claim ``calm-eq1`` (``sensitivity.csv``; rows collected by
:func:`biaslab.stats.reanalysis.rows`, decided by :func:`biaslab.stats.reanalysis.decide`): the claim re-decided on the
templates every model keeps (the discard rules leave the models on different templates), with no task-level discard
rule, with a stricter degenerate-responder check and with none. Each recomputes the eq.-1 excess over its permutation
floor exactly as the primary analysis does (:func:`.bias.score_table`), with the same permutations (seed); each
alternative's p is swapped into the claim's family of primaries at its budget (one rule for every notebook).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...stats import reanalysis as S
from . import bias as cb
from . import decisions as D

#: a stricter answer check than :data:`biaslab.stats.responders.THRESHOLDS` (modal answer, answer entropy,
#: unparseable share)
STRICT = {"modal_share_max": 0.90, "answer_entropy_min": 0.30, "unparseable_share_max": 0.25}
KEYS = ["model", "variant", "task", "bias_type"]


def common_templates(result: cb.BiasResult) -> list[str]:
    """The templates every model of ``result`` keeps for both bias types (its ``used`` column)."""
    t = result.templates
    kept = t.groupby(["template_id", "model"])["used"].all().unstack("model")
    return sorted(kept.index[kept.fillna(False).astype(bool).all(axis=1)])


def sensitivity(resp: pd.DataFrame, primary: pd.DataFrame, n_perm: int, seed: int = 0, *, plan) -> pd.DataFrame:
    """``sensitivity.csv`` rows of ``calm-eq1``: the decided ``primary`` ``bias_scores`` and four alternatives,
    decided under ``plan``."""
    claims = plan.of(D.NOTEBOOK, "bias_scores")
    check = D.answer_check(resp)
    paper = cb.bias_scores(resp, "paper")

    def decided(df, result, chk):
        return D.decide(cb.score_table(df, {"paper": result}, n_perm=n_perm, seed=seed, check=chk), chk, plan=plan)

    keep = common_templates(paper)
    sub = resp[resp["template_id"].isin(keep)]
    no_rule = {"near_zero": 0.0, "same_output": np.inf}
    strict = D.answer_check(resp, STRICT)
    analyses = [
        S.Analysis("common templates", "discard rules",
                   f"only the {len(keep)} templates every model keeps, no further discard",
                   # no template kept by every model: nothing to score (its rows say "not tested")
                   decided(sub, cb.bias_scores(sub, "paper", **no_rule), check) if keep else primary.iloc[:0]),
        S.Analysis("no task discard", "discard rules",
                   "no task discarded (near-zero accuracy and same-output rules off; templates with a zero "
                   "baseline stay undefined)", decided(resp, cb.bias_scores(resp, "paper", **no_rule), check)),
        S.Analysis("stricter responder check", "degenerate responder",
                   "degenerate when " + ", ".join(f"{k} {v}" for k, v in STRICT.items()),
                   decided(resp, paper, strict)),
        S.Analysis("no responder check", "degenerate responder", "every model tested", decided(resp, paper, None)),
    ]
    return S.decide(S.rows(primary, analyses, claims, KEYS), plan=plan)
