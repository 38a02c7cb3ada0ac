"""Notebook 1 on any benchmark, from its :class:`~biaslab.benchmarks.spec.Spec` and ``FactorPlan`` alone: the items
(:func:`prepare`, the plan checked against them), the scored subset (:func:`sample`: the benchmark's own sampler where
its notebook has one, so that their scores share the cache) and the response table (:func:`score`: its ``respond`` at
the paper protocol, the plan's outcome derived). It imports no torch: it calls the scorer it is given."""

from __future__ import annotations

import pandas as pd

from ...benchmarks import Benchmark
from ...benchmarks.spec import FactorPlan, Spec
from ...stats.sampling import stratified_sample


def plan_of(spec: Spec) -> FactorPlan:
    return spec.need("factor_plan", "notebook 1 (01_multifactor)")


def prepare(spec: Spec) -> Benchmark:
    """The benchmark notebook 1 analyses, its plan checked against its factors (``FactorPlan.check``)."""
    plan = plan_of(spec)
    bench = (plan.prepare or spec.load)()
    plan.check(bench)
    return bench


def sample(plan: FactorPlan, prompts: pd.DataFrame, n: int | None, seed: int = 0) -> pd.DataFrame:
    """The scored subset of about ``n`` prompts (all when ``n`` is None)."""
    if plan.sample is not None:
        return plan.sample(prompts, n, plan.strata, seed=seed)
    return stratified_sample(prompts, plan.strata, n, seed=seed)


def uses_chat(spec: Spec, scorer) -> bool:
    """Whether the paper protocol asks this model in its chat template (the chat choice enters its format)."""
    p = spec.protocol
    return p.format in spec.applies.get("chat", spec.formats) and p.use_chat(spec.paper_chat(scorer))


def score(spec: Spec, scorer, prompts: pd.DataFrame, protocol=None) -> pd.DataFrame:
    """Response table (prompt_id, model, seed, answer, the plan's outcome, ...) of ``prompts`` for one model, asked
    at ``protocol`` (default: the paper's)."""
    out = spec.responses(scorer, prompts, protocol).drop(columns=["choices", "answer_kind"], errors="ignore")
    if "model" not in out:
        out.insert(1, "model", scorer.lm.name)
    if "seed" not in out:
        out.insert(2, "seed", "none")
    plan = plan_of(spec)
    out = plan.responses(out) if plan.responses else out
    if plan.outcome not in out:
        raise ValueError(f"benchmark {spec.name!r}: its responses have no column {plan.outcome!r} "
                         "(FactorPlan.outcome); derive it in FactorPlan.responses or return it from respond")
    return out


def response_table(scored: pd.DataFrame, bench: Benchmark, plan: FactorPlan) -> pd.DataFrame:
    """Notebook 1's ``responses.csv``: the scored responses (:func:`score`, every model) with the generating unit(s)
    and the plan's coverage factors from the prompt table; what notebook 5's ``Metric.derive`` gets, per model."""
    keep = [c for c in dict.fromkeys(bench.cluster_columns + plan.coverage_factors)
            if c and c in bench.prompts and c not in scored]
    return scored.merge(bench.prompts[["prompt_id"] + keep], on="prompt_id", how="left")
