"""A file's sha256, and the memo that hashes it again only when the file may have changed.

The one home of file hashing: data sources, model weights (memo kept on disk, ``models.weights_sha256``) and the
result cache (memo kept per process, ``resultcache.file_sha256``) all hash through here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_MEMO: dict[str, str] = {}


def sha256_file(path: str | Path, block: int = 1 << 22) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def file_key(path: str | Path) -> str:
    """``<resolved path>|<size>|<mtime>|<ctime>|<inode>``: a file rewritten in place gets a new key, even with the
    same size and a restored mtime (the ctime moves)."""
    path = Path(path)
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}"


def file_sha256(path: str | Path, memo: dict[str, str] | None = None) -> str:
    """sha256 of a file, remembered under :func:`file_key` in ``memo`` (by default, this process's)."""
    memo = _MEMO if memo is None else memo
    key = file_key(path)
    if key not in memo:
        memo[key] = sha256_file(path)
    return memo[key]
