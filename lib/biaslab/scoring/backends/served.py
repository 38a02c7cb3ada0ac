"""The served backend: the Scorer's four methods computed by an OpenAI-compatible server (docs/served.md).

- ``sequence_logprob`` / ``option_logprob``: ``/v1/completions`` with ``echo`` + ``logprobs``; the scored span is
  located by the server's ``text_offset`` values anchored at the end of the echoed text (never a local
  tokenization). ``prefix`` (spec) goes before each text, as the in-process engine puts the BOS token; a server that
  gives the first echoed token no log-prob gets it from one cached request (the distribution after the prefix).
- ``label_distribution``: the next token's ``top_logprobs``; a label with no surface form in the top-k gets the
  upper bound min(k-th probability, 1 - top-k mass) and is counted in ``n_labels_outside_topk``, never set to 0.
- ``generate``: temperature 0 and ``seed``; each response's ``system_fingerprint`` is recorded.

Every response is validated (model id, log-probs finite and <= :data:`LOGPROB_TOL`, offsets in characters or UTF-8
bytes, top-k mass <= 1 + :data:`MASS_TOL`) and cached per prompt before it is used; a failed check is an
:class:`~.client.InvalidResponse` naming server, request and check, never cached. Capabilities are probed once per
model and replica; only a definite answer (given, or refused with a 4xx) is cached. Where the probe shows that
``/v1/completions`` answers a list of prompts exactly as one at a time, prompts that differ only in the prompt share
POSTs of at most the token budget (:data:`REQUEST_TOKENS`) and an even share of the work per request slot
(:meth:`ServedBackend.execute`); each answer is split, validated and cached as if sent alone.
"""

from __future__ import annotations

import dataclasses
import bisect
import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ...files.storage import atomic_write_text
from .. import labels as labels_mod
from ..causal import _lcp
from .base import CAPABILITIES, Backend, sums_table
from .client import (DEAD_AFTER, AuthError, ClientConfig, InvalidResponse, Refused, Request, ServedError, get_json,
                     run_requests)

log = logging.getLogger(__name__)

#: Default token budget of one POST (estimated prompt + completion tokens of the prompts it carries).
REQUEST_TOKENS = 8192
#: Largest difference of a log-prob between a prompt sent in a list and sent alone for lists to be used (float noise
#: of a batching server; a server that mixes prompts up differs by whole nats).
LIST_TOLERANCE = 1e-3
#: Largest log-prob a response may give (rounding of a probability of 1); a larger one is refused.
LOGPROB_TOL = 1e-3
#: Largest excess of a top-k's probability mass over 1 (rounding); a larger one is refused.
MASS_TOL = 1e-3
#: The way out, per missing capability (said in the early error).
WAY_OUT = {
    "prompt_logprobs": "chat models on api.openai.com do not return prompt log-probabilities; use the preference "
                       "scheme (label_distribution / generate), or serve the model with vLLM or llama.cpp "
                       "(/v1/completions with echo and logprobs)",
    "top_logprobs": "serve the model with an engine whose /v1/completions returns logprobs (vLLM, llama.cpp), or "
                    "use chat=True if its chat endpoint returns top_logprobs",
    "chat_top_logprobs": "use chat=False with a completions endpoint that returns logprobs, or generate answers",
    "generate": "the server answers neither /v1/completions nor /v1/chat/completions",
    "chat": "the server has no /v1/chat/completions; pass chat=False",
}


class CapabilityError(ServedError):
    pass


class _NoTopLogprobs(ServedError):
    """The opening distribution came without top_logprobs (first tokens are then context only, with a warning)."""


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ServedBackend(Backend):
    """Computes the Scorer's methods through a server. The Scorer's cache holds its responses (see
    :meth:`cache_identity`); the probe results live in ``probe_dir/served-probes.json``. ``token_budget``: estimated
    tokens per POST where lists are accepted (default :data:`REQUEST_TOKENS`)."""

    name = "served"
    remote = True

    def __init__(self, lm, probe_dir: Path | None = None, token_budget: int | None = None, **_):
        super().__init__(lm)
        self.spec = lm.spec
        self.token_budget = token_budget or REQUEST_TOKENS
        self.cfg = ClientConfig(base_urls=list(self.spec.base_urls), api_key_env=self.spec.api_key_env,
                                max_concurrency=self.spec.max_concurrency,
                                requests_per_minute=self.spec.requests_per_minute,
                                tokens_per_minute=self.spec.tokens_per_minute, timeout_s=self.spec.timeout_s,
                                max_retries=self.spec.max_retries,
                                retry_budget_s=self.spec.retry_budget_s)
        self.probe_path = Path(probe_dir) / "served-probes.json" if probe_dir else None
        self._probe: dict | None = None
        self.stats = self.cfg.stats
        self.usage = lm.fingerprint.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0})
        self.system_fingerprints: set = set()
        self._byte_offsets_noted = False

    # ---------------------------------------------------------------------------------- capabilities ---
    def _probe_key(self) -> str:
        return _digest([list(self.spec.base_urls), self.spec.model])

    def probe(self) -> dict:
        """Which capabilities the server has (one small request each, once per model; cached on disk)."""
        if self._probe is not None:
            return self._probe
        key = self._probe_key()
        stored = self._stored_probes()
        if key in stored:
            self._probe = stored[key]
        else:
            try:
                self._probe = self._run_probe()
            except (AuthError, Refused, CapabilityError):
                raise
            except ServedError as exc:
                raise ServedError(f"the capability probe of {self.lm.name!r} at {', '.join(self.spec.base_urls)} got "
                                  "no definite answer, so nothing was cached in served-probes.json (a rerun probes "
                                  f"again): {exc}") from None
            self._store_probe()
        self.lm.fingerprint["served_model_id"] = self._probe["model_id"]
        self.lm.fingerprint["capabilities"] = {c: self._probe[c] for c in CAPABILITIES}
        return self._probe

    def _stored_probes(self) -> dict:
        """What served-probes.json holds ({} without one, or when it cannot be parsed)."""
        if not (self.probe_path and self.probe_path.exists()):
            return {}
        try:
            return json.loads(self.probe_path.read_text())
        except ValueError:
            return {}

    def _store_probe(self) -> None:
        if self.probe_path:
            atomic_write_text(self.probe_path, json.dumps({**self._stored_probes(), self._probe_key(): self._probe},
                                                          indent=1))

    def _post_once(self, req: Request, retries: bool = True, url: str | None = None):
        """The answer to one probe request (named so in errors), at ``url`` (default: the first live replica)."""
        box: dict = {}
        cfg = dataclasses.replace(self.cfg, base_urls=[url or self._live()[0]],
                                  max_retries=self.cfg.max_retries if retries else 0)
        run_requests(cfg, [dataclasses.replace(req, cost=8, name=f"capability probe {req.path}")],
                     lambda i, r: box.setdefault("r", r))
        return box["r"]

    def prompt_lists(self) -> bool:
        """Whether ``/v1/completions`` takes a list of prompts and answers each as it answers it alone: probed once
        (two prompts in one request against the same two sent alone) and stored with the other capabilities."""
        have = self.probe()
        if "prompt_lists" not in have:
            have["prompt_lists"] = self._probe_lists(have)
            self._store_probe()
        return bool(have["prompt_lists"])

    def _probe_lists(self, have: dict) -> bool:
        if not have.get("generate"):
            return False
        texts = [self.spec.prefix + "The cat sat on the mat.", self.spec.prefix + "A list of two prompts"]
        kw = {"max_tokens": 1, "echo": True, "logprobs": 0} if have.get("prompt_logprobs") else {"max_tokens": 1}
        try:     # any failure of the list itself means one prompt per request (always correct, only slower)
            parts = _split(self._post_once(self._completion(texts, **kw), retries=False), len(texts))
        except ServedError as exc:
            log.info("list probe: %s; one prompt per request", exc)
            return False
        alone = [self._post_once(self._completion(t, **kw)) for t in texts]
        for part, one, t in zip(parts, alone, texts):
            a, b = part["choices"][0], one["choices"][0]
            if kw.get("echo") and not str(a.get("text", "")).startswith(t):
                return False
            la = [v for v in ((a.get("logprobs") or {}).get("token_logprobs") or []) if v is not None]
            lb = [v for v in ((b.get("logprobs") or {}).get("token_logprobs") or []) if v is not None]
            if len(la) != len(lb) or any(abs(x - y) > LIST_TOLERANCE for x, y in zip(la, lb)):
                log.info("list probe: a prompt sent in a list is not scored as when sent alone; one per request")
                return False
        return True

    def _live(self) -> list[str]:
        """The replicas not dropped as dead (:mod:`.client`)."""
        return [u for u in self.spec.base_urls if u not in self.cfg.dropped] or list(self.spec.base_urls)

    def _answering(self) -> list[str]:
        """The replicas that answer ``GET /models``; with several, one that fails in transport :data:`DEAD_AFTER`
        times running is dropped with a warning while another answers (as the client drops one mid-run)."""
        urls = list(self.spec.base_urls)
        if len(urls) == 1:
            return urls
        cfg = dataclasses.replace(self.cfg, max_retries=DEAD_AFTER - 1)
        live, first_error = [], None
        for url in urls:
            try:
                get_json(cfg, "/models", url)
                live.append(url)
            except (AuthError, Refused):
                raise
            except ServedError as exc:
                first_error = first_error or exc
                self.cfg.dropped.add(url)
                log.warning("replica %s dropped: it does not answer (%s)", url, exc)
        if not live:
            raise first_error
        return live

    def _listed(self, url: str) -> tuple[str, list]:
        """The model id the server at ``url`` serves for the spec's model (``GET /models``), and what it lists."""
        models = get_json(self.cfg, "/models", url)
        if not isinstance(models, dict) or not isinstance(models.get("data", []), list):
            raise ServedError(f"GET {url}/models: a malformed answer {str(models)[:200]!r} (no 'data' list)")
        ids = [m.get("id") for m in (models.get("data") or []) if isinstance(m, dict)]
        if ids and self.spec.model not in ids:
            if len(ids) == 1:   # a one-model server (llama.cpp) serves it whatever the request names
                return ids[0], ids[:20]
            raise Refused(f"the server at {url} serves {ids[:10]}, not {self.spec.model!r}: set 'model' in the spec "
                          "to one of them")
        return self.spec.model, ids[:20]

    def _run_probe(self) -> dict:
        urls = self._answering()
        model_id, listed = self._listed(urls[0])
        res = {"model_id": model_id, "listed": listed, "response_model": None}
        answered = []                                       # (request, response) that came back 200
        req = self._completion(self.spec.prefix + "Hello world, this is", max_tokens=1, echo=True, logprobs=1)
        try:
            r = self._post_once(req)
            answered.append((req, r))
            res["generate"] = True
            ch = _choice(r, "/completions")
            lp = ch.get("logprobs")
            echoed = isinstance(ch.get("text"), str) and ch["text"].startswith(req.body["prompt"])
            if lp is not None and not isinstance(lp, dict):
                raise ServedError(f"/completions: a malformed answer (logprobs is {str(lp)[:100]!r})")
            if lp is None or not echoed:                    # answered without an echo's log-probs: a definite no
                res["prompt_logprobs"] = False
            else:                                           # an echo given must be well-formed (else transient)
                self._echo_validate(req, r)
                res["prompt_logprobs"] = len([v for v in lp["token_logprobs"] if v is not None]) >= 2
            tops = [t for t in (lp or {}).get("top_logprobs") or [] if t]
            res["top_logprobs"] = bool(tops) and isinstance(tops[-1], dict)
            if res["top_logprobs"]:
                _check_top(tops[-1].values(), "top_logprobs")
        except Refused as exc:
            log.info("completions probe: %s", exc)
            res.update(prompt_logprobs=False, top_logprobs=False, generate=False)
        if not res["top_logprobs"] and res["generate"]:
            try:
                r = self._post_once(self._completion("Hello", max_tokens=1, logprobs=5))
                tops = (_choice(r, "/completions").get("logprobs") or {}).get("top_logprobs") or []
                res["top_logprobs"] = bool(tops) and isinstance(tops[0], dict) and len(tops[0]) >= 2
                if res["top_logprobs"]:
                    _check_top(tops[0].values(), "top_logprobs[0]")
            except Refused:
                pass
        req = self._chat("Hello", 1, max_tokens=1, logprobs=True, top_logprobs=5)
        try:
            r = self._post_once(req)
            answered.append((req, r))
            res["chat"] = True
            content = (_choice(r, "/chat/completions").get("logprobs") or {}).get("content") or []
            res["chat_top_logprobs"] = bool(content) and len(content[0].get("top_logprobs") or []) >= 2
            if res["chat_top_logprobs"]:
                _check_top([e.get("logprob") for e in content[0]["top_logprobs"]], "content[0].top_logprobs")
        except Refused as exc:
            log.info("chat probe: %s", exc)
            res.update(chat=False, chat_top_logprobs=False)
        res["generate"] = res["generate"] or res["chat"]
        if answered:
            res["response_model"] = answered[0][1].get("model")
            self._same_model_on_replicas(res, answered[0][0], urls)
        res["prompt_lists"] = self._probe_lists(res)
        return res

    def _same_model_on_replicas(self, res: dict, probe: Request, urls: list) -> None:
        """Every replica serves the first one's model: the same id in ``GET /models`` and in its answers."""
        for url in urls[1:]:
            model_id, listed = self._listed(url)
            named = self._post_once(probe, url=url).get("model")
            if model_id != res["model_id"] or named != res["response_model"]:
                raise Refused(f"the replicas serve different models: {urls[0]} serves {res['model_id']!r} (its answers "
                              f"name {res['response_model']!r}), {url} serves {model_id!r} (its answers name "
                              f"{named!r}). Every base_url of one spec must serve the same weights: give each "
                              "model its own spec")

    def _check_model(self, resp: dict) -> None:
        """The model a response names is the probed one (a server whose model changed mid-run is refused)."""
        have = self.probe()
        named = resp.get("model") if isinstance(resp, dict) else None
        want = have.get("response_model")
        ok = named == want if want is not None else named in (None, have["model_id"], self.spec.model)
        if not ok:
            raise InvalidResponse(f"check 'model id': the response names model {named!r}, but the probe found "
                                  f"{want or have['model_id']!r} (did the server's model change during the run? "
                                  "scores of two models are never mixed)")

    def capabilities(self) -> dict[str, bool]:
        have = self.probe()
        return {c: bool(have.get(c)) for c in CAPABILITIES}

    def lacks(self, cap: str, why: str = "") -> CapabilityError:
        return CapabilityError(f"model {self.lm.name!r} (served at {self._live()[0]}) lacks capability "
                               f"{cap!r}{' needed by ' + why if why else ''}: {WAY_OUT[cap]}")

    def require(self, capabilities: Sequence[str], why: str = "") -> None:
        """Fail before any scoring request when the server lacks one of ``capabilities``."""
        have = self.capabilities()
        for cap in capabilities:
            if not have[cap]:
                raise self.lacks(cap, why)

    def chat_available(self) -> bool:
        return bool(self.probe().get("chat"))

    def render(self, prompts, chat) -> list[str]:
        return [str(p) for p in prompts]   # a server applies its own chat template (chat=True: /chat/completions)

    # ------------------------------------------------------------------------------------- requests ---
    def cache_identity(self) -> dict:
        """The score-cache file of a served model: named by the id the server reports (probed)."""
        return {"name": self.lm.name, "kind": "causal", "dtype": "served", "device": "server",
                "weights_sha256": "served-" + _digest(self.probe()["model_id"])}

    def fetch(self, sc, reqs: list[Request], desc: str, validate) -> list[dict]:
        """Responses for ``reqs``: cached ones read back, the rest sent (:meth:`execute`), validated and cached as
        they arrive."""
        model_id = self.probe()["model_id"]
        keys = [sc.cache.key("http", {"model": model_id}, [r.path, r.body]) for r in reqs]
        found = sc._run("http", reqs, keys, lambda todo: (todo, [r.cost for r in todo]), validate, desc)
        return [found[k] for k in keys]

    def execute(self, work: list[Request], costs, compute, done, token_keys=None) -> None:
        """Send ``work`` (one request per prompt); ``compute`` is the check each response must pass. Requests that
        differ only in their prompt share a POST where the server takes lists (module docstring)."""
        posts, members = self._posts(work, costs)

        def check(post, resp):
            self._check_model(resp)
            for j, part in zip(members[id(post)], _split(resp, len(members[id(post)]))):
                if compute is not None:
                    compute(work[j], part)

        def on_response(i, resp):
            idx = members[id(posts[i])]
            self._account(resp, len(idx))
            done(idx, _split(resp, len(idx)))

        run_requests(self.cfg, posts, on_response, check)

    def _posts(self, work: list[Request], costs) -> tuple[list[Request], dict]:
        """The POSTs that carry ``work``: one per request, or lists of prompts (module docstring)."""
        lists = len(work) > 1 and any(r.path == "/completions" for r in work) and self.prompt_lists()
        groups: dict = {}
        for j, r in enumerate(work):
            if lists and r.path == "/completions" and isinstance(r.body.get("prompt"), str):
                shape = json.dumps({k: v for k, v in r.body.items() if k != "prompt"}, sort_keys=True)
            else:
                shape = j                                  # travels alone
            groups.setdefault(shape, []).append(j)
        slots = max(1, self.cfg.max_concurrency * len(self.cfg.base_urls))
        share = max(1, -(-len(work) // slots))              # at most an even share of the work per request slot
        posts, members = [], {}
        for idx in groups.values():
            idx.sort(key=lambda j: work[j].body.get("prompt", ""))   # common openings side by side
            chunk: list[int] = []
            tokens = 0                                      # estimated tokens of the chunk
            for j in idx + [None]:
                full = chunk and (j is None or len(chunk) >= share or tokens + costs[j] > self.token_budget)
                if full:
                    post = work[chunk[0]] if len(chunk) == 1 else Request(
                        "/completions", {**work[chunk[0]].body, "prompt": [work[c].body["prompt"] for c in chunk]},
                        tokens, f"{len(chunk)} prompts from {work[chunk[0]].name}")
                    posts.append(post)
                    members[id(post)] = list(chunk)
                    chunk, tokens = [], 0
                if j is not None:
                    chunk.append(j)
                    tokens += costs[j]
        return posts, members

    def _account(self, resp: dict, n_prompts: int = 1) -> None:
        u = resp.get("usage") or {}
        self.usage["requests"] += 1
        if n_prompts > 1:
            self.usage["prompts_in_lists"] = self.usage.get("prompts_in_lists", 0) + n_prompts
        self.usage["prompt_tokens"] += int(u.get("prompt_tokens") or 0)
        self.usage["completion_tokens"] += int(u.get("completion_tokens") or 0)
        if self.spec.price_per_million:
            price = dict(self.spec.price_per_million)
            self.usage["cost_usd"] = round((self.usage["prompt_tokens"] * price.get("prompt", 0)
                                            + self.usage["completion_tokens"] * price.get("completion", 0)) / 1e6, 6)
        if resp.get("system_fingerprint"):
            self.system_fingerprints.add(resp["system_fingerprint"])
            self.lm.fingerprint["system_fingerprints"] = sorted(self.system_fingerprints)

    def _completion(self, prompt: str | list[str], **kw) -> Request:
        body = {"model": self.spec.model, "prompt": prompt, "temperature": 0, **kw}
        return Request("/completions", body, cost=len(prompt) // 4 + 1 + int(kw.get("max_tokens", 1)),
                       name=f"completions {prompt[-60:]!r}")

    def _chat(self, prompt: str, new_tokens: int, **kw) -> Request:
        """A one-message chat request; its cost is the prompt's estimated tokens plus ``new_tokens``."""
        body = {"model": self.spec.model, "temperature": 0, "messages": [{"role": "user", "content": prompt}], **kw}
        return Request("/chat/completions", body, len(prompt) // 4 + new_tokens, f"chat {prompt[-60:]!r}")

    # ------------------------------------------------------------------------------- echo log-probs ---
    def _echo_validate(self, req: Request, resp: dict) -> None:
        """An echo of the prompt with its log-probs: well-formed, finite log-probs at most 0 (the first may be
        missing), offsets that point at the tokens in the echoed text, and top_logprobs that are distributions."""
        try:
            ch = resp["choices"][0]
            lp = ch["logprobs"]
            toks, offs, vals = lp["tokens"], lp["text_offset"], lp["token_logprobs"]
            text = ch["text"]
        except (KeyError, IndexError, TypeError) as exc:
            raise InvalidResponse(f"check 'echo': the response has no echoed prompt log-probabilities (missing "
                                  f"{exc}); does the server support echo with logprobs?") from None
        if not all(isinstance(x, list) for x in (toks, offs, vals)) or not isinstance(text, str):
            raise InvalidResponse("check 'echo': tokens, text_offset and token_logprobs are not lists (or text is "
                                  "not a string)")
        if not (len(toks) == len(offs) == len(vals)) or not toks:
            raise InvalidResponse(f"check 'echo': tokens, text_offset and token_logprobs differ in length "
                                  f"({len(toks)}, {len(offs)}, {len(vals)}: a truncated response)")
        if not text.startswith(req.body["prompt"]):
            raise InvalidResponse("check 'echo': the echoed text does not start with the prompt (truncated to the "
                                  "context length, or no echo)")
        for i, v in enumerate(vals):
            if v is None and i == 0:
                continue
            _check_logprob(v, f"token_logprobs[{i}] (token {toks[i]!r})")
        _, unit = _positions(text, toks, offs)
        if unit == "bytes" and not self._byte_offsets_noted:
            self._byte_offsets_noted = True
            log.warning("the server of %r gives text_offset in UTF-8 bytes, not characters: converted to characters "
                        "(every token is kept)", self.lm.name)
        for i, top in enumerate(lp.get("top_logprobs") or []):
            if top is not None:
                if not isinstance(top, dict):
                    raise InvalidResponse(f"check 'top_logprobs': entry {i} is not a mapping of tokens to log-probs")
                _check_top(top.values(), f"top_logprobs[{i}]")

    def _echoes(self, sc, texts: list[str], why: str, desc: str) -> list[dict]:
        """The echo of prefix + each text with its tokens' log-probs (``why``: the method that needs them)."""
        self.require(["prompt_logprobs"], why)
        reqs = [self._completion(self.spec.prefix + t, max_tokens=1, echo=True, logprobs=0) for t in texts]
        return self.fetch(sc, reqs, desc, self._echo_validate)

    def _opening(self, sc) -> dict:
        """The next-token distribution after the prefix alone (one cached request), for the first token's log-prob."""
        req = self._completion(self.spec.prefix, max_tokens=1, logprobs=100000)

        def validate(r, resp):
            try:
                top = resp["choices"][0]["logprobs"]["top_logprobs"][0]
                top.items()
            except (KeyError, IndexError, TypeError, AttributeError):
                raise _NoTopLogprobs(f"request {r.name}: no top_logprobs in the response") from None
            _check_top(top.values(), "top_logprobs[0]")
        try:
            resp = self.fetch(sc, [req], "opening distribution", validate)[0]
            return resp["choices"][0]["logprobs"]["top_logprobs"][0]
        except (_NoTopLogprobs, Refused) as exc:
            log.warning("cannot read the first token's log-prob (%s); first tokens are not counted", exc)
            return {}

    def sequence_logprob(self, sc, texts: list[str], per_token: bool = False) -> pd.DataFrame:
        pre = self.spec.prefix
        resps = self._echoes(sc, texts, "sequence_logprob", "sequence log-likelihood")
        opening = None
        sums, toks_col, lps_col = [], [], []
        n_unscored = 0
        for t, resp in zip(texts, resps):
            sel, _ = _span(resp, len(pre), len(pre) + len(t))
            lps = [v for _, v, _ in sel]
            if sel and lps[0] is None:
                if pre and opening is None:
                    opening = self._opening(sc)
                first = (opening or {}).get(sel[0][2])
                lps[0] = first
                if first is None:
                    n_unscored += 1
            if any(v is None for v in lps[1:]):
                raise ServedError(f"sequence {t[:60]!r}: the server returned no log-prob for a token after the first")
            kept = [float(v) for v in lps if v is not None]
            sums.append((float(sum(kept)), len(kept)))
            toks_col.append([x for _, _, x in sel])
            lps_col.append(lps)
        if n_unscored:
            log.warning("%d of %d texts: the server gave no log-prob for the first token (no prefix set, or it is "
                        "outside the opening distribution); their first token is context only", n_unscored, len(texts))
        df = sums_table(sums)
        if per_token:
            df["tokens"] = toks_col
            df["token_logprobs"] = lps_col
        return df

    def token_strings(self, sc, text: str) -> list[str]:
        """The server's tokens of ``text`` (from the echo of prefix + text)."""
        pre = self.spec.prefix
        sel, _ = _span(self._echoes(sc, [text], "token_strings", "tokens")[0], len(pre), len(pre) + len(text))
        return [t for _, _, t in sel]

    def option_values(self, sc, prompts: list[str], opts: list[list[str]], chat) -> list[list[tuple[float, int]]]:
        """(sum log-prob, n tokens) of each option after its prompt, from the echo of prompt + option."""
        if chat:
            raise ValueError(f"option_logprob(chat=True) on served model {self.lm.name!r}: prompt log-probs "
                             "come from /v1/completions, which takes text, not chat messages; pass the "
                             "model's chat-formatted text with chat=False, or use label_distribution(chat=True)")
        prompts = [str(p) for p in prompts]
        pre = self.spec.prefix
        resps = iter(self._echoes(sc, [p + o for p, os_ in zip(prompts, opts) for o in os_], "option_logprob",
                                  "option log-probabilities"))
        out, merged = [], []
        for i, (p, os_) in enumerate(zip(prompts, opts)):
            vals = []
            for o in os_:
                sel, cross = _span(next(resps), len(pre) + len(p), len(pre) + len(p) + len(o))
                if cross:
                    merged.append((i, len(vals)))
                    vals.append(None)
                    continue
                if any(v is None for _, v, _ in sel):
                    raise ServedError(f"option {o!r} after prompt {p[-60:]!r}: a token has no log-prob")
                vals.append((float(sum(v for _, v, _ in sel)), len(sel)))
            out.append(vals)
        if merged:   # a token spans the prompt/option boundary: exact difference log P(p+o) - log P(p)
            ps = sorted({i for i, _, _ in merged})
            base = dict(zip(ps, self.sequence_logprob(sc, [prompts[i] for i in ps], per_token=True).itertuples()))
            for i, j in merged:
                full = self.sequence_logprob(sc, [prompts[i] + opts[i][j]], per_token=True).iloc[0]
                common = _lcp(base[i].tokens, full.tokens)
                out[i][j] = (float(full.sum_logprob - base[i].sum_logprob), len(full.tokens) - common)
            log.warning("%d prompt/option pairs: a token spans the prompt/option boundary (does the prompt end in a "
                        "space?); scored as exact differences log P(prompt+option) - log P(prompt)", len(merged))
        return out

    # --------------------------------------------------------------------------- label distributions ---
    def label_distribution(self, sc, prompts: Sequence[str], labels, chat) -> pd.DataFrame:
        chat = bool(chat)
        forms = labels_mod.label_forms(labels)
        prompts = [str(p) for p in prompts]
        k = self.spec.top_k
        if chat:
            self.require(["chat_top_logprobs"], "label_distribution(chat=True)")
            reqs = [self._chat(p, 2, max_tokens=1, logprobs=True, top_logprobs=k) for p in prompts]
        else:
            self.require(["top_logprobs"], "label_distribution")
            reqs = [self._completion(self.spec.prefix + p, max_tokens=1, logprobs=k) for p in prompts]

        def validate(req, resp):
            if _top(resp, chat):
                _check_top([v for _, v in _top_pairs(resp, chat)], "the next token's top_logprobs")
            elif not _ended_at_once(resp, chat):
                raise InvalidResponse("check 'top_logprobs': the response has no top_logprobs for the next token")

        resps = self.fetch(sc, reqs, "label distributions", validate)
        tops = [_top(r, chat) for r in resps]
        ended = [i for i, t in enumerate(tops) if not t]
        if ended:   # the model ended at once (llama.cpp then returns no log-probs): read them from an echo instead
            for i, t in zip(ended, self._tops_from_echo(sc, [prompts[i] for i in ended], k, chat)):
                tops[i] = t
        rows = []
        outside_total = 0
        for top in tops:
            ps = np.exp(np.array(list(top.values()), dtype=float))
            bound = float(min(ps.min(), max(1.0 - ps.sum(), 0.0)))
            row, mass, outside = {}, 0.0, []
            for lab, fs in forms.items():
                p = sum(math.exp(top[f]) for f in fs if f in top)
                mass += p
                if p == 0.0:
                    outside.append(lab)
                    p = bound
                row[f"logp_{lab}"] = math.log(p) if p > 0 else -math.inf
            tot = sum(math.exp(row[f"logp_{lab}"]) for lab in forms)
            for lab in forms:
                row[f"p_{lab}"] = math.exp(row[f"logp_{lab}"]) / tot if tot > 0 else math.nan
            row["label_mass"] = mass
            row["topk_mass"] = float(ps.sum())
            row["n_labels_outside_topk"] = len(outside)
            row["labels_outside_topk"] = ",".join(outside)
            outside_total += bool(outside)
            rows.append(row)
        if outside_total:
            log.warning("%d of %d prompts: some labels are outside the server's top-%d; they are counted at their "
                        "upper bound (column labels_outside_topk), not as 0", outside_total, len(prompts), k)
        return pd.DataFrame(rows)

    def _tops_from_echo(self, sc, prompts: list[str], k: int, chat: bool) -> list[dict]:
        """The next-token top-k after each prompt, read from the echo of prompt + a newline: the top log-probs at
        the newline's position are the distribution after the prompt, whatever token follows. For servers that
        return no log-probs when the model's first token ends the answer (llama.cpp, finish_reason 'stop')."""
        why = (f"{len(prompts)} label prompts got no next-token top-k from {self.lm.name!r} (the model ended its "
               "answer at once: finish_reason 'stop', no token)")
        if chat:
            raise CapabilityError(f"{why}; with chat=True they cannot be re-read from a completions echo: use "
                                  "chat=False or answer by generation")
        self.require(["prompt_logprobs"], why)
        pre = self.spec.prefix
        reqs = [self._completion(pre + p + "\n", max_tokens=1, echo=True, logprobs=k) for p in prompts]
        out = []
        for p, resp in zip(prompts, self.fetch(sc, reqs, "label distributions (echo)", self._echo_validate)):
            ch = resp["choices"][0]
            lp = ch["logprobs"]
            pos, _ = _positions(ch["text"], lp["tokens"], lp["text_offset"])
            at = [j for j, o in enumerate(pos) if o == len(pre) + len(p)]
            top = (lp.get("top_logprobs") or [None] * (at[0] + 1))[at[0]] if at else None
            if not isinstance(top, dict) or not top:
                raise ServedError(f"{why}; re-reading prompt {p[-60:]!r} from the echo failed (no token starts at "
                                  "the end of the prompt, or no top_logprobs in the echo)")
            out.append({str(t): float(v) for t, v in top.items()})
        log.warning("%s; their top-%d was read from an echo of the prompt instead", why, k)
        return out

    # ----------------------------------------------------------------------------------- generation ---
    def generate(self, sc, prompts, max_new_tokens, stop, do_sample, seed, temperature, chat) -> list[str]:
        if do_sample:
            raise ValueError("served generation is greedy (temperature 0, seeded) so that it can be cached "
                             "and reproduced; do_sample=True is not supported on served models")
        chat = bool(chat)
        self.require(["chat" if chat else "generate"], "generate")
        extra = {"max_tokens": max_new_tokens, "seed": 0 if seed is None else seed, **({"stop": stop} if stop else {})}
        if chat:
            reqs = [self._chat(str(p), max_new_tokens, **extra) for p in prompts]
        else:
            reqs = [self._completion(self.spec.prefix + str(p), **extra) for p in prompts]

        def validate(req, resp):
            if _text(resp, chat) is None:
                raise InvalidResponse("check 'text': the response has no generated text")

        texts = [_text(r, chat) for r in self.fetch(sc, reqs, "generation", validate)]
        from ..generation import truncate_at_stop
        return [truncate_at_stop(t, stop) if stop else t for t in texts]


def _anchor(text: str, toks: Sequence[str], offs: Sequence[int], size=len) -> int:
    """What to add to the server's ``text_offset`` values to make them positions in the echoed ``text`` (measured
    by ``size``: characters, or UTF-8 bytes): the offsets are anchored at the end of the text (servers differ in
    whether a special prefix token counts in them). The last token is the generated one; a server may leave it out of
    the text (vLLM skips special tokens there: a generated ``<|im_end|>`` is in ``tokens`` but not in ``text``), and
    then the text ends where the token before it ends."""
    if len(toks) >= 2 and toks[-1] and not text.endswith(toks[-1]):
        return size(text) - (offs[-2] + size(toks[-2]))
    return size(text) - (offs[-1] + size(toks[-1]))


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


def _fits(text: str, toks: Sequence[str], pos: Sequence[int]) -> bool:
    """Whether every echoed token whose text is whole (not empty, no replacement character, after a whole token)
    stands at its position in ``text`` (the generated last token is not checked)."""
    for i in range(len(toks) - 1):
        t, prev = toks[i], toks[i - 1] if i else "x"
        if not t or "\ufffd" in t or not prev or "\ufffd" in prev or pos[i] < 0:
            continue
        if not text.startswith(t, pos[i]):
            return False
    return True


def _positions(text: str, toks: Sequence[str], offs: Sequence[int]) -> tuple[list[int], str]:
    """Each token's position (in characters) in the echoed ``text`` and the unit the server counted ``text_offset``
    in: ``"characters"`` (the OpenAI convention) or ``"bytes"`` (UTF-8; converted). Offsets that fit neither are
    refused (:class:`InvalidResponse`): a token is never silently moved out of its span."""
    if any(not isinstance(o, int) or isinstance(o, bool) for o in offs) or any(b < a for a, b in zip(offs, offs[1:])):
        raise InvalidResponse("check 'text_offset': the offsets are not increasing whole numbers")
    shift = _anchor(text, toks, offs)
    pos = [o + shift for o in offs]
    if _fits(text, toks, pos):
        return pos, "characters"
    if not text.isascii():
        starts, b = [], 0                                   # byte offset where each character starts
        for c in text:
            starts.append(b)
            b += _utf8_len(c)
        starts.append(b)                                    # the end of the text
        shift = _anchor(text, toks, offs, _utf8_len)
        bpos = [bisect.bisect_right(starts, o + shift) - 1 if o + shift >= 0 else o + shift for o in offs]
        if _fits(text, toks, bpos):
            return bpos, "bytes"
    bad = next((i for i in range(len(toks) - 1) if toks[i] and not text.startswith(toks[i], max(pos[i], 0))), 0)
    raise InvalidResponse(f"check 'text_offset': token {bad} ({toks[bad]!r}) is not at its offset {offs[bad]} in the "
                          "echoed text, counted in characters or in UTF-8 bytes; the scored span cannot be located")


def _span(resp: dict, start: int, end: int) -> tuple[list, bool]:
    """The echoed tokens at (anchored) offsets in [start, end) as (offset, log-prob, token), and whether a token
    straddles ``start``."""
    ch = resp["choices"][0]
    lp = ch["logprobs"]
    toks, vals = lp["tokens"], lp["token_logprobs"]
    pos, _ = _positions(ch["text"], toks, lp["text_offset"])
    sel = [(p, v, t) for p, v, t in zip(pos, vals, toks) if start <= p < end]
    return sel, any(p < start < p + len(t) for p, t in zip(pos, toks))


def _check_logprob(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > LOGPROB_TOL:
        raise InvalidResponse(f"check 'log-prob': {where} is {v!r}, not a finite log-probability at most 0")
    return float(v)


def _check_top(values, where: str) -> None:
    """A top-k: finite log-probs at most 0 whose probabilities sum to at most 1 (+ :data:`MASS_TOL`)."""
    vals = [_check_logprob(v, f"a value of {where}") for v in values]
    mass = float(np.exp(vals).sum()) if vals else 0.0
    if mass > 1 + MASS_TOL:
        raise InvalidResponse(f"check 'top-k mass': the probabilities of {where} sum to {mass:.4g}, more than 1")


def _choice(resp, path: str) -> dict:
    """``choices[0]`` of an answer, or a transient error saying what came back instead."""
    try:
        ch = resp["choices"][0]
        if isinstance(ch, dict):
            return ch
    except (KeyError, IndexError, TypeError):
        pass
    raise ServedError(f"{path}: a malformed answer (no choices[0]): {str(resp)[:200]!r}")


def _top_pairs(resp: dict, chat: bool) -> list[tuple]:
    """The next token's top-k as (token text, log-prob) pairs as the server gave them (for the checks)."""
    ch = resp["choices"][0]
    if chat:
        return [(e["token"], e["logprob"]) for e in ch["logprobs"]["content"][0]["top_logprobs"]]
    return list(ch["logprobs"]["top_logprobs"][0].items())


def _top(resp: dict, chat: bool) -> dict:
    """The next token's top log-probs as {token text: logprob} (summing duplicates of one text)."""
    try:
        pairs = [(t, float(v)) for t, v in _top_pairs(resp, chat)]
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return {}
    out: dict = {}
    for t, v in pairs:
        out[t] = float(np.logaddexp(out[t], v)) if t in out else v
    return out


def _ended_at_once(resp: dict, chat: bool) -> bool:
    """The answer ended before its first token (finish_reason 'stop', no text): some servers then give no log-probs."""
    try:
        ch = resp["choices"][0]
        return ch.get("finish_reason") == "stop" and not _text(resp, chat)
    except (KeyError, IndexError, TypeError, AttributeError):
        return False


def _text(resp: dict, chat: bool) -> str | None:
    try:
        ch = resp["choices"][0]
        t = ch["message"]["content"] if chat else ch["text"]
    except (KeyError, IndexError, TypeError):
        return None
    return t if isinstance(t, str) else ("" if t is None and chat else None)


def _split(resp: dict, n: int) -> list[dict]:
    """The answer to a list of ``n`` prompts as ``n`` answers, each shaped as the answer to its prompt sent alone
    (``choices[0]``, index 0; the usage of the whole POST is not divided, so it is left out); one prompt's answer as
    it is."""
    if n == 1:
        return [resp]
    try:
        choices = sorted(resp["choices"], key=lambda c: c["index"])
    except (KeyError, TypeError) as exc:
        raise ServedError(f"the answer to a list of {n} prompts has no indexed choices ({exc})") from None
    if [c["index"] for c in choices] != list(range(n)):
        raise ServedError(f"the answer to a list of {n} prompts has choices {[c['index'] for c in choices]}")
    head = {k: v for k, v in resp.items() if k not in ("choices", "usage")}
    return [{**head, "choices": [{**c, "index": 0}]} for c in choices]
