"""Coverage analysis of a benchmark's prompts (Powers et al., "Better Bias Benchmarking of Language Models via
Multi-factor Analysis", §3.2).

The benchmark is a tensor whose modes are the factors and whose cells count the prompts with each combination of
factor levels. Two metrics summarise it:

* coverage percentage, eq. (1): ``CP = (1/N) sum_c I(n_c > 0)``, the share of the N level combinations that have at
  least one prompt (ideal 1);
* Gini index, eq. (2): ``GI = 1 - 2 sum_k n_(k)/||FC||_1 * (N - k + 1/2)/N`` over the counts sorted ascending, the
  inequality of prompts across combinations (ideal 0).

N counts every combination of the *declared* levels (the design), so combinations without prompts count as zeros.
The per-factor Gini index of the paper's Table 1 is eq. (2) applied to the vector of prompt counts per level of that
one factor. Pure functions over pandas/numpy.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd


def coverage_percentage(counts) -> float:
    """Eq. (1): fraction of factor-level combinations with at least one prompt."""
    c = np.asarray(counts, dtype=float).ravel()
    if c.size == 0:
        raise ValueError("coverage_percentage: no combinations")
    return float(np.mean(c > 0))


def gini(counts, n_zeros: int = 0) -> float:
    """Eq. (2): Gini index of prompt counts over combinations (0 = all equal; tends to 1 as one cell holds all).

    ``GI = 1 - 2 * sum_{k=1..N} n_(k) / ||n||_1 * (N - k + 1/2) / N`` with ``n_(1) <= ... <= n_(N)``.
    Zero cells are included (an uncovered combination raises the index). ``n_zeros`` adds that many empty cells
    without materialising them (they sort first and contribute nothing to the sum but their ranks).
    """
    c = np.sort(np.asarray(counts, dtype=float).ravel())
    if c.size + n_zeros == 0:
        raise ValueError("gini: no combinations")
    if (c < 0).any() or n_zeros < 0:
        raise ValueError("gini: counts must be non-negative")
    total = c.sum()
    if total == 0:
        raise ValueError("gini: all counts are zero")
    n = float(c.size) + float(n_zeros)
    j = np.arange(1, c.size + 1)
    # N - k with k = n_zeros + j is c.size - j exactly (no cancellation when N is astronomically large)
    return float(1.0 - 2.0 * np.sum(c / total * (c.size - j + 0.5) / n))


def _levels(df: pd.DataFrame, factor: str, levels: dict | None) -> list:
    if levels and factor in levels:
        return list(levels[factor])
    return list(pd.unique(df[factor].dropna()))


def _declared(df: pd.DataFrame, factors: list, levels: dict | None) -> dict:
    """factor -> its levels (:func:`_levels`); a value of ``df`` outside them is an error naming the factor."""
    lv = {f: _levels(df, f, levels) for f in factors}
    for f in factors:
        bad = set(df[f].dropna().unique()) - set(lv[f])
        if bad:
            raise ValueError(f"factor {f!r} has values that are not declared levels: {sorted(map(str, bad))[:5]}")
    return lv


def spec_levels(spec) -> dict:
    """factor -> declared levels, from a :class:`~biaslab.benchmarks.base.FactorSpec`."""
    return {f.name: list(f.levels) for f in spec.factors}


def count_tensor(df: pd.DataFrame, factors: Sequence[str], levels: dict | None = None) -> pd.Series:
    """Prompt counts for every combination of the factors' levels (a flattened tensor, zeros included).

    ``levels`` maps a factor to its declared levels (default: the levels observed in ``df``). Rows whose value is
    not a declared level raise an error.
    """
    factors = list(factors)
    if not factors:
        raise ValueError("count_tensor: give at least one factor")
    lv = _declared(df, factors, levels)
    size = int(np.prod([float(len(v)) for v in lv.values()]))
    if size > MAX_DENSE_CELLS:
        raise ValueError(f"count_tensor: {size:,} combinations of {factors} are too many to list; "
                         "coverage_overall computes CP and GI from the covered cells alone")
    obs = df.groupby(factors, observed=True, dropna=False).size()
    full = pd.MultiIndex.from_product([lv[f] for f in factors], names=factors)
    if len(factors) == 1:
        obs.index = pd.MultiIndex.from_arrays([obs.index], names=factors)
    return obs.reindex(full, fill_value=0).astype(int)


MAX_DENSE_CELLS = 20_000_000


def covered_counts(df: pd.DataFrame, factors: Sequence[str], levels: dict | None = None) -> tuple[pd.Series, int]:
    """The non-zero cells of the count tensor and the total number of cells N (product of the level counts)."""
    factors = list(factors)
    lv = _declared(df, factors, levels)
    obs = df.groupby(factors, observed=True, dropna=False).size()
    return obs[obs > 0], math.prod(len(lv[f]) for f in factors)


def coverage_overall(df: pd.DataFrame, factors: Sequence[str], levels: dict | None = None) -> pd.DataFrame:
    """One row: factors, n_combinations (N), n_covered, coverage_percentage (eq. 1), gini (eq. 2), n_prompts.

    Works from the covered cells alone, so N may be astronomically large (all BBQ factors: ~4.8e9 cells)."""
    obs, n_cells = covered_counts(df, factors, levels)
    return pd.DataFrame([{
        "factors": " x ".join(factors), "n_factors": len(factors), "n_combinations": n_cells,
        "n_covered": int(len(obs)), "coverage_percentage": len(obs) / n_cells,
        "gini": gini(obs.to_numpy(), n_zeros=n_cells - len(obs)), "n_prompts": int(obs.sum()),
    }])


def coverage_by_factor(df: pd.DataFrame, factors: Sequence[str], levels: dict | None = None,
                       kinds: dict | None = None) -> pd.DataFrame:
    """Per factor: n_levels, n_observed, min/max count per level, coverage_percentage and gini (Table 1's GI)."""
    rows = []
    for f in factors:
        t = count_tensor(df, [f], levels)
        rows.append({"factor": f, "kind": (kinds or {}).get(f, ""), "n_levels": int(t.size),
                     "n_observed": int((t > 0).sum()), "min_count": int(t.min()), "max_count": int(t.max()),
                     "coverage_percentage": coverage_percentage(t), "gini": gini(t)})
    return pd.DataFrame(rows)


def unit_levels(df: pd.DataFrame, factors: Sequence[str], unit: str) -> pd.DataFrame:
    """How many generating units (templates) hold each level of each factor (SSQA: 4 templates have a male stigma
    holder). Columns: factor, level, n_prompts, n_units."""
    rows = []
    for f in factors:
        if f == unit or f not in df:
            continue
        g = df.groupby(f, observed=True, dropna=False)
        rows += [{"factor": f, "level": lv, "n_prompts": int(n), "n_units": int(u)}
                 for (lv, n), u in zip(g.size().items(), g[unit].nunique())]
    return pd.DataFrame(rows, columns=["factor", "level", "n_prompts", "n_units"])


def pairwise_counts(df: pd.DataFrame, row: str, col: str, levels: dict | None = None) -> pd.DataFrame:
    """Counts for every pair of levels of two factors (zeros included): the data of a coverage heatmap."""
    t = count_tensor(df, [row, col], levels)
    return t.unstack(col).reindex(columns=_levels(df, col, levels))


def pairwise_coverage(df: pd.DataFrame, factors: Sequence[str], levels: dict | None = None) -> pd.DataFrame:
    """CP and GI of every pair of factors (which pairs are not crossed)."""
    rows = []
    for a, b in itertools.combinations(factors, 2):
        o = coverage_overall(df, [a, b], levels).iloc[0]
        rows.append({"factor_a": a, "factor_b": b, "n_combinations": int(o.n_combinations),
                     "n_covered": int(o.n_covered), "coverage_percentage": o.coverage_percentage, "gini": o.gini})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Dependency:
    determinant: tuple          # factor(s) whose levels fix the dependent
    dependent: str
    purity: float = 1.0         # share of rows whose dependent level is the modal one given the determinant

    def message(self) -> str:
        det = " and ".join(f"'{d}'" for d in self.determinant)
        if self.purity >= 1.0:
            return (f"'{self.dependent}' is a function of {det}: every level of {det} occurs with a single level "
                    f"of '{self.dependent}', so their effects cannot be separated (they are aliased); do not put "
                    "them in one regression model.")
        return (f"'{self.dependent}' is almost a function of {det}: {self.purity:.1%} of the prompts have the one "
                f"level of '{self.dependent}' that is most common at their level of {det}; their effects are "
                "nearly aliased and estimates from a model with both rest on the few exceptions.")


def _purity_codes(det: np.ndarray, dep: np.ndarray, k_dep: int) -> float:
    """Share of rows whose ``dep`` code is the most common one at their ``det`` code (integer codes)."""
    u, cnt = np.unique(det * k_dep + dep, return_counts=True)
    det_of = u // k_dep                      # sorted, since the keys are sorted with det as the major part
    starts = np.r_[0, np.flatnonzero(np.diff(det_of)) + 1]
    return float(np.maximum.reduceat(cnt, starts).sum() / det.size)


def functional_dependencies(df: pd.DataFrame, factors: Sequence[str], max_determinant: int = 1,
                            min_purity: float = 1.0) -> list[Dependency]:
    """Factors that are functions of other factors (A -> B when each level of A occurs with one level of B).

    Checks single determinants, and pairs when ``max_determinant >= 2`` (only pairs where neither factor alone
    determines B). Constant factors (one observed level) are trivially functions of anything; they are skipped. With
    ``min_purity < 1`` near-functions are reported too: the purity of A -> B is the share of rows whose B is the most
    common B at their level of A (1 = exact function). A determinant with as many levels as there are rows determines
    everything and is skipped. Example: in SSQA, ``biased_answer`` is a function of ``template``; ``gender`` is a
    function of ``template`` and ``prompt_style`` (and of ``template`` alone but for the 37 no-stigma prompts:
    purity 99.6 %).
    """
    factors = list(factors)
    codes, k = {}, {}
    for f in factors:
        c, uniq = pd.factorize(df[f], use_na_sentinel=False)
        codes[f], k[f] = c.astype(np.int64), len(uniq)
    n = len(df)
    const = {f for f in factors if k[f] <= 1}
    unique_key = {f for f in factors if k[f] == n}
    found: list[Dependency] = []
    single: set[tuple[str, str]] = set()
    for a in factors:
        if a in const or a in unique_key:
            continue
        for b in factors:
            if a == b or b in const:
                continue
            pur = _purity_codes(codes[a], codes[b], k[b])
            if pur >= min_purity:
                found.append(Dependency((a,), b, pur))
                if pur >= 1.0:
                    single.add((a, b))
    if max_determinant >= 2:
        cand = [f for f in factors if f not in const and f not in unique_key]
        for a1, a2 in itertools.combinations(cand, 2):
            det = codes[a1] * k[a2] + codes[a2]
            if np.unique(det).size == n:
                continue
            for b in factors:
                if b in (a1, a2) or b in const or (a1, b) in single or (a2, b) in single:
                    continue
                if _purity_codes(det, codes[b], k[b]) >= 1.0:
                    found.append(Dependency((a1, a2), b, 1.0))
    return found


def dependency_table(deps: Iterable[Dependency]) -> pd.DataFrame:
    return pd.DataFrame([{"determinant": " + ".join(d.determinant), "dependent": d.dependent,
                          "purity": d.purity, "warning": d.message()} for d in deps],
                        columns=["determinant", "dependent", "purity", "warning"])
