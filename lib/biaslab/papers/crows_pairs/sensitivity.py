"""Pre-specified sensitivity analyses of the CrowS-Pairs claims for the sampling weights (``sensitivity.csv``).

The primary analysis of ``lpbs-mean``, ``stereotype-share`` (notebook 3) and ``crows-en-share`` (notebook 5)
weights a bias-type-balanced sample back to every pair of its file (:mod:`biaslab.stats.stratified`, no
finite-population correction). Two alternatives, each applied to every instance of the claim at once and decided by
the same verdict layer (the same families and adjustment as the primary rows):

* ``unweighted``: the balanced sample's plain mean (one-sample t), share (exact binomial, Clopper-Pearson) or paired
  difference (the paired rule of :func:`biaslab.stats.paired.paired_difference`) — the estimand of the sampled
  pairs, not of the file;
* ``fpc``: the stratified estimator with the finite-population correction (1 - n_h/N_h), the design-based
  (finite-population) reading of the same estimand.

Rows follow the agreed schema :data:`COLUMNS`, the primary analysis included as ``analysis = primary``.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from ... import plan as P
from ...stats import hypothesis as hyp
from ...stats import paired
from ...stats.intervals import clopper_pearson
from ...stats.stratified import stratified_mean

COLUMNS = ["claim", "family", "instance", "analysis", "intercurrent_event", "description", "estimate", "ci_low",
           "ci_high", "p_value", "p_adjusted", "verdict", "primary_verdict", "verdict_survives"]
EVENT = "sampling: the scored pairs are a bias-type-balanced sample of the file"
DESCRIPTIONS = {
    "primary": "stratified estimate weighted to the file's bias-type shares (W_h = N_h/N), no FPC, t(Satterthwaite)",
    "unweighted": "the balanced sample's pairs unweighted (estimand: the sampled pairs, not the file)",
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


#: notebook 3's claims: table, how its rows are read, and each alternative's recomputation from pair_scores
NB3 = {"lpbs-mean": ("likelihood_tests", _lpbs), "stereotype-share": ("preference_tests", _share)}


def _decide_with(tables: Mapping[str, pd.DataFrame], alt: pd.DataFrame, analysis: str,
                 redecide: Callable[[dict], dict]) -> dict:
    """The tables with every claim row's estimate, interval and p replaced by ``analysis``'s, re-decided."""
    plan = P.active()
    copies = {k: v.copy() for k, v in tables.items()}
    for r in alt[alt["analysis"] == analysis].itertuples(index=False):
        claim = next(c for c in plan.claims if c.id == r.claim)
        t = copies[r.table]
        cols = {claim.estimate: r.estimate, claim.p: r.p_value}
        if claim.ci:
            cols.update({claim.ci[0]: r.ci_low, claim.ci[1]: r.ci_high})
        for c, v in cols.items():
            t.loc[r.row, c] = v
    return redecide(copies)


def sensitivity_table(tables: Mapping[str, pd.DataFrame], alternatives: pd.DataFrame,
                      redecide: Callable[[dict], dict], instance: Callable[[Mapping], str]) -> pd.DataFrame:
    """``sensitivity.csv`` rows from decided ``tables`` (name -> table with verdict columns), the alternatives
    (claim, table, row, analysis, estimate, ci_low, ci_high, p_value: one per claim row and analysis) and
    ``redecide`` (tables -> decided tables: the notebook's own verdict call). ``instance`` names a row."""
    plan = P.active()
    out = []
    decided = {a: _decide_with(tables, alternatives, a, redecide) for a in ANALYSES}
    for (claim_id, name), alt in alternatives.groupby(["claim", "table"], sort=False):
        claim = next(c for c in plan.claims if c.id == claim_id)
        for row in alt["row"].unique():
            prim = tables[name].loc[row]
            base = {"claim": claim_id, "family": prim.get("family", ""), "instance": instance(prim),
                    "intercurrent_event": EVENT, "primary_verdict": prim.get("verdict", "")}
            ci = claim.ci or (None, None)
            out.append({**base, "analysis": "primary", "description": DESCRIPTIONS["primary"],
                        "estimate": prim[claim.estimate], "ci_low": prim.get(ci[0], np.nan),
                        "ci_high": prim.get(ci[1], np.nan), "p_value": prim[claim.p],
                        "p_adjusted": prim.get("p_adjusted", np.nan), "verdict": prim.get("verdict", "")})
            for a in ANALYSES:
                r = decided[a][name].loc[row]
                v = alt[(alt["row"] == row) & (alt["analysis"] == a)].iloc[0]
                out.append({**base, "analysis": a, "description": DESCRIPTIONS[a], "estimate": v["estimate"],
                            "ci_low": v["ci_low"], "ci_high": v["ci_high"], "p_value": v["p_value"],
                            "p_adjusted": r.get("p_adjusted", np.nan), "verdict": r.get("verdict", "")})
    res = pd.DataFrame(out, columns=[c for c in COLUMNS if c != "verdict_survives"])
    res["verdict_survives"] = res["verdict"] == res["primary_verdict"]
    return res[COLUMNS]


def notebook3(pairs: pd.DataFrame, decided: Mapping[str, pd.DataFrame],
              redecide: Callable[[dict], dict]) -> pd.DataFrame:
    """Notebook 3's rows: ``lpbs-mean`` and ``stereotype-share`` per model x dataset, each alternative recomputed
    from ``pairs`` (``pair_scores``: d, log-probabilities, ``stratum``, ``weight``). ``decided``:
    ``likelihood_tests`` and ``preference_tests`` with their verdict columns; ``redecide``: the notebook's verdict
    call on such a dict (:func:`biaslab.papers.crows_pairs.decisions.decide` with its responder check)."""
    plan = P.active()
    alts = []
    for claim_id, (name, compute) in NB3.items():
        t = decided.get(name)
        claim = next((c for c in plan.of("03_crows_pairs_bayes", name) if c.id == claim_id), None)
        if t is None or t.empty or claim is None:
            continue
        for row, r in t[claim.mask(t)].iterrows():
            g = pairs[(pairs["model"] == r["model"]) & (pairs["dataset"] == r["dataset"])]
            for a in ANALYSES:
                alts.append({"claim": claim_id, "table": name, "row": row, "analysis": a, **compute(g, a)})
    if not alts:
        return pd.DataFrame(columns=COLUMNS)
    return sensitivity_table(decided, pd.DataFrame(alts), redecide, lambda r: f"{r['model']} · {r['dataset']}")


def notebook5(responses: pd.DataFrame, pairs: pd.DataFrame, redecide: Callable[[pd.DataFrame], pd.DataFrame],
              metric: str = "crows_en_stereotype_preferred", claim_id: str = "crows-en-share") -> pd.DataFrame:
    """Notebook 5's rows of ``crows-en-share``: ``responses`` the metric's per-pair responses of every model
    (:func:`biaslab.papers.compare.unit_responses`: ``unit``, ``stereotype_preferred``, ``stratum``, ``weight``),
    ``pairs`` the decided ``paired_differences``, ``redecide`` its verdict call (``compare.decide_pairs`` with the
    responder table)."""
    rows = pairs.index[pairs["metric"] == metric]
    if not len(rows) or responses.empty or "weight" not in responses:
        return pd.DataFrame(columns=COLUMNS)
    alts = []
    for row in rows:
        a, b = pairs.loc[row, "model_a"], pairs.loc[row, "model_b"]
        both = responses[responses["model"].isin([a, b])]
        for an in ANALYSES:
            if an == "fpc":
                r = paired.stratified_paired_difference(both, "stereotype_preferred", a, b, unit="unit", fpc=True)
            else:
                ok = both[both["stereotype_preferred"].notna()]
                r = paired.paired_difference(ok, "stereotype_preferred", a, b, "pair_id", unit="unit", binary=True)
            alts.append({"claim": claim_id, "table": "paired_differences", "row": row, "analysis": an,
                         "estimate": r["difference"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                         "p_value": r["p_value"]})
    return sensitivity_table({"paired_differences": pairs}, pd.DataFrame(alts),
                             lambda t: {"paired_differences": redecide(t["paired_differences"])},
                             lambda r: f"{r['model_a']} − {r['model_b']}")
