"""An async HTTP client for OpenAI-compatible servers: replicas, bounded concurrency, retries, rate limits.

:func:`run_requests` sends a list of JSON requests and hands each validated response to a callback as soon as it
arrives (the backend writes it to the score cache there, before it is used). It runs its own event loop in a worker
thread, so it works the same inside Jupyter (whose loop is already running) and in a script.

- Replicas: each base URL takes at most ``max_concurrency`` requests at once; a request goes to the replica with the
  least outstanding work (estimated tokens in flight), so a slow replica gets less.
- Retries: 429, 5xx, timeouts and connection errors are retried with exponential backoff and full jitter, honouring
  ``Retry-After``; other 4xx are errors at once (401/403 name the API-key variable, never its value).
- Rate limits: client-side token buckets for requests per minute and tokens per minute (estimated before sending).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class ServedError(RuntimeError):
    """A request to a served model failed for good (after retries) or its response was unusable."""


class AuthError(ServedError):
    pass


class EndpointMissing(ServedError):
    pass


@dataclass
class Request:
    """One POST: ``path`` relative to the base URL (``/completions``), its JSON ``body``, a cost estimate in tokens
    for rate limits and load spreading, and a ``name`` used in error messages."""

    path: str
    body: dict
    cost: int = 1
    name: str = ""


@dataclass
class _Replica:
    url: str
    limit: int
    inflight: int = 0
    work: int = 0


class _Bucket:
    """A token bucket refilled at ``per_minute`` / 60 per second, holding at most one second's worth (so a run never
    bursts past the limit, whatever the server's window)."""

    def __init__(self, per_minute: float | None):
        self.rate = (per_minute or 0) / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.t = time.monotonic()

    async def take(self, n: float) -> None:
        if not self.rate:
            return
        need = min(n, self.capacity)
        while True:
            now = time.monotonic()
            self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
            self.t = now
            if self.level >= need:
                self.level -= n          # a request larger than the bucket leaves a debt that later ones wait for
                return
            await asyncio.sleep((need - self.level) / self.rate)


@dataclass
class ClientConfig:
    base_urls: Sequence[str]
    api_key_env: str | None = None
    max_concurrency: int = 4
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    timeout_s: float = 120.0
    max_retries: int = 6
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    stats: dict = field(default_factory=lambda: {"requests": 0, "retries": 0, "errors": 0})


def api_key(env: str | None) -> str | None:
    """The key from environment variable ``env`` (its name only is ever stored or printed)."""
    if not env:
        return None
    value = os.environ.get(env)
    if not value:
        raise AuthError(f"the served model's spec names api_key_env={env!r}, but environment variable {env} is not "
                        f"set (or empty). Set it in the environment that runs biaslab, e.g. `export {env}=...`; "
                        "the key itself never goes into a parameter, a notebook or a manifest.")
    return value


def _headers(cfg: ClientConfig) -> dict:
    key = api_key(cfg.api_key_env)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _retry_after(resp) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _short(text: str, n: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


async def _send_one(client, cfg: ClientConfig, replicas: list[_Replica], cond: asyncio.Condition, buckets,
                    req: Request, headers: dict):
    attempt = 0
    while True:
        async with cond:
            while True:
                free = [r for r in replicas if r.inflight < r.limit]
                if free:
                    rep = min(free, key=lambda r: (r.work, r.inflight))
                    rep.inflight += 1
                    rep.work += req.cost
                    break
                await cond.wait()
        await buckets[0].take(1)
        await buckets[1].take(req.cost)
        url = rep.url.rstrip("/") + req.path
        err, wait = None, None
        try:
            cfg.stats["requests"] += 1
            resp = await client.post(url, json=req.body, headers=headers, timeout=cfg.timeout_s)
        except Exception as exc:   # httpx transport errors: timeouts, resets, refused connections
            err = f"{type(exc).__name__}: {_short(exc) or 'no detail'} ({url})"
            resp = None
        finally:
            async with cond:
                rep.inflight -= 1
                rep.work -= req.cost
                cond.notify_all()
        if resp is not None:
            if resp.status_code == 200:
                try:
                    return resp.json()
                except ValueError:
                    raise ServedError(f"request {req.name or req.path}: the server at {url} answered 200 with invalid "
                                      f"JSON: {_short(resp.text, 200)!r}") from None
            if resp.status_code in (401, 403):
                raise AuthError(f"the server at {url} refused the API key (HTTP {resp.status_code}) read from "
                                f"environment variable {cfg.api_key_env or '(none: the spec has no api_key_env)'}; "
                                "check that variable (its value is not shown)")
            if resp.status_code in (404, 405, 501):
                raise EndpointMissing(f"the server at {url} has no endpoint {req.path} (HTTP {resp.status_code})")
            if resp.status_code not in RETRY_STATUS:
                raise ServedError(f"request {req.name or req.path}: HTTP {resp.status_code} from {url}: "
                                  f"{_short(resp.text)}")
            err, wait = f"HTTP {resp.status_code} from {url}", _retry_after(resp)
        cfg.stats["errors"] += 1
        if attempt >= cfg.max_retries:
            raise ServedError(f"request {req.name or req.path} failed after {attempt + 1} attempts; last error: {err}")
        backoff = random.uniform(0, min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** attempt))   # full jitter
        attempt += 1
        cfg.stats["retries"] += 1
        delay = max(backoff, wait or 0.0)
        log.warning("request %s: %s; retried (attempt %d of at most %d) after %.1f s", req.name or req.path, err,
                    attempt + 1, cfg.max_retries + 1, delay)
        await asyncio.sleep(delay)


async def _run(cfg: ClientConfig, requests: list[Request], validate, out: "queue.Queue"):
    import httpx
    headers = _headers(cfg)
    replicas = [_Replica(u, cfg.max_concurrency) for u in cfg.base_urls]
    cond = asyncio.Condition()
    buckets = (_Bucket(cfg.requests_per_minute), _Bucket(cfg.tokens_per_minute))
    limits = httpx.Limits(max_connections=cfg.max_concurrency * len(replicas) + 2)
    async with httpx.AsyncClient(limits=limits) as client:
        async def one(i: int, req: Request):
            resp = await _send_one(client, cfg, replicas, cond, buckets, req, headers)
            if validate is not None:
                validate(req, resp)
            out.put(("ok", i, resp))

        tasks = [asyncio.create_task(one(i, r)) for i, r in enumerate(requests)]
        try:
            for fut in asyncio.as_completed(tasks):
                await fut
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


def run_requests(cfg: ClientConfig, requests: list[Request], on_response: Callable[[int, Any], None],
                 validate: Callable[[Request, Any], None] | None = None, progress=None) -> None:
    """Send ``requests``; call ``on_response(i, json)`` in the calling thread for each, as each arrives.

    ``validate(request, json)`` runs first and raises :class:`ServedError` on an unusable response. The first
    failure stops the run (responses already handed over stay handed over) and is raised here.
    """
    if not requests:
        return
    out: queue.Queue = queue.Queue()
    box: dict = {}

    def worker():
        try:
            asyncio.run(_run(cfg, requests, validate, out))
        except BaseException as exc:   # handed to the calling thread
            box["error"] = exc
        finally:
            out.put(("done", None, None))

    th = threading.Thread(target=worker, name="biaslab-served", daemon=True)
    t0 = time.monotonic()
    th.start()
    n = 0
    while True:
        kind, i, resp = out.get()
        if kind == "done":
            break
        on_response(i, resp)
        n += 1
        if progress is not None:
            progress.update(1)
            dt = max(time.monotonic() - t0, 1e-9)
            progress.set_postfix(req_s=f"{n / dt:.2f}", errors=cfg.stats["errors"], refresh=False)
    th.join()
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, ServedError):
            raise type(exc)(f"{exc} [{n} of {len(requests)} responses of this call were received and cached; "
                            "re-running resumes from there]") from None
        raise exc


def get_json(cfg: ClientConfig, path: str) -> Any:
    """One GET (e.g. ``/models``) against the first replica, with the same retries."""
    import httpx
    url = cfg.base_urls[0].rstrip("/") + path
    last = None
    for attempt in range(cfg.max_retries + 1):
        try:
            cfg.stats["requests"] += 1
            r = httpx.get(url, headers=_headers(cfg), timeout=cfg.timeout_s)
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if r.status_code in (401, 403):
                raise AuthError(f"the server at {url} refused the API key (HTTP {r.status_code}) read from "
                                f"environment variable {cfg.api_key_env}; check that variable (its value is not "
                                "shown)")
            if r.status_code == 200:
                try:
                    return r.json()
                except json.JSONDecodeError:
                    raise ServedError(f"GET {url}: invalid JSON {_short(r.text, 200)!r}") from None
            if r.status_code in (404, 405):
                raise EndpointMissing(f"the server at {url} has no endpoint {path} (HTTP {r.status_code})")
            if r.status_code not in RETRY_STATUS:
                raise ServedError(f"GET {url}: HTTP {r.status_code}: {_short(r.text)}")
            last = f"HTTP {r.status_code}"
        time.sleep(random.uniform(0, min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** attempt)))
    raise ServedError(f"GET {url} failed after {cfg.max_retries + 1} attempts; last error: {last}. Is the server "
                      "running at that address?")
