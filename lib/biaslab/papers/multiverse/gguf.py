"""The precision level ``q4_gguf``: the embedded model's own 4-bit GGUF file, computed by llama.cpp's kernels
through a local ``llama_cpp.server`` (llama-cpp-python, the ``served-test`` extra; ``make reproduce`` does not
install it, and then the universe is recorded as not available, with this reason).

The server listens on 127.0.0.1 on a free port, serves one model, is stopped by its own pid (never by name) when
the universes that need it are done, and its requests are bounded by the served backend (one at a time,
retries and timeouts of ``biaslab.scoring``).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette")


def unavailable(model: str) -> str | None:
    """Why the q4_gguf universe cannot run for ``model`` here (None: it can)."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        return (f"not available: the llama.cpp server is not installed (missing {', '.join(missing)}; "
                "`pip install -e '.[served-test]'`)")
    from ... import models
    try:
        models.gguf_path(model)
    except Exception as exc:                          # not an embedded model: no GGUF file of its own
        return f"not available: {model} has no GGUF file here ({str(exc).splitlines()[0][:120]})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _adds_bos(path) -> bool:
    """Whether llama.cpp prepends BOS itself (the GGUF's ``tokenizer.ggml.add_bos_token``)."""
    from gguf import GGUFReader
    f = GGUFReader(str(path)).fields.get("tokenizer.ggml.add_bos_token")
    return bool(f.parts[f.data[0]][0]) if f is not None else False


class Server:
    """``with Server("smollm2-135m-instruct", tokenizer) as spec:`` a served-model spec for ``models.load``."""

    def __init__(self, model: str, tokenizer, threads: int | None = None, timeout: float = 180):
        from ... import models
        self.model, self.tokenizer, self.timeout = model, tokenizer, timeout
        self.path = models.gguf_path(model)
        self.threads = threads or max(1, (os.cpu_count() or 1))
        self.port = _free_port()
        self.proc = None

    def __enter__(self) -> dict:
        import httpx
        self.log = tempfile.NamedTemporaryFile("w+", prefix="biaslab-llama-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(self.path), "--model_alias", self.model,
             "--logits_all", "true", "--host", "127.0.0.1", "--port", str(self.port), "--n_threads",
             str(self.threads), "--n_threads_batch", str(self.threads), "--n_ctx", "4096", "--verbose", "false"],
            stdout=self.log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{self.port}/v1"
        t0 = time.time()
        while time.time() - t0 < self.timeout:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"llama_cpp.server exited ({self.proc.returncode}): {self.log.read()[-500:]}")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            self.__exit__()
            raise RuntimeError(f"llama_cpp.server not ready after {self.timeout:.0f} s")
        tok = self.tokenizer
        bos = tok.bos_token if tok.bos_token is not None else tok.eos_token
        return {"base_url": url, "model": self.model, "name": f"{self.model} (q4 GGUF, llama.cpp)",
                "max_concurrency": 1, "prefix": "" if _adds_bos(self.path) else (bos or "")}

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None
