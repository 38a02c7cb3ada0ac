"""File-system errors named as what they are, writability probes and the umask.

A run that fails on a full disk, a read-only file system or a permission must say so — with the path and the fix —
instead of a raw traceback or a misleading follow-on error. :func:`storage_problem` turns an ``OSError`` (or an
error a kernel reported as text, e.g. papermill's ``OSError: [Errno 28] ...``) into that sentence;
:func:`probe_writable` checks a folder before any work by creating (and removing) a file in it;
:func:`atomic_write` (and :func:`atomic_write_text`) writes a file so that no reader ever sees half of it.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

#: errno -> what it is
KINDS = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only file system",
         errno.EACCES: "permission denied", errno.EPERM: "operation not permitted"}


class StorageError(OSError):
    """A folder or file cannot be written: full, read-only, not permitted, or not a folder. The message names the
    path and the fix."""


def umask_mode() -> int:
    """The mode a new regular file gets under the current umask (0o644 with the usual 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: Path, write: Callable[[Path], None], suffix: str = ".tmp") -> None:
    """``write(tmp)`` into a temporary file beside ``path`` (hidden, ending in ``suffix``: a writer that appends its
    own extension needs it), then rename it into place, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) by :func:`atomic_write`."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def human_size(n: float) -> str:
    """``1.5 kB``, ``2.7 MB``, ``3.0 GB`` (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000


def folder_size(path: Path) -> int:
    """Bytes under ``path`` (0 when it does not exist)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    total = 0
    for p in path.rglob("*") if path.exists() else ():
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def nearest_existing(path: str | Path) -> Path:
    """``path`` or the nearest folder above it that exists (where it would be created). A folder this user may not
    look into counts as existing (the write then fails with a permission error that names it)."""
    path = Path(path)
    while path != path.parent:
        try:
            path.stat()
            return path
        except PermissionError:
            return path
        except OSError:
            path = path.parent
    return path


def errno_of(exc: BaseException) -> int | None:
    """The errno of an OSError, or of an error whose text carries one (``[Errno 28] No space left on device``)."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    text = str(exc) + " " + str(getattr(exc, "evalue", ""))
    m = re.search(r"\[Errno (\d+)\]", text)
    if m:
        return int(m.group(1))
    for code, words in ((errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system"),
                        (errno.EDQUOT, "Disk quota exceeded")):
        if words in text:
            return code
    return None


def storage_problem(exc: BaseException, path: str | Path | None = None, last_good_bytes: int | None = None,
                    written_bytes: int | None = None) -> str | None:
    """A one-line sentence naming a full disk, a read-only file system or a permission error, the path and the
    fix; None for any other error. ``path``: where the run was writing (used when the error names none);
    ``last_good_bytes``: the size of the last good outputs there (what a complete run wrote last time);
    ``written_bytes``: what this run had written when it failed. What a failed run would have needed in all is not
    known, so neither is called that."""
    code = errno_of(exc)
    if code not in KINDS:
        return None
    where = getattr(exc, "filename", None) or path
    m = re.search(r"\[Errno \d+\] [^:]+: '([^']+)'", str(exc))
    if where is None and m:
        where = m.group(1)
    where = Path(where) if where is not None else None
    if code in (errno.ENOSPC, errno.EDQUOT):
        folder = nearest_existing(where.parent if where is not None else Path.cwd())
        try:
            du = shutil.disk_usage(folder)
            free = f"{human_size(du.free)} free of {human_size(du.total)}"
        except OSError:
            free = "free space unknown"
        sizes = [f"the last good outputs here take {human_size(last_good_bytes)}" if last_good_bytes else "",
                 f"this run had written {human_size(written_bytes)} when it failed" if written_bytes else ""]
        need = "".join(f"; {t}" for t in sizes if t)
        return (f"{KINDS[code]}: no space left to write {where} ({free} on the device holding {folder}{need}). "
                f"Fix: free space there, or write elsewhere (--out DIR, or set BIASLAB_SCRATCH / BIASLAB_OUTPUTS / "
                f"BIASLAB_CACHE to a folder on a larger disk).")
    if code == errno.EROFS:
        return (f"{KINDS[code]}: {where} is on a read-only file system. Fix: write elsewhere (--out DIR, or set "
                "BIASLAB_SCRATCH / BIASLAB_OUTPUTS / BIASLAB_CACHE to a writable folder), or remount it read-write.")
    owner = ""
    if where is not None:
        try:
            st = nearest_existing(where).stat()
            owner = f" (owned by uid {st.st_uid}, mode {oct(st.st_mode & 0o777)}; you are uid {os.geteuid()})"
        except OSError:
            pass
    return (f"{KINDS[code]}: cannot write {where}{owner}. Fix: make it writable for you (chmod / chown), or write "
            "elsewhere (--out DIR, or set BIASLAB_SCRATCH / BIASLAB_OUTPUTS / BIASLAB_CACHE to a folder you own).")


def probe_writable(folder: str | Path, what: str = "folder") -> None:
    """Check that files can be written into ``folder`` — or, when it does not exist yet, into the nearest folder
    above it, which is where it will be created — by creating a file there (removed at once); raise
    :class:`StorageError` naming the problem and the fix: not a folder (a file, or below a file such as
    ``/dev/null/x``), read-only file system, permission denied, disk full."""
    folder = Path(folder)
    above = nearest_existing(folder)
    try:
        is_dir = above.is_dir()
    except PermissionError as exc:
        raise StorageError(f"{what} {folder} cannot be written: " + storage_problem(exc, above)) from exc
    if not is_dir:
        raise StorageError(f"{what} {folder} cannot be used: {above} is not a folder"
                           + (" (it is a file)" if above.is_file() else "") + ". Fix: name a folder.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".biaslab-probe-", dir=above)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:          # named by the folder, not by the probe file's random name
        bare = OSError(exc.errno, exc.strerror)
        raise StorageError(f"{what} {folder} cannot be written: "
                           + (storage_problem(bare, above) or f"{type(exc).__name__}: {exc}")) from exc
