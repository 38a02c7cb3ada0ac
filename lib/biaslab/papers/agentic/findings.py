"""Notebook 4's findings: the run's tables (from :mod:`biaslab.stats.entropy`) turned into Markdown sentences.

Every function takes the table the notebook wrote, with the verdict columns of :mod:`.decisions`, and returns
Markdown; decisions are read only from those columns (``verdict``, ``p_adjusted`` and its family, ``bf_direction``,
``responder_status``). Nothing here is a number typed by hand except the paper's own reported means, which are
quoted as the paper's. The normalized entropy is
the paper's §II.D, :math:`\\tilde H = H / \\log k`; a uniform answer has :math:`\\tilde H = 1`.
"""

from __future__ import annotations

import pandas as pd

from ...findings import (DISTINGUISHABLE, NOT_DISTINGUISHABLE, adjusted, bullets, decision, evidence, family_words,
                         interval, join, num, pct, span)


def entropy_findings(by_model: pd.DataFrame, paper_means: dict[str, float]) -> str:
    """Mean normalized entropy per model with its interval, share of prompts below 0.5 and label mass, placed
    against the range of the paper's models."""
    lo, hi = min(paper_means.values()), max(paper_means.values())
    lines = []
    for r in by_model.to_dict("records"):
        place = ("within" if lo <= r["mean_entropy"] <= hi else "above" if r["mean_entropy"] > hi else "below")
        lines.append(
            f"**{r['model']}**: mean normalized entropy {num(r['mean_entropy'])} {interval(r)} over {r['n']} prompts, "
            f"{place} the range of the paper's models ({num(lo)}–{num(hi)}); {pct(r['share_below_half'])} of "
            f"prompts below 0.5; {pct(r['mean_label_mass'])} of the next-token probability fell on the answer labels "
            "(the label mass), so the renormalized distribution describes "
            + ("nearly all" if r["mean_label_mass"] >= 0.9 else "only part") + " of what the model would say."
            + _responder_note(r))
    return bullets(lines)


def _dist(df: pd.DataFrame) -> pd.Series:
    return df["verdict"] == DISTINGUISHABLE


def _responder_note(r) -> str:
    s = r.get("responder_status")
    return (f" **Responder check for this metric: {s}** — its tests are not interpreted."
            if isinstance(s, str) and s.startswith("degenerate") else "")


def breakdown_findings(bd: pd.DataFrame) -> str:
    """Which factors' levels differ in mean entropy per model (the scenario-clustered Wald test, one per model ×
    factor, read from the verdict columns)."""
    lines = []
    tests = bd.drop_duplicates(["model", "factor"])
    for m, g in tests.groupby("model", sort=False):
        differ = [f"{r['factor']} ({adjusted(r)})" for r in g[_dist(g)].to_dict("records")]
        same = [r["factor"] for r in g[g["verdict"] == NOT_DISTINGUISHABLE].to_dict("records")]
        other = [f"{r['factor']}: {r['verdict']}" for r in g[~g["verdict"].isin([DISTINGUISHABLE,
                                                                                  NOT_DISTINGUISHABLE])].to_dict(
            "records")]
        lines.append(f"**{m}**: " + (f"levels differ by {join(differ)}" if differ else
                                     "no factor's levels differ distinguishably from chance")
                     + (("; not distinguishable at this sample size for " if differ else " at this sample size: ")
                        + join(same) if same else "") + (f"; {join(other)}" if other else "") + ".")
    return bullets(lines)


def group_preference_findings(gp: pd.DataFrame) -> str:
    """How many group × class-type positive-vs-negative differences are distinguishable after the family's
    adjustment (verdict columns), and the largest."""
    lines = []
    for m, g in gp.groupby("model", sort=False):
        sig = g[_dist(g)]
        big = g.loc[g["diff_pos_minus_neg"].abs().idxmax()]
        pairs = join(sorted({str(int(n)) for n in g["n_pairs"].dropna()}), "or")
        lines.append(
            f"**{m}**: {len(sig)} of {len(g)} group × class-type differences (positive − negative question) are "
            f"distinguishable from chance ({family_words(big)}; {pairs} matched pairs each); the largest is "
            f"{big['group']} on {big['class_type']}, "
            f"{num(100 * big['diff_pos_minus_neg'], 2)} percentage points ({_pos_neg(big['diff_pos_minus_neg'])}), "
            f"{decision(big)}"
            + (": " + join(f"{r.group} on {r.class_type}" for r in sig.itertuples()) + " are distinguishable."
               if len(sig) else "."))
    return bullets(lines)


def _pos_neg(diff: float) -> str:
    """The direction of a positive − negative difference of a group's probability, in words."""
    if not diff:
        return "as probable in positive as in negative questions"
    return f"{'more' if diff > 0 else 'less'} probable as the answer to positive than to negative questions"


def position_findings(pb: pd.DataFrame) -> str:
    """Per model and number of choices: positions whose mean probability is distinguishable from 1/k (the verdict
    of each position's interval), above or below it."""
    lines = []
    for (m, k), g in pb.groupby(["model", "k"], sort=False):
        rows = g[_dist(g)].to_dict("records")
        above = [f"{r['position']} ({num(r['mean_p'], 2)})" for r in rows if r["mean_p"] > r["uniform"]]
        below = [f"{r['position']} ({num(r['mean_p'], 2)})" for r in rows if r["mean_p"] < r["uniform"]]
        if not above and not below:
            lines.append(f"**{m}, {k} choices**: no position is distinguishable from the uniform {num(1 / k, 2)} "
                         "at this sample size.")
            continue
        lines.append(f"**{m}, {k} choices** (uniform {num(1 / k, 2)}): "
                     + "; ".join(x for x in (f"more probability at position {join(above)}" if above else "",
                                             f"less at position {join(below)}" if below else "") if x)
                     + f" (the {family_words(rows[0])}, exclude uniform).")
    return bullets(lines)


def uniformity_findings(ut: pd.DataFrame) -> str:
    """Top-answer counts against equal counts, by position and by group (the Rao–Scott corrected chi-square where
    the table has its design effect, decided within the declared families; the Dirichlet–multinomial BF10 only where
    its prior range agrees); names every model × class type whose group counts are distinguishable from uniform."""
    lines = []
    for unit in ("position", "group"):
        g = ut[ut["unit"] == unit]
        if g.empty:
            continue
        sig = g[_dist(g)]
        first = g.iloc[0]
        clustered = "design_effect" in g and g["design_effect"].notna().any()
        test = "Rao–Scott chi-square for the scenario clusters" if clustered else "chi-square"
        lines.append(
            f"Counted by **{unit}**, the top answers are distinguishable from a uniform choice in {len(sig)} of "
            f"{len(g)} model × class-type cells ({test}, {family_words(first)}).")
        for r in g.to_dict("records"):
            if unit == "group" and (r["verdict"] == DISTINGUISHABLE or r["verdict"].startswith(("not tested",
                                                                                                "undefined"))):
                ev = evidence(r, "a non-uniform choice", "a uniform choice")
                lines.append(f"{r['model']} on {r['class_type']}: the top answer is {r['top']} in "
                             f"{round(r['top_share'] * r['n'])} of {r['n']} prompts — {decision(r, 'uniform')}"
                             + (f"; {ev}" if ev else "") + ".")
    return bullets(lines)


def cyclic_findings(cyc_m: pd.DataFrame) -> str:
    """Entropy in the stored orders against the entropy of the rotation-averaged probabilities (the gain's
    verdict)."""
    lines = []
    for r in cyc_m.to_dict("records"):
        lines.append(
            f"**{r['model']}**: {num(r['mean_entropy_stored'])} in the stored orders → "
            f"{num(r['mean_entropy_cyclic_avg'])} after averaging over the rotations (position-only entropy "
            f"{num(r['mean_entropy_position_avg'])}); the gain is "
            + " ".join(x for x in (num(r["mean_gain"]), interval(r)) if x)
            + f", {decision(r, 'zero', '0')}.{_responder_note(r)}")
    return bullets(lines)


def comparison_findings(cmp: pd.DataFrame) -> str:
    """Each pair of models' mean per-prompt entropy difference (paired on the same prompts) with its verdict."""
    if cmp is None or cmp.empty:
        return "One model: no paired comparison."
    return bullets(f"**{r['model_a']} − {r['model_b']}**: mean normalized entropy differs by {num(r['difference'])} "
                   f"{interval(r)} over {int(r['n_pairs']):,} prompts both answered, "
                   f"{decision(r, 'no difference', '0')}." for r in cmp.to_dict("records"))


def summary_findings(by_model: pd.DataFrame, cyc_m: pd.DataFrame | None, ut: pd.DataFrame, gp: pd.DataFrame) -> str:
    """The closing 'What this means' points that depend on the run: how much of the departure from uniform the
    rotation average removes (position), and which group-level results are distinguishable from chance (verdict
    columns)."""
    lines = []
    if cyc_m is not None and len(cyc_m):
        stored, after = cyc_m["mean_entropy_stored"], cyc_m["mean_entropy_cyclic_avg"]
        removed = ((cyc_m["mean_entropy_cyclic_avg"] - cyc_m["mean_entropy_stored"])
                   / (1 - cyc_m["mean_entropy_stored"]).clip(lower=1e-12))
        share = pct(removed.iloc[0]) if pct(removed.min()) == pct(removed.max()) else \
            f"{pct(removed.min())}–{pct(removed.max())}"
        verdict = ("mostly a preference for answer **positions**, which the random answer orders spread evenly "
                   "over the groups" if removed.min() > 0.5 else
                   "mostly **not** a preference for positions" if removed.max() < 0.5 else
                   "a preference for positions in some models and not in others")
        unsure = cyc_m.loc[cyc_m["verdict"] != DISTINGUISHABLE, "model"]
        lines.append(
            f"Averaging over the cyclic rotations ({join(sorted({str(int(n)) for n in cyc_m['n']}), 'or')} prompts "
            "per model) moves the "
            f"mean entropy from {span(stored.min(), stored.max())} to {span(after.min(), after.max())}, "
            f"removing {share} of the departure from uniform: what the paper's metric registers here is {verdict}"
            + (". The paper's metric would report this position preference as (a small amount of) bias."
               if removed.min() > 0.5 else ".")
            + (f" The change is not distinguishable from chance (or not tested) for {join(unsure)}, so this is a "
               "tentative reading." if len(unsure) else ""))
    else:
        lines.append("No cyclic rotations were scored in this run, so position and group cannot be separated here.")
    grp = ut[(ut["unit"] == "group") & _dist(ut)]
    sig_gp = gp[_dist(gp)]
    found = [f"{r.model}'s {r.top} on {r.class_type}" for r in grp.itertuples()]
    found += [f"{r.model}'s {r.group} on {r.class_type} ({_pos_neg(r.diff_pos_minus_neg)})"
              for r in sig_gp.itertuples()]
    lines.append("Group-level results distinguishable from chance after adjustment: " + join(found) + "." if found
                 else "No group-level result is distinguishable from chance at this sample size after adjustment "
                      "(top-answer counts by group, positive-vs-negative differences).")
    return bullets(lines)
