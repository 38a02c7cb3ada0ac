"""A persistent score cache: one SQLite file per model, one row per scored item (docs/models.md, "Model identity and
the score cache").

Keys are sha256 digests of (method, its settings, the input item); the file is chosen by :func:`model_key`: the
sha256 of weights, tokenizer and every file the loader read, dtype, the precision the weights were rounded to, device
type and kind, :data:`ENGINE_VERSION` and the torch and transformers versions, so different numerics never share
scores (an upgrade or an engine fix starts a new file on purpose).

Each row stores its JSON value with a checksum of key and value: a row that fails it is recomputed, never trusted. A
damaged file (``PRAGMA quick_check`` on open, or replaced under a running process) is moved aside with one warning and
the run carries on with a fresh one. A file this process may not write (read-only, another user's, a full disk) is
*used read-only*: new scores stay in memory, one warning names the file and the fix; lock contention is not damage
(:meth:`_move_aside`). Rows are committed per batch, so a killed run loses at most the batch in flight. Resumed values
are not bit-identical: a value depends on its batch's make-up (padding, packing, summation order), by up to ~1e-4 in
log-probability on the embedded models; a fresh run with the same cache contents and settings is bit-identical.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

log = logging.getLogger(__name__)

#: Bump when the meaning of cached values changes; old entries are then simply not found.
CACHE_VERSION = 1
#: Bump after any change to the scoring engine's numerics (it is part of the cache file's key).
ENGINE_VERSION = "2"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
                          ).hexdigest()


def _library_versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version
    out: dict[str, str | None] = dict.fromkeys(("torch", "transformers"))
    for pkg in out:
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    return out


def model_key(fingerprint: dict) -> str | None:
    """What identifies a model's numbers: weights, tokenizer, every file the loader read, dtype, rounding of the
    weights, device type, kind, engine and library versions.

    None when the weights are unknown (``weights_sha256`` missing): such a model cannot share a persistent cache.
    """
    if not fingerprint.get("weights_sha256"):
        return None
    dev = str(fingerprint.get("device", "cpu")).split(":")[0]
    ident = {k: fingerprint.get(k) for k in ("weights_sha256", "tokenizer_sha256", "dtype", "kind")}
    if fingerprint.get("files_sha256"):     # every file the loader read: config, generation config, tokenizer, ...
        ident["files_sha256"] = fingerprint["files_sha256"]
    if fingerprint.get("weights_rounded_to"):   # float32 compute on rounded weights: not the float32 model's scores
        ident["weights_rounded_to"] = fingerprint["weights_rounded_to"]
    return _digest(ident | {"device": dev, "engine": ENGINE_VERSION} | _library_versions())[:20]


class ScoreCache:
    """Get and put JSON values by (method, settings, item) for one model."""

    def __init__(self, folder: str | Path, fingerprint: dict):
        mk = model_key(fingerprint)
        if mk is None:
            raise ValueError("the model fingerprint has no weights_sha256, so its scores cannot be cached")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(fingerprint.get("name", "model")))[:60]
        self.path = Path(folder) / f"{name}-{mk}.sqlite"
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None
        self.read_only: str | None = None           # why this file is only read (None: read and written)
        self._overlay: dict[str, Any] = {}          # values scored while read-only: kept for the run
        why = self._not_writable()
        if why:
            self._use_read_only(why)
        else:
            self._conn = self._open()

    # ------------------------------------------------------------------------------------ permissions ---
    def _not_writable(self) -> str | None:
        """Why this process must not write the file (or create it), or None. Root passes every permission check,
        so ownership is checked too: writing another user's file would leave -wal/-shm files that user cannot use."""
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return f"its folder cannot be created ({_os_error(exc)})"
        if self.path.exists():
            st = self.path.stat()
            if st.st_uid != os.geteuid():
                return f"it belongs to another user (uid {st.st_uid})"
            if not os.access(self.path, os.W_OK):
                return "it is read-only" + (" (read-only file system)" if _read_only_fs(folder) else "")
        if not os.access(folder, os.W_OK):
            return ("its folder is on a read-only file system" if _read_only_fs(folder)
                    else "its folder is not writable")
        return None

    def _use_read_only(self, why: str) -> None:
        """Read what the file holds, write nothing (never move it): one warning with the fix."""
        self.read_only = why
        self._close()
        if self.path.exists():
            for uri in (f"file:{quote(str(self.path))}?mode=ro", f"file:{quote(str(self.path))}?immutable=1"):
                conn = None
                try:
                    conn = sqlite3.connect(uri, uri=True, timeout=60)
                    conn.execute("SELECT count(*) FROM scores").fetchone()
                    self._conn = conn
                    break
                except sqlite3.Error:
                    if conn is not None:
                        conn.close()
        state = ("Its scores are read" if self._conn is not None else "It does not exist yet" if not
                 self.path.exists() else "It could not be read either")
        log.warning("score cache %s is used read-only: %s. %s; new scores are kept in memory for this run only. To "
                    "keep them, point BIASLAB_CACHE at a folder you can write (or run as the file's owner).",
                    self.path, why, state)

    # ----------------------------------------------------------------------------------------- recovery ---
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                         "checksum TEXT NOT NULL, method TEXT, created REAL)")
            problems = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("quick_check: " + "; ".join(problems[:3]))
            self._inode = os.stat(self.path).st_ino
            return conn
        except BaseException:
            conn.close()
            raise

    def _open(self) -> sqlite3.Connection | None:
        try:
            return self._connect()
        except sqlite3.Error as exc:
            self._move_aside(exc)
            return self._conn if self.read_only else self._connect()     # read-only: the connection it opened

    def _move_aside(self, exc: BaseException) -> None:
        """Close the connection and rename the file (and its WAL) aside, with one warning naming both.

        Not damage, so never moved: a lock held by another process past the 60 s timeout (contention: the error names
        the file), and a file this process may not write (a permission or read-only error: used read-only)."""
        if isinstance(exc, sqlite3.OperationalError) and any(w in str(exc).lower() for w in ("locked", "busy")):
            raise RuntimeError(f"score cache {self.path} stayed locked by another process for 60 s ({exc}); "
                               "wait for the other run or point BIASLAB_CACHE elsewhere") from exc
        why = (self._not_writable() or (f"SQLite could not write it ({exc})" if _is_permission(exc) else None)
               or self._disk_full(exc))
        if why:
            self._use_read_only(why)
            return
        self._close()
        bad = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        moved = False
        try:
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(self.path) + suffix)
                if p.exists():
                    os.replace(p, Path(str(bad) + suffix))
                    moved = moved or suffix == ""
        except OSError as err:          # e.g. the folder became read-only: keep the file, read nothing from it
            self._use_read_only(f"it failed ({type(exc).__name__}: {exc}) and could not be moved aside "
                                f"({_os_error(err)})")
            return
        where = f"moved aside to {bad}" if moved else "the file was gone"
        log.warning("score cache %s failed (%s: %s); %s; continuing with a fresh cache file (values are "
                    "recomputed)", self.path, type(exc).__name__, exc, where)

    def _disk_full(self, exc: BaseException) -> str | None:
        """A full disk (or quota) named as such — not damage: the file is kept and used read-only, never moved aside
        and recomputed (which would need the space the disk lacks)."""
        from ..files.storage import KINDS, errno_of, human_size
        code = getattr(exc, "sqlite_errorcode", None)
        full = code == sqlite3.SQLITE_FULL or "disk is full" in str(exc) or errno_of(exc) in (errno.ENOSPC,
                                                                                               errno.EDQUOT)
        try:
            du = shutil.disk_usage(self.path.parent)
        except OSError:
            du = None
        if not full and not ("disk i/o error" in str(exc).lower() and du is not None and du.free < 1 << 20):
            return None
        free = f"{human_size(du.free)} free of {human_size(du.total)}" if du else "free space unknown"
        return (f"{KINDS[errno.ENOSPC]}: the disk holding it has no space left ({free}; SQLite: {exc}). Fix: free "
                "space there, or point BIASLAB_CACHE at a folder on a larger disk")

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _recover(self, exc: BaseException) -> None:
        self._move_aside(exc)
        if not self.read_only:
            self._conn = self._connect()

    def _check_file(self) -> None:
        """A file deleted or replaced under this process: reopen (SQLite would go on writing to the lost inode)."""
        if self.read_only:
            return
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = None
        if ino != self._inode:
            self._recover(sqlite3.OperationalError("the cache file was deleted or replaced during the run"))

    # -------------------------------------------------------------------------------------------- keys ---
    @staticmethod
    def key(method: str, settings: dict, item: Any) -> str:
        return _digest([CACHE_VERSION, method, settings, item])

    @staticmethod
    def _checksum(key: str, value: str) -> str:
        return hashlib.sha256((key + "\0" + value).encode()).hexdigest()[:32]

    # ------------------------------------------------------------------------------------------- access ---
    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(dict.fromkeys(keys))
        if self.read_only:
            found = {}
            if self._conn is not None:
                try:
                    found = self._get_many(keys, delete_bad=False)
                except sqlite3.Error as exc:
                    log.warning("score cache %s (read-only) could not be read (%s); its scores are recomputed",
                                self.path, exc)
                    self._close()
            return found | {k: self._overlay[k] for k in keys if k in self._overlay}
        try:
            self._check_file()
            return self._get_many(keys)
        except sqlite3.Error as exc:
            self._recover(exc)
            return self.get_many(keys) if self.read_only else {}

    def _get_many(self, keys: list[str], delete_bad: bool = True) -> dict[str, Any]:
        found: dict[str, Any] = {}
        bad: list[str] = []
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            q = f"SELECT key, value, checksum FROM scores WHERE key IN ({','.join('?' * len(part))})"
            for key, value, checksum in self._conn.execute(q, part):
                if not isinstance(value, str) or checksum != self._checksum(key, value):
                    bad.append(key)
                    continue
                try:
                    found[key] = json.loads(value)
                except ValueError:
                    bad.append(key)
        if bad:
            log.warning("score cache %s: %d corrupt entries ignored and will be recomputed", self.path, len(bad))
        if bad and delete_bad:
            with self._conn:
                self._conn.executemany("DELETE FROM scores WHERE key = ?", [(k,) for k in bad])
        return found

    def put_many(self, items: dict[str, Any], method: str = "") -> None:
        if self.read_only:
            self._overlay.update(items)
            return
        now = time.time()
        texts = {key: json.dumps(value, ensure_ascii=False, allow_nan=True) for key, value in items.items()}
        rows = [(key, text, self._checksum(key, text), method, now) for key, text in texts.items()]
        for attempt in range(2):
            try:
                self._check_file()
                with self._conn:   # one transaction: all of the batch or nothing
                    self._conn.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?)", rows)
                return
            except sqlite3.Error as exc:
                if attempt:
                    log.warning("score cache %s: could not store %d values (%s); they stay uncached",
                                self.path, len(rows), exc)
                    return
                self._recover(exc)
                if self.read_only:
                    self._overlay.update(items)
                    return

    def __len__(self) -> int:
        if self.read_only:
            with contextlib.suppress(sqlite3.Error):
                if self._conn is not None:
                    return self._conn.execute("SELECT count(*) FROM scores").fetchone()[0] + len(self._overlay)
            return len(self._overlay)
        try:
            return self._conn.execute("SELECT count(*) FROM scores").fetchone()[0]
        except sqlite3.Error as exc:
            self._recover(exc)
            return 0

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _os_error(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    return f"{name}: {exc.strerror or exc}" if name else str(exc)


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _is_permission(exc: BaseException) -> bool:
    """A SQLite error that means 'may not write' rather than 'damaged'."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and any(w in text for w in (
        "readonly", "read-only", "unable to open database file", "permission denied"))

