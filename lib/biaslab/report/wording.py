"""Wording of computed findings: one short sentence per confirmatory claim, and the phrases shared by descriptive
lines.

A **claim sentence** (:func:`claim_sentence`) is at most 35 words: who, the claim's estimate with the interval that
agrees with its verdict (at the level at which it was tested, ``ci_adj_*``; else the unadjusted 95 % interval,
labelled so; none for a row not decided), the verdict against the analysis plan (:mod:`biaslab.plan`; the ``verdict`` column of :mod:`biaslab.stats.verdict`)
and at most one qualifier where it changes the reading (the Bayes factor disagreeing with the decision, or the power
of the design for a result that is not distinguishable). The interval method, G, df, family and procedure live in
the table's columns and the report's methods section, not in the sentence. Exploratory rows get no deciding
sentence: they are tables and figures.
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
    """``(95 % CI 0.949–0.958)`` from ``ci_low``/``ci_high`` or ``ci95_low``/``ci95_high`` (the method, G and df
    stay in the table's ``ci_method`` column, not in the sentence); without an interval, the reason where
    ``ci_method`` gives one ("undefined: …"), else empty."""
    for lo, hi in (("ci_low", "ci_high"), ("ci95_low", "ci95_high")):
        if lo in row and hi in row and present(row[lo]) and present(row[hi]):
            return f"(95 % CI {num(scale * row[lo], digits)}–{num(scale * row[hi], digits)})"
    method = row.get("ci_method") if hasattr(row, "get") else None
    return f"(no interval, {method})" if isinstance(method, str) and method.startswith("undefined") else ""


def present(x) -> bool:
    """A present value (not None, not NaN, not pandas' NA)."""
    try:
        return x is not None and not (x != x) and str(x) != "<NA>"
    except TypeError:          # pandas.NA refuses comparison
        return False


def who(row: Mapping, claim, keys: tuple = ("dataset", "class_type", "polarity")) -> str:
    """Whom a claim row is about: its model (or model pair), then each of ``keys`` the row has and the claim does
    not fix (the README's table adds ``benchmark``)."""
    who = f"{row['model_a']} − {row['model_b']}" if present(row.get("model_a")) else str(row.get("model", ""))
    fixed = set(getattr(claim, "rows", {}) or {})
    for k in keys:
        if k in row and k not in fixed and present(row[k]):
            who += f", {row[k]}"
    return who


def power_words(mde: float, digits: int = 2) -> str:
    """'the design had 80 % power for effects of at least 0.071' (an MDE is a power statement, not a bound on
    what was found)."""
    return f"the design had 80 % power for effects of at least {num(abs(mde), digits)}" if present(mde) else ""


def verdict_words(v: str) -> str:
    """The verdict short enough for a sentence: the reason of a 'not tested' / 'undefined' cut to its head."""
    if v in (DISTINGUISHABLE, NOT_DISTINGUISHABLE):
        return v + " from the null"
    head, _, why = v.partition(" (")
    return f"{head} ({why.split(':')[0].rstrip(')')})" if why else head


def _bound(x: float) -> str:
    return "−∞" if x == float("-inf") else "∞" if x == float("inf") else num(x)


def claim_sentence(row: Mapping, claim) -> str:
    """One claim instance in at most 35 words (see the module docstring); ``claim``: a :class:`biaslab.plan.Claim`
    (its ``estimate``/``ci`` columns are read)."""
    v = row.get("verdict")
    if not isinstance(v, str) or not v:
        raise KeyError("the row has no verdict column: derive it with biaslab.stats.verdict first")
    est = row.get(claim.estimate)
    decided = v in (DISTINGUISHABLE, NOT_DISTINGUISHABLE)
    ci = ""
    if decided and present(row.get("ci_adj_low")) and present(row.get("ci_adj_high")):
        ci = f" [{_bound(row['ci_adj_low'])}, {_bound(row['ci_adj_high'])}] at {100 * row['ci_level']:.4g} %"
    elif decided and claim.ci and present(row.get(claim.ci[0])) and present(row.get(claim.ci[1])):
        ci = f" (unadjusted 95 % CI {num(row[claim.ci[0]])}, {num(row[claim.ci[1]])})"
    p = row.get("p_adjusted")
    how = f" (adjusted {pval(p)})" if decided and present(p) else ""
    bf = row.get("bf_direction")
    qual = ""
    if v == DISTINGUISHABLE and bf == "H0":
        qual = "; the Bayes factor favours the null"
    elif v == NOT_DISTINGUISHABLE and bf == "H1":
        qual = "; the Bayes factor favours a departure"
    elif v == NOT_DISTINGUISHABLE and present(row.get("mde")):
        qual = "; " + power_words(row["mde"])
    what = getattr(claim, "estimate_label", "")
    return f"`{claim.id}` {who(row, claim)}: {what + ' ' if what else ''}{num(est)}{ci}, {verdict_words(v)}{how}{qual}."


def claim_findings(tables: Iterable, claims: Iterable) -> str:
    """Bullets of every confirmatory row (``claim`` column) of the decided ``tables``, in the plan's claim order;
    "" when no row is a claim's."""
    lines = []
    tables = [t for t in tables if t is not None and len(t) and "claim" in t]
    for c in claims:
        for t in tables:
            for r in t[t["claim"] == c.id].to_dict("records"):
                lines.append(claim_sentence(r, c))
    return bullets(lines)


def power_sentence(rows: Iterable[Mapping], what: str, digits: int = 2) -> str:
    """'{what}: the design had 80 % power for effects of at least 0.07–0.49 (α = 0.05)' over the rows' defined
    ``mde`` (``power.csv``); rows whose MDE is undefined are counted with their reason (``mde_note``), never printed
    as 0."""
    rows = list(rows)
    ok = [float(r["mde"]) for r in rows if present(r.get("mde")) and float(r["mde"]) > 0]
    why = sorted({str(r.get("mde_note") or "undefined").removeprefix("undefined: ").removeprefix("undefined")
                  or "undefined" for r in rows if not (present(r.get("mde")) and float(r["mde"]) > 0)})
    bad = len(rows) - len(ok)
    if not ok:
        return f"{what}: no minimum detectable effect ({'; '.join(why)})"
    return (f"{what}: the design had 80 % power for effects of at least {span(min(ok), max(ok), digits)} "
            f"(α = 0.05)" + (f"; {bad} of {len(rows)} without one ({'; '.join(why)})" if bad else ""))


def join(items: Iterable[str], last: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def bullets(lines: Iterable[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)
