"""On-disk caches of sentence embeddings and posterior draws: a second call reads the cache (the expensive step is
made to fail, so a hit cannot be faked) and returns values equal to the first call's."""

import numpy as np
import pandas as pd
import pytest

from biaslab import paths
from biaslab.files import result_cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "CACHE_DIR", tmp_path)
    return tmp_path


def test_keys_and_files(cache_dir):
    assert result_cache.texts_digest(["ab", "c"]) != result_cache.texts_digest(["a", "bc"])
    assert result_cache.digest({"a": 1, "b": [2]}) == result_cache.digest({"b": [2], "a": 1})
    path = result_cache.folder("x") / "k.npz"
    assert result_cache.load_arrays(path) is None
    result_cache.save_arrays(path, {"a": np.arange(3.0)})
    assert np.array_equal(result_cache.load_arrays(path)["a"], np.arange(3.0))
    path.write_bytes(b"not a zip file")                     # corrupted: set aside, recomputed
    assert result_cache.load_arrays(path) is None and not path.exists() and path.with_name("k.npz.bad").exists()


class Boom(Exception):
    pass


def boom(*a, **k):
    raise Boom("the cache was not used")


@pytest.mark.model
def test_sentence_embeddings_are_cached_by_encoder_and_texts(cache_dir, monkeypatch):
    from biaslab.papers.calm import encoders
    enc = encoders.load_encoder()
    texts = ["The nurse said she was tired.", "Stocks fell sharply on Monday.", "A"]
    sent, toks = enc.encode(texts)
    assert len(list((cache_dir / "embeddings").glob("*.npz"))) == 1
    monkeypatch.setattr(enc, "_encode", boom)
    sent2, toks2 = enc.encode(texts)
    assert np.array_equal(sent, sent2) and sent2.dtype == sent.dtype
    assert len(toks2) == 3 and all(np.array_equal(a, b) for a, b in zip(toks, toks2))
    with pytest.raises(Boom):                                # other texts, or another order: another key
        enc.encode(texts[::-1])
    enc.layer = 3                                            # another layer: another key
    with pytest.raises(Boom):
        enc.encode(texts)


def test_posterior_draws_are_cached_by_data_formula_sampler_and_seed(cache_dir, monkeypatch):
    import bambi

    from biaslab.stats import bayesian
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"style": rng.choice(["a", "b"], 120), "grp": rng.choice(list("pqrs"), 120)})
    df["deviated"] = (rng.random(120) < np.where(df["style"] == "b", 0.6, 0.3)).astype(int)
    kw = dict(fixed=["style"], group=["grp"], references={"style": "a"}, draws=60, tune=60, chains=2, seed=1)
    first = bayesian.hierarchical_logistic(df, **kw)
    assert not first.cached and len(list((cache_dir / "posteriors").glob("*.nc"))) == 1
    monkeypatch.setattr(bambi.Model, "fit", boom)
    again = bayesian.hierarchical_logistic(df, **kw)
    assert again.cached
    pd.testing.assert_frame_equal(first.summary, again.summary)
    pd.testing.assert_frame_equal(first.group_effects, again.group_effects)
    assert first.diagnostics == again.diagnostics
    for change in (dict(seed=2), dict(draws=61), dict(references={"style": "b"})):
        with pytest.raises(Boom):
            bayesian.hierarchical_logistic(df, **(kw | change))
    with pytest.raises(Boom):
        bayesian.hierarchical_logistic(df.assign(deviated=1 - df["deviated"]), **kw)
