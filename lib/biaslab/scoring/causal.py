"""Log-probabilities from a causal LM, computing a shared prefix once and the output layer only where needed.

One :class:`Request` is a *trunk* (token ids, starting with the prefix token) and any number of *branches*
(continuations of the trunk). A batch of trunks runs through the model once (left-padded, explicit position ids);
branches that need more than one token then run on a copy of the trunk's key/value cache, so a prompt shared by
several options is computed once. The output layer (262,144 rows for Gemma) is applied only to the hidden states at
the positions whose next-token log-probability is needed, a few rows at a time, so no batch x length x vocabulary
tensor is ever built.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from .batching import pad

#: Elements of one chunk of logits (rows x vocabulary); 2**24 floats = 64 MiB.
HEAD_CHUNK_ELEMENTS = 1 << 24


@dataclass
class Request:
    trunk: list[int]
    branches: list[list[int]] = field(default_factory=list)
    trunk_targets: bool = False      # also return log P(trunk[i] | trunk[:i]) for i >= 1

    @property
    def cost(self) -> int:
        return len(self.trunk) + sum(max(len(b) - 1, 0) for b in self.branches)


@dataclass
class Result:
    trunk: np.ndarray | None                   # log-probabilities of trunk[1:], when requested
    branches: list[np.ndarray]                 # per branch, log-probabilities of each of its tokens


class Head:
    """The model's output layer applied to selected hidden states, chunked, with log-softmax in float32."""

    def __init__(self, model):
        self.linear = model.get_output_embeddings()
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.vocab = self.linear.weight.shape[0]
        self.rows = max(1, HEAD_CHUNK_ELEMENTS // self.vocab)

    def logits(self, hidden):
        import torch
        logits = self.linear(hidden).float()
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def gather(self, hidden, rows, tokens) -> np.ndarray:
        """``hidden``: (N, H). Returns log P(tokens[k] | state rows[k]) for each k, as float64."""
        import torch
        if len(rows) == 0:
            return np.zeros(0)
        rows_t = torch.as_tensor(rows, dtype=torch.long, device=hidden.device)
        toks_t = torch.as_tensor(tokens, dtype=torch.long, device=hidden.device)
        out = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
        for a in range(0, hidden.shape[0], self.rows):
            b = min(a + self.rows, hidden.shape[0])
            sel = ((rows_t >= a) & (rows_t < b)).nonzero(as_tuple=True)[0]
            if len(sel) == 0:
                continue
            logits = self.logits(hidden[a:b])
            lse = torch.logsumexp(logits, dim=-1)
            r = rows_t[sel] - a
            out[sel] = logits[r, toks_t[sel]] - lse[r]
        return out.double().cpu().numpy()

    def log_softmax_last(self, hidden):
        """Full log-distribution for a few rows (generation)."""
        import torch
        return torch.log_softmax(self.logits(hidden), dim=-1)


def base_model(model):
    """The transformer body of a ``*ForCausalLM`` (its output is the final, normalized hidden state)."""
    return model.base_model


def select_cache(cache, index):
    """A new cache holding rows ``index`` of ``cache`` (the original stays untouched)."""
    new = copy.copy(cache)
    new.layers = []
    for layer in cache.layers:
        lay = copy.copy(layer)
        if getattr(layer, "keys", None) is not None and layer.keys.numel():
            lay.keys = layer.keys.index_select(0, index)
            lay.values = layer.values.index_select(0, index)
        new.layers.append(lay)
    return new


def score_batch(model, head: Head, requests: list[Request], pad_id: int, budget: int,
                padding_side: str = "left", stats: dict | None = None) -> list[Result]:
    """Score one batch of requests (see the module docstring). ``budget`` caps rows x width of the branch passes.

    ``stats`` (optional) accumulates ``positions`` (token positions run through the model, padding included) and
    ``head_rows`` (positions the output layer was applied to).
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    body = base_model(model)
    trunks = [r.trunk for r in requests]
    if any(len(t) == 0 for t in trunks):
        raise ValueError("a trunk must hold at least one token (the prefix token)")
    ids, mask, starts = pad(trunks, pad_id, padding_side)
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    need_branch_pass = any(len(b) >= 2 for r in requests for b in r.branches)
    cache = DynamicCache(config=model.config) if need_branch_pass else None
    out = body(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
               use_cache=need_branch_pass)
    hidden = out.last_hidden_state
    cache = out.past_key_values if need_branch_pass else None
    if stats is not None:
        stats["positions"] = stats.get("positions", 0) + ids.numel()

    # positions of the trunk pass whose next-token log-probabilities are needed
    sel_b, sel_p, tgt_row, tgt_tok = [], [], [], []
    trunk_slots: dict[int, tuple[int, int]] = {}
    first_slots: dict[tuple[int, int], int] = {}
    for b, r in enumerate(requests):
        s, n = starts[b], len(r.trunk)
        if r.trunk_targets and n > 1:
            k0 = len(tgt_row)
            for i in range(n - 1):
                sel_b.append(b)
                sel_p.append(s + i)
                tgt_row.append(len(sel_b) - 1)
                tgt_tok.append(r.trunk[i + 1])
            trunk_slots[b] = (k0, len(tgt_row))
        nonempty = [j for j, br in enumerate(r.branches) if br]
        if nonempty:
            sel_b.append(b)
            sel_p.append(s + n - 1)
            last_row = len(sel_b) - 1
            for j in nonempty:
                first_slots[(b, j)] = len(tgt_row)
                tgt_row.append(last_row)
                tgt_tok.append(r.branches[j][0])
    if sel_b:
        h = hidden[torch.as_tensor(sel_b, device=device), torch.as_tensor(sel_p, device=device)]
        lp = head.gather(h, tgt_row, tgt_tok)
        if stats is not None:
            stats["head_rows"] = stats.get("head_rows", 0) + len(sel_b)
    else:
        lp = np.zeros(0)
    del hidden

    results = [Result(trunk=None, branches=[np.zeros(0) for _ in r.branches]) for r in requests]
    for b, (k0, k1) in trunk_slots.items():
        results[b].trunk = lp[k0:k1]
    for b, r in enumerate(requests):
        if r.trunk_targets and b not in trunk_slots:
            results[b].trunk = np.zeros(0)
    for (b, j), k in first_slots.items():
        results[b].branches[j] = lp[k:k + 1]

    if need_branch_pass:
        rows = [(b, j) for b, r in enumerate(requests) for j, br in enumerate(r.branches) if len(br) >= 2]
        rows.sort(key=lambda bj: -len(requests[bj[0]].branches[bj[1]]))
        width_trunk = ids.shape[1]
        start = 0
        while start < len(rows):
            longest = len(requests[rows[start][0]].branches[rows[start][1]]) - 1
            n_rows = max(1, budget // (width_trunk + longest))
            chunk = rows[start:start + n_rows]
            start += len(chunk)
            _branch_pass(model, body, head, requests, chunk, cache, mask, pad_id, results, stats)
    return results


def _branch_pass(model, body, head, requests, chunk, cache, trunk_mask, pad_id, results, stats):
    import torch
    device = model.device
    index = torch.as_tensor([b for b, _ in chunk], dtype=torch.long, device=device)
    inputs = [requests[b].branches[j][:-1] for b, j in chunk]
    bids, bmask, _ = pad(inputs, pad_id, "right")
    bids, bmask = bids.to(device), bmask.to(device)
    attn = torch.cat([trunk_mask.index_select(0, index), bmask], dim=1)
    trunk_len = trunk_mask.sum(-1).index_select(0, index)
    bpos = trunk_len[:, None] + torch.arange(bids.shape[1], device=device)[None, :]
    sub = select_cache(cache, index)
    out = body(input_ids=bids, attention_mask=attn, position_ids=bpos, past_key_values=sub, use_cache=True)
    hidden = out.last_hidden_state
    sel_r, sel_p, toks, spans = [], [], [], []
    for r, (b, j) in enumerate(chunk):
        br = requests[b].branches[j]
        k0 = len(toks)
        for i in range(len(br) - 1):
            sel_r.append(r)
            sel_p.append(i)
            toks.append(br[i + 1])
        spans.append((k0, len(toks)))
    h = hidden[torch.as_tensor(sel_r, device=device), torch.as_tensor(sel_p, device=device)]
    lp = head.gather(h, list(range(len(toks))), toks)
    if stats is not None:
        stats["positions"] = stats.get("positions", 0) + bids.numel()
        stats["head_rows"] = stats.get("head_rows", 0) + len(toks)
    for (b, j), (k0, k1) in zip(chunk, spans):
        results[b].branches[j] = np.concatenate([results[b].branches[j], lp[k0:k1]])
