"""The one adjustment function (statsmodels ``multipletests``); which family a test belongs to is the analysis
plan's (:mod:`biaslab.plan`, applied by :mod:`biaslab.stats.verdict`).

* **Holm** (Holm 1979; ``method="holm"``) controls the family-wise error rate under any dependence between the
  tests: the plan's confirmatory claims, per family.
* **Benjamini-Hochberg** (1995; ``method="fdr_bh"``) controls the false discovery rate (independent or positively
  dependent tests): shown beside exploratory rows as a screen, never as a decision.

NaN p-values (tests that could not be run) stay NaN and do not count towards the family size.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
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
