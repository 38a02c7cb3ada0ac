"""What a reader sees of a notebook's tables and figures (docs/reports.md): one display layer, installed by
:class:`~biaslab.report.outputs.OutputDir`, which registers :func:`html_table` as IPython's ``text/html`` formatter for
DataFrames, so every table a cell displays is shown the same way:

- one number format per column by what it holds (:func:`column_kind`, :func:`column_decimals`), interval ends in
  the estimate's format, p-values to 2 digits with "< 0.001", shares as percentages, empty cells as "–";
- human column labels (:func:`column_label`: ``df.attrs["labels"]``, else :data:`LABELS` / :data:`WORDS`);
- no 0…n index column; a table wider than the report is split into parts that repeat its label columns (one of 1-3
  rows is transposed); a long one scrolls and links the CSV it was saved as, which keeps every digit.

Rendered with pandas' ``Styler`` (no second table model such as great_tables); the look is ``report/report.css``.
:func:`figure_alt` words a figure's alternative text: the result its plotting function stated
(:func:`biaslab.plots.labels.state_result`), then its titles and axis labels with the range of the values drawn.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

#: Width budget of one table in characters of its unbreakable words (numbers, words of a header): a report's print
#: view is 718 px wide and a table cell of the report stylesheet takes about 7 px per character plus 12 px padding.
WIDTH_CHARS = 88
#: Rows shown before a table scrolls inside its cell.
SCROLL_ROWS = 25
#: Tables with at most this many rows are transposed when too wide (else split into parts).
TRANSPOSE_ROWS = 3

_P = re.compile(r"(^|_)(p|q)(_value)?(_(holm|bh|adj|adjusted|naive|cluster|fdr))?$|^p_(value|adjusted)|pvalue")
_COUNT = re.compile(r"^(n|k)(_|$)|_n$|(^|_)(count|counts|pairs|prompts|items|templates|universes|levels|sentences|"
                    r"runs|excluded|unmatched|df\d?)$")
_SHARE = re.compile(r"(^|_)(share|fraction)(_|$)")
_PCT = re.compile(r"(_|^)(pct|percent)$")


def column_kind(name, values: pd.Series) -> str:
    """``count``, ``p``, ``share`` (0–1 shown as %), ``percent`` (already in %), ``estimate`` or ``other``."""
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        return "other"
    n = str(name).lower()
    finite = values[np.isfinite(values.astype(float))] if len(values) else values
    if pd.api.types.is_integer_dtype(values):
        return "count"
    if _P.search(n) and "mean" not in n and finite.between(0, 1).all():
        return "p"
    if _PCT.search(n):
        return "percent"
    if _SHARE.search(n) and finite.between(0, 1).all():
        return "share"
    if _COUNT.search(n) and (finite == finite.round()).all():
        return "count"
    return "estimate"


def significant(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, without scientific notation from 0.001 to 100,000."""
    if x == 0:
        return "0"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    x = float(f"{x:.{digits - 1}e}")           # rounded first: 0.99996 is 1.00, not 1.000
    mag = math.floor(math.log10(abs(x)))
    if mag < -3 or mag >= 5:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - mag)
    text = f"{x:.{decimals}f}"
    return "0" if float(text) == 0 else text


def column_decimals(values) -> int | None:
    """The decimals of a column's one fixed format (3 significant digits of its largest magnitude), or None for
    scientific notation (the largest needs it, or the smallest non-zero value would show as 0)."""
    v = np.abs(np.asarray([x for x in values if _is_number(x)], dtype=float))
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return 0
    mag = math.floor(math.log10(float(f"{v.max():.2e}")))
    if mag < -3 or mag >= 5:
        return None
    decimals = max(0, 2 - mag)
    return None if round(float(v.min()), decimals) == 0 else decimals


def fixed(x: float, decimals: int | None) -> str:
    """``x`` in a column's format (:func:`column_decimals`): ``decimals`` fixed decimals, or scientific (None)."""
    if x == 0 or math.isinf(x):
        return significant(x)
    return f"{x:.2e}" if decimals is None else f"{x:.{decimals}f}"


def format_value(x, kind: str, decimals: int | None | bool = False) -> str:
    """One cell as text for ``kind`` (see :func:`column_kind`) in its column's format ``decimals`` (default: the
    cell's own 3 significant digits); missing values are "–"."""
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA or x is pd.NaT:
        return "–"
    if isinstance(x, (float, np.floating)) and kind == "other" and x != round(x):
        return significant(float(x), 3)             # a number in a column of text: never every digit
    if kind == "other" or isinstance(x, (bool, np.bool_, str)):
        return str(x)
    x = float(x)
    if math.isnan(x):
        return "–"
    if kind == "count" and x == round(x):
        v = int(x)
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if kind == "p":
        return "<\u00a00.001" if x < 0.001 else significant(x, 2)
    scale = 100 if kind == "share" else 1
    text = significant(scale * x, 3) if decimals is False else fixed(scale * x, decimals)
    return text + "\u00a0%" if kind in ("share", "percent") else text


#: Words of column names as a reader reads them (:func:`column_label`); other words stay as they are.
WORDS = {"ci": "CI", "ci95": "95 % CI", "hdi": "HDI", "mde": "MDE", "bf": "BF", "bf10": "BF₁₀", "bf01": "BF₀₁",
         "se": "SE", "sd": "SD", "pct": "%", "adj": "adjusted", "lo": "low", "hi": "high", "llm": "LLM",
         "ss": "SS", "kl": "KL", "ambig": "ambiguous",
         "disambig": "disambiguated", "num": "number", "pos": "position", "id": "id", "dm": "DM", "eq": "eq.",
         "holm": "Holm", "bh": "BH", "df": "df", "icc": "ICC", "iqr": "IQR", "auc": "AUC", "mc": "MC"}
#: Whole column names with a label of their own, shared by every table that has them.
LABELS = {"n": "n", "k": "k", "p_value": "p", "p_adjusted": "adjusted p", "ci_low": "CI low", "ci_high": "CI high"}


def column_label(name, labels=None) -> str:
    """The header a reader sees for column ``name``: the table's label map ``labels``, else :data:`LABELS`, else its
    words with "_" as spaces and the abbreviations of :data:`WORDS` written out."""
    key = str(name)
    if labels and key in labels:
        return labels[key]
    if key in LABELS:
        return LABELS[key]
    return " ".join(WORDS.get(w.lower(), w) for w in re.split(r"_+", key) if w) or key


_INTERVAL_END = re.compile(r"(^|_)(low|high|lo|hi|lower|upper)$|^hdi_")


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    """Index levels as ordinary columns (a default 0…n index is dropped), column levels joined with " · "."""
    if isinstance(df.columns, pd.MultiIndex):
        df = df.copy()
        df.columns = [" · ".join(str(x) for x in c if str(x) != "") for c in df.columns]
    default = isinstance(df.index, pd.RangeIndex) or (df.index.nlevels == 1 and df.index.name is None
                                                     and pd.api.types.is_integer_dtype(df.index))
    if not default:
        df = df.reset_index()
    return df


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, (bool, np.bool_))


def _numbers_of_objects(s: pd.Series) -> pd.Series:
    """An object column of numbers (and gaps) as a numeric column, so that it is formatted like one."""
    if s.dtype != object:
        return s
    present_ = s[s.notna()]
    return pd.to_numeric(s) if len(present_) and all(_is_number(x) for x in present_) else s


def formatted(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the cells as text under their human labels, whether each is a number) of ``df`` with its index as columns."""
    labels = df.attrs.get("labels") if isinstance(df.attrs.get("labels"), dict) else None
    df = _flat(df)
    df = df.apply(_numbers_of_objects)
    kinds, decimals = {}, {}

    def shown(i):                          # a column's values as shown (a share in %)
        return (100 if kinds[i] == "share" else 1) * df.iloc[:, i].astype(float).to_numpy()

    for i, col in enumerate(df.columns):
        kinds[i] = column_kind(col, df.iloc[:, i])
        if kinds[i] in ("estimate", "share", "percent"):
            decimals[i] = column_decimals(shown(i))
    group: list[int] = []                  # an estimate and the interval ends after it share one format
    for i in [*range(df.shape[1]), None]:
        end = i is not None and i in decimals and bool(_INTERVAL_END.search(str(df.columns[i])))
        if end:
            if not group and i - 1 in decimals and not _INTERVAL_END.search(str(df.columns[i - 1])):
                group.append(i - 1)
            group.append(i)
            continue
        if len(group) > 1:
            d = column_decimals(np.concatenate([shown(j) for j in group]))
            decimals.update({j: d for j in group})
        group = []
    cols, seen = [], {}
    for c in (column_label(c, labels) for c in df.columns):           # Styler needs unique column names
        seen[c] = seen.get(c, 0) + 1
        cols.append(c if seen[c] == 1 else f"{c} ({seen[c]})")
    text = {i: [format_value(v, kinds[i], decimals.get(i, False)) for v in df.iloc[:, i]] for i in kinds}
    numeric = {i: [kinds[i] != "other"] * len(df) for i in kinds}
    return (pd.DataFrame(text, index=range(len(df))).set_axis(cols, axis=1),
            pd.DataFrame(numeric, index=range(len(df))).set_axis(cols, axis=1))


def _min_width(words) -> int:
    """Characters of the longest word: text breaks at spaces only (a word or number is never split, report.css and
    :func:`biaslab.report.html.nobreak_cells`)."""
    return max((len(w) for v in words for w in str(v).split()), default=1)


def _widths(text: pd.DataFrame) -> list[int]:
    return [max(_min_width([c]), _min_width(text.iloc[:, i])) + 2 for i, c in enumerate(text.columns)]


def layout(text: pd.DataFrame, numeric: pd.DataFrame, budget: int = WIDTH_CHARS):
    """``(how, [(text, numeric)])``: how a table is shown — ``"whole"`` when it fits ``budget``, else
    ``"transposed"`` (at most :data:`TRANSPOSE_ROWS` rows) or ``"split"`` into column groups that each repeat the
    label columns."""
    widths = _widths(text)
    if sum(widths) <= budget or text.shape[1] <= 1:
        return "whole", [(text, numeric)]
    if len(text) <= TRANSPOSE_ROWS:
        t = text.T.reset_index()
        t.columns = ["column"] + [f"row {i + 1}" for i in range(len(text))]
        num = pd.concat([pd.Series(False, index=range(t.shape[0]), name="column"),
                         numeric.T.reset_index(drop=True)], axis=1)
        num.columns = t.columns
        if sum(_widths(t)) <= budget:
            return "transposed", [(t, num)]
    labels = []
    for i in range(text.shape[1]):          # leading text columns label each row (at most 2, within half the budget)
        if numeric.iloc[:, i].any() or len(labels) == 2 or sum(widths[j] for j in labels) + widths[i] > budget // 2:
            break
        labels.append(i)
    parts, current, used = [], [], sum(widths[j] for j in labels)
    for i in range(len(labels), text.shape[1]):
        if current and used + widths[i] > budget:
            parts.append(current)
            current, used = [], sum(widths[j] for j in labels)
        current.append(i)
        used += widths[i]
    parts.append(current)
    return "split", [(text.iloc[:, labels + p], numeric.iloc[:, labels + p]) for p in parts if p]


def html_table(df: pd.DataFrame, csv: str | None = None) -> str:
    """``df`` as the report shows it (see the module's docstring); ``csv`` is the saved table's path relative to the
    run's folder (linked when the table is long)."""
    from pandas.io.formats.style import Styler

    text, numeric = formatted(df)
    how, parts = layout(text, numeric)
    long = len(text) > SCROLL_ROWS
    out = []
    for k, (t, num) in enumerate(parts):
        styler = Styler(t, escape="html", cell_ids=False, uuid="bl")
        styler.hide(axis="index")
        styler.set_td_classes(num.replace({True: "bl-num", False: ""}).infer_objects())
        styler.set_table_attributes('class="bl-table"')
        styler.set_table_styles([])
        body = re.sub(r'<style type="text/css">\s*</style>\s*', "", styler.to_html()).replace(' id="T_bl"', "")
        if how == "split":
            out.append(f'<p class="bl-table-note">part {k + 1} of {len(parts)}</p>')
        elif how == "transposed":
            out.append('<p class="bl-table-note">transposed to fit: one column per row</p>')
        out.append(f'<div class="bl-scroll">{body}</div>' if long else body)
    rows, cols = len(text), text.shape[1]
    note = f"{rows:,} row{'' if rows == 1 else 's'} × {cols} column{'' if cols == 1 else 's'}"
    if csv:
        note += f' · full precision: <a href="{html.escape(csv)}">{html.escape(csv)}</a>'
    out.append(f'<p class="bl-table-note">{note}</p>')
    return '<div class="bl-table-wrap">' + "\n".join(out) + "</div>"


class Formatter:
    """IPython's ``text/html`` formatter for DataFrames, linking a shown table to the CSV it was saved as."""

    def __init__(self):
        self.saved: list[tuple[str, tuple, int, int]] = []     # (relative csv path, columns, rows, id)

    def record(self, df: pd.DataFrame, relative: str) -> None:
        self.saved.append((relative, tuple(map(str, df.columns)), len(df), id(df)))

    def csv_of(self, df: pd.DataFrame) -> str | None:
        cols = set(map(str, _flat(df).columns))
        for rel, saved_cols, rows, ident in reversed(self.saved):
            if ident == id(df) or (rows == len(df) and cols <= set(saved_cols)):
                return rel
        return None

    def __call__(self, df: pd.DataFrame) -> str:
        return html_table(df, self.csv_of(df))


_FORMATTER = Formatter()


def install() -> Formatter | None:
    """Register the DataFrame formatter in the running IPython (no-op outside IPython); returns it."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    ip = get_ipython()
    if ip is None:
        return None
    ip.display_formatter.formatters["text/html"].for_type(pd.DataFrame, _FORMATTER)
    return _FORMATTER


def record_table(df: pd.DataFrame, path: Path, root: Path) -> None:
    """Remember that ``df`` was saved at ``path`` (linked, relative to the run's folder ``root``, when shown)."""
    try:
        rel = Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return
    _FORMATTER.record(df, rel)


#: TeX a figure's labels use, in plain words for alternative text.
_TEX_WORDS = {"alpha": "alpha", "beta": "beta", "mu": "mu", "sigma": "sigma", "Delta": "difference", "delta": "delta",
              "pm": "±", "le": "≤", "ge": "≥", "times": "×", "cdot": "·", "infty": "infinity"}


def plain(text) -> str:
    """A figure label in plain words: no "$", braces, sub/superscript marks or TeX commands ("BF_{10}" -> "BF10",
    "$\\hat p$" -> "p")."""
    s = str(text).replace("$", "")
    s = re.sub(r"\\([A-Za-z]+)\s*", lambda m: _TEX_WORDS[m.group(1)] + " " if m.group(1) in _TEX_WORDS else "", s)
    s = re.sub(r"[{}_^\\]", "", s)
    return " ".join(s.split())


def _data_range(ax) -> str:
    """'y from A to B' of the values an axes shows in data coordinates (markers, line vertices, bar ends; a bar chart
    laid sideways reads along x), within its view limits (a guide drawn past them shows nothing)."""
    from matplotlib.patches import Rectangle
    ys = []
    for line in ax.lines:
        if line.get_visible() and line.get_transform().contains_branch(ax.transData):
            ys.extend(np.asarray(line.get_ydata(), float).ravel())
    for c in ax.collections:
        off = np.asarray(c.get_offsets(), float).reshape(-1, 2)
        if len(off) and c.get_offset_transform().contains_branch(ax.transData):
            ys.extend(off[:, 1])
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()]
    sideways = len(bars) > 1 and len({round(p.get_height(), 9) for p in bars}) == 1 and \
        len({round(p.get_width(), 9) for p in bars}) > 1
    if sideways and not ys:
        axis, (lo, hi) = "x", ax.get_xlim()
        vals = [p.get_x() + p.get_width() for p in bars if p.get_width() != 0]
    else:
        axis, (lo, hi) = "y", ax.get_ylim()
        vals = ys + ([] if sideways else [p.get_y() + p.get_height() for p in bars if p.get_height() != 0])
    v = np.asarray(vals, float)
    v = v[np.isfinite(v) & (v >= min(lo, hi)) & (v <= max(lo, hi))]
    if not len(v):
        return ""
    a, b = f"{v.min():.3g}", f"{v.max():.3g}"
    return f"{axis} from {a} to {b}" if a != b else f"{axis} at {a}"


def figure_alt(fig) -> str:
    """Alternative text of ``fig`` in plain words: the result its plotting function stated
    (:func:`biaslab.plots.labels.state_result`), its title, then each panel's title and axis labels, with the range of
    the values it draws where no result was stated (a number from its data in every figure)."""
    stated = getattr(fig, "biaslab_result", None)
    parts = [str(stated)] if stated else []
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text().strip():
        parts.append(plain(sup.get_text()))
    panels = [ax for ax in fig.axes if ax.get_visible() and (ax.axison or ax.get_title())]
    for i, ax in enumerate(panels):
        bits = [plain(ax.get_title())] if ax.get_title().strip() else []
        if ax.axison:
            bits += [f"{k}: {plain(v)}" for k, v in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if v.strip()]
            bits += [r for r in [_data_range(ax)] if r and not stated]
        if bits:
            parts.append((f"panel {i + 1}: " if len(panels) > 1 else "") + "; ".join(bits))
    return ". ".join(parts) or "figure without a title or axis labels"
