"""The reader's HTML report of an executed notebook (biaslab.report.html), on a fabricated notebook: no outside URL,
math converted to MathML in the file itself (nothing beside it), figures with their alternative text, the parameter
cells replaced by one table that says what each parameter means, findings collected at the top, code folded, a
contents list, the manifest's provenance in the footer. (What a browser makes of it:
tests/test_report_browser.py.)"""

from __future__ import annotations

import base64
import json
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from biaslab.report import front_page
from biaslab.report import html as rh
from biaslab import plan as P
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with

def _png() -> str:
    import io

    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (4, 3), "steelblue").save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


PNG = _png()
WEIGHTS = "ab" * 32
OUTSIDE = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|url\(\s*["']?(?:https?:)?//|import\s*\(\s*["'](?:https?:)?//""")


def executed_notebook(folder, math=True, manifest=True):
    folder.mkdir(parents=True, exist_ok=True)
    nb = new_notebook(cells=[
        new_markdown_cell("# 9 · A test notebook\n\nWhat it does" + (", with $\\tilde H = H / \\log k$." if math else ".")),
        new_code_cell('profile = "default"\nmax_prompts = 150  # per benchmark\n# the models, by catalogue name\n'
                      '# or path\nmodels = ["a", "b"]\n',
                      metadata={"tags": ["parameters"]}),
        new_code_cell('# Parameters\nprofile = "smoke"\nmodels = ["a", "b"]\noutput_dir = "x"\n',
                      metadata={"tags": ["injected-parameters"]}),
        new_code_cell("PLAN = plan_file.use(analysis_plan)", metadata={"tags": ["analysis_plan"]}, outputs=[
            new_output("display_data", data={"text/markdown": "**Analysis plan** v1: 1 confirmatory claim\n- `c1`: x",
                                             "text/plain": "<Markdown>"})]),
        new_markdown_cell("## First section\n\nText."),
        new_code_cell("import secret_plumbing\nshow()", outputs=[
            new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"},
                       metadata={"image/png": {"alt": "Rates. x: share"}}),
            new_output("stream", name="stderr", text="a warning\n")]),
        new_code_cell("display(Markdown(findings.one(t)))", metadata={"tags": ["findings"]}, outputs=[
            new_output("display_data", data={"text/markdown": "- **model a**: rate 0.25 [0.1, 0.4]",
                                             "text/plain": "<Markdown>"})]),
        new_markdown_cell("### A subsection"),
        new_code_cell("for s in summary: print('-', s)", metadata={"tags": ["findings"]}, outputs=[
            new_output("stream", name="stdout", text="- 2 models x 3 metrics\n")]),
    ])
    path = folder / "09_test.ipynb"
    nbformat.write(nb, path)
    if manifest:
        (folder / "MANIFEST.json").write_text(json.dumps({
            "notebook": "09_test", "profile": "smoke", "status": "ok", "wall_time_s": 12.3,
            "git": {"commit": "0123456789abcdef", "dirty": True}, "python": "3.11.7", "platform": "Linux",
            "models": {"model-a": {"source": "pkg==1 (a.gguf)", "weights_sha256": WEIGHTS, "dtype": "float32",
                                   "device": "cpu"}},
            "data": {"data/raw/x.csv": "cd" * 32}, "packages": {"pandas": "3.1.1"}, "notes": []}))
        (folder / "tables").mkdir(exist_ok=True)
        (folder / "figures").mkdir(exist_ok=True)
    return path


def test_parameter_rows_merge_defaults_and_injected_values(tmp_path):
    nb = nbformat.read(executed_notebook(tmp_path), as_version=4)
    rows = {r["name"]: r for r in rh.parameter_rows(nb)}
    assert list(rows) == ["profile", "max_prompts", "models", "output_dir"]       # defaults first, then injected-only
    assert rows["profile"]["value"] == '"smoke"' and rows["profile"]["default"] == '"default"'
    assert rows["max_prompts"]["value"] == "150" and rows["max_prompts"]["default"] is None
    assert rows["max_prompts"]["comment"] == "per benchmark" and not rows["max_prompts"]["set_by_run"]
    assert rows["models"]["default"] is None and rows["models"]["set_by_run"]   # injected, same as the default
    assert rows["models"]["comment"] == "the models, by catalogue name or path"  # the comment lines above it
    assert rows["profile"]["comment"] == ""
    assert rows["output_dir"]["value"] == '"x"' and rows["output_dir"]["default"] is None


def test_findings_are_the_tagged_cells_markdown_or_printed_text(tmp_path):
    nb = nbformat.read(executed_notebook(tmp_path), as_version=4)
    found = rh.findings(nb)
    assert [(f["section"], "markdown" in f) for f in found] == [("First section", True), ("A subsection", False)]
    assert found[0]["markdown"].startswith("- **model a**") and found[1]["text"] == "- 2 models x 3 metrics"


def test_report_is_self_contained_and_laid_out_for_a_reader(tmp_path):
    out = rh.render(executed_notebook(tmp_path))
    text = out.read_text()
    # nothing loaded from an outside host: no script, stylesheet, image, font or module URL (the inlined JupyterLab
    # CSS cites its sources in comments, which load nothing)
    assert not OUTSIDE.search(text), OUTSIDE.search(text)
    # math is MathML in the file: no script, no folder beside it, no TeX left
    assert re.search(r'<math [^>]*display="inline"[^>]*><mrow><mover><mi>H</mi><mo stretchy="false">~</mo></mover>',
                     text)
    assert "\\tilde" not in text and "MathJax" not in text and not (tmp_path / "_mathjax").exists()
    # parameters: one table, neither parameter cell's code
    assert 'id="bl-parameters"' in text and "# Parameters" not in text and "max_prompts = 150" not in text
    assert "<td><code>\"smoke\"</code></td><td><code>\"default\"</code></td>" in text
    # findings under the introduction, before the first section, each linking to its cell
    summary = text.index('id="bl-findings"')
    assert text.index("What it does") < summary < text.index('id="First-section"')
    # the analysis plan's block above the findings
    assert text.index("What it does") < text.index('id="bl-plan"') < summary
    assert "<strong>Analysis plan</strong> v1" in text[text.index('id="bl-plan"'):summary]
    assert text.count('class="bl-finding"') == 2 and "<strong>model a</strong>" in text[summary:]
    cell_ids = re.findall(r'href="#(cell-id=[^"]+)"', text)
    assert len(cell_ids) == 2 and all(f'id="{c}"' in text for c in cell_ids)
    # code folded, stderr folded, contents list of h2/h3 sections, figure embedded
    assert '<details class="bl-code"><summary>code</summary>' in text and "secret_plumbing" in text
    assert '<details class="bl-stderr">' in text
    toc = text[text.index('class="bl-toc"'):text.index("</nav>")]
    assert 'href="#First-section"' in toc and 'href="#A-subsection"' in toc and "9 · A test" not in toc
    assert f"data:image/png;base64,{PNG[:20]}" in text and 'alt="Rates. x: share"' in text
    # provenance footer from MANIFEST.json; links only to files that exist beside the report
    footer = text[text.index('id="bl-provenance"'):]
    assert WEIGHTS in footer and "cd" * 32 in footer and "0123456789abcdef" in footer and "12 s" in footer
    assert "uncommitted changes" in footer and "pkg==1 (a.gguf)" in footer
    for href in re.findall(r'href="([^"#][^"]*)"', text):
        assert (tmp_path / href).exists(), href


def test_tex_that_cannot_be_converted_is_shown_as_a_math_error(caplog):
    assert "<merror>" not in rh.markdown_html("a $\\frac{1}{2}$ and $$x^2$$ and `$not math$`")
    assert "<code>$not math$</code>" in rh.markdown_html("`$not math$`")
    bad = rh.markdown_html("broken $\\frac{1}{$ here")     # shown as an error holding its TeX, and logged
    assert '<math display="inline"><merror><mtext>\\frac{1}{</mtext></merror></math>' in bad
    assert "cannot convert" in caplog.text and "\\frac{1}{" in caplog.text


def test_no_manifest_says_so(tmp_path):
    text = rh.render(executed_notebook(tmp_path, math=False, manifest=False)).read_text()
    assert "No MANIFEST.json beside this notebook" in text and 'href="MANIFEST.json"' not in text


def test_render_all_and_the_index_link_every_report_table_and_summary(tmp_path):
    run = tmp_path / "09_test"
    executed_notebook(run)
    (run / "tables" / "summary.md").write_text("- **a** ties with **b** on every metric\n")
    (run / "tables" / "rates.csv").write_text("a,b\n1,2\n")
    assert rh.render_all(tmp_path) == [run / "09_test.html"]
    text = front_page.write(tmp_path).read_text()
    assert 'href="09_test/09_test.html"' in text and 'href="09_test/tables/rates.csv"' in text
    assert "<strong>a</strong> ties with <strong>b</strong>" in text          # the run's summary, rendered


def test_decision_interval_is_the_adjusted_one_or_none():
    from biaslab.report import decision_panel
    row = {"estimate": 0.1, "ci_low": 0.05, "ci_high": 0.15}
    assert decision_panel.interval(row) is None               # an unadjusted interval could disagree with the verdict
    row.update(ci_adj_low=0.02, ci_adj_high=0.18, ci_level=0.9875)
    assert decision_panel.interval(row) == (0.02, 0.18, "98.75 % CI")
    assert decision_panel.interval({"estimate": 1.0}) is None


def test_decision_panel_comes_from_the_plan_and_the_run_s_tables(tmp_path):
    """Notebook 4's confirmatory claims and notebook 6's robustness per metric, computed from the committed tables
    (each row checked against the verdict layer's own table)."""
    import shutil

    import pandas as pd

    from biaslab import paths
    from biaslab.report import headline
    from biaslab.report import decision_panel
    nb = "04_agentic_entropy"
    rows = decision_panel.claim_rows(paths.OUTPUTS_DIR / nb, nb, PLAN)
    claims = {c.id for c in PLAN.of(nb)}
    decided = pd.concat(headline.agentic(paths.OUTPUTS_DIR, PLAN))
    decided = decided[decided["claim"].isin(claims)]                      # the verdict layer's own rows
    assert len(rows) == len(decided) > 0
    words = [decision_panel.verdict_words(v).removesuffix(" from the null") for v in decided["verdict"]]
    assert list(rows["verdict"]) == words
    assert rows["p_adjusted"].tolist() == pytest.approx(decided["p_adjusted"].tolist(), nan_ok=True)
    panel = decision_panel.panel_html(paths.OUTPUTS_DIR / nb, nb, {})      # no plan recorded: the repository's
    # a claim's descriptive instances share one row (decision_panel._collapsed)
    assert panel.count("<tr>") == len(decision_panel._collapsed(rows)) + 1 and ("95 % CI" in panel) == (rows["interval"] == "95 % CI").any()
    rob = pd.read_csv(paths.OUTPUTS_DIR / "06_multiverse" / "tables" / "robustness.csv")
    panel = decision_panel.panel_html(paths.OUTPUTS_DIR / "06_multiverse", "06_multiverse", {})
    assert panel.count("<tr>") == len(rob) + 1
    r = rob[rob["n_sign_compared"] > 0].iloc[0]
    assert f"{int(r.n_same_sign)} of {int(r.n_sign_compared)} keep the sign" in panel
    if (rob["n_sign_compared"] == 0).any():                 # no universe whose sign could be compared
        assert "not compared" in panel
    # notebook 1's report shows its own benchmark's claims only
    bbq = decision_panel.claim_rows(paths.OUTPUTS_DIR / "01_multifactor" / "bbq", "01_multifactor", PLAN)
    assert len(bbq) and all(w.endswith(", bbq") for w in bbq["who"])
    # a run without the tables says so rather than failing
    empty = tmp_path / "02_calm"
    (empty / "tables").mkdir(parents=True)
    assert "not available" in decision_panel.panel_html(empty, "02_calm", {})


def test_numbers_in_tables_never_break_and_float_parameters_are_rounded():
    cells = rh.nobreak_cells("<td>1.61e-2*</td><td>68.89 %</td><td>Disability 12</td><td>pkg==1</td>")
    assert '<span class="bl-nb">1.61e-2*</span>' in cells and '<span class="bl-nb">68.89 %</span>' in cells
    assert "Disability 12" in cells and "pkg==1" in cells
    assert rh._param("0.7071067811865476") == '<code title="0.7071067811865476">0.707</code>'
    assert rh._param("200") == "<code>200</code>"
