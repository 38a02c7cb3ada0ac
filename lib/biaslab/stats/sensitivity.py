"""Sensitivity analyses of confirmatory claims (ICH E9(R1) §A.5: each intercurrent event's handling is varied, and
the reader is told whether the conclusion survives).

One table per run, ``tables/sensitivity.csv``, one row per claim instance x analysis, the primary analysis included
as ``analysis = primary`` (columns :data:`COLUMNS`). A sensitivity row is decided by **the same rule as its
primary**, at the same family level: the family's p-values are the primaries' with this instance's p replaced by the
analysis's p, Holm-adjusted (Holm 1979) over the family, times the family's budget scale (``n_families / share``
under the plan's alpha split; 1 without a budget), compared with alpha (:func:`decide`). ``verdict_survives`` says
whether the verdict equals the primary's.

Invalid answers get a **tipping point** (:func:`tipping_point`; the tipping-point analysis of missing data, Yan,
Lee & Li 2009, "Missing data handling methods in medical device clinical trials", J. Biopharm. Stat. 19(6)): the
smallest number of invalid answers that, counted the other way, would change the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import Callable, Mapping

import numpy as np
import pandas as pd

from .multiplicity import adjust

COLUMNS = ["claim", "family", "instance", "analysis", "intercurrent_event", "description", "estimate", "ci_low",
           "ci_high", "p_value", "p_adjusted", "verdict", "primary_verdict", "verdict_survives"]
PRIMARY = "primary"
DISTINGUISHABLE, NOT_DISTINGUISHABLE, NOT_TESTED = "distinguishable", "not distinguishable", "not tested"


def _validate(table: pd.DataFrame) -> None:
    missing = [c for c in ("claim", "family", "instance", "analysis", "p_value") if c not in table]
    if missing:
        raise KeyError(f"sensitivity table lacks column(s) {missing}; it needs {COLUMNS[:10]}")
    prim = table[table["analysis"] == PRIMARY]
    dup = prim.duplicated(["claim", "family", "instance"])
    if dup.any():
        r = prim[dup].iloc[0]
        raise ValueError(f"sensitivity table: two primary rows for claim {r['claim']!r}, family {r['family']!r}, "
                         f"instance {r['instance']!r}; keep one")
    keys = set(map(tuple, prim[["claim", "family", "instance"]].to_numpy()))
    lost = [k for k in map(tuple, table[["claim", "family", "instance"]].to_numpy()) if k not in keys]
    if lost:
        raise ValueError(f"sensitivity table: no primary row for {lost[0]} (claim, family, instance); add the "
                         "instance's primary analysis")


def decide(table: pd.DataFrame, alpha: float = 0.05, scale: Mapping[str, float] | None = None) -> pd.DataFrame:
    """``p_adjusted``, ``verdict``, ``primary_verdict`` and ``verdict_survives`` for every row (see the module
    docstring). ``scale``: family -> the budget factor ``n_families / share`` (default 1: Holm at alpha). A row
    without a p (not tested) is "not tested" and leaves the family. Rows are never dropped."""
    _validate(table)
    out = table.copy()
    scale = dict(scale or {})
    out["p_adjusted"], out["verdict"] = np.nan, NOT_TESTED
    for fam, part in out.groupby("family", sort=False):
        prim = part[part["analysis"] == PRIMARY].set_index("instance")["p_value"].astype(float)
        k = float(scale.get(fam, 1.0))
        for i, row in part.iterrows():
            p = float(row["p_value"]) if pd.notna(row["p_value"]) else np.nan
            if not np.isfinite(p):
                continue
            ps = prim.copy()
            ps[row["instance"]] = p
            padj = min(1.0, float(adjust(ps.to_numpy(), "holm")[list(ps.index).index(row["instance"])]) * k)
            out.loc[i, "p_adjusted"] = padj
            out.loc[i, "verdict"] = DISTINGUISHABLE if padj < alpha else NOT_DISTINGUISHABLE
    prim_v = out[out["analysis"] == PRIMARY].set_index(["claim", "family", "instance"])["verdict"]
    out["primary_verdict"] = [prim_v[k] for k in map(tuple, out[["claim", "family", "instance"]].to_numpy())]
    out["verdict_survives"] = out["verdict"] == out["primary_verdict"]
    for c in COLUMNS:
        if c not in out:
            out[c] = np.nan if c in ("estimate", "ci_low", "ci_high") else ""
    return out[COLUMNS + [c for c in out.columns if c not in COLUMNS]]


def tipping_point(verdict_at: Callable[[int], str], n_invalid: int) -> int | None:
    """The smallest ``k`` in 1..n_invalid such that counting ``k`` invalid answers the other way changes the verdict
    (``verdict_at(k)``, with ``verdict_at(0)`` the primary's), or None when even all of them do not. The verdict is
    assumed monotone in ``k`` (each switched answer moves the estimate the same way): bisection, O(log n) calls."""
    if n_invalid < 1:
        return None
    primary = verdict_at(0)
    if verdict_at(n_invalid) == primary:
        return None
    lo, hi = 0, n_invalid                    # verdict_at(lo) == primary, verdict_at(hi) != primary
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if verdict_at(mid) == primary:
            lo = mid
        else:
            hi = mid
    return hi


def render(table: pd.DataFrame) -> str:
    """One line per claim instance: its primary verdict and which analyses keep it (markdown list)."""
    lines = []
    for (claim, fam, inst), part in table.groupby(["claim", "family", "instance"], sort=False):
        prim = part[part["analysis"] == PRIMARY].iloc[0]
        other = part[part["analysis"] != PRIMARY]
        if other.empty:
            why = "nothing decided" if str(prim["verdict"]).startswith(NOT_TESTED) else "none applies to this run"
            lines.append(f"- `{claim}` {inst}: {prim['verdict']}; no sensitivity analysis ({why})")
            continue
        flips = other[~other["verdict_survives"].astype(bool)]
        kept = f"survives {len(other) - len(flips)} of {len(other)} sensitivity analyses"
        why = "; ".join(f"{r.analysis} → {r.verdict}" for r in flips.itertuples())
        lines.append(f"- `{claim}` {inst}: {prim['verdict']}; {kept}" + (f" (changes under: {why})" if why else ""))
    return "\n".join(lines)


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
