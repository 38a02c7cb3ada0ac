"""Every Eval Ever exports pass the EEE ecosystem's own validator: every-eval-ever 0.3.0's pydantic models
(``EvaluationLog``, ``InstanceLevelEvaluationLog``) and the datastore's semantic checks (path layout, companion
samples file, score bounds for continuous metrics, model identity and deployment), run by its
``validation_core.validate_file`` on each written file, for every committed run folder.

The validator comes from the pinned wheel (requirements.lock; ``make eee-validator`` unpacks it into
``<venv>/eee-validator``; ``BIASLAB_EEE_VALIDATOR`` names another unpacked copy). Without it, these tests skip and
say how to get it.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from biaslab.importers import eee
from biaslab.models.embedded import hub_id

ROOT = Path(__file__).resolve().parents[1]
VALIDATOR_DIR = Path(os.environ.get("BIASLAB_EEE_VALIDATOR", Path(sys.prefix) / "eee-validator"))


@pytest.fixture(scope="module")
def core():
    if not (VALIDATOR_DIR / "every_eval_ever" / "validator" / "validation_core.py").exists():
        pytest.skip(f"the every-eval-ever 0.3.0 validator is not unpacked in {VALIDATOR_DIR}: run `make "
                    "eee-validator`")
    sys.path.insert(0, str(VALIDATOR_DIR))
    try:
        mod = importlib.import_module("every_eval_ever.validator.validation_core")
        assert str(VALIDATOR_DIR) in mod.__file__
        assert importlib.import_module("every_eval_ever.schema").get_schema_version() == eee.SCHEMA_VERSION
        yield mod
    finally:
        sys.path.remove(str(VALIDATOR_DIR))


def _validate_tree(core, out: Path) -> dict[str, list]:
    """The official validator on every file under ``out``, with its semantic checks (paths relative to ``out``,
    as in the datastore repository): {repo path: errors + warnings}."""
    files = sorted(p for p in out.rglob("*") if p.suffix in (".json", ".jsonl"))
    avail = frozenset(p.relative_to(out).as_posix() for p in files)
    found = {}
    for p in files:
        rp = p.relative_to(out).as_posix()
        rep = core.validate_file(p, repo_path=rp, available_files=avail,
                                 read_repo_file=lambda r: (out / r).read_text(encoding="utf-8"),
                                 run_semantic_checks=True)
        found[rp] = [core.format_error(e) for e in rep.errors] + [core.format_warning(w) for w in rep.warnings]
    return found


def test_the_validator_rejects_what_the_exporter_used_to_write(core, tmp_path):
    """The validator is live: a continuous metric without bounds, and a model id without developer, are findings."""
    folder = ROOT / "outputs" / "03_crows_pairs_bayes"
    eee.export_run(folder, tmp_path, model_ids=hub_id)
    (agg,) = [p for p in tmp_path.rglob("*.json")][:1]
    import json
    rec = json.loads(agg.read_text())
    rec["evaluation_results"][0]["metric_config"].update(min_score=None, max_score=None)
    rec["model_info"].update(id="smollm2", developer=None)
    agg.write_text(json.dumps(rec))
    msgs = " ".join(_validate_tree(core, tmp_path)[agg.relative_to(tmp_path).as_posix()])
    assert "requires min_score" in msgs or "missing or invalid 'min_score'" in msgs
    assert "developer" in msgs or "names no datastore directory" in msgs


def _run_folders() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "outputs").rglob("MANIFEST.json"))


@pytest.mark.parametrize("folder", _run_folders(), ids=lambda p: str(p.relative_to(ROOT / "outputs")))
def test_every_committed_run_passes_the_official_validator(core, folder, tmp_path):
    name = folder.relative_to(ROOT / "outputs").as_posix().replace("/", "__")
    res = eee.export_run(folder, tmp_path, name=name, model_ids=hub_id)
    found = _validate_tree(core, tmp_path)
    assert found and len(found) >= len(res)
    bad = {k: v for k, v in found.items() if v}
    assert not bad, bad
    for r in res.values():
        names = [x["evaluation_name"] for x in r["aggregate"]["evaluation_results"]]
        assert len(names) == len(set(names)) and r["aggregate"]["evaluation_results"]
        assert "/" in r["aggregate"]["model_info"]["id"] and r["aggregate"]["model_info"]["developer"]


@pytest.mark.parametrize("log", ["smollm2_crows_en", "smollm2_bbq", "smollm2_mbbq"])
def test_exports_of_imported_lm_eval_runs_pass_the_official_validator(core, log, tmp_path):
    """An imported run's records (the harness as eval_library, every item of CrowS-Pairs, BBQ and MBBQ as an
    instance record) pass the validator as biaslab's own runs do."""
    from biaslab.run.log_import import import_run
    import_run("lm-eval", ROOT / "tests" / "fixtures" / "lm_eval" / log, tmp_path / "run")
    (r,) = eee.export_run(tmp_path / "run", tmp_path / "eee", model_ids=hub_id).values()
    found = _validate_tree(core, tmp_path / "eee")
    assert len(found) == 2 and not {k: v for k, v in found.items() if v}, found
    assert r["instances"] and r["aggregate"]["eval_library"] == {**r["aggregate"]["eval_library"],
                                                                 "name": "lm-evaluation-harness", "version": "0.4.13"}
