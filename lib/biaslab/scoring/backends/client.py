"""An async HTTP client for OpenAI-compatible servers: replicas, bounded concurrency, retries, rate limits
(docs/served.md).

:func:`run_requests` sends a list of JSON requests and hands each validated response to a callback as soon as it
arrives (the backend caches it there, before it is used). It runs its own event loop in a worker thread, so it works
the same inside Jupyter (whose loop is already running) and in a script.

- Replicas: at most ``max_concurrency`` requests at once per base URL; a request goes to the replica with the least
  outstanding work (estimated tokens in flight). A replica whose last :data:`DEAD_AFTER` attempts all failed in
  transport is dropped, with a warning, while another is left.
- Retries: 429, 5xx, timeouts and connection errors are retried with exponential backoff and full jitter, honouring
  ``Retry-After``, within ``retry_budget_s`` per request (each wait printed); other 4xx fail at once
  (:class:`Refused`; 401/403 name the API-key variable, never its value; a 404 without ``/v1`` suggests it).
- ``timeout_s`` bounds each attempt as a whole (connect, headers and body), so a trickled body cannot keep it open.
- Secrets: the key is read from its environment variable when a run starts, refused (never shown) when it carries
  white space, and every error message passes through :func:`biaslab.files.redact.redact`.
- Rate limits: client-side token buckets for requests and tokens per minute (estimated before sending).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import queue
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ...files.redact import check_key_env, redact, remember

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
#: consecutive transport failures after which a replica is dropped (while another is left)
DEAD_AFTER = 2


class ServedError(RuntimeError):
    """A request to a served model failed for good (after retries) or its response was unusable. Transient: nothing
    of it is cached, and a rerun asks again. Its message is redacted (:func:`biaslab.files.redact.redact`)."""

    def __init__(self, message: object = ""):
        super().__init__(redact(str(message)))


class AuthError(ServedError):
    pass


class Refused(ServedError):
    """A definite answer: the server refuses this request (a 4xx other than 401/403 and the retried ones)."""


class EndpointMissing(Refused):
    pass


class InvalidResponse(ServedError):
    """A response that fails a check (model id, log-probs, offsets, top-k mass): never cached."""


@dataclass
class Request:
    """One POST: ``path`` relative to the base URL (``/completions``), its JSON ``body``, a cost estimate in tokens
    for rate limits and load spreading, and a ``name`` used in error messages."""

    path: str
    body: dict | None
    cost: int = 1
    name: str = ""
    method: str = "POST"


@dataclass
class _Replica:
    url: str
    limit: int
    inflight: int = 0
    work: int = 0
    failures: int = 0       # consecutive attempts that failed in transport


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
    retry_budget_s: float = 120.0
    stats: dict = field(default_factory=lambda: {"requests": 0, "retries": 0, "errors": 0})
    #: replicas dropped as dead (shared by every copy of this config, so later calls skip them too)
    dropped: set = field(default_factory=set)


def api_key(env: str | None) -> str | None:
    """The key from environment variable ``env`` (its name only is ever stored or printed). A key with white space
    around or inside it (a trailing newline copied from a file) is refused in one line that names the variable."""
    if not env:
        return None
    check_key_env(env)
    value = os.environ.get(env)
    if not value:
        raise AuthError(f"the served model's spec names api_key_env={env!r}, but environment variable {env} is not "
                        f"set (or empty). Set it in the environment that runs biaslab, e.g. `export {env}=...`; "
                        "the key itself never goes into a parameter, a notebook or a manifest.")
    remember(value)
    problem = None
    if value != value.rstrip():
        problem = "ends with a newline" if value.rstrip(" \t") != value.rstrip() else "ends with white space"
    elif value != value.lstrip():
        problem = "starts with white space"
    elif re.search(r"[\s\x00-\x1f\x7f]", value) or not value.isascii():
        problem = "contains white space or a character an HTTP header cannot carry"
    if problem:
        raise AuthError(f"the key in ${env} {problem} (the key is not shown): set it without, e.g. "
                        f"export {env}=\"$(tr -d '[:space:]' < keyfile)\"")
    return value


def _retry_after(resp) -> float | None:
    """The server's ``Retry-After`` in seconds (a number or an HTTP date), or None."""
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
    text = redact(" ".join(str(text).split()))
    return text if len(text) <= n else text[:n] + "..."


async def _send_one(client, cfg: ClientConfig, replicas: list[_Replica], cond: asyncio.Condition, buckets,
                    req: Request, headers: dict):
    attempt, waited = 0, 0.0
    while True:
        async with cond:
            while True:
                live = [r for r in replicas if r.url not in cfg.dropped] or replicas
                free = [r for r in live if r.inflight < r.limit]
                if free:
                    rep = min(free, key=lambda r: (r.work, r.inflight))
                    rep.inflight += 1
                    rep.work += req.cost
                    break
                await cond.wait()
        await buckets[0].take(1)
        await buckets[1].take(req.cost)
        url = rep.url.rstrip("/") + req.path
        err, wait, resp = None, None, None
        try:
            cfg.stats["requests"] += 1
            # the deadline bounds the whole attempt, body read in full; httpx's own timeout bounds each read (a
            # trickled body resets it)
            resp = await asyncio.wait_for(client.request(req.method, url, json=req.body, headers=headers,
                                                         timeout=cfg.timeout_s), cfg.timeout_s)
        except asyncio.TimeoutError:
            err = f"no complete answer within timeout_s={cfg.timeout_s:g} s ({url})"
            resp = None
        except Exception as exc:   # httpx transport errors: timeouts, resets, refused connections
            err = f"{type(exc).__name__}: {_short(exc) or 'no detail'} ({url})"
            resp = None
        finally:
            async with cond:
                rep.inflight -= 1
                rep.work -= req.cost
                rep.failures = 0 if resp is not None else rep.failures + 1
                _drop_if_dead(cfg, replicas, rep, err)
                cond.notify_all()
        if resp is not None:
            if resp.status_code == 200:
                try:
                    return resp.json(), url
                except ValueError:
                    raise ServedError(f"request {req.name or req.path}: the server at {url} answered 200 with invalid "
                                      f"JSON: {_short(resp.text, 200)!r}") from None
            if resp.status_code in (401, 403):
                raise AuthError(f"the server at {url} refused the API key (HTTP {resp.status_code}) read from "
                                f"environment variable {cfg.api_key_env or '(none: the spec has no api_key_env)'}; "
                                "check that variable (its value is not shown)")
            if resp.status_code in (404, 405, 501):
                hint = ""
                if resp.status_code == 404 and not rep.url.rstrip("/").endswith("/v1"):
                    hint = (f"; OpenAI-compatible servers answer under /v1: try base_url "
                            f"{rep.url.rstrip('/')}/v1")
                raise EndpointMissing(f"the server at {url} has no endpoint {req.path} (HTTP {resp.status_code})"
                                      + hint)
            if resp.status_code not in RETRY_STATUS:
                raise Refused(f"request {req.name or req.path}: HTTP {resp.status_code} from {url}: "
                              f"{_short(resp.text)}")
            err, wait = f"HTTP {resp.status_code} from {url}: {_short(resp.text, 120)}", _retry_after(resp)
        cfg.stats["errors"] += 1
        name = req.name or req.path
        if attempt >= cfg.max_retries:
            raise ServedError(f"request {name} failed after {attempt + 1} attempts; last error: {err}")
        left = cfg.retry_budget_s - waited
        if left <= 0:
            raise ServedError(f"request {name} failed after {attempt + 1} attempts and {waited:.1f} s of waits, its "
                              f"whole retry_budget_s={cfg.retry_budget_s:g} s; last error: {err}. Rerun later (answers "
                              "received are cached) or raise retry_budget_s in the model spec")
        backoff = random.uniform(0, min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** attempt))   # full jitter
        attempt += 1
        cfg.stats["retries"] += 1
        delay = min(max(backoff, wait or 0.0), left)
        asked = f" (Retry-After asked {wait:.0f} s)" if wait is not None and wait > delay else ""
        log.warning("request %s: %s; retried: waiting %.1f s%s, then attempt %d of at most %d (retry budget: %.1f of "
                    "%g s left after this wait)", name, err, delay, asked, attempt + 1, cfg.max_retries + 1,
                    left - delay, cfg.retry_budget_s)
        waited += delay
        await asyncio.sleep(delay)


def _drop_if_dead(cfg: ClientConfig, replicas: list[_Replica], rep: _Replica, err: str | None) -> None:
    """Drop ``rep`` (warning once) when its last :data:`DEAD_AFTER` attempts failed in transport and another replica
    is still live: the run goes on with the replicas that answer."""
    if rep.failures < DEAD_AFTER or rep.url in cfg.dropped:
        return
    live = [r.url for r in replicas if r.url not in cfg.dropped and r.url != rep.url]
    if live:
        cfg.dropped.add(rep.url)
        log.warning("replica %s dropped for the rest of the run: its last %d attempts failed (%s); continuing on %s",
                    rep.url, rep.failures, err, ", ".join(live))


async def _run(cfg: ClientConfig, requests: list[Request], validate, out: "queue.Queue"):
    import httpx
    key = api_key(cfg.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    replicas = [_Replica(u, cfg.max_concurrency) for u in cfg.base_urls]
    cond = asyncio.Condition()
    buckets = (_Bucket(cfg.requests_per_minute), _Bucket(cfg.tokens_per_minute))
    limits = httpx.Limits(max_connections=cfg.max_concurrency * len(replicas) + 2)
    async with httpx.AsyncClient(limits=limits) as client:
        async def one(i: int, req: Request):
            resp, url = await _send_one(client, cfg, replicas, cond, buckets, req, headers)
            if validate is not None:
                try:
                    validate(req, resp)
                except ServedError as exc:      # name the server: replicas are checked one response at a time
                    raise type(exc)(f"the response of the server at {url} to request {req.name or req.path} "
                                    f"failed a check (not cached): {exc}") from None
            out.put((i, resp))

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
                 validate: Callable[[Request, Any], None] | None = None) -> None:
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
            out.put(None)

    th = threading.Thread(target=worker, name="biaslab-served", daemon=True)
    th.start()
    n = 0
    for i, resp in iter(out.get, None):     # (index, response) pairs until the worker's None
        on_response(i, resp)
        n += 1
    th.join()
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, ServedError) and len(requests) > 1:
            raise type(exc)(f"{exc} [{n} of {len(requests)} responses of this call were received and cached; "
                            "re-running resumes from there]") from None
        raise exc


def get_json(cfg: ClientConfig, path: str, url: str | None = None) -> Any:
    """One GET (e.g. ``/models``) against ``url`` (default: the first replica), with the same retries, deadline and
    ``Retry-After`` cap as every request."""
    base = url or cfg.base_urls[0]
    one = dataclasses.replace(cfg, base_urls=[base])
    box: dict = {}
    try:
        run_requests(one, [Request(path, None, 1, f"GET {path}", method="GET")], lambda i, r: box.setdefault("r", r))
    except (Refused, AuthError):
        raise
    except ServedError as exc:
        raise type(exc)(f"{exc}. Is the server running at {base}?") from None
    return box["r"]
