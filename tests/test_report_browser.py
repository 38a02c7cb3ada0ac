"""The HTML reports in a real browser with the network off: Debian's Chromium driven by its ChromeDriver
(biaslab.report.browser). Every report rendered from the committed executed notebooks (outputs/, present in a fresh
clone), the index over them, and the report of a freshly executed smoke notebook must show every image, leave no TeX
unrendered, request nothing from outside the machine, link only to files and anchors that exist, and log no console
error. Skips, saying why, only where Chromium or ChromeDriver is missing (`make browser` installs them as root)."""

from __future__ import annotations

import shutil

import nbformat
import pytest

from biaslab import paths, report_index
from biaslab.report import browser, html

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
                    ignore=shutil.ignore_patterns("*.html", "*.pdf", "_mathjax", "screenshots", ".*"))
    reports = html.render_all(root)
    return root, reports, report_index.write(root)


def expected(report):
    """(figures, has math, findings cells) of the executed notebook a report was rendered from."""
    nb = nbformat.read(report.with_suffix(".ipynb"), as_version=4)
    figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    return figures, html.has_math(nb), len(html.findings(nb))


def test_committed_reports_and_index_display_offline(driver, committed):
    root, reports, index = committed
    assert len(reports) == len(report_index.manifests(root)) >= 5, "every committed run has its report"
    problems = []
    for page in reports:
        found = browser.check(page, driver)
        figures, math, _ = expected(page)
        if found.images != figures:
            problems.append(f"{page}: {found.images} images shown, the notebook has {figures}")
        if math and not found.math:
            problems.append(f"{page}: the notebook has math but no formula was typeset")
        problems += [f"{page.relative_to(root)}: {p}" for p in found.problems]
    found = browser.check(index, driver)
    thumbnails = sorted(root.glob("**/figures/*.png"))
    if found.images != len(thumbnails):
        problems.append(f"index: {found.images} thumbnails for {len(thumbnails)} figures")
    problems += [f"index.html: {p}" for p in found.problems]
    assert not problems, "\n".join(problems)


def test_fresh_smoke_report_displays_offline_with_findings_parameters_and_provenance(driver, smoke_run, tmp_path):
    page = smoke_run("04_agentic_entropy") / "04_agentic_entropy.html"      # the session's smoke run, with HTML
    out = smoke_run.root
    found = browser.check(page, driver)
    assert not found.problems, str(found)
    index = browser.check(out / "index.html", driver)        # the runs' front page, written beside them
    assert not index.problems and index.images == len(list(out.glob("**/figures/*.png"))) > 0, str(index)
    figures, math, n_findings = expected(page)
    assert found.images == figures > 0 and found.math > 0 and n_findings >= 5
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


BROKEN = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<p>Raw TeX left: $$x^2$$ and \\(y\\).</p>
<img src="missing.png" alt="gone">
<img src="http://example.invalid/logo.png" alt="outside">
<a href="nowhere.html">a missing file</a> <a href="#no-such-anchor">a missing anchor</a>
<a href="https://example.invalid/">another host</a> <a href="#here" id="here">fine</a>
<a href="other.html#there">another page's anchor</a> <a href="other.html#gone">another page's missing anchor</a>
<script>console.error("boom")</script>
</body></html>"""


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
                             "link outside the machine: https://example.invalid/", "console error:"):
        assert expected_problem in problems, f"{expected_problem!r} not reported in:\n{problems}"
    assert "#here" not in problems and "other.html#there" not in problems
