"""Notebook 1's findings: the run's response and subgroup tables turned into Markdown sentences.

Deviation = the model gives the benchmark's biased answer; the deviation metric is the paper's eq. 4 (mean |d(g) − C|
over subgroups). The one decided comparison is the analysis plan's claim (the template-paired difference of two models'
deviation metrics); the paired deviation rates and the paper's two-sample test are exploratory tables.
"""

from __future__ import annotations

import pandas as pd

from ...report.wording import bullets, claim_findings, join, num, pct, power_sentence, present, span
from ...plots.labels import hdi_prob, interval_label
from .decisions import NOTEBOOK, decide_bayes


def _gini_words(r: dict, paper: dict | None) -> str:
    ref = (paper or {}).get(r["factor"].split(" (")[0])
    vs = ("" if ref is None or not present(ref) else " = Table 1" if round(r["gini"], 3) == ref else
          f"; Table 1: {num(ref)}")
    return (f"{r['factor']} {num(r['gini'])} ({int(r['n_levels'])} levels of {span(r['min_count'], r['max_count'])}"
            f" prompts{vs})")


def coverage_findings(by_factor: pd.DataFrame, overall: pd.DataFrame, units: pd.DataFrame | None = None,
                      unit_factors: tuple = (), unit: str = "template", paper_gini: dict | None = None,
                      paper_overall: dict | None = None) -> str:
    """The design's coverage in words, every number from ``coverage_by_factor`` / ``coverage_overall`` /
    ``coverage_units`` (:func:`biaslab.stats.coverage.unit_levels`): per-factor Gini indices (eq. 2) with their
    level counts, against the paper's Table 1 where given (``paper_gini``, the paper's printed values); how many
    ``unit``s hold each level of ``unit_factors``; and each factor set's coverage (eq. 1) and Gini, the set the paper
    reports beside the paper's printed numbers (``paper_overall``: n_combinations, coverage_percentage, gini)."""
    lines = ["Per-factor Gini index (eq. 2; 0 = every level equally often): "
             + "; ".join(_gini_words(r, paper_gini) for r in by_factor.to_dict("records")) + "."]
    for f in unit_factors:
        u = units[units["factor"] == f] if units is not None and len(units) else pd.DataFrame()
        if len(u):
            lines.append(f"{f} by {unit}: " + join(f"{int(r.n_units)} {unit}s hold *{r.level}*"
                                                  for r in u.itertuples()) + ".")
    for r in overall.to_dict("records"):
        gi = "> 0.999" if 0.999 < r["gini"] < 1 else num(r["gini"])      # not "1" for 0.999998
        text = (f"{r['set']}: {int(r['n_covered']):,} of {int(r['n_combinations']):,} combinations covered (CP "
                f"{num(r['coverage_percentage'], 4)}), GI {gi}")
        if paper_overall and str(r["set"]).startswith("paper ("):
            text += (f"; the paper reports CP {num(paper_overall['coverage_percentage'])} and GI "
                     f"{num(paper_overall['gini'])} for \"{int(paper_overall['n_combinations']):,} factor value "
                     "combinations\"")
        lines.append(text + ".")
    return bullets(lines)


def released_findings(answers: pd.DataFrame) -> str:
    """Deviation rates of the released models' answers, and how many answers were none of the labels."""
    lines = []
    for r in answers.to_dict("records"):
        n = sum(v for k, v in r.items() if k not in ("model", "deviation_rate"))
        other = r.get("other", 0) + r.get("", 0)
        lines.append(f"**{r['model']}** (released answers): deviation rate {num(r['deviation_rate'])} over {n:,} "
                     f"prompts; {other:,} answer{'s were' if other != 1 else ' was'} neither yes, no nor can't tell.")
    return bullets(lines)


def label_findings(mass: pd.DataFrame, cot: pd.DataFrame | None = None, cant_tell_floor: float = 0.05) -> str:
    """Per embedded model (SSQA, no CoT): label mass, mean probability of each answer, the answer it gives most,
    deviation rate; with CoT, the share of generations without an extractable answer."""
    lines = []
    for r in mass.to_dict("records"):
        top = max(("yes", "no", "can't tell"), key=lambda a: r.get(f"answer_{a}", 0))
        ct = ("puts noticeable probability on \"can't tell\"" if r["p_cant_tell"] >= cant_tell_floor else
              "puts almost no probability on \"can't tell\"")
        lines.append(f"**{r['model']}**: {pct(r['mean_label_mass'])} of the next-token probability lands on an "
                     f"answer form (minimum {pct(r['min_label_mass'])}); renormalised, it {ct} "
                     f"({pct(r['p_cant_tell'], 1)}) and answers \"{top}\" to {pct(r[f'answer_{top}'])} of "
                     f"{int(r['n'])} prompts; deviation rate {num(r['deviation_rate'])}.")
    if cot is not None:
        for r in cot.to_dict("records"):
            lines.append(f"**{r['model']}** with chain of thought: {pct(r['other_rate'])} of {int(r['n'])} "
                         f"generations state no extractable answer (`other`); deviation rate "
                         f"{num(r['deviation_rate'])} against {num(r['no_cot_deviation_rate_same_prompts'])} "
                         "without CoT on the same prompts.")
    return bullets(lines)


def subgroup_findings(dm: pd.DataFrame, *decided: pd.DataFrame | None, plan) -> str:
    """Deviation metric per model (descriptive), then one sentence per instance of the plan's claims among the
    ``decided`` tables (verdict columns of :mod:`.decisions`)."""
    lines = [f"**{r['model']}**: deviation metric {num(r['deviation_metric'])} over {int(r['n_subgroups'])} "
             f"{r['factors']} subgroups (median rate {num(r['median_rate'])})." for r in dm.to_dict("records")]
    return "\n".join(x for x in (bullets(lines), claim_findings(decided, plan.of(NOTEBOOK))) if x)


def power_findings(power: pd.DataFrame) -> str:
    """Per model pair of ``power.csv``'s paired rows: the paired difference in deviation rate the analysed design
    (``mde_design``) had 80 % power for, or why it has none (``mde_note``)."""
    rows = power[power["quantity"].str.endswith("(paired)")] if len(power) else power
    return bullets(power_sentence([r], f"{r['quantity'].split(', ', 1)[1].removesuffix(' (paired)')}, "
                                       f"{int(r['n']):,} prompts answered by both", digits=3)
                   for r in rows.to_dict("records"))


def bayes_findings(summary: pd.DataFrame, diagnostics: pd.DataFrame, rhat_max: float = 1.01,
                   ess_min: float = 400, *, plan) -> str:
    """Per fitted model: whether the sampler meets the usual thresholds (R-hat ≤ 1.01, bulk and tail ESS ≥ 400, no
    divergences), the terms whose HDI excludes 0 and the widest HDI (the least determined effect)."""
    lines = []
    if "verdict" not in summary:
        summary = decide_bayes(summary, plan=plan)              # the HDI's verdict against 0 (biaslab.stats.verdict)
    for d in diagnostics.to_dict("records"):
        ok = (d["max_r_hat"] <= rhat_max and min(d["min_ess_bulk"], d["min_ess_tail"]) >= ess_min
              and d["divergences"] == 0)
        s = summary[(summary["model"] == d["model"]) & (summary["term"] != "Intercept")
                    & ~summary["term"].str.contains("sigma")]
        lo, hi = [c for c in s.columns if c.startswith("hdi_")][:2]
        clear = s[s["excludes_null"].astype("boolean").fillna(False).astype(bool)]["term"].tolist()
        widest = s.loc[(s[hi] - s[lo]).idxmax()] if len(s) else None
        lines.append(
            f"**{d['model']}**: " + ("the sampler meets the usual thresholds" if ok else
                                     "the sampler is **below the usual thresholds**, so the estimates are provisional")
            + f" (max R-hat {num(d['max_r_hat'])}, min bulk / tail ESS {int(d['min_ess_bulk'])} / "
              f"{int(d['min_ess_tail'])}, {int(d['divergences'])} divergences). "
            + (f"{interval_label('HDI', hdi_prob(lo, hi))} excludes 0 for {len(clear)} of {len(s)} terms"
               + (f" ({', '.join(clear[:6])}{', …' if len(clear) > 6 else ''})" if clear else "") + "; "
               if len(s) else "")
            + (f"the widest interval is {widest['term']} ({num(widest[lo], 2)} to {num(widest[hi], 2)})."
               if widest is not None else ""))
    return bullets(lines)


def summary_findings(summaries: dict) -> str:
    """Sentences on a benchmark's own score tables (``FactorPlan.summaries``): SSQA's label distribution (and chain
    of thought); nothing for tables without sentences."""
    if "label_distribution" not in summaries:
        return ""
    return label_findings(summaries["label_distribution"], summaries.get("cot_summary"))
