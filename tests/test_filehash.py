"""The one file-hash memo: right digest, hashed once per version of a file, strict key, kept on disk."""

import hashlib
import json
import logging
import os

import pytest

from biaslab.files import hashing
from biaslab import paths
from helpers import forget_file_hashes


@pytest.fixture
def memo_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path / "cache")
    forget_file_hashes()
    yield tmp_path / "cache"
    forget_file_hashes()


def test_file_sha256_is_memoised_until_the_file_changes(tmp_path, memo_dir, monkeypatch, caplog):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    assert hashing.file_sha256(f) == hashlib.sha256(b"abc").hexdigest() == hashing.sha256_file(f)
    memo = json.loads(hashing.memo_path().read_text())
    assert list(memo) == [str(f.resolve())] and memo[str(f.resolve())][4] == hashlib.sha256(b"abc").hexdigest()
    monkeypatch.setattr(hashing, "sha256_file", lambda p: "not read again")
    assert hashing.file_sha256(f) == hashlib.sha256(b"abc").hexdigest()
    forget_file_hashes()                                               # another process: reads the disk memo
    assert hashing.file_sha256(f) == hashlib.sha256(b"abc").hexdigest()
    monkeypatch.undo()
    monkeypatch.setattr(paths, "CACHE_DIR", memo_dir)
    with caplog.at_level(logging.WARNING, logger="biaslab.files.hashing"):
        f.write_bytes(b"abcd")                                      # a new size
        assert hashing.file_sha256(f) == hashlib.sha256(b"abcd").hexdigest()
    assert any("changed since it was last hashed" in r.getMessage() for r in caplog.records)
    assert len(json.loads(hashing.memo_path().read_text())) == 1   # one entry per file, the current version


@pytest.mark.parametrize("change", ["same_size_old_mtime", "replaced_by_another_file"])
def test_every_part_of_the_key_counts(tmp_path, memo_dir, change):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    assert hashing.file_sha256(f) == hashlib.sha256(b"abc").hexdigest()
    st = f.stat()
    if change == "same_size_old_mtime":          # rewritten in place, mtime restored: the ctime moves
        f.write_bytes(b"xyz")
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:                                        # renamed over by another file: a new inode
        g = tmp_path / "g.bin"
        g.write_bytes(b"xyz")
        os.utime(g, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(g, f)
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert hashing.file_sha256(f) == hashlib.sha256(b"xyz").hexdigest()


def test_entries_of_deleted_files_are_dropped_and_an_unwritable_memo_only_costs_time(tmp_path, memo_dir,
                                                                                    monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("a")
    b.write_text("b")
    hashing.file_sha256(a)
    a.unlink()
    hashing.file_sha256(b)
    assert list(json.loads(hashing.memo_path().read_text())) == [str(b.resolve())]
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path / "b" / "not-a-folder")     # cannot be created
    forget_file_hashes()
    assert hashing.file_sha256(b) == hashlib.sha256(b"b").hexdigest()
