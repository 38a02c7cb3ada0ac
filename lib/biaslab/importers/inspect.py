"""inspect_ai logs (``.eval``: a zip of ``header.json`` and ``samples/*.json``; or a ``.json`` log with ``samples``)
of inspect_evals' ``bbq`` (multiple choice).

A sample is BBQ when its ``metadata`` holds ``category``, ``context_condition`` and ``question_polarity`` and it has
three ``choices``; the chosen option is the ``answer`` of the sample's first score: the letter of the choice the
``choice()`` scorer read from the model's ``ANSWER: X`` line (inspect_ai 0.3.285 writes ``answer=""`` with
``reason="invalid_response_format"`` when the completion has no such line, and several letters joined by ", " for
several; both rows are excluded with that reason). The biased answer comes from the metadata's ``answer_info`` and
``stereotyped_groups``, which inspect_evals keeps; without them a row is excluded with that reason. Log format
versions 1 and 2 are read; a newer one is an error. inspect_ai writes the members of an ``.eval`` zstd-compressed,
which Python's zipfile reads only from 3.14 on: such a log is an error naming the conversion
(``inspect log convert --to json``), and a folder holding a log in both forms is read from its ``.json``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pandas as pd

from ..benchmarks import bbq as bbq_bench
from ..files.hashing import sha256_file
from .base import BBQ, BBQ_META, ImportedLog, ImportError_, not_bbq, not_imported, read_text, some_supported

LOG_VERSIONS = (1, 2)


def _load(f: Path) -> tuple[dict, list[dict]]:
    if f.suffix == ".eval":
        with zipfile.ZipFile(f) as z:
            names = z.namelist()
            try:
                header = json.loads(z.read("header.json")) if "header.json" in names else json.loads(
                    z.read("_journal/start.json"))
                samples = [json.loads(z.read(n)) for n in sorted(names) if n.startswith("samples/")]
            except NotImplementedError as exc:        # zstd members (zip method 93) before Python 3.14
                raise ImportError_(f"{f}: its members are compressed with a method this Python's zipfile cannot "
                                   f"read ({exc}; inspect_ai writes zstd); convert the log to JSON and import that: "
                                   f"inspect log convert --to json --output-dir DIR {f}") from None
        return header, samples
    try:
        log = json.loads(read_text(f))
    except json.JSONDecodeError as exc:
        raise ImportError_(f"{f}:{exc.lineno}: not JSON ({exc.msg}); is the file complete?") from None
    if not isinstance(log, dict):
        raise ImportError_(f"{f}: a JSON {type(log).__name__}, not an inspect log object")
    return log, log.get("samples") or []


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    jsons = sorted(path.rglob("*.json"))
    stems = {(j.parent, j.stem) for j in jsons}
    return sorted([e for e in path.rglob("*.eval") if (e.parent, e.stem) not in stems] + jsons)


def _answer(score: dict) -> tuple[str | None, str]:
    """The letter the scorer read, or None and why not."""
    ans = str(score.get("answer") or "").strip().upper()
    if not ans:
        why = score.get("reason") or f"value {score.get('value')!r}"
        return None, f"the scorer read no answer from the completion ({why})"
    if ans not in ("A", "B", "C"):
        return None, f"the scorer's answer {ans!r} is not one letter A-C"
    return ans, ""


def read(path: Path) -> list[ImportedLog]:
    logs = []
    for f in _files(path):
        try:
            header, samples = _load(f)
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as exc:
            raise ImportError_(f"{f}: not an inspect log ({type(exc).__name__}: {exc})") from exc
        version = header.get("version", 2)
        if version not in LOG_VERSIONS:
            raise ImportError_(f"{f}: inspect log format version {version}; this importer reads versions "
                               f"{LOG_VERSIONS}")
        ev = header.get("eval") or {}
        rows, bad, n_bbq = [], [], 0
        for s in samples:
            meta, choices = s.get("metadata") or {}, s.get("choices") or []
            if why := not_bbq(meta, choices, "sample"):
                bad.append({"row": s.get("id"), "reason": why})
                continue
            n_bbq += 1
            score = next(iter((s.get("scores") or {}).values()), {}) or {}
            ans, why = _answer(score)
            if ans is None:
                bad.append({"row": s.get("id"), "reason": why})
                continue
            target = str(s.get("target") or "").strip().upper()
            try:
                info = meta["answer_info"]
                biased, _ = bbq_bench.biased_answer(                    # inspect_evals: source_id = example_id
                    meta["category"], meta.get("example_id", meta.get("source_id")), info,
                    meta["additional_metadata"]["stereotyped_groups"], meta["question_polarity"])
                unknown = [i for i in range(3) if info[f"ans{i}"][1] == "unknown"]
            except (KeyError, TypeError, IndexError):
                biased, unknown = None, []
            if biased is None or len(unknown) != 1 or target not in ("A", "B", "C"):
                bad.append({"row": s.get("id"), "reason": "the biased, unknown or gold answer is not determined "
                                                          "by the sample's metadata and target"})
                continue
            choice, gold = "ABC".index(ans), "ABC".index(target)
            rows.append({"prompt_id": f"{ev.get('task', 'inspect')}:{s.get('id')}", **{k: meta[k] for k in BBQ_META},
                         "template": f"{meta['category']}:{meta.get('question_index', '')}",
                         "prompt": s.get("input") if isinstance(s.get("input"), str) else json.dumps(s.get("input")),
                         **{f"ans{i}": c for i, c in enumerate(choices)}, "choice": choice, "gold_index": gold,
                         "biased_index": biased, "unknown_index": unknown[0], "deviated": int(choice == biased),
                         "correct": int(choice == gold), "chose_unknown": int(choice == unknown[0]),
                         "harness_value": score.get("value")})
        gen = ev.get("model_generate_config") or {}
        identity = {"harness": "inspect_ai", "harness_version": (ev.get("packages") or {}).get("inspect_ai"),
                    "harness_commit": None,         # the log's ``revision`` is the launch folder's git state
                    "model_name": ev.get("model"), "model_args": json.dumps(ev.get("model_args") or {}),
                    "generate_config": json.dumps(gen, sort_keys=True),
                    "launch_dir_git_commit": (ev.get("revision") or {}).get("commit"), "task": ev.get("task"),
                    "task_version": ev.get("task_version"), "task_file": ev.get("task_file"),
                    "task_args": json.dumps(ev.get("task_args") or {}), "date": ev.get("created"),
                    "limit": (ev.get("config") or {}).get("limit"), "files": {f.name: sha256_file(f)}}
        reported = {f"{sc.get('name')}:{k}": m.get("value")
                    for sc in ((header.get("results") or {}).get("scores") or [])
                    for k, m in (sc.get("metrics") or {}).items() if isinstance(m.get("value"), (int, float))}
        if not n_bbq:
            logs.append(not_imported("inspect", str(ev.get("task")), str(ev.get("model", "inspect model")),
                                     [s.get("id") for s in samples], f"{f}: task {ev.get('task')!r} has no BBQ "
                                     "samples (metadata with one of BBQ's categories, context_condition and "
                                     "question_polarity, and 3 choices)", identity, str(f)))
            continue
        logs.append(ImportedLog(harness="inspect", task=str(ev.get("task", BBQ)), kind=BBQ,
                                model=str(ev.get("model", "inspect model")), items=pd.DataFrame(rows),
                                excluded=pd.DataFrame(bad, columns=["row", "reason"]), identity=identity,
                                reported=reported, source=str(f),
                                prompts="inspect_evals' multiple-choice prompt (generated answers)"))
    if not logs:
        raise ImportError_(f"{path}: no inspect log (.eval or .json) found")
    return some_supported(logs, path)
