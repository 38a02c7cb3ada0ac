"""The one file-hash memo: right digest, hashed once per version of a file, kept in the memo it is given."""

import hashlib

from biaslab import filehash


def test_file_sha256_is_memoised_until_the_file_changes(tmp_path, monkeypatch):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    memo = {}
    assert filehash.file_sha256(f, memo) == hashlib.sha256(b"abc").hexdigest() == filehash.sha256_file(f)
    assert list(memo) == [filehash.file_key(f)]
    monkeypatch.setattr(filehash, "sha256_file", lambda p: "not read again")
    assert filehash.file_sha256(f, memo) == hashlib.sha256(b"abc").hexdigest()
    monkeypatch.undo()
    f.write_bytes(b"abcd")                                          # a new size: a new key
    assert filehash.file_sha256(f, memo) == hashlib.sha256(b"abcd").hexdigest() and len(memo) == 2


def test_default_memo_is_the_process_one(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("x")
    assert filehash.file_sha256(f) == hashlib.sha256(b"x").hexdigest()
    assert filehash._MEMO[filehash.file_key(f)] == hashlib.sha256(b"x").hexdigest()
