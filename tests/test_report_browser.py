"""The HTML reports in a real browser with the network off: Debian's Chromium driven by its ChromeDriver
(biaslab.report.browser). Every report rendered from the committed executed notebooks (outputs/, present in a fresh
clone), the index over them, and the report of a freshly executed smoke notebook must show every image with its
alternative text and every figure the run saved (the saved file itself), leave no TeX unrendered, show table numbers
rounded (no DataFrame as pandas' raw HTML), fit every table in the A4 print view (718 px), show its equations when
copied alone into an empty folder, request nothing from outside the machine, link only to files and anchors that
exist, log no console error, end the decision panel within the first 1280 × 800 screen, break no word or number of
a table across lines (text boxes measured), keep legends off data and markers inside their axes (the figure check's
counts on each image) and give every figure alternative text with a number from its data. Skips, saying why, only where Chromium or ChromeDriver is missing (`make browser`
installs them as root)."""

from __future__ import annotations

import base64
import re
import shutil

import nbformat
import pytest

from biaslab import paths
from biaslab.report import front_page
from biaslab.report import browser, html
import oracles
from helpers import print_overflow

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def driver():
    try:
        browser.find()
    except FileNotFoundError as exc:
        pytest.skip(f"no browser for the report test: {exc}")
    with browser.chromium() as d:
        yield d


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """The committed runs under outputs/, copied without any render, rendered there, with their index."""
    root = tmp_path_factory.mktemp("outputs")
    shutil.copytree(paths.OUTPUTS_DIR, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.html", "*.pdf", "screenshots", ".*"))
    reports = html.render_all(root)
    return root, reports, front_page.write(root)


def expected(report):
    """(figures, has math, findings cells) of the executed notebook a report was rendered from."""
    nb = nbformat.read(report.with_suffix(".ipynb"), as_version=4)
    figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    return figures, oracles.has_math(nb), len(html.findings(nb))


def figures_not_shown(page) -> list[str]:
    """The figures its run saved (``figures/*.png`` beside the report) that the report does not show as saved."""
    shown = {base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page.read_text())}
    return [p.name for p in sorted((page.parent / "figures").glob("*.png")) if p.read_bytes() not in shown]


def reader_problems(page, driver, tmp) -> list[str]:
    """Everything a reader would miss in ``page``: :func:`browser.check`, figures saved but not shown, tables wider
    than an A4 page's column, and what the report shows when copied alone (no folder beside it)."""
    found = browser.check(page, driver)
    figures, math, _ = expected(page)
    problems = list(found.problems)
    # the decision first: the panel ends within the first screen at 1280 px; every figure states a number
    if found.decision_bottom is None:
        problems.append("no decision panel")
    elif found.width != browser.FIRST_SCREEN[0] or found.decision_bottom > browser.FIRST_SCREEN[1]:
        problems.append(f"decision panel ends at {found.decision_bottom:.0f} px at {found.width} px width "
                        f"(first screen: {browser.FIRST_SCREEN})")
    problems += [f"figure alt text without a number from its data: {a[:80]!r}" for a in found.alts
                 if not re.search(r"\d", a)]
    if found.images != figures:
        problems.append(f"{found.images} images shown, the notebook has {figures}")
    if math and not found.math:
        problems.append("the notebook has math but the report shows no formula")
    problems += [f"saved figure not shown: {name}" for name in figures_not_shown(page)]
    problems += [f"table wider than the A4 print column: {t}" for t in print_overflow(page, driver)]
    alone = tmp / page.name
    alone.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(page, alone)                 # a report passed on alone: the tables/ and figures/ links break, nothing else
    copied = browser.check(alone, driver)
    problems += [f"copied alone: {p}" for p in copied.problems if not p.startswith("link to a missing file")]
    if copied.math != found.math:
        problems.append(f"copied alone: {copied.math} formulas shown, {found.math} beside its run")
    return problems


def test_committed_reports_and_index_display_offline(driver, committed, tmp_path):
    root, reports, index = committed
    assert len(reports) == len(front_page.manifests(root)) >= 5, "every committed run has its report"
    problems = []
    for i, page in enumerate(reports):
        problems += [f"{page.relative_to(root)}: {p}" for p in reader_problems(page, driver, tmp_path / str(i))]
    found = browser.check(index, driver)
    thumbnails = sorted(root.glob("**/figures/*.png"))
    if found.images != len(thumbnails):
        problems.append(f"index: {found.images} thumbnails for {len(thumbnails)} figures")
    problems += [f"index.html: {p}" for p in found.problems]
    assert not problems, "\n".join(problems)


def test_fresh_smoke_report_displays_offline_with_findings_parameters_and_provenance(driver, smoke_run, tmp_path):
    page = smoke_run("04_agentic_entropy") / "04_agentic_entropy.html"      # the session's smoke run, with HTML
    out = smoke_run.root
    problems = reader_problems(page, driver, tmp_path / "alone")
    assert not problems, "\n".join(problems)
    found = browser.check(page, driver)
    assert len(found.numbers) > 50 and sum("." in n for n in found.numbers) > 20     # tables shown, rounded
    assert len(list((page.parent / "figures").glob("*.png"))) >= 4
    index = browser.check(out / "index.html", driver)        # the runs' front page, written beside them
    assert not index.problems and index.images == len(list(out.glob("**/figures/*.png"))) > 0, str(index)
    figures, math, n_findings = expected(page)
    assert found.images == figures > 0 and found.math > 0 and n_findings >= 5
    assert "tables/" in page.read_text() and "full precision" in page.read_text()   # a long table links its CSV
    text = page.read_text()
    assert text.count('class="bl-finding"') == n_findings           # the tagged cells' findings, at the top
    assert "# Parameters" not in text and 'id="bl-parameters"' in text
    manifest = html.read_manifest(page.parent)
    assert all(m["weights_sha256"] in text for m in manifest["models"].values())
    # the same browser prints it and photographs it
    pdf = browser.pdf(page, tmp_path / "report.pdf", driver)
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 50_000
    png = browser.screenshot(page, tmp_path / "shot.png", driver, width=800, height=600, at="The metric")
    from PIL import Image
    with Image.open(png) as im:
        assert im.size == (800, 600)


def _widest_rows(df, first: int = 20):
    """The rows that set a table's width: its first ``first`` and, per column, the one with the longest cell."""
    if df.empty:
        return df
    widest = {int(df[c].astype(str).str.len().to_numpy().argmax()) for c in df.columns}
    return df.iloc[sorted(set(range(min(first, len(df)))) | widest)]


def test_every_committed_table_shown_by_the_display_layer_fits_a4_with_rounded_numbers(driver, tmp_path):
    """Each CSV under outputs/*/tables, shown as a notebook shows a DataFrame (biaslab.report.display), in one report:
    every number rounded, nothing wider than the A4 print column, no index column."""
    import pandas as pd
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from biaslab.report import display

    cells = [new_markdown_cell("# Every committed table")]
    csvs = sorted(paths.OUTPUTS_DIR.glob("**/tables/*.csv"))
    assert len(csvs) > 50
    for csv in csvs:
        try:
            df = _widest_rows(pd.read_csv(csv))      # a long table scrolls: its width is the point
        except pd.errors.EmptyDataError:              # a run that found nothing writes an empty table
            df = pd.DataFrame()
        cells.append(new_code_cell(f"display(t)  # {csv.relative_to(paths.OUTPUTS_DIR)}", outputs=[new_output(
            "display_data", data={"text/html": display.html_table(df), "text/plain": "<DataFrame>"})]))
    page = tmp_path / "tables.ipynb"
    nbformat.write(new_notebook(cells=cells), page)
    page = html.render(page)
    found = browser.check(page, driver)
    assert not found.problems, str(found)
    assert len(found.numbers) > 1000
    overflow = print_overflow(page, driver)
    assert not overflow, "\n".join(overflow)


BROKEN = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<p>Raw TeX left: $$x^2$$ and \\(y\\).</p>
<img src="missing.png" alt="gone">
<img src="http://example.invalid/logo.png" alt="outside">
<a href="nowhere.html">a missing file</a> <a href="#no-such-anchor">a missing anchor</a>
<a href="https://example.invalid/">another host</a> <a href="#here" id="here">fine</a>
<a href="other.html#there">another page's anchor</a> <a href="other.html#gone">another page's missing anchor</a>
<table class="dataframe"><tr><td>0.000000</td></tr></table>
<table class="bl-table"><tr><td class="bl-num">6.000000e-04</td><td class="bl-num">0.123</td></tr></table>
<math><merror><mtext>\\frac{1}{</mtext></merror></math>
<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==">
<table><tr><td style="white-space: nowrap">{WIDE}</td></tr></table>
<table><tr><td style="width: 30px; overflow-wrap: anywhere">1.61e-2* Disability</td></tr></table>
<img alt="a figure" data-bl-legend-over-data="3" data-bl-clipped="2" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==">
<script>console.error("boom")</script>
</body></html>""".replace("{WIDE}", "wide " * 200)


def test_the_check_finds_what_a_reader_would_miss(driver, tmp_path):
    """Each kind of problem on a broken page is reported (a check that finds nothing is no check)."""
    page = tmp_path / "broken.html"
    page.write_text(BROKEN)
    (tmp_path / "other.html").write_text('<!doctype html><html><body><h2 id="there">there</h2></body></html>')
    problems = "\n".join(browser.check(page, driver).problems)
    for expected_problem in ("image did not load: missing.png", "image did not load: http://example.invalid",
                             "unrendered TeX '$$'", "unrendered TeX '\\\\('",
                             "request outside the machine: http://example.invalid/logo.png",
                             "failed to load: file://", "link to a missing file: nowhere.html",
                             "link to a missing anchor: #no-such-anchor",
                             "link to a missing anchor: other.html#gone",
                             "DataFrame(s) shown as pandas' raw HTML", "more digits than a reader can use: '6.000000e-04'",
                             "math that was not converted", "image without alternative text: data:image/png",
                             "link outside the machine: https://example.invalid/", "console error:",
                             "broken across lines in a table: '1.61e-2*'",
                             "broken across lines in a table: 'Disability'",
                             "legend over 3 data point(s) in the figure: a figure",
                             "2 marker(s) clipped at the axes' edge in the figure: a figure"):
        assert expected_problem in problems, f"{expected_problem!r} not reported in:\n{problems}"
    assert "#here" not in problems and "other.html#there" not in problems and "'0.123'" not in problems
    assert "'wide'" not in problems                                   # a word on one line is not broken
    overflow = print_overflow(page, driver)
    assert len(overflow) == 1 and "px wide" in overflow[0], overflow
