"""Notebook 5's closing sentences, rendered only from its tables' verdict columns (issue 18).

Per metric: the models ranked against each other inside each comparison group (same prompts, same answer mode) and
how many of their pairs are distinguishable after the report-wide adjustment; models not ranked (degenerate for that
metric, or alone in their group) with the reason; pairs shown apart because they compare different answer modes; and
pairs that could not be formed. Every count and number comes from the model × metric, paired-difference and
tie-group tables.
"""

from __future__ import annotations

import pandas as pd

from ...findings import DISTINGUISHABLE, family_words, join, num
from ...stats import ranking


def _ci(r) -> str:
    return f" [{num(r['ci_low'])}, {num(r['ci_high'])}]" if pd.notna(r.get("ci_low")) else " (no interval)"


def _tested(pm: pd.DataFrame) -> pd.DataFrame:
    return pm[pm["verdict"].isin([DISTINGUISHABLE, "not distinguishable"])] if len(pm) else pm


def metric_line(mid: str, t: pd.DataFrame, pm: pd.DataFrame, g: pd.DataFrame) -> str:
    r0 = t.iloc[0]
    parts = []
    for grp, gg in g.groupby("comparison_group", sort=False):
        ranked = gg[gg["ranked"].astype(bool)].sort_values("rank")
        if len(ranked) >= 2:
            names = set(ranked["model"])
            within = _tested(pm[pm["model_a"].isin(names) & pm["model_b"].isin(names)]) if len(pm) else pm
            top = t.set_index("model").loc[ranked["model"].iloc[0]]
            n_sep = int((within["verdict"] == DISTINGUISHABLE).sum()) if len(within) else 0
            n_groups = len(set("".join(ranked["groups"])))
            how = f" ({family_words(within.iloc[0])})" if len(within) else ""
            parts.append(f"among {len(ranked)} models on {grp}, first in the biased direction {top.name} at "
                         f"{num(top['estimate'])}{_ci(top)}; {n_sep} of {len(within)} tested pairs distinguishable"
                         f"{how}; " + ("all tie" if n_groups == 1 else f"{n_groups} tie groups"))
        for r in gg[~gg["ranked"].astype(bool)].itertuples():
            row = t.set_index("model").loc[r.model]
            parts.append(f"{r.model} ({grp}) at {num(row['estimate'])}{_ci(row)}, {r.note}")
    if len(pm):
        ranked_groups = [set(gg.loc[gg["ranked"].astype(bool), "model"]) for _, gg in g.groupby("comparison_group")]
        across = _tested(pm)
        across = across[[not any({a, b} <= grp for grp in ranked_groups if len(grp) >= 2)
                         for a, b in zip(across["model_a"], across["model_b"])]]
        for r in across.to_dict("records"):
            parts.append(f"{r['model_a']} − {r['model_b']} on the {int(r['n_pairs']):,} units both answered: "
                         f"{num(r['difference'])}{_ci(r)}, {r['verdict']} ({family_words(r)})")
        apart = pm[pm["verdict"].str.startswith("not tested (not comparable")]
        if len(apart):
            parts.append(f"{len(apart)} pair{'s' if len(apart) != 1 else ''} across answer modes shown apart, not "
                         "tested: " + join(f"{r.model_a} − {r.model_b} {num(r.difference)}{_ci(r._asdict())}"
                                           for r in apart.itertuples()))
        deg = pm[pm["verdict"].str.startswith("not tested (degenerate")]
        if len(deg):
            parts.append(f"{len(deg)} pair{'s' if len(deg) != 1 else ''} with a degenerate responder not tested")
        none = pm[pm["verdict"].str.startswith("undefined")]
        if len(none):
            parts.append(f"{len(none)} pair{'s' if len(none) != 1 else ''} undefined ("
                         + join(sorted(set(none["verdict"].str.slice(11, -1)))) + ")")
    return f"{mid} ({r0['direction']}, null {num(r0['null'])}): " + "; ".join(parts) + "."


def summary_lines(table: pd.DataFrame, pairs: pd.DataFrame, groups: pd.DataFrame, agreement: pd.DataFrame,
                  min_models: int = ranking.MIN_MODELS) -> list[str]:
    """A few sentences, every number read from the tables (nothing written by hand)."""
    lines = [f"{table['model'].nunique()} models x {table['metric'].nunique()} metrics "
             f"({', '.join(dict.fromkeys(table['benchmark']))}); {int(table['ci_low'].notna().sum())} of "
             f"{len(table)} estimates have an interval."]
    if len(pairs):
        tested = _tested(pairs)
        lines.append(f"{len(tested)} model pairs were tested, in one family for the whole report"
                     + (f" ({family_words(tested.iloc[0])})" if len(tested) else "")
                     + f"; {int((tested['verdict'] == DISTINGUISHABLE).sum())} are distinguishable.")
    for mid, t in table.groupby("metric", sort=False):
        pm = pairs[pairs["metric"] == mid] if len(pairs) else pairs
        lines.append(metric_line(mid, t, pm, groups[groups["metric"] == mid]))
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
