"""The imported backend: the Scorer's requests answered from another harness's per-sample log.

A peer of :mod:`.local` and :mod:`.served`: ``sequence_logprob`` is log P(text | prefix), which an lm-eval
CrowS-Pairs run holds as the log-likelihood of each sentence after an empty context (lm-eval, like biaslab, puts the
BOS token, or EOS where there is none, before it); ``option_values`` is log P(option | prompt), held by a
multiple-choice run whose context and continuation are exactly the prompt and the option. Requests are matched by
their exact texts, else by their normalised texts (:data:`biaslab.models.imported.TEXT_MATCHING`: Unicode NFC,
whitespace runs collapsed, ends stripped; a harness that keeps a data file's trailing spaces asks for what biaslab's
loaders strip); a normalised form two different log texts share matches neither. The first request the log does
not hold raises, naming it, the log's nearest text and what differs; nothing is computed and nothing is cached (the
log is the cache). Token counts, which no log records, come from the
tokenizer the imported model found (:mod:`biaslab.models.imported`); without one they are NaN, so only the
unnormalised scores are defined, and a warning says so.
"""

from __future__ import annotations

import difflib
import logging
import math

from ...models.imported import TEXT_MATCHING, normalise
from .base import CAPABILITIES, Backend, sums_table

log = logging.getLogger(__name__)


def what_differs(asked: str, logged: str) -> str:
    """The first difference between two texts, in words: where, and each side's characters there."""
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, asked, logged, autojunk=False).get_opcodes():
        if tag != "equal":
            return (f"at character {i1}: the request has {asked[max(0, i1 - 10):i2 + 10]!r}, the log "
                    f"{logged[max(0, j1 - 10):j2 + 10]!r}")
    return "nothing"


class NotInLog(KeyError):
    """A request the imported log does not hold."""

    def __str__(self) -> str:
        return str(self.args[0])


class ImportedBackend(Backend):
    name = "imported"

    def __init__(self, lm):
        super().__init__(lm)
        self.lls: dict = {}
        self.choices: dict = {}
        for lg in lm.logs:
            self.lls.update(lg.loglikelihoods)
            self.choices.update(lg.choices)
        self._warned = False
        self._by_norm: dict = {}
        for key in self.lls:
            nk = tuple(normalise(x) for x in key)
            self._by_norm[nk] = key if nk not in self._by_norm or self._by_norm[nk] == key else None
        self.normalised_matches = 0

    def _key(self, key: tuple):
        """The log's own key for a request: exact, else by normalised texts (None: not in the log)."""
        if key in self.lls:
            return key
        hit = self._by_norm.get(tuple(normalise(x) for x in key))
        if hit is not None:
            self.normalised_matches += 1
        return hit

    def _nearest(self, key: tuple) -> str:
        """The log's text nearest to a request's, and what differs."""
        same = [k for k in self.lls if k[0] == key[0]] or list(self.lls)
        texts = [k[1] for k in same]
        near = difflib.get_close_matches(key[1], texts, n=1, cutoff=0.6)
        if not near:
            return "; no text in the log is close to it"
        return f"; nearest in the log: {near[0][:120]!r}, which differs {what_differs(key[1], near[0])}"

    # ------------------------------------------------------------------------------------------ helpers ---
    def _missing(self, what: str, text: str, key: tuple | None = None) -> NotInLog:
        tasks = ", ".join(f"{lg.task} ({lg.kind}, {len(lg.items)} items; {lg.prompts})" for lg in self.lm.logs)
        near = self._nearest(key) if key is not None and self.lls else ""
        return NotInLog(f"not in the {self.lm.fingerprint.get('format', 'imported')} log of {self.lm.name!r}: "
                        f"{what} {text[:120]!r} (matched by {TEXT_MATCHING}){near}; this analysis needs a model, "
                        f"or a log of a task that asked exactly this (the log holds: {tasks})")

    def _n_tokens(self, text: str) -> float:
        tok = self.lm.tokenizer
        if tok is None:
            if not self._warned:
                log.warning("imported model %s: no tokenizer, so token counts are NaN: log-probabilities are "
                            "exact, length-normalised scores (LPBS, PPB) are undefined", self.lm.name)
                self._warned = True
            return math.nan
        return len(tok(text, add_special_tokens=False)["input_ids"])

    # ------------------------------------------------------------------------------------ the interface ---
    def sequence_logprob(self, sc, texts: list[str], per_token: bool):
        if per_token:
            raise TypeError(f"per_token=True: the log of {self.lm.name!r} holds one log-likelihood per text, not "
                            "per token")
        sums = []
        for t in texts:
            key = self._key(("", t))
            if key is None:
                raise self._missing("the log-likelihood of", t, ("", t))
            sums.append((self.lls[key], self._n_tokens(key[1])))      # tokens of the text the harness scored
        return sums_table(sums)

    def option_values(self, sc, prompts: list[str], options: list[list[str]], chat) -> list[list[tuple]]:
        if chat:
            raise self._missing("a chat-template prompt (chat=True) such as", prompts[0] if prompts else "")
        out = []
        for p, opts in zip(prompts, options):
            vals = []
            for o in opts:
                key = self._key((p, o))
                if key is None:
                    raise self._missing("the option " + repr(o) + " after the prompt", p, (p, o))
                vals.append((self.lls[key], self._n_tokens(key[1])))
            out.append(vals)
        return out

    def generate(self, sc, prompts, max_new_tokens, stop, do_sample, seed, temperature, chat):
        raise self._missing("a generation for", prompts[0] if prompts else "")

    def label_distribution(self, sc, prompts, labels, chat):
        raise self._missing("a next-token distribution after", prompts[0] if prompts else "")

    def token_strings(self, sc, text: str) -> list[str]:
        if self.lm.tokenizer is None:
            raise self._missing("the tokens of", text)
        return self.lm.tokenizer.convert_ids_to_tokens(self.lm.tokenizer(text, add_special_tokens=False)["input_ids"])

    def chat_available(self) -> bool:
        return False

    def render(self, prompts, chat) -> list[str]:
        return list(prompts)

    def capabilities(self) -> dict[str, bool]:
        return dict.fromkeys(CAPABILITIES, False) | {"prompt_logprobs": bool(self.lls)}

    def lacks(self, capability: str, why: str = "") -> Exception:
        need = {"prompt_logprobs": "log-likelihoods", "top_logprobs": "next-token distributions",
                "chat_top_logprobs": "next-token distributions of chat prompts", "generate": "generations",
                "chat": "chat prompts"}[capability]
        fmt = self.lm.fingerprint.get("format", "imported")
        asked = "; ".join(f"{lg.task} ({lg.kind}): {lg.prompts}" for lg in self.lm.logs)
        return ValueError(f"{why or capability}: not in the {fmt} log of {self.lm.name!r}, which holds no {need} "
                          f"(capability {capability!r}) — {asked}; this needs a model, or a log of a task that "
                          "recorded them")
