"""What every importer shares: the table of an imported task (:class:`ImportedLog`), the error that names what is
supported, and the readers of a log's text and JSON lines (the package's formats import these; the package
dispatches to them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..benchmarks import bbq, crows_pairs, mbbq

#: what the importers understand, said in every "unknown task" error
#: the kinds of log understood: a benchmark's Spec name
CROWS, BBQ, MBBQ = crows_pairs.SPEC.name, bbq.SPEC.name, mbbq.SPEC.name
KINDS = {CROWS: f"{crows_pairs.SPEC.title} (docs with sent_more and sent_less, two log-likelihood requests)",
         BBQ: f"{bbq.SPEC.title} (docs with context, question, ans0-ans2, label, category, context_condition, "
              "question_polarity)",
         MBBQ: f"{mbbq.SPEC.title} (BBQ's doc fields, whose texts are rows of MBBQ's files, in any language or set)"}
FORMATS = ("lm-eval", "inspect", "eee")
#: the kind of a task the importers do not understand: listed (with why) beside the tasks that import
UNSUPPORTED = "unsupported"


class ImportError_(ValueError):
    """A log that cannot be imported (unknown task, newer format, unreadable file); the message names what is
    supported."""


class Unsupported(ImportError_):
    """One task of a log that is none of :data:`KINDS` (or of a newer log format): the other tasks still import
    (:func:`not_imported`, :func:`some_supported`)."""


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


def unknown_category(category) -> str | None:
    """Why a BBQ-shaped row cannot be placed: its category is none of BBQ's (MBBQ's are among them), so no file
    gives its biased answer or its language; None for a known category."""
    if str(category) in bbq.CATEGORY_ROWS:
        return None
    return f"category {category!r} is none of BBQ's or MBBQ's ({', '.join(bbq.CATEGORY_ROWS)})"


#: the metadata fields a BBQ record of another harness carries (inspect_evals', an EEE converter's)
BBQ_META = ("category", "context_condition", "question_polarity")


def not_bbq(meta: dict, choices: list, what: str) -> str | None:
    """Why a ``what`` (a sample, a record) of another harness is no BBQ row: its metadata lacks :data:`BBQ_META`, it
    has not three choices, or its category is unknown (:func:`unknown_category`); None for a BBQ row."""
    if not set(BBQ_META) <= set(meta) or len(choices) != 3:
        return f"not a BBQ {what} (metadata lacks category, context_condition or question_polarity, or not 3 choices)"
    return unknown_category(meta["category"])


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


def not_imported(harness: str, task: str, model: str, rows: list, why: str, identity: dict, source: str
                 ) -> ImportedLog:
    """A task that cannot be imported, kept as its own log: every row in ``excluded`` with ``why``, so that the
    run's tables, MANIFEST and terminal list it beside the tasks that import."""
    return ImportedLog(harness=harness, task=task, kind=UNSUPPORTED, model=model, items=pd.DataFrame(),
                       excluded=pd.DataFrame({"row": rows, "reason": f"task not imported: {why}"},
                                             columns=["row", "reason"]),
                       identity=identity, source=source, prompts="nothing (not imported)")


def some_supported(logs: list[ImportedLog], path: Path) -> list[ImportedLog]:
    """``logs`` when at least one task imports; else one line naming each task's reason and what is supported."""
    if logs and any(lg.kind != UNSUPPORTED for lg in logs):
        return logs
    whys = "; ".join(dict.fromkeys(lg.excluded.reason.iloc[0].removeprefix("task not imported: ")
                                   for lg in logs if len(lg.excluded)))
    head = whys if len(logs) == 1 and whys else f"{path}: no task can be imported ({whys or 'no samples'})"
    raise ImportError_(f"{head}; supported: {supported()}")
