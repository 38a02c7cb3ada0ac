"""The report's front page: ``outputs/index.html``, one static page over every executed notebook.

At the top it shows the summary a run writes as ``tables/summary.md`` (notebook 5's, across models and benchmarks).
For each ``MANIFEST.json`` under the outputs folder (staging folders skipped; a ``MANIFEST.failed.json`` beside it
linked as a failed later run) it lists the notebook (and variant), its status, profile, wall
time and git commit, links the HTML report (:mod:`biaslab.report`; the executed ``.ipynb`` where no report exists),
the manifest and every table, names the models with their weight hashes and the data files with their sha256
(folded), and shows the figures as thumbnails linking to the full PNGs. Plain HTML and a few lines of CSS; no
JavaScript. All links are relative, so the folder can be moved or served as it is.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
from pathlib import Path

from .outputs import atomic_write_text

CSS = """body{font:15px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.2em;margin:1.6em 0 .3em;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9em}.failed{color:#b00}.ok{color:#070}code{font-size:.85em}
.figs{display:flex;flex-wrap:wrap;gap:8px;margin:.6em 0}.figs a{text-align:center;font-size:.75em;color:#444}
.figs img{display:block;height:120px;border:1px solid #ccc;background:#fff}
table{border-collapse:collapse;font-size:.85em}td,th{padding:1px 8px;text-align:left}
.summary{border:1px solid #d8dee8;background:#f7f9fc;border-radius:6px;padding:.2em 1.2em .8em}
.summary li{margin:.25em 0}.tables a{margin-right:.8em;font-size:.85em;white-space:nowrap}"""

#: Table files a run writes (linked one by one from the index).
TABLE_SUFFIXES = (".csv", ".md", ".tex")


def _e(x) -> str:
    return html.escape(str(x))


def _rel(path: Path, root: Path) -> str:
    return _e(path.relative_to(root).as_posix())


def read_manifest(folder: Path) -> dict:
    """The run's ``MANIFEST.json`` (else its ``MANIFEST.failed.json``; {} where it has neither)."""
    for name in ("MANIFEST.json", "MANIFEST.failed.json"):
        p = Path(folder) / name
        if p.exists():
            try:
                return json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                return {"status": f"unreadable {name}"}
    return {}


def manifests(outputs_dir: Path) -> list[tuple[Path, dict]]:
    """(folder, manifest) for every run under ``outputs_dir`` (``<notebook>/`` or ``<notebook>/<variant>/``)."""
    runs = [f.parent for pattern in ("*/MANIFEST.json", "*/*/MANIFEST.json") for f in outputs_dir.glob(pattern)
            # not a runner's staging folder (.<name>.staging-<id>/), which is no published run
            if not any(part.startswith(".") for part in f.relative_to(outputs_dir).parts)]
    return [(folder, read_manifest(folder)) for folder in sorted(runs, key=Path.as_posix)]


def _section(folder: Path, m: dict, root: Path) -> str:
    label = folder.relative_to(root).as_posix()
    status = m.get("status", "?")
    notebook = m.get("notebook") or folder.name
    render = folder / f"{notebook}.html"
    executed = folder / f"{notebook}.ipynb"
    links = [f'<a{cls} href="{_rel(p, root)}{"/" if p.is_dir() else ""}">{label}</a>' for p, label, cls in (
        (render, "report (HTML)", ""), (executed, "executed notebook", ""), (folder / "MANIFEST.json", "MANIFEST", ""),
        # the last run failed; these outputs are the last good ones
        (folder / "MANIFEST.failed.json", "a later run failed", ' class="failed"'), (folder / "tables", "tables", ""))
        if p.exists()]
    git = m.get("git") or {}
    commit = (git.get("commit") or "?")[:10] + (" (dirty)" if git.get("dirty") else "")
    wall = m.get("wall_time_s")
    meta = (f'<span class="{"ok" if status == "ok" else "failed"}">{_e(status)}</span> · profile '
            f'{_e(m.get("profile", "?"))} · wall time {_e(f"{wall:.0f} s" if isinstance(wall, (int, float)) else "?")}'
            f' · commit <code>{_e(commit)}</code>')      # manifests carry no timestamp (reruns are identical)
    models = m.get("models") or {}
    model_rows = "".join(
        f"<tr><td>{_e(name)}</td><td>{_e((info or {}).get('source', ''))}</td>"
        f"<td><code>{_e(((info or {}).get('weights_sha256') or '')[:16])}</code></td></tr>"
        for name, info in models.items())
    data = m.get("data") or {}
    data_rows = "".join(f"<tr><td>{_e(k)}</td><td><code>{_e(str(v)[:16])}</code></td></tr>" for k, v in data.items())
    figs = "".join(f'<a href="{_rel(p, root)}"><img src="{_rel(p, root)}" alt="{_e(p.stem)}">'
                   f"{_e(p.stem)}</a>" for p in sorted((folder / "figures").glob("*.png")))
    tables = [p for p in sorted((folder / "tables").glob("*")) if p.suffix in TABLE_SUFFIXES]
    table_links = "".join(f'<a href="{_rel(p, root)}">{_e(p.name)}</a> ' for p in tables)
    error = f'<pre class="failed">{_e(m["error"])}</pre>' if m.get("error") else ""
    return (f'<h2 id="{_e(label)}">{_e(label)}</h2>\n<div class="meta">{meta}</div>\n<p>{" · ".join(links)}</p>\n'
            + error
            + (f"<table><tr><th>model</th><th>source</th><th>weights sha256</th></tr>{model_rows}</table>\n"
               if model_rows else "")
            + (f"<details><summary>{len(data)} data files (sha256)</summary><table>{data_rows}</table></details>\n"
               if data_rows else "")
            + (f'<details class="tables"><summary>{len(tables)} table files</summary>{table_links}</details>\n'
               if tables else "")
            + (f'<div class="figs">{figs}</div>\n' if figs else ""))


def summaries(runs: list[tuple[Path, dict]], root: Path) -> str:
    """The ``tables/summary.md`` of every run that writes one (notebook 5), rendered, with a link to its report."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune
    out = []
    for folder, m in runs:
        summary = folder / "tables" / "summary.md"
        if not summary.exists():
            continue
        label = folder.relative_to(root).as_posix()
        report = folder / f"{m.get('notebook') or folder.name}.html"
        link = f' (<a href="{_rel(report, root)}">report</a>)' if report.exists() else ""
        out.append(f'<div class="summary"><h2>Summary: {_e(label)}{link}</h2>\n'
                   f"{markdown2html_mistune(summary.read_text())}</div>")
    return "\n".join(out)


def build(outputs_dir: Path) -> str:
    """The HTML text of the index for ``outputs_dir``."""
    outputs_dir = Path(outputs_dir)
    runs = manifests(outputs_dir)
    toc = " · ".join(f'<a href="#{_e(f.relative_to(outputs_dir).as_posix())}">'
                     f'{_e(f.relative_to(outputs_dir).as_posix())}</a>' for f, _ in runs)
    catalogue = ('<p><a href="CATALOGUE.md">CATALOGUE.md</a>: every table and figure of the four papers and the file '
                 "that regenerates it.</p>" if (outputs_dir / "CATALOGUE.md").exists() else "")
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    body = "\n".join(_section(f, m, outputs_dir) for f, m in runs) or "<p>No executed notebook found.</p>"
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>biaslab report</title>'
            f"<style>{CSS}</style></head><body>\n<h1>biaslab — executed notebooks</h1>\n"
            f'<p class="meta">{len(runs)} run{"s" if len(runs) != 1 else ""} · index written {_e(now)}</p>\n'
            f"<p>{toc}</p>\n{catalogue}\n{summaries(runs, outputs_dir)}\n{body}\n"
            "</body></html>\n")


def write(outputs_dir: Path) -> Path:
    """Write ``outputs_dir/index.html`` and return its path."""
    path = Path(outputs_dir) / "index.html"
    atomic_write_text(path, build(outputs_dir))
    return path
