"""Notebook 3's findings: the run's likelihood and preference tables turned into Markdown sentences.

Likelihood scheme: LPBS (eq. 3, mean normalized log-probability difference) with the paired t test and the JZS
Bayes factor (eq. 8). Decisions are read from the verdict columns of :mod:`.decisions` (the confirmatory family is the
pooled LPBS per model × dataset); a Bayes factor is called evidence only when its whole prior range agrees.
Preference scheme: π̂ = k/n with the exact binomial test and the uniform-prior BF10 (eq. 9); position bias and order
consistency of the two-order preference prompt (beyond the paper).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ...findings import bullets, decision, evidence, interval, join, num, pct, present
from ...stats import hypothesis as hyp

MORE, LESS = "the more stereotypical sentences", "the less stereotypical sentences"


def favoured(estimate, null: float = 0.0) -> str:
    """Which sentence of a pair a departure from no preference favours, from the estimate's sign: D > 0 (eq. 2-3,
    LPBS) or π̂ > 0.5 (eq. 6) when the more stereotypical sentence is more likely / preferred. The tests are
    two-sided, so "evidence for H1" is evidence of a *difference* from no preference; its direction is this. ""
    when the estimate is missing or equals the null."""
    if not present(estimate) or estimate == null:
        return ""
    return MORE if estimate > null else LESS


def h1_words(estimate, null: float = 0.0) -> str:
    """H1 of a two-sided test in words, with the direction of the estimate: 'a preference for the less
    stereotypical sentences (H1, two-sided)'."""
    side = favoured(estimate, null)
    return f"a preference for {side} (H1, two-sided)" if side else "a difference from no preference (H1)"


def likelihood_findings(lik: pd.DataFrame, score: str = "norm_logprob") -> str:
    """Per model and dataset, the pooled (overall) LPBS with its interval, direction, verdict (the confirmatory
    family of :mod:`.decisions`) and the Bayes factor's reading over its prior range."""
    lines = []
    rows = lik[(lik["bias_type"] == hyp.OVERALL) & (lik["score"] == score)]
    for r in rows.to_dict("records"):
        side = favoured(r["mean_d"])
        side = f"{side.removeprefix('the ')} more likely" if side else "no difference on average"
        test = r.get("p_method") or r.get("lead_test") or "the paired test"
        ev = evidence(r, h1_words(r["mean_d"]), "no preference (H0)")
        lines.append(f"**{r['model']} · {r['dataset']}**: LPBS = {num(r['lpbs'])} {interval(r)} over {int(r['n']):,} "
                     f"pairs ({side}); by {'the paired t test' if test == 't' else test}, "
                     f"{decision(r, 'no preference', '0')}"
                     + (f"; {ev}" if ev else "") + ".")
    return bullets(lines)


def preference_findings(pref: pd.DataFrame, answers: pd.DataFrame, pos: pd.DataFrame | None,
                        cons: pd.DataFrame | None) -> str:
    """Pooled preference results per model, dataset and source; then, for prompted models, how much they answer by
    position (share naming the first sentence per order; same sentence / same position across the two orders)."""
    lines = []
    for (m, name), g in pref[pref.bias_type == hyp.OVERALL].groupby(["model", "dataset"], sort=False):
        row = g.set_index("source")
        parts = [f"{src}: π̂ = {r.pi_hat:.2f}, {decision(r, 'π = 0.5', '0.5')}"
                 + (f", {evidence(r, h1_words(r.pi_hat, 0.5), 'π = 0.5')}" if evidence(r) else "")
                 for src, r in row.iterrows()]
        lines.append(f"**{m} · {name}** — " + "; ".join(parts))
    if len(answers) and cons is not None and pos is not None:
        for r in cons.itertuples():
            pf = pos[(pos.model == r.model) & (pos.dataset == r.dataset)].set_index("order").p_first
            verdict = ("answers by **position**, not by content" if r.same_position > 0.9 else
                       "answers mostly by content" if r.same_sentence > 0.8 else "answers partly by position")
            lines.append(f"**{r.model} · {r.dataset}** names the first sentence in "
                         + ", ".join(f"{o}: {pct(v)}" for o, v in pf.items())
                         + f" of answers; across the two orders it keeps the same sentence for {pct(r.same_sentence)} "
                         f"and the same position for {pct(r.same_position)} of {r.n_pairs} pairs: it {verdict}.")
    return bullets(lines)


def sample_findings(lik: pd.DataFrame, score: str = "norm_logprob") -> str:
    """How many pairs each bias type of this run holds, and how many bias-type Bayes factors say something over
    their whole prior range (``bf_direction``): the run-dependent part of the reading of Table 2."""
    t = lik[(lik["bias_type"] != hyp.OVERALL) & (lik["score"] == score)]
    if t.empty:
        return "This run has no bias-type rows."
    n = t["n"].astype(int)
    pooled = lik[(lik["bias_type"] == hyp.OVERALL) & (lik["score"] == score)]["n"].astype(int)
    d = t["bf_direction"].astype("string") if "bf_direction" in t else pd.Series(pd.NA, index=t.index,
                                                                               dtype="string")
    ranged = int(d.notna().sum())
    h1, h0 = int((d == "H1").sum()), int((d == "H0").sum())
    h1_less = int(((d == "H1") & (t["mean_d"] < 0)).sum())
    lines = [f"Per bias type and dataset this run scores {num(n.min())} to {num(n.max())} pairs (median "
             f"{num(float(n.median()))}); the pooled rows hold {num(pooled.min())} to {num(pooled.max())}."]
    if ranged:
        lines.append(f"Of the {len(t)} bias-type cells, {h1} show evidence of a difference from no preference (H1, "
                     f"two-sided) over the whole prior range — {h1 - h1_less} toward {MORE} and {h1_less} toward "
                     f"{LESS} — and {h0} for no preference; the other {ranged - h1 - h0} are inconclusive across "
                     "priors.")
    else:
        lines.append(f"None of the {len(t)} bias-type Bayes factors has a prior range in this table, so none is read "
                     "as evidence either way.")
    return bullets(lines)


def _exponent_off(ratio: float) -> int:
    """The power of ten by which a printed BF10 is off (printed / recomputed = 10^m, within 5 %), else 0."""
    if not present(ratio) or ratio <= 0:
        return 0
    m = round(math.log10(ratio))
    return m if m and abs(math.log10(ratio) - m) < 0.02 else 0


def _published_row(r: Mapping) -> str:
    """One disagreeing Bayes factor of the paper's Table 3: printed vs recomputed (the paper's prior), why, and what
    the prior range says."""
    head = (f"**{r['bias_type']}** — printed {hyp.sci(r['reported_bf10'])}, recomputed {num(r['bf10'], 4)} "
            f"({int(r['k'])} of {int(r['n'])})")
    if not r["evidence_ok"]:
        floor = hyp.min_bf10_uniform(int(r["n"]))
        why = (f"; with {int(r['n'])} trials the uniform-prior BF10 cannot fall below {num(floor)} whatever the "
               "count, so the printed value is impossible" if r["reported_bf10"] < floor else
               f"; the exponent is off by {abs(_exponent_off(r['bf10_ratio']))}" if _exponent_off(r["bf10_ratio"])
               else "")
        rng = r.get("evidence_over_prior_range")
        return (head + f": under the paper's prior (Beta(1, 1), eq. 9) {r['evidence']}, not {r['reported_evidence']}"
                + why + (f"; over Beta(a, a), a in {{{', '.join(f'{a:g}' for a in hyp.BETA_PRIORS)}}}: {rng}"
                         if isinstance(rng, str) and rng else "") + ".")
    kind = "truncated rather than rounded" if "truncated" in str(r.get("note")) else "off by one"
    return head + f": {kind} in its last printed digit, without consequence for its Table 1 category."


def published_findings(check: pd.DataFrame, block: str = "English") -> str:
    """The recomputation of the paper's printed ChatGPT numbers (:func:`biaslab.stats.hypothesis.
    check_published_preferences`) in words: how many SS and p-values follow from the counts, and each Bayes factor
    that does not — its category under the paper's one prior (the uniform Beta(1, 1) of eq. 9, as the paper
    reports) and, beside it, over the stated prior range."""
    bad = check[~check["bf10_ok"].astype(bool)]
    n = len(check)
    lines = [f"{int(check['ss_ok'].astype(bool).sum())} of {n} stereotype scores and "
             f"{int(check['binom_p_ok'].astype(bool).sum())} of {n} binomial p-values of the {block} block follow "
             f"from the counts; {len(bad)} of {n} Bayes factors do not"
             + (":" if len(bad) else ".")]
    lines += [_published_row(r) for r in bad.to_dict("records")]
    return bullets(lines)


def published_summary(check: pd.DataFrame) -> str:
    """The README's one sentence on the recomputed ChatGPT Bayes factors (English block), naming the paper's prior."""
    bad = check[~check["bf10_ok"].astype(bool)]
    wrong = bad[~bad["evidence_ok"].astype(bool)]
    trunc = bad[bad["evidence_ok"].astype(bool)]
    return (f"Recomputed from the authors' own counts under the paper's prior (uniform Beta(1, 1), eq. 9), {len(wrong)} "
            f"of the {len(check)} English Bayes factors of the paper's Table 3 (ChatGPT) change their conclusion: "
            + join(f"*{x['bias_type']}* printed {num(x['reported_bf10'])}, recomputed {num(x['bf10'])} "
                   f"({x['evidence']}, not {x['reported_evidence']}"
                   + (f"; over Beta(a, a) priors {x['evidence_over_prior_range']}"
                      if isinstance(x.get("evidence_over_prior_range"), str) else "") + ")"
                   for x in wrong.to_dict("records"))
            + (f"; {len(trunc)} more {'is' if len(trunc) == 1 else 'are'} truncated in the last digit" if len(trunc)
               else "")
            + f"; {int(check['ss_ok'].astype(bool).sum())} of {len(check)} stereotype scores and "
              f"{int(check['binom_p_ok'].astype(bool).sum())} of {len(check)} binomial p-values agree")
