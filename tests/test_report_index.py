"""outputs/index.html: one static page linking every executed notebook, its manifest and its figures."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from biaslab.report import front_page

PNG = bytes.fromhex("89504e470d0a1a0a")  # a PNG signature is enough for a link target


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.imgs, self.scripts = [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
        if tag == "img":
            self.imgs.append(a["src"])
        if tag == "script":
            self.scripts += 1


def fake_run(root, label, status="ok", html=True, figures=("a", "b"), models=None):
    folder = root / label
    (folder / "figures").mkdir(parents=True)
    (folder / "tables").mkdir()
    nb = label.split("/")[0]
    (folder / f"{nb}.ipynb").write_text("{}")
    if html:
        (folder / f"{nb}.html").write_text("<html></html>")
    for f in figures:
        (folder / "figures" / f"{f}.png").write_bytes(PNG)
    manifest = {"notebook": nb, "variant": label.split("/")[1] if "/" in label else None, "profile": "smoke",
                "status": status, "wall_time_s": 12.3, "git": {"commit": "abcdef1234567890", "dirty": False},
                "models": models or {},
                "data": {"biaslab/data/x.csv": "f" * 64}}
    if status != "ok":
        manifest["error"] = "PapermillExecutionError: <boom>"
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    return folder


def test_index_links_every_run_manifest_and_figure(tmp_path):
    fake_run(tmp_path, "01_multifactor/ssqa", models={"m1": {"source": "pkg==1", "weights_sha256": "1" * 64}})
    fake_run(tmp_path, "01_multifactor/bbq", html=False)
    fake_run(tmp_path, "04_agentic_entropy", status="failed", figures=())
    (tmp_path / "CATALOGUE.md").write_text("# catalogue")
    path = front_page.write(tmp_path)
    assert path == tmp_path / "index.html"
    text = path.read_text()
    p = Links()
    p.feed(text)
    assert p.scripts == 0
    # every link and thumbnail points at a file that exists (relative to the index), anchors aside
    for href in p.hrefs + p.imgs:
        if not href.startswith("#"):
            assert (tmp_path / href).exists(), href
    assert "01_multifactor/ssqa/01_multifactor.html" in p.hrefs                 # the HTML render when present
    assert "01_multifactor/bbq/01_multifactor.ipynb" in p.hrefs                 # the notebook otherwise
    assert {f"{r}/MANIFEST.json" for r in ("01_multifactor/ssqa", "01_multifactor/bbq", "04_agentic_entropy")} \
        <= set(p.hrefs)
    assert sorted(p.imgs) == sorted(f"01_multifactor/{v}/figures/{f}.png" for v in ("ssqa", "bbq") for f in "ab")
    assert "CATALOGUE.md" in p.hrefs
    assert "m1" in text and "1" * 16 in text and "12 s" in text and "abcdef1234" in text
    assert re.search(r'class="failed">failed', text) and "&lt;boom&gt;" in text      # escaped error
    assert "3 runs" in text
    assert " ?" not in text        # every field shown is one a manifest has (no placeholder for a missing one)


def test_index_of_empty_folder(tmp_path):
    assert "No executed notebook found" in front_page.build(tmp_path)


def test_index_skips_staging_folders_and_links_a_failed_later_run(tmp_path):
    good = fake_run(tmp_path, "02_calm")
    (good / "MANIFEST.failed.json").write_text("{}")
    fake_run(tmp_path, "02_calm/.02_calm.staging-123")
    text = front_page.build(tmp_path)
    assert "1 run ·" in text and "staging" not in text
    assert 'href="02_calm/MANIFEST.failed.json"' in text
