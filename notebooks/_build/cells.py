"""Cell helpers shared by the notebook generators: a build script calls md()/code() in order, then writes `cells`."""

import nbformat as nbf

cells = []


def md(s, strip="\n"):
    cells.append(nbf.v4.new_markdown_cell(s.strip(strip)))


def code(s, tags=None):
    c = nbf.v4.new_code_cell(s.strip("\n"))
    if tags:
        c.metadata["tags"] = tags
    cells.append(c)
