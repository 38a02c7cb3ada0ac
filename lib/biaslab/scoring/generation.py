"""Batched greedy or seeded-sampling generation with stop strings (answers are read by ``benchmarks.formats``)."""

from __future__ import annotations

import hashlib
from typing import Sequence

from .batching import pad
from .causal import Head


def row_seed(seed: int, prompt: str) -> int:
    """The sampling seed of one prompt: fixed by (seed, prompt), so a prompt's sample does not depend on its batch."""
    return int(hashlib.sha256(f"{seed}\0{prompt}".encode()).hexdigest()[:15], 16)


def generate_batch(model, head: Head, tokenizer, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int,
                   eos_ids: set[int], stop: Sequence[str], do_sample: bool, temperature: float,
                   seeds: Sequence[int | None], pad_id: int) -> list[str]:
    """Generate continuations for a batch of token lists (left-padded, one key/value cache, one new token per step).

    Each row stops at an end-of-sequence token, at the first stop string, or after ``max_new_tokens``; the returned
    text excludes the end token and everything from the stop string on. Sampling draws each row from its own
    generator seeded by ``seeds[row]``.
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    body = model.base_model
    ids, mask, _ = pad(prompt_ids, pad_id, "left")
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    out = body(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
    cache = out.past_key_values
    last = out.last_hidden_state[:, -1]
    next_pos = pos[:, -1] + 1
    n = len(prompt_ids)
    gens = [torch.Generator(device=device) for _ in seeds] if do_sample else None
    for g, s in zip(gens or [], seeds):
        if s is None:
            g.seed()
        else:
            g.manual_seed(int(s))
    generated: list[list[int]] = [[] for _ in range(n)]
    done = [False] * n
    for _ in range(max_new_tokens):
        logits = head.logits(last)
        if do_sample:
            probs = torch.softmax(logits / max(temperature, 1e-6), dim=-1)
            nxt = torch.stack([torch.multinomial(probs[r], 1, generator=gens[r])[0] for r in range(n)])
        else:
            nxt = logits.argmax(-1)
        nxt_list = nxt.tolist()
        for r in range(n):
            if done[r]:
                nxt_list[r] = pad_id
                continue
            tok = nxt_list[r]
            if tok in eos_ids:
                done[r] = True
                continue
            generated[r].append(tok)
            if stop:
                text = tokenizer.decode(generated[r], skip_special_tokens=True)
                if any(s in text for s in stop):
                    done[r] = True
        if all(done):
            break
        step = torch.as_tensor(nxt_list, dtype=torch.long, device=device)[:, None]
        mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=1)
        out = body(input_ids=step, attention_mask=mask, position_ids=next_pos[:, None], past_key_values=cache,
                   use_cache=True)
        cache = out.past_key_values
        last = out.last_hidden_state[:, -1]
        next_pos = next_pos + 1
    return [truncate_at_stop(tokenizer.decode(g, skip_special_tokens=True), stop) for g in generated]


def truncate_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """Cut ``text`` at the earliest occurrence of any stop string (the stop string itself is dropped)."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]
