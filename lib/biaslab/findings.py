"""Wording of computed findings: numbers from result tables turned into careful phrases.

Each notebook's closing sentences come from a small function in its paper's package (``papers/<paper>/findings.py``)
that reads the run's tables; the phrases here keep the wording uniform: an estimate with its interval, and whether a
result is distinguishable from chance *at this sample size* (a null result is stated with its n, never as "no
bias"). Decisions are read only from the verdict columns that :mod:`biaslab.stats.verdict` derives (``verdict``,
``p_adjusted`` with its family, ``excludes_null``, ``bf_direction``, ``responder_status``): :func:`decision` and
:func:`evidence` never look at a raw p-value or a single-prior Bayes factor. Intervals come from ``ci_low``/``ci_high``
with ``ci_method`` where a table has them, otherwise the older ``ci95_low``/``ci95_high`` names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

ALPHA = 0.05
#: the two decided verdicts of :mod:`biaslab.stats.verdict` (the others start "undefined (" or "not tested (")
DISTINGUISHABLE, NOT_DISTINGUISHABLE = "distinguishable", "not distinguishable"


def num(x: float, digits: int = 3) -> str:
    """A number to ``digits`` significant digits, without trailing noise (0.954, 12.3, 1.2e-05)."""
    if not present(x):
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
    return "n/a" if not present(x) else f"{100 * x:.{digits}f} %"


def pval(p: float) -> str:
    """``p = 0.012`` / ``p < 0.001``."""
    if not present(p):
        return "p n/a"
    return "p < 0.001" if p < 1e-3 else f"p = {p:.2g}"


def interval(row: Mapping, digits: int = 3, scale: float = 1.0) -> str:
    """``(95 % CI 0.949–0.958)`` from ``ci_low``/``ci_high`` (with ``ci_method`` when given) or ``ci95_low``/
    ``ci95_high``; without an interval, the reason where ``ci_method`` gives one ("undefined: …"), else empty."""
    for lo, hi in (("ci_low", "ci_high"), ("ci95_low", "ci95_high")):
        if lo in row and hi in row and present(row[lo]) and present(row[hi]):
            method = row.get("ci_method") if hasattr(row, "get") else None
            level = f"95 % CI, {method}" if isinstance(method, str) and method else "95 % CI"
            return f"({level} {num(scale * row[lo], digits)}–{num(scale * row[hi], digits)})"
    method = row.get("ci_method") if hasattr(row, "get") else None
    return f"(no interval, {method})" if isinstance(method, str) and method.startswith("undefined") else ""


def present(x) -> bool:
    """A present value (not None, not NaN, not pandas' NA)."""
    try:
        return x is not None and not (x != x) and str(x) != "<NA>"
    except TypeError:          # pandas.NA refuses comparison
        return False


def _method_short(method: str) -> str:
    return {"Holm (FWER)": "Holm", "Benjamini-Hochberg (FDR)": "BH"}.get(method, method)


def adjusted(row: Mapping) -> str:
    """How the row's decision was made, from the verdict columns: 'Holm-adjusted p = 0.034 over 6 confirmatory
    tests' / 'BH-adjusted p < 0.001 over 20 exploratory tests' / '95 % interval, not adjusted'."""
    method = row.get("p_adjust_method")
    if not isinstance(method, str) or not method:
        return ""
    if method.startswith("none"):
        return "95 % interval, not adjusted"
    if method.startswith("not in the family"):
        return ""
    p = row.get("p_adjusted")
    size = row.get("family_size")
    fam = (f" over {int(size)} {row.get('family_kind', '')} test{'s' if int(size) != 1 else ''}"
           if present(size) else "")
    return f"{_method_short(method)}-adjusted {pval(p)}{fam}"


def family_words(row: Mapping) -> str:
    """'Holm over 10 confirmatory tests' / 'BH over 20 exploratory tests' / '95 % intervals, not adjusted'."""
    method = row.get("p_adjust_method")
    if not isinstance(method, str) or not method or method.startswith("not in the family"):
        return ""
    if method.startswith("none"):
        return "95 % intervals, not adjusted"
    size = row.get("family_size")
    return (f"{_method_short(method)} over {int(size) if present(size) else '?'} {row.get('family_kind', '')} "
            f"test{'s' if present(size) and int(size) != 1 else ''}")


def decision(row: Mapping, against: str = "chance", null: str | None = None) -> str:
    """The row's verdict in words (``verdict`` and the columns it rests on; never a raw p):

    * distinguishable -> 'distinguishable from chance (Holm-adjusted p = …)'; when its 95 % interval nevertheless
      contains the null, that is said too;
    * not distinguishable -> 'not distinguishable from chance at this sample size (n = …, adjusted p …; effects
      smaller than … would go undetected)', and when the unadjusted interval excludes the null, that is said;
    * undefined (…) / not tested (…) -> the verdict itself, with its reason.

    ``against`` names the null in words; ``null`` (printed) the value, for the interval remarks."""
    v = row.get("verdict")
    if not isinstance(v, str) or not v:
        raise KeyError("the row has no verdict column: derive it with biaslab.stats.verdict first")
    how = adjusted(row)
    n = row.get("n", row.get("n_pairs"))
    size = f"n = {int(n):,}" if present(n) else ""
    ex = row.get("excludes_null")
    at = f" {null}" if null else ""
    if v == "distinguishable":
        extra = (f"; its 95 % interval still contains{at or ' the null'}"
                 if present(ex) and not bool(ex) and not str(row.get("p_adjust_method", "")).startswith("none") else "")
        return f"distinguishable from {against} ({how}{extra})"
    if v == "not distinguishable":
        mde = row.get("mde")
        miss = f"; effects smaller than {num(abs(mde), 2)} would go undetected" if present(mde) else ""
        extra = (f"; its unadjusted 95 % interval excludes{at or ' the null'}, but the family's adjustment does not "
                 "let that count" if present(ex) and bool(ex) and not str(row.get("p_adjust_method", "")).startswith(
                     "none") else "")
        return (f"not distinguishable from {against} at this sample size ("
                + "; ".join(x for x in (size, how) if x) + miss + extra + ")")
    return v


def evidence(row: Mapping, h1: str = "a departure from the null", h0: str = "the null") -> str:
    """The Bayes factor in words from ``bf_direction`` (never from one prior): evidence for H1/H0 only when the whole
    prior range agrees; otherwise the range, or the single BF with 'no prior range' (no claim)."""
    d = row.get("bf_direction") if isinstance(row.get("bf_direction"), str) else None
    bf = row.get("bf10")
    if not present(bf) and present(row.get("log10_bf10")):
        bf = 10 ** float(row["log10_bf10"])
    prior = row.get("bf_prior") if isinstance(row.get("bf_prior"), str) and row.get("bf_prior") else ""
    rng = row.get("bf_prior_range") if isinstance(row.get("bf_prior_range"), str) else ""
    lo, hi = row.get("bf10_min"), row.get("bf10_max")
    span_ = f"BF10 {num(lo, 2)} to {num(hi, 2)} over {rng or 'the prior range'}" if present(lo) and present(hi) else ""
    if d == "H1":
        return f"evidence for {h1} over the whole prior range ({span_})"
    if d == "H0":
        return f"evidence for {h0} over the whole prior range ({span_})"
    if d == "inconclusive":
        return f"Bayes factor inconclusive: the prior range disagrees ({span_})"
    if present(bf):
        return (f"BF10 = {num(bf, 2)}" + (f" ({prior})" if prior else "")
                + "; no prior range was computed, so it supports no claim either way")
    return ""


def excludes(row: Mapping, value: float) -> bool | None:
    """Whether the row's interval excludes ``value`` (None without an interval or a value) — for descriptive
    remarks; decisions come from the ``excludes_null`` / ``verdict`` columns."""
    if not present(value):
        return None
    for lo, hi in (("ci_low", "ci_high"), ("ci95_low", "ci95_high")):
        if lo in row and hi in row and present(row[lo]) and present(row[hi]):
            return not (row[lo] <= value <= row[hi])
    return None


def detectable(rows: Iterable[Mapping], what: str, digits: int = 2) -> str:
    """'{what} smaller than 0.07–0.49 cannot be detected at this size (80 % power, α = 0.05)' over the rows' ``mde``
    (``power.csv``), reading only the MDEs that are defined: a row whose MDE is undefined (NaN, ``mde_note`` says
    why — a design SE of 0 means no estimable noise, not that every effect is detectable) is counted and its reason
    given, never printed as 0."""
    rows = list(rows)
    ok = [float(r["mde"]) for r in rows if present(r.get("mde")) and float(r["mde"]) > 0]
    why = sorted({str(r.get("mde_note") or "undefined").removeprefix("undefined: ").removeprefix("undefined")
                  or "undefined" for r in rows if not (present(r.get("mde")) and float(r["mde"]) > 0)})
    bad = len(rows) - len(ok)
    undefined = (f"{bad} of {len(rows)} ha{'s' if bad == 1 else 've'} no detectable-effect size ({'; '.join(why)})"
                 if bad else "")
    if not ok:
        return (f"{what}: no detectable-effect size" + (f" in any of the {len(rows)}" if len(rows) > 1 else "")
                + f" ({'; '.join(why)})")
    return (f"{what} smaller than {span(min(ok), max(ok), digits)} cannot be detected at this size (80 % power, "
            f"α = 0.05)" + (f"; {undefined}" if undefined else ""))


def join(items: Iterable[str], last: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def bullets(lines: Iterable[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)
