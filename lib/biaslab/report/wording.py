"""Wording of computed findings: one short sentence per confirmatory claim, and the phrases shared by descriptive
lines.

A **claim sentence** (:func:`claim_sentence`) is at most 35 words: who, the claim's estimate with the interval that
agrees with its verdict (at the level at which it was tested, ``ci_adj_*``; else the unadjusted interval at its own
level, :func:`interval_level`, labelled so; none for a row not decided), the verdict against the analysis plan
(:mod:`biaslab.plan`; the ``verdict`` column of :mod:`biaslab.stats.verdict`) and at most one qualifier where it
changes the reading (the Bayes factor disagreeing with the decision, or the design's power at the level the row was
tested at, :func:`power_at_level`, for a result that is not distinguishable). The interval method, G, df, family and
procedure live in the table's columns and the report's methods section, not in the sentence. Exploratory rows get no
deciding sentence: they are tables and figures.

**Words from rows.** Every level, n and power a sentence quotes is read from the row it describes: an interval's
confidence from its method (:func:`interval_level`), a power statement's power and α from the row's ``power`` and
``alpha`` (:func:`power_sentence`), a claim's power only at the level it was tested at; never typed here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

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


def mc_num(x: float, mc_se: float) -> str:
    """A Monte-Carlo quantity to the decimal place of its Monte-Carlo SE's first digit (17.7 with SE 0.31, 18 with
    SE 2.4): no more digits than its draws support."""
    if not (present(x) and present(mc_se)) or mc_se <= 0:
        return num(x)
    s = f"{x:.{max(0, -math.floor(math.log10(mc_se)))}f}"
    return s.replace("-", "−", 1) if s.startswith("-") else s


def with_mc_se(row: Mapping, col: str) -> str:
    """The value of ``col`` as :func:`num`, or, where the row holds its Monte-Carlo standard error
    (``<col>_mc_se``), to the digits its draws support with that SE: '17.7 (Monte-Carlo SE 0.3)'."""
    se = row.get(f"{col}_mc_se")
    if not (present(se) and se > 0):
        return num(row.get(col))
    return f"{mc_num(row[col], se)} (Monte-Carlo SE {se:.1g})"


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


#: how a method states a confidence other than 95 % ("90% two-sided": the 1 - 2 alpha interval that inverts a
#: one-sided test at alpha)
_STATED_LEVEL = re.compile(r"(\d+(?:\.\d+)?) ?% two-sided")


def interval_level(row: Mapping, low: str = "ci_low") -> float:
    """The confidence of the interval whose lower bound is column ``low``, from the row: ``ci95_*`` by its name,
    ``ci_adj_*`` at ``ci_level`` (the verdict layer's), else the level its method column (``<stem>_method``, else
    ``ci_method``) states as "NN% two-sided" (Rao-Scott's noncentral-F interval, CALM's permutation interval, a
    TOST interval), else 0.95: every other interval of :mod:`biaslab.stats` is at 1 - alpha with alpha 0.05, and
    one at any other level says so in its method."""
    if low.startswith("ci95"):
        return 0.95
    if low == "ci_adj_low" and present(row.get("ci_level")):
        return float(row["ci_level"])
    stem = low.removesuffix("_low")
    method = row.get(f"{stem}_method") if present(row.get(f"{stem}_method")) else row.get("ci_method")
    hit = _STATED_LEVEL.search(method) if isinstance(method, str) else None
    return float(hit.group(1)) / 100 if hit else 0.95


def level_pct(level: float) -> str:
    """0.9 -> '90 %', 0.99925 -> '99.93 %' (a confidence or a power as a sentence quotes it)."""
    return f"{100 * float(level):.4g} %"


def interval(row: Mapping, digits: int = 3, scale: float = 1.0) -> str:
    """``(95 % CI 0.949–0.958)`` from ``ci_low``/``ci_high`` or ``ci95_low``/``ci95_high`` at the row's own level
    (:func:`interval_level`; the method, G and df stay in the table's ``ci_method`` column, not in the sentence);
    without an interval, the reason where ``ci_method`` gives one ("undefined: …", "not estimable (…)"), else
    empty."""
    for lo, hi in (("ci_low", "ci_high"), ("ci95_low", "ci95_high")):
        if lo in row and hi in row and present(row[lo]) and present(row[hi]):
            return (f"({level_pct(interval_level(row, lo))} CI {num(scale * row[lo], digits)}–"
                    f"{num(scale * row[hi], digits)})")
    method = row.get("ci_method")
    return (f"(no interval, {method})" if isinstance(method, str) and method.startswith(("undefined", "not estimable"))
            else "")


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
    fixed = {k for k, v in (getattr(claim, "rows", {}) or {}).items() if not isinstance(v, (list, tuple))}
    for k in keys:
        if k in row and k not in fixed and present(row[k]):
            who += f", {row[k]}"
    return who


def power_at_level(row: Mapping) -> str:
    """'power 0.83 for an effect of 0.1 at level 0.0008': the design's power for the claim's smallest effect of
    interest at the level the row was tested at (the row's ``power``, ``sesoi`` and ``tested_level``, the verdict
    layer's); "" where the row holds no such power (an MDE computed at another level, e.g. 0.05, is not quoted beside
    a test at this one)."""
    if not all(present(row.get(k)) for k in ("tested_level", "power", "sesoi")):
        return ""
    return (f"power {num(row['power'], 2)} for an effect of {num(abs(row['sesoi']))} at level "
            f"{float(row['tested_level']):.2g}")


def verdict_words(v: str) -> str:
    """The verdict short enough for a sentence: the reason of a 'not tested' / 'undefined' cut to its head."""
    if v in (DISTINGUISHABLE, NOT_DISTINGUISHABLE):
        return v + " from the null"
    head, _, why = v.partition(" (")
    return f"{head} ({why.split(':')[0].rstrip(')')})" if why else head


def bound(x: float) -> str:
    """An interval's end: ±∞ as "∞"/"−∞", else :func:`num`."""
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
        ci = f" [{bound(row['ci_adj_low'])}, {bound(row['ci_adj_high'])}] at {level_pct(row['ci_level'])}"
    elif decided and claim.ci and present(row.get(claim.ci[0])) and present(row.get(claim.ci[1])):
        se = row.get(f"{claim.estimate}_mc_se")            # bounds from the same draws: no more digits than they carry
        lo, hi = ((mc_num(row[c], se) for c in claim.ci) if present(se) and se > 0
                  else (num(row[c]) for c in claim.ci))
        ci = f" (unadjusted {level_pct(interval_level(row, claim.ci[0]))} CI {lo}, {hi})"
    p = row.get("p_adjusted")
    how = f" (adjusted {pval(p)})" if decided and present(p) else ""
    bf = row.get("bf_direction")
    qual = ""
    if (v, bf) in ((DISTINGUISHABLE, "H0"), (NOT_DISTINGUISHABLE, "H1")):      # the evidence disagrees: its size
        qual = (f"; BF₁₀ {span(row['bf10_min'], row['bf10_max'], 2)} over the prior range, not adjusted for "
                "multiplicity")
    elif v == NOT_DISTINGUISHABLE and power_at_level(row):
        qual = "; " + power_at_level(row)
    what = getattr(claim, "estimate_label", "")
    est = with_mc_se(row, claim.estimate) if present(est) else "not estimable"
    return f"`{claim.id}` {who(row, claim)}: {what + ' ' if what else ''}{est}{ci}, {verdict_words(v)}{how}{qual}."


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


def stated_power(rows: Iterable[Mapping]) -> tuple[str, str]:
    """('80 %', '0.05'): the power and α the rows' MDEs were computed at (``power.csv``'s ``power`` and ``alpha``),
    one of each; a ValueError naming the columns where the rows hold none or several."""
    rows = list(rows)
    power = {float(r["power"]) for r in rows if present(r.get("power"))}
    alpha = {float(r["alpha"]) for r in rows if present(r.get("alpha"))}
    if len(power) != 1 or len(alpha) != 1:
        raise ValueError(f"power rows state {len(power)} powers and {len(alpha)} alphas (columns power, alpha): a "
                         "power sentence quotes one of each, from its rows (power.csv's power_row writes both)")
    return level_pct(power.pop()), num(alpha.pop())


def power_sentence(rows: Iterable[Mapping], what: str, digits: int = 2) -> str:
    """'{what}: the design had 80 % power for effects of at least 0.07–0.49 (α = 0.05)' over the rows' defined
    ``mde`` (``power.csv``), at the power and α the rows state (:func:`stated_power`); rows whose MDE is undefined
    are counted with their reason (``mde_note``), never printed as 0."""
    rows = list(rows)
    ok = [float(r["mde"]) for r in rows if present(r.get("mde")) and float(r["mde"]) > 0]
    why = sorted({str(r.get("mde_note") or "undefined").removeprefix("undefined: ").removeprefix("undefined")
                  or "undefined" for r in rows if not (present(r.get("mde")) and float(r["mde"]) > 0)})
    bad = len(rows) - len(ok)
    if not ok:
        return f"{what}: no minimum detectable effect ({'; '.join(why)})"
    power, alpha = stated_power(rows)
    return (f"{what}: the design had {power} power for effects of at least {span(min(ok), max(ok), digits)} "
            f"(α = {alpha})" + (f"; {bad} of {len(rows)} without one ({'; '.join(why)})" if bad else ""))


def join(items: Iterable[str], last: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def bullets(lines: Iterable[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)
