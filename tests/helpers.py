"""Helpers shared by test files: a benchmark's data (or a skip), a tiny random model, a quiet Scorer, a page's text
without its generated blocks.

``biaslab.models`` and ``biaslab.scoring`` are imported on use, so the data-only tests do not import torch.
"""

from __future__ import annotations

import pytest

from biaslab.sources import DataError


def load_or_skip(load, name: str):
    """``load()``, or skip the tests that need it when the benchmark's data is not fetched."""
    try:
        return load()
    except DataError as exc:
        pytest.skip(f"{name} data not fetched: {exc}")


def tiny_model(tmp_path_factory, name: str, kind: str, seed: int):
    """:func:`biaslab.models.save_tiny_model` in a fresh temporary folder, loaded in float32 on the CPU."""
    from biaslab import models

    folder = models.save_tiny_model(tmp_path_factory.mktemp("tiny") / name, kind, seed=seed)
    return models.load(folder, device="cpu", dtype="float32")


def scorer(lm, **kw):
    """A Scorer without a progress bar, and without a cache unless ``cache_dir`` is given."""
    from biaslab import scoring

    kw.setdefault("cache_dir", False)
    return scoring.Scorer(lm, progress=False, **kw)


def outside_blocks(text: str) -> str:
    """``text`` without its generated blocks (every block :func:`biaslab.summary.blocks` renders)."""
    from biaslab import summary
    for _page, begin, end, _render in summary.blocks():
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + rest.split(end, 1)[1]
    return text
