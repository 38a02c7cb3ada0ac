"""A file's sha256, and the one memo that hashes a file again whenever it may have changed.

The one home of file hashing: data sources, every file a model loader opens (weights, config, tokenizer, chat
template) and the result cache all hash through :func:`file_sha256`. Its memo is kept per process and on disk
(``BIASLAB_CACHE/hashes.json``, shared by checkouts, so a large model is hashed once), one entry per file, keyed by
the file's resolved path and checked against its size, mtime, ctime and inode: a file rewritten in place (even with
the same size and a restored mtime: the ctime moves) or replaced (a new inode) is hashed again, with a warning that
says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path

from .. import paths
from .storage import atomic_write_text

log = logging.getLogger(__name__)

#: resolved path -> [size, mtime_ns, ctime_ns, inode, sha256]; loaded from disk on first use
_MEMO: dict[str, list] | None = None
_MEMO_FILE: Path | None = None


def sha256_file(path: str | Path, block: int = 1 << 22) -> str:
    """sha256 of a file's bytes (no memo)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def memo_path() -> Path:
    """Where the memo lives (read at call time: tests and ``BIASLAB_CACHE`` point it elsewhere)."""
    return Path(paths.CACHE_DIR) / "hashes.json"


def _stat_key(st: os.stat_result) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _read_disk(where: Path) -> dict[str, list]:
    try:
        data = json.loads(where.read_text())
    except (OSError, ValueError):
        return {}
    # entries of another layout (an older memo keyed by "path|size|...") are dropped: they are hashed again
    return {k: v for k, v in data.items() if isinstance(v, list) and len(v) == 5} if isinstance(data, dict) else {}


def _memo() -> dict[str, list]:
    global _MEMO, _MEMO_FILE
    where = memo_path()
    if _MEMO is None or _MEMO_FILE != where:
        _MEMO, _MEMO_FILE = _read_disk(where), where
    return _MEMO


def _save(memo: dict[str, list]) -> None:
    """Merge with what other processes wrote, drop entries of files that are gone or changed, write atomically.

    Best effort: a read-only or missing cache folder only means files are hashed again next time."""
    where = memo_path()
    merged = {**_read_disk(where), **memo}
    fresh = {}
    for p, entry in merged.items():
        with contextlib.suppress(OSError):
            if _stat_key(os.stat(p)) == entry[:4]:
                fresh[p] = entry
    memo.clear()
    memo.update(fresh)
    with contextlib.suppress(OSError):
        atomic_write_text(where, json.dumps(fresh, indent=0, sort_keys=True))


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, from the memo when the file's size, mtime, ctime and inode are those it was hashed with."""
    resolved = str(Path(path).resolve())
    st = os.stat(resolved)
    memo = _memo()
    entry = memo.get(resolved)
    if entry is not None and entry[:4] == _stat_key(st):
        return entry[4]
    digest = sha256_file(resolved)
    st_after = os.stat(resolved)
    if entry is not None:
        log.warning("%s changed since it was last hashed (size, mtime, ctime or inode differ); hashed again: "
                    "sha256 %s (was %s)", resolved, digest[:12], entry[4][:12])
    if _stat_key(st_after) == _stat_key(st):          # not remembered if it changed while being read
        memo[resolved] = [*_stat_key(st), digest]
        _save(memo)
    return digest
