"""The adjustments (statsmodels ``multipletests``, and Holm over many families at once); which family a test belongs
to, and at which level, is the analysis plan's (:mod:`biaslab.plan`, applied by :mod:`biaslab.stats.verdict`).

* **Holm** (Holm 1979; ``method="holm"``) controls the family-wise error rate under any dependence between the
  tests: the plan's confirmatory claims, per family, at the family's share of the error budget
  (:func:`holm_by_family`, vectorized over families for simulations; equal to ``multipletests`` per family).
* **Benjamini-Hochberg** (1995; ``method="fdr_bh"``) controls the false discovery rate (independent or positively
  dependent tests): shown beside exploratory rows as a screen, never as a decision.

NaN p-values (tests that could not be run) stay NaN and do not count towards the family size.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

METHODS = {"holm": "Holm (FWER)", "fdr_bh": "Benjamini-Hochberg (FDR)"}


def adjust(p: Sequence[float], method: str = "holm") -> np.ndarray:
    """Adjusted p-values for one family; NaN entries are left out of the family and returned as NaN."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, not {method!r}")
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=method)[1]
    return out


def holm_by_family(p: pd.Series, family: pd.Series, alpha: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Holm (1979) within each family at its own level ``alpha`` (per row, constant within a family), for many
    families at once; ``p`` without NaN (untested rows are left out by the caller). Returns per row the adjusted p
    (``(m - r + 1) p_(r)``, running maximum, capped at 1: statsmodels' ``holm``) and the level at which the step-down
    tested the row: of m tests in ascending p, a rejected rank r at ``alpha/(m - r + 1)``, the first accepted rank j
    and every later one at ``alpha/(m - j + 1)``. An interval at ``1 - level`` dual to a row's test therefore
    excludes the null exactly when Holm rejects it."""
    t = pd.DataFrame({"p": p, "family": family, "alpha": alpha}).sort_values(["family", "p"], kind="stable")
    g = t.groupby("family", sort=False)
    rank, m = g.cumcount() + 1, g["p"].transform("size")
    t["p_holm"] = ((m - rank + 1) * t["p"]).groupby(t["family"]).cummax().clip(upper=1.0)
    rejected = (t["p_holm"] < t["alpha"]).groupby(t["family"]).transform("sum")   # the first R ranks (monotone)
    t["level"] = np.where(rank <= rejected, t["alpha"] / (m - rank + 1), t["alpha"] / np.maximum(m - rejected, 1))
    return t["p_holm"].reindex(p.index), t["level"].reindex(p.index)
