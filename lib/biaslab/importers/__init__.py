"""Results from elsewhere: another harness's per-sample log read into biaslab's own per-item tables.

One small module per log format, each with ``read(path) -> list[ImportedLog]``:

- :mod:`.lm_eval`: lm-evaluation-harness 0.4.x ``--log_samples`` output (``samples_<task>_*.jsonl`` beside
  ``results_*.json``);
- :mod:`.inspect`: inspect_ai ``.eval`` / ``.json`` logs of inspect_evals' ``bbq``;
- :mod:`.eee`: Every Eval Ever instance-level records (and :func:`.eee.export_run`, the other direction).

A task is recognised by what its samples hold (the doc's fields and the requests made of the model), never by its
name: a custom task that ``include:``\\ s the built-in YAML under another name or with local data imports the same.
Two kinds are understood: ``crows_pairs`` (two log-likelihoods per pair, of ``sent_more`` and ``sent_less``) and
``bbq`` (the chosen option of every item, with its category, context condition and polarity). A row that cannot be
used is kept in ``excluded`` with its reason. What a log holds answers the Scorer's requests through the
``imported`` backend (:mod:`biaslab.scoring.backends.imported`), keyed by the exact texts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..benchmarks import bbq, crows_pairs

#: the kinds of log understood: a benchmark's Spec name
CROWS, BBQ = crows_pairs.SPEC.name, bbq.SPEC.name
#: what the importers understand, said in every "unknown task" error
KINDS = {CROWS: f"{crows_pairs.SPEC.title} (docs with sent_more and sent_less, two log-likelihood requests)",
         BBQ: f"{bbq.SPEC.title} (docs with context, question, ans0-ans2, label, category, context_condition, "
              "question_polarity)"}
FORMATS = ("lm-eval", "inspect", "eee")


class ImportError_(ValueError):
    """A log that cannot be imported (unknown task, newer format, unreadable file); the message names what is
    supported."""


def read_text(f: Path) -> str:
    """A log file's text; bytes that are not UTF-8 raise :class:`ImportError_` naming the file, line and byte."""
    data = Path(f).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ImportError_(f"{f}:{line}: byte 0x{data[exc.start]:02x} at column {col} is not UTF-8; re-save the "
                           "file as UTF-8 (a harness writes its logs in UTF-8)") from None


def json_lines(f: Path) -> list[tuple[int, dict]]:
    """``(line number, object)`` of each non-blank line of a JSON-lines file; a line that is not JSON, or not a JSON
    object, raises :class:`ImportError_` naming the file and line."""
    out = []
    for i, line in enumerate(read_text(f).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportError_(f"{f}:{i}: not a JSON line ({exc.msg}); is the file complete?") from None
        if not isinstance(obj, dict):
            raise ImportError_(f"{f}:{i}: a JSON {type(obj).__name__}, not an object; each line must be one record")
        out.append((i, obj))
    return out


def supported() -> str:
    return "; ".join(f"{k}: {v}" for k, v in KINDS.items())


@dataclass
class ImportedLog:
    """One task of one run, as read from another harness's log.

    ``items``: biaslab's per-item table (crows_pairs: ``prompt_id, pair_id, bias_type, direction, sent_more,
    sent_less, logp_more, logp_less``; bbq: ``prompt_id, category, context_condition, question_polarity, context,
    question, ans0-ans2, label, choice`` and ``logp_0-2`` where the log has them). ``loglikelihoods``: (context,
    continuation) -> log P as the harness computed it. ``choices``: prompt -> the option index the model chose
    (generated answers). ``excluded``: one row per unusable row (``row``, ``reason``). ``identity``: the run's model
    name and args, revision, harness and task versions, date, and the sha256 of every file read. ``reported``: the
    harness's own aggregate metrics for the task.
    """

    harness: str
    task: str
    kind: str
    model: str
    items: pd.DataFrame
    loglikelihoods: dict = field(default_factory=dict)
    choices: dict = field(default_factory=dict)
    excluded: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["row", "reason"]))
    identity: dict = field(default_factory=dict)
    reported: dict = field(default_factory=dict)
    source: str = ""
    prompts: str = ""       # how the harness asked (for the "not in the log" message)


def read(fmt: str, path: str | Path) -> list[ImportedLog]:
    """Every task of the log(s) at ``path`` in format ``fmt`` (``lm-eval``, ``inspect`` or ``eee``)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ImportError_(f"{p}: no such file or folder")
    if fmt == "lm-eval":
        from . import lm_eval
        return lm_eval.read(p)
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
    if any(f.suffix == ".eval" for f in (p.rglob("*.eval") if p.is_dir() else [])):
        return "inspect"
    if any(_is_inspect_json(f) for f in files if f.suffix == ".json"):
        return "inspect"
    return "eee"


def _is_inspect_json(f: Path) -> bool:
    try:
        top = json.loads(f.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(top, dict) and "eval" in top and "version" in top and "schema_version" not in top
