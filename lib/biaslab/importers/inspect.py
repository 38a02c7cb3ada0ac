"""inspect_ai logs (``.eval``: a zip of ``header.json`` and ``samples/*.json``; or a ``.json`` log with ``samples``)
of inspect_evals' ``bbq`` (multiple choice).

A sample is BBQ when its ``metadata`` holds ``category``, ``context_condition`` and ``question_polarity`` and it has
three ``choices``; the chosen option is the score's ``answer`` (a letter A-C) of its first scorer. The biased answer
comes from the metadata's ``answer_info`` and ``stereotyped_groups`` where inspect_evals keeps them; without them a
row is excluded with that reason. Log format versions 1 and 2 are read; a newer one is an error.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pandas as pd

from ..benchmarks.bbq import biased_from_tags
from ..filehash import sha256_file
from . import ImportedLog, ImportError_, supported

LOG_VERSIONS = (1, 2)
NEED = ("category", "context_condition", "question_polarity")


def _load(f: Path) -> tuple[dict, list[dict]]:
    if f.suffix == ".eval":
        with zipfile.ZipFile(f) as z:
            names = z.namelist()
            header = json.loads(z.read("header.json")) if "header.json" in names else json.loads(
                z.read("_journal/start.json"))
            samples = [json.loads(z.read(n)) for n in sorted(names) if n.startswith("samples/")]
        return header, samples
    log = json.loads(f.read_text())
    return log, log.get("samples") or []


def read(path: Path) -> list[ImportedLog]:
    files = [path] if path.is_file() else sorted(list(path.rglob("*.eval")) + list(path.rglob("*.json")))
    logs = []
    for f in files:
        try:
            header, samples = _load(f)
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as exc:
            raise ImportError_(f"{f}: not an inspect log ({type(exc).__name__}: {exc})") from exc
        version = header.get("version", 2)
        if version not in LOG_VERSIONS:
            raise ImportError_(f"{f}: inspect log format version {version}; this importer reads versions "
                               f"{LOG_VERSIONS}")
        ev = header.get("eval") or {}
        rows, bad = [], []
        for s in samples:
            meta, choices = s.get("metadata") or {}, s.get("choices") or []
            if not set(NEED) <= set(meta) or len(choices) != 3:
                bad.append({"row": s.get("id"), "reason": "not a BBQ sample (metadata lacks category, "
                                                          "context_condition or question_polarity, or not 3 choices)"})
                continue
            score = next(iter((s.get("scores") or {}).values()), {}) or {}
            ans = str(score.get("answer") or "").strip().upper()[:1]
            if ans not in ("A", "B", "C"):
                bad.append({"row": s.get("id"), "reason": f"no answer letter A-C in the score ({ans!r})"})
                continue
            target = str(s.get("target") or "").strip().upper()[:1]
            try:
                info = meta["answer_info"]
                biased = biased_from_tags(info, meta["additional_metadata"]["stereotyped_groups"],
                                          meta["question_polarity"])
                unknown = [i for i in range(3) if info[f"ans{i}"][1] == "unknown"]
            except (KeyError, TypeError, IndexError):
                biased, unknown = None, []
            if biased is None or len(unknown) != 1 or target not in ("A", "B", "C"):
                bad.append({"row": s.get("id"), "reason": "the biased, unknown or gold answer is not determined "
                                                          "by the sample's metadata and target"})
                continue
            choice, gold = "ABC".index(ans), "ABC".index(target)
            rows.append({"prompt_id": f"{ev.get('task', 'inspect')}:{s.get('id')}", **{k: meta[k] for k in NEED},
                         "template": f"{meta['category']}:{meta.get('question_index', '')}",
                         "prompt": s.get("input") if isinstance(s.get("input"), str) else json.dumps(s.get("input")),
                         **{f"ans{i}": c for i, c in enumerate(choices)}, "choice": choice, "gold_index": gold,
                         "biased_index": biased, "unknown_index": unknown[0], "deviated": int(choice == biased),
                         "correct": int(choice == gold), "chose_unknown": int(choice == unknown[0])})
        if not rows:
            raise ImportError_(f"{f}: task {ev.get('task')!r} has no BBQ samples; supported: {supported()}")
        identity = {"harness": "inspect_ai", "harness_version": (ev.get("packages") or {}).get("inspect_ai"),
                    "model_name": ev.get("model"), "model_args": json.dumps(ev.get("model_args") or {}),
                    "revision": json.dumps(ev.get("revision") or {}), "task": ev.get("task"),
                    "task_version": ev.get("task_version"), "date": ev.get("created"),
                    "files": {f.name: sha256_file(f)}}
        logs.append(ImportedLog(harness="inspect", task=str(ev.get("task", "bbq")), kind="bbq",
                                model=str(ev.get("model", "inspect model")), items=pd.DataFrame(rows),
                                excluded=pd.DataFrame(bad, columns=["row", "reason"]), identity=identity,
                                source=str(f), prompts="inspect_evals' multiple-choice prompt (generated answers)"))
    if not logs:
        raise ImportError_(f"{path}: no inspect log (.eval or .json) found")
    return logs
