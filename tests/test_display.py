"""How a notebook shows a DataFrame (biaslab.report.display, installed by OutputDir): rounded by what each column holds,
every column and row kept (no index column, wide tables split or transposed, long ones scroll and link their CSV),
empty cells as "–"; the CSV keeps every digit. (The page in a browser: tests/test_report_browser.py.)"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from biaslab.report import display
from biaslab.report.outputs import OutputDir


def cells(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]


def headers(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<th[^>]*>(.*?)</th>", html, re.S)]


def test_numbers_are_rounded_by_column_kind_in_one_format_per_column():
    df = pd.DataFrame({"model": ["a", "b", "c"], "n_levels": [94.0, 3.0, np.nan], "n": [1508, 12000, 7],
                       "p_value": [0.0004, 0.03456, 1.0], "wilcoxon_p_holm": [0.5, 0.000001, 0.0123],
                       "estimate": [0.1234567, -12345.678, 0.99996], "modal_share": [0.4512, np.nan, 1.0],
                       "rel_change_pct": [12.3456, 0.5, -3.0], "bf10": [1.2e30, 0.5, 0.00001234],
                       "p_first": [0.5, 0.25, 0.123456], "mean_p_positive": [0.4, 0.5, 0.6],
                       "ok": [True, False, True]})
    text, numeric = display.formatted(df)
    nb = "\u00a0"                                                     # "%" and "<" never part from their number
    assert list(text["n levels"]) == ["94", "3", "–"]                  # a count stored as float, NaN as "–"
    assert list(text["n"]) == ["1508", "12,000", "7"]
    assert list(text["p"]) == [f"<{nb}0.001", "0.035", "1.0"]          # p-values: 2 significant digits
    assert list(text["wilcoxon p Holm"]) == ["0.50", f"<{nb}0.001", "0.012"]
    # one format per column: 3 significant digits of the largest; scientific where a value would show as 0
    assert list(text["estimate"]) == ["1.23e-01", "-1.23e+04", "1.00e+00"]
    assert list(text["modal share"]) == [f"45{nb}%", "–", f"100{nb}%"]
    assert list(text["rel change %"]) == [f"12.3{nb}%", f"0.5{nb}%", f"-3.0{nb}%"]
    assert list(text["BF₁₀"]) == ["1.20e+30", "5.00e-01", "1.23e-05"]
    assert list(text["p first"]) == ["0.500", "0.250", "0.123"]         # a probability, not a p-value
    assert list(text["mean p positive"]) == ["0.400", "0.500", "0.600"]
    assert list(text["ok"]) == ["True", "False", "True"] and not numeric["ok"].any() and numeric["n"].all()


def test_an_interval_is_formatted_like_its_estimate_and_labels_are_human():
    df = pd.DataFrame({"estimate": [0.0742, 0.5], "ci_low": [0.000372, 0.3], "ci_high": [0.0826, 0.7],
                       "equivalence_mde": [0.3865207017764072, 0.1], "n_opposite_direction": [0, 2]})
    text, _ = display.formatted(df)
    assert list(text.columns) == ["estimate", "CI low", "CI high", "equivalence MDE", "n opposite direction"]
    assert list(text["estimate"]) == ["7.42e-02", "5.00e-01"] and list(text["CI low"]) == ["3.72e-04", "3.00e-01"]
    text, _ = display.formatted(df.assign(ci_low=[0.0308, 0.3]))
    assert list(text["estimate"]) == ["0.074", "0.500"] and list(text["CI low"]) == ["0.031", "0.300"]
    assert list(text["equivalence MDE"]) == ["0.387", "0.100"]
    df.attrs["labels"] = {"n_opposite_direction": "universes the other way"}     # the table's own label map
    assert "universes the other way" in display.formatted(df)[0].columns
    assert all("_" not in h for h in headers(display.html_table(df)))


def test_index_becomes_columns_unless_it_is_the_default_one():
    df = pd.DataFrame({"x": [1.5, 2.5]}, index=pd.Index(["a", "b"], name="model"))
    html = display.html_table(df)
    assert headers(html) == ["model", "x"] and cells(html) == ["a", "1.50", "b", "2.50"]
    html = display.html_table(df.reset_index(drop=True))
    assert headers(html) == ["x"] and "0" not in cells(html)              # no 0…n index column
    grouped = pd.DataFrame({"m": ["a", "a", "b"], "d": ["x", "y", "x"], "v": [1.0, 2.0, 3.0]}).groupby(["m", "d"]).sum()
    assert headers(display.html_table(grouped)) == ["m", "d", "v"]


def test_a_wide_table_is_split_with_its_labels_repeated_and_keeps_every_column():
    df = pd.DataFrame({"model": ["smollm2-135m-instruct", "gemma-3-270m"] * 3, "dataset": ["en", "fr"] * 3,
                       "bias_type": ["race", "age", "sex"] * 2, "x": range(6), "y": range(6)})
    for i in range(20):
        df[f"mean_entropy_variant_{i}"] = np.arange(6) * 0.123456 * i
    html = display.html_table(df)
    assert html.count("<table") > 1 and "part 1 of" in html
    shown = [h for h in headers(html) if h not in ("model", "dataset")]
    assert sorted(shown) == sorted(display.column_label(c) for c in df.columns if c not in ("model", "dataset"))
    assert headers(html).count("model") == html.count("<table")
    how, parts = display.layout(*display.formatted(df))
    assert how == "split" and all(sum(display._widths(t)) <= display.WIDTH_CHARS for t, _ in parts)


def test_a_wide_table_of_one_row_is_transposed():
    df = pd.DataFrame({f"column_number_{i}": [i + 0.5] for i in range(15)})
    html = display.html_table(df)
    assert html.count("<table") == 1 and "transposed" in html
    assert headers(html) == ["column", "row 1"] and cells(html)[:2] == ["column number 0", "0.500"]


def test_a_long_table_scrolls_and_links_the_csv_it_was_saved_as(tmp_path, monkeypatch):
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: None)
    out = OutputDir(tmp_path / "run")
    df = pd.DataFrame({"model": ["a"] * 40, "estimate": np.linspace(0, 1, 40) / 3, "n": range(40)})
    assert out.table(df, "long") is None                     # a cell ending with it shows no PosixPath
    saved = pd.read_csv(tmp_path / "run" / "tables" / "long.csv")
    assert saved["estimate"].iloc[1] == pytest.approx(df["estimate"].iloc[1], rel=1e-15)   # every digit kept
    html = display._FORMATTER(df[["model", "estimate"]])     # a column subset of the saved table links it too
    assert '<div class="bl-scroll">' in html and 'href="tables/long.csv"' in html and "40 rows" in html
    assert len(cells(html)) == 80
    other = display._FORMATTER(pd.DataFrame({"unrelated": range(40)}))
    assert "href=" not in other and '<div class="bl-scroll">' in other


def test_output_dir_installs_the_formatter_in_ipython(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        OutputDir(tmp_path)
        data, _ = shell.display_formatter.format(pd.DataFrame({"p_value": [0.00001], "n": [3.0]}))
        assert 'class="bl-table"' in data["text/html"] and "&lt;\u00a00.001" in data["text/html"]
        assert "dataframe" not in data["text/html"]
    finally:
        InteractiveShell.clear_instance()


def test_numbers_in_object_columns_go_through_the_display_layer_too():
    df = pd.DataFrame({"estimate": pd.Series([0.38666666666666666, 123.14814814814815, None], dtype=object),
                       "mixed": pd.Series(["n/a", 0.7071067811865476, "x"], dtype=object)})
    text, numeric = display.formatted(df)
    assert list(text["estimate"]) == ["3.87e-01", "1.23e+02", "–"] and numeric["estimate"].all()   # one format
    assert list(text["mixed"]) == ["n/a", "0.707", "x"]
