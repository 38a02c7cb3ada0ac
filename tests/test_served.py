"""The served backend against a REAL llama-cpp-python server (the embedded SmolLM2 GGUF, same weights as in-process).

Two claims, kept apart. (1) The served path is exact: its numbers equal llama.cpp's own, computed in-process on the
same GGUF with the same kernels (:class:`served_helpers.LlamaReference`), to float noise (:data:`REF_TOL`), on any
CPU. (2) The engines agree: llama.cpp's quantized kernels and the in-process transformers engine (dequantized weights)
agree in what an analysis uses (correlations, preferences, probabilities), never by a fixed tolerance on a log-prob:
kernels differ by instruction set (AVX2 against AVX-512 moved a sum log-prob by 0.16 and the log of a small
probability by 0.7 nats). Also faults through a
small proxy (429s, invalid JSON, missing logprobs, missing endpoint, wrong key), and a server killed mid-run whose
rerun resumes from the cache without repeating a request. Workloads are small: the server's Python logprob loop sorts
the whole vocabulary for every echoed token.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

from biaslab import models, scoring
from biaslab.scoring.backends.client import AuthError, ServedError
from biaslab.scoring.backends.served import CapabilityError

from served_helpers import ALIAS, PREFIX, FaultProxy, LlamaReference, LlamaServer, have_llama_server, spec

pytestmark = pytest.mark.served

N_PAIRS = 24
N_AGENTIC = 20
#: agentic prompts also checked against llama.cpp in-process (each one evaluated again there, about 200 tokens: the
#: check is exact per prompt, so a fault of the served path shows on any of them; the engines' agreement, a rate,
#: keeps all N_AGENTIC)
N_EXACT = 8
#: label distributions (agentic, bare-digit labels): top-k vs exact in-process, max |p difference|
P_TOL = 0.05
#: served against llama.cpp in-process on the same GGUF and kernels: float noise of a sum of log-probs (nats; the
#: server may reuse the key/value state of an earlier request, a different batch split of the same computation)
REF_TOL = 2e-3


# ------------------------------------------------------------------------------------------- no server ---
def test_spec_resolution_and_no_key_in_fingerprint():
    s = models.resolve_spec("openai:gpt-4o-mini")
    assert s.base_urls == ("https://api.openai.com/v1",) and s.api_key_env == "OPENAI_API_KEY"
    assert models.resolve_spec("smollm2-135m-instruct") is None
    s2 = models.resolve_spec({"base_url": ["http://a:8000/v1", "http://b:8000/v1"], "model": "m",
                              "api_key_env": "MY_KEY", "max_concurrency": 8, "requests_per_minute": 600})
    assert s2.base_urls == ("http://a:8000/v1", "http://b:8000/v1") and s2.max_concurrency == 8
    assert models.resolve_spec(json.dumps({"base_url": "http://a/v1", "model": "m"})).model == "m"
    with pytest.raises(ValueError, match="api_key_env"):
        models.resolve_spec({"base_url": "http://a/v1", "model": "m", "api_key": "sk-secret"})
    with pytest.raises(ValueError, match="credentials") as err:
        models.resolve_spec({"base_url": "https://user:sk-secret@host/v1", "model": "m"})
    assert "sk-secret" not in str(err.value)
    os.environ["MY_KEY"] = "sk-should-never-appear"
    try:
        lm = models.load(s2)
        assert "sk-should-never-appear" not in json.dumps(lm.fingerprint)
        assert lm.fingerprint["api_key_env"] == "MY_KEY"
    finally:
        del os.environ["MY_KEY"]


def test_missing_key_variable_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv("BIASLAB_NO_SUCH_KEY", raising=False)
    lm = models.load({"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "BIASLAB_NO_SUCH_KEY"})
    sc = scoring.Scorer(lm, cache_dir=tmp_path, progress=False)
    with pytest.raises(AuthError, match="BIASLAB_NO_SUCH_KEY"):
        sc.sequence_logprob(["x"])


def test_prompts_travel_in_lists_bounded_by_tokens_and_slots():
    """How work becomes POSTs where the server takes lists (no server: the probe result is set): requests that differ
    only in their prompt share a POST, sorted by prompt, at most the token budget and an even share of the work per
    request slot; chat requests and requests of another shape travel alone; the answer is split back by index."""
    from biaslab.scoring.backends.client import Request
    from biaslab.scoring.backends.served import ServedBackend, _split
    lm = models.load({"base_url": ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], "model": "m",
                      "max_concurrency": 2})
    be = ServedBackend(lm, token_budget=100)
    be._probe = {"model_id": "m", "prompt_lists": True}
    echo = [be._completion(f"text {i:02d}", max_tokens=1, echo=True, logprobs=0) for i in range(20)]
    top = [be._completion(f"label {i}", max_tokens=1, logprobs=20) for i in range(3)]
    chat = [Request("/chat/completions", {"model": "m", "messages": []}, 5, "chat")]
    work = echo[::-1] + top + chat
    costs = [10] * 20 + [60] * 3 + [5]
    posts, members = be._posts(work, costs)
    got = {id(p): members[id(p)] for p in posts}
    assert sorted(j for idx in got.values() for j in idx) == list(range(len(work)))      # every request, once
    for p in posts:
        idx = members[id(p)]
        assert sum(costs[j] for j in idx) <= 100 or len(idx) == 1                      # the token budget
        assert len(idx) <= -(-len(work) // 4)                                           # 2 replicas x 2 slots
        if len(idx) > 1:
            shapes = {json.dumps({k: v for k, v in work[j].body.items() if k != "prompt"}) for j in idx}
            assert len(shapes) == 1 and p.body["prompt"] == sorted(work[j].body["prompt"] for j in idx)
    assert any(len(members[id(p)]) > 1 for p in posts)
    assert [members[id(p)] for p in posts if p.path == "/chat/completions"] == [[len(work) - 1]]
    assert all(len(members[id(p)]) == 1 for p in posts if "label" in str(p.body.get("prompt")))   # 60 + 60 > 100
    be._probe["prompt_lists"] = False                                                   # the llama.cpp case
    posts, members = be._posts(work, costs)
    assert len(posts) == len(work) and all(isinstance(p.body.get("prompt", ""), str) for p in posts)
    resp = {"id": "x", "usage": {"prompt_tokens": 9}, "choices": [{"index": 1, "text": "b"}, {"index": 0, "text": "a"}]}
    parts = _split(resp, 2)
    assert [p["choices"] for p in parts] == [[{"index": 0, "text": "a"}], [{"index": 0, "text": "b"}]]
    assert all("usage" not in p and p["id"] == "x" for p in parts)
    with pytest.raises(ServedError, match="choices"):
        _split(resp, 3)


def test_echo_offsets_are_anchored_whether_or_not_the_generated_token_is_in_the_text():
    """The scored span is found from text_offset anchored at the end of the echoed text. vLLM leaves a generated
    special token out of the text (``<|im_end|>`` after a question: in ``tokens``, not in ``text``); anchoring on it
    shifted every token by its length (a CrowS sentence scored from its fourth token plus ``<|im_end|>``). Shapes as
    vLLM 0.32 (CPU) answers: the generated token left out of the text, in it, and empty."""
    from biaslab.scoring.backends.served import _span
    pre, t = "<|im_start|>", "What do you visit?"
    toks = ["<|im_start|>", "What", " do", " you", " visit", "?"]
    vals = [None, -9.6, -9.7, -0.8, -2.7, -0.9]

    def resp(gen, in_text):
        all_toks = toks + [gen]
        offs = [sum(len(x) for x in all_toks[:i]) for i in range(len(all_toks))]
        text = pre + t + (gen if in_text else "")
        return {"choices": [{"text": text, "logprobs": {"tokens": all_toks, "text_offset": offs,
                                                         "token_logprobs": vals + [-1.3]}}]}
    for r in [resp("<|im_end|>", False), resp(" It", True), resp("", True)]:
        sel, _ = _span(r, len(pre), len(pre) + len(t))
        assert [x for _, _, x in sel] == toks[1:] and [v for _, v, _ in sel] == vals[1:]


# ---------------------------------------------------------------------------------------- the server ---
@pytest.fixture(scope="module")
def server():
    if not have_llama_server():
        if os.environ.get("BIASLAB_SKIP_SERVED") == "1":
            pytest.skip("BIASLAB_SKIP_SERVED=1")
        pytest.fail("llama-cpp-python[server] is not installed: `make test` installs it (extra 'served-test'); "
                    "or pip install -e '.[served-test]'. Set BIASLAB_SKIP_SERVED=1 to skip these tests.")
    srv = LlamaServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def llama_ref(server):
    return LlamaReference(server)


@pytest.fixture(scope="module")
def local_scorer():
    return scoring.Scorer(models.load("smollm2-135m-instruct", device="cpu"), cache_dir=False, progress=False)


def _crows_texts():
    from biaslab.benchmarks import crows_pairs as cp
    p = cp.subsample(cp.load_original(), N_PAIRS, seed=0).prompts
    return list(p.sent_more), list(p.sent_less)


def test_agreement_crows_sequence_logprobs(server, local_scorer, llama_ref, tmp_path):
    more, less = _crows_texts()
    texts = more + less
    served = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path, progress=False)
    t0 = time.time()
    s = served.sequence_logprob(texts)
    dt = time.time() - t0
    loc = local_scorer.sequence_logprob(texts)
    assert (s.n_tokens.to_numpy() == loc.n_tokens.to_numpy()).all(), "served and local count different tokens"
    r = np.corrcoef(s.sum_logprob, loc.sum_logprob)[0, 1]
    diff = np.abs(s.sum_logprob.to_numpy() - loc.sum_logprob.to_numpy())
    n = len(more)
    pref_s = s.sum_logprob.to_numpy()[:n] > s.sum_logprob.to_numpy()[n:]
    pref_l = loc.sum_logprob.to_numpy()[:n] > loc.sum_logprob.to_numpy()[n:]
    agree = float((pref_s == pref_l).mean())
    print(f"\nCrowS {n} pairs: Pearson r={r:.6f}, |dlogp| mean={diff.mean():.4f} max={diff.max():.4f}, "
          f"preference agreement={agree:.3f}, served {len(texts)} texts in {dt:.1f} s, stats={served.stats}")
    assert n >= N_PAIRS and r >= 0.99 and agree >= 0.95
    # the served path is exact: llama.cpp's own in-process sums on the same GGUF, every token counted
    ref = [llama_ref.span(t, 0, len(t)) for t in texts]
    assert s.n_tokens.tolist() == [n for _, n in ref]
    assert np.abs(s.sum_logprob.to_numpy() - np.array([v for v, _ in ref])).max() < REF_TOL
    # a rerun sends no request at all (probe and responses cached)
    again = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path, progress=False)
    s2 = again.sequence_logprob(texts)
    assert again.stats["requests"] == 0
    assert np.allclose(s2.sum_logprob, s.sum_logprob)


def test_agreement_agentic_label_distributions(server, local_scorer, llama_ref, tmp_path):
    from biaslab.benchmarks import agentic
    bench = agentic.load()
    p = agentic.balanced_subset(bench.prompts, N_AGENTIC, seed=0)
    suffix, labels = agentic.answer_format(local_scorer.tokenizer, k=agentic.MAX_K)
    texts = (p["text"] + suffix).tolist()[:N_AGENTIC]
    served = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path, progress=False)
    d_s = served.label_distribution(texts, labels)
    d_l = local_scorer.label_distribution(texts, labels)
    cols = [f"p_{k}" for k in labels]
    dp = np.abs(d_s[cols].to_numpy() - d_l[cols].to_numpy())
    dmass = np.abs(d_s.label_mass.to_numpy() - d_l.label_mass.to_numpy())
    argmax_agree = float((d_s[cols].to_numpy().argmax(1) == d_l[cols].to_numpy().argmax(1)).mean())
    print(f"\nagentic {len(texts)} prompts: max|dp|={dp.max():.4f} mean={dp.mean():.5f}, max|dmass|={dmass.max():.4f}, "
          f"argmax agreement={argmax_agree:.2f}, outside top-k={int((d_s.n_labels_outside_topk > 0).sum())}")
    # argmax may flip on a near-tie between quantized kernels (measured 19 of 20 agree), so it is bounded loosely
    assert len(texts) >= 20 and dp.max() <= P_TOL and argmax_agree >= 0.9
    # label columns, label_mass and the top-k report are all there; nothing is NaN
    assert {"label_mass", "topk_mass", "n_labels_outside_topk"} <= set(d_s.columns)
    assert not d_s[cols + ["label_mass"]].isna().any().any()
    _assert_labels_exact(d_s.head(N_EXACT), texts[:N_EXACT], labels, llama_ref, served.backend.spec.top_k)


def _assert_labels_exact(got, prompts, labels, llama_ref, k):
    """Each label's log-prob from the served top-k equals llama.cpp's own: the sum over the label's surface forms
    among the k most likely next tokens (same GGUF and kernels; labels outside the top-k are not compared)."""
    from biaslab.scoring.labels import label_forms
    forms = label_forms(labels)
    for i, prompt in enumerate(prompts):
        top = llama_ref.next_token(prompt, k)
        for lab, fs in forms.items():
            ps = [np.exp(top[f]) for f in fs if f in top]
            if ps:
                assert abs(got[f"logp_{lab}"].iloc[i] - np.log(sum(ps))) < REF_TOL, (prompt[-40:], lab)


def test_option_logprob_agrees_and_labels_outside_topk_are_reported(server, local_scorer, llama_ref, tmp_path):
    """Option log-probs through the server are llama.cpp's own (same GGUF and kernels, float noise), and count the
    tokens the in-process engine counts; a label outside the top-k is reported, at its bound, never a silent 0."""
    served = scoring.Scorer(models.load(spec(server.url, top_k=2)), cache_dir=tmp_path, progress=False)
    prompts = ["Q: Is water wet?\nA:", "The capital of France is"]
    options = [" yes", " no", " Paris"]
    o_s = served.option_logprob(prompts, options)
    o_l = local_scorer.option_logprob(prompts, options)
    assert (o_s.n_tokens == o_l.n_tokens).all()
    ref = [llama_ref.span(p + o, len(p), len(p + o)) for p in prompts for o in options]
    assert o_s.n_tokens.tolist() == [n for _, n in ref]
    d_ref = np.abs(o_s.sum_logprob.to_numpy() - np.array([v for v, _ in ref]))
    print(f"\noptions: max |served - llama.cpp in-process| = {d_ref.max():.2g}, max |served - transformers| = "
          f"{np.abs(o_s.sum_logprob - o_l.sum_logprob).max():.3f} nats")
    assert d_ref.max() < REF_TOL
    d = served.label_distribution(prompts, ["zebra", "yes"])
    assert (d.n_labels_outside_topk >= 1).all() and "zebra" in d.labels_outside_topk.iloc[0]
    assert (d["logp_zebra"] > -np.inf).all()      # counted at its upper bound, never a silent 0


def test_label_distribution_when_the_answer_ends_at_once(server, local_scorer, llama_ref, tmp_path):
    """llama.cpp returns no log-probs when the greedy first token is end-of-text; the top-k is then read from an echo
    of the prompt (CALM's NLI prompt at k=0 does this with SmolLM2). The echo's numbers are llama.cpp's own next-token
    log-probs (same kernels: float noise), and the label probability agrees with the in-process engine; its log is
    not compared across engines (p_True is small: 0.05 apart in p was 0.7 nats apart in log p on an AVX2 CPU)."""
    prompts = ["Jack is talking about politics.\n True, False, or Neither?\nAnswer:"]
    labels = {"True": [" True", "True"], "False": [" False", "False"]}
    sc = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path, progress=False)
    got = sc.label_distribution(prompts, labels)
    want = local_scorer.label_distribution(prompts, labels)
    assert got["n_labels_outside_topk"].iloc[0] == 0
    assert abs(got["p_True"].iloc[0] - want["p_True"].iloc[0]) < P_TOL
    _assert_labels_exact(got, prompts, labels, llama_ref, sc.backend.spec.top_k)


def test_lists_and_order_give_identical_numbers(server, tmp_path):
    """Several prompts per request where the server takes lists (a list-taking proxy in front of the real llama.cpp
    server, each prompt answered by it alone) and one per request where it does not (llama-cpp-python itself, whose
    probe finds no list support): identical numbers, in any order, and the same cache entries."""
    more, less = _crows_texts()
    texts = more[:3] + less[:3]
    prompts = ["Q: Is water wet?\nA:", "The capital of France is", "Cats are"]
    direct = scoring.Scorer(models.load(spec(server.url, max_concurrency=2)), cache_dir=tmp_path / "a",
                            progress=False)
    assert direct.backend.prompt_lists() is False                    # llama-cpp-python answers a list with HTTP 500
    a = direct.sequence_logprob(texts)
    la = direct.label_distribution(prompts, ["yes", "no"])
    oa = direct.option_logprob(prompts[:2], [" yes", " Paris"])
    with FaultProxy(server.url) as px:
        px.lists = True
        listed = scoring.Scorer(models.load(spec(px.url)), cache_dir=tmp_path / "b", progress=False)
        assert listed.backend.prompt_lists() is True
        b = listed.sequence_logprob(texts[::-1]).iloc[::-1].reset_index(drop=True)
        lb = listed.label_distribution(prompts, ["yes", "no"])
        ob = listed.option_logprob(prompts[:2], [" yes", " Paris"])
        sizes = list(px.list_sizes)
    print(f"\nlists sent: {sizes}")
    assert max(sizes) >= 4                                            # max_concurrency 1: few, long lists
    pd_testing = __import__("pandas").testing
    pd_testing.assert_frame_equal(a, b, check_exact=True)
    pd_testing.assert_frame_equal(la, lb, check_exact=True)
    pd_testing.assert_frame_equal(oa, ob, check_exact=True)
    # what lists cached is what one request per prompt reads: a scorer without lists on cache b sends nothing
    again = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path / "b", progress=False)
    again.require("prompt_logprobs")
    before = again.stats["requests"]
    pd_testing.assert_frame_equal(again.sequence_logprob(texts), a, check_exact=True)
    again.label_distribution(prompts, ["yes", "no"])
    assert again.stats["requests"] == before


def test_generation_is_greedy_and_cached(server, tmp_path):
    served = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path, progress=False)
    a = served.generate(["Tell me one colour."], max_new_tokens=6, chat=True)
    b = scoring.Scorer(models.load(spec(server.url)), cache_dir=tmp_path, progress=False)
    assert b.generate(["Tell me one colour."], max_new_tokens=6, chat=True) == a and b.stats["requests"] == 0
    assert isinstance(a[0], str) and a[0]


# ---------------------------------------------------------------------------------------------- faults ---
def test_429_backoff_loses_no_item(server, tmp_path):
    with FaultProxy(server.url) as px:
        sc = scoring.Scorer(models.load(spec(px.url, max_concurrency=2)), cache_dir=tmp_path, progress=False)
        sc.require("prompt_logprobs")
        px.n_429 = 6
        texts = [f"Sentence number {i} is here." for i in range(5)]
        out = sc.sequence_logprob(texts)
        assert px.n_429_sent == 6 and sc.stats["retries"] >= 6
        assert len(out) == 5 and out.sum_logprob.notna().all()
        assert all(c == 1 for c in px.ok_bodies.values())


@pytest.mark.parametrize("fault,match", [("json", "invalid JSON"), ("no_logprobs", "no echoed prompt log-prob")])
def test_malformed_response_is_a_clear_error(server, tmp_path, fault, match):
    with FaultProxy(server.url) as px:
        sc = scoring.Scorer(models.load(spec(px.url)), cache_dir=tmp_path, progress=False)
        sc.require("prompt_logprobs")
        px.corrupt = fault
        with pytest.raises(ServedError, match=match) as ei:
            sc.sequence_logprob(["A short sentence."])
        assert "A short sentence." in str(ei.value)          # names the request
        px.corrupt = None                                     # nothing bad was cached: a retry works
        assert np.isfinite(sc.sequence_logprob(["A short sentence."]).sum_logprob).all()


def test_missing_capability_fails_before_any_scoring_request(server, tmp_path):
    with FaultProxy(server.url) as px:
        px.block = {"/completions"}
        sc = scoring.Scorer(models.load(spec(px.url)), cache_dir=tmp_path, progress=False)
        with pytest.raises(CapabilityError) as ei:
            sc.require("prompt_logprobs", why="the likelihood scheme")
        msg = str(ei.value)
        assert "smollm2-served" in msg and "prompt_logprobs" in msg and "vLLM" in msg
        posts = px.n_posts
        with pytest.raises(CapabilityError):
            sc.sequence_logprob(["x y z"])
        assert px.n_posts == posts                            # no request was sent for scoring


def test_wrong_key_names_the_variable_not_the_value(server, tmp_path, monkeypatch):
    monkeypatch.setenv("BIASLAB_TEST_KEY", "sk-wrong-secret-123")
    with FaultProxy(server.url) as px:
        px.key = "sk-right"
        sc = scoring.Scorer(models.load(spec(px.url, api_key_env="BIASLAB_TEST_KEY")), cache_dir=tmp_path,
                            progress=False)
        with pytest.raises(AuthError) as ei:
            sc.sequence_logprob(["x"])
        assert "BIASLAB_TEST_KEY" in str(ei.value) and "sk-wrong-secret-123" not in str(ei.value)
        monkeypatch.setenv("BIASLAB_TEST_KEY", "sk-right")
        assert len(scoring.Scorer(models.load(spec(px.url, api_key_env="BIASLAB_TEST_KEY")), cache_dir=tmp_path,
                                  progress=False).sequence_logprob(["x y"])) == 1


def test_server_killed_mid_run_then_resume_repeats_no_request(tmp_path):
    if not have_llama_server():
        pytest.fail("llama-cpp-python[server] is not installed")
    srv = LlamaServer().start()
    texts = [f"Item {i}: the weather was nice today." for i in range(10)]
    try:
        with FaultProxy(srv.url) as px:
            sp = spec(px.url, max_retries=2)
            sc = scoring.Scorer(models.load(sp), cache_dir=tmp_path, progress=False)
            sc.require("prompt_logprobs")
            probe_posts = sum(px.ok_bodies.values())

            def killer():
                while sum(px.ok_bodies.values()) < probe_posts + 4:
                    time.sleep(0.05)
                srv.kill()
            th = threading.Thread(target=killer, daemon=True)
            th.start()
            with pytest.raises(ServedError, match="re-running resumes"):
                sc.sequence_logprob(texts)
            th.join(5)
            done_first = sum(px.ok_bodies.values()) - probe_posts
            assert 4 <= done_first < len(texts)
            srv = LlamaServer(port=srv.port).start()          # the server comes back on the same address
            sc2 = scoring.Scorer(models.load(sp), cache_dir=tmp_path, progress=False)
            out = sc2.sequence_logprob(texts)
            assert len(out) == len(texts) and out.sum_logprob.notna().all()
            echoed = [b for (_, b) in px.ok_bodies if "Item " in json.loads(b).get("prompt", "")]
            assert len(echoed) == len(texts)                                # each text's request answered once
            # the rerun sent only the missing texts, plus the one-off opening-distribution request (first token)
            assert sc2.stats["requests"] == len(texts) - done_first + 1
            assert max(px.ok_bodies.values()) == 1                         # no request answered twice
            sc3 = scoring.Scorer(models.load(sp), cache_dir=tmp_path, progress=False)
            sc3.sequence_logprob(texts)
            assert sc3.stats["requests"] == 0
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------- notebook smoke ---
@pytest.mark.notebook
def test_reproduce_served_runs_notebooks_3_and_4_on_the_served_model(tmp_path):
    """`biaslab reproduce --served` under the smoke profile: its own llama.cpp server, notebooks 3 and 4 at
    :data:`profiles.SERVED_SIZES` two at a time (`--jobs 2`), the served model's fingerprint in each manifest."""
    import pandas as pd
    from biaslab.run import profiles, execute
    if not have_llama_server():
        pytest.fail("llama-cpp-python[server] is not installed")
    code = execute.reproduce("smoke", served=True, outputs_dir=tmp_path, html=False, jobs=2)
    for notebook in profiles.SERVED_NOTEBOOKS:
        folder = tmp_path / notebook
        failed = folder / "MANIFEST.failed.json"
        assert code == 0, json.loads(failed.read_text()).get("error") if failed.exists() else code
        manifest = json.loads((folder / "MANIFEST.json").read_text())
        fp = manifest["models"]["smollm2-served"]
        assert fp["backend"] == "served" and fp["served_model_id"] == ALIAS and fp["capabilities"]["prompt_logprobs"]
        assert "usage" in fp
        assert manifest["parameters"].items() >= profiles.SERVED_SIZES["smoke"].get(notebook, {}).items()
    folder = tmp_path / "03_crows_pairs_bayes" / "tables"
    answers = pd.read_csv(folder / "preference_answers.csv")
    assert set(answers["order"]) == {"more_first", "less_first"}        # the both-orders control is kept
    assert len(pd.read_csv(folder / "likelihood_tests.csv")) > 0
    assert len(pd.read_csv(tmp_path / "04_agentic_entropy" / "tables" / "entropy_by_model.csv")) > 0


#: Notebooks 1 (SSQA, BBQ) and 2 (CALM) on the served model, shrunk: the server takes 1-5 s per echoed prompt.
NB12_CASES = {
    "01_multifactor/ssqa": {"max_prompts": 4, "cot_prompts": 1, "cot_seeds": 2, "cot_max_new_tokens": 8},
    "01_multifactor/bbq": {"max_prompts": 2},       # 3 long options echoed per prompt
    "02_calm": {"template_ids": ["qa-054", "nli-011", "sentiment-045"], "names_per_group": 1,
                "n_permutations": 20, "subset_runs": 1, "diversity_max_templates": 5,
                "diversity_benchmarks": ["calm"]},
}


#: a notebook run in its own process: execute.reproduce(profile smoke, only=[LABEL], overrides=JSON, outputs_dir=DIR)
_RUN = ("import json, sys; from biaslab.run import execute; sys.exit(execute.reproduce('smoke', only=[sys.argv[1]], "
        "overrides=json.loads(sys.argv[2]), outputs_dir=sys.argv[3], html=False))")


@pytest.fixture(scope="module")
def served_runs(server, tmp_path_factory):
    """Each notebook-1/2 case of :data:`NB12_CASES` (with a cold score cache behind a proxy that counts the requests
    reaching the server) and notebook 2 against a server without next-token top-k, run once, two at a time: a
    notebook's kernel is single-threaded Python most of the time, so on two cores two runs take little longer than
    one. Each runs in its own process (``execute.reproduce`` handles signals: main thread only).
    Returns {case: (exit code, output folder, request counts, wall seconds)}."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from biaslab import paths
    root = tmp_path_factory.mktemp("served_runs")
    # the fallback case: a probe stored in its score cache says the server has no next-token top-k
    sp = spec(server.url)
    fallback = root / "fallback_cache"
    be = scoring.Scorer(models.load(sp), cache_dir=fallback, progress=False).backend
    probe = {**be.probe(), "top_logprobs": False, "chat_top_logprobs": False}
    (fallback / "served-probes.json").write_text(json.dumps({be._probe_key(): probe}))

    def run(case: str):
        label, _, how = case.partition(":")
        folder = root / case.replace("/", "_").replace(":", "_")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if how == "no_top_logprobs":
            overrides = dict(NB12_CASES[label], template_ids=["nli-011"], score_cache=str(fallback), models=[sp])
            proxy = None
        else:
            cold = folder / "cache"          # a cold score cache (so that the requests are counted), models shared
            cold.mkdir(parents=True)
            (cold / "models").symlink_to(paths.MODEL_CACHE_DIR)
            env["BIASLAB_CACHE"] = str(cold)
            proxy = FaultProxy(server.url).__enter__()              # counts the requests that reached the server
            overrides = {"models": [spec(proxy.url)], **NB12_CASES[label]}
        try:
            t0 = time.time()
            code = subprocess.run([sys.executable, "-c", _RUN, label, json.dumps(overrides), str(folder / "out")],
                                  env=env).returncode
            return code, folder / "out", dict(proxy.ok_bodies) if proxy else {}, time.time() - t0
        finally:
            if proxy:
                proxy.__exit__(None, None, None)
    cases = [*NB12_CASES, "02_calm:no_top_logprobs"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(cases, pool.map(run, cases)))


@pytest.mark.notebook
@pytest.mark.parametrize("case", list(NB12_CASES))
def test_notebooks_1_and_2_smoke_on_the_served_model(served_runs, case):
    import pandas as pd
    notebook, _, variant = case.partition("/")
    code, out, requests, wall = served_runs[case]
    folder = out / notebook / variant
    assert code == 0, json.loads((folder / "MANIFEST.failed.json").read_text()).get("error")
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    fp = manifest["models"]["smollm2-served"]
    assert fp["backend"] == "served" and fp["served_model_id"] == ALIAS and fp["usage"]["requests"] > 0
    print(f"{case}: {sum(requests.values())} requests, {wall:.0f} s")
    assert requests and max(requests.values()) == 1                 # every response cached: none asked twice
    notes = pd.read_csv(folder / "tables" / "served_notes.csv")["note"].tolist() \
        if (folder / "tables" / "served_notes.csv").exists() else []
    if notebook == "01_multifactor":
        resp = pd.read_csv(folder / "tables" / "responses.csv")
        assert set(resp["model"]) == {"smollm2-served"} and len(resp[resp["cot"].fillna("no") == "no"]) == 4 \
            if variant == "ssqa" else len(resp) == NB12_CASES[case]["max_prompts"]
        if variant == "ssqa":
            cot = resp[resp["cot"] == "yes"]
            assert len(cot) == 1 and set(cot["seed"].astype(str)) == {"0"}   # greedy: one seed, not cot_seeds=2
            assert any("greedily" in n for n in notes), notes
        else:
            assert {"logp_0", "logp_1", "logp_2"} <= set(resp.columns) and resp["logp_0"].notna().all()
    else:
        resp = pd.read_csv(folder / "tables" / "responses.csv")
        assert set(resp["model"]) == {"smollm2-served"} and len(resp) == 21      # 3 templates x 7 groups x 1 name
        # labels read from top-k carry their mass: every row the scoring rule read by letters (a task read by
        # cloze asks no labels, free-text QA keeps the paper's generation)
        letters = resp[resp["formulation"] == "letters"]
        assert len(letters) and letters["label_mass"].notna().all(), resp[["task", "formulation", "label_mass"]]
        assert any("next_token" in n and "top_logprobs" in n for n in notes), notes
        assert len(pd.read_csv(folder / "tables" / "bias_scores.csv")) > 0


@pytest.mark.notebook
def test_calm_notebook_falls_back_to_generation_when_top_logprobs_are_missing(served_runs):
    """A server without next-token top-k (its probe, stored in the score cache, says so): notebook 2 answers the
    closed formats by generation and its served note names the missing capability."""
    import pandas as pd
    from biaslab.scoring.backends import served as served_mod
    code, out, _, _ = served_runs["02_calm:no_top_logprobs"]
    folder = out / "02_calm"
    assert code == 0, json.loads((folder / "MANIFEST.failed.json").read_text()).get("error")
    notes = pd.read_csv(folder / "tables" / "served_notes.csv")["note"].tolist()
    assert any("'top_logprobs'" in n and "generation" in n for n in notes), notes
    resp = pd.read_csv(folder / "tables" / "responses.csv")
    assert resp["label_mass"].isna().all() and len(resp) == 7           # generated (no label mass), 7 groups x 1 name
    assert served_mod.CAPABILITIES


def test_client_rate_limit_bucket():
    import asyncio
    from biaslab.scoring.backends.client import _Bucket

    async def go():
        b = _Bucket(120)            # 2 requests per second, at most one second's worth at once
        t0 = time.monotonic()
        for _ in range(6):
            await b.take(1)
        return time.monotonic() - t0
    assert 1.8 <= asyncio.run(go()) < 4


def test_requests_spread_over_replicas(server, tmp_path):
    with FaultProxy(server.url) as a, FaultProxy(server.url) as b:
        sc = scoring.Scorer(models.load(spec([a.url, b.url])), cache_dir=tmp_path, progress=False)
        sc.sequence_logprob([f"Replica test {i}." for i in range(6)])
        na = sum(1 for (p, _) in a.ok_bodies if p == "/completions")
        nb = sum(1 for (p, _) in b.ok_bodies if p == "/completions")
        assert na >= 2 and nb >= 2, (na, nb)
