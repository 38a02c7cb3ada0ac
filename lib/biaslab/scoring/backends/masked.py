"""The in-process backend for masked LMs: pseudo-log-likelihood and the original CrowS-Pairs metric.

Pseudo-log-likelihood (Salazar et al. 2020, "Masked Language Model Scoring", eq. 1): PLL(W) = sum_t log P(w_t | W
with w_t masked), every non-special token masked in turn. The CrowS-Pairs metric (Nangia et al. 2020, section 3;
``metric.py`` of nyu-mll/crows-pairs) scores only the tokens the two sentences of a pair share: the tokens in the
``equal`` blocks of ``difflib.SequenceMatcher`` over the two token-id sequences, without the first and last of them
(the [CLS] and [SEP] tokens), each masked one at a time; a pair counts as stereotyped when the more-stereotypical
sentence gets the higher score.
"""

from __future__ import annotations

import difflib
from typing import Sequence

import numpy as np
import pandas as pd

from .base import Backend
from .local import LocalBackend, sequence_table


def shared_token_positions(ids1: Sequence[int], ids2: Sequence[int]) -> tuple[list[int], list[int]]:
    """``get_span`` of the original CrowS-Pairs code: positions of the unmodified tokens in each sentence."""
    s1, s2 = [str(x) for x in ids1], [str(x) for x in ids2]
    t1, t2 = [], []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, s1, s2).get_opcodes():
        if op == "equal":
            t1 += list(range(a0, a1))
            t2 += list(range(b0, b1))
    return t1, t2


def masked_token_logprobs(be, jobs: Sequence[tuple[list[int], list[int]]], budget: int) -> list[np.ndarray]:
    """For each (token ids, positions): log P(ids[p] | ids with position p masked), one masked copy per position.

    Copies of all jobs are batched together, ``rows x width <= budget``, padded on the right.
    """
    import torch
    from ..batching import pad
    model, mask_id = be.model, be.tokenizer.mask_token_id
    if mask_id is None:
        raise ValueError(f"tokenizer of {be.lm.name!r} has no mask token")
    rows = [(j, p, k) for j, (_, positions) in enumerate(jobs) for k, p in enumerate(positions)]
    out = [np.zeros(len(positions)) for _, positions in jobs]
    rows.sort(key=lambda jpk: -len(jobs[jpk[0]][0]))
    start = 0
    while start < len(rows):
        width = len(jobs[rows[start][0]][0])
        chunk = rows[start:start + max(1, budget // max(width, 1))]
        start += len(chunk)
        seqs = []
        for j, p, _ in chunk:
            ids = list(jobs[j][0])
            ids[p] = mask_id
            seqs.append(ids)
        ids_t, mask_t, _ = pad(seqs, be.pad_id, "right")
        logits = model(input_ids=ids_t.to(model.device), attention_mask=mask_t.to(model.device)).logits
        r = torch.arange(len(chunk), device=model.device)
        pos = torch.as_tensor([p for _, p, _ in chunk], device=model.device)
        tgt = torch.as_tensor([jobs[j][0][p] for j, p, _ in chunk], device=model.device)
        lp = torch.log_softmax(logits[r, pos].float(), dim=-1)[r, tgt].double().cpu().numpy()
        be.stats["positions"] = be.stats.get("positions", 0) + ids_t.numel()
        for (j, _, k), v in zip(chunk, lp):
            out[j][k] = v
    return out


class MaskedBackend(LocalBackend):
    """Masked LMs in-process (see the module docstring)."""

    label_distribution = Backend.label_distribution     # no option scores to build it from

    def pseudo_loglikelihood(self, sc, texts: list[str], per_token: bool = False) -> pd.DataFrame:
        """PLL of each text: columns ``sum_logprob`` (the PLL), ``n_tokens`` (non-special tokens), ``mean_logprob``,
        ``pseudo_perplexity`` = exp(-mean) (Salazar et al. 2020, eq. 4); ``per_token`` adds ``tokens`` and
        ``token_logprobs``."""
        tok = self.tokenizer
        special = set(tok.all_special_ids)
        keys = [sc.cache.key("pll", {}, t) for t in texts]

        def prepare(todo):
            enc = tok(list(todo), add_special_tokens=True)["input_ids"]
            jobs = [(list(ids), [i for i, t in enumerate(ids) if t not in special]) for ids in enc]
            return jobs, [len(ids) * max(len(pos), 1) for ids, pos in jobs]

        def compute(jobs, budget):
            return [v.tolist() for v in masked_token_logprobs(self, jobs, budget)]

        values = sc._run("pll", texts, keys, prepare, compute, "pseudo-log-likelihood")
        df = sequence_table(values, keys, "pseudo_perplexity")
        if per_token:
            enc = tok(texts, add_special_tokens=True)["input_ids"]
            df["tokens"] = [tok.convert_ids_to_tokens([t for t in ids if t not in special]) for ids in enc]
            df["token_logprobs"] = [list(values[k]) for k in keys]
        return df


    def crows_pairs_pll(self, sc, sent_more: list[str], sent_less: list[str]) -> pd.DataFrame:
        """The original CrowS-Pairs score of each pair: columns ``score_more``, ``score_less`` (summed log-probabilities
        of the shared tokens, each masked in turn), ``n_shared`` and ``more_preferred`` (score_more > score_less; the
        metric is its mean). Raises when the lists differ in length."""
        if len(sent_more) != len(sent_less):
            raise ValueError(f"{len(sent_more)} more-stereotypical and {len(sent_less)} less-stereotypical sentences")
        tok = self.tokenizer
        items = [[a, b] for a, b in zip(sent_more, sent_less)]
        keys = [sc.cache.key("crows_pll", {}, it) for it in items]

        def prepare(todo):
            enc1 = tok([a for a, _ in todo], add_special_tokens=True)["input_ids"]
            enc2 = tok([b for _, b in todo], add_special_tokens=True)["input_ids"]
            jobs = []
            for ids1, ids2 in zip(enc1, enc2):
                t1, t2 = shared_token_positions(ids1, ids2)
                jobs.append(((list(ids1), t1[1:-1]), (list(ids2), t2[1:-1])))   # skip [CLS] and [SEP]
            return jobs, [len(a[0]) * len(a[1]) + len(b[0]) * len(b[1]) + 1 for a, b in jobs]

        def compute(jobs, budget):
            flat = [j for pair in jobs for j in pair]
            lps = masked_token_logprobs(self, flat, budget)
            return [[float(lps[2 * i].sum()), float(lps[2 * i + 1].sum()), len(lps[2 * i])] for i in range(len(jobs))]

        values = sc._run("crows_pll", items, keys, prepare, compute, "CrowS-Pairs pseudo-log-likelihood")
        df = pd.DataFrame([values[k] for k in keys], columns=["score_more", "score_less", "n_shared"])
        df["more_preferred"] = df.score_more > df.score_less
        return df
