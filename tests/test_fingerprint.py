"""Bug 2: every file the loader reads is in the fingerprint and the score cache key. Editing a model's config,
generation config, tokenizer or chat template gives a new fingerprint, a cache miss and a different provenance
record (before: ``config.json`` was in neither, so a warm cache returned the old configuration's scores and both
manifests showed the same hashes). Each test works on its own copy: never on the shared ``BIASLAB_CACHE``."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from biaslab.files import hashing
from biaslab import models, paths, scoring
from biaslab.scoring.cache import model_key
from helpers import forget_file_hashes

SHARED_MODELS = paths.MODEL_CACHE_DIR          # read (never written) to copy the converted model from
TEXTS = ["The doctor said she would call.", "A man walked into the room."]


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(paths, "MODEL_CACHE_DIR", tmp_path / "cache" / "models")
    forget_file_hashes()
    yield tmp_path / "cache"
    forget_file_hashes()


def _edit_json(path, **changes):
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d, indent=2))


EDITS = {
    "config.json": lambda f: _edit_json(f / "config.json", rms_norm_eps=0.5),
    "generation_config.json": lambda f: _edit_json(f / "generation_config.json", max_length=7),
    "tokenizer.json": lambda f: _edit_json(f / "tokenizer.json", normalizer={"type": "Lowercase"}),
    "tokenizer_config.json": lambda f: _edit_json(f / "tokenizer_config.json", model_max_length=64),
    "chat_template.jinja": lambda f: (f / "chat_template.jinja").write_text("{{ messages[0]['content'] }}!"),
}


def _score(lm, cache_dir):
    sc = scoring.Scorer(lm, cache_dir=cache_dir, progress=False)
    df = sc.sequence_logprob(TEXTS)
    return sc, df


@pytest.mark.parametrize("edited", list(EDITS))
def test_editing_any_loader_file_is_a_new_model(tmp_path, private_cache, edited):
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=3)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = "{{ messages[0]['content'] }}"
    tok.save_pretrained(folder)
    assert (folder / "chat_template.jinja").exists()
    before = models.load(folder, device="cpu", dtype="float32")
    sc0, df0 = _score(before, tmp_path / "scores")
    assert sc0.stats["positions"] > 0
    assert set(before.fingerprint["files"]) >= set(EDITS)

    EDITS[edited](folder)
    after = models.load(folder, device="cpu", dtype="float32")
    fa, fb = after.fingerprint, before.fingerprint
    assert fa["files"][edited] != fb["files"][edited]                       # the edited file, per file
    assert {k: v for k, v in fa["files"].items() if k != edited} == {k: v for k, v in fb["files"].items()
                                                                      if k != edited}
    assert fa["files_sha256"] != fb["files_sha256"] and fa != fb            # the provenance record differs
    assert fa["weights_sha256"] == fb["weights_sha256"]                      # (the weights did not change)
    assert model_key(fa) != model_key(fb)
    sc1, df1 = _score(after, tmp_path / "scores")
    assert sc1.cache.path != sc0.cache.path and sc1.stats["positions"] > 0   # a cache miss: scored again
    if edited in ("config.json", "tokenizer.json"):                          # and these change the numbers
        assert np.abs(df1.sum_logprob.to_numpy() - df0.sum_logprob.to_numpy()).max() > 1e-3


def test_files_the_loader_does_not_read_are_not_in_the_fingerprint(tmp_path, private_cache):
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=3)
    (folder / "README.md").write_text("notes")
    (folder / "pytorch_model.bin").write_bytes(b"not loaded: safetensors is")
    (folder / "biaslab.json").write_text("{}")
    names = [f.name for f in models.loader_files(folder)]
    assert names == ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                     "tokenizer_config.json"]


def _copy_embedded(cache, name):
    """The converted folder of an embedded model copied into ``cache``, its weights a symbolic link (a hard link
    would move the shared file's ctime, and every other user's memo would hash it again)."""
    src = SHARED_MODELS / name
    if not (src / "biaslab.json").exists():
        pytest.skip("the embedded model is not converted in the shared cache (run make models)")
    dst = cache / "models" / name
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name == "model.safetensors":
            os.symlink(f, dst / f.name)
        else:
            shutil.copy2(f, dst / f.name)
    return src, dst


@pytest.mark.model
@pytest.mark.skipif(shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"],
                                                                     capture_output=True).returncode != 0,
                    reason="no private mount namespace here (unshare -m needs root)")
def test_a_read_only_cache_serves_an_embedded_model_and_its_scores(tmp_path):
    """A shared, read-only BIASLAB_CACHE (models and scores): loaded, scores read, nothing written or moved."""
    cache = tmp_path / "cache"
    _copy_embedded(cache, "smollm2-135m-instruct")
    script = ("import json, sys\nfrom biaslab import models, scoring\n"
              "lm = models.load('smollm2-135m-instruct', device='cpu', dtype='float32')\n"
              "sc = scoring.Scorer(lm, progress=False)\n"
              f"df = sc.sequence_logprob({TEXTS!r})\n"
              "print(json.dumps({'sums': df.sum_logprob.tolist(), 'positions': sc.stats.get('positions', 0)}))\n")
    env = dict(os.environ, BIASLAB_CACHE=str(cache))
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    listing = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    cmd = f"mount --bind {cache} {cache} && mount -o remount,ro,bind {cache} {cache} && exec \"$@\""
    r = subprocess.run(["unshare", "-m", "sh", "-c", cmd, "sh", sys.executable, "-c", script], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = json.loads(first.stdout.splitlines()[-1]), json.loads(r.stdout.splitlines()[-1])
    assert b["positions"] == 0 and b["sums"] == a["sums"]          # every score read from the read-only file
    assert "used read-only" in r.stderr
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == listing


@pytest.mark.model
def test_embedded_model_config_edit_on_a_private_cache_copy(tmp_path, private_cache):
    """A reproduction (``rms_norm_eps`` 1e-5 -> 0.5 in the converted SmolLM2's config.json), on a copy of
    the converted folder in a temporary BIASLAB_CACHE (weights linked, never written)."""
    name = "smollm2-135m-instruct"
    src, dst = _copy_embedded(private_cache, name)
    before = models.load(name, device="cpu", dtype="float32")
    assert before.path == str(dst)
    sc0, df0 = _score(before, private_cache / "scores")
    _edit_json(dst / "config.json", rms_norm_eps=0.5)
    after = models.load(name, device="cpu", dtype="float32")
    assert after.fingerprint["files"]["config.json"] != before.fingerprint["files"]["config.json"]
    assert after.fingerprint["weights_sha256"] == before.fingerprint["weights_sha256"]
    sc1, df1 = _score(after, private_cache / "scores")
    assert sc1.cache.path != sc0.cache.path and sc1.stats["positions"] > 0
    assert np.abs(df1.sum_logprob.to_numpy() - df0.sum_logprob.to_numpy()).max() > 0.1
    assert (src / "config.json").read_bytes() != (dst / "config.json").read_bytes()   # the shared one untouched
