"""The precision level ``q4_gguf``: the embedded model's own 4-bit GGUF file, computed by llama.cpp's kernels
through a local ``llama_cpp.server`` (llama-cpp-python, the ``served-test`` extra; ``make reproduce`` does not
install it, and then the universe is recorded as not available, with this reason).

The server listens on 127.0.0.1 on a free port, serves one model, is stopped by its own pid (never by name) when
the universes that need it are done, and its requests are bounded by the served backend (one at a time,
retries and timeouts of ``biaslab.scoring``).
"""

from __future__ import annotations

import os

from ...models import local_server


def unavailable(model: str) -> str | None:
    """Why the q4_gguf universe cannot run for ``model`` here (None: it can)."""
    missing = local_server.missing_server_modules()
    if missing:
        return (f"not available: the llama.cpp server is not installed (missing {', '.join(missing)}; "
                "`pip install -e '.[served-test]'`)")
    from ... import models
    try:
        models.gguf_path(model)
    except Exception as exc:                          # not an embedded model: no GGUF file of its own
        return f"not available: {model} has no GGUF file here ({str(exc).splitlines()[0][:120]})"
    return None


def _adds_bos(path) -> bool:
    """Whether llama.cpp prepends BOS itself (the GGUF's ``tokenizer.ggml.add_bos_token``)."""
    from gguf import GGUFReader
    f = GGUFReader(str(path)).fields.get("tokenizer.ggml.add_bos_token")
    return bool(f.parts[f.data[0]][0]) if f is not None else False


class Server:
    """``with Server("smollm2-135m-instruct", tokenizer) as spec:`` a served-model spec for ``models.load``: the
    model's GGUF file on :class:`biaslab.models.local_server.LlamaServer`, under the model's own name."""

    def __init__(self, model: str, tokenizer, threads: int | None = None, timeout: float = 180):
        self.model, self.tokenizer, self.timeout = model, tokenizer, timeout
        self.server = local_server.LlamaServer(threads=threads or max(1, os.cpu_count() or 1), model=model, alias=model,
                                               n_ctx=4096)

    def __enter__(self) -> dict:
        self.server.start(self.timeout)
        tok = self.tokenizer
        bos = tok.bos_token if tok.bos_token is not None else tok.eos_token
        return {"base_url": self.server.url, "model": self.model, "name": f"{self.model} (q4 GGUF, llama.cpp)",
                "max_concurrency": 1, "prefix": "" if _adds_bos(self.server.gguf) else (bos or "")}

    def __exit__(self, *exc) -> None:
        self.server.stop()
