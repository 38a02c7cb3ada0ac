"""The verdict layer: from a table of effects to the decision columns that sentences may use (issue 18).

Every reported effect (a model's score against its null, two models' paired difference, a test of uniform choice …)
gets, in one place, these columns (the contract every notebook's tables and findings follow; cite this module,
``biaslab.stats.verdict``):

* ``family``, ``family_kind``, ``family_size``: the multiplicity family the effect belongs to. Each notebook declares
  a short **confirmatory** family (its paper's headline tests), adjusted by **Holm** (1979; family-wise error under
  any dependence); every other tested effect is **exploratory**, adjusted by **Benjamini–Hochberg** (1995; false
  discovery rate) within its own family (by default, its table).
* ``p_adjusted``, ``p_adjust_method``: the adjusted p of that family (:func:`biaslab.stats.multiplicity.adjust`,
  statsmodels ``multipletests``). An effect that is not tested (a degenerate responder, rows that are not
  comparable, an undefined estimate) is left out of its family and does not count towards its size.
* ``excludes_null``: the interval excludes the null value (NA when there is no interval or no null).
* ``significant``: ``p_adjusted < alpha`` (NA when there is no p).
* ``bf_direction``: "H1" when every Bayes factor of the stated prior range exceeds 3, "H0" when every one is below
  1/3, "inconclusive" otherwise (Jeffreys 1961, Lee & Wagenmakers 2013 Table 1: beyond 3 is at least "moderate");
  NA without a Bayes factor *or without its prior range* — one prior never yields a direction (issue 18, item 3).
* ``responder_status``: for this metric (what it reads), "informative", "degenerate: <reason>" or
  "not judged: <reason>" (:mod:`biaslab.stats.responders`).
* ``comparable``, ``comparability``: whether the rows compared share prompts and answer mode, and a note when not.
* ``verdict``: the one categorical words key on — "distinguishable", "not distinguishable", "undefined (<why>)" or
  "not tested (<why>)".

The decision is the adjusted p of the effect's family where there is a p; where a table has only an interval (no
test), the interval decides and ``p_adjust_method`` says so ("none: 95 % interval, not adjusted"). Rows are never
dropped: a degenerate responder keeps its estimate and interval, flagged.

How a table's columns are read is declared once per table in an :class:`Effects` (the estimate, p, interval, null,
Bayes factor and the families of its rows); :func:`decide` derives the columns for one table, :func:`decide_tables`
for several whose rows share a family. Both are pure functions of their inputs and idempotent (a table that already
carries verdict columns is re-derived from its inference columns, never from its old verdict).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import multiplicity

ALPHA = 0.05
#: a Bayes factor beyond these is at least "moderate" evidence (Lee & Wagenmakers 2013, Table 1)
BF_H1, BF_H0 = 3.0, 1 / 3
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
ADJUSTMENT = {CONFIRMATORY: "holm", EXPLORATORY: "fdr_bh"}
INTERVAL_ONLY = "none: 95 % interval, not adjusted"

DISTINGUISHABLE, NOT_DISTINGUISHABLE = "distinguishable", "not distinguishable"

#: the columns this layer writes (in this order, after the table's own columns)
VERDICT_COLUMNS = ["family", "family_kind", "family_size", "p_adjusted", "p_adjust_method", "excludes_null",
                   "significant", "bf_direction", "responder_status", "comparable", "comparability", "verdict"]


@dataclass(frozen=True)
class Family:
    """A multiplicity family: an id, its kind, and which rows of a table belong to it (``where``: column -> value
    or tuple of values, or a function of the table returning a boolean mask; None = every row)."""
    id: str
    kind: str = EXPLORATORY
    where: Mapping | Callable | None = None

    def mask(self, df: pd.DataFrame) -> pd.Series:
        if self.where is None:
            return pd.Series(True, index=df.index)
        if callable(self.where):
            return pd.Series(np.asarray(self.where(df), dtype=bool), index=df.index)
        m = pd.Series(True, index=df.index)
        for col, val in self.where.items():
            if col not in df:
                return pd.Series(False, index=df.index)
            vals = val if isinstance(val, (tuple, list, set, frozenset)) else (val,)
            m &= df[col].isin(vals)
        return m


@dataclass(frozen=True)
class Effects:
    """How one table states its effects. Each name may be a tuple of alternatives (the first column present is
    used), so a table before and after the inference columns (``ci_low`` vs ``ci95_low``, ``p_value`` vs
    ``lead_p``) reads the same.

    ``null``: a number, or column name(s) holding it (``null_value``), optionally ending in a number used when no
    column is present. ``bf``: BF10 column(s); ``log10_bf``: log10
    BF10 column(s), used when no BF10 column is present. ``families``: checked in order, the first that holds a row
    is its family; rows in none go to ``default`` (an exploratory family named after the table when None).
    ``undefined``: a function of the table returning, per row, a reason the estimate is undefined ("" when it is
    defined); an estimate that is NaN is always undefined. ``pair``: the two model columns of a comparison table
    (responder status then names either model). ``test``: columns identifying one test where a table repeats a
    test's p on several rows (a factor's Wald test on each of its levels): the test counts once in its family."""
    estimate: str | tuple
    p: str | tuple | None = ("p_value",)
    ci: tuple = (("ci_low", "ci_high"), ("ci95_low", "ci95_high"))
    null: float | str | tuple | None = ("null_value",)
    bf: str | tuple | None = ("bf10",)
    log10_bf: str | tuple | None = ("log10_bf10",)
    families: tuple = ()
    default: Family | None = None
    undefined: Callable | None = None
    by: tuple = ("model",)
    pair: tuple | None = None
    test: tuple | None = None


def _first(df: pd.DataFrame, names) -> str | None:
    if names is None:
        return None
    for n in ((names,) if isinstance(names, str) else names):
        if n in df.columns:
            return n
    return None


def _col(df: pd.DataFrame, names, default=np.nan) -> pd.Series:
    c = _first(df, names)
    return pd.to_numeric(df[c], errors="coerce") if c else pd.Series(default, index=df.index, dtype=float)


def _null(df: pd.DataFrame, names) -> pd.Series:
    """The null value per row: the first of ``names`` that is a column of ``df``, or a number (a constant, e.g. the
    fallback after ``"null_value"``); NaN when none applies."""
    if names is None:
        return pd.Series(np.nan, index=df.index)
    for n in ((names,) if isinstance(names, (str, int, float)) else names):
        if isinstance(n, str) and n in df.columns:
            return pd.to_numeric(df[n], errors="coerce")
        if isinstance(n, (int, float)) and not isinstance(n, bool):
            return pd.Series(float(n), index=df.index)
    return pd.Series(np.nan, index=df.index)


def interval_columns(df: pd.DataFrame, spec: Effects) -> tuple[str, str] | None:
    for lo, hi in spec.ci:
        if lo in df.columns and hi in df.columns:
            return lo, hi
    return None


def excludes_null(lo, hi, null) -> pd.Series:
    """Per row: True when [lo, hi] excludes ``null``, False when it contains it, NA when any of the three is
    missing."""
    lo, hi, null = (pd.Series(np.asarray(x, dtype=float)) for x in np.broadcast_arrays(lo, hi, null))
    ok = lo.notna() & hi.notna() & null.notna()
    out = pd.Series(pd.NA, index=lo.index, dtype="boolean")
    out[ok] = ~((lo[ok] <= null[ok]) & (null[ok] <= hi[ok]))
    return out


def bf_direction(bf10, bf_min=None, bf_max=None) -> pd.Series:
    """"H1" when the whole prior range lies above 3, "H0" when it lies below 1/3, else "inconclusive"; NA without a
    BF10 or without its range (``bf_min``/``bf_max`` None or NaN)."""
    bf10 = pd.Series(np.asarray(bf10, dtype=float))
    lo = pd.Series(np.asarray(bf_min if bf_min is not None else np.full(len(bf10), np.nan), dtype=float))
    hi = pd.Series(np.asarray(bf_max if bf_max is not None else np.full(len(bf10), np.nan), dtype=float))
    out = pd.Series(pd.NA, index=bf10.index, dtype="object")
    ranged = bf10.notna() & lo.notna() & hi.notna()
    out[ranged] = "inconclusive"
    out[ranged & (lo > BF_H1)] = "H1"
    out[ranged & (hi < BF_H0)] = "H0"
    return out


def _status_text(row: Mapping) -> str:
    """One responder row (``degenerate``, ``reasons``, optional ``judged``/``status``) as a status string."""
    if isinstance(row.get("status"), str) and row["status"]:
        return row["status"]
    reasons = row.get("reasons") if isinstance(row.get("reasons"), str) else ""
    deg = str(row.get("degenerate")).lower() in ("true", "1")
    if deg:
        return f"degenerate: {reasons}" if reasons else "degenerate"
    return reasons if reasons.startswith("not judged") else "informative"


def responder_status(check: pd.DataFrame | None, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """A responder table (:func:`biaslab.stats.responders.responder_check` or ``probability_check``, already
    restricted to the rows that judge one metric) as ``by`` + ``responder_status``: several rows of one key (e.g.
    k = 3 and k = 5 prompts) combine to "degenerate" when any is, naming which."""
    by = list(by)
    if check is None or check.empty or not set(by) <= set(check.columns):
        return pd.DataFrame(columns=by + ["responder_status"])
    rows = []
    for key, part in check.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        texts = [_status_text(r) for r in part.to_dict("records")]
        extra = [c for c in part.columns if c not in by and c in ("k", "cot", "dataset", "task")]
        bad = [(t, r) for t, r in zip(texts, part.to_dict("records")) if t.startswith("degenerate")]
        if bad:
            status = "degenerate: " + "; ".join(
                (", ".join(f"{c} = {r[c]}" for c in extra) + ": " if extra and len(part) > 1 else "")
                + t.removeprefix("degenerate: ").removeprefix("degenerate") for t, r in bad)
        elif texts and all(t.startswith("not judged") for t in texts):
            status = texts[0]
        else:
            status = "informative"
        rows.append({**dict(zip(by, key)), "responder_status": status.rstrip(": ")})
    return pd.DataFrame(rows)


def metric_status(check: pd.DataFrame | None, metric: str, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """:func:`responder_status` of the rows of a per-metric responder table (column ``metric``) that judge
    ``metric``; empty when none do."""
    if check is None or check.empty or "metric" not in check:
        return pd.DataFrame(columns=list(by) + ["responder_status"])
    return responder_status(check[check["metric"] == metric], by)


def _attach_status(df: pd.DataFrame, status: pd.DataFrame | str | None, spec: Effects) -> pd.Series:
    """responder_status per row of ``df``: a constant string, or looked up by ``spec.by`` (for a comparison table,
    both models of ``spec.pair``: degenerate when either is)."""
    if status is None:
        return pd.Series("not judged: no responder check for this metric", index=df.index)
    if isinstance(status, str):
        return pd.Series(status, index=df.index)
    by = [c for c in status.columns if c != "responder_status"]
    look = {tuple(k if isinstance(k, tuple) else (k,)): s
            for k, s in zip(status[by].itertuples(index=False, name=None), status["responder_status"])}

    def one(row, model_col):
        key = tuple(row[model_col] if c == "model" else row.get(c) for c in by)
        return look.get(key, "not judged: no responder row for this model")

    out = []
    for _, row in df.iterrows():
        if spec.pair:
            parts = [(row[c], one(row, c)) for c in spec.pair]
            bad = [f"{m}: {s.removeprefix('degenerate: ')}" for m, s in parts if s.startswith("degenerate")]
            if bad:
                out.append("degenerate: " + "; ".join(bad))
            elif all(s.startswith("not judged") for _, s in parts):
                out.append(parts[0][1])
            else:
                out.append("informative")
        else:
            out.append(one(row, "model"))
    return pd.Series(out, index=df.index, dtype=object)


def assign_families(df: pd.DataFrame, spec: Effects, table: str) -> tuple[pd.Series, pd.Series]:
    fam = pd.Series(None, index=df.index, dtype=object)
    kind = pd.Series(None, index=df.index, dtype=object)
    for f in spec.families:
        m = f.mask(df) & fam.isna()
        fam[m], kind[m] = f.id, f.kind
    d = spec.default or Family(f"{table}: exploratory", EXPLORATORY)
    rest = fam.isna()
    fam[rest], kind[rest] = d.id, d.kind
    return fam, kind


def _base(df: pd.DataFrame, spec: Effects, table: str, responders, comparable, alpha: float) -> pd.DataFrame:
    """Every verdict column except the adjusted p and what depends on it; ``_p`` holds the p that enters its family
    (NaN for rows that are not tested)."""
    out = df.drop(columns=[c for c in VERDICT_COLUMNS if c in df.columns]).copy()
    est = _col(out, spec.estimate)
    p = _col(out, spec.p)
    ci = interval_columns(out, spec)
    lo = _col(out, ci[0]) if ci else pd.Series(np.nan, index=out.index)
    hi = _col(out, ci[1]) if ci else pd.Series(np.nan, index=out.index)
    null = _null(out, spec.null)
    fam, kind = assign_families(out, spec, table)
    out["family"], out["family_kind"] = fam, kind
    out["excludes_null"] = excludes_null(lo, hi, null).to_numpy()
    bf_c = _first(out, spec.bf)
    bf = (_col(out, bf_c) if bf_c else 10 ** _col(out, spec.log10_bf))
    out["bf_direction"] = bf_direction(bf, _col(out, ("bf10_min",)), _col(out, ("bf10_max",))).to_numpy()
    out["responder_status"] = _attach_status(out, responders, spec).to_numpy()
    if comparable is None:
        out["comparable"], out["comparability"] = True, ""
    elif isinstance(comparable, pd.DataFrame):
        out["comparable"] = comparable["comparable"].to_numpy()
        out["comparability"] = comparable["comparability"].to_numpy()
    else:
        out["comparable"], out["comparability"] = bool(comparable), ""
    why_undefined = (pd.Series(spec.undefined(out), index=out.index).fillna("").astype(str) if spec.undefined
                     else pd.Series("", index=out.index))
    why_undefined = why_undefined.where(est.notna() | (why_undefined != ""), "estimate not computable")
    verdict = pd.Series("", index=out.index, dtype=object)
    deg = out["responder_status"].astype(str).str.startswith("degenerate")
    verdict[deg] = "not tested (degenerate responder: " + out.loc[deg, "responder_status"].str.removeprefix(
        "degenerate: ") + ")"
    nc = (verdict == "") & ~out["comparable"].astype(bool)
    verdict[nc] = "not tested (not comparable: " + out.loc[nc, "comparability"].astype(str) + ")"
    und = (verdict == "") & (why_undefined != "")
    verdict[und] = "undefined (" + why_undefined[und] + ")"
    has_ci = lo.notna() & hi.notna()
    none = (verdict == "") & p.isna() & ~(has_ci & null.notna())
    verdict[none] = ("not tested (the test could not be computed here)" if _first(out, spec.p)
                     else "not tested (no test and no interval against a null in this table)")
    out["_p"] = p.where(verdict == "")
    out["_test"] = (out[list(spec.test)].astype(str).agg("|".join, axis=1) if spec.test
                    else pd.Series(out.index.astype(str), index=out.index))
    out["_interval_only"] = (verdict == "") & p.isna()
    out["verdict"] = verdict
    return out


def _finish(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    io = out.pop("_interval_only").astype(bool)
    out.pop("_p"), out.pop("_test")
    sig = pd.Series(pd.NA, index=out.index, dtype="boolean")
    tested = out["p_adjusted"].notna()
    sig[tested] = out.loc[tested, "p_adjusted"] < alpha
    out["significant"] = sig
    out.loc[io, "p_adjust_method"] = INTERVAL_ONLY
    decide_by = sig.where(~io, out["excludes_null"].astype("boolean"))
    todo = out["verdict"] == ""
    out.loc[todo & (decide_by == True), "verdict"] = DISTINGUISHABLE          # noqa: E712 (nullable boolean)
    out.loc[todo & (decide_by == False), "verdict"] = NOT_DISTINGUISHABLE     # noqa: E712
    return out[[c for c in out.columns if c not in VERDICT_COLUMNS] + VERDICT_COLUMNS]


def _adjust(frames: list[pd.DataFrame]) -> None:
    """p_adjusted, p_adjust_method and family_size in place, each family adjusted over all ``frames`` together."""
    pool = pd.concat([f[["family", "family_kind", "_p", "_test"]].assign(_t=i, _i=f.index)
                      for i, f in enumerate(frames)], ignore_index=True)
    pool["p_adjusted"], pool["family_size"], pool["p_adjust_method"] = np.nan, 0, ""
    pool["_key"] = pool["_t"].astype(str) + "#" + pool["_test"]
    for fam, g in pool.groupby("family", sort=False):
        kinds = set(g["family_kind"])
        if len(kinds) > 1:
            raise ValueError(f"family {fam!r} is declared both {sorted(kinds)}: one family has one kind")
        method = ADJUSTMENT[kinds.pop()]
        one = g.drop_duplicates("_key")                 # a test repeated on several rows counts once
        adj = pd.Series(multiplicity.adjust(one["_p"].to_numpy(float), method), index=one["_key"])
        pool.loc[g.index, "p_adjusted"] = g["_key"].map(adj).where(g["_p"].notna()).to_numpy()
        pool.loc[g.index, "family_size"] = int(one["_p"].notna().sum())
        pool.loc[g.index, "p_adjust_method"] = multiplicity.METHODS[method]
    for i, f in enumerate(frames):
        part = pool[pool["_t"] == i].set_index("_i")
        for c in ("p_adjusted", "family_size", "p_adjust_method"):
            f[c] = part[c].reindex(f.index).to_numpy()
        f.loc[f["_p"].isna(), "p_adjust_method"] = np.where(f.loc[f["_p"].isna(), "verdict"] == "",
                                                            INTERVAL_ONLY, "not in the family (not tested)")


def decide(df: pd.DataFrame, spec: Effects, table: str, responders: pd.DataFrame | str | None = None,
           comparable: pd.DataFrame | bool | None = None, alpha: float = ALPHA) -> pd.DataFrame:
    """The table with the verdict columns derived (see the module docstring); its own columns are kept as they
    are. ``responders``: :func:`responder_status` output (or one status for every row); ``comparable``: a frame of
    ``comparable``/``comparability`` aligned with ``df``, or one bool."""
    return decide_tables({table: (df, spec, responders, comparable)}, alpha)[table]


def decide_tables(tables: Mapping[str, tuple], alpha: float = ALPHA) -> dict[str, pd.DataFrame]:
    """Several tables whose rows may share families (a notebook's confirmatory family spanning two tables):
    ``{name: (df, spec, responders, comparable)}`` -> ``{name: decided df}``. Families are matched by id across
    tables."""
    base = {name: _base(t[0], t[1], name, *(list(t[2:]) + [None, None])[:2], alpha) for name, t in tables.items()}
    frames = list(base.values())
    if frames:
        _adjust(frames)
    return {name: _finish(f, alpha) for name, f in base.items()}


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Counts of each verdict per family (for a notebook's 'decisions' table)."""
    if df.empty:
        return pd.DataFrame(columns=["family", "family_kind", "verdict", "n"])
    v = df["verdict"].str.replace(r" \(.*", "", regex=True)
    return (df.assign(verdict=v).groupby(["family", "family_kind", "verdict"], sort=False).size()
            .rename("n").reset_index())
