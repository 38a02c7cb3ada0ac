"""An imported model: another harness's per-sample log standing in for a model (``{"imported": PATH}``).

The Scorer computes through the ``imported`` backend (:mod:`biaslab.scoring.backends.imported`), which answers each
request from the log, keyed by the exact texts. The log records log-likelihoods, not token counts; the length
normalised scores (LPBS, PPB) count tokens with the tokenizer of the model the log names (``pretrained=`` of
lm-eval's model_args, when that folder or hub id is on this machine) or the spec's ``tokenizer``. No weights are
read.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: how the imported backend matches a request to the log's texts (in the fingerprint, so in every MANIFEST)
TEXT_MATCHING = "exact text, else Unicode NFC with whitespace runs collapsed to one space and the ends stripped"


def normalise(text: str) -> str:
    """A text as :data:`TEXT_MATCHING` compares it."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", str(text))).strip()


@dataclass
class ImportedModel:
    """The logs of one model (several tasks may come from one run folder), ready for the Scorer."""

    name: str
    logs: list
    tokenizer: Any = None
    tokenizer_source: str | None = None
    kind: str = "causal"
    backend: str = "imported"
    model: Any = None
    device: str = "imported"
    dtype: str = "imported"
    fingerprint: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ImportedModel({self.name!r}, {len(self.logs)} task(s))"


def _tokenizer(source: str | None):
    """The tokenizer of ``source``: a folder, an embedded model's name (or a folder named like one that is not on
    this machine: a log written elsewhere of an embedded model), or a hub id in the local cache."""
    if not source:
        return None
    from .embedded import EMBEDDED, cache_folder, prepare
    p = Path(str(source)).expanduser()
    if not p.is_dir() and p.name in EMBEDDED:
        prepare(p.name)
        p = source = cache_folder(p.name)
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(p) if p.is_dir() else str(source),
                                             local_files_only=not p.is_dir() or None)
    except Exception as exc:        # not on this machine: the scores that need token counts say so
        log.warning("imported model: tokenizer %s could not be loaded (%s: %s); token counts (LPBS, PPB) are "
                    "unavailable; pass {'imported': ..., 'tokenizer': NAME_OR_FOLDER}", source,
                    type(exc).__name__, str(exc).splitlines()[0][:160])
        return None


def load_imported(spec: dict) -> ImportedModel:
    from .. import importers
    path = Path(str(spec["imported"])).expanduser()
    fmt = spec.get("format") or importers.detect(path)
    logs = importers.read(fmt, path, spec.get("benchmark"))
    if spec.get("model") is not None:
        logs = [lg for lg in logs if lg.model == str(spec["model"])]
        if not logs:
            raise ValueError(f"{path} holds no log of model {spec['model']!r}")
    names = sorted({lg.model for lg in logs})
    if len(names) > 1:          # one model per imported model, whatever it is called
        raise ValueError(f"{path} holds logs of {len(names)} models ({', '.join(names)}); a name stands for one "
                         "model: point at one model's run folder or samples file, or select one with "
                         "{'imported': PATH, 'model': NAME}")
    name = spec.get("name") or names[0]
    ident = logs[0].identity
    source = spec.get("tokenizer") or ident.get("tokenizer") or ident.get("model_name")
    tok = _tokenizer(source)
    fp = {"name": name, "backend": "imported", "format": fmt, "path": str(path), "tokenizer": source if tok else None,
          "text_matching": TEXT_MATCHING,
          "tasks": {lg.task: {"kind": lg.kind, "items": len(lg.items), "excluded": len(lg.excluded),
                              **{k: v for k, v in lg.identity.items() if k != "files"},
                              "files": lg.identity.get("files", {})} for lg in logs}}
    return ImportedModel(name=name, logs=logs, tokenizer=tok, tokenizer_source=source if tok else None,
                         fingerprint=fp)
