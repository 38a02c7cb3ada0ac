"""biaslab.scoring on causal LMs: every number against a direct computation from the model's logits.

Fast tests use a tiny random Llama with a byte-level tokenizer (models.save_tiny_model); the tests marked `model` repeat
the essential checks on the embedded SmolLM2 (whose tokenizer splits digits and spaces) and Gemma (262k vocabulary).
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from biaslab import models, scoring
from biaslab.scoring.labels import aggregate, label_forms
from helpers import scorer, tiny_model

TOL = 1e-4
TEXTS = ["The nurse said that she was tired.", "The nurse said that he was tired.", "Hi", "A",
         "Old people are bad with technology.", "Young people are bad with technology.",
         "The nurse said that she was tired. She went home early to sleep."]
PROMPTS = ["Is the sky blue? Answer:", "Q: Who was late, the man or the woman?\nA:", "2 + 2 ="]
OPTIONS = [" yes", " no", " I cannot tell", " 12"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model(tmp_path_factory, "tiny-causal", "causal", seed=1)


@pytest.fixture(scope="module")
def smol():
    return models.load("smollm2-135m-instruct", device="cpu", dtype="float32")


def direct_token_logprobs(lm, ids):
    """log P(ids[i] | ids[:i]) for i >= 1 from one unbatched forward pass over the full logits."""
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return np.array([lp[i, ids[i + 1]].item() for i in range(len(ids) - 1)])


def text_ids(lm, text):
    return [lm.tokenizer.bos_token_id] + lm.tokenizer(text, add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------------------------------ sequences ---

def check_sequence_direct(lm, texts=TEXTS):
    df = scorer(lm).sequence_logprob(texts, per_token=True)
    for text, row in zip(texts, df.itertuples()):
        direct = direct_token_logprobs(lm, text_ids(lm, text))
        assert row.n_tokens == len(direct) == len(row.tokens)
        assert np.abs(np.array(row.token_logprobs) - direct).max() < TOL
        assert abs(row.sum_logprob - direct.sum()) < TOL * max(row.n_tokens, 1)   # per-token error adds up
        assert math.isclose(row.mean_logprob, direct.mean(), abs_tol=TOL)
        assert math.isclose(row.perplexity, math.exp(-direct.mean()), rel_tol=1e-4)


# packed rows with tree attention (default) and padded batches with a copied key/value cache (packing=False)
BATCHINGS = [dict(token_budget=16), dict(token_budget=64, packing=False, padding_side="right"),
             dict(token_budget=4096), dict(share_prefixes=False, packing=False, padding_side="left"),
             dict(share_prefixes=True, packing=False, padding_side="right")]


def check_sequence_batch_invariance(lm, texts=TEXTS, batchings=BATCHINGS):
    """Scores equal one-at-a-time scores whatever the batch size, padding side, prefix sharing and input order."""
    single = pd.concat([scorer(lm, share_prefixes=False).sequence_logprob([t]) for t in texts], ignore_index=True)
    order = np.random.default_rng(0).permutation(len(texts))
    for kw in batchings:
        df = scorer(lm, **kw).sequence_logprob(texts)
        assert np.abs(df.sum_logprob - single.sum_logprob).max() < TOL, kw
        assert (df.n_tokens == single.n_tokens).all()
        shuffled = scorer(lm, **kw).sequence_logprob([texts[i] for i in order])
        assert np.abs(shuffled.sum_logprob.to_numpy() - single.sum_logprob.to_numpy()[order]).max() < TOL, kw


def test_sequence_logprob_equals_direct_computation(tiny):
    check_sequence_direct(tiny)


def test_sequence_logprob_does_not_depend_on_batching(tiny):
    check_sequence_batch_invariance(tiny)


def test_shared_prefixes_compute_fewer_positions(tiny):
    texts = ["The nurse said that she was tired.", "The nurse said that he was tired."]
    shared, plain = scorer(tiny, share_prefixes=True), scorer(tiny, share_prefixes=False)
    a, b = shared.sequence_logprob(texts), plain.sequence_logprob(texts)
    assert np.abs(a.sum_logprob - b.sum_logprob).max() < TOL
    assert shared.stats["positions"] < plain.stats["positions"]


def test_each_shared_prefix_is_computed_once(tiny):
    """Positions run through the model: a prompt longer than a packed row, with one-token options, costs exactly
    its own tokens (BOS included); a second prompt sharing its opening adds only its own ending."""
    long = ("The nurse said that she was tired. " * 9).strip()       # 314 byte tokens
    sc = scorer(tiny)
    sc.option_logprob([long], ["a", "b", "c"])
    assert sc.stats["positions"] == len(text_ids(tiny, long))
    sc = scorer(tiny)
    sc.option_logprob([long, long + "Yes"], ["a", "b c"])
    # option "b c" needs "b", " " as inputs after each prompt; the second prompt adds "Yes"
    assert sc.stats["positions"] == len(text_ids(tiny, long)) + 2 + 3 + 2


def test_group_by_prefix():
    seqs = [[1, 5, 6, 7, 8, 9], [1, 2, 3], [1, 5, 6, 7, 8, 4], [1, 5, 6, 7, 8, 9, 10]]
    groups = scoring.group_by_prefix(seqs, min_shared=4)
    assert sorted(sorted(m) for _, m in groups) == [[0, 2, 3], [1]]
    for trunk, members in groups:
        assert all(seqs[m][:len(trunk)] == trunk for m in members)


def test_no_prefix_leaves_first_token_unscored(tiny):
    df = scorer(tiny, prefix=None).sequence_logprob(["Hello"], per_token=True)
    ids = tiny.tokenizer("Hello", add_special_tokens=False)["input_ids"]
    assert df.n_tokens[0] == len(ids) - 1
    assert abs(df.sum_logprob[0] - direct_token_logprobs(tiny, ids).sum()) < TOL


def test_empty_text(tiny):
    df = scorer(tiny).sequence_logprob([""])
    assert df.n_tokens[0] == 0 and df.sum_logprob[0] == 0 and math.isnan(df.perplexity[0])


# -------------------------------------------------------------------------------------------- options ---

def check_options_are_sequence_differences(lm, prompts=PROMPTS, options=OPTIONS):
    sc = scorer(lm)
    df = sc.option_logprob(prompts, options)
    assert list(df.columns) == ["prompt_idx", "option_idx", "option", "sum_logprob", "n_tokens", "mean_logprob"]
    assert len(df) == len(prompts) * len(options)
    seq = scorer(lm).sequence_logprob([p + o for p in prompts for o in options] + list(prompts))
    full = seq.sum_logprob.to_numpy()[:len(df)].reshape(len(prompts), len(options))
    base = seq.sum_logprob.to_numpy()[len(df):]
    expected = (full - base[:, None]).ravel()
    assert np.abs(df.sum_logprob.to_numpy() - expected).max() < TOL
    assert np.allclose(df.mean_logprob, df.sum_logprob / df.n_tokens)
    return df, sc


def test_option_scores_equal_full_sequence_differences(tiny):
    check_options_are_sequence_differences(tiny)


def test_option_scores_do_not_depend_on_batching(tiny):
    ref = scorer(tiny).option_logprob(PROMPTS[:1], OPTIONS)
    singles = np.concatenate([scorer(tiny).option_logprob([p], [o]).sum_logprob.to_numpy()
                              for p in PROMPTS for o in OPTIONS])
    for kw in [dict(token_budget=8), dict(token_budget=40, packing=False, padding_side="right"),
               dict(token_budget=40, packing=False, padding_side="left"), dict(token_budget=10_000)]:
        df = scorer(tiny, **kw).option_logprob(PROMPTS, OPTIONS)
        assert np.abs(df.sum_logprob.to_numpy() - singles).max() < TOL, kw
    assert abs(ref.sum_logprob[0] - singles[0]) < TOL


def test_options_per_prompt_and_validation(tiny):
    sc = scorer(tiny)
    df = sc.option_logprob(PROMPTS[:2], [[" a", " b"], [" c"]])
    assert df[["prompt_idx", "option_idx", "option"]].values.tolist() == [[0, 0, " a"], [0, 1, " b"], [1, 0, " c"]]
    with pytest.raises(ValueError, match="one list per prompt"):
        sc.option_logprob(PROMPTS, [[" a"], [" b"]])


# --------------------------------------------------------------------------------------------- labels ---

def test_surface_forms():
    assert scoring.surface_forms("yes") == ["yes", " yes", "Yes", " Yes", "YES", " YES"]
    assert scoring.surface_forms("1") == ["1", " 1"]
    assert scoring.surface_forms("can't tell")[:4] == ["can't tell", " can't tell", "Can't tell", " Can't tell"]
    with pytest.raises(ValueError, match="belongs to both"):
        label_forms(["a", "A"])
    assert label_forms({"A": ["A", " A"], "a": ["a"]}) == {"A": ["A", " A"], "a": ["a"]}


def test_aggregate_by_hand():
    forms = {"yes": ["yes", " yes"], "no": ["no"]}
    lp = np.log([[0.1, 0.2, 0.1]])
    df = aggregate(lp, forms)
    assert np.isclose(df.logp_yes[0], np.log(0.3)) and np.isclose(df.logp_no[0], np.log(0.1))
    assert np.isclose(df.p_yes[0], 0.75) and np.isclose(df.p_no[0], 0.25) and np.isclose(df.label_mass[0], 0.4)


def check_label_distribution(lm, labels, prompts=PROMPTS):
    sc = scorer(lm)
    df = sc.label_distribution(prompts, labels)
    forms = label_forms(labels)
    pcols = [f"p_{lab}" for lab in forms]
    assert np.allclose(df[pcols].sum(axis=1), 1.0)
    assert ((df.label_mass > 0) & (df.label_mass <= 1 + 1e-9)).all()
    flat = [f for fs in forms.values() for f in fs]
    opt = scorer(lm).option_logprob(prompts, flat)
    for i in range(len(prompts)):
        probs = np.exp(opt[opt.prompt_idx == i].sum_logprob.to_numpy())
        k = 0
        for lab, fs in forms.items():
            assert np.isclose(np.exp(df[f"logp_{lab}"][i]), probs[k:k + len(fs)].sum(), rtol=1e-6)
            k += len(fs)
        assert np.isclose(df.label_mass[i], probs.sum(), rtol=1e-6)
    return df


def test_label_distribution_sums_to_one_and_matches_option_scores(tiny):
    check_label_distribution(tiny, ["yes", "no"])
    check_label_distribution(tiny, {"agree": [" agree", " Agree"], "disagree": [" disagree"]})


def test_chat_needs_a_template(tiny):
    sc = scorer(tiny)
    with pytest.raises(ValueError, match="no chat template"):
        sc.option_logprob(PROMPTS, OPTIONS, chat=True)
    assert sc.render(["x"], chat="auto") == ["x"]


# ----------------------------------------------------------------------------------------- generation ---

def naive_greedy(lm, prompt, n):
    ids = text_ids(lm, prompt)
    out = []
    for _ in range(n):
        with torch.no_grad():
            nxt = int(lm.model(torch.tensor([ids])).logits[0, -1].argmax())
        if nxt == lm.tokenizer.eos_token_id:
            break
        ids.append(nxt)
        out.append(nxt)
    return lm.tokenizer.decode(out, skip_special_tokens=True)


def test_greedy_generation_matches_naive_loop_and_batching(tiny):
    prompts = ["Hello there", "A", "The nurse said"]
    gen = scorer(tiny).generate(prompts, max_new_tokens=6)
    assert gen == [naive_greedy(tiny, p, 6) for p in prompts]
    assert gen == [scorer(tiny).generate([p], max_new_tokens=6)[0] for p in prompts]
    assert scorer(tiny, token_budget=8).generate(prompts[::-1], max_new_tokens=6) == gen[::-1]


def test_stop_strings_and_token_cap(tiny):
    full = scorer(tiny).generate(["Hello"], max_new_tokens=12)[0]
    assert full == naive_greedy(tiny, "Hello", 12)           # exactly 12 new tokens unless an end token came first
    stop = next(ch for ch in full[2:] if ch.isascii() and ch.isalnum())
    cut = scorer(tiny).generate(["Hello"], max_new_tokens=12, stop=[stop])[0]
    assert cut == full[:full.find(stop)]
    assert scoring.truncate_at_stop("abc\nQ: x", ["\n", "Q:"]) == "abc"


def test_seeded_sampling_is_reproducible_and_batch_independent(tiny):
    prompts = ["Hello", "The nurse", "Hi"]
    a = scorer(tiny).generate(prompts, max_new_tokens=8, do_sample=True, seed=3)
    b = [scorer(tiny).generate([p], max_new_tokens=8, do_sample=True, seed=3)[0] for p in prompts]
    c = scorer(tiny).generate(prompts, max_new_tokens=8, do_sample=True, seed=4)
    assert a == b and a != c


def test_extract_choice():
    from biaslab.benchmarks.formats import extract_choice as ex
    assert ex("The answer is B.", ["A", "B", "C"]) == "B"
    assert ex("(C) because a cat is an animal", ["A", "B", "C"]) == "C"
    assert ex("a lot of reasons, answer: A", ["A", "B", "C"]) == "A"
    assert ex("Yes, it is.", ["yes", "no"]) == "yes"
    assert ex("I think so. Answer: no", ["yes", "no"]) == "no"
    assert ex("Not known from the text.", ["not known", "not", "the man"]) == "not known"
    assert ex("It could be the man or the woman", ["the man", "the woman"]) is None
    assert ex("", ["yes"]) is None and ex("maybe", ["yes", "no"]) is None
    assert ex("Certainly the woman was late", ["The man", "The woman"]) == "The woman"


# ------------------------------------------------------------------------------- the embedded models ---

@pytest.mark.model
def test_smollm2_sequences_against_logits_and_batching(smol):
    texts = TEXTS[:3] + TEXTS[4:6]
    check_sequence_direct(smol, texts)
    check_sequence_batch_invariance(smol, texts, [BATCHINGS[0], BATCHINGS[4]])


def test_sliding_window_attention(tmp_path):
    """Gemma 3 attends locally in 5 of 6 layers (512 positions): packed rows and cached branches must apply the
    window. A tiny Gemma 3 with a window of 8 checks it on texts much longer than the window."""
    lm = models.load(models.save_tiny_model(tmp_path / "tiny-gemma3", "causal", seed=5, arch="gemma3"))
    assert lm.model.config.sliding_window == 8
    check_sequence_direct(lm, TEXTS[-3:])
    prompts, options = [TEXTS[-1], TEXTS[0]], [" and then she slept for a long time", " no"]
    check_options_are_sequence_differences(lm, prompts, options)
    for kw in [dict(packing=False), dict(packing=False, padding_side="right")]:
        a = scorer(lm, **kw).option_logprob(prompts, options).sum_logprob
        b = scorer(lm).option_logprob(prompts, options).sum_logprob
        assert np.abs(a - b).max() < TOL


@pytest.mark.model
def test_smollm2_options_with_split_digits_spaces_and_boundaries(smol):
    df, sc = check_options_are_sequence_differences(smol)
    assert df[df.option == " 12"].n_tokens.eq(3).all()       # " 12" -> "Ġ", "1", "2"
    # a prompt ending in a space: the space merges into the option's first token; exact difference instead
    check_options_are_sequence_differences(smol, ["Answer: "], ["yes", " no"])
    singles = np.concatenate([scorer(smol).option_logprob([p], OPTIONS).sum_logprob.to_numpy() for p in PROMPTS])
    for kw in [dict(token_budget=24), dict(token_budget=24, packing=False, padding_side="right")]:
        batched = scorer(smol, **kw).option_logprob(PROMPTS, OPTIONS)
        assert np.abs(batched.sum_logprob.to_numpy() - singles).max() < TOL


@pytest.mark.model
def test_smollm2_labels_and_chat(smol):
    df = check_label_distribution(smol, ["1", "2", "3"], prompts=["Rate from 1 to 3. Rating:"])
    assert df.label_mass[0] > 0.01
    chat = scorer(smol).label_distribution(["Is the sky blue? Answer yes or no."], ["yes", "no"], chat=True)
    assert chat.p_yes[0] + chat.p_no[0] == pytest.approx(1.0)
    rendered = scorer(smol).render(["Hi"], chat=True)[0]
    assert rendered.startswith("<|im_start|>") and rendered.endswith("<|im_start|>assistant\n")


@pytest.mark.model
def test_smollm2_greedy_generation_batched_equals_single(smol):
    prompts = ["What is the capital of France?", "Name a colour."]
    batched = scorer(smol).generate(prompts, max_new_tokens=6, chat=True)
    assert batched == [scorer(smol).generate([p], max_new_tokens=6, chat=True)[0] for p in prompts]
    assert "Paris" in batched[0]


@pytest.mark.model
def test_gemma_next_token_from_sliced_output_layer():
    lm = models.load("gemma-3-270m", device="cpu", dtype="float32")
    assert lm.tokenizer.bos_token_id == 2
    prompts = ["The capital of France is", "Two plus two is"]
    df = scorer(lm).option_logprob(prompts, [" Paris", " four", " 4"])
    for i, p in enumerate(prompts):
        ids = text_ids(lm, p)
        with torch.no_grad():
            lp = torch.log_softmax(lm.model(torch.tensor([ids])).logits[0, -1].float(), -1)
        for j, o in enumerate([" Paris", " four"]):
            tok = lm.tokenizer(o, add_special_tokens=False)["input_ids"]
            assert len(tok) == 1
            assert abs(df.sum_logprob[i * 3 + j] - lp[tok[0]].item()) < TOL
    assert df.n_tokens[2] == 2                               # " 4" -> "▁", "4"


def test_check_benchmarks_fake_scorer_answers_with_the_real_scorers_columns(tiny):
    """``biaslab check-benchmark`` dry-runs a benchmark on a fake scorer: it must answer as the real one does."""
    from biaslab.run.check_benchmark import FakeScorer
    real, fake = scorer(tiny), FakeScorer()
    for call in (lambda s: s.sequence_logprob(TEXTS[:2], per_token=True), lambda s: s.option_logprob(PROMPTS, OPTIONS),
                 lambda s: s.label_distribution(PROMPTS, {"yes": [" yes"], "no": [" no", " No"]})):
        a, b = call(real), call(fake)
        assert list(a.columns) == list(b.columns) and len(a) == len(b) and b.notna().all().all()
    assert [type(x) for x in fake.generate(PROMPTS, max_new_tokens=4, seed=1)] == [str] * len(PROMPTS)
    with pytest.raises(ValueError, match="1 of 2 texts are a missing value"):     # an empty cell, not "nan"
        fake.sequence_logprob(["a", float("nan")])
