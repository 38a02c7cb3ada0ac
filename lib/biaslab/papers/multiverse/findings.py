"""Notebook 6's findings: sentences rendered from its tables (design power, equivalence to the paper's protocol,
importance, ordering, format agreement, the matcher's validation), the robustness table notebook 5 reads, and the
section of docs/multiverse.md.

Every number in a sentence comes from a table row; wording keys only on the verdict / robustness columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ...benchmarks import SPECS
from ...report.wording import bullets, join, num, pct, present, pval, stated_power
from . import analysis

#: the file notebook 5 reads (relative to an outputs root) to mark a metric's robustness
ROBUSTNESS_TABLE = Path("06_multiverse") / "tables" / "robustness.csv"
ROBUSTNESS_COLUMNS = ["model", "metric", "unit", "margin", "n_universes", "n_judged", "n_equivalent",
                      "n_inconclusive", "n_differs", "n_opposite_direction", "n_not_judged", "n_same_sign",
                      "n_sign_compared", "min_difference", "max_difference", "equivalence_mde", "equivalence_mde_max",
                      "n_equivalence_powered", "n_equivalence_universes", "robustness"]


#: what a reader sees as the robustness table's headers (biaslab.report.display reads ``attrs["labels"]``)
ROBUSTNESS_LABELS = {
    "unit": "counted in", "margin": "margin (±)", "n_universes": "universes", "n_judged": "judged",
    "n_equivalent": "equivalent", "n_inconclusive": "inconclusive", "n_differs": "beyond the margin",
    "n_opposite_direction": "significant the other way", "n_not_judged": "not judged (degenerate)",
    "n_same_sign": "same sign as the paper", "n_sign_compared": "signs compared",
    "min_difference": "smallest difference", "max_difference": "largest difference",
    "equivalence_mde": "equivalence MDE (median)", "equivalence_mde_max": "equivalence MDE (largest)",
    "n_equivalence_powered": "universes powered at the margin", "n_equivalence_universes": "universes with an MDE",
    "robustness": "robustness"}


def robustness_table(rob: pd.DataFrame) -> pd.DataFrame:
    """Per (model, metric): the universes' equivalence to the paper's protocol (``analysis.robustness``), in the
    columns notebook 5 reads, labelled for a reader by :data:`ROBUSTNESS_LABELS`."""
    t = rob.reindex(columns=ROBUSTNESS_COLUMNS).reset_index(drop=True)
    t.attrs["labels"] = ROBUSTNESS_LABELS
    return t


def read_robustness(outputs_root: str | Path) -> pd.DataFrame | None:
    """Notebook 6's robustness table under ``outputs_root``, or None when notebook 6 has not run there (or its
    tables predate the equivalence columns: :func:`stale`)."""
    p = Path(outputs_root) / ROBUSTNESS_TABLE
    return pd.read_csv(p) if p.exists() and not stale(outputs_root) else None


def _unit(r: Mapping) -> str:
    return "other universes" if r.get("unit") == analysis.UNIVERSES else f"{r['unit']}"


def direction_words(r: Mapping) -> str:
    """What holds of the direction: how many universes keep the paper's sign."""
    if not r.get("n_sign_compared"):
        return "direction not compared"
    same, n = int(r["n_same_sign"]), int(r["n_sign_compared"])
    return f"direction: {same} of {n} {_unit(r)} keep the paper's sign" + (" (all)" if same == n else "")


def power_bound_words(r: Mapping) -> str:
    """The margin the design could show equivalence within (80 % power), against the declared margin."""
    mde, margin = r.get("equivalence_mde"), r["margin"]
    if mde is None or not np.isfinite(mde):
        return "no equivalence power (no standard error)"
    side = "within" if mde <= margin else "wider than"
    return f"the design shows equivalence with 80 % power within ±{num(mde)} (median), {side} the margin"


def robustness_sentence(r: Mapping) -> str:
    """One model x metric's equivalence to the paper's protocol, from its row of ``robustness.csv``: the magnitude
    (equivalence within the margin) and the direction (the sign kept) reported apart, since a universe can keep the
    sign and still differ by more than the margin."""
    left = (f"; {int(r['n_not_judged'])} not judged (a degenerate responder, or no variation to estimate)"
            if r.get("n_not_judged") else "")
    return (f"**{r['model']}**, {r['metric']}: magnitude: of {int(r['n_judged'])} {_unit(r)} judged, "
            f"{int(r['n_equivalent'])} equivalent to the paper's protocol within ±{num(r['margin'])}, "
            f"{int(r['n_inconclusive'])} inconclusive, {int(r['n_differs'])} beyond the margin, "
            f"{int(r['n_opposite_direction'])} significant the other way{left} — {r['robustness']}; "
            f"{direction_words(r)} ({power_bound_words(r)}).")


def robustness_findings(rob: pd.DataFrame) -> str:
    return bullets(robustness_sentence(r) for r in rob.to_dict("records"))


def design_findings(power: pd.DataFrame) -> str:
    """What the design can detect (``analysis.design_power``): per metric, the effect a universe's own test
    detects with 80 % power and the margin within which equivalence is shown with 80 % power, against the margin
    the plan declares."""
    lines = []
    for r in power.to_dict("records"):
        worst, powered, n_u = (r.get("equivalence_mde_max"), r.get("n_equivalence_powered"),
                               r.get("n_equivalence_universes"))
        if not np.isfinite(r["equivalence_mde"]):
            eq = "no equivalence power (the universes' differences do not vary: no standard error)"
        elif worst is not None and np.isfinite(worst) and present(powered) and present(n_u):
            eq = (f"to show equivalence within ±{num(r['equivalence_mde'])} in the median universe; "
                  f"{int(powered)} of {int(n_u)} universes could show it at the declared margin ±{num(r['margin'])} "
                  f"(the least powered needed ±{num(worst)}), so robustness "
                  f"{'can' if worst <= r['margin'] else 'cannot'} be shown in every universe")
        else:
            eq = (f"to show equivalence within ±{num(r['equivalence_mde'])} in the median universe (against the "
                  f"declared margin ±{num(r['margin'])})")
        pw, alpha = stated_power([r])
        lines.append(f"**{r['model']}**, {r['metric']}: with {int(r['n'])} items per universe the design had {pw} "
                     f"power for an effect of {num(r['own_mde'])} (the paper's universe's own test at α = {alpha}) "
                     f"and {eq}.")
    return bullets(lines)


def matcher_sentence(v: pd.DataFrame, n: int) -> str:
    """The matcher's validity: its option precision on the held-out answers (labelled, never read while its rules
    were written) first, then precision / recall per kind on the held-out and development answers
    (``matcher.check_labels``: a ``split`` column; a table without one is one pooled split)."""
    v = v if "split" in v else v.assign(split="all")
    out = []
    held = v[(v["split"] == "held-out") & (v["kind"] == "option")]
    if len(held) and held["n_read"].iloc[0]:
        h = held.iloc[0]
        out.append(f"Held out from the matcher's development, {int(h.n_correct)} of {int(h.n_read)} answers it read "
                   f"as an option name the labelled option (precision {pct(h.precision)}; recall "
                   f"{pct(h.recall)} of {int(h.n_labelled)}).")
    for split, g in v.groupby("split", sort=False):
        parts = [f"{r.kind} {pct(r.precision)} / {pct(r.recall)} (n = {r.n_labelled})" for r in g.itertuples()
                 if r.n_labelled or r.n_read]
        m = int(g["n_labelled"].sum())
        out.append(f"{split.capitalize()} ({m} of {n} labelled answers), precision / recall per kind: {join(parts)}.")
    return " ".join(out)


def _ranked(by_factor: pd.DataFrame) -> pd.DataFrame:
    return by_factor[by_factor["status"] == "ranked"]


def _separated(g: pd.DataFrame) -> list[str]:
    return [f"{r.factor} ({r.level})" for r in g[g["status"] == analysis.SEPARATED].itertuples()]


def importance_findings(by_factor: pd.DataFrame) -> str:
    if by_factor is None or not len(by_factor):
        return "No factor-importance model could be fitted (too few universes or a constant outcome)."
    lines = []
    for (m, b), g in by_factor.groupby(["model", "benchmark"], sort=False):
        top = _ranked(g).sort_values("rank").head(3)
        parts = [f"{r.factor} ({r.level}: {num(r.coef, 2)} {r.effect_scale}, clustered {pval(r.p_cluster)})"
                 for r in top.itertuples()]
        sep = _separated(g)
        lines.append(f"**{m}**, {b}: " + (f"the choices that move the outcome most are {join(parts)}" if parts
                                          else "no choice has an estimable effect")
                     + (f"; separated, so not ranked (effect not estimable): {join(sep)}" if sep else "") + ".")
    return bullets(lines)


def ordering_findings(kendall: pd.DataFrame, pairwise: pd.DataFrame) -> str:
    if pairwise is None or not len(pairwise):
        return "With fewer than two models, there is no ordering to check."
    lines = [f"{r.metric}: {r.model_a} vs {r.model_b} — the paper's universe has {r.reference_order}; "
             f"{int(r.n_agree)} of {int(r.n_universes)} other universes order them the same way."
             for r in pairwise.itertuples()]
    lines += [f"{r.metric}: Kendall's W = {num(r.w)} over {int(r.n_raters)} universes and {int(r.n_objects)} models."
              for r in kendall.itertuples() if np.isfinite(getattr(r, "w", np.nan))]
    return bullets(lines)


def ruted_findings(ruted: pd.DataFrame) -> str:
    if ruted is None or not len(ruted):
        return "The open-ended universe did not run, so multiple choice and open answers cannot be compared here."
    return bullets(
        f"**{r['model']}**: of {r['n_items']} BBQ items, {r['n_matched']} open answers could be matched "
        f"({r['n_unmatched']} unmatched, {r['n_multiple']} naming several options); on those, the open answer "
        f"falls in the multiple-choice answer's category for {pct(r['agreement'])} "
        f"[{pct(r['agreement_ci_low'])}, {pct(r['agreement_ci_high'])}] of items, Cohen's κ = "
        f"{num(r['kappa'], 2)} [{num(r['kappa_ci_low'], 2)}, {num(r['kappa_ci_high'], 2)}]; the ambiguous-context "
        f"bias score is {num(r['ambig_bias_open'])} open vs {num(r['ambig_bias_mc'])} multiple choice "
        f"(difference {num(r['ambig_bias_difference'])} [{num(r['difference_ci_low'])}, "
        f"{num(r['difference_ci_high'])}])."
        for r in ruted.to_dict("records"))


def cache_sentence(costs: pd.DataFrame) -> str:
    """How many universes came entirely from the score cache: no item scored *or generated* by the model
    (``cache_misses`` = 0, the Scorer's ``stats["computed"]``). Token positions alone do not say it: generation
    computes none of them."""
    n = int((costs["cache_misses"] == 0).sum())
    return f"{n} of {len(costs)} universes came entirely from the score cache (nothing scored or generated)"


def universes_sentence(universes: pd.DataFrame) -> str:
    """What was scored, saying what a count counts: model x benchmark universes (each benchmark's design has its
    own universes, run once per model), and every reason a universe did not run, whole."""
    ran = universes[universes["status"] == "run"]
    size = universes.groupby(["benchmark", "model"], sort=False).size().groupby(level=0, sort=False).max()
    design = (f"{int(size.iloc[0])} universes in each benchmark's design" if size.nunique() == 1 else
              "designs of " + join(f"{int(n)} ({b})" for b, n in size.items()) + " universes")
    text = (f"{len(ran)} of {len(universes)} model × benchmark universes scored ({universes['model'].nunique()} "
            f"model(s) × {universes['benchmark'].nunique()} benchmark(s), {design})")
    why = universes.loc[universes["status"] != "run", "status"].value_counts(sort=False)
    return text + ("; not scored: " + "; ".join(f"{n} × {w}" for w, n in why.items()) if len(why) else "")


def degenerate_levels(est: pd.DataFrame | None) -> set[tuple[str, str, str, str]]:
    """``(model, benchmark, factor, level)`` of the one-change universes that are degenerate responders for a
    metric of their benchmark (not judged: their effect is no finding)."""
    if est is None or not len(est) or "responder_status" not in est:
        return set()
    bad = est[est["responder_status"].astype(str).str.startswith("degenerate")]
    return {(r.model, r.benchmark, *str(r.universe).split("=", 1)) for r in bad.itertuples()
            if "+" not in str(r.universe) and "=" in str(r.universe)}


def top_choices(by_factor: pd.DataFrame, est: pd.DataFrame | None = None) -> tuple[list[str], list[str]]:
    """(the ranked choice that moves each model x benchmark's number most among judged universes — a level whose
    universe is a degenerate responder (:func:`degenerate_levels`) is skipped —, the separated terms left
    unranked)."""
    skip = degenerate_levels(est)
    ranked = _ranked(by_factor)
    ranked = ranked[[(r.model, r.benchmark, r.factor, str(r.level)) not in skip for r in ranked.itertuples()]]
    top = [f"{g.sort_values('rank').iloc[0].factor} ({b}, {m})"
           for (m, b), g in ranked.groupby(["model", "benchmark"], sort=False)]
    sep = [f"{b}/{m}: {join(_separated(g))}" for (m, b), g in by_factor.groupby(["model", "benchmark"], sort=False)
           if _separated(g)]
    return top, sep


def _matched(r) -> str:
    """The matched count of the open-ended agreement, and what was not matched."""
    return (f"the {int(r.n_matched)} of {int(r.n_items)} items whose open answer was matched "
            f"({int(r.n_items - r.n_matched)} not: {int(r.n_unmatched)} unmatched, {int(r.n_multiple)} naming "
            "several options)")


def summary_lines(universes, costs, rob, by_factor, kendall, ruted, est=None) -> list[str]:
    out = [universes_sentence(universes) + "."]
    if len(costs):
        out.append(f"scoring took {num(costs['seconds'].sum(), 3)} s in all, {num(costs['seconds'].median(), 2)} s "
                   f"per universe (median); {cache_sentence(costs)}.")
    bad = rob[rob["robustness"].astype(str).str.startswith("not robust")]
    good = rob[rob["robustness"].astype(str).str.startswith("robust")]
    out.append(f"of {len(rob)} model × metric rows, {len(good)} robust in magnitude (every universe equivalent "
               f"within the plan's margin), {len(bad)} not robust"
               + (" (" + join(f"{r['metric']}, {r['model']}: {direction_words(r)}"
                              for r in bad.to_dict("records")) + ")" if len(bad) else "")
               + f", {len(rob) - len(good) - len(bad)} inconclusive or undefined.")
    if by_factor is not None and len(by_factor):
        top, sep = top_choices(by_factor, est)
        out.append("largest estimable effect per model x benchmark (judged universes): " + join(top) + "."
                   + (f" Separated, so not ranked (effect not estimable): {'; '.join(sep)}." if sep else ""))
    if ruted is not None and len(ruted):
        out.append("open vs multiple-choice category agreement on BBQ: " + join(
            f"{r.model} {pct(r.agreement)} (κ {num(r.kappa, 2)}) on {_matched(r)}" for r in ruted.itertuples())
                   + ".")
    return out


def _readme_part(r) -> str:
    return (f"{r.metric} ({r.model}): {int(r.n_equivalent)}/{int(r.n_judged)} equivalent within ±{num(r.margin)}, "
            f"{int(r.n_differs + r.n_opposite_direction)} beyond it or the other way")


def readme_section(agreement: pd.DataFrame, by_factor: pd.DataFrame, ruted: pd.DataFrame,
                   universes: pd.DataFrame, est: pd.DataFrame | None = None, figure: str = "outputs/06_multiverse/figures/"
                   "specification_curve_bbq_bias_ambig.png") -> str:
    """The multiverse paragraph of :data:`HOME` with its headline figure, rendered from notebook 6's tables;
    ``agreement``: the robustness table."""
    heads = [next(m.id for m in s.metrics if m.item_values and m.estimate) for s in SPECS.values()
             if any(m.item_values and m.estimate for m in s.metrics)]      # each benchmark's first multiverse metric
    rows = agreement[agreement["metric"].isin(heads) & (agreement["n_judged"] > 0)]
    text = ("**Multiverse (notebook 6).** One evaluation choice changed at a time around the paper's protocol "
            "(answer format, wording, chat template, examples, option order, precision, CrowS-Pairs normalization), "
            f"on design-preserving subsets of BBQ, CrowS-Pairs and the agentic set: {universes_sentence(universes)}. "
            "Equivalence to the paper's protocol (paired difference, TOST within the analysis plan's margin; a "
            "degenerate responder is not judged): " + ("; ".join(_readme_part(r) for r in rows.itertuples())
                                                       or "none computed") + ". ")
    if by_factor is not None and len(by_factor):
        top, sep = top_choices(by_factor, est)
        text += "The choice that moves a number most (judged universes): " + join(top) + (
            f" (separated terms, whose effect is not estimable, are not ranked: {'; '.join(sep)})" if sep else "") \
            + ". "
    if ruted is not None and len(ruted):
        text += "Open-ended BBQ answers agree with the multiple-choice answer's category on " + join(
            f"{pct(r.agreement)} [{pct(r.agreement_ci_low)}, {pct(r.agreement_ci_high)}] of {_matched(r)} for "
            f"{r.model}" for r in ruted.itertuples()) + " ([`format_agreement.csv`]" \
            "(outputs/06_multiverse/tables/format_agreement.csv))."
    return text + f"\n\n![Specification curve]({figure})\n"


#: the page that holds the multiverse section (between the markers below), rendered by ``biaslab summary``
HOME = "docs/multiverse.md"
README_START = "<!-- multiverse:start -->"
README_END = "<!-- multiverse:end -->"


#: columns notebook 6's tables carry since robustness became equivalence: tables without them are rendered by
#: nothing here (their counts meant something else)
CURRENT_COLUMNS = {"robustness": ["n_equivalent", "margin", "equivalence_mde"],
                   "costs": ["cache_misses"], "estimates": ["responder_status"], "importance_by_factor": ["status"]}


def tables_dir(outputs_root: str | Path) -> Path:
    return Path(outputs_root) / "06_multiverse" / "tables"


def read_table(outputs_root: str | Path, name: str) -> pd.DataFrame:
    p = tables_dir(outputs_root) / f"{name}.csv"
    return pd.read_csv(p) if p.exists() and p.stat().st_size > 1 else pd.DataFrame()


def stale(outputs_root: str | Path) -> str | None:
    """Why notebook 6's tables under ``outputs_root`` cannot be rendered (not run there, or written before the
    columns of :data:`CURRENT_COLUMNS`), or None when they can."""
    if not (tables_dir(outputs_root) / "robustness.csv").exists():
        return "notebook 6 has not run there"
    for name, cols in CURRENT_COLUMNS.items():
        t = read_table(outputs_root, name)
        missing = [c for c in cols if c not in t]
        if len(t) and missing:                          # an empty table (nothing to rank) has nothing stale
            return f"its {name}.csv predates the columns {missing}: regenerate notebook 6 (make reproduce)"
    return None


def render_readme_section(outputs_root: str | Path) -> str | None:
    """:func:`readme_section` from the tables notebook 6 wrote under ``outputs_root``; None when they cannot be
    rendered (:func:`stale`: not run there, or written before the current columns), and the page keeps its block.
    :data:`HOME` holds it between ``README_START`` and ``README_END``; ``tests/test_multiverse.py`` checks the block
    equals this rendering whenever it renders."""
    if stale(outputs_root):
        return None
    read = lambda n: read_table(outputs_root, n)      # noqa: E731
    return readme_section(read("robustness"), read("importance_by_factor"), read("format_agreement"),
                          read("universes"), read("estimates"))

