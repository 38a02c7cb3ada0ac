"""Notebook 1's decisions: its headline tests, how its tables state their effects, and which responder rule judges
them (the verdict layer, :mod:`biaslab.stats.verdict`).

**Confirmatory family** (Holm, per benchmark run): the paired comparisons of two models scored on the same prompts —
the difference of their deviation metrics (eq. 4, template-paired) and of their overall deviation rates. They are
the clustered, paired versions of the paper's headline comparison (§3.3). The paper's own two-sample KS test, which
treats the subgroups of two models as independent samples, is kept as an exploratory row (Benjamini–Hochberg).

**Responders.** Deviation rates and the deviation metric read the model's *answer* (does it equal the biased
answer?), so the answer check of ``responders.csv`` judges them (SSQA: the rows without chain of thought). A pair
with a degenerate model keeps its rows; its verdict is "not tested".
"""

from __future__ import annotations

import pandas as pd

from ...stats import verdict as V


def confirmatory(benchmark: str) -> V.Family:
    return V.Family(f"01/{benchmark} · paired model comparisons (deviation metric and deviation rate)",
                    V.CONFIRMATORY)


def effects(benchmark: str) -> dict[str, V.Effects]:
    conf = (confirmatory(benchmark),)
    return {
        "paired_comparisons": V.Effects(estimate="difference", null=("null_value", 0.0), pair=("model_a", "model_b"),
                                        families=conf),
        "paired_subgroup_tests": V.Effects(estimate="metric_difference", null=("null_value", 0.0),
                                           pair=("model_a", "model_b"), families=conf),
        "ks_tests": V.Effects(estimate="ks_statistic", ci=(), null=None, pair=("model_a", "model_b"),
                              default=V.Family(f"01/{benchmark} · two-sample KS of subgroup rates (the paper's "
                                               "variant: subgroups treated as independent)", V.EXPLORATORY)),
    }


def answer_status(check: pd.DataFrame | None) -> pd.DataFrame | None:
    """responder_status per model from the answer check (SSQA: the rows without chain of thought)."""
    if check is None or check.empty or "model" not in check:
        return None
    if "cot" in check:
        check = check[check["cot"].astype(str) == "no"]
    return V.responder_status(check, ("model",))


def decide(benchmark: str, tables: dict[str, pd.DataFrame], check: pd.DataFrame | None = None,
           alpha: float = V.ALPHA) -> dict[str, pd.DataFrame]:
    """Verdict columns for the given tables among ``paired_comparisons``, ``paired_subgroup_tests`` and
    ``ks_tests`` (empty tables are returned as they are)."""
    status = answer_status(check)
    spec = effects(benchmark)
    todo = {n: (df, spec[n], status) for n, df in tables.items() if df is not None and len(df) and n in spec}
    done = V.decide_tables(todo, alpha) if todo else {}
    return {n: done.get(n, df) for n, df in tables.items()}


def decide_importance(benchmark: str, importance: pd.DataFrame, check: pd.DataFrame | None = None,
                      alpha: float = V.ALPHA) -> pd.DataFrame:
    """Verdict columns for ``factor_importance``: each term's odds ratio against 1 on its template-clustered Wald
    test (``p_cluster``; ``ci_low_cluster``/``ci_high_cluster`` are on the odds-ratio scale); exploratory, one
    Benjamini–Hochberg family per
    model (screening many coefficients). Intercepts and separated terms (no finite estimate) are not tested."""
    if importance is None or importance.empty:
        return importance

    def undefined(df):
        sep = df["separated"].fillna(False).astype(bool) if "separated" in df else pd.Series(False, df.index)
        why = pd.Series("", index=df.index)
        why[sep] = "separation: a level with a deviation rate of 0 or 1 has no finite estimate"
        why[df["factor"].astype(str).isin(["Intercept", ""])] = "an intercept or a model not fitted is no effect"
        return why

    fams = tuple(V.Family(f"01/{benchmark} · factor importance of {m} (clustered Wald, all terms)", V.EXPLORATORY,
                          {"model": m}) for m in pd.unique(importance["model"]))
    spec = V.Effects(estimate="odds_ratio", p=("p_cluster",), ci=(("ci_low_cluster", "ci_high_cluster"),),
                     null=1.0, families=fams, undefined=undefined)
    return V.decide(importance, spec, "factor_importance", answer_status(check), alpha=alpha)


def decide_bayes(summary: pd.DataFrame, alpha: float = V.ALPHA) -> pd.DataFrame:
    """Verdict columns for the Bayesian factor-importance summary (bambi): each term's posterior against 0 by its
    highest-density interval (the two ``hdi_*`` columns; interval only, no p, so not adjusted). The intercept and
    variance terms are no effects."""
    if summary is None or summary.empty:
        return summary
    lo, hi = [c for c in summary.columns if c.startswith("hdi_")][:2]

    def undefined(df):
        t = df["term"].astype(str)
        return pd.Series(["an intercept or a variance is no effect" if x == "Intercept" or "sigma" in x else ""
                          for x in t], index=df.index)

    spec = V.Effects(estimate=("mean", lo), p=None, ci=((lo, hi),), null=0.0, undefined=undefined,
                     default=V.Family("01 · Bayesian factor importance (HDI against 0)", V.EXPLORATORY))
    return V.decide(summary, spec, "bayes_summary", "not judged: a fitted model's terms, not answers",
                    alpha=alpha)
