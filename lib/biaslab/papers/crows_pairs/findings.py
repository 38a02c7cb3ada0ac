"""Notebook 3's findings: one sentence per instance of the analysis plan's claims (the pooled mean of d, eq. 3, by the
t test with its Bayes factor on the same mean; the share of pairs preferring the more stereotyped sentence), and
descriptive lines: the run's sample sizes, how prompted models answer by position, the published tables' check.
Bias types, the other scores and the prompted preference are exploratory tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ...benchmarks.crows_pairs import DATASET_NAMES
from ...report.wording import bullets, claim_findings, num, pct, present, stated_power
from ...stats import hypothesis as hyp
from .decisions import NOTEBOOK


def dataset_title(name: str, rows: pd.DataFrame | None = None) -> str:
    """'French CrowS-Pairs (1,676 pairs)': the dataset's name and the pairs of the table ``rows`` it heads (the
    pooled row's ``n``; a run drops empty pairs and ties, so the release's 1,677 is not what a table holds). Without
    a pooled row with an ``n``, the name alone."""
    title = DATASET_NAMES.get(name, name)
    if rows is None or rows.empty or "n" not in rows:
        return title
    pooled = rows[rows["bias_type"] == hyp.OVERALL] if "bias_type" in rows else rows
    n = pooled["n"].dropna()
    return f"{title} ({int(n.iloc[0]):,} pairs)" if len(n) and n.nunique() == 1 else title


def power_findings(power_table: pd.DataFrame, name: str) -> str:
    """The preference tests' power for one dataset (``power.csv``'s "SS vs 0.5" rows, pooled and a typical bias
    type), worded as power; an undefined MDE (too few pairs) says so, never prints NaN."""
    r = power_table[(power_table["benchmark"] == name)
                    & power_table["quantity"].str.startswith("SS vs 0.5")].to_dict("records")
    if not r:
        return ""

    power, alpha = stated_power(r)

    def one(row, what):
        n = (f"{int(row['n']):,} pair{'s' if int(row['n']) != 1 else ''}" if present(row.get("n")) else "its pairs")
        if present(row.get("mde")):
            return f"{what} ({n}) had {power} power for |π − 0.5| ≥ {num(row['mde'])}"
        why = str(row.get("mde_note") or "").removeprefix("undefined").strip(" :") or "too few pairs"
        return f"{what} ({n}) has no minimum detectable effect ({why})"

    parts = [one(r[0], "the pooled test")] + ([one(r[1], "a typical bias type")] if len(r) > 1 else [])
    return f"**{name}:** " + "; ".join(parts) + f" (α = {alpha})."


def design_findings(design: pd.DataFrame) -> str:
    """What each claim's pooled row estimates, from the run's design table (``datasets.csv``: N_h, n_h, W_h and
    the weight N_h/n_h per dataset x bias type): every pair of the file, weighted back from the scored sample; one
    line per file, with its most and least weighted bias types and the largest type's share of file and sample."""
    lines = []
    for name, g in design.groupby("dataset", sort=False):
        g = g[g["N_h"] > 0]
        N, n = int(g["N_h"].sum()), int(g["n_h"].sum())
        title = DATASET_NAMES.get(name, name)
        if n == N:
            lines.append(f"**{title}**: all {N:,} pairs scored (a census; every weight is 1).")
            continue
        w = g.dropna(subset=["weight"]).sort_values("weight")
        big = g.loc[g["N_h"].idxmax()]
        gone = g[g["n_h"] == 0]
        if len(gone):       # a type with no scored pair: the weighted estimate cannot cover it
            lines.append(f"**{title}**: no pair of {', '.join(gone['bias_type'])} ({int(gone['N_h'].sum()):,} of "
                         f"{N:,} pairs) was scored, so its estimates cover the other {len(g) - len(gone)} bias "
                         "types only.")
        lines.append(f"**{title}**: {n:,} of {N:,} pairs scored; weights N_h/n_h from {num(w['weight'].iloc[0])} "
                     f"({w['bias_type'].iloc[0]}) to {num(w['weight'].iloc[-1])} ({w['bias_type'].iloc[-1]}); "
                     f"{big['bias_type']} is {pct(big['N_h'] / N)} of the file and {pct(big['n_h'] / n)} of the "
                     "sample.")
    head = ("Each claim below estimates the mean (or share) over every pair of its file, weighted back from this "
            "run's bias-type-stratified sample by the design weights N_h/n_h (`datasets.csv`; `pair_scores.csv`: "
            "`stratum`, `weight`):")
    return head + "\n\n" + bullets(lines)


def likelihood_findings(*decided: pd.DataFrame | None, plan) -> str:
    """One sentence per instance of ``plan``'s claims among the decided ``likelihood_tests`` /
    ``preference_tests``."""
    return claim_findings(decided, plan.of(NOTEBOOK))


def position_findings(pos: pd.DataFrame, cons: pd.DataFrame) -> str:
    """For prompted models, how much they answer by position (share naming the first sentence per order; same
    sentence / same position across the two orders): descriptive, no test."""
    lines = []
    for r in cons.itertuples():
        pf = pos[(pos.model == r.model) & (pos.dataset == r.dataset)].set_index("order").p_first
        how = ("answers by **position**, not by content" if r.same_position > 0.9 else
               "answers mostly by content" if r.same_sentence > 0.8 else "answers partly by position")
        lines.append(f"**{r.model} · {r.dataset}** names the first sentence in "
                     + ", ".join(f"{o}: {pct(v)}" for o, v in pf.items())
                     + f" of answers; across the two orders it keeps the same sentence for {pct(r.same_sentence)} "
                     f"and the same position for {pct(r.same_position)} of {r.n_pairs} pairs: it {how}.")
    return bullets(lines)


def sample_findings(lik: pd.DataFrame, score: str = "norm_logprob") -> str:
    """How many pairs each bias type of this run holds (the run-dependent part of the reading of Table 2)."""
    t = lik[(lik["bias_type"] != hyp.OVERALL) & (lik["score"] == score)]
    if t.empty:
        return "This run has no bias-type rows."
    n = t["n"].astype(int)
    pooled = lik[(lik["bias_type"] == hyp.OVERALL) & (lik["score"] == score)]["n"].astype(int)
    return bullets([f"Per bias type and dataset this run scores {num(n.min())} to {num(n.max())} pairs (median "
                    f"{num(float(n.median()))}); the pooled rows hold {num(pooled.min())} to {num(pooled.max())}."])


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

