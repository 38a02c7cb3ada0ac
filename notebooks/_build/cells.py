"""Cell helpers shared by the notebook generators: a build script calls md()/code() in order, then writes `cells`."""

from pathlib import Path

import nbformat as nbf

cells = []


def md(s, strip="\n"):
    cells.append(nbf.v4.new_markdown_cell(s.strip(strip)))


def code(s, tags=None, strip="\n"):
    c = nbf.v4.new_code_cell(s.strip(strip))
    if tags:
        c.metadata["tags"] = tags
    cells.append(c)


def write(filename):
    """Validate the collected cells as a clean notebook and write notebooks/<filename>."""
    nb = nbf.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = Path(__file__).resolve().parents[1] / filename
    nbf.validate(nb)
    nbf.write(nb, path)
    print(f"wrote {path}")
