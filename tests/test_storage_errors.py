"""A full disk, a read-only file system and a permission error are named as what they are, with the path and the fix.

Real faults where the machine allows it: a private mount namespace (``unshare -m``, as root) with a tiny tmpfs for a
full disk and a read-only bind mount, and an unprivileged user (``setpriv``) for a permission error; the sentences
themselves are checked on constructed errors everywhere.
"""

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import biaslab
from biaslab import cli
from biaslab.files import storage
from test_runner import _toy_notebook, toy_script

NS_OK = shutil.which("unshare") is not None and subprocess.run(
    ["unshare", "-m", "true"], capture_output=True).returncode == 0
needs_ns = pytest.mark.skipif(not NS_OK, reason="no private mount namespace here (unshare -m needs root)")


def _in_namespace(mounts: str, argv: list[str], env=None, timeout=300) -> subprocess.CompletedProcess:
    """Run ``argv`` in a private mount namespace after the shell commands ``mounts``."""
    cmd = f"{mounts} && exec \"$@\""
    return subprocess.run(["unshare", "-m", "sh", "-c", cmd, "sh", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_sentences_name_each_error_with_the_path_and_the_fix(tmp_path):
    full = storage.storage_problem(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.csv")),
                                   last_good_bytes=3_000_000, written_bytes=1_500_000)
    assert full.startswith("disk full") and str(tmp_path / "x.csv") in full and "free of" in full
    assert "the last good outputs here take 3.0 MB" in full and "this run had written 1.5 MB" in full
    assert "--out DIR" in full
    ro = storage.storage_problem(OSError(errno.EROFS, "Read-only file system", "/mnt/ro/out"))
    assert ro.startswith("read-only file system") and "/mnt/ro/out" in ro and "writable folder" in ro
    denied = storage.storage_problem(PermissionError(errno.EACCES, "Permission denied", str(tmp_path)))
    assert denied.startswith("permission denied") and str(tmp_path) in denied and "chmod" in denied
    # as a kernel reports it (papermill's PapermillExecutionError carries the text, not the errno)
    kernel = RuntimeError("OSError: [Errno 28] No space left on device: '/data/out/tables/big.csv'")
    problem = storage.storage_problem(kernel)
    assert problem.startswith("disk full") and "/data/out/tables/big.csv" in problem
    assert storage.storage_problem(ValueError("Notebook does not appear to be JSON")) is None


@pytest.mark.parametrize("make", ["file", "below_a_file"])
def test_out_that_is_a_file_is_one_line_exit_2(tmp_path, make, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    out = f if make == "file" else f / "sub"
    assert cli.main(["reproduce", "--profile", "smoke", "--only", "03", "--out", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "is not a folder" in err and str(f) in err


@needs_ns
def test_out_on_a_read_only_file_system_is_one_line_exit_2(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    r = _in_namespace(f"mount --bind {ro} {ro} && mount -o remount,ro,bind {ro} {ro}",
                      [sys.executable, "-m", "biaslab.cli", "reproduce", "--profile", "smoke", "--only", "03",
                       "--out", str(ro / "out"), "--dry-run"])
    assert r.returncode == 2, r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "read-only file system" in err[0] and str(ro) in err[0], r.stderr
    assert ".biaslab-probe" not in err[0], err[0]          # the folder is named, not the probe file


def _others_can_read(path: Path) -> bool:
    """Whether an unprivileged user can import from ``path``: every folder above it searchable by others and the
    folder itself readable (a checkout under a 0700 folder, as ``mktemp -d`` makes, is not)."""
    path = path.resolve()
    return bool(path.stat().st_mode & stat.S_IROTH) and all(p.stat().st_mode & stat.S_IXOTH
                                                            for p in [path, *path.parents])


def test_out_without_permission_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    """As an unprivileged user where possible (root passes every permission check), else through the same code
    path with the error injected where the probe creates its file."""
    if os.geteuid() == 0 and shutil.which("setpriv") and _others_can_read(Path(biaslab.__file__).parent):
        import tempfile
        base = Path(tempfile.mkdtemp(prefix="biaslab-eacces-", dir="/tmp"))     # pytest's tmp_path is 0700
        try:
            os.chmod(base, 0o755)
            locked = base / "locked"
            locked.mkdir(mode=0o755)                # root's folder: others may read it, not write it
            (base / "cache").mkdir(mode=0o777)
            env = dict(os.environ, BIASLAB_CACHE=str(base / "cache"), HOME=str(base))
            r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                sys.executable, "-m", "biaslab.cli", "reproduce", "--profile", "smoke", "--only",
                                "03", "--out", str(locked / "out"), "--dry-run"], capture_output=True, text=True,
                               env=env, timeout=120)
        finally:
            shutil.rmtree(base)
        assert r.returncode == 2, r.stderr[-2000:]
        err = r.stderr.strip().splitlines()
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        import tempfile
        real = tempfile.mkstemp

        def denied(*a, dir=None, **k):
            if dir is not None and str(dir).startswith(str(locked)):
                raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, ".probe"))
            return real(*a, dir=dir, **k)
        monkeypatch.setattr(storage.tempfile, "mkstemp", denied)
        assert cli.main(["reproduce", "--profile", "smoke", "--only", "03", "--out", str(locked / "out"),
                         "--dry-run"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "permission denied" in err[0] and str(locked) in err[0], err


BIG_TABLE = """
    from biaslab.report.outputs import OutputDir
    import pandas as pd
    out = OutputDir(output_dir)
    out.table(pd.DataFrame({'v': [value]}), 'v')
    if value == 8:
        out.table(pd.DataFrame({'x': range(400000)}), 'big')      # about 2.7 MB
    """
BIG_OUTPUT = """
    from biaslab.report.outputs import OutputDir
    import pandas as pd
    out = OutputDir(output_dir)
    out.table(pd.DataFrame({'v': [value]}), 'v')
    if value == 8:
        print('x' * 3_000_000)                                      # the executed notebook itself does not fit
    """


@needs_ns
@pytest.mark.parametrize("body", [BIG_TABLE, BIG_OUTPUT], ids=["kernel_writes_a_table", "papermill_writes_the_notebook"])
def test_disk_full_is_named_with_the_folder_and_the_space(tmp_path, body):
    """Bug 4: ENOSPC used to surface as "Notebook does not appear to be JSON" (exit 2, no MANIFEST.failed.json)."""
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _toy_notebook(nbdir / "00_toy.ipynb", textwrap.dedent(body))
    disk = tmp_path / "disk"
    disk.mkdir()
    result = tmp_path / "result.json"
    script = toy_script(nbdir, f"""
        out = Path({str(disk)!r})
        rc = [execute.reproduce('smoke', overrides={{'value': v}}, outputs_dir=out, html=False) for v in (7, 8)]
        folder = out / '00_toy'
        failed = folder / 'MANIFEST.failed.json'
        json.dump({{'rc': rc, 'failed': json.loads(failed.read_text()) if failed.exists() else None,
                    'v': (folder / 'tables/v.csv').read_text(),
                    'manifest': json.loads((folder / 'MANIFEST.json').read_text())}}, open({str(result)!r}, 'w'))
        """)
    r = _in_namespace(f"mount -t tmpfs -o size=1m tmpfs {disk}", [sys.executable, "-c", script])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    res = json.loads(result.read_text())
    assert res["rc"] == [0, 1], res
    assert res["v"] == "v\n7\n" and res["manifest"]["parameters"]["value"] == 7       # the last good outputs
    f = res["failed"]
    assert f is not None and f["status"] == "failed" and f["last_good_outputs"] == "kept untouched"
    first = f["error"].splitlines()[0]
    # the folder (repository-relative, as every path in a record) and the space there
    assert first.startswith("disk full") and "disk/00_toy" in first and "free of 1.0 MB" in first, first
    assert "Notebook does not appear to be JSON" not in r.stderr
    assert "disk full" in r.stdout                 # and the terminal says so (the run's error line)
