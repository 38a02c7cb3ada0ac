"""A local OpenAI-compatible server for the embedded SmolLM2 GGUF file: llama-cpp-python's server on 127.0.0.1.

What ``biaslab reproduce --served`` (``make reproduce-served``) runs notebooks 3 and 4 against, and what the
served-backend tests start. The server listens on 127.0.0.1 only, in its own session (a Ctrl-C in the terminal
reaches biaslab, which stops the kernels first and then the server), and is stopped by its own pid, never by name.
Needs the ``served-test`` extra (``make served-test``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .. import models

ALIAS = "smollm2-135m-instruct-q4_1"
#: SmolLM2's BOS text: llama.cpp adds no BOS for this model, the in-process engine does
PREFIX = "<|im_start|>"
#: tried first by ``reproduce --served`` (a stable port keeps reruns' manifests identical); a free one otherwise
DEFAULT_PORT = 8001


def free_port(preferred: int | None = None) -> int:
    if preferred:
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", preferred))
            return preferred
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: what ``python -m llama_cpp.server`` imports (the ``served-test`` extra)
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette")


def missing_server_modules() -> list[str]:
    import importlib.util
    return [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]


def have_llama_server() -> bool:
    return not missing_server_modules()


def spec(url: str, **kw) -> dict:
    """The served-model spec of this server (what notebooks take in ``models``)."""
    return {"base_url": url, "model": ALIAS, "prefix": PREFIX, "max_concurrency": 1, "name": "smollm2-served", **kw}


class LlamaServer:
    """``python -m llama_cpp.server`` on an embedded model's GGUF file (SmolLM2 unless told), serving it under
    ``alias``; use as a context manager or start()/stop()."""

    def __init__(self, port: int | None = None, threads: int = 1, model: str = "smollm2-135m-instruct",
                 alias: str = ALIAS, n_ctx: int = 2048):
        self.port = port or free_port()
        self.gguf = str(models.gguf_path(model))
        self.alias, self.n_ctx = alias, n_ctx
        self.threads = threads
        self.proc: subprocess.Popen | None = None
        self.log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", self.alias,
                "--logits_all", "true", "--host", "127.0.0.1", "--port", str(self.port), "--n_threads",
                str(self.threads), "--n_threads_batch", str(self.threads), "--n_ctx", str(self.n_ctx),
                "--verbose", "false"]

    def start(self, timeout: float = 120) -> "LlamaServer":
        import httpx
        if not have_llama_server():
            raise RuntimeError("the llama.cpp server is not installed: run `make served-test` (installs the "
                               "served-test extra: llama-cpp-python, uvicorn, fastapi, sse-starlette)")
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads))
        self.log = tempfile.NamedTemporaryFile("w+", prefix="llama-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}:\n{self.log.read()[-2000:]}")
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not ready on port {self.port} after {timeout} s")

    def stop(self) -> None:
        """SIGTERM by pid, SIGKILL after 10 s; the log file is removed."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.log is not None:
            self.log.close()
            with contextlib.suppress(OSError):
                os.unlink(self.log.name)
            self.log = None

    def kill(self) -> None:
        """As a crash would: SIGKILL, no shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
