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
from . import agentic, bbq, calm, crows_pairs, ssqa, winogender  # noqa: E402
from .spec import Spec  # noqa: E402

SPECS: dict[str, Spec] = {s.name: s for s in (
    ssqa.SPEC,
    bbq.SPEC,
    calm.SPEC,
    crows_pairs.SPEC,
    agentic.SPEC,
    winogender.SPEC,
)}


def register(spec: Spec) -> Spec:
    """Add a benchmark defined outside this package (a plugin module calls it with its ``SPEC``)."""
    if not isinstance(spec, Spec):
        raise TypeError(f"register() takes a biaslab.benchmarks.spec.Spec, not {type(spec).__name__}")
    SPECS[spec.name] = spec
    return spec


def import_plugins(modules) -> list[str]:
    """Import the modules a notebook's ``benchmark_modules`` parameter names (each registers its ``SPEC``); returns
    the benchmark names they added."""
    before = set(SPECS)
    for m in modules or ():
        try:
            importlib.import_module(m)
        except ImportError as exc:
            raise ImportError(f"benchmark_modules: cannot import {m!r} ({exc}); give a module on the kernel's "
                              "sys.path that calls biaslab.benchmarks.register(SPEC)") from exc
    return [n for n in SPECS if n not in before]


def spec(name: str) -> Spec:
    if name not in SPECS:
        raise KeyError(f"unknown benchmark {name!r}; the registered ones are {sorted(SPECS)} "
                       "(biaslab.benchmarks.SPECS; a plugin module registers with biaslab.benchmarks.register)")
    return SPECS[name]
