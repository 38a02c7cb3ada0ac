"""The one redaction of secrets: every text biaslab writes or prints about a run passes through :func:`redact`.

An API key lives in its environment variable only. Whatever might carry it (an exception message, a MANIFEST note,
``MANIFEST.json`` / ``MANIFEST.failed.json`` with the recorded parameters, an executed or failed notebook, the
terminal's error line) goes through :func:`redact`, which replaces

- the values of the keys biaslab read (:func:`remember`) and of environment variables named like secrets
  (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``; values of 12 characters or more);
- ``Authorization`` header values and ``Bearer <token>``;
- key-shaped strings: ``sk-…`` (OpenAI, Anthropic), ``hf_…``, ``ghp_…`` and the other GitHub tokens, ``AKIA…``
  (AWS), ``xox…-`` (Slack), ``AIza…`` (Google)

by ``[redacted]``. Tables are data and are not rewritten.
"""

from __future__ import annotations

import os
import re

MASK = "[redacted]"

_KEY_SHAPED = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?:sk|rk|pk)-[A-Za-z0-9_\-]{12,}"           # OpenAI / Anthropic style
    r"|hf_[A-Za-z0-9]{20,}"                         # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}"                  # GitHub
    r"|AKIA[0-9A-Z]{16}"                            # AWS access key id
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"               # Slack
    r"|AIza[0-9A-Za-z_\-]{30,}"                     # Google
    r")")
#: an Authorization header's value (in a repr, a dict, JSON or "Name: value" form), up to a quote, comma or brace
_AUTH_HEADER = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"',}\n\\]+")
#: ``Bearer <token>`` where the token has a digit, a dash, a dot or an underscore (not "Bearer bonds")
_BEARER = re.compile(r"(?<![A-Za-z])(Bearer\s+)(?=[^\s'\"\\,;]*[0-9_.\-])[^\s'\"\\,;]{4,}")
#: environment variables whose values are secrets
_SECRET_NAME = re.compile(r"(?i)(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)(?:_|$)")
_MIN_SECRET = 12

_known: set[str] = set()


def remember(secret: str) -> None:
    """Redact ``secret`` (a key read from the environment) wherever it appears, from now on."""
    for s in (secret, secret.strip()):
        if len(s) >= 8:
            _known.add(s)


def _secrets() -> list[str]:
    env = {v.strip() for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v.strip()) >= _MIN_SECRET}
    return sorted(_known | env, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[redacted]`` (module docstring)."""
    text = str(text)
    for s in _secrets():
        text = text.replace(s, MASK)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    return _KEY_SHAPED.sub(MASK, text)


def looks_like_key(value: str) -> bool:
    """Whether ``value`` (given where the *name* of an environment variable belongs) looks like a key itself: not a
    variable name, key-shaped, or a long run of letters and digits with no underscore."""
    value = str(value)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        return True
    if _KEY_SHAPED.search(value):
        return True
    return len(value) >= 24 and "_" not in value and any(c.isdigit() for c in value) and any(
        c.isalpha() for c in value)


def check_key_env(env) -> None:
    """``api_key_env`` must name an environment variable; a value that looks like a key itself is refused, and never
    shown (it would land in the parameters, the manifest and the terminal)."""
    if env is not None and (not isinstance(env, str) or looks_like_key(env)):
        raise ValueError("api_key_env must be the NAME of the environment variable that holds the key (e.g. "
                         "OPENAI_API_KEY), but the value given looks like a key itself (not shown). Put the key in "
                         "a variable (export MY_KEY=...) and pass api_key_env='MY_KEY'; if that was a key, revoke it")
