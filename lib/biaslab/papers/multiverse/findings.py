"""Notebook 6's findings: sentences rendered from its tables (agreement, importance, ordering, format agreement),
the robustness table notebook 5 reads, and the README section.

Every number in a sentence comes from a table row; wording keys only on the verdict / robustness columns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...findings import bullets, join, num, pct

#: the file notebook 5 reads (relative to an outputs root) to mark a metric's robustness
ROBUSTNESS_TABLE = Path("06_multiverse") / "tables" / "robustness.csv"
ROBUSTNESS_COLUMNS = ["model", "metric", "n_universes", "share_same_sign", "share_same_verdict", "sign_flips",
                      "paper_verdict", "robustness", "flip_threshold"]


def robustness_table(agreement: pd.DataFrame) -> pd.DataFrame:
    """Per (model, metric): how many universes ran, the shares agreeing with the paper's protocol, and the
    robustness verdict (``analysis.agreement_with_paper``), in the columns notebook 5 reads."""
    t = agreement.copy()
    for c in ROBUSTNESS_COLUMNS:
        if c not in t:
            t[c] = np.nan
    return t[ROBUSTNESS_COLUMNS].reset_index(drop=True)


def read_robustness(outputs_root: str | Path) -> pd.DataFrame | None:
    """Notebook 6's robustness table under ``outputs_root``, or None when notebook 6 has not run there."""
    p = Path(outputs_root) / ROBUSTNESS_TABLE
    return pd.read_csv(p) if p.exists() else None


def _share(n_same, n) -> str:
    return f"{int(n_same)} of {int(n)}"


def agreement_findings(agreement: pd.DataFrame) -> str:
    lines = []
    for r in agreement.to_dict("records"):
        if not r.get("n_universes"):
            lines.append(f"**{r['model']}**, {r['metric']}: {r.get('robustness', 'no other universe ran')}.")
            continue
        est = f"the paper's universe gives {num(r['paper_estimate'])} ({r['paper_verdict']}); " \
            if isinstance(r.get("paper_verdict"), str) else ""
        lines.append(
            f"**{r['model']}**, {r['metric']}: {est}{_share(r['n_same_sign'], r['n_universes'])} other universes "
            f"land on the same side of the null and {_share(r['n_same_verdict'], r['n_universes'])} reach the same "
            f"verdict — {r['robustness']}"
            + (f" (estimates from {num(r['min_estimate'])} to {num(r['max_estimate'])})."
               if np.isfinite(r.get("min_estimate", np.nan)) else "."))
    return bullets(lines)


def importance_findings(by_factor: pd.DataFrame) -> str:
    if by_factor is None or not len(by_factor):
        return "No factor-importance model could be fitted (too few universes or a constant outcome)."
    lines = []
    for (m, b), g in by_factor.groupby(["model", "benchmark"], sort=False):
        top = g.sort_values("rank").head(3)
        parts = [f"{r.factor} ({r.level}: {num(r.coef, 2)} {r.effect_scale}, clustered p {num(r.p_cluster, 2)})"
                 for r in top.itertuples()]
        lines.append(f"**{m}**, {b}: the choices that move the outcome most are {join(parts)}.")
    return bullets(lines)


def ordering_findings(kendall: pd.DataFrame, pairwise: pd.DataFrame) -> str:
    if pairwise is None or not len(pairwise):
        return "With fewer than two models, there is no ordering to check."
    lines = []
    for r in pairwise.itertuples():
        lines.append(f"{r.metric}: {r.model_a} vs {r.model_b} — the paper's universe has {r.reference_order}; "
                     f"{_share(r.n_agree, r.n_universes)} other universes order them the same way.")
    for r in kendall.itertuples():
        if np.isfinite(getattr(r, "w", np.nan)):
            lines.append(f"{r.metric}: Kendall's W = {num(r.w)} over {int(r.n_raters)} universes and "
                         f"{int(r.n_objects)} models.")
    return bullets(lines)


def ruted_findings(ruted: pd.DataFrame) -> str:
    if ruted is None or not len(ruted):
        return "The open-ended universe did not run, so multiple choice and open answers cannot be compared here."
    lines = []
    for r in ruted.to_dict("records"):
        lines.append(
            f"**{r['model']}**: of {r['n_items']} BBQ items, {r['n_matched']} open answers could be matched "
            f"({r['n_unmatched']} unmatched, {r['n_multiple']} naming several options); on those, the open answer "
            f"falls in the multiple-choice answer's category for {pct(r['agreement'])} "
            f"[{pct(r['agreement_ci_low'])}, {pct(r['agreement_ci_high'])}] of items, Cohen's κ = "
            f"{num(r['kappa'], 2)} [{num(r['kappa_ci_low'], 2)}, {num(r['kappa_ci_high'], 2)}]; the ambiguous-context "
            f"bias score is {num(r['ambig_bias_open'])} open vs {num(r['ambig_bias_mc'])} multiple choice "
            f"(difference {num(r['ambig_bias_difference'])} [{num(r['difference_ci_low'])}, "
            f"{num(r['difference_ci_high'])}]).")
    return bullets(lines)


def cache_sentence(costs: pd.DataFrame) -> str:
    """How many universes came entirely from the score cache: no item scored *or generated* by the model
    (``cache_misses`` = 0, the Scorer's ``stats["computed"]``). Token positions alone do not say it: generation
    computes none of them. A costs table without ``cache_misses`` (written before it) does not say which."""
    if "cache_misses" not in costs:
        return "which universes came from the score cache is not recorded (costs.csv has no cache_misses column)"
    n = int((costs["cache_misses"] == 0).sum())
    return f"{n} of {len(costs)} universes came entirely from the score cache (nothing scored or generated)"


def summary_lines(universes, costs, agreement, by_factor, kendall, ruted) -> list[str]:
    ran = universes[universes["status"] == "run"]
    na = universes[universes["status"] != "run"]
    out = [f"{len(ran)} universes scored over {universes['model'].nunique()} model(s) and "
           f"{universes['benchmark'].nunique()} benchmark(s); {len(na)} listed as not available"
           + (f" ({join(sorted(set(s.split(':', 1)[1].strip()[:60] for s in na['status'])))})" if len(na) else "")
           + "."]
    if len(costs):
        out.append(f"scoring took {num(costs['seconds'].sum(), 3)} s in all, {num(costs['seconds'].median(), 2)} s "
                   f"per universe (median); {cache_sentence(costs)}.")
    flagged = agreement[agreement["robustness"].astype(str).str.startswith(("sign flips", "verdict changes"))]
    out.append(f"{len(flagged)} of {len(agreement)} model x metric rows are marked not robust"
               + (": " + join(f"{r.metric} ({r.model}: {r.robustness})" for r in flagged.itertuples())
                  if len(flagged) else "") + ".")
    if by_factor is not None and len(by_factor):
        top = by_factor[by_factor["rank"] == 1]
        out.append("largest effect per model x benchmark: " + join(f"{r.benchmark}/{r.model}: {r.factor}"
                                                                  for r in top.itertuples()) + ".")
    if ruted is not None and len(ruted):
        out.append("open vs multiple-choice category agreement on BBQ: " + join(
            f"{r.model} {pct(r.agreement)} (κ {num(r.kappa, 2)})" for r in ruted.itertuples()) + ".")
    return out


def readme_section(agreement: pd.DataFrame, by_factor: pd.DataFrame, ruted: pd.DataFrame,
                   universes: pd.DataFrame, figure: str = "outputs/06_multiverse/figures/"
                   "specification_curve_bbq_bias_ambig.png") -> str:
    """The README's multiverse paragraph with its headline figure, rendered from notebook 6's tables (the README's
    generated headline block includes it)."""
    ran = universes[universes["status"] == "run"]
    rows = agreement[agreement["metric"].isin(["bbq_bias_ambig", "crows_en_stereotype_preferred",
                                               "agentic_mean_entropy"])]
    parts = [f"{r.metric} ({r.model}): {int(r.n_same_sign)}/{int(r.n_universes)} same sign, "
             f"{int(r.n_same_verdict)}/{int(r.n_universes)} same verdict" for r in rows.itertuples()
             if r.n_universes]
    flagged = agreement[agreement["robustness"].astype(str).str.startswith(("sign flips", "verdict changes"))]
    text = (f"**Multiverse (notebook 6).** {len(ran)} universes — one evaluation choice changed at a time around the "
            "paper's protocol (answer format, wording, chat template, examples, option order, precision, CrowS-Pairs "
            "normalization) — on design-preserving subsets of BBQ, CrowS-Pairs and the agentic set. Agreement with "
            "the paper's protocol: " + ("; ".join(parts) or "none computed") + ". "
            + (f"Marked not robust: {join(f'{r.metric} for {r.model}' for r in flagged.itertuples())}. "
               if len(flagged) else "No metric is marked not robust. "))
    if by_factor is not None and len(by_factor):
        top = by_factor[by_factor["rank"] == 1]
        text += "The choice that moves a number most: " + join(
            f"{r.factor} ({r.benchmark}, {r.model})" for r in top.itertuples()) + ". "
    if ruted is not None and len(ruted):
        text += "Open-ended BBQ answers agree with the multiple-choice answer's category on " + join(
            f"{pct(r.agreement)} [{pct(r.agreement_ci_low)}, {pct(r.agreement_ci_high)}] of matched items for "
            f"{r.model}" for r in ruted.itertuples()) + " ([`format_agreement.csv`]" \
            "(outputs/06_multiverse/tables/format_agreement.csv))."
    return text + f"\n\n![Specification curve]({figure})\n"


README_START = "<!-- multiverse:start -->"
README_END = "<!-- multiverse:end -->"


def render_readme_section(outputs_root: str | Path) -> str | None:
    """:func:`readme_section` from the tables notebook 6 wrote under ``outputs_root`` (None when it has not run
    there). The README holds it between ``README_START`` and ``README_END``; ``tests/test_multiverse.py`` checks the
    block equals this rendering whenever ``outputs/06_multiverse/`` exists."""
    t = Path(outputs_root) / "06_multiverse" / "tables"
    if not (t / "agreement.csv").exists():
        return None
    read = lambda n: pd.read_csv(t / f"{n}.csv") if (t / f"{n}.csv").exists() else pd.DataFrame()   # noqa: E731
    return readme_section(read("agreement"), read("importance_by_factor"), read("format_agreement"),
                          read("universes"))


def readme_block(readme_text: str) -> str | None:
    """The text between the README's multiverse markers (None without markers)."""
    if README_START not in readme_text or README_END not in readme_text:
        return None
    return readme_text.split(README_START, 1)[1].split(README_END, 1)[0].strip("\n")
