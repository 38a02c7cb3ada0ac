"""Output integrity: a run's ``MANIFEST.json`` lists the sha256 of every file it vouches for; :func:`verify` checks a
folder against it.

A run folder (``outputs/<notebook>[/<variant>]/``) holds tables, figures and the executed notebook, all listed under
the manifest's ``files``. Files a manifest never vouches for: the manifest itself, HTML reports with their PDFs
(rebuilt, not committed), a later failed run's ``MANIFEST.failed.json`` and
``*.failed.ipynb``, hidden files, and sub-folders that hold their own manifest (notebook 1's variants). Anything else is *edited* (its bytes differ), *missing* or *extra*.
``biaslab verify [DIR]`` prints each problem and exits 1; the catalogue and notebook 5 flag or refuse what does not
verify (:func:`check_inputs`).
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .hashing import sha256_file

MANIFEST = "MANIFEST.json"
#: files in a run folder that its manifest does not vouch for
NOT_VOUCHED = (MANIFEST, "MANIFEST.failed.json", "*.failed.ipynb", "*.html", "*.pdf", ".*")


def _own_files(folder: Path) -> list[Path]:
    """The files of a run folder, not descending into hidden folders or sub-folders with their own manifest."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or any(fnmatch.fnmatch(p.name, pat) for pat in NOT_VOUCHED):
            continue
        if p.is_dir():
            if not (p / MANIFEST).exists():
                out += _own_files(p)
        elif p.is_file():
            out.append(p)
    return out


def file_hashes(folder: str | Path) -> dict[str, str]:
    """{path relative to ``folder`` (posix): sha256} of every file a manifest in ``folder`` vouches for."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in _own_files(folder)}


@dataclass
class Verification:
    folder: Path
    edited: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    problem: str | None = None          # no manifest, unreadable, or one without file hashes (made before them)
    legacy: bool = False                # a manifest written before manifests listed file hashes

    @property
    def ok(self) -> bool:
        return not (self.edited or self.missing or self.extra or self.problem)

    @property
    def tampered(self) -> bool:
        """Files the manifest vouches for were edited or removed (what readers must not trust)."""
        return bool(self.edited or self.missing)

    def lines(self) -> list[str]:
        if self.problem:
            return [f"{self.folder}: {self.problem}"]
        return ([f"{self.folder}/{n}: edited (sha256 differs from MANIFEST.json)" for n in self.edited]
                + [f"{self.folder}/{n}: missing (listed in MANIFEST.json)" for n in self.missing]
                + [f"{self.folder}/{n}: extra (not in MANIFEST.json)" for n in self.extra])

    def summary(self) -> str:
        if self.ok:
            return "verified"
        if self.problem:
            return self.problem
        parts = [f"{len(v)} {k}: {', '.join(v[:5])}{' ...' if len(v) > 5 else ''}"
                 for k, v in (("edited", self.edited), ("missing", self.missing), ("extra", self.extra)) if v]
        return "; ".join(parts)


def verify(folder: str | Path) -> Verification:
    """Check one run folder against its ``MANIFEST.json``."""
    folder = Path(folder)
    v = Verification(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        v.problem = "no MANIFEST.json (not a run folder, or its run never succeeded)"
        return v
    except (OSError, ValueError) as exc:
        v.problem = f"MANIFEST.json cannot be read ({type(exc).__name__}: {exc})"
        return v
    listed = manifest.get("files")
    if not isinstance(listed, dict):
        v.legacy = True
        v.problem = ("unverifiable: its MANIFEST.json lists no file hashes (written before biaslab recorded them); "
                     "regenerate the run")
        return v
    actual = file_hashes(folder)
    v.edited = sorted(n for n in listed if n in actual and actual[n] != listed[n])
    v.missing = sorted(n for n in listed if n not in actual)
    v.extra = sorted(n for n in actual if n not in listed)
    return v


def run_folders(root: str | Path) -> list[Path]:
    """Every folder under ``root`` (itself included) that holds a ``MANIFEST.json``, skipping hidden folders
    (staging folders of runs in progress). Symbolic links to folders are followed (a run folder that is a link is
    checked like any other), each real folder once."""
    root = Path(root)
    found, seen = [], set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:                # a link loop, or a second link to a folder already walked
            dirs.clear()
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if MANIFEST in files:
            found.append(Path(folder))
    return found


class UnverifiedInputs(RuntimeError):
    """Input tables were edited or removed since the run that wrote them."""


def check_inputs(root: str | Path, folders, refuse: bool = True) -> list[str]:
    """Verify the run folders a reader is about to read (``folders``, relative to ``root``; each may hold variant
    sub-folders with their own manifests).

    Raises :class:`UnverifiedInputs` naming every edited or missing file (``refuse=True``); returns one line per
    folder that cannot be fully vouched for otherwise (no file hashes, extra files, or — with ``refuse=False`` —
    edited ones), for the reader to show and record as a note. Notebook 5 calls this before reading anything.
    """
    root = Path(root)
    flags, bad = [], []
    for rel in dict.fromkeys(str(f) for f in folders):
        folder = root / rel
        if not folder.exists():
            continue
        checks = [verify(f) for f in run_folders(folder)] or [verify(folder)]
        for v in checks:
            name = v.folder.relative_to(root).as_posix()
            if v.tampered and refuse:
                bad += v.lines()
            elif not v.ok:
                flags.append(f"{name}: {v.summary()}")
    if bad:
        raise UnverifiedInputs("input files differ from the MANIFEST.json of the run that wrote them (edited by hand "
                               "or damaged): " + "; ".join(bad) + ". Fix: rerun that notebook (biaslab reproduce "
                               "--only NN), or restore the files (git checkout -- outputs/); `biaslab verify` lists "
                               "every difference.")
    return flags
