"""Fixtures shared by the whole test session.

``smoke_run``: each notebook (variant) runs under the smoke profile once per session, and every test that reads a
smoke run reads that one (the notebook tests, notebook 5's library tests, the browser test of a fresh report). The
runs notebook 5's tests compare across models score both embedded models. On first use the fixture runs every smoke
run the collected tests need, two notebooks at a time (``reproduce --jobs 2``: on two cores two single-threaded
kernels finish sooner than one after the other). ``BIASLAB_SMOKE_OUTPUTS`` points it at a folder of earlier smoke
runs (as ``biaslab reproduce --profile smoke --out FOLDER`` writes them) instead.

Under pytest-xdist (``make test``: ``-n 2``) a session or module fixture runs once in every worker that uses it, so
:func:`pytest_xdist_make_scheduler` sends whole modules to a worker, and the modules that read the smoke runs to one
worker together; each worker's torch gets its share of the cores.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest


if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):      # set by xdist before this file is imported (torch is not yet)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1)
                                                     // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Freeze what collection left alive (modules, test items; kept all session) out of the cyclic garbage collector's
    walk: statsmodels' Holm (``multipletests``) calls ``gc.collect()`` on every call, which otherwise walks the whole
    session's heap (0.5 s a call in a full run). Objects created later are collected as usual."""
    gc.freeze()


def _metric_folders() -> tuple[str, ...]:
    """The run folders the benchmarks' headline metrics read (``Spec.metrics``; notebook 5's ``METRICS`` while the
    specs declare none)."""
    from biaslab.benchmarks import SPECS
    metrics = [m for s in SPECS.values() for m in s.metrics]
    if not metrics:
        from biaslab.papers.compare.tables import METRICS as metrics
    return tuple(dict.fromkeys(m.folder for m in metrics))


#: the runs notebook 5's tests compare across models: these smoke runs score both embedded models
BOTH_MODELS = _metric_folders()
#: test modules that read smoke runs -> the runs they read (None: every notebook and variant)
READERS = {"test_notebooks.py": None, "test_compare.py": BOTH_MODELS,
           "test_report_browser.py": ("04_agentic_entropy",),
           "test_winogender.py": ("01_multifactor/winogender", "06_multiverse")}


#: the scopes of a few minutes (notebook runs, a llama.cpp server, Chromium) go out first: longest first leaves no
#: worker alone with one at the end
LONGEST = ("smoke_run", "tests/test_served.py", "tests/test_importers.py", "tests/test_plugin_benchmark.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n N``: xdist's scheduler by scope (a module-scoped fixture -- a model, a server, a browser, a loaded
    benchmark -- runs once), with one scope for the modules of :data:`READERS` (the smoke runs are made once)."""
    if config.getoption("dist") != "load":          # another --dist asked for by name
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "smoke_run" if Path(module).name in READERS else module

        def _assign_work_unit(self, node) -> None:
            for scope in reversed(LONGEST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)
    return ByModule(config, log)


def _labels(wanted) -> list[str]:
    from biaslab.run import profiles
    every = [nb + (f"/{v}" if v else "") for nb, variants in profiles.NOTEBOOKS.items() for v in variants]
    return every if wanted is None else [lb for lb in every if lb in wanted]


@pytest.hookimpl(trylast=True)          # after -k / -m have deselected
def pytest_collection_modifyitems(config, items):
    """Remember which smoke runs the selected tests read, so the fixture runs them together on first use."""
    needed: set[str] = set()
    for item in items:
        if "smoke_run" in getattr(item, "fixturenames", ()):
            name = Path(str(item.fspath)).name
            if name not in READERS:         # its module would make the smoke runs again on another xdist worker
                raise pytest.UsageError(f"{item.nodeid} reads smoke_run: add {name} to READERS in tests/conftest.py")
            needed.update(_labels(READERS[name]))
    config._smoke_labels = needed


def _batches(labels: set[str]) -> list[tuple[list[str], dict]]:
    """The runs grouped by the overrides they share (one ``reproduce`` call each)."""
    from biaslab import paths
    from biaslab.run import profiles
    both = [lb for lb in _labels(None) if lb in labels and lb in BOTH_MODELS]
    compare = [lb for lb in _labels(None) if lb in labels and lb.startswith("05_compare")]
    rest = [lb for lb in _labels(None) if lb in labels and lb not in both and lb not in compare]
    return [(both, {"models": list(profiles.EMBEDDED_MODELS)}), (rest, {}),
            # notebook 5 reads the committed outputs of the other notebooks
            (compare, {"outputs_root": str(paths.ROOT / "outputs")})]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, request):
    """``smoke_run(label)`` -> the output folder of that notebook's smoke run (with its HTML report)."""
    from biaslab.run import execute

    env = os.environ.get("BIASLAB_SMOKE_OUTPUTS")
    root = Path(env) if env else tmp_path_factory.mktemp("smoke")
    done: set[str] = set()
    errors: dict[str, str] = {}

    def ensure(labels: set[str]) -> None:
        for batch, overrides in _batches(labels - done):
            if batch:
                code = execute.reproduce("smoke", only=batch, outputs_dir=root, overrides=overrides, jobs=2)
                done.update(batch)
                for lb in batch:
                    failed = root / lb / "MANIFEST.failed.json"
                    if failed.exists():
                        errors[lb] = json.loads(failed.read_text()).get("error") or "failed"
                    elif code != 0 and not (root / lb / "MANIFEST.json").exists():
                        errors[lb] = f"reproduce exited {code}"

    def run(label: str) -> Path:
        if not env and label not in done:
            ensure(set(getattr(request.config, "_smoke_labels", ())) | {label})
        assert label not in errors, f"smoke run of {label} failed: {errors[label]}"
        return root / label

    run.root = root
    return run
