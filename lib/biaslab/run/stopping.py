"""Stopping a run when asked: SIGINT (Ctrl-C) and SIGTERM stop every lane and every kernel within seconds.

A notebook's kernel runs in its own session (jupyter_client starts it with ``start_new_session``), so Ctrl-C in the
terminal never reaches it, and lane threads would go on running while the main thread waits for them. So
``biaslab reproduce`` runs under :func:`handle_signals`: the first SIGINT or SIGTERM sets :data:`STOP`, kills the
process group of every kernel started through :class:`TrackedKernelManager` (papermill then fails at once with a dead
kernel, and the runner records the run as ``interrupted`` in ``MANIFEST.failed.json``, keeping the last good
outputs) and keeps any new kernel or run from starting. A second signal gives up on the orderly stop at once
(:func:`abort`): every kernel's and tracked process group (:func:`track_group`: the llama.cpp server) is killed and
the process exits with 128 + the signal, waiting for no lane; what it leaves (a staging folder, a lock file) is a dead
run's, which the next run sweeps.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import weakref

from jupyter_client import AsyncKernelManager

log = logging.getLogger(__name__)

#: set once a stop was requested; lanes check it before starting a run
STOP = threading.Event()
_signal: list[int] = []
_kernels: "weakref.WeakSet[TrackedKernelManager]" = weakref.WeakSet()
_lock = threading.RLock()          # re-entrant: the signal handlers run in the main thread, which may hold it
#: other process groups an abort kills (by the pid of their leader)
_groups: set[int] = set()


class Stopped(RuntimeError):
    """A finished run that is not published because a stop was requested meanwhile."""


def requested() -> int | None:
    """The signal that asked this process to stop, or None."""
    return _signal[0] if STOP.is_set() and _signal else None


def _kill_group(pid: int, grace_s: float = 2.0) -> None:
    """SIGTERM the kernel's process group (it and whatever it started), SIGKILL what is left after ``grace_s``."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _pid(km) -> int | None:
    return getattr(getattr(km, "provisioner", None), "pid", None)


class TrackedKernelManager(AsyncKernelManager):
    """papermill's kernel manager, remembered so that :func:`stop` can kill its kernel; a kernel that starts after
    a stop was requested is killed at once."""

    async def start_kernel(self, **kw):
        await super().start_kernel(**kw)
        with _lock:
            _kernels.add(self)
        if STOP.is_set():
            pid = _pid(self)
            if pid:
                threading.Thread(target=_kill_group, args=(pid,), daemon=True).start()


def stop(signum: int = signal.SIGINT) -> None:
    """Request a stop: no new run or kernel starts; every running kernel's process group is killed."""
    if not _signal:
        _signal.append(signum)
    STOP.set()
    with _lock:
        pids = [p for p in (_pid(km) for km in list(_kernels)) if p]
    for pid in pids:        # in threads: the signal handler returns at once, each group gets its grace period
        threading.Thread(target=_kill_group, args=(pid,), daemon=True).start()


def track_group(pid: int, on: bool = True) -> None:
    """Kill the process group led by ``pid`` on :func:`abort` (``on=False``: no longer)."""
    (_groups.add if on else _groups.discard)(pid)


def abort(signum: int) -> None:
    """The second signal: SIGKILL every kernel's and tracked process group now and exit 128 + ``signum`` without
    waiting for lanes, records or clean-up (a lane thread may be in the middle of anything)."""
    with _lock:
        pids = [p for p in (_pid(km) for km in list(_kernels)) if p] + list(_groups)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    # os.write, not print: the main thread may be inside a print to the same stream (a buffered write is not
    # re-entrant, and the handler runs in that thread)
    os.write(1, f"second {signal.Signals(signum).name}: aborted at once ({len(pids)} process group(s) killed; no "
                "records written, the last good outputs are untouched)\n".encode())
    os._exit(128 + signum)


def reset() -> None:
    STOP.clear()
    _signal.clear()


@contextlib.contextmanager
def handle_signals():
    """Within this block (main thread only), SIGINT and SIGTERM call :func:`stop`; a second one calls
    :func:`abort`. Earlier handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()

    def on_signal(signum, frame):
        if STOP.is_set():
            abort(signum)
        STOP.set()      # first: a second signal arriving while this handler writes must abort, not stop again
        name = signal.Signals(signum).name
        os.write(1, f"\n{name}: stopping every notebook and kernel (the last good outputs stay; a second {name} "
                    "aborts at once) ...\n".encode())          # os.write: see abort
        stop(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
