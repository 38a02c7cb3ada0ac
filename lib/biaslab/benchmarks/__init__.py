"""Benchmarks: one module per benchmark, each ending with its :class:`~biaslab.benchmarks.spec.Spec` (``SPEC``);
:data:`SPECS` is the registry (one line per benchmark) and :func:`spec` looks one up by name.
"""

from __future__ import annotations

import importlib

from .base import Benchmark, Factor, FactorSpec

__all__ = ["Benchmark", "Factor", "FactorSpec", "SPECS", "register", "spec"]


# --------------------------------------------------------------------------- the registry: one line per benchmark
from . import agentic, bbq, calm, crows_pairs, mbbq, ssqa, winogender  # noqa: E402
from .spec import Spec  # noqa: E402

SPECS: dict[str, Spec] = {s.name: s for s in (
    ssqa.SPEC,
    bbq.SPEC,
    calm.SPEC,
    crows_pairs.SPEC,
    agentic.SPEC,
    winogender.SPEC,
    mbbq.SPEC,
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
