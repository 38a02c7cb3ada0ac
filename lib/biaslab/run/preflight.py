"""Checks ``biaslab reproduce`` makes before any work, each failing with one line that names the setting and the fix.

Parameters themselves (names, types, sizes, models, device, dtype) are checked by :mod:`biaslab.run.parameters`; here:
a ``-p profile=`` that contradicts ``--profile``, ``BIASLAB_*`` paths that cannot be used (``/dev/null/cache``: below
a file; relative ones are made absolute first), a notebook whose jupytext ``.py`` and ``.ipynb`` differ, an output folder that is a file or cannot be written (read-only, not
permitted) or that is the committed results folder without ``--publish``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..files import storage
from .. import paths


class PreflightError(ValueError):
    """A setting that makes the run impossible; the message names it and the fix."""


#: environment variable -> what it names
ENV_PATHS = {"BIASLAB_CACHE": "the model and score cache", "BIASLAB_OUTPUTS": "where --publish writes",
             "BIASLAB_SCRATCH": "where unpublished runs write", "BIASLAB_RAW_DIR": "the fetched benchmark files",
             "BIASLAB_DATA_MIRROR": "a folder to copy benchmark files from", "BIASLAB_ROOT": "the repository root"}


def check_profile(profile: str, overrides: dict) -> None:
    """``-p profile=X`` with ``--profile Y`` (X != Y): the manifest would disagree with itself."""
    given = overrides.get("profile")
    if given is not None and given != profile:
        raise PreflightError(f"-p profile={given} contradicts --profile {profile}: the profile is chosen with "
                             f"--profile only (use --profile {given}, and drop -p profile=...)")


def absolute_env_paths(environ=None) -> list[str]:
    """Rewrite every relative ``BIASLAB_*`` path in ``environ`` as an absolute one (relative to the current folder,
    as :mod:`biaslab.paths` reads it), once, before any kernel starts: a kernel runs in ``notebooks/``, where the
    same relative path names another folder (a second cache, a raw-data folder that does not exist). Returns one
    note per rewritten variable."""
    environ = os.environ if environ is None else environ
    notes = []
    for var in ENV_PATHS:
        value = environ.get(var)
        if value and value.strip() and not os.path.isabs(os.path.expanduser(value)):
            environ[var] = os.path.abspath(os.path.expanduser(value))
            notes.append(f"{var}={value} is relative: resolved to {environ[var]} for every notebook of this run")
    return notes


def check_not_published(outputs_dir: Path, publish: bool) -> None:
    """``--out`` naming the committed results folder (or a folder in it) without ``--publish``: a smoke or partial run
    would overwrite them without the catalogue, summary and README that a publish rewrites with them."""
    if publish:
        return
    out, committed = Path(outputs_dir).resolve(), paths.OUTPUTS_DIR.resolve()
    if out == committed or out.is_relative_to(committed):
        raise PreflightError(f"--out {outputs_dir} is the committed results folder {paths.OUTPUTS_DIR}: pass --publish "
                             "to write there (it also rewrites the catalogue, SUMMARY.md and the README's headline "
                             "block), or name another folder with --out")


def check_env_paths(environ=None) -> None:
    """Every ``BIASLAB_*`` path that is set must be a folder or creatable as one (nothing above it is a file);
    a mirror and the repository root must exist."""
    environ = os.environ if environ is None else environ
    for var, what in ENV_PATHS.items():
        value = environ.get(var)
        if value is None:
            continue
        if not value.strip():
            raise PreflightError(f"{var} is set but empty ({what}); unset it or name a folder")
        p = Path(value).expanduser()
        above = storage.nearest_existing(p)
        if not _is_dir(above):
            raise PreflightError(f"{var}={value} ({what}) cannot be used: {above} is not a folder. Fix: point {var} "
                                 "at a folder (or unset it for the default)")
        if var in ("BIASLAB_DATA_MIRROR", "BIASLAB_ROOT") and not _is_dir(p):
            raise PreflightError(f"{var}={value} ({what}) does not exist. Fix: point {var} at an existing folder "
                                 "(or unset it)")


def check_out(outputs_dir: Path, flag: str = "--out") -> None:
    """The output folder: a folder (or creatable below one) that this process can write into."""
    try:
        storage.probe_writable(outputs_dir, what=f"output folder ({flag})")
    except storage.StorageError as exc:
        raise PreflightError(str(exc)) from exc


def pair_problem(notebook: str) -> str | None:
    """Why ``notebooks/<notebook>.py`` and ``.ipynb`` (a jupytext pair) differ — the runner executes the ``.ipynb``,
    so an edit of the ``.py`` alone would silently not run — or None when they agree (or there is no ``.py``)."""
    import jupytext
    import nbformat
    script, ipynb = paths.NOTEBOOKS_DIR / f"{notebook}.py", paths.NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not script.exists() or not ipynb.exists():
        return None

    def cells(nb):
        return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", ()))) for c in nb.cells]
    a, b = cells(jupytext.read(script)), cells(nbformat.read(ipynb, as_version=4))
    fix = f"Fix: `jupytext --sync notebooks/{script.name}` (the newer file wins), then rerun"
    if len(a) != len(b):
        return f"notebooks/{script.name} has {len(a)} cells, notebooks/{ipynb.name} {len(b)}: the pair is out of sync. {fix}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return (f"cell {i} of notebooks/{script.name} differs from notebooks/{ipynb.name}: the pair is out of "
                    f"sync and the .ipynb is what runs. {fix}")
    return None


def check_pairs(notebooks) -> None:
    """Refuse a run of a notebook whose jupytext pair is out of sync (:func:`pair_problem`)."""
    for nb in dict.fromkeys(notebooks):
        problem = pair_problem(nb)
        if problem:
            raise PreflightError(problem)


def check_cache() -> None:
    """The cache folder may be read-only (a shared cache is then used read-only) but must be a folder."""
    above = storage.nearest_existing(paths.CACHE_DIR)
    if not _is_dir(above):
        raise PreflightError(f"the cache folder {paths.CACHE_DIR} cannot be used: {above} is not a folder. Fix: "
                             "set BIASLAB_CACHE to a folder")


def _is_dir(p: Path) -> bool:
    """A folder, or one this user may not look into (the error then comes when it is used, naming it)."""
    try:
        return p.is_dir()
    except PermissionError:
        return True
