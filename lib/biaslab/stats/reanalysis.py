"""Sensitivity analyses of confirmatory claims (ICH E9(R1) §A.5: each intercurrent event's handling is varied, and
the reader is told whether the conclusion survives).

One table per run, ``tables/sensitivity.csv``, one row per claim instance x analysis, the primary analysis included
as ``analysis = primary`` (columns :data:`COLUMNS`). **One rule decides every row** (:func:`decide`): "does this
claim's verdict survive this handling?" The family's p-values are the primaries' with this instance's p replaced by
the analysis's p, decided by the verdict layer's error budget (:func:`biaslab.stats.verdict.budget_decisions`: Holm
(1979) within the family at ``alpha * share / n_families``, the primary rows' ``share`` and ``n_families``), so the
primary rows get exactly their tables' verdicts. ``verdict_survives`` says whether the verdict equals the primary's.
Alternatives are collected, never decided, elsewhere: :func:`rows` reads estimate, interval and p of each instance
from an analysis's recomputed table.

Invalid answers get a **tipping point** (:func:`tipping_point`; the tipping-point analysis of missing data, Yan,
Lee & Li 2009, "Missing data handling methods in medical device clinical trials", J. Biopharm. Stat. 19(6)): the
smallest number of invalid answers that, counted the other way, would change the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import Callable

import numpy as np
import pandas as pd


COLUMNS = ["claim", "family", "instance", "analysis", "intercurrent_event", "description", "estimate", "ci_low",
           "ci_high", "p_value", "p_adjusted", "verdict", "primary_verdict", "verdict_survives"]
#: the family's budget, carried from the decided primary rows (absent: share 1 of one family, Holm at alpha)
BUDGET = ["n_families", "share"]
TESTED = ("distinguishable", "not distinguishable")
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


def _budget(part: pd.DataFrame, col: str) -> float:
    v = pd.to_numeric(part[col], errors="coerce").dropna() if col in part else pd.Series(dtype=float)
    if v.nunique() > 1:
        raise ValueError(f"sensitivity table: family {part['family'].iloc[0]!r} has several {col} values "
                         f"{sorted(v.unique())}; a family has one budget")
    return float(v.iloc[0]) if len(v) else 1.0


def decide(table: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """``p_adjusted``, ``verdict``, ``primary_verdict`` and ``verdict_survives`` for every row (see the module
    docstring): each row's p swapped into its family's primaries, decided by
    :func:`biaslab.stats.verdict.budget_decisions` at the family's ``share`` of alpha over ``n_families`` (columns
    of the rows, from the decided primaries; default 1 and 1). A row without a p (not tested) is "not tested" and
    leaves the family. Rows are never dropped."""
    from .verdict import budget_decisions
    _validate(table)
    out = table.copy()
    out["p_adjusted"], out["verdict"] = np.nan, NOT_TESTED
    key = out["claim"].astype(str) + "\x1f" + out["instance"].astype(str)        # an instance of one claim
    for fam, part in out.groupby("family", sort=False):
        prim = pd.Series(part["p_value"].astype(float).to_numpy(), index=key[part.index])[
            (part["analysis"] == PRIMARY).to_numpy()]
        share, n_fam = _budget(part, "share"), int(_budget(part, "n_families"))
        for i, row in part.iterrows():
            p = float(row["p_value"]) if pd.notna(row["p_value"]) else np.nan
            if not np.isfinite(p):
                continue
            ps = prim.copy()
            ps[key[i]] = p
            b = budget_decisions(pd.DataFrame({"notebook": "nb", "family": "f", "p": ps.to_numpy()}, index=ps.index),
                                 alpha, {"nb": share}, {"nb": n_fam})
            out.loc[i, "p_adjusted"] = float(b.loc[key[i], "p_adjusted"])
            out.loc[i, "verdict"] = DISTINGUISHABLE if b.loc[key[i], "rejected"] else NOT_DISTINGUISHABLE
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
    """One line per claim instance: its primary verdict and which analyses keep it (markdown list; a line saying so
    when no claim instance was re-analysed)."""
    if table is None or table.empty:
        return "no claim instance to re-analyse."
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
    recomputed that way (its verdict column says only whether a row was tested: a degenerate responder, say)."""
    name: str
    event: str
    description: str
    table: pd.DataFrame


def rows(primary: pd.DataFrame, analyses: list[Analysis], claims, keys: list[str]) -> pd.DataFrame:
    """Undecided ``sensitivity.csv`` rows (estimate, interval, p; decide them with :func:`decide`) of every
    instance of ``claims`` (plan claims of this table) in the decided ``primary`` table: the primary analysis, then
    each of ``analyses``. ``keys``: the columns that identify an instance (with the model); ``instance`` names the
    keys that neither the family nor the claim's ``rows`` fix. A row's p is its table's where that table tested it;
    an instance an analysis did not test (absent, or not tested there) has no p and says why in ``description``."""
    out = []
    for c in claims:
        conf = primary[primary["claim"] == c.id] if "claim" in primary else primary.iloc[:0]
        lo, hi = (c.ci if len(c.ci) == 2 else (None, None))
        inst = [k for k in keys if k not in c.family_by and k not in c.rows]
        for r in conf.to_dict("records"):
            base = {"claim": c.id, "family": r["family"], "instance": " · ".join(str(r[k]) for k in inst) or "all",
                    **{k: r.get(k, np.nan) for k in BUDGET}}
            for a in [Analysis(PRIMARY, "none (as planned)", "the plan's primary analysis", primary)] + list(analyses):
                t = a.table
                m = pd.Series(True, index=t.index)
                for k in keys:
                    m &= t[k].astype(str) == str(r[k])
                hit = t[m & (t["claim"] == c.id)] if "claim" in t else t.iloc[:0]
                x = hit.iloc[0].to_dict() if len(hit) else {}
                tested = x.get("verdict") in TESTED
                why = "" if tested else f" ({x.get('verdict') or 'absent from this analysis'})"
                out.append({**base, "analysis": a.name, "intercurrent_event": a.event,
                            "description": a.description + why, "estimate": x.get(c.estimate),
                            "ci_low": x.get(lo) if lo else None, "ci_high": x.get(hi) if hi else None,
                            "p_value": x.get(c.p) if (c.p and tested) else np.nan})
    return pd.DataFrame(out, columns=COLUMNS[:10] + BUDGET)
