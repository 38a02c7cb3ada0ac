"""Pinned benchmark sources: the manifest, fetching, verification.

``data/sources.tsv`` lists every file a benchmark needs: its repository, the commit it is pinned at, its path, its
sha256, its canonical raw URL, licence and citation. :func:`fetch` downloads each file (or copies it from a mirror
folder laid out as ``<owner>/<repo>/<path>``) into ``data/raw/<owner>/<repo>/<path>``. Every file is checked against
its sha256 before it is moved into place, so a partial or corrupt file never sits where a loader would read it.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .files.hashing import file_sha256, sha256_file
from .files.storage import umask_mode

log = logging.getLogger(__name__)


class DataError(RuntimeError):
    """A benchmark file is missing, corrupt or malformed. The message names the file and the fix."""


class NetworkError(DataError):
    """The download host could not be reached at all (as opposed to one bad file)."""


@dataclass(frozen=True)
class Source:
    benchmark: str
    repo: str
    commit: str
    path: str
    sha256: str
    url: str
    license: str
    citation: str

    @property
    def key(self) -> str:
        return f"{self.repo}/{self.path}"

    def local_path(self, raw_dir: Path | None = None) -> Path:
        return Path(raw_dir or paths.RAW_DIR) / self.repo / self.path


FIELDS = tuple(f.name for f in dataclasses.fields(Source))
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _row_problem(row: dict) -> str | None:
    """Why a row of the manifest cannot be used (hand-edited: a file re-pinned to its new sha256), or None."""
    if None in row or None in row.values():
        n = len(FIELDS) + len(row.get(None) or ()) - sum(v is None for v in row.values())
        return (f"{n} fields, expected {len(FIELDS)} ({', '.join(FIELDS)}). Fix: separate the fields by exactly one "
                "tab each")
    empty = [k for k in ("benchmark", "repo", "path", "sha256", "url") if not row[k].strip()]
    if empty:
        return f"empty {', '.join(empty)}. Fix: fill them in"
    if not _SHA256.fullmatch(row["sha256"]):
        return (f"sha256 {row['sha256']!r} is not 64 lower-case hex digits. Fix: write the file's digest as "
                "`sha256sum FILE` prints it")
    if not row["url"].startswith(("https://", "http://")):
        return f"url {row['url']!r} is not an http(s) address. Fix: write the file's raw URL at its pinned commit"
    return None


#: plugin benchmarks' own sources tables (``Spec.sources_table``, :func:`add_table`), read after data/sources.tsv
TABLES: list[Path] = []


def add_table(table: str | Path, benchmark: str) -> None:
    """Read ``table`` (a plugin's sources table) with data/sources.tsv from now on."""
    table = Path(table).resolve()
    if not table.is_file():
        raise DataError(f"{table}: benchmark {benchmark!r} names it as its Spec.sources_table, but it is not a file. "
                        "Fix: write it beside the module, with data/sources.tsv's columns")
    if table not in TABLES:
        TABLES.append(table)


def load_manifest(manifest: Path | None = None) -> list[Source]:
    """Read ``manifest`` (default: ``data/sources.tsv`` and every table of :data:`TABLES`) into :class:`Source`
    records; :class:`DataError` naming the file, the line and the fix for a header or row that cannot be used."""
    out, lines = [], {}
    for table in [Path(manifest)] if manifest else [paths.MANIFEST_TSV, *TABLES]:
        with open(table, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f, delimiter="\t")
            if tuple(reader.fieldnames or ()) != FIELDS:
                raise DataError(f"{table} line 1: the header is {reader.fieldnames}, expected the columns "
                                f"{', '.join(FIELDS)} separated by tabs. Fix: restore the header from git")
            for row in reader:
                problem = _row_problem(row)
                key = f"{row.get('repo')}/{row.get('path')}"
                first, n, sha = lines.get(key, (None, 0, ""))     # another table may pin the same bytes
                if not problem and first is not None and (first == table or sha != row["sha256"]):
                    where = "" if first == table else f" of {first}, with another sha256"
                    problem = f"{key} is pinned again (line {n}{where}). Fix: keep one row per file"
                if problem:
                    raise DataError(f"{table} line {reader.line_num}: {problem}")
                lines.setdefault(key, (table, reader.line_num, row["sha256"]))
                out.append(Source(**row))
    return out


def is_verified(src: Source, raw_dir: Path | None = None) -> bool:
    """True when the local copy exists and matches its pinned sha256 (hashed through the one memo of
    :mod:`biaslab.files.hashing`: again whenever the file's size, mtime, ctime or inode change)."""
    p = src.local_path(raw_dir)
    return p.is_file() and file_sha256(p) == src.sha256


def _install(src: Source, tmp: Path, dest: Path, origin: str) -> None:
    """Verify ``tmp`` against the pinned hash, then move it atomically to ``dest``; delete it otherwise."""
    digest = sha256_file(tmp)
    if digest != src.sha256:
        tmp.unlink(missing_ok=True)
        raise DataError(
            f"{src.key}: sha256 mismatch for the copy from {origin}\n"
            f"  expected {src.sha256}\n  got      {digest}\n"
            "The file was not installed. If it came from a mirror, the mirror's copy is corrupt or from another "
            f"commit: replace it with the file at {src.url}."
        )
    os.chmod(tmp, umask_mode())        # mkstemp creates 0600; a fetched file is as readable as any other
    os.replace(tmp, dest)


def fetch_one(src: Source, mirror: str | Path | None = None, raw_dir: Path | None = None,
              timeout: float = 60.0) -> str:
    """Make the local copy of ``src`` present and verified. Returns what was done."""
    dest = src.local_path(raw_dir)
    if is_verified(src, raw_dir):
        if dest.stat().st_mode & 0o777 == 0o600 != umask_mode():     # made by an older fetch with mkstemp's mode
            os.chmod(dest, umask_mode())
        return "present"
    tmp = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        mirror = mirror or os.environ.get(paths.MIRROR_ENV)
        mdir = Path(mirror) if mirror else None
        if mdir is not None:
            mfile = mdir / src.repo / src.path
            if not mfile.exists():
                raise DataError(
                    f"{src.key}: not found in the mirror folder {mdir} (looked for {mfile}).\n"
                    f"Fix: put the file there, or fetch without a mirror to download it from {src.url}."
                )
            shutil.copyfile(mfile, tmp)
            origin = f"mirror {mfile}"
        else:
            try:
                with urllib.request.urlopen(src.url, timeout=timeout) as resp, open(tmp, "wb") as out:
                    shutil.copyfileobj(resp, out)
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                unreachable = not isinstance(exc, urllib.error.HTTPError)
                raise (NetworkError if unreachable else DataError)(
                    f"{src.key}: download failed from {src.url} ({exc}).\n"
                    f"Fix: check the network, or copy from a folder laid out as <owner>/<repo>/<path> with "
                    f"`biaslab data fetch --mirror DIR` (or set {paths.MIRROR_ENV}=DIR)."
                ) from exc
            origin = src.url
        _install(src, tmp, dest, origin)
        return "copied" if mdir is not None else "downloaded"
    except OSError as exc:          # a folder where the file goes (or in the mirror), a folder it cannot write
        raise DataError(f"{src.key}: {exc.strerror or exc}: {exc.filename2 or exc.filename or dest}. Fix: make {dest} "
                        "a file this user can replace (move away a folder of that name), and a mirror's copy a "
                        "readable file") from exc
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def fetch(benchmarks: list[str] | None = None, mirror: str | Path | None = None,
          raw_dir: Path | None = None, manifest: Path | None = None) -> dict[str, str]:
    """Fetch every file of the chosen benchmarks (all by default). Raises :class:`DataError` listing failures."""
    results, errors = {}, []
    pinned = load_manifest(manifest)
    known = {s.benchmark for s in pinned}
    if set(benchmarks or ()) - known:
        raise DataError(f"no file of {sorted(set(benchmarks) - known)} is pinned in {paths.MANIFEST_TSV.name} or a "
                        f"loaded plugin's table; name one of {sorted(known)}, or load the plugin that pins it "
                        "(--benchmark-module PATH_OR_MODULE)")
    chosen = [s for s in pinned if not benchmarks or s.benchmark in benchmarks]
    for src in chosen:
        try:
            results[src.key] = fetch_one(src, mirror=mirror, raw_dir=raw_dir)
        except NetworkError as exc:
            pending = [s.key for s in chosen if s.key not in results and s.key != src.key]
            failed = [k for k, state in results.items() if state == "failed"] + [src.key]
            raise NetworkError(f"{exc}\n\nStopped: the host is unreachable. {len(failed)} file(s) failed "
                               f"({', '.join(failed)}), {len(pending)} not attempted, "
                               f"{len(results) - len(failed) + 1} present. Nothing incomplete was left in data/raw/."
                               ) from exc
        except DataError as exc:
            errors.append(str(exc))
            results[src.key] = "failed"
    if errors:
        raise DataError(f"{len(errors)} of {len(results)} file(s) could not be fetched:\n\n" + "\n\n".join(errors))
    return results


def status(raw_dir: Path | None = None, manifest: Path | None = None) -> list[dict]:
    """One row per manifest file: benchmark, file, state (verified / missing / corrupt)."""
    rows = []
    for src in load_manifest(manifest):
        p = src.local_path(raw_dir)
        state = "missing" if not p.exists() else ("verified" if is_verified(src, raw_dir) else "corrupt")
        rows.append({"benchmark": src.benchmark, "file": src.key, "state": state})
    return rows


def raw_path(repo: str, path: str, raw_dir: Path | None = None) -> Path:
    """Local path of a manifest file, verified. Loaders call this instead of building paths themselves."""
    for src in load_manifest():
        if src.repo == repo and src.path == path:
            p = src.local_path(raw_dir)
            if not p.exists():
                raise DataError(f"{src.key} is missing from {p.parent}.\n"
                                f"Fix: run `biaslab data fetch --only {src.benchmark}` (or `make data`).")
            if not is_verified(src, raw_dir):      # one line: a runner's `error:` line shows all of it
                raise DataError(f"{p} is not the file data/sources.tsv pins for {src.key} (sha256 "
                                f"{file_sha256(p)[:16]}..., pinned {src.sha256[:16]}...: changed or replaced). "
                                f"Fix: `biaslab data fetch --only {src.benchmark}` (replaces it with the pinned copy)")
            return p
    raise DataError(f"{repo}/{path} is not in the manifest {paths.MANIFEST_TSV} (nor a plugin's Spec.sources_table); "
                    "add it there with its sha256.")

