"""Diversity measures (CALM §4.3, Table 4) on tiny hand-worked examples."""

import itertools

import numpy as np
import pandas as pd
import pytest

from biaslab.stats import diversity as dv
import oracles


def test_length_stats_by_hand():
    s = dv.length_stats(["a b c", "a  b", "a b c d e"])      # 3, 2, 5 words
    assert s["n_templates"] == 3
    assert s["length_mean"] == pytest.approx(10 / 3)
    # sample sd: deviations 1/3, -4/3, 5/3 -> sqrt((1 + 16 + 25) / 9 / 2)
    assert s["length_sd"] == pytest.approx(np.sqrt(42 / 18))
    assert (s["length_min"], s["length_max"]) == (2, 5)


def test_cosine_identical_orthogonal_and_hand():
    assert dv.mean_pairwise_cosine(np.array([[1.0, 2.0], [2.0, 4.0], [0.5, 1.0]])) == pytest.approx(1.0)
    assert dv.mean_pairwise_cosine(np.eye(3)) == pytest.approx(0.0)
    # pairs: (e1, e2) 0, (e1, [1,1]/sqrt2) 1/sqrt2, (e2, [1,1]/sqrt2) 1/sqrt2
    e = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert dv.mean_pairwise_cosine(e) == pytest.approx((0 + 2 / np.sqrt(2)) / 3)
    assert np.isnan(dv.mean_pairwise_cosine(np.ones((1, 2))))


def test_bertscore_by_hand():
    a = np.array([[1.0, 0.0]])
    b = np.array([[1.0, 0.0], [0.0, 1.0]])
    # P = 1 (a's token matches b's first), R = (1 + 0) / 2, F = 2 * 1 * .5 / 1.5
    assert oracles.bertscore_f1(a, b) == pytest.approx(2 / 3)
    assert oracles.bertscore_f1(b, a) == pytest.approx(2 / 3)
    assert oracles.bertscore_f1(b, b) == pytest.approx(1.0)


def test_mean_pairwise_bertscore_equals_naive_loop():
    rng = np.random.default_rng(0)
    toks = [rng.normal(size=(n, 4)) for n in (3, 5, 2, 4)]
    naive = np.mean([oracles.bertscore_f1(toks[i], toks[j]) for i, j in itertools.combinations(range(4), 2)])
    assert dv.mean_pairwise_bertscore(toks) == pytest.approx(naive)
    assert dv.mean_pairwise_bertscore([toks[0], toks[0]]) == pytest.approx(1.0)


def test_template_texts_one_per_template():
    from biaslab.benchmarks.base import template_texts
    p = pd.DataFrame({"template": ["T1", "T1", "T2"], "context": ["a", "a", "b"], "question": ["q?", "q?", "r?"],
                      "text": ["x Ann", "x Bob", "y Ann"]})
    assert template_texts(p, "text", "template").tolist() == ["x Ann", "y Ann"]
    assert template_texts(p, ["context", "question"], "template").tolist() == ["a q?", "b r?"]


@pytest.mark.model
def test_embedded_encoder_matches_sentence_transformers_and_identity():
    from sentence_transformers import SentenceTransformer

    from biaslab.papers.calm import encoders
    enc = encoders.load_encoder()
    texts = ["The cat sat on the mat.", "The cat sat on the mat.", "Stocks fell sharply on Monday."]
    sent, toks = enc.encode(texts)
    ref = SentenceTransformer(str(enc.path), device="cpu").encode(texts, normalize_embeddings=True)
    assert np.allclose(sent, ref, atol=1e-5)
    assert dv.mean_pairwise_cosine(sent[:2]) == pytest.approx(1.0, abs=1e-6)
    assert oracles.bertscore_f1(toks[0], toks[1]) == pytest.approx(1.0, abs=1e-6)
    assert dv.mean_pairwise_cosine(sent) < 1.0
