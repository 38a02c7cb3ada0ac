"""Multiplicity control over families of tests (statsmodels ``multipletests``).

Which correction, and why:

* **Holm** (Holm 1979; ``method="holm"``) controls the family-wise error rate under any dependence between the
  tests. Used where a family is a handful of confirmatory claims a reader will take one by one: the agentic
  uniformity tests, the per-metric paired model comparisons, the CrowS bias-type tests.
* **Benjamini-Hochberg** (1995; ``method="fdr_bh"``) controls the false discovery rate, valid for independent or
  positively dependent (PRDS) tests. Used for *screening* many coefficients (SSQA's 93 stigma odds ratios, BBQ
  per-category scores), where the question is "which of these are worth a look" and Holm would be needlessly
  conservative. Treatment-coded dummies sharing one reference level are positively correlated, the case BH covers.

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


def add_adjusted(df: pd.DataFrame, pcol: str = "p_value", family: Sequence[str] | str | None = None,
                 method: str = "holm", alpha: float = 0.05) -> pd.DataFrame:
    """A copy of ``df`` with ``<pcol>_<method>`` (adjusted within each ``family`` group, or over all rows),
    ``family_size``, ``significant_<method>`` (adjusted p <= alpha) and ``adjustment`` (the method's name)."""
    family = [family] if isinstance(family, str) else list(family or [])
    out = df.copy()
    col = f"{pcol}_{method}"
    out[col] = np.nan
    out["family_size"] = 0
    groups = [(None, out.index)] if not family else out.groupby(family, sort=False, dropna=False).groups.items()
    for _, idx in groups:
        p = out.loc[idx, pcol].to_numpy(dtype=float)
        out.loc[idx, col] = adjust(p, method)
        out.loc[idx, "family_size"] = int(np.isfinite(p).sum())
    out[f"significant_{method}"] = out[col] <= alpha
    out["adjustment"] = METHODS[method] + (f" within {' x '.join(family)}" if family else "")
    return out
