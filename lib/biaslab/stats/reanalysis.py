"""Sensitivity analyses of confirmatory claims (ICH E9(R1) §A.5: each intercurrent event's handling is varied, and
the reader is told whether the conclusion survives).

One table per run, ``tables/sensitivity.csv``, one row per claim instance x analysis, the primary analysis included
as ``analysis = primary`` (columns :data:`COLUMNS`). **One rule decides every row** (:func:`decide`): "does this
claim's verdict survive this handling?" The family's p-values are the primaries' with this instance's p replaced by
the analysis's p, decided by the verdict layer's error budget (:func:`biaslab.stats.verdict.budget_decisions`, the one
mechanism): the plan's graph within the family (Bretz et al. 2009; Holm 1979 for a plan without one) at ``alpha *
share / n_families``, an instance rejected only at a level where its test has 80 % power for its SESOI
(``level_for_power``), the instances the run left out of the graph (descriptive, not tested) left out here too; so
the primary rows get exactly their tables' verdicts. ``verdict_survives`` says whether the verdict is the primary's
(the same kind: distinguishable, not distinguishable, not reached, not decided). Alternatives are collected, never
decided, elsewhere: :func:`rows` reads estimate, interval and p of each instance from an analysis's recomputed
table.

Invalid answers get a **tipping point** (:func:`tipping_point`; the tipping-point analysis of missing data, Yan,
Lee & Li 2009, "Missing data handling methods in medical device clinical trials", J. Biopharm. Stat. 19(6)): the
smallest number of invalid answers that, counted the other way, would change the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from .verdict import DISTINGUISHABLE, NOT_DISTINGUISHABLE, budget_decisions


COLUMNS = ["claim", "family", "instance", "analysis", "intercurrent_event", "description", "estimate", "ci_low",
           "ci_high", "p_value", "p_adjusted", "verdict", "primary_verdict", "verdict_survives"]
#: carried from the decided primary row onto every row of its instance: the family's budget (absent: share 1 of one
#: family, Holm at alpha), the level its test needs for 80 % power for its SESOI (absent: 0) and the primary's
#: verdict in its table (``table_verdict``: whether the instance is in the graph, and what a row without a p says)
BUDGET = ["n_families", "share", "level_for_power", "table_verdict"]
TESTED = (DISTINGUISHABLE, NOT_DISTINGUISHABLE)
#: the verdicts of the graph's other instances: their p enters the family (not rejected, level not passed on)
IN_GRAPH = ("not reached (", "not decided (")
PRIMARY = "primary"
NOT_TESTED = "not tested"


def in_graph(verdict) -> bool:
    """A decided row whose p entered its family's graph (decided, not reached or not decided)."""
    v = verdict if isinstance(verdict, str) else ""
    return v in TESTED or v.startswith(IN_GRAPH)


def kind(verdict) -> str:
    """The verdict without its reason: "not decided (power 0.41 ...)" -> "not decided"."""
    return str(verdict).split(" (", 1)[0]


def budget(row: Mapping) -> dict:
    """The :data:`BUDGET` columns of a decided claim row (a verdict-layer table's), to carry onto its instance's
    sensitivity rows."""
    v = row.get("verdict")
    return {"n_families": row.get("n_families", np.nan), "share": row.get("share", np.nan),
            "level_for_power": row.get("level_for_power", np.nan),
            "table_verdict": v if isinstance(v, str) else ""}


def _validate(table: pd.DataFrame, context: pd.DataFrame | None = None) -> None:
    missing = [c for c in ("claim", "family", "instance", "analysis", "p_value") if c not in table]
    if missing:
        raise KeyError(f"sensitivity table lacks column(s) {missing}; it needs {COLUMNS[:10]}")
    every = table if context is None or not len(context) else pd.concat([table, context], ignore_index=True)
    prim = every[every["analysis"] == PRIMARY]
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


def _graph(plan, family: str):
    """The plan's claim graph of a family's notebook ("<notebook> · ..."), None for Holm (a plan without a graph, or
    a family of no notebook with claims)."""
    nb = str(family).split(" · ", 1)[0]
    if plan is None or not plan.graphical or not plan.of(nb):
        return None
    return plan.graph(nb)


def _verdict(rejected: bool, level: float, need: float) -> str:
    """A graph row's verdict from :func:`biaslab.stats.verdict.budget_decisions`: rejected, left at level 0, tested
    where its test has less than 80 % power for its SESOI, or not rejected."""
    if rejected:
        return DISTINGUISHABLE
    if not level > 0:
        return "not reached (α not propagated: no claim that passes it α was rejected)"
    if level < need * (1 - 1e-12):
        return f"not decided (below 80 % power at its tested level {level:.2g}; it needs {need:.2g})"
    return NOT_DISTINGUISHABLE


def decide(table: pd.DataFrame, alpha: float = 0.05, *, plan=None,
           context: pd.DataFrame | None = None) -> pd.DataFrame:
    """``p_adjusted``, ``verdict``, ``primary_verdict`` and ``verdict_survives`` for every row (see the module
    docstring): each row's p swapped into its family's primaries that are in the graph (those with a p whose
    ``table_verdict`` is decided, not reached or not decided; all primaries with a p where no ``table_verdict`` is
    given), decided by :func:`biaslab.stats.verdict.budget_decisions` at the family's ``share`` of alpha over
    ``n_families`` (columns of the rows, from the decided primaries; default 1 and 1) with the plan's graph of the
    family's notebook (``plan``; its alpha; Holm without a graph) and each instance's ``level_for_power``. Every row
    of an instance whose primary is not in the graph takes the primary's verdict (its ``table_verdict``, e.g.
    "descriptive (…)"; "not tested" without one); another row without a p is "not tested". ``context``: primary rows of the same families that are not
    returned (a family spanning several runs' tables). Rows are never dropped."""
    _validate(table, context)
    alpha = plan.alpha if plan is not None else alpha
    n_out = len(table)
    every = pd.concat([table, context], ignore_index=True) if context is not None and len(context) else \
        table.reset_index(drop=True)
    for c in BUDGET:
        if c not in every:
            every[c] = np.nan
    p = pd.to_numeric(every["p_value"], errors="coerce")
    tv = every["table_verdict"].map(lambda v: v if isinstance(v, str) else "")
    need = pd.to_numeric(every["level_for_power"], errors="coerce").fillna(0.0)
    key = every["claim"].astype(str) + "\x1f" + every["family"].astype(str) + "\x1f" + every["instance"].astype(str)
    primary = every["analysis"] == PRIMARY
    verdict, p_adj = pd.Series(NOT_TESTED, index=every.index, dtype=object), pd.Series(np.nan, index=every.index)
    prim_tv = dict(zip(key[primary], tv[primary]))
    for fam, part in every.groupby("family", sort=False):
        graph = _graph(plan, fam)
        share, n_fam = _budget(part, "share"), int(_budget(part, "n_families"))
        live = part[primary[part.index] & p[part.index].notna() & tv[part.index].map(lambda v: v == "" or in_graph(v))]
        base = pd.DataFrame({"notebook": "nb", "family": "f", "claim": live["claim"].to_numpy(),
                             "p": p[live.index].to_numpy(), "level_for_power": need[live.index].to_numpy()},
                            index=key[live.index].to_numpy())
        for i in part.index[part.index < n_out]:
            if key[i] not in base.index:     # its instance is not in the graph (descriptive, not tested): nor is it
                verdict[i] = prim_tv.get(key[i]) or NOT_TESTED
                continue
            if not np.isfinite(p[i]):        # an analysis that leaves an instance of the graph untested
                verdict[i] = NOT_TESTED
                continue
            rows = base.copy()
            rows.loc[key[i], "p"] = float(p[i])
            b = budget_decisions(rows.assign(test=rows.index), alpha, {"nb": share}, {"nb": n_fam},
                                 {"nb": graph} if graph else None).loc[key[i]]
            p_adj[i] = float(b["p_adjusted"])
            v = _verdict(bool(b["rejected"]), float(b["tested_level"]), float(base.at[key[i], "level_for_power"]))
            verdict[i] = tv[i] if primary[i] and kind(tv[i]) == kind(v) else v     # the table's words for its reason
    out = table.copy()
    out["p_adjusted"], out["verdict"] = p_adj[:n_out].to_numpy(), verdict[:n_out].to_numpy()
    mine = primary[:n_out].to_numpy()
    prim_v = {**{k: (v or NOT_TESTED) for k, v in prim_tv.items()},
              **dict(zip(key[:n_out][mine], out["verdict"][mine]))}
    out["primary_verdict"] = [prim_v[k] for k in key[:n_out]]
    out["verdict_survives"] = out["verdict"].map(kind) == out["primary_verdict"].map(kind)
    for c in COLUMNS:
        if c not in out:
            out[c] = np.nan if c in ("estimate", "ci_low", "ci_high") else ""
    return out[COLUMNS + [c for c in out.columns if c not in COLUMNS]]


def rule(primaries: pd.DataFrame, base: Mapping, alpha: float = 0.05, *, plan=None) -> Callable[[float], str]:
    """p -> the verdict instance ``base`` (its claim, family, instance and :data:`BUDGET` columns) gets with that p
    as its primary's, the family's other ``primaries`` (rows of this table's schema) kept: :func:`decide`'s rule
    (the tipping point's)."""
    k = (base["claim"], base["family"], base["instance"])
    others = primaries[[t != k for t in map(tuple, primaries[["claim", "family", "instance"]].to_numpy())]] \
        if len(primaries) else primaries

    def verdict(p: float) -> str:
        t = pd.DataFrame([{**{c: base.get(c, np.nan) for c in ("claim", "family", "instance", *BUDGET)},
                           "analysis": PRIMARY, "p_value": p, "table_verdict": ""}])
        return decide(t, alpha, plan=plan, context=others)["verdict"].iloc[0]
    return verdict


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
        if other.empty or not in_graph(prim["verdict"]):
            why = "none applies to this run" if in_graph(prim["verdict"]) else "nothing decided"
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
    keys that neither the family nor the claim's ``rows`` fix. A row's p is its table's where that table's graph
    tested it (:func:`in_graph`); an instance an analysis did not test (absent, descriptive or not tested there) has
    no p and says why in ``description``."""
    out = []
    for c in claims:
        conf = primary[primary["claim"] == c.id] if "claim" in primary else primary.iloc[:0]
        lo, hi = (c.ci if len(c.ci) == 2 else (None, None))
        inst = [k for k in keys if k not in c.family_by and k not in c.rows]
        for r in conf.to_dict("records"):
            base = {"claim": c.id, "family": r["family"], "instance": " · ".join(str(r[k]) for k in inst) or "all",
                    **budget(r)}
            for a in [Analysis(PRIMARY, "none (as planned)", "the plan's primary analysis", primary)] + list(analyses):
                t = a.table
                m = pd.Series(True, index=t.index)
                for k in keys:
                    m &= t[k].astype(str) == str(r[k])
                hit = t[m & (t["claim"] == c.id)] if "claim" in t else t.iloc[:0]
                x = hit.iloc[0].to_dict() if len(hit) else {}
                tested = in_graph(x.get("verdict"))
                why = "" if tested else f" ({x.get('verdict') or 'absent from this analysis'})"
                out.append({**base, "analysis": a.name, "intercurrent_event": a.event,
                            "description": a.description + why, "estimate": x.get(c.estimate),
                            "ci_low": x.get(lo) if lo else None, "ci_high": x.get(hi) if hi else None,
                            "p_value": x.get(c.p) if (c.p and tested) else np.nan})
    return pd.DataFrame(out, columns=COLUMNS[:10] + BUDGET)
