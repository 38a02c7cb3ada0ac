"""Publishing a run folder: a swap that a kill at any moment cannot turn into a loss of the last good outputs.

A run writes into ``<parent>/.<name>.staging-<pid>/``. Publishing it (:func:`swap_in`) is four steps, each a rename
or a deletion, and the folder names themselves are the journal:

1. ``<name>`` → ``.<name>.old-<pid>``            (the last good outputs, set aside, kept)
2. ``.<name>.staging-<pid>`` → ``<name>``
3. ``<name>`` is verified against its MANIFEST (:mod:`biaslab.integrity`); if it does not verify, step 2 and 1 are
   undone
4. ``.<name>.old-<pid>`` is deleted                (only now)

:func:`sweep_stale` (run before every run of that folder) reads what a killed run left: a dead run's ``.old`` folder
with no ``<name>`` beside it is a swap killed between steps 1 and 2, so it is *restored* (renamed back), never
deleted; an ``.old`` folder beside a ``<name>`` that verifies is a swap killed during step 4 and is deleted; beside
one that does not verify it is restored and the unverified folder set aside. A dead run's staging folder is deleted
(the run did not finish). Fault-injection hooks (:data:`HOOK`) let a test kill the process at every step.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Callable

from . import integrity

log = logging.getLogger(__name__)

#: the steps of :func:`swap_in`, in order; ``HOOK(step)`` is called after each (tests kill the process there)
STEPS = ("set_aside", "moved_in", "verified", "removing_old", "old_removed")
HOOK: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if HOOK is not None:
        HOOK(name)


def staging_folder(final: Path, pid: int | None = None) -> Path:
    return final.parent / f".{final.name}.staging-{pid or os.getpid()}"


def old_folder(final: Path, pid: int | None = None) -> Path:
    return final.parent / f".{final.name}.old-{pid or os.getpid()}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False          # an earlier run of this same process (a reused pid is not a live run of ours)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_of(path: Path) -> int | None:
    try:
        return int(path.name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return None


def _verifies(folder: Path) -> bool:
    """A complete run folder: it verifies against its MANIFEST (or has one from before manifests listed hashes)."""
    if not folder.is_dir():
        return False
    v = integrity.verify(folder)
    return v.ok or v.legacy


def sweep_stale(final: Path) -> list[str]:
    """Tidy what dead runs left beside ``final``; returns what was done (also logged as warnings: a restored folder
    changes what the reader sees)."""
    done = []
    olds = sorted((p for p in final.parent.glob(f".{final.name}.old-*") if not _pid_alive(_pid_of(p) or -1)),
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
            aside = final.with_name(f".{final.name}.unverified-{os.getpid()}")
            os.replace(final, aside)
            os.replace(old, final)
            done.append(f"restored the last good outputs {final} from {old.name}: the folder in its place did not "
                        f"verify against its MANIFEST (kept as {aside.name})")
    for staging in final.parent.glob(f".{final.name}.staging-*"):
        if not _pid_alive(_pid_of(staging) or -1):
            shutil.rmtree(staging, ignore_errors=True)
            done.append(f"removed {staging.name}, the staging folder of a run that was killed")
    for msg in done:
        log.warning("%s", msg)
    return done


def swap_in(staging: Path, final: Path) -> None:
    """Replace ``final`` by the complete ``staging`` folder (its MANIFEST written) so that at every moment either the
    last good outputs or the new, verified ones are at ``final`` or recoverable by :func:`sweep_stale`."""
    old = old_folder(final)
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
