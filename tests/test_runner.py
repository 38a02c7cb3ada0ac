"""The papermill runner: parameters, selection, manifests, failures recorded."""

import json

import nbformat
import pytest

from biaslab import catalogue, paths, profiles, runner


def test_parse_overrides_parses_json_and_strings():
    assert runner.parse_overrides(['models=["a","b"]', "max_prompts=5", "device=cuda"]) == {
        "models": ["a", "b"], "max_prompts": 5, "device": "cuda"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        runner.parse_overrides(["oops"])


def test_select_by_prefix_and_variant():
    assert runner.select(["01"]) == [("01_multifactor", v) for v in ("ssqa", "bbq", "calm", "crows_pairs", "agentic")]
    assert runner.select(["01_multifactor/bbq"]) == [("01_multifactor", "bbq")]
    with pytest.raises(KeyError):
        runner.select(["99"])


def test_every_profile_has_every_notebook():
    for profile in profiles.PROFILE_NAMES:
        for nb, variants in profiles.NOTEBOOKS.items():
            for v in variants:
                p = profiles.params(profile, nb, v)
                # notebook 5 scores nothing: models=None there means every model found in the outputs
                assert p["profile"] == profile and (p["models"] or nb == "05_compare")


def _toy_notebook(path, body):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('output_dir = "x"\nprofile = "default"\nmodels = []\nvalue = 1')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nbformat.write(nb, path)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", nbdir)
    monkeypatch.setattr(profiles, "NOTEBOOKS", {"00_toy": {"": {}}})
    monkeypatch.setattr(profiles, "PROFILES", {p: {"*": {"models": ["m"]}} for p in profiles.PROFILE_NAMES})
    return nbdir, tmp_path / "outputs"


def test_run_writes_executed_notebook_and_manifest(toy):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb",
                  "from biaslab.outputs import OutputDir\nimport pandas as pd\nout = OutputDir(output_dir)\n"
                  "out.table(pd.DataFrame({'v': [value]}), 'v')\nout.record_model({'name': 'm', 'weights_sha256': 'abc'})")
    assert runner.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    m = json.loads((outdir / "00_toy/MANIFEST.json").read_text())
    assert m["status"] == "ok" and m["parameters"]["value"] == 7 and m["profile"] == "smoke"
    assert m["models"]["m"]["weights_sha256"] == "abc"
    assert (outdir / "00_toy/tables/v.csv").read_text().splitlines() == ["v", "7"]
    assert (outdir / "00_toy/00_toy.ipynb").exists()


def test_failing_notebook_is_recorded_and_returns_nonzero(toy):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", "raise RuntimeError('boom')")
    assert runner.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    m = json.loads((outdir / "00_toy/MANIFEST.json").read_text())
    assert m["status"] == "failed" and "boom" in m["error"]


def test_catalogue_rejects_bad_status(tmp_path):
    d = tmp_path / "catalogue"
    d.mkdir()
    (d / "x.tsv").write_text("\t".join(catalogue.COLUMNS) + "\nP\tTable 1\td\tout.csv\tdone\t\n")
    with pytest.raises(ValueError, match="status"):
        catalogue.read(d)


def test_catalogue_marks_missing_outputs(tmp_path):
    rows = [{"paper": "P", "item": "Fig 1", "description": "d", "output": "a/b.png", "status": "regenerated",
             "note": "", "notebook": "x"}]
    assert "*(missing)*" in catalogue.render(rows, tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a/b.png").write_bytes(b"")
    assert "*(missing)*" not in catalogue.render(rows, tmp_path)
