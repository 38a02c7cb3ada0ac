"""The bf16_weights precision level: weights rounded to bfloat16, computed in float32, so that its numbers do not
depend on the run's schedule; its own score-cache key; its measured tolerance (tiny random models: fast)."""

from __future__ import annotations

import json

import pytest
import torch

from biaslab import models
from biaslab.papers.multiverse import design, sweep
from biaslab.scoring import tolerance
from biaslab.scoring.cache import model_key
from helpers import scorer

TEXTS = [f"Sentence {i} says {'more ' * (i % 5)}things." for i in range(10)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return models.save_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-causal", "causal", seed=5)


def test_rounded_weights_are_bfloat16_values_computed_in_float32(folder):
    full = models.load(folder, device="cpu", dtype="float32")
    lm = models.load(folder, device="cpu", **design.LOAD["bf16_weights"])
    assert lm.dtype == "float32" and lm.fingerprint["weights_rounded_to"] == "bfloat16"
    ws = dict(lm.model.named_parameters())
    for name, p in full.model.named_parameters():
        w = ws[name]
        assert w.dtype == torch.float32
        assert torch.equal(w, p.to(torch.bfloat16).float())       # exactly the bfloat16 rounding of the weight
    moved = (scorer(lm).sequence_logprob(TEXTS)["sum_logprob"]
             - scorer(full).sequence_logprob(TEXTS)["sum_logprob"]).abs()
    assert moved.max() > 1e-6                                       # it is another universe ...
    # ... whose numbers do not depend on the schedule (float32's own order of 1e-6 on this tiny model)
    assert tolerance.schedule_tolerance(lm, TEXTS)["max_abs_delta_logprob"] < 1e-4


def test_how_bf16_is_computed_is_part_of_the_cache_key(folder):
    """Scores computed in bfloat16 (the old level) are never served as bf16_weights scores, nor float32's."""
    fp = models.load(folder, device="cpu", dtype="float32").fingerprint
    rounded = models.load(folder, device="cpu", **design.LOAD["bf16_weights"]).fingerprint
    computed = models.load(folder, device="cpu", dtype="bfloat16").fingerprint
    assert len({model_key(fp), model_key(rounded), model_key(computed)}) == 3
    assert model_key(fp | {"weights_rounded_to": None}) == model_key(fp)   # unrounded models keep their key


def test_schedule_tolerance_sees_a_schedule_dependent_computation(folder):
    """Computing in bfloat16 moves with the batch's make-up: the measurement must see it (a measure that cannot fail
    would say 0 here too)."""
    lm = models.load(folder, device="cpu", dtype="bfloat16")
    r = tolerance.schedule_tolerance(lm, TEXTS)
    assert r["n_texts"] == 10 and r["schedules"] == "packed · one_per_pass · packed_other_threads"
    assert r["max_abs_delta_logprob"] > 1e-3
    with pytest.raises(ValueError, match="at least 2 texts"):
        tolerance.schedule_tolerance(lm, TEXTS[:1])


def test_an_unknown_precision_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"precisions: 'bfloat16' not a precision level.*bf16_weights"):
        sweep.run_model("m", {}, dtype="float32", precisions=["float32", "bfloat16"])


def test_manifest_records_rounded_weights_as_their_own_precision(tmp_path):
    from biaslab.report.outputs import OutputDir
    out = OutputDir(tmp_path)
    fp = {"name": "m", "weights_sha256": "abc", "dtype": "float32", "device": "cpu"}
    out.record_model(fp)
    out.record_model({**fp, "weights_rounded_to": "bfloat16"})
    m = json.loads((tmp_path / "provenance.json").read_text())["models"]["m"]
    assert m["dtypes"] == ["float32", "float32 (weights rounded to bfloat16)"] and "weights_rounded_to" not in m
