"""Output integrity: a MANIFEST lists the sha256 of every file it vouches for; `biaslab verify` names edited,
missing and extra files (exit 1); the catalogue flags them and notebook 5 refuses them. Before, an output folder
edited by hand kept its MANIFEST "ok" and the manifest stored no output hashes, so the edit was undetectable."""

import json

import pytest

from biaslab.report import catalogue
from biaslab import cli
from biaslab.files import integrity
from biaslab.run import execute
from test_runner import GOOD, _toy_notebook, toy  # noqa: F401 - the toy-notebook fixture


@pytest.fixture
def published(toy):  # noqa: F811
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD + "\nimport matplotlib.pyplot as plt\n"
                  "fig, ax = plt.subplots()\nax.plot([0, 1], [value, 1]); ax.set_title('t'); ax.set_xlabel('x')\n"
                  "ax.set_ylabel('y')\nout.figure(fig, 'f')")
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=True) == 0
    return outdir


def test_manifest_vouches_for_every_output_and_verify_names_each_difference(published, capsys):
    run = published / "00_toy"
    listed = json.loads((run / "MANIFEST.json").read_text())["files"]
    assert set(listed) == {"00_toy.ipynb", "tables/v.csv", "figures/f.png"}      # not the HTML render, not itself
    assert (run / "00_toy.html").exists()
    assert cli.main(["verify", str(published)]) == 0
    # what a failed rerun leaves beside the last good outputs is not an extra file
    (run / "MANIFEST.failed.json").write_text("{}")
    (run / "00_toy.failed.ipynb").write_text("{}")
    assert integrity.verify(run).ok
    (run / "tables/v.csv").write_text("v\n8\n")               # edited by hand
    (run / "figures/f.png").unlink()                          # removed
    (run / "tables/notes.csv").write_text("x\n")              # added
    capsys.readouterr()
    assert cli.main(["verify", str(published)]) == 1
    out = capsys.readouterr().out
    assert "tables/v.csv: edited" in out and "figures/f.png: missing" in out and "tables/notes.csv: extra" in out
    assert "0 of 1 run folder(s) verified" in out


def test_a_manifest_without_hashes_is_unverifiable(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run/MANIFEST.json").write_text(json.dumps({"status": "ok"}))
    v = integrity.verify(tmp_path / "run")
    assert v.legacy and not v.ok and "lists no file hashes" in v.problem
    assert cli.main(["verify", str(tmp_path)]) == 1
    assert cli.main(["verify", str(tmp_path / "nothing")]) == 2


def test_the_catalogue_flags_and_notebook_5_refuses_edited_inputs(published):
    rows = [{"paper": "P", "item": "T1", "description": "d", "output": "00_toy/tables/v.csv", "status": "regenerated",
             "note": "", "notebook": "x"}]
    assert "*(unverified" not in catalogue.render(rows, published)
    assert integrity.check_inputs(published, ["00_toy", "not_run_yet"]) == []
    (published / "00_toy/tables/v.csv").write_text("v\n8\n")
    assert "edited since the run that wrote it" in catalogue.render(rows, published)
    with pytest.raises(integrity.UnverifiedInputs, match="tables/v.csv: edited.*biaslab verify"):
        integrity.check_inputs(published, ["00_toy"])
    flags = integrity.check_inputs(published, ["00_toy"], refuse=False)
    assert flags == ["00_toy: 1 edited: tables/v.csv"]


def test_notebook_1_variants_are_checked_one_manifest_each(tmp_path):
    for v in ("a", "b"):
        d = tmp_path / "01_multifactor" / v / "tables"
        d.mkdir(parents=True)
        (d / "t.csv").write_text(v)
        (d.parent / "MANIFEST.json").write_text(json.dumps({"files": integrity.file_hashes(d.parent)}))
    (tmp_path / "01_multifactor/b/MANIFEST.json").write_text(json.dumps({"status": "ok"}))      # an old one
    assert integrity.check_inputs(tmp_path, ["01_multifactor"]) == [
        "01_multifactor/b: unverifiable: its MANIFEST.json lists no file hashes (written before biaslab recorded "
        "them); regenerate the run"]
    assert [f.name for f in integrity.run_folders(tmp_path)] == ["a", "b"]


def _git(*args, cwd):
    import subprocess
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_git_never_converts_the_line_endings_of_committed_outputs():
    """A `core.autocrlf=true` clone verified 0 of 12 run folders: git rewrote LF as CRLF in every table and notebook,
    so no hash matched. `.gitattributes` marks every committed output `-text`."""
    import shutil
    from biaslab import paths
    if shutil.which("git") is None or not (paths.ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = _git("ls-files", "outputs", cwd=paths.ROOT).splitlines()
    assert files
    attrs = _git("check-attr", "text", "--", *files, cwd=paths.ROOT).splitlines()
    converted = [a for a in attrs if not a.endswith(": text: unset")]
    assert not converted, converted[:5]


def test_a_crlf_clone_still_verifies(tmp_path):
    """The same end to end: a run folder committed with this repository's .gitattributes, cloned with
    core.autocrlf=true, still verifies."""
    import shutil
    from biaslab import paths
    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = tmp_path / "repo"
    run = repo / "outputs" / "00_toy"
    (run / "tables").mkdir(parents=True)
    (run / "tables/v.csv").write_text("v\n7\n")
    (run / "README.md").write_text("# a\n\nb\n")
    (run / "MANIFEST.json").write_text(json.dumps({"files": integrity.file_hashes(run)}) + "\n")
    if (paths.ROOT / ".gitattributes").exists():
        shutil.copy(paths.ROOT / ".gitattributes", repo / ".gitattributes")
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "run", cwd=repo)
    _git("clone", "-q", "-c", "core.autocrlf=true", str(repo), str(tmp_path / "clone"), cwd=tmp_path)
    assert integrity.verify(tmp_path / "clone/outputs/00_toy").ok


def test_verify_follows_a_run_folder_that_is_a_symlink(published, tmp_path, capsys):
    """`biaslab verify` skipped a run folder that is a symbolic link and printed "1 of 1 verified" with an edited
    table in it."""
    import shutil
    second = published / "00_two"
    shutil.copytree(published / "00_toy", tmp_path / "elsewhere")
    second.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (published / "loop").symlink_to(published, target_is_directory=True)      # a loop is walked once
    assert cli.main(["verify", str(published)]) == 0
    assert "2 of 2 run folder(s) verified" in capsys.readouterr().out
    (tmp_path / "elsewhere/tables/v.csv").write_text("v\n8\n")
    assert cli.main(["verify", str(published)]) == 1
    out = capsys.readouterr().out
    assert "00_two/tables/v.csv: edited" in out and "1 of 2 run folder(s) verified" in out
