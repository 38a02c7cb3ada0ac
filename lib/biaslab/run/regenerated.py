"""Did a regenerated run give the committed results? Table by table, row by row, verdict by verdict.

:func:`compare_run` reads every ``tables/*.csv`` of a committed run folder and of its regeneration and

* matches rows by key (:func:`key_columns`; rows still tied match in order of appearance);
* compares numbers within the tolerance recorded for the row's model and precision (:func:`tolerances`: notebook 6's
  ``precision_tolerance.csv``, :mod:`biaslab.scoring.tolerance`; elsewhere the float32 engine's
  :data:`~biaslab.scoring.tolerance.ENGINE_TOLERANCE`): ``|a − b| ≤ tol · max(1, |a|, |b|)``;
* requires the decision columns (:data:`DECISIONS`) to be identical, and counts a committed row (or table) with a
  decision that the regeneration lacks, or the reverse, as a changed verdict.

Columns that describe the run rather than its results (:data:`RUN_COLUMNS`: seconds, cache misses) are not compared.
:func:`summary_line` says it in one line per notebook: "identical", "numbers within 1e-4, verdicts identical", or the
tables and rows that differ.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..scoring.tolerance import COLUMNS as TOLERANCE_COLUMNS, ENGINE_TOLERANCE

#: columns whose values are decisions: they must not change
DECISIONS = ("verdict", "agreement", "robustness", "responder_status", "paper_responder_status", "excludes_null",
             "significant", "bf_direction", "same_sign")
#: columns that describe how a run went (time, cache state), not what it found
RUN_COLUMNS = re.compile(r"(^|_)(s|seconds|cpu_s|cpu_seconds)$|^(cache_misses|positions_computed)$")
#: notebook 6's table of measured schedule tolerances (``biaslab.scoring.tolerance.table``)
TOLERANCE_TABLE = Path("06_multiverse") / "tables" / "precision_tolerance.csv"
#: parameters that name where a run wrote, not what it computed
WHERE = ("output_dir", "outputs_root")


@dataclass
class TableDiff:
    name: str
    rows: int = 0                       # committed rows
    verdicts: list = field(default_factory=list)    # "key: column a → b"
    numbers: list = field(default_factory=list)     # "key: column a → b"
    texts: list = field(default_factory=list)
    only_committed: list = field(default_factory=list)
    only_new: list = field(default_factory=list)
    max_delta: float = 0.0
    exact: bool = True
    tolerance: float = 0.0              # the largest tolerance applied

    @property
    def verdict_changes(self) -> int:
        return len(self.verdicts)

    @property
    def differs(self) -> bool:
        return bool(self.verdicts or self.numbers or self.texts or self.only_committed or self.only_new)


@dataclass
class RunComparison:
    label: str
    tables: list = field(default_factory=list)
    missing: list = field(default_factory=list)     # committed tables the regeneration lacks
    added: list = field(default_factory=list)       # tables only the regeneration has
    missing_verdicts: int = 0                       # rows of missing or added tables that carry a decision
    not_compared: str = ""
    parameters: str = ""                            # parameters that differ from the committed run's

    @property
    def verdict_changes(self) -> int:
        return sum(t.verdict_changes for t in self.tables) + self.missing_verdicts


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, low_memory=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable CSV table ({exc}); regenerate it or restore it from git") from exc


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def key_columns(df: pd.DataFrame) -> list[str]:
    """Text (then integer) columns in table order, each kept when it separates more rows, until rows are unique."""
    skip = set(DECISIONS) | {c for c in df.columns if RUN_COLUMNS.search(str(c))}
    text = [c for c in df.columns if c not in skip and not _numeric(df[c])]
    ints = [c for c in df.columns if c not in skip and pd.api.types.is_integer_dtype(df[c])]
    key: list[str] = []
    groups = 1 if len(df) else 0
    for c in text + ints:
        if groups == len(df):
            break
        n = len(df.drop_duplicates(key + [c]))
        if n > groups:
            key, groups = key + [c], n
    return key


def _keyed(df: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """``df`` indexed by the key's values (as text) plus the row's occurrence among rows with that key."""
    k = df[key].astype(str) if key else pd.DataFrame(index=df.index)
    # dropna=False: rows whose key holds an empty cell are numbered too (pandas' text dtype keeps NaN through astype)
    k = k.assign(_occurrence=k.groupby(list(k.columns), dropna=False).cumcount() if key else np.arange(len(df)))
    return df.set_index(pd.MultiIndex.from_frame(k))


def _label(idx, key: list[str]) -> str:
    vals = idx if isinstance(idx, tuple) else (idx,)
    if not key:
        return f"row {vals[-1] + 1}"
    return ", ".join([f"{k}={v}" for k, v in zip(key, vals)] + ([f"#{vals[-1] + 1}"] if vals[-1] else []))


def _same(a, b) -> bool:
    return (pd.isna(a) and pd.isna(b)) or (not pd.isna(a) and not pd.isna(b) and str(a) == str(b))


def compare_table(name: str, old: pd.DataFrame, new: pd.DataFrame, tol_of=None) -> TableDiff:
    """Compare a committed table with its regeneration. ``tol_of(df)``: the tolerance of each committed row (default:
    :data:`ENGINE_TOLERANCE` for all)."""
    tol_of = tol_of or row_tolerance({})
    d = TableDiff(name, rows=len(old))
    key = key_columns(old)
    o, n = _keyed(old, key), _keyed(new, [c for c in key if c in new.columns])
    if list(n.index.names) != list(o.index.names):
        d.only_committed = [f"key column(s) {', '.join(c for c in key if c not in new.columns)} missing"]
        return d
    has_decision = [c for c in DECISIONS if c in old.columns]
    for mine, other, where, say in ((o, n, d.only_committed, "missing from the regeneration"),
                                    (n, o, d.only_new, "only in the regeneration")):
        for idx in mine.index.difference(other.index, sort=False):
            where.append(_label(idx, key))
            row = mine.loc[[idx]]
            if any(c in row.columns and row[c].notna().any() for c in has_decision):
                d.verdicts.append(f"{_label(idx, key)}: row {say}")
    both = o.index.intersection(n.index, sort=False)
    o, n = o.loc[both], n.loc[both]
    cols = [c for c in old.columns if c not in key and not RUN_COLUMNS.search(str(c))]
    tol = tol_of(o)
    for c in cols:
        if c not in new.columns:
            d.texts.append(f"column {c} missing from the regeneration")
            continue
        a, b = o[c], n[c]
        if c not in DECISIONS and _numeric(a) and _numeric(b):
            av, bv = a.to_numpy(float), b.to_numpy(float)
            nan_a, nan_b = np.isnan(av), np.isnan(bv)
            with np.errstate(invalid="ignore"):         # inf - inf: equal infinities are no difference
                delta = np.where(nan_a | nan_b | (av == bv), 0.0, np.abs(av - bv))
            scale = np.maximum(1.0, np.maximum(np.abs(np.nan_to_num(av)), np.abs(np.nan_to_num(bv))))
            bad = (nan_a != nan_b) | (delta > tol * scale)
            d.exact &= bool(np.all((nan_a & nan_b) | (av == bv)))
            d.max_delta = max(d.max_delta, float(delta.max(initial=0.0)))
            d.tolerance = max(d.tolerance, float(tol.max(initial=0.0)))
            for i in np.flatnonzero(bad):
                d.numbers.append(f"{_label(both[i], key)}: {c} {av[i]:.6g} → {bv[i]:.6g}")
            continue
        for i, (x, y) in enumerate(zip(a, b)):
            if not _same(x, y):
                d.exact = False
                (d.verdicts if c in DECISIONS else d.texts).append(f"{_label(both[i], key)}: {c} {x} → {y}")
    return d


def tolerances(*folders: Path) -> dict:
    """(model, precision) -> tolerance from notebook 6's ``precision_tolerance.csv`` under each outputs folder (the
    larger where both record one)."""
    out: dict = {}
    for f in folders:
        p = Path(f) / TOLERANCE_TABLE
        if not p.exists():
            continue
        t = _read(p)
        missing = [c for c in TOLERANCE_COLUMNS if c not in t.columns]
        if missing:
            raise ValueError(f"{p}: column(s) {', '.join(missing)} missing; regenerate notebook 6")
        for r in t.itertuples():
            k = (r.model, r.precision)
            out[k] = max(out.get(k, 0.0), float(r.tolerance))
    return out


def row_tolerance(tols: dict):
    """``tol_of(df)`` for :func:`compare_table`: per row, its (model, precision) entry, else its precision's largest,
    else the float32 engine's :data:`ENGINE_TOLERANCE`; never below that."""
    by_precision: dict = {}
    for (_, prec), t in tols.items():
        by_precision[prec] = max(by_precision.get(prec, 0.0), t)

    def tol_of(df: pd.DataFrame) -> np.ndarray:
        if "precision" not in df.columns or not tols:
            return np.full(len(df), ENGINE_TOLERANCE)
        model = df["model"] if "model" in df.columns else pd.Series(None, index=df.index)
        t = [tols.get((m, p), by_precision.get(p, ENGINE_TOLERANCE)) for m, p in zip(model, df["precision"])]
        return np.maximum(np.asarray(t, float), ENGINE_TOLERANCE)
    return tol_of


def _manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return {}


def compare_run(committed: Path, new: Path, label: str, tols: dict | None = None) -> RunComparison:
    """Compare the tables of a committed run folder with a regenerated one (see the module docstring)."""
    committed, new = Path(committed), Path(new)
    rc = RunComparison(label)
    m_old, m_new = _manifest(committed), _manifest(new)
    if m_old.get("profile") and m_new.get("profile") and m_old["profile"] != m_new["profile"]:
        rc.not_compared = f"the committed run is profile {m_old['profile']}, this one {m_new['profile']}"
        return rc
    p_old, p_new = m_old.get("parameters") or {}, m_new.get("parameters") or {}
    changed = sorted(k for k in set(p_old) | set(p_new) if k not in WHERE and p_old.get(k) != p_new.get(k))
    rc.parameters = ", ".join(changed)
    tol_of = row_tolerance(tols if tols is not None else {})
    old_t = {p.name: p for p in sorted((committed / "tables").glob("*.csv"))}
    new_t = {p.name: p for p in sorted((new / "tables").glob("*.csv"))}
    rc.missing = [n for n in old_t if n not in new_t]
    rc.added = [n for n in new_t if n not in old_t]
    for path in [old_t[n] for n in rc.missing] + [new_t[n] for n in rc.added]:     # verdicts gone or appeared
        t = _read(path)
        rc.missing_verdicts += int(t[[c for c in DECISIONS if c in t.columns]].notna().any(axis=1).sum())
    for name in (n for n in old_t if n in new_t):
        rc.tables.append(compare_table(name, _read(old_t[name]), _read(new_t[name]), tol_of))
    return rc


def fmt(x: float) -> str:
    """A tolerance or difference in short scientific notation: 1e-4, 4e-4, 5.3e-5 (inf where a bound became
    infinite)."""
    if not x:
        return "0"
    if not np.isfinite(x):
        return str(float(x))
    m, e = f"{float(x):.1e}".split("e")
    return f"{m.rstrip('0').rstrip('.')}e{int(e)}"


def _first(items: list, n: int = 2) -> str:
    return "; ".join(items[:n]) + (f"; … {len(items) - n} more" if len(items) > n else "")


def summary_line(rc: RunComparison) -> str:
    """One line: identical / numbers within tol, verdicts identical / what differs, table by table."""
    head = f"{rc.label}: "
    if rc.not_compared:
        return head + "not compared: " + rc.not_compared
    note = f" (parameters differ from the committed run's: {rc.parameters})" if rc.parameters else ""
    rows = sum(t.rows for t in rc.tables)
    if not rc.tables and not rc.missing:
        return head + "no committed tables to compare" + note
    bad = [t for t in rc.tables if t.differs]
    if not bad and not rc.missing and not rc.added:
        if all(t.exact for t in rc.tables):
            return head + f"identical ({len(rc.tables)} tables, {rows:,} rows)" + note
        tol = max(t.tolerance for t in rc.tables)
        delta = max(t.max_delta for t in rc.tables)
        return (head + f"numbers within {fmt(tol)}, verdicts identical (largest |Δ| {fmt(delta)}; "
                f"{len(rc.tables)} tables, {rows:,} rows)" + note)
    parts = []
    if rc.verdict_changes:
        parts.append(f"VERDICTS CHANGED ({rc.verdict_changes})")
    for t in bad:
        bits = []
        if t.verdicts:
            bits.append(f"{len(t.verdicts)} verdict(s) changed: {_first(t.verdicts)}")
        if t.numbers:
            bits.append(f"{len(t.numbers)} number(s) beyond tolerance {fmt(t.tolerance)} "
                        f"(largest |Δ| {fmt(t.max_delta)}): {_first(t.numbers, 1)}")
        if t.texts:
            bits.append(f"{len(t.texts)} text value(s) differ: {_first(t.texts, 1)}")
        if t.only_committed and not t.verdicts:
            bits.append(f"{len(t.only_committed)} committed row(s) missing: {_first(t.only_committed, 1)}")
        if t.only_new and not t.verdicts:
            bits.append(f"{len(t.only_new)} new row(s): {_first(t.only_new, 1)}")
        parts.append(f"{t.name}: " + ", ".join(bits))
    if rc.missing:
        parts.append(f"tables missing from the regeneration: {', '.join(rc.missing)}")
    if rc.added:
        parts.append(f"new tables: {', '.join(rc.added)}")
    return head + "differs — " + " | ".join(parts) + note


def snapshot(committed_root: Path, labels: list[str], into: Path) -> None:
    """Copy the committed tables and MANIFEST of each run label (``notebook[/variant]``) that has a committed run
    into ``into`` before a regeneration overwrites them."""
    for lb in labels:
        src = Path(committed_root) / lb
        if not (src / "MANIFEST.json").exists():
            continue
        dst = into / lb
        (dst / "tables").mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / "MANIFEST.json", dst / "MANIFEST.json")
        for p in (src / "tables").glob("*.csv"):
            shutil.copy2(p, dst / "tables" / p.name)


def compare_all(committed_root: Path, new_root: Path, labels: list[str]) -> list[RunComparison]:
    """:func:`compare_run` for each label regenerated under ``new_root``, tolerances from both roots' notebook-6
    tables; a label without a committed run is "not compared" (every verdict of it is new)."""
    tols = tolerances(committed_root, new_root)
    old, new = Path(committed_root), Path(new_root)
    return [compare_run(old / lb, new / lb, lb, tols) if (old / lb / "MANIFEST.json").exists()
            else RunComparison(lb, not_compared="no committed run") for lb in labels if (new / lb).is_dir()]
