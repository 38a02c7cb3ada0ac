"""Data flows one way: no module of ``lib/biaslab`` imports a stage to its right.

Every module is parsed (not imported) and each of its ``biaslab`` imports — top-level or inside a function — is
checked against ``ALLOWED``: loaders import no scoring (a benchmark's ``respond`` is handed its scorer), statistics import no scoring, loader or paper
glue, the engine knows no benchmark, and no generic stage imports a paper's package (``biaslab.papers.*``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "biaslab"

# top-level name under biaslab -> stage
STAGES = {
    "__init__": "infra", "paths": "infra", "filehash": "infra", "fsio": "infra",
    "profiles": "profiles",     # run sizes: its own and each benchmark spec's (Spec.sizes)
    "integrity": "infra", "redact": "infra",
    "answers": "infra",         # reading a generated answer: pure text functions
    "outputs": "output", "display": "output",          # display: how notebooks show tables and figures
    "sources": "sources",
    "benchmarks": "benchmarks",
    "models": "models",
    "scoring": "scoring",
    "stats": "stats",
    "plots": "plots",
    "papers": "papers",
    "resultcache": "cache",
    "catalogue": "orchestration", "runner": "orchestration", "cli": "orchestration", "parameters": "orchestration",
    "report_index": "orchestration", "summary": "orchestration",      # summary: the README's headline block
    "report": "orchestration",                                          # HTML reports of executed notebooks
    "publish": "orchestration", "stopping": "orchestration", "preflight": "orchestration",
    "regenerated": "orchestration",     # a regenerated run compared with the committed one
    "serve": "models",          # a local llama.cpp server for an embedded model's GGUF file (imports models only)
    "findings": "wording",
    "importers": "importers", "imported_run": "orchestration",   # other harnesses' logs in, Every Eval Ever records out (parsing, no scoring)
    "plan": "plan", "plan_schema": "plan",      # the analysis plan (analysis_plan.yaml): which rows are confirmatory claims
    "calibrate": "orchestration",   # calibration and familywise-error simulations over a run's tables
    "sensitivity_analyses": "orchestration",   # notebooks 1 and 5: the sensitivity analyses of their claims
}
GENERIC = {"infra", "profiles", "cache", "sources", "benchmarks", "models", "scoring", "stats", "plots", "wording",
           "output", "importers", "plan"}
# stage -> the stages it may import
ALLOWED = {
    "infra": {"infra"},
    "profiles": {"infra", "benchmarks"},
    "cache": {"infra", "cache"},                          # a disk cache of slow results, keyed by their inputs
    "sources": {"infra", "sources"},
    # a benchmark's respond reads its answers with the statistics' pure table functions (the agentic entropy); the
    # scorer it asks is passed in, never imported
    "benchmarks": {"infra", "sources", "benchmarks", "stats"},
    "models": {"infra", "models", "importers"},          # an imported model's handle reads its log
    "importers": {"infra", "benchmarks", "importers"},   # BBQ's biased answer: the loader's rule
    "scoring": {"infra", "models", "scoring"},
    "plan": {"infra", "plan"},                            # reads one YAML file
    "stats": {"stats", "cache", "plan"},                  # pure functions over tables; the verdict layer reads the plan
    "plots": {"infra", "stats", "plots", "plan"},
    "wording": {"wording"},                               # phrases for computed findings: pure formatting
    "output": {"infra", "plots", "output", "plan"},      # writes tables and figures (checks figures first) and
                                                          # records the plan the kernel read
    "papers": GENERIC | {"papers"},                      # a paper's glue may use every generic stage
    "orchestration": GENERIC | {"papers", "orchestration"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def biaslab_imports(path: Path) -> list[str]:
    """Absolute names of the biaslab modules (or packages) that ``path`` imports, relative imports resolved."""
    mod = module_name(path)
    return imports_of(path.read_text(), mod if path.name == "__init__.py" else mod.rpartition(".")[0])


def imports_of(source: str, package: str) -> list[str]:
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
            else:
                found.append(target)
    return found


def stage_of(name: str) -> str:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if top not in STAGES:
        raise KeyError(f"{name}: module `{top}` has no stage; add it to STAGES in tests/test_import_graph.py")
    return STAGES[top]


def paper_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "papers" else None


MODULES = sorted(LIB.rglob("*.py"))


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
