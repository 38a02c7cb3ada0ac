"""In-process transformers backends: the exact, fast path for models that fit one device.

:class:`LocalBackend` holds what every in-process model shares (tokenizer, device, padding token, chat rendering,
batches one after the other under :func:`torch.inference_mode`, sized by the token budget and halved on
out-of-memory); :class:`CausalBackend` is the causal-LM engine: shared-prefix forward passes and the chunked output
layer of :mod:`biaslab.scoring.causal`, generation from :mod:`biaslab.scoring.generation`. The seq2seq and masked
variants are :mod:`.seq2seq` and :mod:`.masked`. The prefix convention and token boundaries are described in
:mod:`biaslab.scoring.scorer`.
"""

from __future__ import annotations

import functools
import logging
from typing import Sequence

import numpy as np

from .. import labels as labels_mod
from ..batching import default_token_budget, run_batches
from ..causal import Head, Request, _lcp, group_by_prefix, score_batch, score_packed
from ..generation import generate_batch, row_seed
from .base import Backend, sums_table

log = logging.getLogger(__name__)


class LocalBackend(Backend):
    """What every in-process model shares. ``token_budget``: padded tokens per forward pass (default 2048 on CPU,
    32768 on CUDA; halved automatically on out-of-memory and kept for the next call)."""

    def __init__(self, lm, token_budget: int | None = None, **_):
        super().__init__(lm)
        self.tokenizer = lm.tokenizer
        self.token_budget = token_budget or default_token_budget(lm.device)
        tok = self.tokenizer
        self.pad_id = next(i for i in (tok.pad_token_id, tok.eos_token_id, 0) if i is not None)
        #: order batches by their items' leading tokens (packed rows share them); set by the causal engine
        self.packing = False

    @property
    def model(self):
        """The torch module; its weights are read on first use (a fully cached run never loads them)."""
        return self.lm.model

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens (one call to the fast tokenizer)."""
        if not texts:
            return []
        return [list(x) for x in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def render(self, prompts: Sequence[str], chat) -> list[str]:
        prompts = [str(p) for p in prompts]
        if not chat:
            return prompts
        if not getattr(self.tokenizer, "chat_template", None):
            if chat == "auto":
                return prompts
            raise ValueError(f"model {self.lm.name!r} has no chat template; use chat=False (or chat='auto')")
        return [self.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                   add_generation_prompt=True) for p in prompts]

    def chat_available(self) -> bool:
        return getattr(self.tokenizer, "chat_template", None) is not None

    def token_strings(self, sc, text: str) -> list[str]:
        return [self.tokenizer.decode([i]) for i in self.encode([text])[0]]

    def label_distribution(self, sc, prompts, labels, chat):
        """Label probabilities as exact option scores of every surface form (no end token after a form)."""
        forms = labels_mod.label_forms(labels)
        flat = [f for fs in forms.values() for f in fs]
        values = self.option_values(sc, list(prompts), [flat] * len(prompts), chat, eos=False)
        return labels_mod.aggregate([[s for s, _ in v] for v in values], forms)

    def execute(self, work, costs, compute, done, token_keys=None) -> None:
        """Batches one after the other. With ``token_keys`` (each item's leading tokens) and packing, items are
        batched in sorted order so that items with a common opening share a batch, and each item's cost is what it
        adds to its predecessor."""
        import torch
        order = None
        if token_keys is not None and self.packing:
            order = sorted(range(len(work)), key=lambda j: token_keys[j])
            costs = list(costs)
            for prev, j in zip(order, order[1:]):
                costs[j] = max(costs[j] - _lcp(token_keys[prev], token_keys[j]), 1)

        def fn(batch, budget):
            done(batch, compute([work[j] for j in batch], budget))

        with torch.inference_mode():
            self.token_budget = run_batches(costs, self.token_budget, fn, order=order)


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


class CausalBackend(LocalBackend):
    """Causal LMs in-process. ``padding_side``: how trunks are padded with ``packing=False`` (results do not depend
    on it; models with sliding-window attention are always padded on the left). ``share_prefixes``: in
    ``sequence_logprob``, compute the common opening of texts once. ``prefix``: ``"bos"`` or None. ``packing``: lay
    prompts and their options out in packed rows with a tree attention mask (default) instead of padded batches with
    a copied key/value cache per option (for architectures that ignore custom 4D attention masks)."""

    def __init__(self, lm, token_budget: int | None = None, padding_side: str = "left", share_prefixes: bool = True,
                 prefix: str | None = "bos", packing: bool = True):
        super().__init__(lm, token_budget)
        self.padding_side = padding_side
        self.packing = packing
        self.share_prefixes = share_prefixes
        if prefix not in ("bos", None):
            raise ValueError("prefix must be 'bos' or None")
        tok = self.tokenizer
        self.prefix_id = None if prefix is None else (tok.bos_token_id if tok.bos_token_id is not None
                                                      else tok.eos_token_id)

    @functools.cached_property
    def head(self) -> Head:
        return Head(self.model)

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

    def with_prefix(self, ids: list[int]) -> list[int]:
        if self.prefix_id is None or (ids and ids[0] == self.prefix_id):
            return list(ids)
        return [self.prefix_id] + list(ids)

    # -------------------------------------------------------------------------------- sequence scoring ---
    def sequence_logprob(self, sc, texts, per_token):
        keys = [sc.cache.key("sequence", self._settings(), t) for t in texts]

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

        values = sc._run("sequence", texts, keys, prepare, compute, "sequence log-likelihood")
        df = sequence_table(values, keys)
        if per_token:
            ids = self.encode(texts)
            df["tokens"] = [self.tokenizer.convert_ids_to_tokens(self.with_prefix(x)[1:]) for x in ids]
            df["token_logprobs"] = [list(values[k]) for k in keys]
        return df

    # ---------------------------------------------------------------------------------- option scoring ---
    def option_values(self, sc, prompts, options, chat, eos: bool = True):
        rendered = self.render(prompts, chat)
        items = [[r, o] for r, o in zip(rendered, options)]
        keys = [sc.cache.key("options", self._settings(), it) for it in items]

        def prepare(todo_items):
            p_ids = self.encode([p for p, _ in todo_items])
            f_ids = iter(self.encode([p + o for p, os_ in todo_items for o in os_]))
            plans, costs = [], []
            for (p, os_), pid in zip(todo_items, p_ids):
                plan = _OptionPlan(self.with_prefix(pid))
                for o in os_:
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
        values = sc._run("options", items, keys, prepare, compute, "option log-probabilities")
        merged = self.stats.get("boundary_merges", 0) - merges_before
        if merged:
            log.warning("%d prompt/option pairs: the prompt's tokens are not a prefix of prompt+option (does the "
                        "prompt end in a space? the space belongs to the option); scored as exact differences "
                        "log P(prompt+option) - log P(prompt)", merged)
        return [[tuple(v) for v in values[k]] for k in keys]

    # -------------------------------------------------------------------------------------- generation ---
    def generate(self, sc, prompts, max_new_tokens, stop, do_sample, seed, temperature, chat):
        rendered = self.render(prompts, chat)
        settings = self._settings(max_new_tokens=max_new_tokens, stop=stop, do_sample=do_sample,
                                  seed=seed if do_sample else None, temperature=temperature if do_sample else None)
        cacheable = not (do_sample and seed is None)
        keys = [sc.cache.key("generate", settings, r) if cacheable else f"nocache-{i}"
                for i, r in enumerate(rendered)]

        def prepare(todo_prompts):
            ids = [self.with_prefix(x) for x in self.encode(todo_prompts)]
            seeds = [row_seed(seed, p) if (do_sample and seed is not None) else None for p in todo_prompts]
            return list(zip(ids, seeds)), [len(x) + max_new_tokens for x in ids]

        def compute(batch, budget):
            return generate_batch(self.model, self.head, self.tokenizer, [x for x, _ in batch], max_new_tokens,
                                  self.end_token_ids, stop, do_sample, temperature, [sd for _, sd in batch],
                                  self.pad_id)

        values = sc._run("generate", rendered, keys, prepare, compute, "generation", cache=cacheable)
        return [values[k] for k in keys]


def sequence_table(values: dict, keys, perplexity: str = "perplexity"):
    """:func:`.base.sums_table` of each key's token log-probabilities in ``values`` (summed by numpy)."""
    return sums_table([(float(np.asarray(values[k], dtype=float).sum()), len(values[k])) for k in keys], perplexity)
