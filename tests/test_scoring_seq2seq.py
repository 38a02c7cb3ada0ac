"""Encoder-decoder option scoring, labels and generation on a tiny T5, against the model's own loss."""

import numpy as np
import pytest
import torch

from biaslab import scoring
from helpers import scorer, tiny_model

PROMPTS = ["Is the sky blue?", "Who was late, the man or the woman?"]
OPTIONS = ["yes", "no", "cannot tell"]


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    return tiny_model(tmp_path_factory, "tiny-t5", "seq2seq", seed=4)


def naive(lm, prompt, option, eos=True):
    tok = lm.tokenizer
    enc = torch.tensor([tok(prompt)["input_ids"]])
    labels = tok(option, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if eos else [])
    with torch.no_grad():
        loss = lm.model(input_ids=enc, labels=torch.tensor([labels])).loss.item()   # mean over label tokens
    return -loss * len(labels), len(labels)


def test_option_scores_equal_the_models_own_loss(t5):
    df = scorer(t5).option_logprob(PROMPTS, OPTIONS)
    for row in df.itertuples():
        s, n = naive(t5, PROMPTS[row.prompt_idx], row.option)
        assert row.n_tokens == n and abs(row.sum_logprob - s) < 1e-4
    small = scorer(t5, token_budget=12).option_logprob(PROMPTS[::-1], OPTIONS)
    assert np.allclose(small.sum_logprob.to_numpy(), np.r_[df.sum_logprob[3:], df.sum_logprob[:3]], atol=1e-4)


def test_labels_sum_to_one_without_end_token(t5):
    df = scorer(t5).label_distribution(PROMPTS, ["yes", "no"])
    assert np.allclose(df.p_yes + df.p_no, 1)
    for i, p in enumerate(PROMPTS):
        for lab in ("yes", "no"):
            naive_p = sum(np.exp(naive(t5, p, f, eos=False)[0]) for f in scoring.surface_forms(lab))
            assert np.isclose(np.exp(df[f"logp_{lab}"][i]), naive_p, rtol=1e-4)


def test_generation_runs_and_stops(t5):
    out = scorer(t5).generate(PROMPTS, max_new_tokens=5)
    assert len(out) == 2 and all(isinstance(o, str) for o in out)
    assert out == scorer(t5).generate(PROMPTS, max_new_tokens=5)
    with pytest.raises(TypeError, match="needs a causal model"):
        scorer(t5).sequence_logprob(["x"])
