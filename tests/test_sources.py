"""Fetching: verified copies from a mirror, refusal of corrupt files, clear errors without network or mirror."""

import hashlib
import urllib.error
from pathlib import Path

import pytest

from biaslab import paths, sources
from biaslab.benchmarks import SPECS
from biaslab.sources import DataError, Source


def _manifest(tmp_path: Path, content: bytes) -> tuple[Path, Source]:
    sha = hashlib.sha256(content).hexdigest()
    src = Source("toy", "owner/repo", "0" * 40, "dir/file.csv", sha,
                 "https://raw.githubusercontent.com/owner/repo/" + "0" * 40 + "/dir/file.csv", "MIT", "toy")
    manifest = tmp_path / "sources.tsv"
    manifest.write_text("benchmark\trepo\tcommit\tpath\tsha256\turl\tlicense\tcitation\n"
                        + "\t".join([src.benchmark, src.repo, src.commit, src.path, src.sha256, src.url,
                                     src.license, src.citation]) + "\n")
    return manifest, src


def _mirror(tmp_path: Path, content: bytes) -> Path:
    m = tmp_path / "mirror"
    (m / "owner/repo/dir").mkdir(parents=True)
    (m / "owner/repo/dir/file.csv").write_bytes(content)
    return m


def test_fetch_from_mirror_verifies_and_is_incremental(tmp_path):
    manifest, src = _manifest(tmp_path, b"a,b\n1,2\n")
    mirror, raw = _mirror(tmp_path, b"a,b\n1,2\n"), tmp_path / "raw"
    assert sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest) == {src.key: "copied"}
    assert (raw / "owner/repo/dir/file.csv").read_bytes() == b"a,b\n1,2\n"
    assert sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest) == {src.key: "present"}
    assert [r["state"] for r in sources.status(raw_dir=raw, manifest=manifest)] == ["verified"]


def test_corrupt_mirror_file_is_refused_and_nothing_is_left(tmp_path):
    manifest, src = _manifest(tmp_path, b"good\n")
    mirror, raw = _mirror(tmp_path, b"tampered\n"), tmp_path / "raw"
    with pytest.raises(DataError, match="sha256 mismatch") as exc:
        sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest)
    assert "owner/repo/dir/file.csv" in str(exc.value)
    folder = raw / "owner/repo/dir"
    assert not any(folder.iterdir()), "no partial or corrupt file may stay behind"


def test_corrupt_local_copy_is_replaced(tmp_path):
    manifest, src = _manifest(tmp_path, b"good\n")
    mirror, raw = _mirror(tmp_path, b"good\n"), tmp_path / "raw"
    dest = raw / "owner/repo/dir/file.csv"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"bad\n")
    assert [r["state"] for r in sources.status(raw_dir=raw, manifest=manifest)] == ["corrupt"]
    sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest)
    assert dest.read_bytes() == b"good\n"


def test_no_network_and_no_mirror_fails_clearly(tmp_path, monkeypatch):
    manifest, src = _manifest(tmp_path, b"x\n")
    monkeypatch.delenv("BIASLAB_DATA_MIRROR", raising=False)

    def offline(*a, **k):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(sources.urllib.request, "urlopen", offline)
    with pytest.raises(DataError) as exc:
        sources.fetch(raw_dir=tmp_path / "raw", manifest=manifest)
    msg = str(exc.value)
    assert "download failed" in msg and src.url in msg and "--mirror" in msg
    assert not (tmp_path / "raw/owner/repo/dir/file.csv").exists()


def test_missing_file_in_mirror_names_the_file(tmp_path):
    manifest, _ = _manifest(tmp_path, b"x\n")
    with pytest.raises(DataError, match="not found in the mirror"):
        sources.fetch(mirror=tmp_path / "empty", raw_dir=tmp_path / "raw", manifest=manifest)


def test_manifest_pins_every_file_of_a_benchmark_with_its_url():
    rows = sources.load_manifest(paths.MANIFEST_TSV)      # a loaded plugin's table aside
    lines = [x for x in paths.MANIFEST_TSV.read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
    assert len(rows) == len(lines) == len({r.key for r in rows})      # every row read, one per file
    assert {r.benchmark for r in rows} <= {n for s in SPECS.values() for n in (s.name, *s.datasets)}
    for r in rows:
        assert len(r.commit) == 40 and len(r.sha256) == 64
        assert r.url.startswith(f"https://raw.githubusercontent.com/{r.repo}/{r.commit}/")
        assert r.license and r.citation


@pytest.mark.parametrize("edit,needle", [
    (lambda f: f[:4] + [" ".join(f[4:6])] + f[6:], "line 2: 7 fields, expected 8 (benchmark, repo, commit, path, "
     "sha256, url, license, citation). Fix: separate the fields by exactly one tab each"),
    (lambda f: f[:5] + [f[4]] + f[5:], "line 2: 9 fields, expected 8"),
    (lambda f: f[:4] + [f[4] + " "] + f[5:], "line 2: sha256 '"),
    (lambda f: f[:4] + [f[4].upper()] + f[5:], "is not 64 lower-case hex digits. Fix: write the file's digest"),
    (lambda f: f[:4] + [""] + f[5:], "line 2: empty sha256. Fix: fill them in"),
    (lambda f: f[:5] + ["dir/file.csv"] + f[6:], "line 2: url 'dir/file.csv' is not an http(s) address"),
    (lambda f: f[:-1] + [f[-1] + "\n" + "\t".join(f)], "line 3: owner/repo/dir/file.csv is pinned again (line 2). Fix: keep one"),
])
def test_a_hand_edited_manifest_row_is_refused_naming_its_line(tmp_path, monkeypatch, capsys, edit, needle):
    """Re-pinning an edited data file by hand (its new sha256 in data/sources.tsv) ended in `TypeError: keywords must
    be strings` (a tab too many), "unknown url type" (one too few) or a silent "corrupt" (a digest with a space)."""
    from biaslab import cli, paths
    manifest, src = _manifest(tmp_path, b"a,b\n1,2\n")
    head, row = manifest.read_text().splitlines()
    manifest.write_text(head + "\n" + "\t".join(edit(row.split("\t"))) + "\n")
    with pytest.raises(DataError) as exc:
        sources.load_manifest(manifest)
    assert str(exc.value).startswith(f"{manifest} line ") and needle in str(exc.value)
    monkeypatch.setattr(paths, "MANIFEST_TSV", manifest)
    for action in ("status", "fetch"):
        assert cli.main(["data", action]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line == f"biaslab data: error: {exc.value}"


@pytest.mark.parametrize("where", ["raw", "mirror"])
def test_a_folder_where_the_file_goes_or_comes_from_is_a_data_error(tmp_path, where):
    """Restoring an edited file (fetch) where a folder stands in its place, or in the mirror's, raised a bare
    IsADirectoryError; nothing partial is left behind."""
    manifest, src = _manifest(tmp_path, b"good\n")
    mirror, raw = _mirror(tmp_path, b"good\n"), tmp_path / "raw"
    folder = (raw if where == "raw" else mirror) / "owner/repo/dir/file.csv"
    if where == "mirror":
        folder.unlink()
    folder.mkdir(parents=True)
    with pytest.raises(DataError) as exc:
        sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest)
    assert f"{src.key}: Is a directory: {folder}. Fix: make {src.local_path(raw)} a file" in str(exc.value)
    assert not list((raw / "owner/repo/dir").glob("*.part"))


def test_raw_path_of_unfetched_file_says_how_to_fix(tmp_path):
    with pytest.raises(DataError, match="biaslab data fetch"):
        sources.raw_path("nyu-mll/crows-pairs", "data/crows_pairs_anonymized.csv", raw_dir=tmp_path)


def test_raw_path_of_a_replaced_file_names_it_the_mismatch_and_the_command_in_one_line(tmp_path):
    """A data file replaced by /etc/passwd said only "Fix: delete it" on the terminal's error line."""
    key = ("nyu-mll/crows-pairs", "data/crows_pairs_anonymized.csv")
    (tmp_path / key[0] / "data").mkdir(parents=True)
    bad = tmp_path / key[0] / key[1]
    bad.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(DataError) as exc:
        sources.raw_path(*key, raw_dir=tmp_path)
    msg = str(exc.value)
    want = hashlib.sha256(bad.read_bytes()).hexdigest()[:16]
    assert "\n" not in msg and msg.startswith(f"{bad} is not the file data/sources.tsv pins")
    assert f"sha256 {want}..." in msg and "biaslab data fetch --only crows_pairs" in msg


def test_unreachable_host_counts_the_failed_file_as_failed(tmp_path, monkeypatch):
    manifest, src = _manifest(tmp_path, b"x\n")
    text = manifest.read_text()
    second = text.splitlines()[1].replace("dir/file.csv", "dir/other.csv")
    manifest.write_text(text + second + "\n")
    monkeypatch.delenv("BIASLAB_DATA_MIRROR", raising=False)

    def offline(*a, **k):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(sources.urllib.request, "urlopen", offline)
    with pytest.raises(sources.NetworkError) as exc:
        sources.fetch(raw_dir=tmp_path / "raw", manifest=manifest)
    msg = str(exc.value)
    assert f"1 file(s) failed ({src.key})" in msg and "1 not attempted" in msg and "0 present" in msg


@pytest.mark.parametrize("content,needle", [
    (b"a,b,c\n1,2,3\n4,5,6,7\n8,9,10\n", "line 3"),
    (b'a,b\n1,2\n3,"unterminated\n', "malformed"),
])
def test_malformed_csv_row_names_file_and_line(tmp_path, content, needle):
    from biaslab.benchmarks.base import read_csv
    f = tmp_path / "broken.csv"
    f.write_bytes(content)
    with pytest.raises(DataError, match=needle) as exc:
        read_csv(f)
    assert str(f) in str(exc.value)


def test_malformed_row_in_a_loader_names_file_and_line(tmp_path):
    import shutil
    from biaslab.benchmarks import agentic
    bank = tmp_path / "bank"
    shutil.copytree(agentic.BANK_DIR, bank)
    lines = (bank / "domains.csv").read_text().splitlines()
    lines.insert(3, "x,y,z,too,many,fields")
    (bank / "domains.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"domains\.csv, line 4"):
        agentic.read_bank(bank)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_fetched_files_follow_the_umask(tmp_path, umask):
    """Before, fetched files kept mkstemp's 0600 whatever the umask (unreadable to a shared group)."""
    import os
    manifest, src = _manifest(tmp_path, b"a,b\n1,2\n")
    mirror, raw = _mirror(tmp_path, b"a,b\n1,2\n"), tmp_path / "raw"
    old = os.umask(umask)
    try:
        sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest)
        f = raw / "owner/repo/dir/file.csv"
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask
        f.chmod(0o600)                                   # as an older fetch left it: repaired when seen again
        assert sources.fetch(mirror=mirror, raw_dir=raw, manifest=manifest) == {src.key: "present"}
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask
    finally:
        os.umask(old)
