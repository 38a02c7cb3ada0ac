"""Settings that cannot work are refused before any work, in one line with exit code 2 (they used to pass validation
and fail 5-19 s later inside the notebook with a raw error)."""


import pytest

from biaslab import cli
from biaslab.run import preflight


@pytest.mark.parametrize("extra,needle", [
    (["-p", "models=[]"], "models=[] names no model"),
    (["-p", "dtype=float33"], "dtype='float33' is not a dtype a model can be loaded in"),
    (["-p", "device=cuda"], "torch sees no CUDA device"),
    (["-p", "device=gpu"], "device='gpu' is not a device"),
    (["-p", "profile=paper"], "-p profile=paper contradicts --profile smoke"),
    (["--only", ""], "--only got an empty name"),
])
def test_impossible_settings_are_refused_before_any_work(extra, needle, tmp_path, capsys):
    import torch
    if "device=cuda" in extra and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    argv = ["reproduce", "--profile", "smoke", "--out", str(tmp_path / "out")] + (
        extra if "--only" in extra else ["--only", "03"] + extra)
    assert cli.main(argv) == 2                                  # not a dry run: it would run if it passed
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()                      # nothing started, nothing written


def test_the_same_profile_twice_is_fine(capsys):
    assert cli.main(["reproduce", "--profile", "smoke", "--only", "03", "-p", "profile=smoke", "--dry-run"]) == 0


@pytest.mark.parametrize("var,value,needle", [
    ("BIASLAB_CACHE", "/dev/null/cache", "/dev/null is not a folder"),
    ("BIASLAB_SCRATCH", "/dev/null/scratch", "/dev/null is not a folder"),
    ("BIASLAB_RAW_DIR", "/dev/null/raw", "/dev/null is not a folder"),
    ("BIASLAB_DATA_MIRROR", "/no/such/mirror", "does not exist"),
    ("BIASLAB_OUTPUTS", "", "set but empty"),
])
def test_unusable_biaslab_paths_are_named(var, value, needle, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(var, value)
    assert cli.main(["reproduce", "--profile", "smoke", "--only", "03", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert var in err and needle in err and len(err.splitlines()) == 1, err


def test_check_env_paths_accepts_folders_and_creatable_ones(tmp_path):
    preflight.check_env_paths({"BIASLAB_CACHE": str(tmp_path / "new" / "cache"), "BIASLAB_SCRATCH": str(tmp_path)})
