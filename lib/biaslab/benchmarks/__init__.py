"""Benchmarks: one module per benchmark, each ending with its :class:`~biaslab.benchmarks.spec.Spec` (``SPEC``);
:data:`SPECS` is the registry (one line per benchmark) and :func:`spec` looks one up by name. A benchmark from
outside the library (a *plugin*) is loaded by :func:`load_plugins`: an installed entry point of group
``biaslab.benchmarks``, or a module named by ``biaslab reproduce --benchmark-module`` (docs/adding_a_benchmark.md).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import re
import sys
from pathlib import Path

from .. import paths
from ..files.hashing import sha256_file
from .base import Benchmark, Factor, FactorSpec

__all__ = ["Benchmark", "Factor", "FactorSpec", "SPECS", "load_module", "load_plugins", "register", "spec"]


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
BUILTIN = frozenset(SPECS)
#: the entry-point group a package names its benchmark modules in (``[project.entry-points."biaslab.benchmarks"]``)
GROUP = "biaslab.benchmarks"
#: module name -> the plugin's record: its file's ``path`` (repository-relative inside this repository, else relative
#: to the folder it is imported from), ``sha256`` (a package's: of the ``sha256sum`` lines of its .py files),
#: ``benchmarks`` and ``root`` (that folder, for a notebook's kernel)
PLUGINS: dict[str, dict] = {}


class PluginError(ImportError):
    """A benchmark module that cannot be imported; the message names it and the fix."""


def _owner(s: Spec) -> str:
    return getattr(s.load, "__module__", "") or ""


def register(spec: Spec) -> Spec:
    """Add a benchmark defined outside this package (its module calls it with its ``SPEC``, or
    :func:`load_plugins` does). A name already registered by another module is refused: a plugin cannot replace a
    benchmark (its notebook-1 folder, sizes and metrics would silently become the plugin's)."""
    if not isinstance(spec, Spec):
        raise TypeError(f"register() takes a biaslab.benchmarks.spec.Spec, not {type(spec).__name__}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", spec.name):     # it names the outputs folder
        raise ValueError(f"benchmark module {_owner(spec)!r}: Spec.name {spec.name!r} names its outputs folder; use "
                         "lower-case letters, digits, _ and -")
    old = SPECS.get(spec.name)
    if old is not None and (spec.name in BUILTIN or _owner(old) != _owner(spec)):
        raise ValueError(f"benchmark module {_owner(spec)!r} registers the name {spec.name!r}, already "
                         f"{'the built-in benchmark' if spec.name in BUILTIN else 'registered by ' + _owner(old)} "
                         f"{old.title}; give its Spec another name")
    if spec.sources_table:
        from .. import sources
        sources.add_table(spec.sources_table, spec.name)
    SPECS[spec.name] = spec
    return spec


def _import(target: str):
    """Import a module named by a dotted name, a ``.py`` file or a package folder (whose parent folder is put on
    ``sys.path``, as pytest does for a test file)."""
    p = Path(target)
    if target.endswith(".py") or p.is_dir() or "/" in target or "\\" in target:
        if not p.exists():
            raise ImportError(f"no file or folder {target}")
        p = p.resolve()
        p = p.parent if p.name == "__init__.py" else p
        root, name = str(p.parent), p.stem
        if root not in sys.path:
            sys.path.insert(0, root)
        mod = importlib.import_module(name)
        if Path(mod.__file__).resolve() not in (p, p / "__init__.py"):
            raise ImportError(f"a module named {name!r} is already imported from {mod.__file__}; rename {target}")
        return mod
    return importlib.import_module(target)


def load_module(target: str, attr: str | None = None, how: str = "--benchmark-module") -> dict:
    """Import a benchmark module (a dotted name, a ``.py`` file or a package folder), register its ``SPEC`` (or
    ``attr``) unless it registered itself, and record it in :data:`PLUGINS`; returns the record. A module that
    cannot be imported is a :class:`PluginError` naming it and the fix."""
    names = set(SPECS)
    try:
        mod = _import(target)
    except Exception as exc:        # not found, or its code fails (a Spec missing what it must declare)
        raise PluginError(f"{how} {target!r}: cannot import it ({type(exc).__name__}: {exc}); give a .py file, a "
                          "package folder or a module on sys.path that defines SPEC = biaslab.benchmarks.spec.Spec(...)"
                          ) from exc
    s = getattr(mod, attr or "SPEC", None)
    if isinstance(s, Spec) and SPECS.get(s.name) is not s:
        register(s)
    file = Path(mod.__file__).resolve()
    root = file.parents[mod.__name__.count(".") + (file.name == "__init__.py")]
    path = file.relative_to(paths.ROOT if file.is_relative_to(paths.ROOT) else root)
    code = sorted(file.parent.rglob("*.py")) if file.name == "__init__.py" else [file]
    digest = hashlib.sha256("".join(f"{sha256_file(f)}  {f.relative_to(file.parent).as_posix()}\n"
                                    for f in code).encode()).hexdigest() if len(code) > 1 else sha256_file(file)
    added = [n for n, x in SPECS.items() if n not in names or _owner(x) == mod.__name__ or x is s]
    PLUGINS[mod.__name__] = {"module": mod.__name__, "path": path.as_posix(), "sha256": digest,
                             "benchmarks": added, "root": str(root), "how": how}
    return PLUGINS[mod.__name__]


def load_plugins(modules=()) -> list[str]:
    """Load (:func:`load_module`) every installed entry point of group :data:`GROUP` and ``modules``; returns the
    benchmark names registered."""
    before = set(SPECS)
    for ep in importlib.metadata.entry_points(group=GROUP):
        load_module(ep.module, ep.attr, f"entry point {ep.name} ({GROUP})")
    for m in modules or ():
        load_module(str(m))
    return [n for n in SPECS if n not in before]


def spec(name: str) -> Spec:
    if name not in SPECS:
        raise KeyError(f"unknown benchmark {name!r}; the registered ones are {sorted(SPECS)}. A benchmark from "
                       "outside the library is loaded with `biaslab reproduce --benchmark-module PATH_OR_MODULE` or "
                       f"an installed entry point of group {GROUP} (docs/adding_a_benchmark.md)")
    return SPECS[name]
