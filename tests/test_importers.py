"""Results from elsewhere: real lm-eval 0.4.13 logs in (tests/fixtures/make_fixtures.sh made them), Every Eval Ever
records out and back in.

The lm-eval fixtures were made with task YAMLs that include lm-eval's own crows_pairs_english.yaml and
bbq_multiple_choice.yaml under other names (local_crows_en, local_crows_fr, local_bbq) with local data, so a pass here
means the tasks were recognised by their samples, not by name.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from biaslab import importers, models
from biaslab.importers import eee, lm_eval
from biaslab.scoring import Scorer
from biaslab.scoring.backends.imported import NotInLog

FIX = Path(__file__).parent / "fixtures" / "lm_eval"
ROOT = Path(__file__).resolve().parents[1]
CROWS_EN = FIX / "smollm2_crows_en"
CROWS_FR = FIX / "gemma_crows_fr"
BBQ = FIX / "smollm2_bbq"


def _samples(folder: Path) -> list[dict]:
    (f,) = sorted(folder.glob("samples_*.jsonl"))
    return [json.loads(line) for line in f.read_text().splitlines() if line.strip()]


def _results(folder: Path) -> dict:
    (f,) = sorted(folder.glob("results_*.json"))
    return json.loads(f.read_text())


def test_pinned_schemas_are_the_wheels():
    for name, sha in eee.SCHEMA_SHA256.items():
        assert hashlib.sha256((eee.SCHEMA_DIR / name).read_bytes()).hexdigest() == sha, name
        assert sha in (eee.SCHEMA_DIR / "README.md").read_text()


def test_crows_recognised_by_content_and_harness_metrics_reproduced_exactly():
    (lg,) = importers.read("lm-eval", CROWS_EN)
    res = _results(CROWS_EN)
    assert lg.kind == "crows_pairs" and lg.task == "local_crows_en"
    n = res["n-samples"]["local_crows_en"]["effective"]
    assert len(lg.items) + len(lg.excluded) == n and len(lg.excluded) == 0
    assert lg.identity["harness_version"] == "0.4.13" and "pretrained=" in lg.identity["model_args"]
    assert lg.identity["dataset_path"] == "csv"
    diff = [m - l for m, l in zip(lg.items.logp_more, lg.items.logp_less)]
    # lm-eval's aggregation is the plain mean of its per-pair values
    assert sum(1.0 if d > 0 else 0.0 for d in diff) / len(diff) == res["results"]["local_crows_en"][
        "pct_stereotype,none"]
    assert sum(abs(d) for d in diff) / len(diff) == res["results"]["local_crows_en"]["likelihood_diff,none"]
    # and per pair, the harness's own per-sample metric
    assert list(lg.items.likelihood_diff) == [abs(d) for d in diff]


def test_import_cli_on_another_model_and_language_matches_an_independent_computation(tmp_path):
    """The French Gemma --limit run: tables from `biaslab import lm-eval`, numbers from the jsonl by hand."""
    from biaslab.cli import main
    assert main(["import", "lm-eval", str(CROWS_FR), "--out", str(tmp_path)]) == 0
    pairs = pd.read_csv(tmp_path / "tables" / "pair_scores.csv")
    samples = _samples(CROWS_FR)
    assert len(pairs) == len(samples)
    tok = models.load("gemma-3-270m").tokenizer
    by_id = {s["doc_id"]: s for s in samples}
    d_norm = []
    for r in pairs.itertuples():
        s = by_id[r.pair_id]
        l1, l2 = (float(x[0][0] if isinstance(x[0], list) else x[0]) for x in s["resps"])
        n1 = len(tok(s["doc"]["sent_more"], add_special_tokens=False)["input_ids"])
        n2 = len(tok(s["doc"]["sent_less"], add_special_tokens=False)["input_ids"])
        assert (r.logp_more, r.logp_less, r.n_more, r.n_less) == (l1, l2, n1, n2)
        d_norm.append(l1 / n1 - l2 / n2)
    lik = pd.read_csv(tmp_path / "tables" / "likelihood_tests.csv")
    row = lik[(lik.bias_type == "overall") & (lik.score == "norm_logprob")].iloc[0]
    assert row.lpbs == pytest.approx(sum(d_norm) / len(d_norm), abs=1e-12)
    check = pd.read_csv(tmp_path / "tables" / "harness_check.csv")
    assert (check.abs_difference == 0).all()
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    (task,) = manifest["models"]["gemma-3-270m"]["tasks"].values()
    assert task["harness_version"] == "0.4.13" and task["limit"] == 50.0


@pytest.mark.model
def test_lpbs_within_1e4_of_biaslabs_engine():
    lm_imp = models.load({"imported": str(CROWS_EN)})
    (lg,) = lm_imp.logs
    p = lg.items.head(20)
    texts = list(p.sent_more) + list(p.sent_less)
    imp = Scorer(lm_imp, cache_dir=False, progress=False).sequence_logprob(texts)
    own = Scorer(models.load("smollm2-135m-instruct", device="cpu", dtype="float32"), cache_dir=False,
                 progress=False).sequence_logprob(texts)
    assert list(imp.n_tokens) == list(own.n_tokens)
    n = len(p)
    lpbs = [(a.mean_logprob[:n].to_numpy() - a.mean_logprob[n:].to_numpy()).mean() for a in (imp, own)]
    assert abs(lpbs[0] - lpbs[1]) < 1e-4
    assert (imp.sum_logprob - own.sum_logprob).abs().max() < 1e-3


@pytest.mark.skipif(not BBQ.exists(), reason="the BBQ fixture is made by tests/fixtures/make_fixtures.sh (about 20 "
                    "CPU-minutes on 2 cores); not committed yet")
def test_bbq_choices_agree_with_the_harness_accuracy():
    (lg,) = importers.read("lm-eval", BBQ)
    assert lg.kind == "bbq"
    assert len(lg.items) + len(lg.excluded) == len(_samples(BBQ))
    assert (lg.items.correct == lg.items.harness_acc).all()
    assert set(lg.items.context_condition) <= {"ambig", "disambig"} and lg.items.template.str.contains(":").all()
    res = _results(BBQ)["results"]["local_bbq"]
    assert lg.items.correct.mean() == pytest.approx(res["acc,none"], abs=1e-12)


def test_imported_backend_names_the_first_request_the_log_lacks():
    lm = models.load({"imported": str(CROWS_EN)})
    sc = Scorer(lm, cache_dir=False, progress=False)
    first = lm.logs[0].items.sent_more.iloc[0]
    with pytest.raises(NotInLog, match=r"not in the lm-eval log of .*'A sentence nobody scored\.'"):
        sc.sequence_logprob([first, "A sentence nobody scored."])
    with pytest.raises(ValueError, match="lacks 'generate'"):
        sc.require("generate", why="the preference scheme")
    with pytest.raises(NotInLog, match="next-token distribution"):
        sc.label_distribution(["Which sentence?"], ["0", "1"])


def test_unknown_task_and_newer_format_are_one_line_errors(tmp_path):
    good = (sorted(CROWS_EN.glob("samples_*.jsonl"))[0]).read_text().splitlines()[0]
    other = json.loads(good)
    other["doc"] = {"question": "2+2?", "answer": "4"}
    f = tmp_path / "samples_gsm_2026-01-01T00-00-00.000000.jsonl"
    f.write_text(json.dumps(other) + "\n")
    with pytest.raises(importers.ImportError_, match="supported: crows_pairs") as e:
        importers.read("lm-eval", f)
    assert "\n" not in str(e.value)
    newer = {k: v for k, v in json.loads(good).items() if k != "resps"}
    f.write_text(json.dumps(newer) + "\n")
    with pytest.raises(importers.ImportError_, match="newer format is not supported"):
        lm_eval.read(f)


def _run_folders() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "outputs").rglob("MANIFEST.json"))


@pytest.mark.parametrize("folder", _run_folders(), ids=lambda p: str(p.relative_to(ROOT / "outputs")))
def test_eee_export_validates_for_every_run_folder(folder, tmp_path):
    res = eee.export_run(folder, tmp_path)      # raises on the first record the pinned schema rejects
    assert any(r["aggregate"]["evaluation_results"] for r in res.values())   # a model may have no interval
    assert sorted(tmp_path.rglob("*.json"))
    for model, r in res.items():
        for er in r["aggregate"]["evaluation_results"]:
            ci = er["score_details"]["uncertainty"]["confidence_interval"]
            assert ci["method"] and math.isfinite(ci["lower"]) and math.isfinite(ci["upper"])


def test_eee_round_trip_gives_the_same_tables(tmp_path):
    folder = ROOT / "outputs" / "03_crows_pairs_bayes"
    eee.export_run(folder, tmp_path)
    back = eee.tables_from_records(eee.read_records(tmp_path))
    original = pd.read_csv(folder / "tables" / "pair_scores.csv")
    got = back["pair_scores"]
    pd.testing.assert_frame_equal(got.reset_index(drop=True)[list(original.columns)],
                                  original.sort_values("model", kind="stable").reset_index(drop=True),
                                  check_dtype=False, check_exact=True)
    logs = importers.read("eee", tmp_path)
    assert {lg.model for lg in logs} == set(original.model)
