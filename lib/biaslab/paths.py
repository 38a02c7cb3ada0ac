"""Every filesystem location the project uses, in one place.

The repository root is found from ``BIASLAB_ROOT`` or by walking up from this file to ``pyproject.toml``.
Caches that are expensive to rebuild and shared between checkouts (converted model weights, scores) live under
``BIASLAB_CACHE`` (default ``~/.cache/biaslab``).
"""

from __future__ import annotations

import os
from pathlib import Path


def _find_root() -> Path:
    env = os.environ.get("BIASLAB_ROOT")
    if env:
        return Path(env).resolve()
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").exists() and (parent / "data" / "sources.tsv").exists():
            return parent
    return Path.cwd()


def _env_path(var: str, default: Path) -> Path:
    """``$var`` as an absolute path (a relative one is relative to the current folder, resolved once here: a
    notebook's kernel runs in ``notebooks/``), or ``default``."""
    value = os.environ.get(var)
    return Path(os.path.abspath(os.path.expanduser(value))) if value else default


ROOT = _find_root()
DATA_DIR = ROOT / "data"
MANIFEST_TSV = DATA_DIR / "sources.tsv"
RAW_DIR = _env_path("BIASLAB_RAW_DIR", DATA_DIR / "raw")
OUTPUTS_DIR = _env_path("BIASLAB_OUTPUTS", ROOT / "outputs")
NOTEBOOKS_DIR = ROOT / "notebooks"
#: Where ``biaslab reproduce`` writes unless told to publish into ``OUTPUTS_DIR`` (``--publish``) or given ``--out``.
SCRATCH_DIR = _env_path("BIASLAB_SCRATCH", ROOT / "scratch")
CACHE_DIR = _env_path("BIASLAB_CACHE", Path.home() / ".cache" / "biaslab")
MODEL_CACHE_DIR = CACHE_DIR / "models"
SCORE_CACHE_DIR = CACHE_DIR / "scores"

#: Environment variable naming a folder laid out like the raw-file server (``<owner>/<repo>/<path>``).
MIRROR_ENV = "BIASLAB_DATA_MIRROR"
