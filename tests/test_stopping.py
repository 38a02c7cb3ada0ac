"""SIGINT (Ctrl-C) and SIGTERM stop every lane and kernel within seconds, keep the last good outputs, record the
interrupted runs and exit with 128 + the signal. Tested with a real signal on a real ``biaslab reproduce``."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from biaslab.run import execute
from test_runner import GOOD, _snapshot, _toy_notebook, toy, toy_script  # noqa: F401 - the toy-notebook fixture

SLEEPER = ("import os, time, pathlib\n"
           "pathlib.Path({pidfile!r}).write_text(str(os.getpid()))\n"
           "time.sleep(300)\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                   # a zombie not yet reaped is not running
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum,jobs", [(signal.SIGINT, 2), (signal.SIGTERM, 1)], ids=["SIGINT-2-lanes",
                                                                                        "SIGTERM-1-lane"])
def test_a_signal_stops_every_lane_and_kernel_and_keeps_the_last_good_outputs(toy, tmp_path, signum, jobs):  # noqa: F811
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    good = _snapshot(outdir / "00_toy")
    pidfiles = {nb: tmp_path / f"{nb}.pid" for nb in ("00_toy", "00_two")}
    for nb, pf in pidfiles.items():
        _toy_notebook(nbdir / f"{nb}.ipynb", SLEEPER.format(pidfile=str(pf)))
    _toy_notebook(nbdir / "00_last.ipynb", GOOD)
    script = toy_script(nbdir, "profiles.READS_OUTPUTS_ONLY = {'00_last'}\n"
                        f"sys.exit(execute.reproduce('smoke', overrides={{'value': 8}}, "
                        f"outputs_dir=Path({str(outdir)!r}), html=False, jobs={jobs}))\n",
                        notebooks=("00_toy", "00_two", "00_last"))
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wanted = list(pidfiles.values()) if jobs == 2 else [pidfiles["00_toy"]]
        deadline = time.time() + 180
        while not all(p.exists() for p in wanted) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert all(p.exists() for p in wanted), "the kernels never started"
        kernels = [int(p.read_text()) for p in wanted]
        t0 = time.time()
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=60)
        elapsed = time.time() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signum, out[-3000:]
    print(f"stopped {len(kernels)} kernel(s) and exited {proc.returncode} in {elapsed:.1f} s")
    assert elapsed < 20, f"took {elapsed:.1f} s to stop"
    time.sleep(0.5)
    assert not [k for k in kernels if _alive(k)], "a kernel outlived the run"
    # the last good outputs stay; the interrupted run says so
    after = _snapshot(outdir / "00_toy")
    failed = json.loads(after.pop(Path("MANIFEST.failed.json")))
    after.pop(Path("00_toy.failed.ipynb"), None)
    assert after == good
    assert failed["status"] == "interrupted" and signal.Signals(signum).name in failed["error"]
    assert failed["last_good_outputs"] == "kept untouched"
    if jobs == 2:
        two = json.loads((outdir / "00_two/MANIFEST.failed.json").read_text())
        assert two["status"] == "interrupted" and two["last_good_outputs"].startswith("none")
    else:
        assert not (outdir / "00_two").exists()              # never started
    assert not (outdir / "00_last").exists()                 # never started: the run stopped first
    assert "not started" in out and not list(outdir.glob("**/.*staging*"))


def test_a_stop_after_the_kernel_finished_publishes_nothing(toy, monkeypatch):  # noqa: F811
    """A signal that lands after the notebook finished (while the runner cleans the notebook or renders its report)
    must not publish the run and report "ok": the last good outputs stay and the run is recorded as interrupted."""
    from biaslab.run import stopping
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    good = _snapshot(outdir / "00_toy")
    real = execute.clean_executed

    def clean_then_signal(*a, **k):          # the signal arrives while the finished notebook is being cleaned
        out = real(*a, **k)
        stopping.stop(signal.SIGINT)
        return out
    monkeypatch.setattr(execute, "clean_executed", clean_then_signal)
    try:
        rc = execute.reproduce("smoke", overrides={"value": 8}, outputs_dir=outdir, html=False)
    finally:
        stopping.reset()
    assert rc == 128 + signal.SIGINT
    after = _snapshot(outdir / "00_toy")
    failed = json.loads(after.pop(Path("MANIFEST.failed.json")))
    after.pop(Path("00_toy.failed.ipynb"), None)
    assert after == good
    assert failed["status"] == "interrupted" and "not published" in failed["error"]
    assert failed["last_good_outputs"] == "kept untouched"


def test_a_second_ctrl_c_exits_at_once(toy, tmp_path):  # noqa: F811
    """The first Ctrl-C asks for an orderly stop, which waits for the lane to finish what it is doing (here a
    post-processing step that would take ten minutes, as the runner's quadratic regex once did). The second one
    exits at once: before, it raised KeyboardInterrupt in the main thread, which then waited for the lane anyway."""
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    ready = tmp_path / "post-processing"
    script = toy_script(nbdir, "import time\nreal = execute.clean_executed\n"
                        "def slow(*a, **k):\n"
                        f"    Path({str(ready)!r}).write_text('1')\n"
                        "    time.sleep(600)\n"
                        "    return real(*a, **k)\n"
                        "execute.clean_executed = slow\n"
                        f"sys.exit(execute.reproduce('smoke', outputs_dir=Path({str(outdir)!r}), html=False))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 180
        while not ready.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ready.exists(), "the run never reached its post-processing"
        proc.send_signal(signal.SIGINT)
        for line in proc.stdout:                                # the orderly stop has begun
            if "stopping every notebook" in line:
                break
        assert proc.poll() is None                              # ... and waits for the lane
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT and "second SIGINT: aborted at once" in out, out[-2000:]
    assert not (outdir / "00_toy/MANIFEST.json").exists()       # nothing was published
