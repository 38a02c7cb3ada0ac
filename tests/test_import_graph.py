"""Data flows one way: no module of ``lib/biaslab`` imports a stage to its right, and no modules import each other.

Every module is parsed (not imported) and each of its ``biaslab`` imports — top-level, inside a function, or made
from a string (``importlib.import_module("biaslab.x")``, an f-string's literal ``biaslab.`` prefix included) — is
checked against ``ALLOWED``: loaders import no scoring (a benchmark's ``respond`` is handed its scorer), statistics
import no scoring, loader, plan or paper glue, the engine knows no benchmark, and no generic stage imports a paper's
package (``biaslab.papers.*``). The same imports, resolved to module files, must form no circle (:func:`circle`). An
import from a string without a literal ``biaslab.`` prefix is invisible to both checks: only :data:`DYNAMIC` may
make one.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "biaslab"

# module or package under biaslab (dotted; the longest prefix that is listed decides) -> stage, in the order data flows
STAGES = {
    "__init__": "infra", "paths": "infra", "files": "infra",  # locations; hashing, storage errors, manifests, redaction
    "files.result_cache": "cache",                            # a disk cache of slow results, keyed by their inputs
    "sources": "sources",                                     # pinned benchmark files
    "benchmarks": "benchmarks",                               # prompt tables, one module per benchmark
    "importers": "importers",    # other harnesses' logs in, Every Eval Ever records out (parsing, no scoring)
    "models": "models",          # models.local_server: a llama.cpp server for an embedded model's GGUF file
    "scoring": "scoring",
    "stats": "stats",
    "plots": "plots",
    "plan": "plan",              # the analysis plan (analysis_plan.yaml): which rows are confirmatory claims
    "report.outputs": "output", "report.display": "output",   # what a notebook writes and how it shows it
    "report.wording": "wording",                              # phrases for computed findings
    "papers": "papers",
    "plan.calibration": "analyses", "plan.sensitivity": "analyses",   # over a run's tables, under the plan
    "report": "report",          # pages over executed notebooks: HTML reports, front page, headline, catalogue
    "run": "run",                # biaslab reproduce and biaslab import
    "cli": "cli",
}
GENERIC = {"infra", "cache", "sources", "benchmarks", "models", "scoring", "stats", "plots", "wording", "output",
           "importers", "plan"}
# stage -> the stages it may import
ALLOWED = {
    "infra": {"infra"},
    "cache": {"infra", "cache"},
    "sources": {"infra", "sources"},
    # a benchmark's respond reads its answers with the statistics' pure table functions (the agentic entropy); the
    # scorer it asks is passed in, never imported
    "benchmarks": {"infra", "sources", "benchmarks", "stats"},
    "models": {"infra", "models", "importers"},          # an imported model's handle reads its log
    "importers": {"infra", "benchmarks", "importers"},   # BBQ's biased answer: the loader's rule
    "scoring": {"infra", "models", "scoring"},
    "plan": {"infra", "plan"},                            # reads one YAML file
    "stats": {"stats", "cache"},                          # pure functions over tables; the plan is passed in
    "plots": {"infra", "stats", "plots"},
    "wording": {"wording"},                               # pure formatting: sentences read only verdict columns
    "output": {"infra", "plots", "output"},              # writes tables and figures (checks figures first); the
                                                          # plan whose hash it records is passed in
    "papers": GENERIC | {"papers"},                      # a paper's glue may use every generic stage
    "analyses": GENERIC | {"papers", "analyses"},
    "report": GENERIC | {"papers", "report"},
    "run": GENERIC | {"papers", "analyses", "report", "run"},
    "cli": GENERIC | {"papers", "analyses", "report", "run", "cli"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def biaslab_imports(path: Path) -> list[str]:
    """Absolute names of the biaslab modules (or packages) that ``path`` imports, relative imports resolved."""
    mod = module_name(path)
    return imports_of(path.read_text(), mod if path.name == "__init__.py" else mod.rpartition(".")[0], MODULE_NAMES)


#: the only imports made from a string the checks cannot read, each with why: (file under lib/biaslab, function)
DYNAMIC = {
    ("models/embedded.py", "gguf_path"): "an embedded model's PyPI package, named by its spec (not biaslab)",
    ("benchmarks/__init__.py", "_import"): "the user's benchmark modules (--benchmark-module, entry points)",
}


def _import_call(node) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
        isinstance(f, ast.Name) and f.id in ("import_module", "__import__"))


def _string_import(arg) -> str | None:
    """The module a string import names: a literal, or an f-string's literal ``biaslab.`` prefix (its package);
    None where the name is not written in the source."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        return prefix.rpartition(".")[0] if prefix.startswith("biaslab.") else None
    return None


def imports_of(source: str, package: str, modules: set | None = None) -> list[str]:
    """The ``biaslab`` names ``source`` (a module of ``package``) imports; with ``modules`` (module names), each
    ``from pkg import x`` is ``pkg.x`` where that is a module (the graph of :func:`circle`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "biaslab"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "biaslab":
                continue
            if node.module is None or target in ("biaslab", "biaslab.papers"):
                found += [f"{target}.{a.name}" for a in node.names]     # `from .. import stats`
            elif modules:
                found += [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names]
            else:
                found.append(target)
        elif _import_call(node) and node.args:
            name = _string_import(node.args[0])
            if name and name.split(".")[0] == "biaslab":
                found.append(name)
    return found


def dynamic_imports(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of every import from a string that names no ``biaslab`` module in the source."""
    out = []
    for fn in [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in ast.walk(fn):
            if _import_call(node) and node.args and _string_import(node.args[0]) is None:
                out.append((fn.name, node.lineno))
    return out


def stage_of(name: str) -> str:
    """The stage of the longest listed prefix of ``name`` (``biaslab.report.outputs`` -> ``report.outputs``)."""
    parts = name.split(".")[1:] or ["__init__"]
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in STAGES:
            return STAGES[".".join(parts[:i])]
    raise KeyError(f"{name}: module `{parts[0]}` has no stage; add it to STAGES in tests/test_import_graph.py")


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of ``graph`` (module -> the modules it imports), [] where there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def paper_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "papers" else None


MODULES = sorted(LIB.rglob("*.py"))
MODULE_NAMES = {module_name(p) for p in MODULES}


def test_every_module_has_a_stage():
    for path in MODULES:
        stage_of(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LIB)))
def test_imports_flow_one_way(path):
    mod = module_name(path)
    stage = stage_of(mod)
    for target in biaslab_imports(path):
        if target == "biaslab":
            continue
        assert stage_of(target) in ALLOWED[stage], f"{mod} ({stage}) imports {target} ({stage_of(target)})"
        if paper_of(mod) and paper_of(target):
            assert paper_of(mod) == paper_of(target), f"{mod} imports another paper's glue: {target}"


def test_the_checker_sees_violations():
    """Relative and function-level imports are resolved (a check that finds nothing is no check)."""
    src = "def f():\n    from ..papers.calm import bias\n    from ..scoring import Scorer\nfrom . import coverage\n"
    names = sorted(imports_of(src, "biaslab.stats"))
    assert names == ["biaslab.papers.calm", "biaslab.scoring", "biaslab.stats.coverage"]
    assert [stage_of(n) in ALLOWED["stats"] for n in names] == [False, False, True]


def with_packages(mod: str, names: set[str]) -> set[str]:
    """``names`` and the packages above each that ``mod`` is not inside: importing ``a.b.c`` from outside ``a`` runs
    ``a/__init__`` and ``a/b/__init__`` first, so what they import is imported too."""
    above = {".".join(n.split(".")[:i]) for n in names for i in range(2, len(n.split(".")))}
    return names | {p for p in above if not mod.startswith(p + ".") and p != mod}


def module_graph() -> dict[str, set[str]]:
    """Module -> the biaslab modules it imports (top-level, in a function, or from a string), as module files, with
    the packages whose ``__init__`` that import runs (:func:`with_packages`)."""
    graph = {}
    for path in MODULES:
        mod = module_name(path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        names = {n for n in imports_of(path.read_text(), package, MODULE_NAMES) if n in MODULE_NAMES}
        graph[mod] = with_packages(mod, names) & MODULE_NAMES - {mod}
    return graph


def test_no_modules_import_each_other():
    """No circle among the modules, however long and wherever its imports sit (a function-level import only defers
    a circle): ``stats.intervals`` and ``stats.clustered`` imported each other until Clopper-Pearson moved to the
    rule that uses it; a package's formats imported its ``__init__``, which dispatches to them, until their shared
    pieces moved to ``importers.base``. Importing a package's module from outside runs the package's ``__init__``
    first, so an ``__init__`` that imports its modules may close a circle too."""
    found = circle(module_graph())
    assert not found, "import circle: " + " -> ".join(found) + " (move what both need to where it belongs)"


def test_the_circle_check_sees_a_circle():
    g = {"biaslab.stats.a": {"biaslab.stats.b"}, "biaslab.stats.b": {"biaslab.stats.c"},
         "biaslab.stats.c": {"biaslab.stats.a"}, "biaslab.stats.d": {"biaslab.stats.a"}}
    assert sorted(set(circle(g))) == ["biaslab.stats.a", "biaslab.stats.b", "biaslab.stats.c"]
    assert circle({**g, "biaslab.stats.c": set()}) == []
    # a package's __init__ that imports its pages closes a circle through a paper that imports one of its modules
    assert with_packages("biaslab.papers.x", {"biaslab.report.wording"}) == {"biaslab.report.wording", "biaslab.report"}
    assert with_packages("biaslab.report.html", {"biaslab.report.wording"}) == {"biaslab.report.wording"}
    pages = {"biaslab.report": {"biaslab.report.html"}, "biaslab.report.html": {"biaslab.papers.x"},
             "biaslab.papers.x": with_packages("biaslab.papers.x", {"biaslab.report.wording"})}
    assert circle(pages)
    src = "def f():\n    from .intervals import clopper_pearson\nfrom . import clustered, paired\n"
    mods = {"biaslab.stats.intervals", "biaslab.stats.clustered", "biaslab.stats"}
    assert sorted(imports_of(src, "biaslab.stats", mods)) == [
        "biaslab.stats.clustered", "biaslab.stats.intervals", "biaslab.stats.paired"]


def test_imports_from_strings_are_seen_or_listed():
    """An import from a string is an edge like any other where the source writes the module (a literal, or an
    f-string's literal ``biaslab.`` prefix); any other is one of :data:`DYNAMIC`, each with its reason, and every
    entry there still exists."""
    src = ("import importlib\ndef f(name, m):\n    importlib.import_module('biaslab.papers.calm.data')\n"
           "    importlib.import_module(f'biaslab.benchmarks.{name}')\n    __import__(m)\n")
    assert imports_of(src, "biaslab.stats") == ["biaslab.papers.calm.data", "biaslab.benchmarks"]
    assert dynamic_imports(src) == [("f", 5)]
    seen = set()
    for path in MODULES:
        rel = str(path.relative_to(LIB))
        for fn, line in dynamic_imports(path.read_text()):
            assert (rel, fn) in DYNAMIC, (f"{rel}:{line} ({fn}) imports a module named at run time: write the module "
                                          "in the source (the checks see it), or list it in DYNAMIC with why")
            seen.add((rel, fn))
    assert set(DYNAMIC) == seen, f"DYNAMIC lists imports that are gone: {sorted(set(DYNAMIC) - seen)}"
