"""The score cache (resume, corruption, keys) and batching (length sorting, token budget, out-of-memory back-off)."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
import torch

from biaslab import scoring
from biaslab.scoring import batching
from biaslab.scoring.backends.local import CausalBackend
from biaslab.scoring.cache import ScoreCache, model_key
from helpers import tiny_model

TEXTS = [f"Sentence number {i} is {'long ' * (i % 4)}here." for i in range(12)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model(tmp_path_factory, "tiny-causal", "causal", seed=2)


def make(lm, cache_dir, **kw):
    return scoring.Scorer(lm, cache_dir=cache_dir, progress=False, **kw)


def test_rerun_computes_nothing(tiny, tmp_path):
    first = make(tiny, tmp_path)
    a = first.sequence_logprob(TEXTS)
    assert first.stats["positions"] > 0
    again = make(tiny, tmp_path)
    b = again.sequence_logprob(TEXTS)
    assert again.stats == {}
    assert a.equals(b)
    opts = make(tiny, tmp_path).option_logprob(TEXTS[:3], [" a", " b c"])
    again = make(tiny, tmp_path)
    assert again.option_logprob(TEXTS[:3], [" a", " b c"]).equals(opts) and again.stats == {}
    g = make(tiny, tmp_path).generate(TEXTS[:2], max_new_tokens=4)
    again = make(tiny, tmp_path)
    assert again.generate(TEXTS[:2], max_new_tokens=4) == g and again.stats == {}
    n = len(again.cache)
    again.generate(TEXTS[:2], max_new_tokens=4, do_sample=True)      # unseeded samples are never cached
    assert len(again.cache) == n


def test_a_fully_cached_run_never_loads_the_weights(tmp_path_factory, tmp_path):
    from biaslab import models
    folder = models.save_tiny_model(tmp_path_factory.mktemp("lazy") / "tiny", "causal", seed=3)
    first = models.load(folder, device="cpu", dtype="float32")
    assert not first.weights_loaded                      # the fingerprint needs config, tokenizer and file hashes
    a = make(first, tmp_path).sequence_logprob(TEXTS)
    g = make(first, tmp_path).generate(TEXTS[:2], max_new_tokens=4)
    assert first.weights_loaded
    again = models.load(folder, device="cpu", dtype="float32")
    assert again.fingerprint == first.fingerprint
    sc = make(again, tmp_path)
    assert sc.sequence_logprob(TEXTS).equals(a) and sc.generate(TEXTS[:2], max_new_tokens=4) == g
    assert not again.weights_loaded                      # every value came from the cache
    sc.sequence_logprob(["a text not scored before"])
    assert again.weights_loaded


def test_killed_run_resumes_losing_at_most_the_batch_in_flight(tiny, tmp_path, monkeypatch):
    reference = make(tiny, False).sequence_logprob(TEXTS)
    real = CausalBackend._score
    calls = {"n": 0}

    def dies_on_third_batch(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        return real(*args, **kw)

    monkeypatch.setattr(CausalBackend, "_score", dies_on_third_batch)
    sc = make(tiny, tmp_path, token_budget=40)       # several batches
    with pytest.raises(KeyboardInterrupt):
        sc.sequence_logprob(TEXTS)
    saved = len(sc.cache)
    assert 0 < saved < len(TEXTS)
    monkeypatch.setattr(CausalBackend, "_score", real)
    resumed = make(tiny, tmp_path, token_budget=40)
    df = resumed.sequence_logprob(TEXTS)
    assert np.abs(df.sum_logprob - reference.sum_logprob).max() < 1e-4
    assert len(resumed.cache) == len(TEXTS)
    # only the unsaved texts were computed again
    fresh = make(tiny, False, token_budget=40)
    fresh.sequence_logprob(TEXTS)
    assert resumed.stats["positions"] < fresh.stats["positions"]


def test_corrupt_entry_is_recomputed_not_trusted(tiny, tmp_path):
    good = make(tiny, tmp_path).sequence_logprob(TEXTS[:3])
    path = make(tiny, tmp_path).cache.path
    with sqlite3.connect(path) as con:
        con.execute("UPDATE scores SET value = '[-1.0]' WHERE rowid = (SELECT min(rowid) FROM scores)")
    sc = make(tiny, tmp_path)
    again = sc.sequence_logprob(TEXTS[:3])
    assert sc.stats["positions"] > 0                  # one text recomputed
    assert np.abs(again.sum_logprob - good.sum_logprob).max() < 1e-4


def test_unreadable_cache_file_is_moved_aside(tiny, tmp_path):
    path = make(tiny, tmp_path).cache.path
    path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        p = path.with_name(path.name + suffix)
        if p.exists():
            p.unlink()
    sc = make(tiny, tmp_path)
    assert len(sc.sequence_logprob(TEXTS[:2])) == 2
    assert list(tmp_path.glob("*.corrupt-*"))


def test_cache_keys_separate_models_methods_settings_and_inputs():
    fp = {"name": "m", "weights_sha256": "abc", "dtype": "float32", "device": "cpu", "kind": "causal"}
    assert model_key(fp) == model_key(fp | {"device": "cpu:0", "source": "elsewhere"})
    assert model_key(fp) != model_key(fp | {"dtype": "bfloat16"})
    assert model_key(fp) != model_key(fp | {"weights_sha256": "abd"})
    assert model_key(fp | {"weights_sha256": None}) is None
    k = ScoreCache.key
    assert len({k("sequence", {"prefix": 1}, "x"), k("options", {"prefix": 1}, "x"),
                k("sequence", {"prefix": 2}, "x"), k("sequence", {"prefix": 1}, "y")}) == 4


def test_length_batches_respect_the_budget_and_sort():
    lengths = [5, 30, 7, 12, 30, 1, 100]
    batches = batching.length_batches(lengths, budget=60)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 60
    firsts = [max(lengths[i] for i in b) for b in batches]
    assert firsts == sorted(firsts, reverse=True)
    assert batches[0] == [6]                      # longer than the budget: alone, first


def test_out_of_memory_halves_the_budget_and_finishes():
    lengths = [10] * 16
    seen = []

    def fn(batch, budget):
        if len(batch) * 10 > 40:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        seen.extend(batch)

    final = batching.run_batches(lengths, 160, fn)
    assert final == 40 and sorted(seen) == list(range(16))

    def other(batch, budget):
        raise ValueError("not memory")

    with pytest.raises(ValueError):
        batching.run_batches(lengths, 160, other)


# ---------------------------------------------------------------- faults: every SQLite failure recovers ---

def _filled(tiny, folder, texts=TEXTS):
    sc = make(tiny, folder)
    values = sc.sequence_logprob(texts)
    path = sc.cache.path
    sc.cache.close()
    return values, path


def _assert_recovers(tiny, folder, reference, caplog, texts=TEXTS):
    with caplog.at_level("WARNING", logger="biaslab.scoring.cache"):
        sc = make(tiny, folder)
        again = sc.sequence_logprob(texts)
    assert np.abs(again.sum_logprob.to_numpy() - reference.sum_logprob.to_numpy()).max() < 1e-4
    moved = [r.getMessage() for r in caplog.records if "moved aside" in r.getMessage()]
    assert len(moved) == 1 and str(sc.cache.path) in moved[0], moved
    assert list(folder.glob("*.corrupt-*"))
    assert len(make(tiny, folder).cache) == len(texts)       # the fresh file holds the recomputed values
    return sc


def test_bad_header_is_moved_aside_and_recomputed(tiny, tmp_path, caplog):
    ref, path = _filled(tiny, tmp_path)
    with open(path, "r+b") as fh:
        fh.write(b"not an sqlite header!!")
    _assert_recovers(tiny, tmp_path, ref, caplog)


def test_corrupted_middle_page_is_moved_aside_and_recomputed(tiny, tmp_path, caplog):
    texts = [f"{t} variant {j}" for j in range(20) for t in TEXTS]      # several pages of rows
    ref, path = _filled(tiny, tmp_path, texts)
    size = path.stat().st_size
    assert size >= 5 * 4096
    with open(path, "r+b") as fh:
        fh.seek((size // 4096 // 2) * 4096)
        fh.write(bytes(range(256)) * 16)                                 # one page of garbage in the middle
    _assert_recovers(tiny, tmp_path, ref, caplog, texts)


def test_bad_row_types_are_recomputed_not_trusted(tiny, tmp_path):
    ref, path = _filled(tiny, tmp_path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE scores SET value = X'00FF' WHERE rowid = (SELECT min(rowid) FROM scores)")
        con.execute("UPDATE scores SET value = 'not json' WHERE rowid = (SELECT max(rowid) FROM scores)")
    sc = make(tiny, tmp_path)
    again = sc.sequence_logprob(TEXTS)
    assert sc.stats["positions"] > 0
    assert np.abs(again.sum_logprob - ref.sum_logprob).max() < 1e-4


def test_file_deleted_mid_run_recovers(tiny, tmp_path, caplog):
    reference = make(tiny, False).sequence_logprob(TEXTS)
    sc = make(tiny, tmp_path)
    sc.sequence_logprob(TEXTS[:6])
    for p in tmp_path.glob("*.sqlite*"):
        p.unlink()
    with caplog.at_level("WARNING", logger="biaslab.scoring.cache"):
        df = sc.sequence_logprob(TEXTS)                                 # same Scorer, file gone
    assert np.abs(df.sum_logprob - reference.sum_logprob).max() < 1e-4
    assert any("deleted or replaced" in r.getMessage() for r in caplog.records)
    assert len(make(tiny, tmp_path).cache) == len(TEXTS)          # recomputed into the fresh file


class FailingConnection:
    """Stands in for the cache's sqlite connection: every statement raises ``error``."""

    def __init__(self, error: sqlite3.Error):
        self.error = error

    def execute(self, *a, **k):
        raise self.error
    executemany = execute

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_sqlite_error_in_get_and_put_recovers(tiny, tmp_path, monkeypatch):
    sc = make(tiny, tmp_path)
    ref = sc.sequence_logprob(TEXTS[:4])
    sc.cache._conn = FailingConnection(sqlite3.DatabaseError("database disk image is malformed"))
    again = sc.sequence_logprob(TEXTS[:4])             # get_many fails -> moved aside, recomputed, stored afresh
    assert np.abs(again.sum_logprob - ref.sum_logprob).max() < 1e-4
    assert len(sc.cache) == 4


def test_lock_contention_is_not_damage(tiny, tmp_path):
    """Another process holding the shared cache's lock past the timeout must not get the file moved aside."""
    sc = make(tiny, tmp_path)
    sc.sequence_logprob(TEXTS[:2])
    path = sc.cache.path
    sc.cache._conn = FailingConnection(sqlite3.OperationalError("database is locked"))
    with pytest.raises(RuntimeError, match="locked by another process"):
        sc.cache.get_many(["k"])
    assert path.exists() and not list(path.parent.glob(path.name + ".corrupt-*"))


def test_cache_key_includes_tokenizer_engine_and_library_versions(monkeypatch):
    from biaslab.scoring import cache as cache_mod
    fp = {"name": "m", "weights_sha256": "abc", "tokenizer_sha256": "t1", "dtype": "float32", "device": "cpu",
          "kind": "causal"}
    base = model_key(fp)
    assert model_key(fp | {"tokenizer_sha256": "t2"}) != base
    monkeypatch.setattr(cache_mod, "ENGINE_VERSION", "999")
    assert model_key(fp) != base
    monkeypatch.undo()
    monkeypatch.setattr(cache_mod, "_library_versions", lambda: {"torch": "0.0", "transformers": "0.0"})
    assert model_key(fp) != base


# ---------------------------------------------------------------- bug 5: permissions are not damage ---

def _foreign(path, uid=65534):
    for suffix in ("", "-wal", "-shm"):
        p = path.with_name(path.name + suffix)
        if p.exists():
            os.chown(p, uid, uid)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("damaged", [False, True])
def test_a_file_of_another_user_is_used_read_only_never_moved(tiny, tmp_path, caplog, damaged):
    """A shared cache whose file belongs to another user: read by everyone, renamed by no one (before, the first
    reader that hit any SQLite error renamed it to .corrupt-..., throwing away everyone's scores)."""
    ref, path = _filled(tiny, tmp_path)
    if damaged:
        with open(path, "r+b") as fh:
            fh.write(b"not an sqlite header!!")
    _foreign(path)
    before = path.read_bytes()
    with caplog.at_level("WARNING", logger="biaslab.scoring.cache"):
        sc = make(tiny, tmp_path)
        again = sc.sequence_logprob(TEXTS + ["one more sentence"])
    assert sc.cache.read_only and "belongs to another user" in sc.cache.read_only
    assert any("used read-only" in r.getMessage() for r in caplog.records)
    assert np.abs(again.sum_logprob[:len(TEXTS)] - ref.sum_logprob).max() < 1e-4
    assert path.read_bytes() == before and not list(tmp_path.glob("*.corrupt-*"))     # untouched, not moved
    if not damaged:
        n = sc.stats["positions"]                                 # only the new sentence was scored
        assert 0 < n < sum(len(t) + 1 for t in TEXTS)
        sc.sequence_logprob(TEXTS + ["one more sentence"])        # all known now: from the file and the run's memory
        assert sc.stats["positions"] == n


NS_OK = shutil.which("unshare") is not None and subprocess.run(
    ["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not NS_OK, reason="no private mount namespace here (unshare -m needs root)")
def test_a_read_only_scores_folder_is_read_not_moved(tmp_path):
    """Bug 5 as reported: on a read-only ``scores/`` the run died renaming a healthy file to .corrupt-..."""
    from biaslab import models
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=2)
    scores = tmp_path / "scores"
    script = (f"import json, sys\nfrom biaslab import models, scoring\n"
              f"lm = models.load({str(folder)!r}, device='cpu', dtype='float32')\n"
              f"sc = scoring.Scorer(lm, cache_dir={str(scores)!r}, progress=False)\n"
              f"df = sc.sequence_logprob({TEXTS!r} + sys.argv[1:])\n"
              f"print(json.dumps({{'sums': df.sum_logprob.tolist(), 'positions': sc.stats.get('positions', 0), "
              f"'read_only': sc.cache.read_only, 'rows': len(sc.cache)}}))\n")
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    ref = json.loads(first.stdout.splitlines()[-1])
    files = sorted(p.name for p in scores.iterdir())
    cmd = f"mount --bind {scores} {scores} && mount -o remount,ro,bind {scores} {scores} && exec \"$@\""
    r = subprocess.run(["unshare", "-m", "sh", "-c", cmd, "sh", sys.executable, "-c", script, "a new sentence"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert "read-only" in got["read_only"] and "used read-only" in r.stderr
    assert np.abs(np.array(got["sums"][:len(TEXTS)]) - np.array(ref["sums"])).max() < 1e-4
    assert got["positions"] < ref["positions"]               # the cached sentences were read, only the new one scored
    assert sorted(p.name for p in scores.iterdir()) == files  # nothing moved aside, nothing added


def test_cache_key_includes_every_loader_file_when_known():
    fp = {"name": "m", "weights_sha256": "abc", "tokenizer_sha256": "t", "dtype": "float32", "device": "cpu",
          "kind": "causal"}
    assert model_key(fp | {"files_sha256": "f1"}) != model_key(fp | {"files_sha256": "f2"}) != model_key(fp)
    assert model_key(fp | {"files_sha256": None}) == model_key(fp)      # served models have no files: key unchanged


def test_a_full_disk_is_named_and_the_file_kept_never_moved_aside(tiny, tmp_path, caplog):
    """The score cache on a full disk was renamed `.corrupt-...` and every score recomputed into a fresh file (on the
    same full disk). SQLite's own "database or disk is full" (here from a page limit) is now named as a full disk;
    the file is kept and read, the new scores are kept in memory for the run."""
    sc = make(tiny, tmp_path)
    ref = sc.sequence_logprob(TEXTS[:4])
    path = sc.cache.path
    pages = sc.cache._conn.execute("PRAGMA page_count").fetchone()[0]
    sc.cache._conn.execute(f"PRAGMA max_page_count = {pages}")            # no room for one more page
    before = sc.stats["computed"]
    again = sc.sequence_logprob(TEXTS)
    assert sc.stats["computed"] - before == len(TEXTS) - 4                  # the stored four were read, not recomputed
    assert np.abs(again.sum_logprob[:4] - ref.sum_logprob).max() < 1e-4
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))
    assert sc.cache.read_only.startswith("disk full") and "disk full" in caplog.text and "BIASLAB_CACHE" in caplog.text
    assert len(sc.cache.get_many([])) == 0 and len(sc.cache) >= len(TEXTS)


def test_a_file_found_unwritable_when_opened_is_still_read(tiny, tmp_path, monkeypatch):
    """The permission checks pass but SQLite refuses to write when the file is opened (e.g. a read-only mount the
    checks cannot see): the file is used read-only and its stored scores are read, not recomputed."""
    sc = make(tiny, tmp_path)
    sc.sequence_logprob(TEXTS[:4])
    sc.cache.close()
    real = ScoreCache._connect
    calls = []

    def refuse_once(self):
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(self)
    monkeypatch.setattr(ScoreCache, "_connect", refuse_once)
    again = make(tiny, tmp_path)
    assert again.cache.read_only and again.cache._conn is not None
    again.sequence_logprob(TEXTS[:4])
    assert again.stats.get("computed", 0) == 0          # the four stored scores were read
