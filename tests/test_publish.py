"""Publishing a run is crash-safe: a kill at every step of the swap leaves the last good or the new outputs, never
neither; the sweeper restores, never deletes, the last good folder of an interrupted swap."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from biaslab.files import integrity
from biaslab.run import publish, execute
from test_runner import GOOD, _snapshot, _toy_notebook, toy, toy_script  # noqa: F401 - the toy-notebook fixture


def _run_folder(folder: Path, value: str) -> Path:
    """A complete run folder (tables, figures, executed notebook, MANIFEST listing their hashes)."""
    (folder / "tables").mkdir(parents=True)
    (folder / "figures").mkdir()
    (folder / "tables/v.csv").write_text(f"v\n{value}\n")
    (folder / "figures/f.png").write_bytes(value.encode() * 100)
    (folder / "00_toy.ipynb").write_text(json.dumps({"cells": [], "value": value}))
    (folder / "MANIFEST.json").write_text(json.dumps({"status": "ok", "value": value,
                                                      "files": integrity.file_hashes(folder)}))
    return folder


def _state(final: Path) -> str | None:
    """Which run's outputs sit at ``final`` ("good" / "new"), after checking they verify; None if nothing does."""
    if not final.exists():
        return None
    assert integrity.verify(final).ok, integrity.verify(final).lines()
    return json.loads((final / "MANIFEST.json").read_text())["value"]


def _killed_at(step: str | None, final: Path, partial_rmtree: bool = False) -> int:
    """Fork a child that publishes a new run folder and dies (``os._exit``) right after ``step``."""
    pid = os.fork()
    if pid == 0:                                   # the child: a run that is killed during its publish
        try:
            staging = publish.staging_folder(final)
            _run_folder(staging, "new")

            def hook(name):
                if name == step:
                    if partial_rmtree:         # killed half-way through deleting the old folder
                        old = publish.old_folder(final)
                        shutil.rmtree(old / "tables")
                    os._exit(9)
            publish.HOOK = hook
            if step is None:                   # killed before the swap started (staging complete)
                os._exit(9)
            publish.swap_in(staging, final)
            os._exit(0)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("step", [None, *publish.STEPS])
@pytest.mark.parametrize("had_good", [True, False])
def test_a_kill_at_every_step_of_publish_keeps_good_or_new_outputs(tmp_path, step, had_good):
    final = tmp_path / "out" / "00_toy"
    if had_good:
        _run_folder(tmp_path / "first", "good")
        final.parent.mkdir()
        publish.swap_in(tmp_path / "first", final)
    else:
        final.parent.mkdir()
    assert _killed_at(step, final) == 9
    done = publish.sweep_stale(final)               # what the next run does first
    state = _state(final)
    order = [None, *publish.STEPS]
    before_new = order.index(step) < order.index("moved_in")
    if before_new:
        assert state == ("good" if had_good else None)      # restored, never deleted
        if had_good and step == "set_aside":
            assert any("restored the last good outputs" in d for d in done)
    else:
        assert state == "new"
    assert not list(final.parent.glob(".*")), list(final.parent.glob(".*"))   # nothing left behind
    # and a failed run afterwards records the truth about the outputs it leaves in place
    assert publish.last_good(final) == ("kept untouched" if state else "none (no earlier successful run here)")


def test_a_kill_half_way_through_removing_the_old_folder(tmp_path):
    final = tmp_path / "out" / "00_toy"
    final.parent.mkdir()
    publish.swap_in(_run_folder(tmp_path / "first", "good"), final)
    assert _killed_at("removing_old", final, partial_rmtree=True) == 9
    assert list(final.parent.glob(".00_toy.old-*"))
    publish.sweep_stale(final)
    assert _state(final) == "new" and not list(final.parent.glob(".*"))


def test_the_sweeper_restores_the_old_folder_when_the_one_in_place_does_not_verify(tmp_path):
    final = tmp_path / "out" / "00_toy"
    final.parent.mkdir()
    publish.swap_in(_run_folder(tmp_path / "first", "good"), final)
    assert _killed_at("removing_old", final) == 9
    (final / "tables/v.csv").write_text("v\nedited\n")          # the new folder is damaged
    done = publish.sweep_stale(final)
    assert _state(final) == "good" and any("did not verify" in d for d in done)
    kept = list(final.parent.glob(".00_toy.unverified-*"))
    assert len(kept) == 1 and (kept[0] / "tables/v.csv").read_text() == "v\nedited\n"   # set aside, not deleted


def test_a_folder_that_does_not_verify_after_the_swap_is_rolled_back(tmp_path, monkeypatch):
    final = tmp_path / "out" / "00_toy"
    final.parent.mkdir()
    publish.swap_in(_run_folder(tmp_path / "first", "good"), final)
    staging = _run_folder(publish.staging_folder(final), "new")
    (staging / "tables/v.csv").write_text("v\nchanged after hashing\n")
    with pytest.raises(RuntimeError, match="did not verify"):
        publish.swap_in(staging, final)
    assert _state(final) == "good" and staging.exists()


HOLD_THE_LOCK = """
import json, os, sys
from pathlib import Path
os.getpid = lambda: 1                        # a container's first process: pid 1 in its own pid namespace
from biaslab.files import integrity
from biaslab.run import publish
final = Path({final!r})
with publish.RunLock(final) as lock:
    staging = publish.staging_folder(final, lock.run_id)
    (staging / "tables").mkdir(parents=True)
    (staging / "tables/v.csv").write_text("v\\nA\\n")
    (staging / "MANIFEST.json").write_text(json.dumps({{"value": "A", "parameters": {{"seed": 11}},
                                                        "files": integrity.file_hashes(staging)}}))
    print("ready", flush=True)
    sys.stdin.readline()                      # the test starts run B meanwhile
    publish.swap_in(staging, final)
"""


def test_two_runs_that_are_both_pid_1_cannot_share_a_folder(toy, monkeypatch):  # noqa: F811
    """Two containers (separate pid namespaces: both pid 1, same host name and boot id) write one output folder.
    Before, run B took A's live ``.00_toy.staging-1`` for a killed run's, deleted it and wrote into the same name,
    and A published B's rows under A's MANIFEST. Now A holds the folder's lock: B is refused, naming A, and touches
    nothing; A publishes exactly what A wrote."""
    nbdir, outdir = toy
    final = outdir / "00_toy"
    outdir.mkdir()
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    a = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK.format(final=str(final))], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert a.stdout.readline().strip() == "ready"
        held = json.loads(publish.lock_file(final).read_text())
        assert held["pid"] == 1 and held["host"] and held["run_id"] and "boot_id" in held
        (a_staging,) = outdir.glob(".00_toy.staging-*")
        monkeypatch.setattr(os, "getpid", lambda: 1)                    # run B: pid 1 as well
        assert publish.sweep_stale(final) == []                         # a live run's folders are left alone
        assert execute.reproduce("smoke", overrides={"value": 12}, outputs_dir=outdir, html=False) == 1
        monkeypatch.undo()
        assert (a_staging / "tables/v.csv").read_text() == "v\nA\n"      # A's live folder untouched
        assert not final.exists() and len(list(outdir.glob(".00_toy.staging-*"))) == 1
        a.stdin.write("go\n")
        a.stdin.flush()
        assert a.wait(timeout=60) == 0
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert integrity.verify(final).ok
    assert json.loads((final / "MANIFEST.json").read_text())["value"] == "A"
    assert (final / "tables/v.csv").read_text() == "v\nA\n"
    assert not publish.lock_file(final).exists() and not list(outdir.glob(".*"))


def test_a_second_run_is_refused_naming_the_live_one(tmp_path, capsys, monkeypatch):
    final = tmp_path / "00_toy"
    monkeypatch.setattr(os, "getpid", lambda: 1)
    with publish.RunLock(final, "aaaa"):
        with pytest.raises(publish.FolderBusy, match=r"being written by another run \(host .*pid 1, run_id aaaa"):
            publish.RunLock(final, "bbbb").acquire()
    with publish.RunLock(final, "bbbb"):                                    # released: the next run takes it
        pass


def test_after_a_reboot_a_dead_runs_old_folder_is_restored_though_its_pid_is_alive(tmp_path):
    """A kill between the two renames, then a reboot: the dead run's ``.old-1`` folder names a pid that is alive again
    (pid 1 always is). Before, the sweeper decided by pid and never restored it; now the lock decides."""
    final = tmp_path / "out" / "00_toy"
    _run_folder(final.parent / ".00_toy.old-1", "good")
    done = publish.sweep_stale(final)
    assert _state(final) == "good" and any("restored the last good outputs" in d for d in done)


def test_a_killed_runs_lock_is_taken_over(tmp_path):
    final = tmp_path / "out" / "00_toy"
    final.parent.mkdir()
    script = (f"import os\nfrom pathlib import Path\nfrom biaslab.run import publish\n"
              f"publish.RunLock(Path({str(final)!r})).acquire()\nos._exit(9)\n")
    assert subprocess.run([sys.executable, "-c", script]).returncode == 9
    assert publish.lock_file(final).exists()                              # left behind, no longer locked
    with publish.RunLock(final):
        pass
    assert not publish.lock_file(final).exists()


def test_killed_between_the_two_renames_then_a_failed_run_reports_the_truth(toy, monkeypatch):  # noqa: F811
    """Bug 1 as reported: SIGKILL between ``final -> .old`` and ``staging -> final``; the next run fails. Before, the
    sweeper deleted the last good outputs and the record said there were none."""
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    good = _snapshot(outdir / "00_toy")
    script = toy_script(nbdir, "publish.HOOK = lambda step: os.kill(os.getpid(), 9) if step == 'set_aside' else None\n"
                        f"execute.reproduce('smoke', overrides={{'value': 8}}, outputs_dir=Path({str(outdir)!r}), "
                        "html=False)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (outdir / "00_toy").exists() and list(outdir.glob(".00_toy.old-*"))     # the state the kill left
    _toy_notebook(nbdir / "00_toy.ipynb", "raise RuntimeError('boom')")
    assert execute.reproduce("smoke", overrides={"value": 9}, outputs_dir=outdir, html=False) == 1
    after = _snapshot(outdir / "00_toy")
    failed = json.loads(after.pop(Path("MANIFEST.failed.json")))
    after.pop(Path("00_toy.failed.ipynb"), None)
    assert after == good                                                  # restored byte for byte
    assert failed["last_good_outputs"] == "kept untouched"
    assert any("restored the last good outputs" in n for n in failed["notes"])
    assert not list(outdir.glob(".*"))


def test_a_failed_move_in_puts_the_last_good_outputs_back(tmp_path, monkeypatch):
    """Step 2 raising (e.g. the staging folder vanished, a full disk on another device) must not leave the last good
    outputs set aside as ``.old``: a failed-run record written next would otherwise say there were none."""
    final = tmp_path / "out" / "00_toy"
    final.parent.mkdir()
    publish.swap_in(_run_folder(tmp_path / "first", "good"), final)
    staging = _run_folder(publish.staging_folder(final), "new")
    real = os.replace

    def failing(src, dst):
        if Path(src) == staging:
            raise OSError(28, "No space left on device", str(dst))
        return real(src, dst)
    monkeypatch.setattr(publish.os, "replace", failing)
    with pytest.raises(OSError):
        publish.swap_in(staging, final)
    assert _state(final) == "good" and staging.exists()
    assert not publish.old_folder(final).exists()
    assert publish.last_good(final) == "kept untouched"


def test_a_run_of_other_notebooks_restores_an_interrupted_publish(toy, monkeypatch):  # noqa: F811
    """A publish of notebook B killed between its two renames leaves B's last good outputs as ``.old-PID``; a later
    run of notebook A only (e.g. ``--only 05``, which reads B's tables) must put them back, not leave B missing."""
    nbdir, outdir = toy
    monkeypatch.setattr(execute.profiles, "NOTEBOOKS", {"00_toy": {"": {}}, "00_two": {"": {}}})
    for nb in ("00_toy", "00_two"):
        _toy_notebook(nbdir / f"{nb}.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    two = outdir / "00_two"
    good = _snapshot(two)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    os.replace(two, publish.old_folder(two, dead.pid))        # what a kill between the two renames leaves
    assert execute.reproduce("smoke", only=["00_toy"], overrides={"value": 8}, outputs_dir=outdir, html=False) == 0
    assert _snapshot(two) == good and not list(outdir.glob(".00_two.old-*"))


def test_without_flock_the_lock_record_decides_conservatively(tmp_path, monkeypatch):
    """A file system without flock: the recorded holder decides. Another host (or container) may be alive: refused;
    this host after a reboot, or this host, boot and pid namespace with no such pid, is dead: taken over."""
    import errno
    import fcntl

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(fcntl, "flock", no_flock)
    final = tmp_path / "00_toy"
    me = publish.holder()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for rec, busy in [({**me, "host": "elsewhere"}, True), ({**me, "pid_namespace": "pid:[1]"}, True),
                      ({**me, "boot_id": "an-earlier-boot"}, False), ({**me, "pid": dead.pid}, False)]:
        publish.lock_file(final).write_text(json.dumps({**rec, "run_id": "theirs"}))
        if busy:
            with pytest.raises(publish.FolderBusy, match="run_id theirs"):
                publish.RunLock(final).acquire()
        else:
            with publish.RunLock(final):
                assert json.loads(publish.lock_file(final).read_text())["run_id"] == publish.RUN_ID
