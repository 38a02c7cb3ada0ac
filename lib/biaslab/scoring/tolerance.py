"""How far a model's scores move with the way a run is scheduled: the tolerance a precision level's numbers carry.

A score is a property of the model only if it does not depend on which items shared its forward pass or on how many
threads summed it. :func:`schedule_tolerance` scores the same texts (summed log-probabilities,
:meth:`biaslab.scoring.Scorer.sequence_logprob`, prefix convention of :mod:`biaslab.scoring.scorer`) under
:data:`SCHEDULES`, with no score cache, and reports

    max |Δ log P| = max over schedule pairs (s, s') and texts i of |log P_s(x_i) − log P_s'(x_i)|   (nats).

:func:`tolerance` turns that into the tolerance a comparison of two runs uses: never below :data:`ENGINE_TOLERANCE`
(the in-process float32 engine's stability, the score cache's resume note in :mod:`biaslab.scoring.cache`), and
:data:`SAFETY` times the measurement, because a handful of texts bounds the run's largest deviation from below.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pandas as pd

#: float32 in-process engine: two schedules of the same items agree to this (nats; resumed runs, cold reruns)
ENGINE_TOLERANCE = 1e-4
#: a handful of texts measures a lower bound of the run's largest |Δ|: the tolerance leaves this factor of room
SAFETY = 10
#: (name, token budget, thread count): ``None`` = the scorer's default budget / this process's thread count;
#: ``"other"`` = 1 thread when the process has several, else 2
SCHEDULES = (("packed", None, None), ("one_per_pass", 1, None), ("packed_other_threads", None, "other"))
#: the table's columns (notebook 6: ``tables/precision_tolerance.csv``)
COLUMNS = ["model", "precision", "n_texts", "schedules", "max_abs_delta_logprob", "tolerance"]


@contextlib.contextmanager
def _threads(n: int | None):
    import torch
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def schedule_tolerance(lm, texts: list[str]) -> dict:
    """max |Δ log P| of ``texts`` across :data:`SCHEDULES` for a loaded in-process model (no score cache: every
    schedule computes). Returns dict(n_texts, schedules, max_abs_delta_logprob)."""
    import torch

    from .scorer import Scorer
    if len(texts) < 2:
        raise ValueError(f"schedule_tolerance needs at least 2 texts (got {len(texts)}): one pass per text and one "
                         "packed pass must differ in make-up")
    now = torch.get_num_threads()
    runs = {}
    for name, budget, threads in SCHEDULES:
        n = (1 if now > 1 else 2) if threads == "other" else threads
        with _threads(n):
            sc = Scorer(lm, cache_dir=False, progress=False, token_budget=budget)
            runs[name] = sc.sequence_logprob(list(texts))["sum_logprob"].to_numpy(float)
    delta = max(float(np.nanmax(np.abs(a - b))) for a, b in itertools.combinations(runs.values(), 2))
    return {"n_texts": len(texts), "schedules": " · ".join(runs), "max_abs_delta_logprob": delta}


def tolerance(measured: float) -> float:
    """The comparison tolerance of a measured max |Δ log P|: max(:data:`ENGINE_TOLERANCE`, :data:`SAFETY` ×
    measured), rounded up to one significant digit."""
    t = max(ENGINE_TOLERANCE, SAFETY * float(measured))
    e = int(np.floor(np.log10(t)))
    return float(f"{int(np.ceil(round(t / 10 ** e, 9)))}e{e}")


def table(rows: list[dict]) -> pd.DataFrame:
    """Rows of (model, precision, :func:`schedule_tolerance`'s dict) as the tolerance table, with :func:`tolerance`."""
    df = pd.DataFrame(rows)
    df["tolerance"] = df["max_abs_delta_logprob"].map(tolerance)
    return df[COLUMNS]
