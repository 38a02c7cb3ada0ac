"""No output file holds a machine's absolute path or a temporary-file path: what the runner writes now (checked on a
run that provokes every kind), and what is committed under outputs/."""

import json
import re
import subprocess

import pytest

from biaslab import paths
from biaslab.run import execute
from test_runner import _toy_notebook, toy  # noqa: F401 - the toy-notebook fixture

#: an absolute path of a machine (its home, the temporary folder, a checkout), a file URL or ipykernel's cell file
MACHINE_PATH = re.compile(r"(?<![\w.~$<>-])/(?:home|root|tmp|var/folders|work|Users|private|mnt|srv|opt|scratch)/"
                          r"|file:///|ipykernel_\d+")
TEXT_SUFFIXES = (".json", ".ipynb", ".csv", ".md", ".txt", ".tsv")


def _texts_of(path) -> list[str]:
    """The text a reader sees in a file; for a notebook its sources and outputs without embedded images (base64
    data can spell anything)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return [text]
    nb = json.loads(text)
    out = [json.dumps(nb.get("metadata", {}))]
    for cell in nb.get("cells", []):
        out.append("".join(cell.get("source", "")))
        for o in cell.get("outputs", []):
            out.append("".join(o.get("text", "")) + "".join(o.get("traceback", [])))
            for mime, data in o.get("data", {}).items():
                if not mime.startswith("image/"):
                    out.append(data if isinstance(data, str) else json.dumps(data))
    return out


def machine_paths(files) -> list[str]:
    """``file: ...context...`` for every machine path in ``files``."""
    found = []
    for f in files:
        if f.suffix not in TEXT_SUFFIXES:
            continue
        for text in _texts_of(f):
            for m in MACHINE_PATH.finditer(text):
                found.append(f"{f}: ...{text[max(0, m.start() - 60):m.end() + 60]}...")
    return found


PROVOKE = """
import logging, warnings
from pathlib import Path
from biaslab import paths
from biaslab.report.outputs import OutputDir
import pandas as pd
out = OutputDir(output_dir)
out.table(pd.DataFrame({'where': [str(Path(output_dir).resolve()), str(paths.ROOT / 'data' / 'raw' / 'x.csv'),
                                  str(paths.CACHE_DIR / 'models' / 'm')]}), 'paths')
print('wrote', output_dir, 'read', paths.ROOT / 'data' / 'raw' / 'x.csv', 'cache', paths.CACHE_DIR, 'home', Path.home())
warnings.warn('a figure says nothing')                                  # located at the kernel's temporary cell file
logging.getLogger('biaslab.toy').warning('excluded 1 row of %s', paths.ROOT / 'data' / 'raw' / 'x.csv')
out.record_model({'name': 'm', 'weights_sha256': 'abc', 'source': f'local folder {paths.CACHE_DIR}/models/m'})
"""


def test_what_the_runner_writes_holds_no_machine_path(toy, monkeypatch):  # noqa: F811
    nbdir, outdir = toy
    monkeypatch.setattr(paths, "CACHE_DIR", nbdir.parent / "cache")          # a temporary folder too
    monkeypatch.setenv("BIASLAB_CACHE", str(nbdir.parent / "cache"))
    monkeypatch.setenv("BIASLAB_ROOT", str(nbdir.parent))                  # the kernel sees the same root
    _toy_notebook(nbdir / "00_toy.ipynb", PROVOKE)
    assert execute.reproduce("smoke", outputs_dir=nbdir.parent / "outputs", html=False) == 0
    run = nbdir.parent / "outputs" / "00_toy"
    files = sorted(p for p in run.rglob("*") if p.is_file())
    text = "".join("".join(_texts_of(f)) for f in files if f.suffix in TEXT_SUFFIXES)
    assert "ipykernel" not in text and "<cell>" in text                     # the warning is kept, its path is not
    assert "$BIASLAB_CACHE/models/m" in text and "data/raw/x.csv" in text
    notes = json.loads((run / "MANIFEST.json").read_text())["notes"]
    assert any("excluded 1 row of data/raw/x.csv" in n for n in notes)
    assert machine_paths(files) == []
    # the checker sees what it should
    (run / "bad.csv").write_text("x\n/tmp/ipykernel_12/34.py:1\n")
    assert len(machine_paths([run / "bad.csv"])) == 2


def _committed_outputs():
    r = subprocess.run(["git", "ls-files", "outputs"], cwd=paths.ROOT, capture_output=True, text=True)
    return [paths.ROOT / f for f in r.stdout.splitlines()]


def test_no_committed_output_holds_a_machine_path():
    files = [f for f in _committed_outputs() if f.exists()]
    assert files
    found = machine_paths(files)
    assert found == [], "\n".join(found[:20])
