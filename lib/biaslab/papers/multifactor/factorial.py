"""Notebook 1 on every benchmark: the prompt table, the scored subset and the response table of a plan.

The multi-factor analysis (coverage, subgroups, factor importance, the Bayesian model) takes (prompts ⨝ responses,
factor spec, a 0/1 outcome) and nothing else (DESIGN.md). This module supplies, for the benchmarks added after SSQA
and BBQ, the three benchmark-specific pieces notebook 1 needs; the plan (``multifactor.PLANS``) names the factors
and the outcome.

* ``prepare(name)``: the benchmark as one prompt table with the plan's extra factors. CrowS-Pairs is the union of the
  original English, revised English and French sets with a ``dataset`` factor (ids prefixed by the dataset).
* ``sample(name, prompts, n, strata, seed)``: the scored subset, drawn as the benchmark's own notebook draws it where
  that notebook has a design-preserving sampler (agentic: ``balanced_subset``; CrowS: ``subsample`` per dataset), so
  that a run after notebooks 3 and 4 finds its scores in the score cache.
* ``score(name, scorer, prompts, ...)``: one response row per prompt with the plan's outcome, from the benchmark's
  own ``respond`` at its paper protocol: SSQA ``deviated`` (the label distribution); CALM ``correct`` (CALM's
  corrected answer rules); BBQ ``deviated``; CrowS-Pairs ``stereotype_preferred`` (the likelihood comparison of
  notebook 3; ties excluded); agentic ``low_entropy`` (normalized entropy below ``LOW_ENTROPY``) with ``entropy``
  kept and the position of the most probable choice as the response factor ``answer_position``.

It imports no torch: it calls the scorer it is given.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...benchmarks import Benchmark, Factor, FactorSpec, load as load_benchmark
from ...stats.sampling import stratified_sample

CROWS_DATASETS = ("crows_pairs_en", "crows_pairs_en_revised", "crows_pairs_fr")
#: a prompt's answer distribution counts as concentrated (departing from uniform) below this normalized entropy;
#: 0.95 is e.g. (0.5, 0.3, 0.2) over three choices (H/log 3 = 0.94). Stated once; notebook 4 reports the mean.
LOW_ENTROPY = 0.95

#: response-level factors (values come from the model's answer, not from the prompt): kind "model"
ANSWER_POSITION = Factor("answer_position", "model", (1, 2, 3, 4, 5), 1,
                         "position (1-5) of the choice the model gave the most probability")


def prepare(name: str) -> Benchmark:
    """The benchmark notebook 1 analyses under ``name`` (a ``multifactor.PLANS`` key)."""
    if name == "crows_pairs":
        return crows_combined()
    return load_benchmark(name)


def crows_combined(datasets=CROWS_DATASETS) -> Benchmark:
    """The CrowS-Pairs sets as one prompt table with a ``dataset`` factor (prompt and pair ids prefixed)."""
    parts, factors, sources, notes = [], {}, {}, []
    for d in datasets:
        b = load_benchmark(d)
        p = b.prompts.copy()
        p["source_prompt_id"] = p["prompt_id"]
        p["prompt_id"] = d + ":" + p["prompt_id"].astype(str)
        p["pair_id"] = d + ":" + p["pair_id"].astype(str)
        p["dataset"] = d
        parts.append(p)
        for f in b.factors.factors:
            old = factors.get(f.name)
            levels = tuple(dict.fromkeys((old.levels if old else ()) + tuple(f.levels)))
            factors[f.name] = Factor(f.name, f.kind, levels, (old or f).reference, f.description)
        sources.update(b.sources)
        notes += [f"{d}: {n}" for n in b.notes[:2]]
    prompts = pd.concat(parts, ignore_index=True)
    spec = FactorSpec(list(factors.values()) + [
        Factor("dataset", "prompt", tuple(datasets), datasets[0],
               "CrowS-Pairs version: original English, revised English (Névéol et al. 2022), French")])
    return Benchmark("crows_pairs", prompts, spec, sources=sources,
                     notes=notes + ["prompt_id and pair_id prefixed with the dataset name"], cluster="pair_id")


def sample(name: str, prompts: pd.DataFrame, n: int | None, strata, seed: int = 0) -> pd.DataFrame:
    """The scored subset of about ``n`` prompts (all when ``n`` is None)."""
    if name == "agentic":
        from ...benchmarks import agentic
        return agentic.balanced_subset(prompts, n, seed=seed)
    if name == "crows_pairs" and n is not None:
        # the same pairs notebook 3 scores with max_pairs = n // 3 per dataset (balanced by bias type)
        from ...benchmarks import crows_pairs as cp
        per = max(1, int(n) // prompts["dataset"].nunique())
        parts = []
        for d, p in prompts.groupby("dataset", sort=False):
            b = Benchmark(d, p.reset_index(drop=True), FactorSpec([]), cluster="pair_id")
            parts.append(cp.subsample(b, per, seed=seed).prompts)
        return pd.concat(parts, ignore_index=True)
    return stratified_sample(prompts, strata, n, seed=seed)


def score(name: str, scorer, prompts: pd.DataFrame, *, k_shot: int = 1) -> pd.DataFrame:
    """Response table (prompt_id, model, seed, answer, outcome columns) of ``prompts`` for one model (module
    docstring); CALM with ``k_shot`` examples (notebook 2's)."""
    import importlib
    from ...benchmarks import calm, ssqa
    if name == "ssqa":
        return ssqa.SPEC.responses(scorer, prompts)
    if name == "calm":
        r = calm.SPEC.responses(scorer, prompts, calm.PROTOCOL.replace(examples=k_shot))
        return pd.DataFrame({"prompt_id": prompts["prompt_id"].to_numpy(), "model": scorer.lm.name, "seed": "none",
                             "answer": r["output"].to_numpy(), "label_mass": r["label_mass"].to_numpy(),
                             "correct": r["correct"].to_numpy().astype(int)})
    module = importlib.import_module(f"biaslab.benchmarks.{name}")      # any benchmark module with a respond
    if not hasattr(module, "respond"):
        raise KeyError(f"biaslab.benchmarks.{name} has no respond(scorer, items, protocol)")
    out = module.respond(scorer, prompts).drop(columns=["choices", "answer_kind"], errors="ignore")
    out.insert(2, "seed", "none")
    if name == "bbq":
        out = out.drop(columns="answer")          # option_ll: the choice is the answer
    if name == "crows_pairs":
        x = out["stereotype_preferred"]
        out["answer"] = np.where(np.isnan(x), None, np.where(x == 1, "more", "less"))
    if name == "agentic":
        out["answer_position"] = out["top_position"].astype(int)
        out["low_entropy"] = (out["entropy"] < LOW_ENTROPY).astype(int)
    return out
