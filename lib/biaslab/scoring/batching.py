"""Length-sorted batches sized by a token budget, padding, and an out-of-memory back-off that recovers."""

from __future__ import annotations

import logging
from typing import Callable, Sequence

log = logging.getLogger(__name__)


def default_token_budget(device: str) -> int:
    """Padded tokens per forward pass: small on a CPU (cache-friendly), large on a GPU (halved on out-of-memory)."""
    return 32768 if str(device).startswith("cuda") else 2048


def length_batches(lengths: Sequence[int], budget: int, max_rows: int | None = None) -> list[list[int]]:
    """Group item indices into batches, longest first, so that ``rows x longest length <= budget``.

    Sorting by length means little padding; longest-first means an out-of-memory error shows up on the first batch.
    An item longer than the budget gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return _runs(lengths, order, budget, padded=True, max_rows=max_rows)


def pad(seqs: Sequence[Sequence[int]], pad_id: int, side: str = "left"):
    """Pad token lists into ``(ids, mask, starts)`` tensors; ``starts[b]`` is the index of row b's first token."""
    import torch
    width = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    starts = []
    for b, s in enumerate(seqs):
        start = width - len(s) if side == "left" else 0
        if len(s):
            ids[b, start:start + len(s)] = torch.as_tensor(list(s), dtype=torch.long)
            mask[b, start:start + len(s)] = 1
        starts.append(start)
    return ids, mask, starts


#: messages of allocation failures: CUDA's, and the CPU allocator's (torch's "DefaultCPUAllocator: can't allocate
#: memory" / "not enough memory")
_OOM_MESSAGES = ("out of memory", "can't allocate memory", "not enough memory")


def is_oom(exc: BaseException) -> bool:
    """An allocation failure, on a GPU or in main memory, that a smaller batch may avoid."""
    import torch
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in _OOM_MESSAGES)


def free_memory() -> None:
    import gc

    import torch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def ordered_batches(lengths: Sequence[int], order: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive runs of ``order`` whose summed lengths stay within ``budget`` (for packed rows, where items are
    laid end to end and their order decides what they share)."""
    return _runs(lengths, order, budget, padded=False)


def _runs(lengths: Sequence[int], order: Sequence[int], budget: int, padded: bool,
          max_rows: int | None = None) -> list[list[int]]:
    """Consecutive runs of ``order``, each closed before its size would pass ``budget`` (or its rows ``max_rows``):
    rows x longest length where ``padded``, else the sum of lengths (every length counts as at least 1)."""
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = total = 0
    for i in order:
        n = max(int(lengths[i]), 1)
        size = max(longest, n) * (len(cur) + 1) if padded else total + n
        if cur and (size > budget or (max_rows and len(cur) >= max_rows)):
            batches.append(cur)
            cur, longest, total = [], 0, 0
        cur.append(i)
        longest, total = max(longest, n), total + n
    return batches + [cur] if cur else batches


def run_batches(lengths: Sequence[int], budget: int, fn: Callable[[list[int], int], None],
                on_done: Callable[[int], None] | None = None, max_rows: int | None = None,
                order: Sequence[int] | None = None, grow_after: int = 8) -> int:
    """Call ``fn(batch_indices, budget)`` over batches; on out-of-memory halve the budget and retry, and after
    ``grow_after`` successful batches in a row double it again, up to the budget it started with.

    Batches are length-sorted with ``rows x longest <= budget`` (padded batches), or, when ``order`` is given,
    consecutive runs of that order with ``sum of lengths <= budget`` (packed rows). ``fn`` should also size any inner
    chunks by ``budget``. Out-of-memory means a CUDA OOM or a CPU allocation failure (:func:`is_oom`). An OOM right
    after a growth doubles the successes needed before the next one, so a memory limit that persists costs few retries
    (logarithmically many), while a passing shortage (another process's memory, fragmentation) is soon forgotten.
    Returns the budget in force at the end (callers keep it for their next call). ``on_done(n)`` reports progress.
    """
    def make(idx: list[int], b: int) -> list[list[int]]:
        if order is None:
            sub = length_batches([lengths[i] for i in idx], b, max_rows)
            return [[idx[j] for j in s] for s in sub]
        rank = {i: k for k, i in enumerate(order)}
        return ordered_batches(lengths, sorted(idx, key=rank.__getitem__), b)

    ceiling, streak, patience, grown = budget, 0, max(1, grow_after), False
    pending: list[list[int]] = make(list(range(len(lengths))), budget)
    while pending:
        batch = pending.pop(0)
        try:
            fn(batch, budget)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is handled, everything else re-raised
            if not is_oom(exc) or budget <= 16:
                raise
            free_memory()
            budget, streak, patience, grown = budget // 2, 0, patience * (2 if grown else 1), False
            log.warning("out of memory on a batch of %d; retrying with a token budget of %d", len(batch), budget)
            pending = make(batch + [i for b in pending for i in b], budget)   # re-batch all that is left
            continue
        if on_done is not None:
            on_done(len(batch))
        streak += 1
        if budget < ceiling and streak >= patience and pending:
            budget, streak, grown = min(ceiling, budget * 2), 0, True
            log.info("%d batches without running out of memory; token budget back up to %d", patience, budget)
            pending = make([i for b in pending for i in b], budget)
    return budget

