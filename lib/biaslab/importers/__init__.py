"""Results from elsewhere: another harness's per-sample log read into biaslab's own per-item tables.

One small module per log format, each with ``read(path) -> list[ImportedLog]``:

- :mod:`.lm_eval`: lm-evaluation-harness 0.4.x ``--log_samples`` output (``samples_<task>_*.jsonl`` beside
  ``results_*.json``);
- :mod:`.inspect`: inspect_ai ``.eval`` / ``.json`` logs of inspect_evals' ``bbq``;
- :mod:`.eee`: Every Eval Ever instance-level records (and :func:`.eee.export_run`, the other direction).

A task is recognised by what its samples hold (the doc's fields and the requests made of the model), never by its
name: a custom task that ``include:``\\ s the built-in YAML under another name or with local data imports the same.
Three kinds are understood: ``crows_pairs`` (two log-likelihoods per pair, of ``sent_more`` and ``sent_less``),
``bbq`` (the chosen option of every item, with its category, context condition and polarity) and ``mbbq`` (BBQ's
fields whose texts are rows of MBBQ's files: :func:`biaslab.benchmarks.mbbq.find`). A row that cannot be
used is kept in ``excluded`` with its reason. What a log holds answers the Scorer's requests through the
``imported`` backend (:mod:`biaslab.scoring.backends.imported`), keyed by the exact texts.
"""

from __future__ import annotations

import json
from pathlib import Path

from .base import (BBQ, CROWS, FORMATS, KINDS, MBBQ, UNSUPPORTED, ImportedLog, ImportError_, json_lines,  # noqa: F401
                   read_text, supported)


def read(fmt: str, path: str | Path, benchmark: str | None = None) -> list[ImportedLog]:
    """Every task of the log(s) at ``path`` in format ``fmt`` (``lm-eval``, ``inspect`` or ``eee``); ``benchmark``
    (``bbq`` or ``mbbq``) names what an lm-eval BBQ-shaped task is where its texts cannot tell."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ImportError_(f"{p}: no such file or folder")
    if fmt == "lm-eval":
        from . import lm_eval
        return lm_eval.read(p, benchmark)
    if fmt == "inspect":
        from . import inspect
        return inspect.read(p)
    if fmt == "eee":
        from . import eee
        return eee.read(p)
    raise ImportError_(f"unknown log format {fmt!r}; supported: {', '.join(FORMATS)}")


def detect(path: str | Path) -> str:
    """The format of a log path: an inspect log (``.eval``, or ``.json`` with ``version`` and ``eval`` at its top),
    lm-eval output, or EEE ``.jsonl``/``.json`` records."""
    p = Path(path).expanduser()
    if p.suffix == ".eval":
        return "inspect"
    files = [p] if p.is_file() else sorted(p.rglob("*.json*"))
    if any(f.name.startswith(("samples_", "results_")) for f in files):
        return "lm-eval"
    if (p.is_dir() and any(p.rglob("*.eval"))) or any(_is_inspect_json(f) for f in files if f.suffix == ".json"):
        return "inspect"
    return "eee"


def _is_inspect_json(f: Path) -> bool:
    try:
        top = json.loads(f.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(top, dict) and "eval" in top and "version" in top and "schema_version" not in top
