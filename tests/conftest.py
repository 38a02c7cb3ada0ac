"""Fixtures shared by the whole test session.

``smoke_run``: each notebook (variant) runs under the smoke profile once per session, with both embedded models
where notebook 5's tests compare models, and every test that reads a smoke run reads that one (the notebook test,
notebook 5's library tests, the browser test of a fresh report). ``BIASLAB_SMOKE_OUTPUTS`` points it at a folder of
earlier smoke runs (the same layout ``biaslab reproduce --profile smoke --out FOLDER`` writes) to skip the runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: the notebook runs notebook 5's tests compare across models: these smoke runs score both embedded models
BOTH_MODELS = ("01_multifactor/ssqa", "01_multifactor/bbq", "02_calm", "03_crows_pairs_bayes", "04_agentic_entropy")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """``smoke_run(label)`` -> the output folder of that notebook's smoke run (run on first use, with HTML)."""
    from biaslab import paths, profiles, runner

    env = os.environ.get("BIASLAB_SMOKE_OUTPUTS")
    root = Path(env) if env else tmp_path_factory.mktemp("smoke")
    done: dict[str, Path] = {}

    def run(label: str) -> Path:
        notebook, _, variant = label.partition("/")
        folder = root / notebook / variant
        if label not in done and not env:
            overrides = {}
            if label in BOTH_MODELS:
                overrides["models"] = list(profiles.EMBEDDED_MODELS)
            if notebook == "05_compare":        # notebook 5 reads the committed outputs of the other notebooks
                overrides["outputs_root"] = str(paths.ROOT / "outputs")
            code = runner.reproduce("smoke", only=[label], outputs_dir=root, overrides=overrides)
            failed = folder / "MANIFEST.failed.json"
            assert code == 0, json.loads(failed.read_text()).get("error") if failed.exists() else f"exit {code}"
        done[label] = folder
        return folder

    run.root = root
    return run
