"""The :class:`Scorer`: texts in, numbers out, batched, cached and resumable. It knows nothing about benchmarks.

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

import functools
import logging
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import paths
from . import labels as labels_mod
from .batching import default_token_budget, run_batches
from .cache import ScoreCache
from .causal import Head, Request, _lcp, score_batch, score_packed
from .generation import generate_batch, row_seed

log = logging.getLogger(__name__)


class _OptionPlan:
    """One prompt's options: branches of the prompt's trunk, or (rarely) full sequences scored as differences."""

    def __init__(self, trunk):
        self.trunk = trunk
        self.branches: list[list[int]] = []
        self.diffs: list[tuple[list[int], int]] = []
        self.slots: list[tuple[str, int]] = []

    @property
    def cost(self) -> int:
        extra = len(self.trunk) + sum(len(f) for f, _ in self.diffs) if self.diffs else 0
        return len(self.trunk) + sum(max(len(b) - 1, 0) for b in self.branches) + extra


class _MemoryCache:
    """Same interface as :class:`ScoreCache`, kept in memory (``cache_dir=False``)."""

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


def group_by_prefix(seqs: Sequence[Sequence[int]], min_shared: int = 4) -> list[tuple[list[int], list[int]]]:
    """Group token lists that share an opening: ``[(trunk, member indices)]``, trunk = their common prefix.

    Lists are sorted, so lists with a common opening are neighbours; a list joins the current group when it shares at
    least ``min_shared`` tokens with the group's trunk and at least half of it (so the trunk never shrinks much).
    """
    order = sorted(range(len(seqs)), key=lambda i: list(seqs[i]))
    groups: list[tuple[list[int], list[int]]] = []
    for i in order:
        if groups:
            trunk, members = groups[-1]
            k = _lcp(trunk, seqs[i])
            if k >= min_shared and 2 * k >= len(trunk):
                groups[-1] = (list(trunk[:k]), members + [i])
                continue
        groups.append((list(seqs[i]), [i]))
    return groups


class Scorer:
    """Score texts with a loaded model (:func:`biaslab.models.load`).

    ``cache_dir``: where scores persist (None: ``~/.cache/biaslab/scores``; False: memory only). A re-run reuses every
    item already scored with the same model fingerprint, method and settings; a killed run loses at most one batch.
    ``progress``: tqdm bars. ``token_budget``: padded tokens per forward pass (default 2048 on CPU, 32768 on CUDA;
    halved automatically on out-of-memory). ``padding_side``: how trunks are padded with ``packing=False`` (results do not depend on it; models with
    sliding-window attention are always padded on the left).
    ``share_prefixes``: in ``sequence_logprob``, compute the common opening of texts once. ``prefix``: ``"bos"``
    (see the module docstring) or None. ``packing``: lay prompts and their options out in packed rows with a tree
    attention mask (no padding, one pass; default) instead of padded batches with a copied key/value cache per option
    (``packing=False``, for architectures that ignore custom 4D attention masks). Both give the same numbers.
    """

    def __init__(self, lm, cache_dir: str | None | bool = None, progress: bool = True, token_budget: int | None = None,
                 padding_side: str = "left", share_prefixes: bool = True, prefix: str | None = "bos",
                 packing: bool = True):
        self.lm = lm
        self.served = None
        if getattr(lm, "backend", "local") == "served":    # computed by a server: see backends/served.py
            from .backends.served import ServedBackend
            self.kind, self.progress, self.stats = lm.kind, progress, {}
            folder = None if cache_dir is False else Path(cache_dir or paths.SCORE_CACHE_DIR)
            self.cache = _MemoryCache() if folder is None else None
            self.served = ServedBackend(lm, (lambda fp: _MemoryCache()) if folder is None
                                        else (lambda fp: ScoreCache(folder, fp)), folder, progress)
            self.stats = self.served.stats
            return
        self.tokenizer = lm.tokenizer
        self.kind = lm.kind
        self.progress = progress
        self.padding_side = padding_side
        self.packing = packing
        self.share_prefixes = share_prefixes
        self.token_budget = token_budget or default_token_budget(lm.device)
        self.stats: dict[str, int] = {}
        tok = self.tokenizer
        self.pad_id = next(i for i in (tok.pad_token_id, tok.eos_token_id, 0) if i is not None)
        if prefix not in ("bos", None):
            raise ValueError("prefix must be 'bos' or None")
        self.prefix_id = None if prefix is None else (tok.bos_token_id if tok.bos_token_id is not None
                                                      else tok.eos_token_id)
        self._head = None
        if cache_dir is False:
            self.cache = _MemoryCache()
        else:
            try:
                self.cache = ScoreCache(cache_dir or paths.SCORE_CACHE_DIR, lm.fingerprint)
            except ValueError as exc:
                log.warning("%s: scores are kept in memory only", exc)
                self.cache = _MemoryCache()

    # ------------------------------------------------------------------------------------------ helpers ---
    @property
    def model(self):
        """The torch module; its weights are read on first use (a fully cached run never loads them)."""
        return self.lm.model

    @property
    def head(self) -> Head | None:
        if self._head is None and self.kind == "causal":
            self._head = Head(self.model)
        return self._head

    @functools.cached_property
    def end_token_ids(self) -> set[int]:
        """Tokens that end a generation: the tokenizer's EOS and the model's generation-config EOS (read only when
        something is generated, so a cached run does not load the weights for it)."""
        ids: set[int] = set()
        for e in (self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            if isinstance(e, int):
                ids.add(e)
            elif e is not None:
                ids.update(e)
        return ids

    def _score(self, requests: list[Request], budget: int):
        if self.packing:
            return score_packed(self.model, self.head, requests, self.pad_id, budget, self.stats,
                                share=self.share_prefixes)
        return score_batch(self.model, self.head, requests, self.pad_id, budget, self.padding_side, self.stats)

    def _settings(self, **extra) -> dict:
        return {"prefix": self.prefix_id, **extra}

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens (one call to the fast tokenizer)."""
        if not texts:
            return []
        return [list(x) for x in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def with_prefix(self, ids: list[int]) -> list[int]:
        if self.prefix_id is None or (ids and ids[0] == self.prefix_id):
            return list(ids)
        return [self.prefix_id] + list(ids)

    def render(self, prompts: Sequence[str], chat: bool | str = False) -> list[str]:
        """Prompts as the model sees them: with ``chat=True`` each becomes a user message in the model's chat
        template with the generation prompt added; ``chat="auto"`` does so only when the model has a template."""
        prompts = [str(p) for p in prompts]
        if not chat:
            return prompts
        if not getattr(self.tokenizer, "chat_template", None):
            if chat == "auto":
                return prompts
            raise ValueError(f"model {self.lm.name!r} has no chat template; use chat=False (or chat='auto')")
        return [self.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                   add_generation_prompt=True) for p in prompts]

    def _bar(self, total: int, desc: str):
        from tqdm import tqdm
        return tqdm(total=total, desc=f"{self.lm.name}: {desc}", disable=not self.progress or total == 0,
                    leave=False, dynamic_ncols=True)

    def _run(self, method: str, items: list, keys: list[str], prepare, compute, desc: str,
             cache: bool = True) -> dict:
        """Look up ``keys``; compute the missing items and return key -> value for all items.

        ``prepare(items) -> (prepared, costs[, token_keys])`` tokenizes the missing items once; ``compute(
        prepared_batch, budget) -> values`` scores one batch, which is written to the cache as soon as it is done.
        With ``token_keys`` (each item's leading tokens) and packing, items are batched in sorted order so that items
        with a common opening share a batch, and each item's cost is what it adds to its predecessor.
        ``cache=False``: keep these values in memory only (unseeded samples).
        """
        import torch
        store = self.cache if cache else _MemoryCache()
        found = store.get_many(keys)
        todo = list({keys[i]: i for i, k in enumerate(keys) if k not in found}.values())   # distinct, missing
        if not todo:
            return found
        prepared, costs, *keys_ = prepare([items[i] for i in todo])
        order = None
        if keys_ and self.packing:
            tk = keys_[0]
            order = sorted(range(len(todo)), key=lambda j: tk[j])
            costs = list(costs)
            for prev, j in zip(order, order[1:]):
                costs[j] = max(costs[j] - _lcp(tk[prev], tk[j]), 1)
        bar = self._bar(len(todo), desc)

        def fn(batch, budget):
            values = compute([prepared[j] for j in batch], budget)
            new = {keys[todo[j]]: v for j, v in zip(batch, values)}
            store.put_many(new, method)
            found.update(new)

        try:
            with torch.inference_mode():
                self.token_budget = run_batches(costs, self.token_budget, fn, bar.update, order=order)
        finally:
            bar.close()
        return found

    # -------------------------------------------------------------------------------- sequence scoring ---
    def sequence_logprob(self, texts: Sequence[str], per_token: bool = False) -> pd.DataFrame:
        """Log-likelihood of each text under the prefix convention (module docstring), one row per text, in order.

        Columns: ``sum_logprob`` (natural log), ``n_tokens``, ``mean_logprob`` = sum / n, ``perplexity`` =
        exp(-mean). ``per_token=True`` adds ``tokens`` and ``token_logprobs`` (lists). Causal LMs only; for masked
        LMs use :meth:`pseudo_loglikelihood`.
        """
        if self.served:
            return self.served.sequence_logprob(texts, per_token=per_token)
        self._require("causal", "sequence_logprob")
        texts = [str(t) for t in texts]
        settings = self._settings()
        keys = [self.cache.key("sequence", settings, t) for t in texts]

        def prepare(todo_texts):
            seqs = [self.with_prefix(x) for x in self.encode(todo_texts)]
            return seqs, [len(x) for x in seqs], seqs

        def compute(seqs, budget):
            if self.share_prefixes and len(seqs) > 1 and not self.packing:   # packed rows share by themselves
                groups = group_by_prefix(seqs)
            else:
                groups = [(s, [i]) for i, s in enumerate(seqs)]
            reqs = [Request(trunk, [] if len(members) == 1 else [seqs[m][len(trunk):] for m in members], True)
                    for trunk, members in groups]
            results = self._score(reqs, budget)
            out: list = [None] * len(seqs)
            for (trunk, members), res in zip(groups, results):
                if len(members) == 1:
                    out[members[0]] = res.trunk.tolist()
                else:
                    for m, br in zip(members, res.branches):
                        out[m] = np.concatenate([res.trunk, br]).tolist()
            return out

        values = self._run("sequence", texts, keys, prepare, compute, "sequence log-likelihood")
        rows = []
        for t, k in zip(texts, keys):
            lp = np.asarray(values[k], dtype=float)
            n = len(lp)
            s = float(lp.sum())
            mean = s / n if n else math.nan
            rows.append({"sum_logprob": s, "n_tokens": n, "mean_logprob": mean,
                         "perplexity": math.exp(-mean) if n else math.nan})
        df = pd.DataFrame(rows, columns=["sum_logprob", "n_tokens", "mean_logprob", "perplexity"])
        if per_token:
            ids = self.encode(texts)
            df["tokens"] = [self.tokenizer.convert_ids_to_tokens(self.with_prefix(x)[1:]) for x in ids]
            df["token_logprobs"] = [list(values[k]) for k in keys]
        return df

    # ---------------------------------------------------------------------------------- option scoring ---
    def _options_per_prompt(self, prompts, options) -> list[list[str]]:
        if len(options) and all(isinstance(o, str) for o in options):
            return [list(options)] * len(prompts)
        if len(options) != len(prompts):
            raise ValueError(f"options must be one list of strings shared by all prompts, or one list per prompt "
                             f"({len(prompts)} prompts, {len(options)} option lists)")
        return [[str(o) for o in opts] for opts in options]

    def option_logprob(self, prompts: Sequence[str], options, chat: bool | str = False) -> pd.DataFrame:
        """``log P(option | prompt)`` for each (prompt, option): long format, in order of prompts then options.

        Columns: ``prompt_idx``, ``option_idx``, ``option``, ``sum_logprob``, ``n_tokens``, ``mean_logprob`` (sum /
        n_tokens, length-normalized). ``options``: one list of strings for all prompts, or a list of lists. Each
        prompt is computed once for all its options (see the module docstring for token boundaries).
        """
        prompts = list(prompts)
        opts = self._options_per_prompt(prompts, options)
        if self.served:
            if chat:
                raise ValueError(f"option_logprob(chat=True) on served model {self.lm.name!r}: prompt log-probs "
                                 "come from /v1/completions, which takes text, not chat messages; pass the "
                                 "model's chat-formatted text with chat=False, or use label_distribution(chat=True)")
            values = self.served.option_values([str(p) for p in prompts], opts)
        else:
            values = self._option_values(self.render(prompts, chat), opts, eos=True)
        rows = []
        for i, (os_, vals) in enumerate(zip(opts, values)):
            for j, (o, (s, n)) in enumerate(zip(os_, vals)):
                rows.append({"prompt_idx": i, "option_idx": j, "option": o, "sum_logprob": s, "n_tokens": n,
                             "mean_logprob": s / n if n else math.nan})
        return pd.DataFrame(rows, columns=["prompt_idx", "option_idx", "option", "sum_logprob", "n_tokens",
                                           "mean_logprob"])

    def _option_values(self, rendered: list[str], opts: list[list[str]], eos: bool) -> list[list[tuple]]:
        if self.kind == "seq2seq":
            from .seq2seq import option_values
            return option_values(self, rendered, opts, eos=eos)
        self._require("causal", "option_logprob")
        settings = self._settings()
        items = [[r, o] for r, o in zip(rendered, opts)]
        keys = [self.cache.key("options", settings, it) for it in items]

        def prepare(todo_items):
            p_ids = self.encode([p for p, _ in todo_items])
            f_ids = iter(self.encode([p + o for p, os_ in todo_items for o in os_]))
            plans, costs = [], []
            for (p, os_), pid in zip(todo_items, p_ids):
                plan = _OptionPlan(self.with_prefix(pid))
                for j, o in enumerate(os_):
                    fid = next(f_ids)
                    if fid[:len(pid)] == pid:
                        plan.slots.append(("branch", len(plan.branches)))
                        plan.branches.append(fid[len(pid):])
                    else:   # the joint tokenization crosses the boundary: exact difference of two sequences
                        plan.slots.append(("diff", len(plan.diffs)))
                        plan.diffs.append((self.with_prefix(fid), len(fid) - _lcp(pid, fid)))
                plans.append(plan)
                costs.append(plan.cost)
            return plans, costs, [pl.trunk for pl in plans]

        def compute(plans, budget):
            reqs = [Request(pl.trunk, pl.branches) for pl in plans]
            where = []
            for pl in plans:
                if pl.diffs:
                    where.append((len(reqs), len(reqs) + 1))
                    reqs.append(Request(pl.trunk, [], True))
                    reqs.extend(Request(full, [], True) for full, _ in pl.diffs)
                else:
                    where.append(None)
            results = self._score(reqs, budget)
            out = []
            for i, pl in enumerate(plans):
                vals = []
                for kind, k in pl.slots:
                    if kind == "branch":
                        lp = results[i].branches[k]
                        vals.append((float(lp.sum()), int(len(lp))))
                    else:
                        p_at, f_at = where[i]
                        diff = float(results[f_at + k].trunk.sum() - results[p_at].trunk.sum())
                        self.stats["boundary_merges"] = self.stats.get("boundary_merges", 0) + 1
                        vals.append((diff, int(pl.diffs[k][1])))
                out.append(vals)
            return out

        merges_before = self.stats.get("boundary_merges", 0)
        values = self._run("options", items, keys, prepare, compute, "option log-probabilities")
        merged = self.stats.get("boundary_merges", 0) - merges_before
        if merged:
            log.warning("%d prompt/option pairs: the prompt's tokens are not a prefix of prompt+option (does the "
                        "prompt end in a space? the space belongs to the option); scored as exact differences "
                        "log P(prompt+option) - log P(prompt)", merged)
        return [[tuple(v) for v in values[k]] for k in keys]

    # ------------------------------------------------------------------------------ label distributions ---
    def label_distribution(self, prompts: Sequence[str], labels: Sequence[str] | Mapping[str, Sequence[str]],
                           chat: bool | str = False) -> pd.DataFrame:
        """Probability of each label as the next words after each prompt, one row per prompt.

        ``labels``: a list (each label's surface forms are derived: ``"yes"`` -> yes, " yes", Yes, " Yes", YES,
        " YES"; see :func:`biaslab.scoring.labels.surface_forms`) or a dict label -> forms. A form's probability is
        exact even when it is several tokens (" 1" is two tokens in both embedded models): the product of its token
        probabilities. Columns: ``logp_<L>`` = log of the summed probability of L's forms, ``p_<L>`` the same
        renormalized over the labels, and ``label_mass`` = the total probability on all labels' forms (low mass: the
        model ignores the answer format). A form whose tokens begin another form's tokens contains that form's
        probability too ("1" and "10"); give such labels explicit forms.
        """
        if self.served:
            return self.served.label_distribution(prompts, labels, chat=bool(chat))
        forms = labels_mod.label_forms(labels)
        flat = [f for fs in forms.values() for f in fs]
        prompts = list(prompts)
        values = self._option_values(self.render(prompts, chat), [flat] * len(prompts), eos=False)
        return labels_mod.aggregate([[s for s, _ in v] for v in values], forms)

    # -------------------------------------------------------------------------------------- generation ---
    def generate(self, prompts: Sequence[str], max_new_tokens: int = 64, stop: Sequence[str] | str | None = None,
                 do_sample: bool = False, seed: int | None = None, temperature: float = 1.0,
                 chat: bool | str = False) -> list[str]:
        """Continue each prompt: greedy (default) or sampled at ``temperature``; returns the new text only.

        Generation ends at the model's end-of-sequence token, before the first of the ``stop`` strings, or after
        ``max_new_tokens``. Sampling with a ``seed`` is reproducible per prompt (each prompt's generator is seeded
        from (seed, prompt), independent of batching); draw several samples with several seeds. Greedy and seeded
        results are cached; unseeded samples are not.
        """
        prompts = list(prompts)
        if self.served:
            if do_sample:
                raise ValueError("served generation is greedy (temperature 0, seeded) so that it can be cached "
                                 "and reproduced; do_sample=True is not supported on served models")
            return self.served.generate(prompts, max_new_tokens, stop, seed=seed, chat=bool(chat))
        stop = [stop] if isinstance(stop, str) else list(stop or [])
        rendered = self.render(prompts, chat)
        if self.kind == "seq2seq":
            from .seq2seq import generate as s2s_generate
            return s2s_generate(self, rendered, max_new_tokens, stop, do_sample, seed, temperature)
        self._require("causal", "generate")
        settings = self._settings(max_new_tokens=max_new_tokens, stop=stop, do_sample=do_sample,
                                  seed=seed if do_sample else None, temperature=temperature if do_sample else None)
        cacheable = not (do_sample and seed is None)
        keys = [self.cache.key("generate", settings, r) if cacheable else f"nocache-{i}"
                for i, r in enumerate(rendered)]
        def prepare(todo_prompts):
            ids = [self.with_prefix(x) for x in self.encode(todo_prompts)]
            seeds = [row_seed(seed, p) if (do_sample and seed is not None) else None for p in todo_prompts]
            return list(zip(ids, seeds)), [len(x) + max_new_tokens for x in ids]

        def compute(batch, budget):
            return generate_batch(self.model, self.head, self.tokenizer, [x for x, _ in batch], max_new_tokens,
                                  self.end_token_ids, stop, do_sample, temperature, [sd for _, sd in batch],
                                  self.pad_id)

        values = self._run("generate", rendered, keys, prepare, compute, "generation", cache=cacheable)
        return [values[k] for k in keys]

    # ------------------------------------------------------------------------------------ masked models ---
    def pseudo_loglikelihood(self, texts: Sequence[str], per_token: bool = False) -> pd.DataFrame:
        """Masked LMs: pseudo-log-likelihood of each text (every token masked in turn, Salazar et al. 2020);
        see :func:`biaslab.scoring.masked.pseudo_loglikelihood`."""
        from .masked import pseudo_loglikelihood
        self._require("masked", "pseudo_loglikelihood")
        return pseudo_loglikelihood(self, list(texts), per_token=per_token)

    def crows_pairs_pll(self, sent_more: Sequence[str], sent_less: Sequence[str]) -> pd.DataFrame:
        """Masked LMs: the original CrowS-Pairs metric (Nangia et al. 2020); see
        :func:`biaslab.scoring.masked.crows_pairs_pll`."""
        from .masked import crows_pairs_pll
        self._require("masked", "crows_pairs_pll")
        return crows_pairs_pll(self, list(sent_more), list(sent_less))

    def chat_available(self) -> bool:
        """Whether prompts can be asked as chat messages: the tokenizer has a chat template (in-process), or the
        server answers /v1/chat/completions (served)."""
        if self.served:
            return bool(self.served.probe().get("chat"))
        return getattr(self.tokenizer, "chat_template", None) is not None

    def token_strings(self, text: str) -> list[str]:
        """How the model splits ``text`` into tokens (their strings), as the model itself tokenizes it: the local
        tokenizer, or the server's own echo (served)."""
        if self.served:
            return self.served.token_strings(text)
        return [self.tokenizer.decode([i]) for i in self.encode([text])[0]]

    def require(self, *capabilities: str, why: str = "") -> None:
        """State what an analysis needs before its first request: ``"prompt_logprobs"`` (sequence and option
        scores), ``"top_logprobs"`` / ``"chat_top_logprobs"`` (label distributions), ``"generate"``, ``"chat"``.
        In-process models have them all; a served model is probed once and a missing one raises at once with the
        model, the capability and the way out."""
        if self.served:
            self.served.require(list(capabilities), why)

    def _require(self, kind: str, method: str) -> None:
        if self.kind != kind:
            hint = {"masked": "masked LMs have pseudo_loglikelihood and crows_pairs_pll",
                    "seq2seq": "seq2seq models have option_logprob, label_distribution and generate",
                    "causal": "causal LMs have sequence_logprob, option_logprob, label_distribution and generate"}
            raise TypeError(f"{method} needs a {kind} model; {self.lm.name!r} is {self.kind} ({hint[self.kind]})")
