"""Publishing a run folder: one run per folder at a time, and a swap that a kill at any moment cannot turn into a loss
of the last good outputs.

A run holds the folder's lock (:class:`RunLock`: ``<parent>/.<name>.lock``, an exclusive ``flock`` that the kernel
releases when the holder dies, whatever its pid namespace or container; the file records the holder's host, boot id,
pid namespace, pid and run id for the message a second run gets). Its names carry a random run id (:func:`new_run_id`),
never a pid: two runs in separate pid namespaces are both pid 1. The run writes into ``<parent>/.<name>.staging-<id>/``.
Publishing it (:func:`swap_in`) is four steps, each a rename or a deletion, and the folder names themselves are the
journal:

1. ``<name>`` → ``.<name>.old-<id>``            (the last good outputs, set aside, kept)
2. ``.<name>.staging-<id>`` → ``<name>``
3. ``<name>`` is verified against its MANIFEST (:mod:`biaslab.files.integrity`); if it does not verify, step 2 and 1 are
   undone
4. ``.<name>.old-<id>`` is deleted                (only now)

:func:`sweep_stale` (run under the lock, before every run of that folder) reads what a dead run left — under the lock,
every ``.old`` and ``.staging`` folder is a dead run's, whatever pid it names and whether or not the machine rebooted
since: an ``.old`` folder with no ``<name>`` beside it is a swap killed between steps 1 and 2, so it is *restored*
(renamed back), never deleted; an ``.old`` folder beside a ``<name>`` that verifies is a swap killed during step 4 and
is deleted; beside one that does not verify it is restored and the unverified folder set aside. A dead run's staging
folder is deleted (the run did not finish). A folder whose lock a live run holds is left alone. Fault-injection hooks
(:data:`HOOK`) let a test kill the process at every step.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import shutil
import socket
import time
from pathlib import Path
from typing import Callable

from ..files import integrity

log = logging.getLogger(__name__)

#: the steps of :func:`swap_in`, in order; ``HOOK(step)`` is called after each (tests kill the process there)
STEPS = ("set_aside", "moved_in", "verified", "removing_old", "old_removed")
HOOK: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if HOOK is not None:
        HOOK(name)


def new_run_id() -> str:
    """A random run id (48 bits): unique across hosts, containers and pid namespaces, unlike a pid."""
    return secrets.token_hex(6)


#: this process's default run id (a forked child draws its own)
RUN_ID = new_run_id()


def _redraw() -> None:
    global RUN_ID
    RUN_ID = new_run_id()


os.register_at_fork(after_in_child=_redraw)


def staging_folder(final: Path, run_id: str | None = None) -> Path:
    return final.parent / f".{final.name}.staging-{run_id or RUN_ID}"


def old_folder(final: Path, run_id: str | None = None) -> Path:
    return final.parent / f".{final.name}.old-{run_id or RUN_ID}"


def lock_file(final: Path) -> Path:
    return final.parent / f".{final.name}.lock"


class FolderBusy(RuntimeError):
    """Another live run holds the folder's lock (the message names it and the lock file)."""


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def holder() -> dict:
    """Who this process is, as a lock file records it."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {"host": socket.gethostname(), "boot_id": _read("/proc/sys/kernel/random/boot_id"),
            "pid_namespace": pidns, "pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _surely_dead(rec: dict) -> bool:
    """Without ``flock`` (a file system that lacks it): the recorded holder is provably gone — this host after a
    reboot, or this host, boot and pid namespace with no such pid. Anything else (another host or container) may be
    alive."""
    me = holder()
    if rec.get("host") != me["host"] or not rec.get("boot_id"):
        return False
    if rec["boot_id"] != me["boot_id"]:
        return True
    if rec.get("pid_namespace") != me["pid_namespace"] or not me["pid_namespace"]:
        return False
    try:
        os.kill(int(rec.get("pid", -1)), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return False


#: the locks this process holds: resolved folder -> lock
_HELD: dict[str, "RunLock"] = {}


class RunLock:
    """The exclusive lock of one run folder (``.<name>.lock`` beside it), held for a whole run.

    :meth:`acquire` raises :class:`FolderBusy` naming the holder (host, pid, run id, start) when a live run holds it.
    ``flock`` decides: the kernel drops the lock of a dead process, in any pid namespace, so a killed run's lock file
    is taken over; the lock file is removed on :meth:`release`."""

    def __init__(self, final: Path, run_id: str | None = None):
        self.final, self.run_id = Path(final), run_id or RUN_ID
        self.path = lock_file(self.final)
        self._fd: int | None = None

    def _busy(self, rec: dict) -> FolderBusy:
        who = ", ".join(f"{k} {rec[k]}" for k in ("host", "pid", "run_id", "started") if rec.get(k)) or "unknown"
        return FolderBusy(f"{self.final} is being written by another run ({who}); this run was not started and "
                          f"nothing there was touched. Fix: wait for that run, or write elsewhere (--out DIR); if "
                          f"no run is writing there, remove {self.path}")

    def acquire(self) -> "RunLock":
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                rec = _record(fd)
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    os.close(fd)
                    raise self._busy(rec) from exc
                if rec and rec.get("run_id") != self.run_id and not _surely_dead(rec):
                    os.close(fd)                # no flock here: the record decides, conservatively
                    raise self._busy(rec) from exc
            try:                        # the holder may have removed the file as we opened it: lock the one in place
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps({**holder(), "run_id": self.run_id}) + "\n").encode(), 0)
        self._fd = fd
        _HELD[str(self.final.resolve())] = self
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        _HELD.pop(str(self.final.resolve()), None)
        try:
            if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _record(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}


def _verifies(folder: Path) -> bool:
    """A complete run folder: it verifies against its MANIFEST (or has one from before manifests listed hashes)."""
    if not folder.is_dir():
        return False
    v = integrity.verify(folder)
    return v.ok or v.legacy


def sweep_stale(final: Path) -> list[str]:
    """Tidy what dead runs left beside ``final``; returns what was done (also logged as warnings: a restored folder
    changes what the reader sees). Runs under the folder's lock: taken here unless this process holds it; a folder
    whose lock a live run holds is left alone (its ``.old`` and staging folders are that run's)."""
    held = _HELD.get(str(Path(final).resolve()))
    if held is None:
        try:
            with RunLock(final):
                return sweep_stale(final)
        except FolderBusy as exc:
            log.info("left %s alone: %s", final, exc)
            return []
    done = []
    mine = {old_folder(final, held.run_id), staging_folder(final, held.run_id)}
    olds = sorted((p for p in final.parent.glob(f".{final.name}.old-*") if p not in mine),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for old in olds:
        if not final.exists():
            os.replace(old, final)
            done.append(f"restored the last good outputs {final} from {old.name} (a publish was interrupted between "
                        "setting them aside and moving the new run in)")
        elif _verifies(final) or not (old / integrity.MANIFEST).exists():
            shutil.rmtree(old, ignore_errors=True)
            done.append(f"removed {old.name}, the previous outputs of a publish that completed")
        else:
            aside = final.with_name(f".{final.name}.unverified-{held.run_id}")
            os.replace(final, aside)
            os.replace(old, final)
            done.append(f"restored the last good outputs {final} from {old.name}: the folder in its place did not "
                        f"verify against its MANIFEST (kept as {aside.name})")
    for staging in final.parent.glob(f".{final.name}.staging-*"):
        if staging not in mine:
            shutil.rmtree(staging, ignore_errors=True)
            done.append(f"removed {staging.name}, the staging folder of a run that was killed")
    for msg in done:
        log.warning("%s", msg)
    return done


def swap_in(staging: Path, final: Path, run_id: str | None = None) -> None:
    """Replace ``final`` by the complete ``staging`` folder (its MANIFEST written) so that at every moment either the
    last good outputs or the new, verified ones are at ``final`` or recoverable by :func:`sweep_stale`."""
    old = old_folder(final, run_id)
    if old.exists():
        shutil.rmtree(old)
    had_old = final.exists()
    if had_old:
        os.replace(final, old)
    _step("set_aside")
    try:
        os.replace(staging, final)
    except OSError:                     # nothing moved in: the last good outputs go back where they were
        if had_old:
            os.replace(old, final)
        raise
    _step("moved_in")
    check = integrity.verify(final)
    if not check.ok:
        os.replace(final, staging)
        if had_old:
            os.replace(old, final)
        raise RuntimeError(f"the new outputs did not verify after moving them into {final} ({check.summary()}); "
                           "the last good outputs were put back")
    _step("verified")
    _step("removing_old")
    if had_old:
        shutil.rmtree(old)
    _step("old_removed")


def last_good(final: Path) -> str:
    """What a failed run's record says about the outputs it left in place."""
    return "kept untouched" if (final / integrity.MANIFEST).exists() else "none (no earlier successful run here)"
