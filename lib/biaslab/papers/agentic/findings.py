"""Notebook 4's findings: one sentence per instance of the analysis plan's claim (Cohen's w of the top answer's spread
over a class type's groups per question polarity, Rao–Scott chi-square, decided under the plan), and descriptive lines (mean entropy against the paper's
models, what the rotation average removes). Positions, the cyclic gain, the breakdowns, the group preference and the
paired comparison are exploratory tables. The normalized entropy is the paper's §II.D,
:math:`\\tilde H = H / \\log k`; a uniform answer has :math:`\\tilde H = 1`.
"""

from __future__ import annotations

import pandas as pd

from ...report.wording import bullets, claim_findings, interval, join, num, pct, span
from .decisions import NOTEBOOK

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


def _responder_note(r) -> str:
    s = r.get("responder_status")
    return (f" **Responder check for this metric: {s}** — its tests are not interpreted."
            if isinstance(s, str) and s.startswith("degenerate") else "")


def uniformity_findings(ut: pd.DataFrame, plan) -> str:
    """One sentence per instance of ``plan``'s claims in the decided ``uniformity_tests``."""
    return claim_findings([ut], plan.of(NOTEBOOK))


def summary_findings(by_model: pd.DataFrame, cyc_m: pd.DataFrame | None, ut: pd.DataFrame) -> str:
    """The closing 'What this means' points that depend on the run: how much of the departure from uniform the
    rotation average removes (position; descriptive), and how many instances of the plan's claim are
    distinguishable."""
    lines = []
    if cyc_m is not None and len(cyc_m):
        stored, after = cyc_m["mean_entropy_stored"], cyc_m["mean_entropy_cyclic_avg"]
        removed = (after - stored) / (1 - stored).clip(lower=1e-12)
        share = pct(removed.iloc[0]) if pct(removed.min()) == pct(removed.max()) else \
            f"{pct(removed.min())}–{pct(removed.max())}"
        verdict = ("mostly a preference for answer **positions**, which the random answer orders spread evenly "
                   "over the groups" if removed.min() > 0.5 else
                   "mostly **not** a preference for positions" if removed.max() < 0.5 else
                   "a preference for positions in some models and not in others")
        lines.append(
            f"Averaging over the cyclic rotations ({join(sorted({str(int(n)) for n in cyc_m['n']}), 'or')} prompts "
            "per model) moves the "
            f"mean entropy from {span(stored.min(), stored.max())} to {span(after.min(), after.max())}, "
            f"removing {share} of the departure from uniform: what the paper's metric registers here is {verdict}"
            + (". The paper's metric would report this position preference as (a small amount of) bias."
               if removed.min() > 0.5 else "."))
    else:
        lines.append("No cyclic rotations were scored in this run, so position and group cannot be separated here.")
    conf = ut[ut["claim"] != ""] if "claim" in ut else ut.iloc[:0]
    n = int((conf["verdict"] == "distinguishable").sum())
    lines.append(f"{n} of {len(conf)} model × class-type × polarity instances of the plan's claim (top answer spread "
                 "over groups, Cohen's w) are distinguishable from an equal spread; every other group-level result is "
                 "exploratory.")
    return bullets(lines)
