"""A fake OpenAI-compatible server with named faults, for fast tests of the served backend (no model).

:class:`FakeServer` answers ``GET /v1/models``, ``POST /v1/completions`` (echo, logprobs, top_logprobs, lists of
prompts) and ``POST /v1/chat/completions`` from a deterministic toy "model": words are tokens (with their leading
white space), each token's log-prob depends on its length and place, the next token is " A" with a fixed top-k. It
listens on 127.0.0.1 (a free port) in a thread, started and stopped by ``with``; every request is recorded
(``requests``), at most ``max_requests`` are answered (then 400), and no answer takes longer than
:data:`MAX_STALL_S` however a fault is set.

Faults (``server.faults[name] = value``; each a way a real server has misbehaved):

=====================  ====================================================================================
``model_changes_after`` after this many answered POSTs, answers name ``<model>-v2`` (a model swapped mid-run)
``nan_logprob``         token_logprobs[2] of every echo is NaN
``positive_logprob``    token_logprobs[2] of every echo is +27.25
``byte_offsets``        text_offset counted in UTF-8 bytes, not characters
``positive_top``        every top_logprobs value raised by 8.5 (a label mass in the thousands)
``top_mass``            every top_logprobs value is -0.1 (each a log-prob, together a mass over 1)
``nan_top``             one top_logprobs value is NaN
``http_500``            the next N POSTs answer 500
``malformed_echo``      the echo's text_offset list is one entry short
``delay_s``             answers to POSTs wait this long (bounded by MAX_STALL_S) before the status line
``trickle_s``           the body of a POST's answer is sent one byte at a time, this long between bytes (bounded)
``retry_after``         the next N POSTs answer 429 with ``Retry-After: 3600``
``no_echo_logprobs``    completions answer with ``logprobs: null`` (a definite "no prompt log-probs")
=====================  ====================================================================================
"""

from __future__ import annotations

import http.server
import json
import math
import re
import threading
import time

#: the longest any fault may hold an answer (keeps every test bounded in time)
MAX_STALL_S = 8.0
TOP = {" A": -0.4, " B": -1.5, " C": -2.8, " D": -3.5}
#: the alternatives listed beside an echoed token (small, so that with the token they stay a distribution)
ALTERNATIVES = {" A": -4.0, " B": -5.0, " C": -6.0, " D": -7.0}


def tokenize(text: str) -> list[str]:
    return re.findall(r"\s*\S+|\s+", text)


def token_logprob(tok: str, i: int) -> float:
    return -(0.5 + (len(tok) % 5) * 0.7 + (i % 3) * 0.1)


class FakeServer:
    def __init__(self, model: str = "fake-model", max_requests: int = 500):
        self.model = model
        self.faults: dict = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        self.max_requests = max_requests
        self.answered_posts = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, code: int, obj, headers=(), slow: bool = False):
                body = json.dumps(obj).encode()          # NaN stays NaN, as Python servers send it
                delay = min(float(fake.faults.get("delay_s", 0)), MAX_STALL_S) if slow else 0
                if delay:
                    time.sleep(delay)
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                step = float(fake.faults.get("trickle_s", 0)) if slow else 0
                try:
                    if step and code == 200:
                        t_end = time.monotonic() + MAX_STALL_S
                        for i in range(len(body)):
                            if time.monotonic() > t_end:          # bounded: the rest at once
                                self.wfile.write(body[i:])
                                break
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                            time.sleep(step)
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):   # the client gave up
                    pass

            def _admit(self, method: str, body) -> bool:
                refuse = None
                with fake.lock:
                    fake.requests.append((method, self.path, body))
                    if len(fake.requests) > fake.max_requests:
                        refuse = (400, {"error": "the fake server's request budget is spent"}, ())
                    elif method == "POST" and fake.faults.get("http_500", 0) > 0:
                        fake.faults["http_500"] -= 1
                        refuse = (500, {"error": "internal server error (injected)"}, ())
                    elif method == "POST" and fake.faults.get("retry_after", 0) > 0:
                        fake.faults["retry_after"] -= 1
                        refuse = (429, {"error": "rate limited"}, [("Retry-After", "3600")])
                if refuse:
                    self._reply(*refuse)
                return refuse is None

            def do_GET(self):
                if not self._admit("GET", None):
                    return
                if self.path.rstrip("/") == "/v1/models":
                    return self._reply(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
                self._reply(404, {"error": "not found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self._admit("POST", body):
                    return
                with fake.lock:
                    fake.answered_posts += 1
                    n = fake.answered_posts
                after = fake.faults.get("model_changes_after")
                name = fake.model + ("-v2" if after is not None and n > after else "")
                if self.path == "/v1/completions":
                    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
                    choices = [{**fake.completion(p, body), "index": i} for i, p in enumerate(prompts)]
                elif self.path == "/v1/chat/completions":
                    choices = [fake.chat(body)]
                else:
                    return self._reply(404, {"error": "not found"})
                self._reply(200, {"id": f"cmpl-{n}", "object": "text_completion", "model": name,
                                  "choices": choices, "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
                            slow=True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ------------------------------------------------------------------------------------ the "model" ---
    def _top(self, k: int, token: str | None = None, value: float | None = None) -> dict:
        base = TOP if token is None else ALTERNATIVES
        top = dict(list(base.items())[:max(1, min(int(k), len(base)))])
        if token is not None:
            top[token] = value
        if "positive_top" in self.faults:
            top = {t: v + 8.5 for t, v in top.items()}
        if "top_mass" in self.faults:
            top = {t: -0.1 for t in top}
        if "nan_top" in self.faults:
            top[next(iter(top))] = math.nan
        return top

    def completion(self, prompt: str, body: dict) -> dict:
        echo, k = bool(body.get("echo")), body.get("logprobs")
        toks = (tokenize(prompt) if echo else []) + [" A"]
        text = (prompt if echo else "") + " A"
        size = (lambda s: len(s.encode("utf-8"))) if "byte_offsets" in self.faults else len
        offs, at = [], 0 if echo else size(prompt)
        for t in toks:
            offs.append(at)
            at += size(t)
        vals = [token_logprob(t, i) for i, t in enumerate(toks[:-1])] + [TOP[" A"]]
        tops = [self._top(k or 1, t, v) for t, v in zip(toks[:-1], vals)] + [self._top(k or 1)]   # then the next token
        if echo:
            vals[0], tops[0] = None, None
            if len(vals) > 3:
                if "nan_logprob" in self.faults:
                    vals[2] = math.nan
                if "positive_logprob" in self.faults:
                    vals[2] = 27.25
            if "malformed_echo" in self.faults:
                offs = offs[:-1]
        lp = None if k is None or "no_echo_logprobs" in self.faults else {
            "tokens": toks, "text_offset": offs, "token_logprobs": vals, "top_logprobs": tops}
        return {"text": text, "logprobs": lp, "finish_reason": "length"}

    def chat(self, body: dict) -> dict:
        k = int(body.get("top_logprobs") or 1)
        top = self._top(k)
        content = [{"token": "A", "logprob": top.get(" A", -0.4),
                    "top_logprobs": [{"token": t.strip(), "logprob": v} for t, v in top.items()]}]
        return {"index": 0, "message": {"role": "assistant", "content": "A"},
                "logprobs": {"content": content} if body.get("logprobs") else None, "finish_reason": "length"}

    # ------------------------------------------------------------------------------------- lifecycle ---
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def posts(self, path: str | None = None) -> list[dict]:
        return [b for m, p, b in self.requests if m == "POST" and (path is None or p == "/v1" + path)]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
