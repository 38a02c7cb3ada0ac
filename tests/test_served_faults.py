"""Faults of an OpenAI-compatible server and of its settings, against one fake server (tests/fake_server.py; no model,
each test well under a few seconds): every served response is checked before it is cached, probes cache only definite
answers, waits are bounded, and no API key reaches an exception, a note, a MANIFEST or a notebook.
"""

from __future__ import annotations

import json
import logging
import math

import pytest

from biaslab import models, scoring
from biaslab.files.redact import redact
from biaslab.scoring.backends.client import AuthError, InvalidResponse, Refused, ServedError
from biaslab.scoring.backends.served import CapabilityError

from fake_server import FakeServer, tokenize, token_logprob

TEXTS = ["The doctor said he was tired.", "The nurse said she was tired.", "A man walked his dog home.",
         "A woman walked her dog home.", "They fixed the old car today.", "We read the long book slowly."]
FRENCH = ["Le garçon était très fâché à l'école.", "La fille était très fâchée à l'école."]
KEY = "sk-test0123456789abcdefXYZ"


@pytest.fixture
def fake():
    with FakeServer() as server:
        yield server


def _scorer(urls, cache, token_budget=None, **spec):
    lm = models.load({"base_url": urls, "model": "fake-model", "max_retries": 1, **spec})
    return scoring.Scorer(lm, cache_dir=cache, progress=False, token_budget=token_budget)


def _expected_sum(text: str) -> float:
    """The toy model's log-likelihood of ``text`` (its first token has no log-prob: no prefix)."""
    return sum(token_logprob(t, i) for i, t in enumerate(tokenize(text)) if i > 0)


def _probes(cache) -> dict:
    p = cache / "served-probes.json"
    return json.loads(p.read_text()) if p.exists() else {}


# ------------------------------------------------------------------------------------ a healthy server ---
def test_a_healthy_fake_server_is_scored_exactly_and_cached(fake, tmp_path):
    sc = _scorer(fake.url, tmp_path)
    df = sc.sequence_logprob(TEXTS + FRENCH)
    assert df.sum_logprob.tolist() == pytest.approx([_expected_sum(t) for t in TEXTS + FRENCH])
    assert df.n_tokens.tolist() == [len(tokenize(t)) - 1 for t in TEXTS + FRENCH]
    d = sc.label_distribution(TEXTS[:2], ["A", "B"])
    assert (d.label_mass <= 1).all() and d.label_mass.iloc[0] == pytest.approx(math.exp(-0.4) + math.exp(-1.5))
    n = len(fake.requests)
    again = _scorer(fake.url, tmp_path)
    assert again.sequence_logprob(TEXTS + FRENCH).sum_logprob.tolist() == df.sum_logprob.tolist()
    assert len(fake.requests) == n                        # probe and responses cached: no request


# -------------------------------------------------------------------------------------- model identity ---
def test_replicas_serving_different_models_are_refused_at_the_probe(fake, tmp_path):
    with FakeServer(model="other-model") as other:
        sc = _scorer([fake.url, other.url], tmp_path)
        with pytest.raises(Refused, match="replicas serve different models") as err:
            sc.sequence_logprob(TEXTS)
        assert fake.url in str(err.value) and other.url in str(err.value) and "other-model" in str(err.value)
    assert _probes(tmp_path) == {}


def test_a_model_that_changes_mid_run_is_an_error_and_its_answers_are_not_cached(fake, tmp_path):
    sc = _scorer(fake.url, tmp_path, token_budget=8, max_concurrency=1)   # one prompt per POST, one at a time
    sc.capabilities()
    fake.faults["model_changes_after"] = fake.answered_posts + 2
    with pytest.raises(InvalidResponse, match="model id") as err:
        sc.sequence_logprob(TEXTS)
    msg = str(err.value)
    assert "fake-model-v2" in msg and fake.url in msg and "not cached" in msg
    assert len(sc.cache) == 2                                          # the two answers of the probed model only


# --------------------------------------------------------------------------------- numbers and offsets ---
@pytest.mark.parametrize("fault, value", [("nan_logprob", "nan"), ("positive_logprob", "27.25")])
def test_token_logprobs_that_are_not_log_probabilities_are_refused_and_never_cached(fake, tmp_path, fault, value):
    sc = _scorer(fake.url, tmp_path)
    sc.capabilities()
    fake.faults[fault] = True
    with pytest.raises(InvalidResponse, match=r"token_logprobs\[2\]") as err:
        sc.sequence_logprob(TEXTS)
    assert value in str(err.value) and fake.url in str(err.value) and "completions" in str(err.value)
    assert len(sc.cache) == 0
    del fake.faults[fault]                                             # the server is fixed: the rerun scores all
    assert _scorer(fake.url, tmp_path).sequence_logprob(TEXTS).sum_logprob.tolist() == pytest.approx(
        [_expected_sum(t) for t in TEXTS])


def test_byte_offsets_are_detected_and_converted_so_no_token_is_lost(fake, tmp_path, caplog):
    sc = _scorer(fake.url, tmp_path / "a")
    sc.capabilities()
    fake.faults["byte_offsets"] = True
    with caplog.at_level(logging.WARNING, logger="biaslab"):
        df = sc.sequence_logprob(FRENCH + TEXTS[:2], per_token=True)
    assert df.sum_logprob.tolist() == pytest.approx([_expected_sum(t) for t in FRENCH + TEXTS[:2]])
    assert df.tokens.iloc[0] == tokenize(FRENCH[0])                 # every token, the first as context
    assert "UTF-8 bytes" in caplog.text


def test_offsets_that_fit_neither_characters_nor_bytes_are_refused():
    from biaslab.scoring.backends.served import _positions
    text = "Le garçon était là A"
    toks = ["Le", " garçon", " était", " là", " A"]
    assert _positions(text, toks, [0, 2, 9, 15, 18])[1] == "characters"
    assert _positions(text, toks, [0, 2, 10, 17, 21]) == ([0, 2, 9, 15, 18], "bytes")
    with pytest.raises(InvalidResponse, match="text_offset"):
        _positions(text, toks, [0, 1, 9, 15, 18])


@pytest.mark.parametrize("fault, check", [("positive_top", "log-prob.*8.1"), ("top_mass", "top-k mass"),
                                          ("nan_top", "log-prob.*nan")])
def test_top_logprobs_that_are_not_a_distribution_are_refused(fake, tmp_path, fault, check):
    sc = _scorer(fake.url, tmp_path)
    sc.capabilities()
    fake.faults[fault] = True
    for chat in (False, True):
        with pytest.raises(InvalidResponse, match=check) as err:
            sc.label_distribution(TEXTS[:2], ["A", "B"], chat=chat)
        assert fake.url in str(err.value)
    assert len(sc.cache) == 0


# ---------------------------------------------------------------------------------------------- probes ---
@pytest.mark.parametrize("fault, value, says", [("http_500", 100, "HTTP 500"),
                                                ("delay_s", 2.0, "timeout_s=0.3"),
                                                ("malformed_echo", True, "differ in length")])
def test_a_failed_probe_is_transient_names_the_server_and_a_rerun_probes_again(fake, tmp_path, fault, value, says):
    fake.faults[fault] = value
    sc = _scorer(fake.url, tmp_path, timeout_s=0.3)
    with pytest.raises(ServedError) as err:
        sc.sequence_logprob(TEXTS[:2])
    assert not isinstance(err.value, CapabilityError)
    assert says in str(err.value) and "127.0.0.1" in str(err.value) and "nothing was cached" in str(err.value)
    assert _probes(tmp_path) == {}
    fake.faults.clear()                                                # the server recovers
    n = len(fake.requests)
    df = _scorer(fake.url, tmp_path).sequence_logprob(TEXTS[:2])
    assert len(fake.requests) > n and df.sum_logprob.tolist() == pytest.approx([_expected_sum(t) for t in TEXTS[:2]])
    assert list(_probes(tmp_path).values())[0]["prompt_logprobs"] is True


def test_a_definite_no_is_still_cached(fake, tmp_path):
    fake.faults["no_echo_logprobs"] = True
    with pytest.raises(CapabilityError, match="prompt_logprobs"):
        _scorer(fake.url, tmp_path).sequence_logprob(TEXTS[:1])
    n = len(fake.requests)
    with pytest.raises(CapabilityError, match="prompt_logprobs"):
        _scorer(fake.url, tmp_path).sequence_logprob(TEXTS[:1])
    assert len(fake.requests) == n


# --------------------------------------------------------------------------------------- bounded waits ---
@pytest.mark.parametrize("setting, value", [("max_concurrency", 0), ("requests_per_minute", -1),
                                            ("tokens_per_minute", 0), ("timeout_s", 0), ("timeout_s", math.nan),
                                            ("max_retries", -1), ("top_k", 0), ("retry_budget_s", -5),
                                            ("max_concurrency", 1.5)])
def test_served_settings_are_range_checked_at_preflight(setting, value):
    from biaslab.run import parameters
    spec = {"base_url": "http://127.0.0.1:9/v1", "model": "m", setting: value}
    with pytest.raises(ValueError, match=setting):
        models.resolve_spec(spec)
    with pytest.raises(parameters.ParameterError, match=f"{setting}.*out of range"):
        parameters.validate("03_crows_pairs_bayes", {"models": [spec]})


def test_retry_after_waits_are_bounded_by_the_retry_budget_and_printed(fake, tmp_path, caplog):
    """A server asking for Retry-After: 3600 on every attempt costs one request at most its retry budget (default at
    most 2 minutes), each wait printed; a budget that covers the waits lets the request through."""
    import time
    assert models.resolve_spec({"base_url": fake.url, "model": "m"}).retry_budget_s <= 120
    sc = _scorer(fake.url, tmp_path, retry_budget_s=0.4, max_retries=6)
    sc.capabilities()
    fake.faults["retry_after"] = 50                 # every attempt of the request answers 429, Retry-After: 3600
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="biaslab"), \
            pytest.raises(ServedError, match=r"whole retry_budget_s=0.4 s.*raise retry_budget_s") as err:
        sc.sequence_logprob(TEXTS[:1])
    assert time.monotonic() - t0 < 5
    assert "\n" not in str(err.value).strip()
    assert "waiting 0.4 s (Retry-After asked 3600 s)" in caplog.text
    assert len(sc.cache) == 0
    fake.faults["retry_after"] = 1                  # one 429: waited (within the budget), then answered
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="biaslab"):
        got = _scorer(fake.url, tmp_path, retry_budget_s=0.4).sequence_logprob(TEXTS[:1])
    assert got.sum_logprob.iloc[0] == pytest.approx(_expected_sum(TEXTS[0]))
    assert "Retry-After asked 3600 s" in caplog.text


def test_a_base_url_without_v1_is_told_to_add_it(fake, tmp_path):
    bare = fake.url[: -len("/v1")]
    with pytest.raises(Refused, match=rf"/models \(HTTP 404\); .*try base_url {bare}/v1"):
        _scorer(bare, tmp_path).capabilities()
    assert not _probes(tmp_path)


def _dead_url() -> str:
    from biaslab.models.local_server import free_port
    return f"http://127.0.0.1:{free_port()}/v1"      # nothing listens there: connections are refused


@pytest.mark.parametrize("dead_first", [True, False])
def test_a_dead_replica_is_dropped_with_a_warning_while_another_answers(fake, tmp_path, caplog, dead_first):
    dead = _dead_url()
    urls = [dead, fake.url] if dead_first else [fake.url, dead]
    sc = _scorer(urls, tmp_path, max_retries=3, max_concurrency=2)
    with caplog.at_level(logging.WARNING, logger="biaslab"):
        got = sc.sequence_logprob(TEXTS)
    assert got.sum_logprob.tolist() == pytest.approx([_expected_sum(t) for t in TEXTS])
    assert f"replica {dead} dropped" in caplog.text


def test_a_replica_that_dies_mid_run_is_dropped_and_the_run_completes(tmp_path, caplog):
    with FakeServer() as live, FakeServer() as dying:
        urls = [dying.url, live.url]                    # ties go to the first: the dying one is tried first
        _scorer(urls, tmp_path, max_retries=3, max_concurrency=1).sequence_logprob(TEXTS[:2])   # probe, 2 cached
        dying.__exit__(None, None, None)               # that replica goes away
        with caplog.at_level(logging.WARNING, logger="biaslab"):
            got = _scorer(urls, tmp_path, token_budget=1, max_retries=3, max_concurrency=1).sequence_logprob(TEXTS)
    assert got.sum_logprob.tolist() == pytest.approx([_expected_sum(t) for t in TEXTS])
    assert f"replica {dying.url} dropped" in caplog.text


def test_when_every_replica_is_dead_the_run_fails_in_one_line(tmp_path):
    with pytest.raises(ServedError, match=r"Is the server running at http://127\.0\.0\.1"):
        _scorer([_dead_url(), _dead_url()], tmp_path, max_retries=1).capabilities()


def test_a_trickled_body_cannot_defeat_the_deadline(fake, tmp_path):
    sc = _scorer(fake.url, tmp_path, timeout_s=0.5, max_retries=0)
    sc.capabilities()
    fake.faults["trickle_s"] = 0.02                   # ~600 bytes: many seconds, each read well inside 0.5 s
    with pytest.raises(ServedError, match=r"no complete answer within timeout_s=0.5"):
        sc.sequence_logprob(TEXTS[:1])
    assert len(sc.cache) == 0


# ---------------------------------------------------------------------------------------------- secrets ---
@pytest.mark.parametrize("value, says", [(KEY + "\n", "ends with a newline"), (KEY + " ", "ends with white space"),
                                         ("sk-te st0123456789abcdef", "contains white space")])
def test_a_key_with_white_space_is_refused_in_one_line_without_showing_it(fake, tmp_path, monkeypatch, value, says):
    monkeypatch.setenv("BIASLAB_TEST_KEY", value)
    sc = _scorer(fake.url, tmp_path, api_key_env="BIASLAB_TEST_KEY", max_retries=0)
    with pytest.raises(AuthError) as err:
        sc.sequence_logprob(TEXTS[:1])
    msg = str(err.value)
    assert f"the key in $BIASLAB_TEST_KEY {says}" in msg and "\n" not in msg
    assert value.strip() not in msg and "0123456789" not in msg
    assert fake.requests == []


@pytest.mark.parametrize("env", [KEY, "0123456789abcdef0123456789abcdef", "Bearer abc", "abcdefGHIJKL0123456789xyz"])
def test_a_key_given_as_api_key_env_is_refused_and_never_echoed(env):
    from biaslab.run import parameters
    spec = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": env}
    with pytest.raises(ValueError, match="NAME of the environment variable") as err:
        models.resolve_spec(spec)
    assert env not in str(err.value)
    with pytest.raises(parameters.ParameterError) as err:
        parameters.validate("03_crows_pairs_bayes", {"models": [spec]})
    assert env not in str(err.value)
    assert models.resolve_spec({**spec, "api_key_env": "OPENAI_API_KEY"}).api_key_env == "OPENAI_API_KEY"


def test_redact_masks_headers_bearer_tokens_key_shapes_and_key_variables(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "token-abc123-plain-value")
    for secret in [f"Illegal header value b'Bearer {KEY}\\n'", f"{{'Authorization': 'Bearer {KEY}'}}",
                   "Authorization: Bearer token-xyz-987", "sent token-abc123-plain-value", "hf_" + "a1" * 15,
                   "ghp_" + "B2" * 12, "AKIA" + "ABCDEFGHIJ123456"]:
        out = redact(secret)
        assert "[redacted]" in out and KEY not in out and "987" not in out and "plain-value" not in out
        assert "a1a1a1" not in out and "B2B2B2" not in out and "ABCDEFGHIJ123456" not in out
    for plain in ["Bearer bonds were issued", "a task-specific sk-learn model", "sha256 " + "ab12" * 16,
                  "the sky-high costs"]:
        assert redact(plain) == plain


def test_every_served_error_is_redacted():
    assert KEY not in str(ServedError(f"httpx: Illegal header value b'Bearer {KEY}\\n' (http://h/v1)"))


def test_notes_manifests_and_failed_notebooks_are_redacted(tmp_path):
    """Each path the runner writes: provenance notes (OutputDir), MANIFEST.json text, MANIFEST.failed.json with the
    recorded parameters and error, the failed notebook, and the terminal's error line."""
    import nbformat

    from biaslab.report import outputs
    from biaslab.run import execute
    out = outputs.OutputDir(tmp_path / "staging")
    logging.getLogger("biaslab.test").warning("request failed: Illegal header value b'Bearer %s\\n'", KEY)
    out.note(f"Authorization: Bearer {KEY}")
    prov = (tmp_path / "staging" / "provenance.json").read_text()
    assert KEY not in prov and prov.count("[redacted]") == 2

    staging, final = tmp_path / "staging", tmp_path / "final"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("score()")
    cell.outputs = [nbformat.v4.new_output("error", ename="ServedError", evalue=f"Bearer {KEY}",
                                           traceback=[f"headers={{'Authorization': 'Bearer {KEY}'}}"])]
    nb.cells.append(cell)
    executed = staging / "03_crows_pairs_bayes.ipynb"
    nbformat.write(nb, executed)
    error = execute._error_text(RuntimeError(f"Illegal header value b'Bearer {KEY}\\n'"))
    assert KEY not in error
    manifest = {"parameters": {"models": [{"model": "m", "note": KEY}]}, "status": "failed", "error": error,
                "notes": [f"the key {KEY}"]}
    assert KEY not in execute._manifest_text(manifest, staging, final)
    execute._record_failure(manifest, "03_crows_pairs_bayes", executed, staging, final)
    for f in ["MANIFEST.failed.json", "03_crows_pairs_bayes.failed.ipynb"]:
        text = (final / f).read_text()
        assert KEY not in text and "[redacted]" in text, f
    logger = logging.getLogger("biaslab")
    for h in [h for h in logger.handlers if isinstance(h, outputs._NoteHandler)]:
        logger.removeHandler(h)
