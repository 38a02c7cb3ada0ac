"""Notebook 5's closing sentences: one per instance of the analysis plan's comparison claims (decided under the plan),
and descriptive lines (each metric's estimates; the pairs not tested, and why). Every number comes from the
model × metric and paired-difference tables; pairs on metrics without a claim are exploratory tables.
"""

from __future__ import annotations

import pandas as pd

from ...report.wording import claim_findings, join, num
from ...stats import ranking
from .tables import NOTEBOOK


def _ci(r) -> str:
    return f" [{num(r['ci_low'])}, {num(r['ci_high'])}]" if pd.notna(r.get("ci_low")) else " (no interval)"


def metric_line(mid: str, t: pd.DataFrame, pm: pd.DataFrame) -> str:
    """The metric's estimates per model (descriptive) and the pairs that were not tested, with the reason."""
    r0 = t.iloc[0]
    parts = [join(f"{r['model']} {num(r['estimate'])}{_ci(r)}" for r in t.to_dict("records"))]
    if len(pm):
        for why, label in (("not tested (not comparable", "across answer modes"),
                           ("not tested (degenerate", "with a degenerate responder"),
                           ("not measurable", "with a model not measurable"), ("undefined", "undefined")):
            n = int(pm["verdict"].astype(str).str.startswith(why).sum())
            if n:
                parts.append(f"{n} pair{'s' if n != 1 else ''} {label}, not tested")
    return f"{mid} ({r0['direction']}, null {num(r0['null'])}): " + "; ".join(parts) + "."


def summary_lines(table: pd.DataFrame, pairs: pd.DataFrame, groups: pd.DataFrame, agreement: pd.DataFrame,
                  min_models: int = ranking.MIN_MODELS, *, plan) -> list[str]:
    """A few sentences, every number read from the tables (nothing written by hand); ``plan``'s claims."""
    lines = [f"{table['model'].nunique()} models x {table['metric'].nunique()} metrics "
             f"({', '.join(dict.fromkeys(table['benchmark']))}); {int(table['ci_low'].notna().sum())} of "
             f"{len(table)} estimates have an interval."]
    claims = claim_findings([pairs], plan.of(NOTEBOOK)) if len(pairs) else ""
    lines += [x.removeprefix("- ") for x in claims.splitlines()]
    for mid, t in table.groupby("metric", sort=False):
        pm = pairs[pairs["metric"] == mid] if len(pairs) else pairs
        lines.append(metric_line(mid, t, pm))
    if len(agreement):
        n_ok = int((agreement["status"] == "ok").sum())
        most = int(agreement["n_models"].max())
        if n_ok == 0:
            lines.append(f"Agreement between benchmarks cannot be assessed: at most {most} models share two metrics "
                         f"(an interval needs {min_models}).")
        else:
            ok = agreement[agreement["status"] == "ok"]
            lines.append(f"{n_ok} metric pairs have enough models for a rank correlation; median rho "
                         f"{num(float(ok['rho'].median()))}, {int((ok['ci_low'] > 0).sum())} with an interval "
                         "above 0.")
    return lines
