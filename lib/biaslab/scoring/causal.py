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
from typing import Sequence

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


def _no_results(requests: list[Request]) -> list[Result]:
    """Empty results of the shape ``requests`` ask for (an empty trunk array where trunk targets were asked)."""
    return [Result(trunk=np.zeros(0) if r.trunk_targets else None, branches=[np.zeros(0) for _ in r.branches])
            for r in requests]


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
    body = model.base_model        # the transformer body: its output is the final, normalized hidden state
    if _sliding_window(model):
        # transformers applies sliding windows by index: right padding would put a gap between trunk and branch
        padding_side = "left"
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

    results = _no_results(requests)
    for b, (k0, k1) in trunk_slots.items():
        results[b].trunk = lp[k0:k1]
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


# -------------------------------------------------------------------------------------- packed token tries ---

#: Width of a packed row on CPU (at least twice the longest path): attention over a row costs O(width) per token,
#: so rows stay short.
ROW_WIDTH = 256


def _sliding_window(model) -> int | None:
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if "sliding_attention" in (getattr(cfg, "layer_types", None) or []):
        return getattr(cfg, "sliding_window", None)
    return None


class _Row:
    """A trie of token paths laid out flat: each node is one input position, computed once however many paths
    share it; ``parent`` and ``depth`` (= position id) describe the tree."""

    def __init__(self):
        self.roots: dict = {}             # namespace -> {token -> (node, children dict)}
        self.tokens: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []

    def new_nodes(self, path: Sequence[int], ns=None) -> int:
        """How many nodes inserting ``path`` would add (its proper prefixes not yet in the row)."""
        level, k = self.roots.get(ns, {}), 0
        while k < len(path) - 1 and path[k] in level:
            level = level[path[k]][1]
            k += 1
        return max(len(path) - 1 - k, 0)

    def insert(self, path: Sequence[int], ns=None) -> list[int]:
        """Insert the proper prefixes of ``path``; return the node of each prefix path[:k+1], k < len - 1.
        Paths share nodes only within one namespace ``ns``."""
        level, parent, nodes = self.roots.setdefault(ns, {}), -1, []
        for k in range(len(path) - 1):
            tok = path[k]
            if tok not in level:
                level[tok] = (len(self.tokens), {})
                self.tokens.append(tok)
                self.parent.append(parent)
                self.depth.append(k)
            node, level = level[tok]
            nodes.append(node)
            parent = node
        return nodes


def _lcp(a: Sequence, b: Sequence) -> int:
    """The length of the common prefix of ``a`` and ``b``."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


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


def _pack(sizes: list[int], width: int) -> list[list[int]]:
    """Item indices per row, each row's total size <= width, in as few rows as first-fit decreasing needs, then
    balanced: the smallest capacity that still fits that many rows (so the last row is not left half empty)."""
    rows = _first_fit(sizes, width)
    lo, hi = max(max(sizes), -(-sum(sizes) // len(rows))), width
    while lo < hi:
        mid = (lo + hi) // 2
        if len(_first_fit(sizes, mid)) <= len(rows):
            hi = mid
        else:
            lo = mid + 1
    return _first_fit(sizes, lo)


def _first_fit(sizes: list[int], width: int) -> list[list[int]]:
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        for k in range(len(rows)):
            if sizes[i] <= room[k]:
                rows[k].append(i)
                room[k] -= sizes[i]
                break
        else:
            rows.append([i])
            room.append(width - sizes[i])
    return rows


def score_packed(model, head: Head, requests: list[Request], pad_id: int, budget: int,
                 stats: dict | None = None, row_width: int | None = None, share: bool = True) -> list[Result]:
    """Score requests with every shared token prefix computed once, no padding and no second pass.

    All token paths of a batch (each request's trunk, and trunk + branch for each branch) go into tries, one per
    packed row: a node is an input position, its position id is its depth, and a 4D attention mask lets each node see
    exactly its ancestors ("tree attention"). Shared openings (the prefix token, a prompt shared by its options,
    few-shot examples shared by prompts, the opening words of a sentence pair) are computed once, and a path's last
    token is never an input. ``share=False`` shares prefixes only within a request. Models with sliding-window
    layers (Gemma 3) get a second mask with the window applied by position.
    """
    import torch

    device = model.device
    width_cap = row_width or (ROW_WIDTH if device.type == "cpu" else 2048)
    paths = []                                     # (request, branch or -1 for the trunk, tokens, first target)
    for i, r in enumerate(requests):
        if not r.trunk:
            raise ValueError("a trunk must hold at least one token (the prefix token)")
        if r.trunk_targets:
            paths.append((i, -1, list(r.trunk), 1))
        for j, br in enumerate(r.branches):
            if br:
                paths.append((i, j, list(r.trunk) + list(br), len(r.trunk)))
    results = _no_results(requests)
    if not paths:
        return results
    order = sorted(range(len(paths)), key=lambda q: paths[q][2])
    # a row holds at least two of the longest paths, so long prompts with a common opening (few-shot examples) share
    width_cap = max([width_cap] + [2 * (len(p[2]) - 1) for p in paths])
    # clusters: runs of sorted paths that share more than their first two tokens (a prompt and its options, a
    # sentence pair, prompts with common few-shot examples), cut where a cluster would outgrow a row
    clusters: list[list[int]] = []
    sizes: list[int] = []
    scratch = _Row()
    prev = None
    for q in order:
        toks, ns = paths[q][2], (None if share else paths[q][0])
        add = scratch.new_nodes(toks, ns)
        if prev is None or _lcp(paths[prev][2], toks) < 3 or sizes[-1] + add > width_cap \
                or (not share and paths[prev][0] != paths[q][0]):
            clusters.append([])
            sizes.append(0)
            scratch = _Row()
            add = scratch.new_nodes(toks, ns)
        scratch.insert(toks, ns)
        clusters[-1].append(q)
        sizes[-1] += add
        prev = q
    # clusters into rows (first-fit decreasing, balanced); paths of one row share one trie
    rows: list[_Row] = []
    placed: dict[int, tuple[int, list[int]]] = {}
    for members in _pack(sizes, width_cap):
        row = _Row()
        rows.append(row)
        for c in sorted(members):
            for q in clusters[c]:
                placed[q] = (len(rows) - 1, row.insert(paths[q][2], None if share else paths[q][0]))
    rows_used = [r for r in rows if r.tokens]
    n, width = len(rows_used), max((len(r.tokens) for r in rows_used), default=0)
    if n == 0:
        return results
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    parent = torch.full((n, width), -1, dtype=torch.long)
    depth = torch.zeros((n, width), dtype=torch.long)
    real = torch.zeros((n, width), dtype=torch.bool)
    for r, row in enumerate(rows_used):
        k = len(row.tokens)
        ids[r, :k] = torch.as_tensor(row.tokens)
        parent[r, :k] = torch.as_tensor(row.parent)
        depth[r, :k] = torch.as_tensor(row.depth)
        real[r, :k] = True
    # ancestors by pointer chasing: allowed[r, q, k] = k is q or an ancestor of q
    allowed = torch.diag_embed(torch.ones((n, width), dtype=torch.bool))
    rr = torch.arange(n)[:, None].expand(n, width)
    qq = torch.arange(width)[None, :].expand(n, width)
    anc = parent.clone()
    while bool((anc >= 0).any()):
        ok = anc >= 0
        allowed[rr[ok], qq[ok], anc[ok]] = True
        anc = torch.where(ok, parent.gather(1, anc.clamp(min=0)), anc)
    dtype = model.dtype
    neg = torch.finfo(dtype).min

    def as_mask(a):
        m = torch.zeros(a.shape, dtype=dtype)
        m.masked_fill_(~a, neg)
        return m[:, None].to(device)

    window = _sliding_window(model)
    if window:
        near = (depth[:, :, None] - depth[:, None, :]) < window
        mask = {"full_attention": as_mask(allowed), "sliding_attention": as_mask(allowed & near)}
    else:
        mask = as_mask(allowed)
    out = model.base_model(input_ids=ids.to(device), attention_mask=mask, position_ids=depth.to(device),
                            use_cache=False)
    hidden = out.last_hidden_state
    if stats is not None:
        stats["positions"] = stats.get("positions", 0) + n * width

    # the states to read (deduplicated) and the token each target predicts
    row_index = {id(row): r for r, row in enumerate(rows_used)}
    state_of: dict[tuple[int, int], int] = {}
    sel_r, sel_c, tgt_state, tgt_tok, spans = [], [], [], [], []
    for q, (i, j, toks, first) in enumerate(paths):
        r_all, nodes = placed[q]
        r = row_index[id(rows[r_all])]
        k0 = len(tgt_tok)
        for k in range(max(first, 1), len(toks)):
            key = (r, nodes[k - 1])
            if key not in state_of:
                state_of[key] = len(sel_r)
                sel_r.append(r)
                sel_c.append(nodes[k - 1])
            tgt_state.append(state_of[key])
            tgt_tok.append(toks[k])
        spans.append((k0, len(tgt_tok)))
    h = hidden[torch.as_tensor(sel_r, device=device), torch.as_tensor(sel_c, device=device)]
    lp = head.gather(h, tgt_state, tgt_tok)
    if stats is not None:
        stats["head_rows"] = stats.get("head_rows", 0) + len(sel_r)
    for (i, j, _, _), (a, b) in zip(paths, spans):
        if j < 0:
            results[i].trunk = lp[a:b]
        else:
            results[i].branches[j] = lp[a:b]
    return results
