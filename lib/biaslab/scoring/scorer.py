"""The :class:`Scorer`: texts in, numbers out, batched, cached and resumable. It knows nothing about benchmarks.

What computes the numbers is a *backend* (:mod:`biaslab.scoring.backends`), chosen once when the Scorer is made;
the Scorer owns what they share (:mod:`.backends.base`). Notebooks, loaders and statistics never learn which ran.

Prefix convention (causal LMs). Every scored text is preceded by one *prefix token*: the tokenizer's BOS token, or
its EOS token when it has no BOS (as lm-evaluation-harness does). The prefix is context, never scored, so
``sequence_logprob("The cat")`` is ``log P(The cat | <prefix>)`` summed over the text's tokens and ``n_tokens`` counts
the text's own tokens. Texts are tokenized without the tokenizer's own special tokens (the prefix is added once, by
the engine); a text that already starts with the prefix token (a rendered chat template) gets no second one.
SmolLM2's BOS is ``<|im_start|>`` (id 1); Gemma's is ``<bos>`` (id 2). ``Scorer(prefix=None)`` turns the prefix off:
then the first token of each text is context only and is not counted.

Token boundaries. ``option_logprob`` tokenizes prompt + option as one string and scores the tokens after the
prompt's own tokens: a leading space belongs to the option (pass ``" yes"`` after ``"Answer:"``). Where the joint
tokenization does not start with the prompt's tokens (a prompt ending in a space, which both embedded tokenizers
merge into the next word), the score is the exact difference ``log P(prompt + option) - log P(prompt)`` and
``n_tokens`` counts the joint tokens after the common prefix; a warning says how often that happened.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .. import paths
from . import backends
from .backends.base import CAPABILITIES
from .cache import ScoreCache

log = logging.getLogger(__name__)


def texts_of(texts, what: str = "texts") -> list[str]:
    """``texts`` as strings; a missing value (None, NaN: an empty cell of the items) is refused, never asked as the
    text "nan" (the error carries ``missing_text``, which ``Spec.responses`` completes with the items' rows)."""
    out = list(texts)
    bad = [i for i, t in enumerate(out) if not isinstance(t, str) and pd.api.types.is_scalar(t) and pd.isna(t)]
    if bad:
        exc = ValueError(f"{len(bad)} of {len(out)} {what} are a missing value (the first is number {bad[0]}), which "
                         "would be asked as the text 'nan'. Fix: fill the empty cells of the items, or leave those "
                         "rows out in the loader (biaslab.benchmarks.base.exclude: counted)")
        exc.missing_text = True
        raise exc
    return [str(t) for t in out]


class MemoryCache:
    """Same interface as :class:`ScoreCache`, kept in memory (``cache_dir=False``, or a model without a weights
    hash)."""

    def __init__(self):
        self._d: dict[str, Any] = {}
        self.path = None

    key = staticmethod(ScoreCache.key)

    def get_many(self, keys):
        return {k: self._d[k] for k in keys if k in self._d}

    def put_many(self, items, method=""):
        self._d.update(items)

    def __len__(self):
        return len(self._d)


class Scorer:
    """Score texts with a loaded model (:func:`biaslab.models.load`: a local model or a served-model spec).

    ``cache_dir``: where scores persist (None: ``~/.cache/biaslab/scores``; False: memory only). A re-run reuses every
    item already scored with the same model fingerprint, method and settings; a killed run loses at most one batch.
    ``progress``: tqdm bars. ``token_budget``: tokens per forward pass in-process (default 2048 on CPU, 32768 on
    CUDA; halved automatically on out-of-memory), tokens per request on a server that takes lists of prompts.
    In-process causal LMs also take ``padding_side``, ``share_prefixes``, ``prefix`` (``"bos"``, see the module
    docstring, or None) and ``packing`` (:class:`biaslab.scoring.backends.local.CausalBackend`).
    """

    def __init__(self, lm, cache_dir: str | Path | None | bool = None, progress: bool = True,
                 token_budget: int | None = None, **engine_options):
        self.lm = lm
        self.kind = lm.kind
        self.progress = progress
        self.cache_folder = None if cache_dir is False else Path(cache_dir or paths.SCORE_CACHE_DIR)
        self._cache = None
        self.backend = backends.for_model(lm, probe_dir=self.cache_folder, token_budget=token_budget,
                                          **engine_options)
        self.stats = self.backend.stats

    # ------------------------------------------------------------------------------- shared mechanism ---
    @property
    def cache(self):
        """The score cache of this model (opened on first use: a served model's file is named by the id its server
        reports, known after the probe)."""
        if self._cache is None:
            self._cache = MemoryCache()
            if self.cache_folder is not None:
                try:
                    self._cache = ScoreCache(self.cache_folder, self.backend.cache_identity())
                except ValueError as exc:
                    log.warning("%s: scores are kept in memory only", exc)
        return self._cache

    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def token_budget(self) -> int:
        return self.backend.token_budget

    def _run(self, method: str, items: list, keys: list[str], prepare, compute, desc: str,
             cache: bool = True) -> dict:
        """Look up ``keys``; compute the missing items and return key -> value for all items.

        ``prepare(items) -> (work, costs[, token_keys])`` makes the missing (distinct) items ready once: tokens
        in-process, requests for a server; ``costs`` are their token counts for the budget. The backend computes
        them (``compute``: see :meth:`biaslab.scoring.backends.base.Backend.execute`) and hands back each batch as
        it is done; it is written to the cache at once. ``cache=False``: keep the values in memory only (unseeded
        samples). ``stats["computed"]`` counts the items computed (cache misses of any method: scores and
        generations alike), so a difference of 0 over a stretch of calls means the model did no work there.
        """
        store = self.cache if cache else MemoryCache()
        found = store.get_many(keys)
        todo = list({keys[i]: i for i, k in enumerate(keys) if k not in found}.values())   # distinct, missing
        if not todo:
            return found
        self.stats["computed"] = self.stats.get("computed", 0) + len(todo)     # cache misses: model work
        work, costs, *token_keys = prepare([items[i] for i in todo])
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc=f"{self.lm.name}: {desc}", disable=not self.progress, leave=False,
                   dynamic_ncols=True)

        def done(batch: list[int], values: list) -> None:
            new = {keys[todo[j]]: v for j, v in zip(batch, values)}
            store.put_many(new, method)
            found.update(new)
            bar.update(len(batch))

        try:
            self.backend.execute(work, list(costs), compute, done, token_keys[0] if token_keys else None)
        finally:
            bar.close()
        return found

    def capabilities(self) -> dict[str, bool]:
        """Which of ``prompt_logprobs``, ``top_logprobs``, ``chat_top_logprobs``, ``generate``, ``chat`` the model
        has (in-process: all; a server: probed once per model, cached)."""
        return self.backend.capabilities()

    def require(self, *capabilities: str, why: str = "") -> None:
        """State what an analysis needs before its first request: ``"prompt_logprobs"`` (sequence and option
        scores), ``"top_logprobs"`` / ``"chat_top_logprobs"`` (label distributions), ``"generate"``, ``"chat"``.
        In-process models have them all; a served model is probed once and a missing one raises at once with the
        model, the capability and the way out."""
        reason = self.missing(*capabilities, why=why)
        if reason is not None:
            raise reason

    def missing(self, *capabilities: str, why: str = "") -> Exception | None:
        """The error :meth:`require` would raise for the first of ``capabilities`` the model lacks (its message
        names the model, the capability and the way out), or None when it has them all: for an analysis that is
        skipped, with that reason shown, rather than stopped."""
        unknown = [c for c in capabilities if c not in CAPABILITIES]
        if unknown:
            raise ValueError(f"unknown capability {unknown[0]!r}; known: {CAPABILITIES}")
        have = self.backend.capabilities() if capabilities else {}
        for cap in capabilities:
            if not have[cap]:
                return self.backend.lacks(cap, why)
        return None

    def render(self, prompts: Sequence[str], chat: bool | str = False) -> list[str]:
        """Prompts as the model sees them: with ``chat=True`` each becomes a user message in the model's chat
        template with the generation prompt added; ``chat="auto"`` does so only when the model has a template.
        (A server applies its own template: served prompts are returned as they are.)"""
        return self.backend.render(prompts, chat)

    # ------------------------------------------------------------------------------------ the methods ---
    def sequence_logprob(self, texts: Sequence[str], per_token: bool = False) -> pd.DataFrame:
        """Log-likelihood of each text under the prefix convention (module docstring), one row per text, in order.

        Columns: ``sum_logprob`` (natural log), ``n_tokens``, ``mean_logprob`` = sum / n, ``perplexity`` =
        exp(-mean). ``per_token=True`` adds ``tokens`` and ``token_logprobs`` (lists). Causal LMs only; for masked
        LMs use :meth:`pseudo_loglikelihood`.
        """
        return self.backend.sequence_logprob(self, texts_of(texts), per_token)

    def _options_per_prompt(self, prompts, options) -> list[list[str]]:
        if len(options) and all(isinstance(o, str) for o in options):
            return [list(options)] * len(prompts)
        if len(options) != len(prompts):
            raise ValueError(f"options must be one list of strings shared by all prompts, or one list per prompt "
                             f"({len(prompts)} prompts, {len(options)} option lists)")
        return [texts_of(opts, "options") for opts in options]

    def option_logprob(self, prompts: Sequence[str], options, chat: bool | str = False) -> pd.DataFrame:
        """``log P(option | prompt)`` for each (prompt, option): long format, in order of prompts then options.

        Columns: ``prompt_idx``, ``option_idx``, ``option``, ``sum_logprob``, ``n_tokens``, ``mean_logprob`` (sum /
        n_tokens, length-normalized). ``options``: one list of strings for all prompts, or a list of lists. Each
        prompt is computed once for all its options (see the module docstring for token boundaries).
        """
        prompts = texts_of(prompts, "prompts")
        opts = self._options_per_prompt(prompts, options)
        values = self.backend.option_values(self, prompts, opts, chat)
        rows = []
        for i, (os_, vals) in enumerate(zip(opts, values)):
            for j, (o, (s, n)) in enumerate(zip(os_, vals)):
                rows.append({"prompt_idx": i, "option_idx": j, "option": o, "sum_logprob": s, "n_tokens": n,
                             "mean_logprob": s / n if n else math.nan})
        return pd.DataFrame(rows, columns=["prompt_idx", "option_idx", "option", "sum_logprob", "n_tokens",
                                           "mean_logprob"])

    def label_distribution(self, prompts: Sequence[str], labels: Sequence[str] | Mapping[str, Sequence[str]],
                           chat: bool | str = False) -> pd.DataFrame:
        """Probability of each label as the next words after each prompt, one row per prompt.

        ``labels``: a list (each label's surface forms are derived: ``"yes"`` -> yes, " yes", Yes, " Yes", YES,
        " YES"; see :func:`biaslab.scoring.labels.surface_forms`) or a dict label -> forms. A form's probability is
        exact even when it is several tokens (" 1" is two tokens in both embedded models): the product of its token
        probabilities. Columns: ``logp_<L>`` = log of the summed probability of L's forms, ``p_<L>`` the same
        renormalized over the labels, and ``label_mass`` = the total probability on all labels' forms (low mass: the
        model ignores the answer format). A form whose tokens begin another form's tokens contains that form's
        probability too ("1" and "10"); give such labels explicit forms. (Served: from the server's top-k, see
        :mod:`biaslab.scoring.backends.served`.)
        """
        return self.backend.label_distribution(self, texts_of(prompts, "prompts"), labels, chat)

    def generate(self, prompts: Sequence[str], max_new_tokens: int = 64, stop: Sequence[str] | str | None = None,
                 do_sample: bool = False, seed: int | None = None, temperature: float = 1.0,
                 chat: bool | str = False) -> list[str]:
        """Continue each prompt: greedy (default) or sampled at ``temperature``; returns the new text only.

        Generation ends at the model's end-of-sequence token, before the first of the ``stop`` strings, or after
        ``max_new_tokens``. Sampling with a ``seed`` is reproducible per prompt (each prompt's generator is seeded
        from (seed, prompt), independent of batching); draw several samples with several seeds. Greedy and seeded
        results are cached; unseeded samples are not.
        """
        stop = [stop] if isinstance(stop, str) else list(stop or [])
        return self.backend.generate(self, texts_of(prompts, "prompts"), max_new_tokens, stop, do_sample, seed,
                                     temperature, chat)

    def pseudo_loglikelihood(self, texts: Sequence[str], per_token: bool = False) -> pd.DataFrame:
        """Masked LMs: pseudo-log-likelihood of each text (every token masked in turn, Salazar et al. 2020);
        see :meth:`biaslab.scoring.backends.masked.MaskedBackend.pseudo_loglikelihood`."""
        return self.backend.pseudo_loglikelihood(self, texts_of(texts), per_token)

    def crows_pairs_pll(self, sent_more: Sequence[str], sent_less: Sequence[str]) -> pd.DataFrame:
        """Masked LMs: the original CrowS-Pairs metric (Nangia et al. 2020); see
        :meth:`biaslab.scoring.backends.masked.MaskedBackend.crows_pairs_pll`."""
        return self.backend.crows_pairs_pll(self, texts_of(sent_more, "sentences"), texts_of(sent_less, "sentences"))

    def chat_available(self) -> bool:
        """Whether prompts can be asked as chat messages: the tokenizer has a chat template (in-process), or the
        server answers /v1/chat/completions (served)."""
        return self.backend.chat_available()

    def chat_logprobs(self) -> bool:
        """Whether prompt log-probs can be read in the chat template (a server's completions endpoint takes text)."""
        return self.chat_available() and not self.backend.remote

    def seeded_sampling(self) -> bool:
        """Whether a seeded sample is reproducible per prompt: in-process yes; a server's seeds are its own."""
        return not self.backend.remote

    def instruction_tuned(self) -> bool:
        """Whether the model is instruction-tuned, judged by its name ("instruct", "-it", "-chat"); for a served
        model also by the id the server serves (api.openai.com's chat models count)."""
        names = [str(getattr(self.lm, "name", ""))]
        served_id = str(getattr(getattr(self.lm, "spec", None), "model", None) or "")
        if served_id.startswith(("gpt-", "o1", "o3", "o4")):
            return True
        return any(k in n.lower() or n.lower().endswith("-it") for n in names + [served_id] if n
                   for k in ("instruct", "-chat"))

    def token_strings(self, text: str) -> list[str]:
        """How the model splits ``text`` into tokens (their strings), as the model itself tokenizes it: the local
        tokenizer, or the server's own echo (served)."""
        return self.backend.token_strings(self, text)
