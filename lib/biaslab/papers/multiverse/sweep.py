"""Notebook 6's loop: the items of each benchmark, and every universe of every model scored once.

* :func:`items` the design-preserving subsets, each benchmark spec's ``sample`` (BBQ: of notebook 1's own sample;
  CrowS-Pairs: notebook 3's sampler; agentic: notebook 4's), so that the paper's universe is read from the score
  cache after notebooks 1, 3 and 4.
* :func:`run_model` every universe of one model (float32, bf16_weights and, when available, the q4 GGUF behind a
  local llama.cpp server loaded only when a universe needs them), returning the per-item responses with the
  universe's factor levels, the per-universe estimates, the status of every universe (``run``, ``not available:
  ...``), its cost (seconds; token positions the scoring passes computed; ``cache_misses``, the items the model
  computed, scored or generated: 0 means the universe came entirely from the cache) and, per in-process precision,
  how far its scores move with the run's schedule (:mod:`biaslab.scoring.tolerance`, on :func:`tolerance_texts`).
"""

from __future__ import annotations

import gc
import inspect
import time

import pandas as pd

from ... import benchmarks as registry
from ...benchmarks.spec import universe_estimate
from ...scoring import tolerance
from . import analysis, design, gguf, matcher


def _takes(f, name: str) -> bool:
    return name in inspect.signature(f).parameters


def items(benchmark: str, n: int | None, seed: int = 0, pool: int | None = 150) -> tuple[pd.DataFrame, object]:
    """(items, Benchmark): the benchmark's own design-preserving subset (its spec's ``sample``; ``n=None``: all; a
    sampler that takes a ``pool`` — BBQ's — draws from notebook 1's ``pool``-prompt sample)."""
    s = design.check(benchmark)
    return s.sample(n, seed=seed, **({"pool": pool} if _takes(s.sample, "pool") else {}))


def tolerance_texts(items: dict, n: int = 8) -> list[str]:
    """The texts a precision's schedule tolerance is measured on: both sentences of the first ``n`` items of the
    first benchmark of sentence pairs (CrowS-Pairs), or the first 2n prompts of the first benchmark when none is run."""
    pairs = [its for its in items.values() if {"sent_more", "sent_less"} <= set(its.columns)]
    if pairs:
        its = pairs[0].head(n)
        return list(its["sent_more"]) + list(its["sent_less"])
    return list(next(iter(items.values()))["text"].head(2 * n))


def estimate_row(m, r: pd.DataFrame, its: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """One universe's row of metric ``m`` (its ``estimate``), with the metric's null."""
    e = m.estimate(r, its, n_boot, seed)
    head = ("estimate", "ci_low", "ci_high", "ci_method")
    missing = [k for k in universe_estimate() if k not in e]
    if missing:
        raise KeyError(f"metric {m.id!r}: its estimate returned no {', '.join(missing)} (Metric.estimate: return "
                       "biaslab.benchmarks.spec.universe_estimate(...))")
    return {"metric": m.id, **{k: e[k] for k in head}, "null_value": m.null,
            **{k: v for k, v in e.items() if k not in head}}


class RenderedChat:
    """A served scorer asked in the chat template as text rendered in-process (``render``: the reference precision's
    Scorer): the llama.cpp server's prompt log-probs come from its completions endpoint, which takes text."""
    chat_available = chat_logprobs = staticmethod(lambda: True)

    def __init__(self, scorer, render):
        self._scorer, self._render = scorer, render

    def __getattr__(self, name):
        f = getattr(self._scorer, name)
        if name not in ("option_logprob", "label_distribution", "generate"):
            return f
        return lambda prompts, *a, chat=False, **kw: f(self._render(list(prompts), chat=True) if chat
                                                       else list(prompts), *a, chat=False, **kw)


class Precisions:
    """The scorers of one model, one per precision, loaded on first use and released by :meth:`close`."""

    def __init__(self, model_spec, device: str, reference_dtype: str, log=print):
        self.spec, self.device, self.ref, self.log = model_spec, device, reference_dtype, log
        self.loaded: dict[str, object] = {}
        self.server = None
        self.fingerprints: list[dict] = []

    def get(self, precision: str):
        from ... import models, scoring
        if precision in self.loaded:
            return self.loaded[precision]
        if precision == "q4_gguf":
            base = self.get(self.ref)
            self.server = gguf.Server(base.lm.name, base.tokenizer)
            lm = models.load(self.server.__enter__())
            sc = scoring.Scorer(lm, progress=False)
            sc = RenderedChat(sc, base.render) if base.chat_available() else sc
        else:
            lm = models.load(self.spec, device=self.device, **design.LOAD.get(precision, {"dtype": precision}))
            sc = scoring.Scorer(lm, progress=False)
        self.fingerprints.append(lm.fingerprint)
        self.loaded[precision] = sc
        return sc

    def close(self) -> None:
        self.loaded.clear()
        if self.server is not None:
            self.server.__exit__()
            self.server = None
        gc.collect()


def unavailable(u: design.Universe, scorer, model: str) -> str | None:
    """Why a universe cannot run for this model here (None: it can)."""
    if u.as_dict.get("chat_template") == "on" and not scorer.chat_available():
        if u["answer_format"] in design.applies(u.benchmark, "chat_template"):   # the template enters the format
            return f"not available: {model} has no chat template"
    if u["precision"] == "q4_gguf":
        return gguf.unavailable(model)
    return None


def run_model(model_spec, benchmarks: dict, *, device: str = "auto", dtype: str = "float32",
              design_name: str = "ofat", formats=None, factors=None, precisions=design.PRECISIONS,
              n_boot: int = 2000, seed: int = 0, tolerance_texts: list[str] | None = None, log=print) -> dict:
    """Every universe of one model. ``benchmarks``: name -> items. ``tolerance_texts``: texts on which each
    in-process precision's schedule tolerance is measured (None: not measured). Returns dict(responses={benchmark:
    DataFrame}, estimates, universes, costs, fingerprints, tolerance)."""
    unknown = [p for p in precisions if p not in design.PRECISIONS and p != dtype]
    if unknown:
        raise ValueError(f"precisions: {', '.join(map(repr, unknown))} not a precision level of this run; choose "
                         f"from {', '.join(dict.fromkeys((dtype,) + design.PRECISIONS))} (bf16_weights: the weights "
                         "rounded to bfloat16, computed in float32)")
    prec = Precisions(model_spec, device, dtype, log)
    ref = prec.get(dtype)
    name = ref.lm.name
    reference = design.ModelReference.of(ref, dtype)
    out = {"responses": {}, "estimates": [], "universes": [], "costs": [], "specs": {},
           "tolerance": []}
    try:
        for bench, its in benchmarks.items():
            spec, bspec = design.factor_spec(bench, reference), registry.spec(bench)
            out["specs"][bench] = spec
            us = design.universes(bench, reference, design_name, formats=(formats or {}).get(bench), factors=factors)
            status, frames = {}, []
            for u in us:
                why = unavailable(u, ref, name)
                if why is None and u["precision"] not in precisions and u.id != "paper":
                    why = (f"not run: precision {u['precision']} is not in this run's `precisions` parameter "
                           f"({', '.join(precisions)})")
                if why is None:
                    try:
                        sc = prec.get(u["precision"])
                    except Exception as exc:    # e.g. the llama.cpp server does not start: recorded, not hidden
                        why = f"not available: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                if why:
                    status[u.id] = why
                    log(f"{name} {bench} {u.id}: {why}")
                    continue
                pos0, miss0 = sc.stats.get("positions", 0), sc.stats.get("computed", 0)
                t0, c0 = time.perf_counter(), time.process_time()
                prot = design.protocol(u)
                r = bspec.responses(sc, its, prot, **({"match": matcher.match} if _takes(bspec.respond, "match")
                                                      else {})).assign(model=name)
                secs, cpu = time.perf_counter() - t0, time.process_time() - c0
                status[u.id] = "run"
                out["costs"].append({"model": name, "benchmark": bench, "universe": u.id, "precision": u["precision"],
                                     "answer_format": u["answer_format"], "items": len(its), "seconds": secs,
                                     "cpu_seconds": cpu,          # this process's CPU time, all its threads
                                     # token positions the scoring passes computed (generation not counted)
                                     "positions_computed": sc.stats.get("positions", 0) - pos0,
                                     # items the model computed, scored or generated (Scorer cache misses):
                                     # 0 = the universe came entirely from the score cache
                                     "cache_misses": sc.stats.get("computed", 0) - miss0})
                frames.append(r.assign(universe=u.id, benchmark=bench, **{"choice_order": prot.order, **u.as_dict}))
                for m in bspec.metrics:
                    if m.item_values and m.estimate:
                        out["estimates"].append({"model": name, "benchmark": bench, "universe": u.id,
                                                 **estimate_row(m, r, its, n_boot, seed), **u.as_dict})
                    elif m.item_values and len(frames) == 1:    # a family: its ids checked on the first universe
                        analysis.family_values(m, frames[0], its)
            out["universes"].append(design.universe_table(us, spec, status).assign(model=name))
            out["responses"][bench] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        for p, sc in prec.loaded.items() if tolerance_texts else ():
            if p != "q4_gguf":          # llama.cpp's kernels: not measured here
                out["tolerance"].append({"model": name, "precision": p,
                                         **tolerance.schedule_tolerance(sc.lm, tolerance_texts)})
    finally:
        out["fingerprints"] = list(prec.fingerprints)
        prec.close()
    return out
