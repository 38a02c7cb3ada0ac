"""The interface every backend implements (the methods of :class:`Backend`): what computes a
:class:`~biaslab.scoring.Scorer`'s numbers.

A backend computes; the Scorer above it owns the shared mechanism: the score cache (lookup, de-duplication, one
write per finished batch), the progress bar, the token budget and the capability checks. A backend's methods get
the Scorer (``sc``) and call :meth:`Scorer._run` for everything that is cached; it never opens a cache itself. A
method it cannot compute raises ``TypeError`` naming what the model has instead. ``option_values`` gives
``[(sum log-prob, n tokens)]`` per option of each prompt; ``capabilities()`` which of :data:`CAPABILITIES` it has
(in-process: all; a server: probed once); ``execute(work, costs, compute, done, token_keys)`` computes a list of
missing items in batches one after the other (in-process, sized by the token budget, halved on out-of-memory) or as
requests in flight at once (a server), handing each finished batch to ``done(indices, values)``, which the Scorer
caches at once (a killed run loses at most the batches in flight).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import pandas as pd

#: What an analysis can ask for before its first request (:meth:`Scorer.require`).
CAPABILITIES = ("prompt_logprobs", "top_logprobs", "chat_top_logprobs", "generate", "chat")

_HAS = {"masked": "masked LMs have pseudo_loglikelihood and crows_pairs_pll",
        "seq2seq": "seq2seq models have option_logprob, label_distribution and generate",
        "causal": "causal LMs have sequence_logprob, option_logprob, label_distribution and generate"}


class Backend:
    """Base class: every method a subclass does not give raises the same clear ``TypeError``."""

    #: "local" (computed in this process) or "served" (computed by a server); recorded nowhere, used for messages
    name = "local"
    remote = False

    def __init__(self, lm):
        self.lm = lm
        self.kind = lm.kind
        self.stats: dict = {}

    def unsupported(self, method: str, needs: str = "causal"):
        return TypeError(f"{method} needs a {needs} model; {self.lm.name!r} is {self.kind} ({_HAS[self.kind]})")

    # ------------------------------------------------------------------------------- the interface ---
    def sequence_logprob(self, sc, texts: list[str], per_token: bool):
        raise self.unsupported("sequence_logprob")

    def option_values(self, sc, prompts: list[str], options: list[list[str]], chat) -> list[list[tuple]]:
        raise self.unsupported("option_logprob")

    def label_distribution(self, sc, prompts: list[str], labels, chat):
        raise self.unsupported("label_distribution")

    def generate(self, sc, prompts: list[str], max_new_tokens: int, stop: list[str], do_sample: bool,
                 seed: int | None, temperature: float, chat) -> list[str]:
        raise self.unsupported("generate")

    def pseudo_loglikelihood(self, sc, texts: list[str], per_token: bool):
        raise self.unsupported("pseudo_loglikelihood", "masked")

    def crows_pairs_pll(self, sc, sent_more: list[str], sent_less: list[str]):
        raise self.unsupported("crows_pairs_pll", "masked")

    def token_strings(self, sc, text: str) -> list[str]:
        raise NotImplementedError

    def chat_available(self) -> bool:
        raise NotImplementedError

    def render(self, prompts: Sequence[str], chat) -> list[str]:
        raise NotImplementedError

    def capabilities(self) -> dict[str, bool]:
        return dict.fromkeys(CAPABILITIES, True)

    def lacks(self, capability: str, why: str = "") -> Exception:
        """The error for a capability this backend lacks (in-process models lack none)."""
        return ValueError(f"model {self.lm.name!r} lacks capability {capability!r}{' needed by ' + why if why else ''}")

    def cache_identity(self) -> dict:
        return self.lm.fingerprint

    def execute(self, work: list, costs: list[int], compute: Callable, done: Callable[[list[int], list], None],
                token_keys: list | None = None) -> None:
        raise NotImplementedError


def sums_table(sums_counts, perplexity: str = "perplexity") -> pd.DataFrame:
    """Per text, from its (sum of token log-probabilities, token count): ``sum_logprob``, ``n_tokens``,
    ``mean_logprob`` = sum / n and ``perplexity`` (or the column named so) = exp(-mean); NaN without a token."""
    rows = [{"sum_logprob": s, "n_tokens": n, "mean_logprob": s / n if n else math.nan,
             perplexity: math.exp(-s / n) if n else math.nan} for s, n in sums_counts]
    return pd.DataFrame(rows, columns=["sum_logprob", "n_tokens", "mean_logprob", perplexity])
