"""Notebook 3's findings: the run's likelihood and preference tables turned into Markdown sentences.

Likelihood scheme: LPBS (eq. 3, mean normalized log-probability difference) with the paired t test and the JZS
Bayes factor (eq. 8). Preference scheme: π̂ = k/n with the exact binomial test and the uniform-prior BF10 (eq. 9);
position bias and order consistency of the two-order preference prompt (beyond the paper).
"""

from __future__ import annotations

import pandas as pd

from ...findings import bullets, chance_verdict, num, pct
from ...stats import hypothesis as hyp


def likelihood_findings(lik: pd.DataFrame, score: str = "norm_logprob") -> str:
    """Per model and dataset, the pooled (overall) LPBS with its direction, t test and Bayes factor."""
    lines = []
    rows = lik[(lik["bias_type"] == hyp.OVERALL) & (lik["score"] == score)]
    for r in rows.to_dict("records"):
        side = ("more stereotypical sentences more likely" if r["mean_d"] > 0 else
                "less stereotypical sentences more likely")
        lines.append(f"**{r['model']} · {r['dataset']}**: LPBS = {num(r['lpbs'])} over {int(r['n'])} pairs "
                     f"({side}), {chance_verdict(r['t_p'], int(r['n']), mde=r.get('mde'))} by the paired t test; "
                     f"BF10 = {hyp.sci(r['bf10'])}, {r['evidence']}.")
    return bullets(lines)


def preference_findings(pref: pd.DataFrame, answers: pd.DataFrame, pos: pd.DataFrame | None,
                        cons: pd.DataFrame | None) -> str:
    """Pooled preference results per model, dataset and source; then, for prompted models, how much they answer by
    position (share naming the first sentence per order; same sentence / same position across the two orders)."""
    lines = []
    for (m, name), g in pref[pref.bias_type == hyp.OVERALL].groupby(["model", "dataset"], sort=False):
        row = g.set_index("source")
        parts = [f"{src}: π̂ = {r.pi_hat:.2f} (n = {r.n}, BF10 = {hyp.sci(r.bf10)}, {r.evidence})"
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
