"""Loading a model for scoring: an embedded name, a local folder, a Hugging Face id, or a served-model spec.

Every :class:`LoadedModel` carries a ``fingerprint`` that is stamped on results and keys the score cache: name,
source, the sha256 of every file the loader reads (``files``, one digest of them ``files_sha256``, and
``weights_sha256`` and ``tokenizer_sha256``), dtype, device and kind.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from .embedded import EMBEDDED, KINDS, ModelNotFoundError, cache_folder, prepare, read_meta
from .provenance import (check_safetensors, digest_files, files_sha256, state_dict_sha256, tokenizer_sha256,
                         weights_sha256)
from .resolve import detect_kind, imported_spec, not_found_message, resolve_device, resolve_dtype
from .served import ServedModel, resolve_spec

log = logging.getLogger(__name__)


class ModelWeightsError(ValueError):
    """A checkpoint that lacks weight tensors the model's architecture needs."""


class LoadedModel:
    """A model ready for :class:`biaslab.scoring.Scorer`.

    ``kind`` is ``"causal"``, ``"seq2seq"`` or ``"masked"``; ``fingerprint`` identifies the exact files, dtype and
    device and is what results and the score cache record. The weights themselves are read on first use of
    ``model`` (``loader``): a run whose scores all come from the cache never loads them, so re-executing a report
    costs seconds even for a 70B model. The fingerprint needs only the config, the tokenizer and the files' hashes.
    """

    def __init__(self, model: Any, tokenizer: Any, name: str, kind: str, device: str, dtype: str,
                 fingerprint: dict | None = None, path: str | None = None, loader=None):
        if model is None and loader is None:
            raise ValueError("LoadedModel needs a model or a loader")
        self._model, self._loader = model, loader
        self.tokenizer, self.name, self.kind, self.device, self.dtype = tokenizer, name, kind, device, dtype
        self.fingerprint = fingerprint or {}
        self.path = path

    @property
    def model(self) -> Any:
        """The torch module, loaded now if it has not been yet."""
        if self._model is None:
            t = time.perf_counter()
            self._model, self._loader = self._loader(), None
            log.info("model %s: weights loaded on first use (%.1f s)", self.name, time.perf_counter() - t)
        return self._model

    @property
    def weights_loaded(self) -> bool:
        return self._model is not None

    def __repr__(self) -> str:
        return f"LoadedModel({self.name!r}, kind={self.kind!r}, device={self.device!r}, dtype={self.dtype!r})"


def _hub_snapshot(name: str) -> Path | None:
    with contextlib.suppress(Exception):
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(name, local_files_only=True))
    return None


def round_weights(model, dtype) -> None:
    """Round every floating parameter and buffer to ``dtype`` and back, in place: the model keeps computing in its
    own dtype (float32 on a CPU: activations, accumulations and reductions) with weights that carry only ``dtype``'s
    mantissa (bfloat16: 8 bits). Unlike computing in bfloat16, whose summation order follows the batch's make-up
    and the thread count, this changes only the weights, so its scores are as schedule-independent as float32's."""
    import torch
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.copy_(t.to(dtype).to(t.dtype))


def load(name_or_path: Any, device: str = "auto", dtype: Any = "auto",
         kind: str | None = None, weights_rounded_to: str | None = None) -> "LoadedModel | ServedModel":
    """Load a model for scoring.

    A served-model spec (see :func:`resolve_spec`) gives a :class:`ServedModel` at once (no request is sent until
    something is scored). ``name_or_path``: an embedded name (see ``EMBEDDED``; converted once by :func:`prepare`), a
    local folder, or a Hugging Face id. ``device``: ``"auto"`` (cuda > mps > cpu) or a torch device string.
    ``dtype``: ``"auto"`` (bfloat16 on CUDA, float32 elsewhere), a name such as ``"float32"``, or a torch dtype.
    ``kind``: override the detected ``"causal"`` / ``"seq2seq"`` / ``"masked"``. On CUDA the model uses SDPA attention.
    ``weights_rounded_to``: a dtype name (``"bfloat16"``): the weights are rounded to it and computed in ``dtype``
    (:func:`round_weights`); the fingerprint records it, so these scores have their own score-cache file.
    """
    imported = imported_spec(name_or_path)
    if imported is not None:
        from .imported import load_imported
        return load_imported(imported)
    served = resolve_spec(name_or_path)
    if served is not None:
        return ServedModel(spec=served, name=served.name, fingerprint={"name": served.name, **served.describe()})
    from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM,
                              AutoTokenizer)

    name = str(name_or_path)
    meta: dict = {}
    if name in EMBEDDED:
        prepare(name)
        folder = cache_folder(name)
        meta = read_meta(folder) or {}
        source = meta.get("source", name)
        where = str(folder)
    elif Path(name).expanduser().is_dir():
        folder = Path(name).expanduser().resolve()
        where, source = str(folder), f"local folder {folder}"
    else:
        folder, where, source = None, name, f"huggingface:{name}"

    if folder is not None:
        check_safetensors(folder)
    try:
        config = AutoConfig.from_pretrained(where)
    except (OSError, ValueError) as exc:
        if folder is not None and name not in EMBEDDED:
            raise ModelNotFoundError(f"{folder} is not a model folder (no readable config.json: {exc}). "
                                     + not_found_message(name)) from exc
        raise ModelNotFoundError(not_found_message(name, exc)) from exc

    kind = kind or detect_kind(config)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    dev = resolve_device(device)
    tdtype = resolve_dtype(dtype, dev)
    rounded = resolve_dtype(weights_rounded_to, dev) if weights_rounded_to else None
    auto = {"causal": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM, "masked": AutoModelForMaskedLM}[kind]
    kwargs: dict = {"dtype": tdtype}

    def load_weights():
        try:
            try:
                model, info = auto.from_pretrained(where, attn_implementation="sdpa", output_loading_info=True,
                                                   **kwargs)
            except (ValueError, ImportError):       # architecture without SDPA support
                model, info = auto.from_pretrained(where, output_loading_info=True, **kwargs)
        except Exception:
            if folder is None:                      # a hub model: name its corrupt cached file, if that is the cause
                snap = _hub_snapshot(name)
                if snap is not None:
                    check_safetensors(snap)
            raise
        missing = sorted(info.get("missing_keys") or ())
        if missing:     # transformers would initialise them at random and go on: scores of a partly random model
            raise ModelWeightsError(
                f"model {name}: {len(missing)} weight tensor(s) are missing from {where} "
                f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}); transformers would fill them with "
                "random values. Fix: copy the complete checkpoint (every *.safetensors shard and its index), or "
                "name the model by its Hugging Face id")
        model.to(dev)
        model.eval()
        if rounded is not None:
            round_weights(model, rounded)
        return model

    tokenizer = AutoTokenizer.from_pretrained(where)

    # every file the loader reads, hashed (cheap when unchanged: the files.hashing memo)
    files_folder = folder if folder is not None else _hub_snapshot(name)
    files = files_sha256(files_folder) if files_folder is not None else {}
    wsha = weights_sha256(files_folder, files) if files_folder is not None else None
    identity = "weight files"
    model = None                # loaded on first use, unless its parameters are its identity (below)
    if wsha is None:
        identity = "loaded parameters"
        log.warning("model %s: no weight file to hash, so its identity (provenance and score cache key) is the "
                    "sha256 of its loaded parameters (computed now; slow for large models)", name)
        model = load_weights()
        wsha = state_dict_sha256(model)
    fingerprint = {
        "name": name if name in EMBEDDED else (Path(name).name if folder is not None else name),
        "source": source,
        "weights_sha256": wsha,
        "weights_identity": identity,
        "tokenizer_sha256": tokenizer_sha256(tokenizer),
        "files_sha256": digest_files(files) if files else None,
        "files": files,
        "dtype": str(tdtype).replace("torch.", ""),
        "device": dev,
        "kind": kind,
    }
    if rounded is not None:     # part of the score cache's key (scoring.cache.model_key)
        fingerprint["weights_rounded_to"] = str(rounded).replace("torch.", "")
    fingerprint |= {k: meta[k] for k in ("gguf_sha256", "original", "quantization") if k in meta}
    return LoadedModel(model=model, tokenizer=tokenizer, name=fingerprint["name"], kind=kind, device=dev,
                       dtype=fingerprint["dtype"], fingerprint=fingerprint, path=where, loader=load_weights)
