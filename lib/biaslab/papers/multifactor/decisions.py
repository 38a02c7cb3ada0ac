"""Notebook 1's decisions: how its tables state their effects and which responder rule judges them (the verdict
layer, :mod:`biaslab.stats.verdict`). What is confirmatory is the analysis plan's (``analysis_plan.yaml``, notebook
``01_multifactor``); everything else is exploratory (the SSQA deviation-rate difference is notebook 5's claim).

**Budget.** The notebook runs once per benchmark with a ``factor_plan``. The plan's families are model pairs, each
spanning every benchmark run (``family_by: [model_a, model_b]``), decided together by :func:`decide_runs`; a plan
without listed families splits the share over every benchmark run x pair (:func:`n_families`).
**Responders.** Deviation rates and the deviation metric read the *answer*, so the answer check of ``responders.csv``
judges them (SSQA: the rows without chain of thought); a pair with a degenerate model keeps its rows, "not tested".
"""

from __future__ import annotations

import pandas as pd

from ...benchmarks import SPECS
from ...stats import responders
from ...stats import verdict as V


NOTEBOOK = "01_multifactor"
EFFECTS = {
    "paired_comparisons": V.Effects(estimate="difference", null=("null_value", 0.0), pair=("model_a", "model_b")),
    "paired_subgroup_tests": V.Effects(estimate="metric_difference", null=("null_value", 0.0),
                                       pair=("model_a", "model_b")),
    "ks_tests": V.Effects(estimate="ks_statistic", ci=(), null=None, pair=("model_a", "model_b")),
}


def responder_check(pool: pd.DataFrame, plan, judged: pd.DataFrame | None = None,
                    replaces: bool = False) -> pd.DataFrame:
    """``responders.csv``: the answer check of what the ``FactorPlan``'s metrics read (``plan.answer``, its
    ``invalid_answers`` counted as no answer; per model and chain-of-thought setting) and the instrument's status
    from the validity checks (``judged``: :func:`biaslab.stats.validity.responder_rows`), which replaces the answer
    check where the analysis plan's scoring rule chose the formulation read (``replaces``) and stands beside it where
    the one formulation asked was judged (notebooks 4 and 7 judge it so)."""
    if judged is not None and replaces:
        return judged
    if not len(pool):
        return pd.DataFrame(columns=["model", "degenerate", "reasons"])
    pool = pool.assign(answer_checked=pool[plan.answer].where(~pool[plan.answer].isin(plan.invalid_answers)))
    check = responders.responder_check(pool, answer="answer_checked", by=["model", "cot"] if plan.cot else "model",
                                       n_options=plan.n_options,
                                       label_mass="label_mass" if "label_mass" in pool else None)
    return check if judged is None else pd.concat([check, judged], ignore_index=True)


def answer_status(check: pd.DataFrame | None) -> pd.DataFrame | None:
    """responder_status per model from the answer check (SSQA: the rows without chain of thought)."""
    if check is None or check.empty or "model" not in check:
        return None
    if "cot" in check:
        check = check[check["cot"].astype(str) == "no"]
    return V.responder_status(check, ("model",))


def n_families(tables: dict[str, pd.DataFrame]) -> int | None:
    """The notebook's families across its benchmark runs: benchmarks x the model pairs of this run's claim table
    (None without one)."""
    t = tables.get("paired_subgroup_tests")
    if t is None or t.empty or not {"model_a", "model_b"} <= set(t.columns):
        return None
    runs = sum(s.factor_plan is not None for s in SPECS.values())
    return runs * len(t[["model_a", "model_b"]].drop_duplicates())


def decide(benchmark: str, tables: dict[str, pd.DataFrame], check: pd.DataFrame | None = None,
           *, plan) -> dict[str, pd.DataFrame]:
    """Verdict columns for the given tables among ``paired_comparisons``, ``paired_subgroup_tests`` and
    ``ks_tests`` (empty tables are returned as they are)."""
    status = answer_status(check)
    todo = {n: (df, EFFECTS[n], status) for n, df in tables.items() if df is not None and len(df) and n in EFFECTS}
    done = (V.decide_tables(todo, NOTEBOOK, {"benchmark": benchmark}, plan=plan, n_families=n_families(tables))
            if todo else {})
    return {n: done.get(n, df) for n, df in tables.items()}


def decide_runs(runs: dict[str, tuple[dict[str, pd.DataFrame], pd.DataFrame | None]], *,
                plan) -> dict[str, dict[str, pd.DataFrame]]:
    """Every benchmark run's tables, ``{benchmark: (tables, responder check)}``, decided together: under a plan
    whose families span the runs (family_by without ``benchmark``: one family per model pair, the benchmarks its
    instances) a family's graph needs every benchmark's instance at once. The tables of one name are stacked with a
    ``benchmark`` column (the claims' rows select on it), decided, and split back. A plan whose families are
    benchmark runs (family_by with ``benchmark``) decides each run alone (:func:`decide`)."""
    claims = plan.of(NOTEBOOK)
    if not claims or "benchmark" in claims[0].family_by:
        return {b: decide(b, tables, check, plan=plan) for b, (tables, check) in runs.items()}
    names = [n for n in EFFECTS if any(t.get(n) is not None and len(t.get(n)) for t, _ in runs.values())]
    status = [s.assign(benchmark=b) for b, (_, check) in runs.items()
              if (s := answer_status(check)) is not None and len(s)]
    status = pd.concat(status, ignore_index=True) if status else None
    todo, parts = {}, {}
    for n in names:
        parts[n] = [(b, t[n]) for b, (t, _) in runs.items() if t.get(n) is not None and len(t[n])]
        todo[n] = (pd.concat([df.assign(benchmark=b) for b, df in parts[n]], ignore_index=True), EFFECTS[n], status)
    done = V.decide_tables(todo, NOTEBOOK, plan=plan) if todo else {}
    out = {b: dict(tables) for b, (tables, _) in runs.items()}
    for n, got in parts.items():
        for b, df in got:           # each run's own columns (the stack's union), then the verdict's
            piece = done[n][done[n]["benchmark"] == b].set_axis(df.index)
            out[b][n] = piece[[c for c in piece.columns if c in df or c in V.VERDICT_COLUMNS]]
    return out


def decide_importance(benchmark: str, importance: pd.DataFrame, check: pd.DataFrame | None = None,
                      *, plan) -> pd.DataFrame:
    """Verdict columns for ``factor_importance``: each term's odds ratio against 1 on its template-clustered Wald
    test (``p_cluster``; ``ci_low_cluster``/``ci_high_cluster`` are on the odds-ratio scale); exploratory, one
    Benjamini–Hochberg screen per model. Intercepts and separated terms (no finite estimate) are not tested."""
    if importance is None or importance.empty:
        return importance

    def undefined(df):
        sep = df["separated"].fillna(False).astype(bool) if "separated" in df else pd.Series(False, df.index)
        why = pd.Series("", index=df.index)
        why[sep] = "separation: a level with a deviation rate of 0 or 1 has no finite estimate"
        why[df["factor"].astype(str).isin(["Intercept", ""])] = "an intercept or a model not fitted is no effect"
        return why

    spec = V.Effects(estimate="odds_ratio", p=("p_cluster",), ci=(("ci_low_cluster", "ci_high_cluster"),),
                     null=1.0, undefined=undefined, screen_by=("model",))
    return V.decide(importance, spec, "factor_importance", answer_status(check), plan=plan, notebook=NOTEBOOK,
                    context={"benchmark": benchmark})


def decide_bayes(summary: pd.DataFrame, *, plan) -> pd.DataFrame:
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

    spec = V.Effects(estimate=("mean", lo), p=None, ci=((lo, hi),), null=0.0, undefined=undefined)
    return V.decide(summary, spec, "bayes_summary", "not judged: a fitted model's terms, not answers",
                    plan=plan, notebook=NOTEBOOK)
