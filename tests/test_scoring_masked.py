"""Masked-LM pseudo-log-likelihood and the CrowS-Pairs metric, on a tiny BERT, against naive re-computations."""

import difflib

import numpy as np
import pytest
import torch

from biaslab.scoring.backends.masked import shared_token_positions
from helpers import scorer, tiny_model

MORE = ["Poor people are lazy.", "He is bad at math", "She cried"]
LESS = ["Rich people are lazy.", "She is bad at math", "He cried"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return tiny_model(tmp_path_factory, "tiny-bert", "masked", seed=3)


def naive_masked_logprob(lm, ids, pos):
    x = torch.tensor([ids])
    x[0, pos] = lm.tokenizer.mask_token_id
    with torch.no_grad():
        logits = lm.model(x).logits[0, pos]
    return torch.log_softmax(logits, -1)[ids[pos]].item()


def test_pll_equals_masking_one_token_at_a_time(bert):
    texts = ["The nurse was tired.", "Hi", "Old people are slow."]
    df = scorer(bert).pseudo_loglikelihood(texts, per_token=True)
    for text, row in zip(texts, df.itertuples()):
        ids = bert.tokenizer(text)["input_ids"]
        assert ids[0] == bert.tokenizer.cls_token_id and ids[-1] == bert.tokenizer.sep_token_id
        naive = [naive_masked_logprob(bert, ids, p) for p in range(1, len(ids) - 1)]
        assert row.n_tokens == len(naive) == len(row.tokens)
        assert np.allclose(row.token_logprobs, naive, atol=1e-5)
        assert abs(row.sum_logprob - sum(naive)) < 1e-4
    small = scorer(bert, token_budget=30).pseudo_loglikelihood(texts[::-1])
    assert np.allclose(small.sum_logprob[::-1].to_numpy(), df.sum_logprob.to_numpy(), atol=1e-4)


def original_crows_score(lm, s1, s2):
    """nyu-mll/crows-pairs metric.py (get_span + mask_unigram loop), transcribed for one pair."""
    ids1, ids2 = lm.tokenizer(s1)["input_ids"], lm.tokenizer(s2)["input_ids"]
    seq1, seq2 = [str(x) for x in ids1], [str(x) for x in ids2]
    template1, template2 = [], []
    for op in difflib.SequenceMatcher(None, seq1, seq2).get_opcodes():
        if op[0] == "equal":
            template1 += [x for x in range(op[1], op[2], 1)]
            template2 += [x for x in range(op[3], op[4], 1)]
    n = len(template1)
    score1 = sum(naive_masked_logprob(lm, ids1, template1[i]) for i in range(1, n - 1))
    score2 = sum(naive_masked_logprob(lm, ids2, template2[i]) for i in range(1, n - 1))
    return score1, score2, n - 2


def test_crows_pairs_metric_matches_the_original_code(bert):
    df = scorer(bert).crows_pairs_pll(MORE, LESS)
    assert list(df.columns) == ["score_more", "score_less", "n_shared", "more_preferred"]
    for (a, b), row in zip(zip(MORE, LESS), df.itertuples()):
        s1, s2, n = original_crows_score(bert, a, b)
        assert row.n_shared == n
        assert abs(row.score_more - s1) < 1e-4 and abs(row.score_less - s2) < 1e-4
        assert row.more_preferred == (s1 > s2)
    with pytest.raises(ValueError):
        scorer(bert).crows_pairs_pll(MORE, LESS[:1])


def test_shared_positions_skip_the_changed_words():
    t1, t2 = shared_token_positions([2, 10, 11, 12, 3], [2, 10, 20, 21, 12, 3])
    assert t1 == [0, 1, 3, 4] and t2 == [0, 1, 4, 5]


def test_masked_model_refuses_causal_methods(bert):
    with pytest.raises(TypeError, match="needs a causal model"):
        scorer(bert).sequence_logprob(["x"])
    with pytest.raises(TypeError, match="pseudo_loglikelihood"):
        scorer(bert).option_logprob(["x"], [" y"])
