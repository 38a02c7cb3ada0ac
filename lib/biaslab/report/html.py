"""An executed notebook as a reader's HTML report that opens offline (docs/reports.md).

:func:`render` exports ``<folder>/<notebook>.ipynb`` with nbconvert's HTML exporter and the template
``templates/biaslab`` (JupyterLab's ``lab`` template with every outside request removed) into ``<notebook>.html``:
figures and markdown images embedded as data URIs; TeX converted to MathML when the report is written
(``latex2mathml``: no script; a formula it cannot convert is shown as a MathML error holding its TeX, and logged);
the ``parameters`` and ``injected-parameters`` cells replaced by one table of the run's parameters (value, default
where changed, and the comment that explains it); code and stderr folded; the findings (cells tagged
:data:`FINDINGS_TAG`) collected under the introduction, linking to their place; a table of contents; the decision
panel (:mod:`biaslab.report.decision_panel`) on the first screen; where the run's files are when the report is copied
alone; and a provenance footer from the ``MANIFEST.json`` beside the notebook.
"""

from __future__ import annotations

import ast
import base64
import html
import logging
import os
import re
from pathlib import Path

from . import display
from .outputs import atomic_write_text
from . import decision_panel
from .front_page import _e, manifests, read_manifest
from .decision_panel import _root_and_variant as decision_root

TEMPLATES = Path(__file__).parent / "templates"
#: Cell tag of the cells whose markdown output states the run's computed findings (collected at the top).
FINDINGS_TAG = "findings"
#: Cell tag of the cell that displays the analysis plan's block (shown above the findings).
PLAN_TAG = "analysis_plan"
#: Cells shown as the table of parameters instead of as code.
PARAMETER_TAGS = ("parameters", "injected-parameters")

CSS = Path(__file__).with_name("report.css")
# nbconvert warns for every figure without alternative text (a notebook's PNG outputs have none) and fills in
# "No description has been provided for this image"; the warning says nothing about a run.
_QUIET = logging.getLogger("biaslab.report.nbconvert")
_QUIET.setLevel(logging.ERROR)
_LOG = logging.getLogger(__name__)


def mathml(tex: str, display: str = "inline") -> str:
    """TeX as MathML (``display`` "inline" or "block"); a formula that cannot be converted becomes a MathML error
    showing its TeX, and a warning."""
    from latex2mathml.converter import convert
    try:
        return convert(tex.strip(), display=display)
    except Exception as exc:  # noqa: BLE001 - latex2mathml raises many kinds; the report must still be written
        _LOG.warning("TeX that latex2mathml cannot convert (%s: %s), shown as an error in the report: %s",
                     type(exc).__name__, exc, tex)
        return (f'<math display="{display}"><merror><mtext>{html.escape(tex)}</mtext></merror></math>')


def _mathml_renderer():
    from nbconvert.filters.markdown_mistune import IPythonRenderer

    class MathMLRenderer(IPythonRenderer):
        """nbconvert's markdown renderer with its math (kept as TeX for MathJax) converted to MathML."""

        def block_math(self, body: str) -> str:
            return mathml(body, "block")

        def inline_math(self, body: str) -> str:
            return mathml(body, "inline")

        def latex_environment(self, name: str, body: str) -> str:
            return mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", "block")

    return MathMLRenderer


def markdown_html(source: str, **renderer_options) -> str:
    """Markdown as HTML with its math as MathML (what the report does to every markdown cell and output)."""
    from nbconvert.filters.markdown_mistune import MarkdownWithMath
    return MarkdownWithMath(renderer=_mathml_renderer()(escape=False, **renderer_options)).render(source)


def _text(x) -> str:
    """A notebook's text field (a cell's source, an output's text), stored as one string or a list of lines."""
    return x if isinstance(x, str) else "".join(x)


def _markdown(cell) -> list[str]:
    """The markdown a code cell displays, one text per output."""
    return [_text(o["data"]["text/markdown"]) for o in cell.get("outputs", []) if "text/markdown" in o.get("data", {})]


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def assignments(source: str) -> dict[str, tuple[str, str]]:
    """``name -> (value as written, what it means)`` for each top-level ``name = value`` of a parameters cell: the
    comment at the end of its line, else the comment lines just above it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    lines = source.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if not isinstance(target, ast.Name) or node.value is None:
                continue
            rest = lines[node.end_lineno - 1].encode()[node.end_col_offset:].decode(errors="replace")
            comment = rest.split("#", 1)[1].strip() if "#" in rest else ""
            above, i = [], node.lineno - 2
            while not comment and i >= 0 and lines[i].lstrip().startswith("#"):
                above.insert(0, lines[i].lstrip()[1:].strip())
                i -= 1
            comment = comment or " ".join(above)
            out[target.id] = (ast.get_source_segment(source, node.value) or "", comment)
    return out


def parameter_rows(nb) -> list[dict]:
    """The run's parameters: the notebook's defaults, overridden by papermill's injected values."""
    defaults, injected = {}, {}
    for cell in nb.cells:
        tags = _tags(cell)
        if cell.cell_type == "code" and "injected-parameters" in tags:
            injected.update(assignments(_text(cell.source)))
        elif cell.cell_type == "code" and "parameters" in tags:
            defaults.update(assignments(_text(cell.source)))
    rows = []
    for name in [*defaults, *(n for n in injected if n not in defaults)]:
        default, comment = defaults.get(name, ("", ""))
        value = injected[name][0] if name in injected else default
        rows.append({"name": name, "value": value, "comment": comment,
                     "default": default if name in defaults and value != default else None,
                     "set_by_run": name in injected})
    return rows


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def findings(nb) -> list[dict]:
    """``[{cell, section, markdown | text}]``: what each cell tagged ``findings`` displays, with the heading of the
    section it sits in. A cell's markdown outputs are its findings; a cell that displays none gives its printed text."""
    found, section = [], ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heads = _HEADING.findall(_text(cell.source))
            if heads:
                section = heads[-1][1]
            continue
        if cell.cell_type != "code" or FINDINGS_TAG not in _tags(cell):
            continue
        md = _markdown(cell)
        printed = [_text(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and o.get("name") == "stdout"]
        if md:
            found.append({"cell": cell.get("id"), "section": section, "markdown": "\n\n".join(md)})
        elif any(t.strip() for t in printed):
            found.append({"cell": cell.get("id"), "section": section, "text": "".join(printed).strip()})
    return found


def _link(target: Path, base: Path, label: str) -> str:
    """A relative link to ``target`` when it exists, else nothing."""
    if not target.exists():
        return ""
    rel = Path(os.path.relpath(target, base)).as_posix() + ("/" if target.is_dir() else "")
    return f'<a href="{_e(rel)}">{_e(label)}</a>'


def _after(links: list[str]) -> str:
    """The links that exist, each after a " · "."""
    return "".join(f" · {x}" for x in links if x)


def _run_line(m: dict) -> str:
    git = m.get("git") or {}
    commit = (git.get("commit") or "?")[:10] + (" (uncommitted changes)" if git.get("dirty") else "")
    wall = m.get("wall_time_s")
    wall = f"{wall:.0f} s" if isinstance(wall, (int, float)) else "?"
    status = m.get("status", "?")
    return (f'<span class="bl-status bl-{"ok" if status == "ok" else "failed"}">{_e(status)}</span> · profile '
            f'<b>{_e(m.get("profile", "?"))}</b> · wall time {_e(wall)} · commit <code>{_e(commit)}</code>')


def summary_html(nb, manifest: dict, markdown2html, links: list[str]) -> str:
    """The panel under the notebook's introduction: run line, the analysis plan's block, findings, parameters and
    the code toggle."""
    parts = ['<section class="bl-summary" id="bl-summary">']
    run = _run_line(manifest) if manifest else "no MANIFEST.json beside this notebook"
    parts.append(f'<p class="bl-run">{run}{_after(links)}'
                 ' · <button class="bl-code-toggle" type="button" onclick="blToggleCode(this)">show code</button></p>')
    plan = [md for c in nb.cells if c.cell_type == "code" and PLAN_TAG in _tags(c) for md in _markdown(c)]
    if plan:
        parts.append('<h2 id="bl-plan">Analysis plan</h2><div class="bl-plan">' + markdown2html(plan[0]) + "</div>")
    found = findings(nb)
    if found:
        parts.append('<h2 id="bl-findings">Findings</h2>'
                     '<p class="bl-note">Computed from this run\'s tables; each links to where the notebook shows it.'
                     '</p>')
        for f in found:
            body = markdown2html(f["markdown"]) if "markdown" in f else f'<pre>{_e(f["text"])}</pre>'
            where = (f'<a class="bl-where" href="#cell-id={_e(f["cell"])}">{_e(f["section"] or "in the notebook")}'
                     " ↓</a>") if f["cell"] else _e(f["section"])
            parts.append(f'<div class="bl-finding">{where}{body}</div>')
    rows = parameter_rows(nb)
    if rows:
        notes = any(r["comment"] for r in rows)
        trs = "".join(
            f'<tr class="{"bl-changed" if r["default"] is not None else ""}"><td><code>{_e(r["name"])}</code></td>'
            f'<td>{_param(r["value"])}</td>'
            f'<td>{_param(r["default"]) if r["default"] is not None else ""}</td>'
            + (f'<td>{_e(r["comment"])}</td>' if notes else "") + "</tr>" for r in rows)
        parts.append('<h2 id="bl-parameters">Parameters of this run</h2>'
                     '<p class="bl-note">The notebook\'s <code>parameters</code> cell with the values this run '
                     'was given (papermill\'s injected cell); where the run changed a default, the default is shown.'
                     '</p><table class="bl-params"><thead><tr><th>parameter</th><th>value</th>'
                     f'<th>notebook default</th>{"<th>note</th>" if notes else ""}</tr></thead><tbody>{trs}</tbody>'
                     "</table>")
    parts.append("</section>")
    return "\n".join(parts)


def _param(value: str) -> str:
    """A parameter's value as written, a float literal rounded like every number of the report (3 significant
    digits, the literal in its title)."""
    try:
        x = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        x = None
    if isinstance(x, float):
        shown = display.significant(x, 3)
        if shown != value:
            return f'<code title="{_e(value)}">{_e(shown)}</code>'
    return f"<code>{_e(value)}</code>"


_CELL = re.compile(r"(<t[dh]\b[^>]*>)(.*?)(</t[dh]>)", re.S)
# a word a browser could break inside: a number with a sign, an exponent or a " %", or a word with a hyphen, dash or
# slash ("smollm2-135m-instruct", "1.61e-2*", "68.89 %")
_UNBROKEN = re.compile(r"(?<![^\s(\[])((?=[^\s<]*?[-−+%–/]|[^\s<]*[ \u00a0]%)[^\s<]+?(?:[ \u00a0]%)?)"
                       r"(?=[\s,;:)\]]*(?:\s|$))")


def nobreak_cells(body: str) -> str:
    """Every word of a table cell (outside ``<code>``) that a browser could break inside wrapped in
    ``<span class="bl-nb">`` (``white-space: nowrap``): cells wrap at spaces only."""
    def cell(m) -> str:
        out, code = [], False
        for seg in re.split(r"(<[^>]+>)", m.group(2)):
            if seg.startswith("<"):
                code = seg.startswith("<code") or (code and seg != "</code>")
            elif not code:                   # code (a parameter's value, a path) wraps as report.css says
                seg = _UNBROKEN.sub(r'<span class="bl-nb">\1</span>', seg)
            out.append(seg)
        return m.group(1) + "".join(out) + m.group(3)
    # the parameters table and the provenance footer (paths, hashes, code) wrap anywhere, as report.css says
    parts = re.split(r'(<table class="bl-params">.*?</table>|<footer class="bl-footer">.*)', body, flags=re.S)
    return "".join(p if p.startswith(('<table class="bl-params">', '<footer class="bl-footer">'))
                   else _CELL.sub(cell, p) for p in parts)


def _model_source(info: dict) -> str:
    if info.get("backend") == "served":
        return f"served at {', '.join(info.get('base_urls') or [])}"
    return info.get("source") or info.get("original") or ""


def footer_html(manifest: dict, links: list[str]) -> str:
    """Provenance from MANIFEST.json: run, models with weight hashes, data with sha256, environment."""
    if not manifest:
        return ('<footer class="bl-footer"><h2 id="bl-provenance">Provenance</h2>'
                "<p>No MANIFEST.json beside this notebook: its provenance is unknown.</p></footer>")
    parts = ['<footer class="bl-footer"><h2 id="bl-provenance">Provenance</h2>',
             f'<p>{_run_line(manifest)}{_after(links)}</p>']
    git = manifest.get("git") or {}
    if git.get("commit"):
        parts.append(f'<p>git commit <code>{_e(git["commit"])}</code>'
                     f'{" with uncommitted changes" if git.get("dirty") else ""} · Python {_e(manifest.get("python", "?"))}'
                     f' · {_e(manifest.get("platform", "?"))}</p>')
    models = manifest.get("models") or {}
    if models:
        rows = "".join(
            f"<tr><td>{_e(name)}</td><td>{_e(_model_source(info))}</td>"
            f"<td>{_e(', '.join(str(x) for x in info.get('dtypes') or [info.get('dtype', '')]))} "
            f"{_e(info.get('device', ''))}</td>"
            f"<td><code>{_e(info.get('weights_sha256') or info.get('served_model_id') or info.get('model') or '?')}"
            "</code></td></tr>"
            for name, info in ((n, i or {}) for n, i in models.items()))
        parts.append("<h3>Models</h3><table><thead><tr><th>model</th><th>source</th><th>precision</th>"
                     f"<th>weights sha256 (served: the server's model id)</th></tr></thead><tbody>{rows}</tbody>"
                     "</table>")
    data = manifest.get("data") or {}
    if data:
        rows = "".join(f"<tr><td>{_e(k)}</td><td><code>{_e(v)}</code></td></tr>" for k, v in data.items())
        parts.append(f"<h3>Data</h3><details><summary>{len(data)} file{'s' if len(data) != 1 else ''} "
                     f"(sha256)</summary><table><tbody>{rows}</tbody></table></details>")
    notes = manifest.get("notes") or []
    if notes:
        parts.append("<h3>Notes</h3><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    packages = manifest.get("packages") or {}
    if packages:
        parts.append("<h3>Packages</h3><p class=\"bl-packages\">"
                     + " · ".join(f"{_e(k)} {_e(v)}" for k, v in packages.items()) + "</p>")
    if manifest.get("error"):
        parts.append(f'<h3>Error</h3><pre class="bl-failed">{_e(manifest["error"])}</pre>')
    parts.append("</footer>")
    return "\n".join(parts)


_H = re.compile(r'<h([1-3]) id="([^"]+)">(.*?)(?:<a class="anchor-link"[^>]*>[^<]*</a>)?</h\1>', re.S)


def table_of_contents(body: str) -> str:
    """A nested list of the report's h2/h3 headings (the h1 is the title), linking to their ids."""
    items = []
    for level, ident, text in _H.findall(body):
        if level == "1":
            continue
        label = re.sub(r"<[^>]+>", "", text).strip()
        items.append(f'<li class="bl-toc-{level}"><a href="#{ident}">{label}</a></li>')
    return "<ul>" + "".join(items) + "</ul>"


def print_resolution(nb, folder: Path) -> int:
    """Swap each figure the notebook embeds (a copy at screen resolution, ``OutputDir.figure``) for the file it saved
    at twice that (named by the image's ``bl_file`` metadata), shown at the same CSS width: sharp in print. Returns
    how many were swapped; a figure whose file is gone keeps its copy."""
    swapped = 0
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("image/png", {}).get("bl_file")
            if name and "image/png" in o.get("data", {}) and (saved := folder / name).is_file():
                o["data"]["image/png"] = base64.b64encode(saved.read_bytes()).decode()
                swapped += 1
    return swapped


def render(executed: Path, out: Path | None = None) -> Path:
    """Write the reader's report of the executed notebook ``executed`` to ``out`` (default: beside it, ``.html``),
    with the provenance of the ``MANIFEST.json`` beside the notebook, and return its path."""
    import nbformat
    from jinja2 import pass_context
    from nbconvert import HTMLExporter

    class Exporter(HTMLExporter):
        @pass_context
        def markdown2html(self, context, source):       # nbconvert's filter, with math as MathML
            cell = context.get("cell", {})
            return markdown_html(source, attachments=cell.get("attachments", {}), embed_images=self.embed_images,
                                 path=context.get("resources", {}).get("metadata", {}).get("path", ""),
                                 anchor_link_text=self.anchor_link_text, exclude_anchor_links=self.exclude_anchor_links,
                                 **self.lexer_options)

    executed = Path(executed).resolve()
    out = Path(out).resolve() if out else executed.with_suffix(".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(executed, as_version=4)
    print_resolution(nb, executed.parent)
    manifest = read_manifest(executed.parent)
    links = [_link(executed, out.parent, "executed notebook")] + [
        _link(executed.parent / name, out.parent, name) for name in ("tables", "figures", "MANIFEST.json")]
    intro = next((c.get("id") for c in nb.cells if c.cell_type == "markdown"), None)
    notebook = manifest.get("notebook") or executed.stem
    root, _ = decision_root(executed.parent, notebook)
    where = executed.parent.relative_to(root).as_posix() if executed.parent.is_relative_to(root) else executed.parent.name
    links.append(f'<span class="bl-alone">this file is standalone (figures and formulas embedded); the links resolve in '
                 f'the run folder <code>outputs/{_e(where)}/</code></span>')
    resources = {
        "metadata": {"name": executed.stem, "path": str(executed.parent)},
        "biaslab": {
            "css": CSS.read_text(),
            "hidden_tags": list(PARAMETER_TAGS),
            "intro_cell": intro,
            "summary_html": summary_html(nb, manifest, markdown_html, links),
            "footer_html": footer_html(manifest, links),
        },
    }
    exporter = Exporter(template_name="biaslab", extra_template_basedirs=[str(TEMPLATES)],
                        exclude_input_prompt=True, exclude_output_prompt=True, embed_images=True, log=_QUIET)
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    if intro is None:     # no introduction cell to put the panel under: put it first
        body = body.replace("<main>", "<main>\n" + resources["biaslab"]["summary_html"], 1)
    panel = decision_panel.panel_html(executed.parent, notebook, manifest)
    body, n = re.subn(r"(<main>.*?</h1>)", lambda m: m.group(1) + "\n" + panel, body, count=1, flags=re.S)
    if not n:
        body = body.replace("<main>", "<main>\n" + panel, 1)
    body = nobreak_cells(body.replace("<!--bl-toc-->", table_of_contents(body), 1))
    atomic_write_text(out, body)
    return out


def render_all(root: Path) -> list[Path]:
    """Render the report of every run under ``root`` (each ``MANIFEST.json`` beside an executed notebook) and return
    their paths; a run whose notebook is missing is skipped."""
    done = []
    for folder, m in manifests(Path(root)):
        executed = folder / f"{m.get('notebook') or folder.name}.ipynb"
        if executed.exists():
            done.append(render(executed))
    return done
