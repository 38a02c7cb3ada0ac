"""A persistent score cache: one SQLite file per model, one row per scored item.

Keys are sha256 digests of (method, its settings, the input item); the file is chosen by the model fingerprint
(name, weights sha256, dtype, device type, kind), so different weights or precisions never share scores. Each row
stores its JSON value with a checksum of key and value: a row that fails the check is deleted and recomputed, never
trusted. Rows are committed after every batch in one transaction, so a run that is killed loses at most the batch
in flight, and a re-run recomputes nothing already scored. A cache file that SQLite cannot read is moved aside.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

log = logging.getLogger(__name__)

#: Bump when the meaning of cached values changes; old entries are then simply not found.
CACHE_VERSION = 1


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
                          ).hexdigest()


def model_key(fingerprint: dict) -> str | None:
    """What identifies a model's numbers: weights, dtype, device type, kind. None when the weights are unknown."""
    if not fingerprint.get("weights_sha256"):
        return None
    dev = str(fingerprint.get("device", "cpu")).split(":")[0]
    return _digest({k: fingerprint.get(k) for k in ("weights_sha256", "dtype", "kind")} | {"device": dev})[:20]


class ScoreCache:
    """Get and put JSON values by (method, settings, item) for one model."""

    def __init__(self, folder: str | Path, fingerprint: dict):
        mk = model_key(fingerprint)
        if mk is None:
            raise ValueError("the model fingerprint has no weights_sha256, so its scores cannot be cached")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(fingerprint.get("name", "model")))[:60]
        self.path = Path(folder) / f"{name}-{mk}.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            try:
                conn = sqlite3.connect(self.path, timeout=60)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                             "checksum TEXT NOT NULL, method TEXT, created REAL)")
                conn.execute("SELECT count(*) FROM scores LIMIT 1").fetchone()
                return conn
            except sqlite3.DatabaseError as exc:
                if attempt:
                    raise
                bad = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
                log.warning("score cache %s is unreadable (%s); moved aside to %s and starting afresh",
                            self.path, exc, bad)
                for suffix in ("", "-wal", "-shm"):
                    p = Path(str(self.path) + suffix)
                    if p.exists():
                        p.rename(Path(str(bad) + suffix))
        raise AssertionError("unreachable")

    @staticmethod
    def key(method: str, settings: dict, item: Any) -> str:
        return _digest([CACHE_VERSION, method, settings, item])

    @staticmethod
    def _checksum(key: str, value: str) -> str:
        return hashlib.sha256((key + "\0" + value).encode()).hexdigest()[:32]

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        bad: list[str] = []
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            q = f"SELECT key, value, checksum FROM scores WHERE key IN ({','.join('?' * len(part))})"
            for key, value, checksum in self._conn.execute(q, part):
                if checksum != self._checksum(key, value):
                    bad.append(key)
                    continue
                try:
                    found[key] = json.loads(value)
                except ValueError:
                    bad.append(key)
        if bad:
            log.warning("score cache %s: %d corrupt entries ignored and will be recomputed", self.path, len(bad))
            with self._conn:
                self._conn.executemany("DELETE FROM scores WHERE key = ?", [(k,) for k in bad])
        return found

    def put_many(self, items: dict[str, Any], method: str = "") -> None:
        now = time.time()
        rows = []
        for key, value in items.items():
            text = json.dumps(value, ensure_ascii=False, allow_nan=True)
            rows.append((key, text, self._checksum(key, text), method, now))
        with self._conn:   # one transaction: all of the batch or nothing
            self._conn.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        return self._conn.execute("SELECT count(*) FROM scores").fetchone()[0]

    def close(self) -> None:
        self._conn.close()
