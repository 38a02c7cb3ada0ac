"""Benchmark loaders: one module per benchmark, each returning a :class:`~biaslab.benchmarks.base.Benchmark`.

``load(name)`` dispatches by name; see ``LOADERS`` for what exists. A benchmark whose loader belongs to a paper's
package (CALM) is named by its absolute module path; the registry imports it only when asked for it.
"""

from __future__ import annotations

import importlib

from .base import Benchmark, Factor, FactorSpec

# name -> "module:function"
LOADERS = {
    "ssqa": "ssqa:load",
    "bbq": "bbq:load",
    "calm": "calm:load",
    "crows_pairs_en": "crows_pairs:load_original",
    "crows_pairs_en_revised": "crows_pairs:load_revised",
    "crows_pairs_fr": "crows_pairs:load_french",
    "agentic": "agentic:load",
}

#: the benchmarks whose module has a ``PROTOCOL``, ``FORMATS``, ``paper_chat``, ``respond`` and ``sample``
#: (notebooks 1, 3, 4 and 6 ask them only through these; ``docs/adding_a_benchmark.md``)
RESPONDING = ("bbq", "crows_pairs", "agentic")


def load(name: str, **kwargs) -> Benchmark:
    if name not in LOADERS:
        raise KeyError(f"unknown benchmark {name!r}; choose one of {sorted(LOADERS)}")
    module, func = LOADERS[name].split(":")
    module = module if "." in module else f"{__name__}.{module}"
    return getattr(importlib.import_module(module), func)(**kwargs)


__all__ = ["Benchmark", "Factor", "FactorSpec", "LOADERS", "RESPONDING", "load"]


# --------------------------------------------------------------------------- the registry: one line per benchmark
from . import agentic, bbq, calm, crows_pairs, ssqa  # noqa: E402
from .spec import Spec  # noqa: E402

SPECS: dict[str, Spec] = {s.name: s for s in (
    ssqa.SPEC,
    bbq.SPEC,
    calm.SPEC,
    crows_pairs.SPEC,
    agentic.SPEC,
)}
