"""Each notebook is a jupytext pair (``NN_name.py`` + ``NN_name.ipynb``): the two never drift, and the parameters cell
holds literal defaults only (papermill injects new values after it, so a derived value there would go stale)."""

import ast
from pathlib import Path

import nbformat
import pytest

from biaslab import paths
from biaslab.run import preflight, profiles

NOTEBOOKS = sorted(profiles.NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_ipynb_and_script_are_in_sync(name):
    script = paths.NOTEBOOKS_DIR / f"{name}.py"
    ipynb = paths.NOTEBOOKS_DIR / f"{name}.ipynb"
    assert script.exists() and ipynb.exists(), f"{name}: both {script.name} and {ipynb.name} must be committed"
    assert preflight.pair_problem(name) is None, preflight.pair_problem(name)
    assert not any(c.get("outputs") for c in nbformat.read(ipynb, as_version=4).cells), \
        f"{ipynb.name} is committed with outputs"


def _is_literal(node) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_one_parameters_cell_of_literals(name):
    nb = nbformat.read(paths.NOTEBOOKS_DIR / f"{name}.ipynb", as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", ())]
    assert len(tagged) == 1, f"{name}: {len(tagged)} cells tagged 'parameters' (need exactly one)"
    for stmt in ast.parse(tagged[0].source).body:
        assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name), \
            f"{name}: parameters cell line {stmt.lineno} is not `name = literal`"
        assert _is_literal(stmt.value), \
            f"{name}: parameter {stmt.targets[0].id} is derived ({ast.unparse(stmt.value)}); derive it after the cell"


def test_pairing_is_configured_for_jupyterlab():
    toml = (paths.NOTEBOOKS_DIR / "jupytext.toml").read_text()
    assert 'formats = "ipynb,py:percent"' in toml
    assert not list(Path(paths.NOTEBOOKS_DIR).glob("_build*")), "the notebook builders are gone: edit the pair"


def test_jupyterlab_save_updates_the_script(tmp_path):
    """What JupyterLab does on save: jupytext's contents manager (enabled in the environment) writes both files."""
    import shutil
    import sys

    from jupyter_server.services.contents.filemanager import FileContentsManager
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    assert (Path(sys.prefix) / "etc/jupyter/jupyter_server_config.d/jupytext.json").exists(), \
        "jupytext's server extension is not enabled in this environment (pip install jupytext)"
    TextFileContentsManager = build_sync_jupytext_contents_manager_class(FileContentsManager)
    name = NOTEBOOKS[-1]
    for suffix in (".ipynb", ".py"):
        shutil.copy(paths.NOTEBOOKS_DIR / f"{name}{suffix}", tmp_path)
    shutil.copy(paths.NOTEBOOKS_DIR / "jupytext.toml", tmp_path)
    cm = TextFileContentsManager(root_dir=str(tmp_path))
    model = cm.get(f"{name}.ipynb")
    model["content"].cells.append(nbformat.v4.new_markdown_cell("An edit made in JupyterLab."))
    cm.save(model, f"{name}.ipynb")
    assert "# An edit made in JupyterLab." in (tmp_path / f"{name}.py").read_text()
