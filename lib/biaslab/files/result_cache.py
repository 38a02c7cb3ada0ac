"""On-disk caches of expensive intermediate results (sentence embeddings, posterior draws) under ``paths.CACHE_DIR``.

A value is stored under a key that is the sha256 of everything that determines it (:func:`digest`), so a cached
value is never stale, only unused. Files are written atomically (temporary file, then rename); a file that cannot be
read is moved aside with one warning and the value recomputed: a cache never blocks a run. No pickle: arrays go to
``.npz`` (``allow_pickle=False``), posteriors to netCDF.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import numpy as np

from .. import paths
from .hashing import file_sha256
from .storage import atomic_write  # noqa: F401 (the caches' writer: stats reach it through this module)

log = logging.getLogger(__name__)


def folder(kind: str) -> Path:
    """``CACHE_DIR/<kind>``, read at call time (tests and ``BIASLAB_CACHE`` point it elsewhere)."""
    return Path(paths.CACHE_DIR) / kind


def digest(obj) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys; non-JSON values by ``str``)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def texts_digest(texts) -> str:
    """sha256 of an ordered list of texts (length-prefixed, so no two lists collide by concatenation)."""
    h = hashlib.sha256()
    for t in texts:
        b = str(t).encode()
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def folder_fingerprint(path: Path) -> dict:
    """{relative file name: sha256} of every file of a model folder (weights, config, tokenizer)."""
    path = Path(path)
    if path.is_file():
        return {path.name: file_sha256(path)}
    return {str(p.relative_to(path)): file_sha256(p) for p in sorted(path.rglob("*")) if p.is_file()}


def set_aside(path: Path, exc: BaseException) -> None:
    bad = path.with_name(path.name + ".bad")
    log.warning("cache file %s could not be read (%s: %s); moved to %s, recomputing", path, type(exc).__name__,
                exc, bad.name)
    try:
        os.replace(path, bad)
    except OSError:
        pass


def load_arrays(path: Path) -> dict | None:
    """The arrays of an ``.npz`` cache file, or None if there is none or it cannot be read (then set aside)."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as exc:  # noqa: BLE001 - any unreadable file is recomputed
        set_aside(path, exc)
        return None


def save_arrays(path: Path, arrays: dict) -> None:
    atomic_write(path, lambda tmp: np.savez(tmp, **arrays), suffix=path.suffix)
