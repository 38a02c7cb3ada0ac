"""Test helpers for the served backend: a real llama-cpp-python server (:mod:`biaslab.models.local_server`), and a small
fault-injecting proxy.

The server is started on 127.0.0.1 on a free port with the embedded SmolLM2 GGUF file, waited for, and stopped by
its own pid (never by name). The proxy forwards to it and can answer 429, break JSON, drop logprobs or demand a key;
it records every request body it forwarded successfully, so tests can count requests.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections import Counter

import httpx

from biaslab.models.local_server import ALIAS, PREFIX, LlamaServer, free_port, have_llama_server, spec  # noqa: F401


class FaultProxy:
    """An HTTP proxy in a thread: forwards /v1/* to ``upstream`` unless a fault is set.

    Faults: ``n_429`` (answer the next n POSTs with 429 and ``Retry-After: retry_after``), ``corrupt``
    (``"json"``: invalid JSON; ``"no_logprobs"``: drop choices[0].logprobs), ``key`` (demand ``Bearer key``),
    ``block`` (a set of paths that answer 404). ``ok_bodies`` counts the bodies forwarded with a 200 answer.
    ``lists=True`` makes it a server that takes a list of prompts per ``/completions`` request, as vLLM and SGLang
    do (llama-cpp-python's server rejects lists): each prompt goes upstream alone, and the answers come back as one
    response with a choice per prompt (``index`` = its place in the list); ``list_sizes`` records each list's length.
    """

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.n_429 = 0
        self.retry_after = "0.2"
        self.corrupt = None
        self.key = None
        self.block: set = set()
        self.ok_bodies: Counter = Counter()
        self.n_posts = 0
        self.n_429_sent = 0
        self.lists = False
        self.list_sizes: list[int] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _reply(self, code, body: bytes, headers=()):
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _auth_ok(self):
                return proxy.key is None or self.headers.get("Authorization") == f"Bearer {proxy.key}"

            def do_GET(self):
                if not self._auth_ok():
                    return self._reply(401, b'{"error": "invalid api key"}')
                r = httpx.get(proxy.upstream + self.path[len("/v1"):], timeout=60)
                self._reply(r.status_code, r.content)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = self.path[len("/v1"):]
                with proxy.lock:
                    proxy.n_posts += 1
                    throttle = proxy.n_429 > 0
                    if throttle:
                        proxy.n_429 -= 1
                        proxy.n_429_sent += 1
                if not self._auth_ok():
                    return self._reply(401, b'{"error": "invalid api key"}')
                if path in proxy.block:
                    return self._reply(404, b'{"detail": "Not Found"}')
                if throttle:
                    return self._reply(429, b'{"error": "rate limited"}', [("Retry-After", proxy.retry_after)])
                try:
                    prompt = json.loads(body).get("prompt") if path == "/completions" else None
                    if proxy.lists and isinstance(prompt, list):
                        r = proxy.answer_list(path, json.loads(body))
                    else:
                        r = httpx.post(proxy.upstream + path, content=body, timeout=300,
                                       headers={"content-type": "application/json"})
                except httpx.HTTPError:
                    return self._reply(502, b'{"error": "upstream unreachable"}')
                content = r.content
                if r.status_code == 200:
                    if proxy.corrupt == "json":
                        content = content[: len(content) // 2]
                    elif proxy.corrupt == "no_logprobs":
                        d = json.loads(content)
                        d["choices"][0].pop("logprobs", None)
                        content = json.dumps(d).encode()
                    with proxy.lock:
                        proxy.ok_bodies[(path, body)] += 1
                self._reply(r.status_code, content, [("Content-Type", "application/json")])

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer_list(self, path: str, body: dict) -> httpx.Response:
        """One upstream request per prompt of the list, merged into one response (usage summed)."""
        with self.lock:
            self.list_sizes.append(len(body["prompt"]))
        merged: dict = {"choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
        for i, prompt in enumerate(body["prompt"]):
            r = httpx.post(self.upstream + path, json={**body, "prompt": prompt}, timeout=300)
            if r.status_code != 200:
                return r
            d = r.json()
            merged.update({k: v for k, v in d.items() if k not in ("choices", "usage")})
            merged["choices"].append({**d["choices"][0], "index": i})
            for k in merged["usage"]:
                merged["usage"][k] += (d.get("usage") or {}).get(k, 0)
        merged["choices"].reverse()            # clients must order by index, not by position
        return httpx.Response(200, json=merged)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()



class LlamaReference:
    """llama.cpp's own numbers for the GGUF file the test server serves, computed in-process (``llama_cpp.Llama``:
    the same kernels on the same CPU, the server's settings) and independently of the server's log-prob code: the
    token ids are evaluated once and each log-prob is read from the log-softmax of the logits before it.

    A served number that differs from these by more than float noise is a fault of the served path (transport,
    echo, offsets, span location, the first token's opening request, top-k merging), whatever the CPU: quantized
    kernels differ between instruction sets, but server and reference run the same ones."""

    def __init__(self, server: LlamaServer):
        import llama_cpp
        self.np = __import__("numpy")
        self.llm = llama_cpp.Llama(model_path=server.gguf, logits_all=True, n_ctx=server.n_ctx,
                                   n_threads=server.threads, n_threads_batch=server.threads, verbose=False)

    def _eval(self, text: str) -> tuple[list[int], "object"]:
        """Token ids of ``PREFIX + text`` (tokenized as the server does) and their logits rows."""
        llm = self.llm
        ids = llm.tokenize((PREFIX + text).encode("utf-8"), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        return ids, llm.scores[: len(ids)]

    def _logp(self, logits, rows) -> "object":
        """Log-softmax of the given logits rows, in float64 (only the rows read: a row is the whole vocabulary)."""
        from scipy.special import log_softmax
        return log_softmax(self.np.asarray(logits[rows], dtype=self.np.float64), axis=-1)

    def span(self, text: str, start: int, end: int) -> tuple[float, int]:
        """(sum log-prob, n tokens) of the tokens of ``text`` that start in characters [start, end) of ``text``."""
        ids, logits = self._eval(text)
        pieces = [self.llm.detokenize([t], prev_tokens=ids[:i], special=True).decode("utf-8", "ignore")
                  for i, t in enumerate(ids)]
        pos, scored = len(PREFIX) - len(pieces[0]), []
        for i, piece in enumerate(pieces):
            if i > 0 and start <= pos - len(PREFIX) < end:
                scored.append(i)
            pos += len(piece)
        if not scored:
            return 0.0, 0
        logp = self._logp(logits, [i - 1 for i in scored])
        return float(sum(logp[j, ids[i]] for j, i in enumerate(scored))), len(scored)

    def next_token(self, text: str, k: int) -> dict[str, float]:
        """The ``k`` most likely next tokens after ``text`` as {token string: log-prob} (duplicates merged)."""
        ids, logits = self._eval(text)
        row = self._logp(logits, [len(ids) - 1])[0]
        out: dict[str, float] = {}
        for t in self.np.argsort(-row)[:k]:
            s = self.llm.detokenize([int(t)], prev_tokens=ids, special=True).decode("utf-8", "ignore")
            out[s] = float(self.np.logaddexp(out[s], row[t])) if s in out else float(row[t])
        return out
