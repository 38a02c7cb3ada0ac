"""Warnings that change what a run means are MANIFEST notes and reach the terminal (before, they appeared only
inside the executed notebook): a score cache recovered, a file hashed again because it changed, responses retried,
labels outside the top-k. Each is provoked through its real code path where one runs in a test."""

import http.server
import json
import logging
import threading

import pytest

from biaslab.files import hashing
from biaslab import paths
from biaslab.run import execute
from biaslab.report.outputs import OutputDir
from biaslab.scoring.backends.client import ClientConfig, Request, run_requests
from biaslab.scoring.cache import ScoreCache
from test_runner import _toy_notebook, toy  # noqa: F401 - the toy-notebook fixture
from helpers import forget_file_hashes


@pytest.fixture
def out(tmp_path):
    o = OutputDir(tmp_path / "run")
    yield o
    logging.getLogger("biaslab").removeHandler(
        next(h for h in logging.getLogger("biaslab").handlers if getattr(h, "out", None) is o))


def _notes(o):
    return json.loads((o.path / "provenance.json").read_text())["notes"]


def test_a_recovered_score_cache_is_a_note(out, tmp_path):
    fp = {"name": "m", "weights_sha256": "w", "dtype": "float32", "device": "cpu", "kind": "causal"}
    path = ScoreCache(tmp_path / "scores", fp).path
    path.write_bytes(b"garbage" * 100)
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    ScoreCache(tmp_path / "scores", fp)
    assert any("moved aside" in n and "score cache" in n for n in _notes(out))


def test_a_file_hashed_again_is_a_note(out, tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path / "cache")
    forget_file_hashes()
    w = tmp_path / "model.safetensors"
    w.write_bytes(b"1")
    hashing.file_sha256(w)
    w.write_bytes(b"22")
    hashing.file_sha256(w)
    forget_file_hashes()
    assert any("changed since it was last hashed" in n and str(w) in n for n in _notes(out))


def test_retried_responses_are_one_counted_note(out):
    """A local stub server answers 503 twice per request before answering; the retries are one note, counted."""
    seen = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen[body] = seen.get(body, 0) + 1
            code, payload = (503, b"{}") if seen[body] <= 2 else (200, b'{"ok": true}')
            self.send_response(code)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        cfg = ClientConfig([f"http://127.0.0.1:{srv.server_address[1]}/v1"], max_concurrency=1,
                           backoff_base_s=0.01, backoff_max_s=0.02)
        got = []
        run_requests(cfg, [Request("/completions", {"i": i}, name=f"r{i}") for i in range(3)],
                     lambda i, r: got.append(r))
    finally:
        srv.shutdown()
        srv.server_close()
    assert got == [{"ok": True}] * 3 and cfg.stats["retries"] == 6
    retried = [n for n in _notes(out) if "retried" in n]
    assert len(retried) == 1 and "HTTP 503" in retried[0] and "[and 5 more like it]" in retried[0]


def test_labels_outside_the_top_k_are_a_note(out):
    # the served backend's own warning (its code path needs a server: tests/test_served.py runs it for real)
    logging.getLogger("biaslab.scoring.backends.served").warning(
        "%d of %d prompts: some labels are outside the server's top-%d; they are counted at their upper bound", 3, 20,
        20)
    assert _notes(out) == ["warning from biaslab.scoring.backends.served: 3 of 20 prompts: some labels are outside "
                           "the server's top-20; they are counted at their upper bound"]


def test_the_runner_prints_a_runs_notes(toy, capsys):  # noqa: F811
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", "from biaslab.report.outputs import OutputDir\nimport logging\n"
                  "out = OutputDir(output_dir)\nlogging.getLogger('biaslab.scoring.cache').warning('score cache x "
                  "failed; moved aside')\nout.record_model({'name': 'm', 'weights_sha256': 'a'})")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 0
    assert "note: warning from biaslab.scoring.cache: score cache x failed; moved aside" in capsys.readouterr().out
    notes = json.loads((outdir / "00_toy/MANIFEST.json").read_text())["notes"]
    assert notes == ["warning from biaslab.scoring.cache: score cache x failed; moved aside"]
