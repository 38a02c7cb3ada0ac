"""Pre-specified sensitivity analyses of the plan's claims (ICH E9(R1) §A.5.2): each claim instance re-decided
under an alternative handling of one intercurrent event, one row per instance x analysis, the primary analysis
included, in the columns of ``sensitivity.csv`` (:data:`COLUMNS`).

An alternative analysis is the claim's table recomputed the other way and decided by the same verdict layer
(:mod:`biaslab.stats.verdict`, the same family and adjustment), so a verdict "survives" exactly when the verdict
that the alternative table gets for that instance equals the primary one.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

COLUMNS = ["claim", "family", "instance", "analysis", "intercurrent_event", "description", "estimate", "ci_low",
           "ci_high", "p_value", "p_adjusted", "verdict", "primary_verdict", "verdict_survives"]


@dataclass(frozen=True)
class Analysis:
    """One analysis: its name, the intercurrent event it handles differently, what it does, and the claim's table
    recomputed and decided that way (with the verdict columns)."""
    name: str
    event: str
    description: str
    table: pd.DataFrame


def rows(primary: pd.DataFrame, analyses: list[Analysis], claims, keys: list[str]) -> pd.DataFrame:
    """``sensitivity.csv`` rows of every instance of ``claims`` (plan claims of this table) in the decided
    ``primary`` table: the primary analysis, then each of ``analyses``. ``keys``: the columns that identify an
    instance (with the model); ``instance`` names the keys that neither the family nor the claim's ``rows`` fix. An instance missing from an
    analysis's table gets verdict "not tested (absent from this analysis)"; nothing is dropped."""
    out = []
    for c in claims:
        conf = primary[primary["claim"] == c.id] if "claim" in primary else primary.iloc[:0]
        lo, hi = (c.ci if len(c.ci) == 2 else (None, None))
        inst = [k for k in keys if k not in c.family_by and k not in c.rows]
        for r in conf.to_dict("records"):
            base = {"claim": c.id, "family": r["family"], "instance": " · ".join(str(r[k]) for k in inst) or "all",
                    "primary_verdict": r["verdict"]}
            for a in [Analysis("primary", "none (as planned)", "the plan's primary analysis", primary)] + list(analyses):
                t = a.table
                m = pd.Series(True, index=t.index)
                for k in keys:
                    m &= t[k].astype(str) == str(r[k])
                hit = t[m & (t["claim"] == c.id)] if "claim" in t else t.iloc[:0]
                x = hit.iloc[0].to_dict() if len(hit) else {}
                verdict = x.get("verdict", "not tested (absent from this analysis)")
                out.append({**base, "analysis": a.name, "intercurrent_event": a.event, "description": a.description,
                            "estimate": x.get(c.estimate), "ci_low": x.get(lo) if lo else None,
                            "ci_high": x.get(hi) if hi else None, "p_value": x.get(c.p) if c.p else None,
                            "p_adjusted": x.get("p_adjusted"), "verdict": verdict,
                            "verdict_survives": verdict == r["verdict"]})
    return pd.DataFrame(out, columns=COLUMNS)
