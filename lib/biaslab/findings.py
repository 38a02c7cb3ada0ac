"""Wording of computed findings: numbers from result tables turned into careful phrases.

Each notebook's closing sentences come from a small function in its paper's package (``papers/<paper>/findings.py``)
that reads the run's tables; the phrases here keep the wording uniform: an estimate with its interval, a p-value,
and whether a result is distinguishable from chance *at this sample size* (a null result is stated with its n, never
as "no bias"). Where a table carries the inference columns (``ci_low``/``ci_high`` with ``ci_method``, a minimum
detectable effect ``mde``), they are used; otherwise the older ``ci95_low``/``ci95_high`` names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

ALPHA = 0.05


def num(x: float, digits: int = 3) -> str:
    """A number to ``digits`` significant digits, without trailing noise (0.954, 12.3, 1.2e-05)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.{max(digits - 1, 0)}e}"
    s = f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:,.0f}"
    return s.replace("-", "−", 1) if s.startswith("-") else s


def span(lo: float, hi: float, digits: int = 3) -> str:
    """'0.948–0.975', or one number when both ends print alike."""
    a, b = num(lo, digits), num(hi, digits)
    return a if a == b else f"{a}–{b}"


def pct(x: float, digits: int = 0) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.{digits}f} %"


def pval(p: float) -> str:
    """``p = 0.012`` / ``p < 0.001``."""
    if p is None or p != p:
        return "p n/a"
    return "p < 0.001" if p < 1e-3 else f"p = {p:.2g}"


def interval(row: Mapping, digits: int = 3, scale: float = 1.0) -> str:
    """``(95 % CI 0.949–0.958)`` from ``ci_low``/``ci_high`` (with ``ci_method`` when given) or ``ci95_low``/
    ``ci95_high``; empty when the row has no interval."""
    for lo, hi in (("ci_low", "ci_high"), ("ci95_low", "ci95_high")):
        if lo in row and hi in row and row[lo] == row[lo] and row[hi] == row[hi]:
            method = row.get("ci_method") if hasattr(row, "get") else None
            level = f"95 % CI, {method}" if isinstance(method, str) and method else "95 % CI"
            return f"({level} {num(scale * row[lo], digits)}–{num(scale * row[hi], digits)})"
    return ""


def excludes(row: Mapping, value: float) -> bool | None:
    """Whether the row's interval excludes ``value`` (None without an interval)."""
    for lo, hi in (("ci_low", "ci_high"), ("ci95_low", "ci95_high")):
        if lo in row and hi in row and row[lo] == row[lo] and row[hi] == row[hi]:
            return not (row[lo] <= value <= row[hi])
    return None


def chance_verdict(p: float, n: int | None = None, alpha: float = ALPHA, mde: float | None = None) -> str:
    """'distinguishable from chance (p = …)' or 'not distinguishable from chance at this sample size (n = …)';
    with a minimum detectable effect, the null verdict says how large an effect could have been missed."""
    if p is not None and p == p and p < alpha:
        return f"distinguishable from chance ({pval(p)})"
    size = f"n = {n}, " if n is not None else ""
    miss = f"; effects smaller than {num(mde, 2)} would go undetected" if mde is not None and mde == mde else ""
    return f"not distinguishable from chance at this sample size ({size}{pval(p)}{miss})"


def bf_verdict(log10_bf: float) -> str:
    """Jeffreys-style reading of log10 BF10 (> 1 strong for H1, < -1 strong for H0)."""
    if log10_bf != log10_bf:
        return "Bayes factor n/a"
    b = f"log10 BF10 = {log10_bf:.1f}"
    if log10_bf > 1:
        return f"strong evidence against chance ({b})"
    if log10_bf < -1:
        return f"strong evidence for chance ({b})"
    return f"inconclusive evidence ({b})"


def join(items: Iterable[str], last: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def bullets(lines: Iterable[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)
