"""Stratified subsets of a prompt table (so that a small scoring budget still covers every factor level)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def stratified_sample(df: pd.DataFrame, by: Sequence[str], n: int | None, seed: int = 0,
                      min_per_stratum: int = 1) -> pd.DataFrame:
    """A random subset of ``n`` rows, allocated over the strata defined by ``by``.

    Each stratum first gets ``min(min_per_stratum, size)`` rows; the rest is allocated in proportion to the strata
    sizes (largest remainders), then rows are drawn without replacement within strata. ``n=None`` or ``n >= len``
    returns ``df`` unchanged. The result keeps ``df``'s row order.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0):
        raise ValueError(f"the sample size n must be a non-negative integer or None for all rows, got {n!r}")
    if n is None or n >= len(df):
        return df
    if n == 0:
        return df.iloc[:0]
    rng = np.random.default_rng(seed)
    groups = df.groupby(list(by), sort=True, observed=True, dropna=False).indices
    keys = list(groups)
    sizes = np.array([len(groups[k]) for k in keys])
    base = np.minimum(sizes, min_per_stratum)
    if base.sum() > n:                                   # more strata than rows: one row in n random strata
        pick = rng.choice(len(keys), size=n, replace=False)
        alloc = np.zeros_like(sizes)
        alloc[pick] = 1
    else:
        rest = n - base.sum()
        room = sizes - base
        share = rest * room / room.sum() if room.sum() else np.zeros_like(room, dtype=float)
        extra = np.floor(share).astype(int)
        left = rest - extra.sum()
        order = np.argsort(-(share - extra), kind="stable")
        for i in order:
            if left == 0:
                break
            if extra[i] < room[i]:
                extra[i] += 1
                left -= 1
        alloc = base + extra
    take = []
    for k, a in zip(keys, alloc):
        if a:
            take.extend(rng.choice(groups[k], size=int(a), replace=False))
    return df.iloc[np.sort(np.asarray(take, dtype=int))]
