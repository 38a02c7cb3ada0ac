"""What identifies a local model: the sha256 of every file its loader opens, recorded per file.

:func:`loader_files` lists the files ``transformers`` reads from a model folder (config, generation config, tokenizer
files, chat template, weights, weight index); :func:`files_sha256` hashes each through the one memo of
:mod:`biaslab.files.hashing` (a file is hashed again whenever its size, mtime, ctime or inode change). A model's
fingerprint records them per file (``files``) and as one digest (``files_sha256``), which keys the score cache: any
edit of any of them is a new model, a cache miss and a different MANIFEST.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path

from ..files.hashing import file_sha256

#: weight formats in the order transformers prefers them; only the first one present is loaded
WEIGHT_FORMATS = (".safetensors", ".bin", ".pt")
#: other weight formats a model repository may hold but the PyTorch loader never opens
OTHER_WEIGHTS = (".pth", ".h5", ".msgpack", ".onnx", ".onnx_data", ".gguf", ".ot", ".tflite", ".mlmodel", ".ckpt")
#: files that are never read by the loader: documentation, licences, biaslab's own record of a conversion
NOT_LOADED = ("README*", "LICENSE*", "LICENCE*", "NOTICE*", "USE_POLICY*", "*.md", "biaslab.json")
#: sub-folders the tokenizer reads (named chat templates)
LOADED_SUBFOLDERS = ("additional_chat_templates",)


def _weight_files(folder: Path) -> list[Path]:
    for suffix in WEIGHT_FORMATS:
        files = sorted(f for f in folder.glob(f"*{suffix}") if f.is_file())
        if files:
            return files
    return []


def loader_files(folder: str | Path) -> list[Path]:
    """The files of a model folder that loading it reads: every top-level file except documentation, licences,
    biaslab's conversion record and weight files of a format the loader does not use (with ``.safetensors``
    present, ``pytorch_model.bin`` is not read), plus the named chat templates."""
    folder = Path(folder)
    weights = _weight_files(folder)
    chosen = weights[0].suffix if weights else None
    skipped = tuple(s for s in WEIGHT_FORMATS + OTHER_WEIGHTS if s != chosen)
    out = []
    candidates = [f for f in folder.iterdir() if f.is_file()]
    for sub in LOADED_SUBFOLDERS:
        if (folder / sub).is_dir():
            candidates += [f for f in (folder / sub).rglob("*") if f.is_file()]
    for f in candidates:
        name = f.name
        if name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in NOT_LOADED):
            continue
        if name.endswith(skipped) or any(name.endswith(s + ".index.json") for s in skipped):
            continue
        out.append(f)
    return sorted(out)


def files_sha256(folder: str | Path) -> dict[str, str]:
    """{file name relative to the folder: sha256} of :func:`loader_files` (empty for a folder with none)."""
    folder = Path(folder)
    return {f.relative_to(folder).as_posix(): file_sha256(f) for f in loader_files(folder)}


def digest_files(files: dict[str, str]) -> str:
    """One sha256 over ``{name: sha256}`` (the lines ``<name> <sha256>``, sorted)."""
    return hashlib.sha256("".join(f"{n} {d}\n" for n, d in sorted(files.items())).encode()).hexdigest()


def weights_sha256(folder: str | Path, files: dict[str, str] | None = None) -> str | None:
    """sha256 of a model folder's weight file (or, for sharded weights, of the lines ``<file> <sha256>``); None
    when it has none. ``files``: its :func:`files_sha256`, when already computed."""
    folder = Path(folder)
    names = [f.name for f in _weight_files(folder)]
    if not names:
        return None
    digests = {n: (files[n] if files and n in files else file_sha256(folder / n)) for n in names}
    return digests[names[0]] if len(names) == 1 else digest_files(digests)


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
    import torch
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
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
