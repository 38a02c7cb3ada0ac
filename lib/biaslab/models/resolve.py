"""Resolving a model spec before any work: which kind of model it is, the device and dtype it can run in, and the
one-line messages that say what was not found and how to fix it.

:func:`check_spec` resolves a spec in seconds without loading it; :func:`check_device` and :func:`check_dtype` refuse
a device this machine does not have (``cuda`` on a CPU machine) and a dtype name torch has no float for
(``float33``), so ``biaslab reproduce`` stops before a notebook starts instead of failing inside it.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from .embedded import EMBEDDED, ModelNotFoundError, closest
from .provenance import check_safetensors
from .served import looks_served, resolve_spec

#: dtype names a model can be loaded in (``auto``: bfloat16 on a CUDA device that supports it, else float32)
DTYPES = ("auto", "float32", "bfloat16", "float16", "float64")
#: device types torch knows (an index may follow: ``cuda:1``)
DEVICE_TYPES = ("auto", "cpu", "cuda", "mps", "xpu")


def not_found_message(name: str, cause: BaseException | None = None) -> str:
    hint = closest(name)
    msg = (f"cannot find model {name!r}." + (f" Did you mean {hint!r}?" if hint else "")
           + f" Embedded models (no download needed): {', '.join(EMBEDDED)}. "
           "To use your own model, pass a local folder that holds config.json, the weights and the tokenizer "
           "(as written by model.save_pretrained(folder) and tokenizer.save_pretrained(folder)), "
           "or a Hugging Face id that is in your local cache or downloadable.")
    if cause is not None:
        msg += f" (loading from the hub failed: {type(cause).__name__}: {str(cause).splitlines()[0][:200]})"
    return msg


#: keys of an imported-model spec: ``{"imported": PATH}`` plus optional ``format`` (lm-eval, inspect, eee; detected
#: when left out), ``tokenizer`` (a name or folder whose tokenizer counts the tokens the log does not record),
#: ``model`` (which model's logs, where the path holds several), ``name`` (the model's name in tables; default: the
#: one the log records) and ``benchmark`` (``bbq`` or ``mbbq``, where an lm-eval task's texts cannot tell)
IMPORTED_KEYS = {"imported", "format", "tokenizer", "model", "name", "benchmark"}


def imported_spec(spec: Any) -> dict | None:
    """The one place that tells an imported model (another harness's log, answered by the ``imported`` backend) from
    a local or served one: ``{"imported": PATH, ...}`` or the same mapping as a JSON string; anything else gives
    None."""
    if isinstance(spec, str) and spec.lstrip().startswith("{") and '"imported"' in spec:
        import json
        spec = json.loads(spec)
    if not (isinstance(spec, dict) and "imported" in spec):
        return None
    unknown = set(spec) - IMPORTED_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} in imported-model spec; known: {sorted(IMPORTED_KEYS)}")
    if not Path(str(spec["imported"])).expanduser().exists():
        raise ModelNotFoundError(f"imported model: {spec['imported']} does not exist (a folder of lm-eval output, "
                                 "an lm-eval samples file, an inspect .eval log or Every Eval Ever records)")
    return dict(spec)


def check_spec(name: Any) -> str:
    """Resolve a model spec without loading it (seconds, before any work): ``"embedded"``, ``"folder"`` or ``"hub"``.

    Raises :class:`ModelNotFoundError` for a name that is not embedded, not a model folder, not in the local Hugging
    Face cache and unknown to (or unreachable on) the hub. A served-model spec (:func:`resolve_spec`) gives
    ``"served"`` (its server is probed when scoring starts, before the first scoring request); an imported one
    (:func:`imported_spec`) ``"imported"``.
    """
    if imported_spec(name) is not None:
        return "imported"
    if looks_served(name):
        resolve_spec(name)          # raises ValueError on a malformed spec
        return "served"
    if not isinstance(name, str) or not name.strip():
        raise ModelNotFoundError(f"a model spec must be a non-empty string, got {name!r}")
    if name in EMBEDDED:
        return "embedded"
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise ModelNotFoundError(f"{p} is not a model folder (no config.json). " + not_found_message(name))
        check_safetensors(p)
        return "folder"
    if name.startswith(("/", ".", "~")) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", name):
        raise ModelNotFoundError(not_found_message(name))
    try:
        from huggingface_hub import try_to_load_from_cache
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return "hub"
        from huggingface_hub import model_info
        model_info(name, timeout=10)
        return "hub"
    except Exception as exc:   # not found, offline, unreachable: loading would fail the same way
        raise ModelNotFoundError(not_found_message(name, exc)) from exc


def check_dtype(dtype: Any) -> None:
    """Refuse (ValueError) a dtype name a model cannot be loaded in; torch dtypes themselves pass."""
    if not isinstance(dtype, str):
        return
    if dtype not in DTYPES:
        close = difflib.get_close_matches(dtype, DTYPES, n=1)
        raise ValueError(f"dtype={dtype!r} is not a dtype a model can be loaded in; choose one of "
                         f"{', '.join(DTYPES)}" + (f" (did you mean {close[0]!r}?)" if close else ""))


def check_device(device: Any) -> None:
    """Refuse (ValueError) a device this machine does not have: ``cuda`` without a CUDA device torch can use,
    ``cuda:3`` with fewer GPUs, ``mps`` off Apple silicon, or a name torch does not know. ``auto`` and ``cpu``
    pass without importing torch."""
    if not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'auto', 'cpu' or 'cuda:0', got {device!r}")
    kind, _, index = device.partition(":")
    if kind not in DEVICE_TYPES or (index and not index.isdigit()) or (kind == "auto" and index):
        close = difflib.get_close_matches(kind, DEVICE_TYPES, n=1)
        raise ValueError(f"device={device!r} is not a device; choose auto, cpu, cuda, cuda:N or mps"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    if kind in ("auto", "cpu"):
        return
    import torch
    if kind == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise ValueError(f"device={device!r} but torch sees no CUDA device on this machine (torch "
                             f"{torch.__version__}, {built}); pass -p device=cpu, or device=auto to use a GPU "
                             "where there is one")
        if index and int(index) >= n:
            raise ValueError(f"device={device!r} but this machine has {n} CUDA device(s) (cuda:0 to cuda:{n - 1})")
    elif kind == "mps":
        if not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()):
            raise ValueError(f"device={device!r} but torch has no MPS (Apple GPU) device here; pass -p device=cpu "
                             "or device=auto")
    elif kind == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise ValueError(f"device={device!r} but torch has no XPU device here; pass -p device=cpu or device=auto")


def resolve_device(device: str = "auto") -> str:
    import torch
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def resolve_dtype(dtype: Any = "auto", device: str = "cpu"):
    """``auto``: bfloat16 on a CUDA device that supports it (float16 on older GPUs), float32 elsewhere."""
    import torch
    if not isinstance(dtype, str):
        return dtype
    check_dtype(dtype)
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def detect_kind(config) -> str:
    from transformers.models.auto import modeling_auto as ma
    for arch in getattr(config, "architectures", None) or []:
        if arch.endswith(("ForCausalLM", "LMHeadModel")) and not getattr(config, "is_encoder_decoder", False):
            return "causal"
        if arch.endswith("ForConditionalGeneration") and getattr(config, "is_encoder_decoder", False):
            return "seq2seq"
        if arch.endswith("ForMaskedLM"):
            return "masked"
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    mt = config.model_type
    if mt in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(config, "is_decoder", False):
        return "masked"
    if mt in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal"
    raise ValueError(f"cannot tell whether {config.model_type!r} is a causal, seq2seq or masked LM; pass kind=")
