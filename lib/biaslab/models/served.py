"""Models behind an OpenAI-compatible server: the spec (:class:`ServedSpec`, parsed by :func:`resolve_spec`, the one
place that tells a served model from a local one) and the handle the Scorer computes through (:class:`ServedModel`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from ..files.redact import check_key_env

#: Known server kinds: default base URL and API-key variable (``openai:MODEL`` uses the first).
SERVED_DEFAULTS = {"openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}}
_SPEC_KEYS = {"backend", "base_url", "model", "api_key_env", "max_concurrency", "requests_per_minute",
              "tokens_per_minute", "name", "prefix", "top_k", "price_per_million", "timeout_s", "max_retries",
             "retry_budget_s"}


@dataclass(frozen=True)
class ServedSpec:
    """A model behind an OpenAI-compatible server (api.openai.com, vLLM, SGLang, TGI, Ollama, llama.cpp).

    ``base_urls``: one or more replicas serving the same weights (each ends in ``/v1``). ``api_key_env``: the *name*
    of the environment variable that holds the key (the key is read when a request is sent, and never stored).
    ``prefix``: text put before every scored sequence as its context (the model's BOS token text, e.g.
    ``"<|im_start|>"`` for SmolLM2 on llama.cpp, which adds no BOS itself); "" when the server adds BOS.
    ``top_k``: how many next-token alternatives label distributions ask for. ``price_per_million``:
    ``{"prompt": USD, "completion": USD}`` per million tokens, for the cost in MANIFEST.json. ``timeout_s``: the
    deadline of one request as a whole; ``retry_budget_s``: the longest one request may spend waiting between its
    retries (backoff and ``Retry-After`` together; default 120 s), each wait printed. Every setting is range-checked
    by :func:`resolve_spec` (at preflight).
    """

    model: str
    base_urls: tuple[str, ...]
    name: str
    api_key_env: str | None = None
    max_concurrency: int = 4
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    prefix: str = ""
    top_k: int = 20
    price_per_million: tuple = ()
    timeout_s: float = 120.0
    max_retries: int = 6
    retry_budget_s: float = 120.0

    def describe(self) -> dict:
        """What a manifest records (no key, only the variable's name)."""
        return {"backend": "served", "model": self.model, "base_urls": list(self.base_urls),
                "api_key_env": self.api_key_env, "max_concurrency": self.max_concurrency,
                "requests_per_minute": self.requests_per_minute, "tokens_per_minute": self.tokens_per_minute,
                "prefix": self.prefix, "top_k": self.top_k}


def looks_served(spec: Any) -> bool:
    """Whether ``spec`` is meant as a served model (a mapping, a spec, ``openai:...`` or a JSON mapping string)."""
    return isinstance(spec, (dict, ServedSpec)) or (isinstance(spec, str) and (
        spec.startswith("openai:") or spec.lstrip().startswith("{")))


def resolve_spec(spec: Any) -> "ServedSpec | None":
    """The one place that tells a served model from a local one. Local names and folders give None.

    Served: ``"openai:MODEL"`` (api.openai.com, key in ``OPENAI_API_KEY``), a mapping with ``backend``
    (``"openai"``, the wire protocol), ``base_url`` (a URL or a list of replica URLs), ``model`` and optional
    ``api_key_env``, ``max_concurrency``, ``requests_per_minute``, ``tokens_per_minute``, ``prefix``, ``top_k``,
    ``price_per_million``, ``name``; or the same mapping as a JSON string (papermill/CLI parameters).
    """
    if isinstance(spec, ServedSpec):
        return spec
    if isinstance(spec, os.PathLike):
        return None
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        spec = json.loads(spec)
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            model = spec.split(":", 1)[1]
            d = SERVED_DEFAULTS["openai"]
            return ServedSpec(model=model, base_urls=(d["base_url"],), name=spec, api_key_env=d["api_key_env"])
        return None
    if not isinstance(spec, dict):
        raise TypeError(f"a model is a name, a folder or a served-model mapping, not {type(spec).__name__}")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} in served-model spec; known: {sorted(_SPEC_KEYS)}. "
                         "(An API key is never put in a spec: name its environment variable with api_key_env.)")
    backend = spec.get("backend", "openai")
    if backend not in SERVED_DEFAULTS:
        raise ValueError(f"backend {backend!r}: served models speak the OpenAI protocol, use backend='openai' "
                         "(vLLM, SGLang, TGI, Ollama and llama.cpp all serve it)")
    if "model" not in spec:
        raise ValueError("a served-model spec needs 'model' (the id the server serves, see GET <base_url>/models)")
    urls = spec.get("base_url", SERVED_DEFAULTS[backend]["base_url"])
    urls = tuple([urls] if isinstance(urls, str) else urls)
    if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
        raise ValueError(f"base_url must be an http(s) URL or a list of them, got {urls!r}")
    if any("@" in u.split("/")[2] for u in urls):   # user:password@host would land in MANIFEST.json and logs
        raise ValueError("base_url carries credentials (user:password@host); remove them and name the key's "
                         "environment variable with api_key_env")
    default_env = SERVED_DEFAULTS[backend]["api_key_env"] if "api.openai.com" in urls[0] else None
    check_key_env(spec.get("api_key_env"))
    price = spec.get("price_per_million") or {}
    if not isinstance(price, dict):
        raise ValueError(f"served model {spec['model']!r}: price_per_million must be a mapping "
                         "{'prompt': USD, 'completion': USD}")
    for k, v in price.items():
        _number(spec, f"price_per_million.{k}", v, low=0.0, strict=False)
    return ServedSpec(model=str(spec["model"]), base_urls=urls, name=str(spec.get("name") or spec["model"]),
                      api_key_env=spec.get("api_key_env", default_env),
                      max_concurrency=_whole(spec, "max_concurrency", 4, low=1),
                      requests_per_minute=_number(spec, "requests_per_minute", spec.get("requests_per_minute")),
                      tokens_per_minute=_number(spec, "tokens_per_minute", spec.get("tokens_per_minute")),
                      prefix=str(spec.get("prefix", "")), top_k=_whole(spec, "top_k", 20, low=1),
                      price_per_million=tuple(sorted(price.items())),
                      timeout_s=_number(spec, "timeout_s", spec.get("timeout_s", 120.0), none=False),
                      max_retries=_whole(spec, "max_retries", 6, low=0),
                      retry_budget_s=_number(spec, "retry_budget_s", spec.get("retry_budget_s", 120.0),
                                             none=False))


#: what each range-checked setting means (said in its error)
_MEANS = {"max_concurrency": "requests in flight per replica", "requests_per_minute": "a client-side rate limit",
          "tokens_per_minute": "a client-side rate limit", "timeout_s": "the deadline of one request, in seconds",
          "retry_budget_s": "the longest one request may wait between retries, in seconds",
          "top_k": "next-token alternatives per label prompt", "max_retries": "retries per request"}


def _whole(spec: dict, key: str, default: int, low: int) -> int:
    """``spec[key]`` as a whole number >= ``low`` (a run with max_concurrency 0 would never send a request)."""
    v = spec.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"served model {spec['model']!r}: {key}={v!r} is out of range: it must be a whole number "
                         f">= {low} ({_MEANS.get(key, key)}); leave it out for the default {default}")
    return v


def _number(spec: dict, key: str, v, low: float = 0.0, strict: bool = True, none: bool = True) -> float | None:
    """``v`` as a finite number > ``low`` (``strict``) or >= it; None where ``none`` (no limit)."""
    if v is None and none:
        return None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (
        v > low if strict else v >= low)
    if not ok:
        raise ValueError(f"served model {spec['model']!r}: {key}={v!r} is out of range: it must be a finite number "
                         f"{'>' if strict else '>='} {low:g} ({_MEANS.get(key, key)})"
                         + ("; leave it out for no limit" if none else ""))
    return float(v)


@dataclass
class ServedModel:
    """A served model, ready for :class:`biaslab.scoring.Scorer` (which then computes through the served backend).

    It has no local weights and no tokenizer; ``fingerprint`` records the spec (never the key), the server-reported
    model id and, as the run goes, tokens used (and cost where a price table is given).
    """

    spec: ServedSpec
    name: str
    kind: str = "causal"
    backend: str = "served"
    tokenizer: Any = None
    model: Any = None
    device: str = "server"
    dtype: str = "served"
    fingerprint: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ServedModel({self.name!r}, {len(self.spec.base_urls)} replica(s))"
