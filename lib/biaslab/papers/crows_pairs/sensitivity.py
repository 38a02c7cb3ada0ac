"""Pre-specified sensitivity analyses of the CrowS-Pairs claims for the sampling weights (plan id
``sampling-weights``; rows of ``sensitivity.csv``, decided by :func:`biaslab.stats.reanalysis.decide`).

The primary analysis of ``lpbs-mean``, ``lpbs-other``, ``stereotype-share`` (notebook 3) and ``crows-en-share``
(notebook 5) weights a bias-type-stratified sample back to every pair of its file (:mod:`biaslab.stats.stratified`, no
finite-population correction). Two alternatives, each recomputed per instance from the pair scores:

* ``unweighted``: the stratified sample's plain mean (one-sample t), share (exact binomial, Clopper-Pearson) or paired
  difference (the paired rule of :func:`biaslab.stats.paired.paired_difference`) — the estimand of the sampled
  pairs, not of the file;
* ``fpc``: the stratified estimator with the finite-population correction (1 - n_h/N_h), the design-based
  (finite-population) reading of the same estimand.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from ...stats import hypothesis as hyp
from ...stats import paired
from ...stats import reanalysis as S
from ...stats.clustered import clopper_pearson
from ...stats.stratified import stratified_mean

EVENT = "sampling: the scored pairs are a bias-type-stratified sample of the file"
DESCRIPTIONS = {
    "primary": "stratified estimate weighted to the file's bias-type shares (W_h = N_h/N), no FPC; the claim's test "
               "(LPBS: t(Satterthwaite); the share: its sentence-swap randomization test)",
    "unweighted": "the stratified sample's pairs unweighted (estimand: the sampled pairs, not the file)",
    "fpc": "stratified estimate with the finite-population correction (1 - n_h/N_h), t(Satterthwaite)",
}
ANALYSES = ("unweighted", "fpc")


def _stratified(y, g, null, fpc):
    r = stratified_mean(y, g["stratum"], g["weight"], null=null, fpc=fpc)
    return {"estimate": r["estimate"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "p_value": r["p_value"]}


def _lpbs(g: pd.DataFrame, analysis: str) -> dict:
    d = g["d_norm_logprob"].to_numpy(float)
    if analysis == "fpc":
        return _stratified(d, g, 0.0, True)
    r = hyp.likelihood_test(d)
    half = stats.t.ppf(0.975, r["n"] - 1) * r["sd_d"] / np.sqrt(r["n"]) if r["n"] > 1 else np.nan
    return {"estimate": r["mean_d"], "ci_low": r["mean_d"] - half, "ci_high": r["mean_d"] + half, "p_value": r["t_p"]}


def _share(g: pd.DataFrame, analysis: str) -> dict:
    from ...benchmarks.crows_pairs import likelihood_preferences
    x = likelihood_preferences(g["logp_more"], g["logp_less"])
    if analysis == "fpc":             # the interval clipped to [0, 1], as the primary's
        r = _stratified(x, g, 0.5, True)
        return {**r, "ci_low": max(r["ci_low"], 0.0), "ci_high": min(r["ci_high"], 1.0)}
    r = hyp.preference_test(x)
    lo, hi = clopper_pearson(np.float64(r["k"]), np.float64(r["n"]))
    return {"estimate": r["pi_hat"], "ci_low": float(lo), "ci_high": float(hi), "p_value": r["binom_p"]}


#: notebook 3's claims: table, and each alternative's recomputation from pair_scores
NB3 = {"lpbs-mean": ("likelihood_tests", _lpbs), "lpbs-other": ("likelihood_tests", _lpbs),
       "stereotype-share": ("preference_tests", _share)}
ID = "sampling-weights"


def _rows(base: dict, results: Mapping[str, dict]) -> list[dict]:
    return [{**base, "analysis": a, "intercurrent_event": EVENT, "description": DESCRIPTIONS[a], **r}
            for a, r in results.items()]


def notebook3(pairs: pd.DataFrame, decided: Mapping[str, pd.DataFrame], *, plan) -> pd.DataFrame:
    """Notebook 3's decided rows: ``lpbs-mean``, ``lpbs-other`` and ``stereotype-share`` per model x dataset (the
    primary from the decided ``likelihood_tests`` / ``preference_tests``), each alternative recomputed from ``pairs``
    (``pair_scores``: d, log-probabilities, ``stratum``, ``weight``), for the claims whose plan lists
    ``sampling-weights``; decided under ``plan``."""
    out = []
    for claim_id, (name, compute) in NB3.items():
        t = decided.get(name)
        claim = next((c for c in plan.of("03_crows_pairs_bayes", name) if c.id == claim_id), None)
        if t is None or t.empty or claim is None or ID not in claim.sensitivity:
            continue
        for _, r in t[claim.mask(t)].iterrows():
            base = {"claim": claim_id, "family": r.get("family", ""), "instance": f"{r['model']} · {r['dataset']}",
                    **S.budget(r)}
            ci = claim.ci or (None, None)
            out += _rows(base, {S.PRIMARY: {"estimate": r[claim.estimate], "ci_low": r.get(ci[0], np.nan),
                                            "ci_high": r.get(ci[1], np.nan),
                                            "p_value": r[claim.p] if S.in_graph(r.get("verdict")) else np.nan}})
            if r.get("verdict") in S.TESTED:
                g = pairs[(pairs["model"] == r["model"]) & (pairs["dataset"] == r["dataset"])]
                out += _rows(base, {a: compute(g, a) for a in ANALYSES})
    if not out:
        return pd.DataFrame(columns=S.COLUMNS)
    return S.decide(pd.DataFrame(out), plan=plan)


def paired_rows(responses: pd.DataFrame, pairs: pd.DataFrame, metric: str = "crows_en_stereotype_preferred"
                ) -> list[dict]:
    """Notebook 5's undecided alternative rows of ``crows-en-share`` (its primary is the decided
    ``paired_differences`` row): ``responses`` the metric's per-pair responses of every model
    (:func:`biaslab.papers.compare.unit_responses`: ``unit``, ``stereotype_preferred``, ``stratum``, ``weight``),
    ``pairs`` the decided ``paired_differences``; tested rows only."""
    sel = pairs[(pairs["metric"] == metric) & pairs["verdict"].isin(S.TESTED)] if len(pairs) else pairs
    if sel.empty or responses.empty or "weight" not in responses:
        return []
    out = []
    for _, r in sel.iterrows():
        a, b = r["model_a"], r["model_b"]
        both = responses[responses["model"].isin([a, b])]
        res = {}
        for an in ANALYSES:
            if an == "fpc":
                x = paired.stratified_paired_difference(both, "stereotype_preferred", a, b, unit="unit", fpc=True)
            else:
                ok = both[both["stereotype_preferred"].notna()]
                x = paired.paired_difference(ok, "stereotype_preferred", a, b, "pair_id", unit="unit", binary=True)
            res[an] = {"estimate": x["difference"], "ci_low": x["ci_low"], "ci_high": x["ci_high"],
                       "p_value": x["p_value"]}
        base = {"claim": r["claim"], "family": r["family"], "instance": f"{metric} · {a} - {b}", **S.budget(r)}
        out += _rows(base, res)
    return out
