"""Results from elsewhere: real lm-eval 0.4.13 logs in (tests/fixtures/make_fixtures.sh made them), Every Eval Ever
records out and back in.

The lm-eval fixtures were made with task YAMLs that include lm-eval's own crows_pairs_english.yaml and
bbq_multiple_choice.yaml under other names (local_crows_en, local_crows_fr, local_bbq, local_mbbq_en/_nl) with local
data, so a pass here means the tasks were recognised by their samples, not by name.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
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
GEMMA_EN = FIX / "gemma_crows_en"
BBQ = FIX / "smollm2_bbq"
BBQ_NAT_SES = FIX / "smollm2_bbq_nat_ses"   # tests/fixtures/make_bbq_by_hand.py
MBBQ_RUN = FIX / "smollm2_mbbq"
INSPECT = FIX.parent / "inspect" / "bbq"


def _samples(folder: Path) -> list[dict]:
    (f,) = sorted(folder.glob("samples_*.jsonl"))
    return [json.loads(line) for line in f.read_text().splitlines() if line.strip()]


def _task_samples(folder: Path, task: str) -> list[dict]:
    (f,) = sorted(folder.glob(f"samples_{task}_*.jsonl"))
    return [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


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


def test_bbq_accuracy_and_bias_scores_equal_the_harness_metrics_with_clustered_intervals(tmp_path):
    """The multiple-choice BBQ log (2 categories x 3 templates x the 2x2 of context condition and polarity): the
    import's accuracy and bias scores are lm-eval's own, per condition and per category, and come with intervals
    clustered on the template."""
    from biaslab.cli import main
    from biaslab.benchmarks.bbq import score_intervals
    (lg,) = importers.read("lm-eval", BBQ)
    assert lg.kind == "bbq" and len(lg.items) == len(_samples(BBQ)) == 24 and len(lg.excluded) == 0
    assert (lg.items.correct == lg.items.harness_acc).all()
    res = _results(BBQ)["results"]["local_bbq"]
    assert lg.items.correct.mean() == pytest.approx(res["acc,none"], abs=1e-12)
    assert main(["import", "lm-eval", str(BBQ), "--out", str(tmp_path)]) == 0
    t = pd.read_csv(tmp_path / "tables" / "accuracy_bias_score_intervals.csv").set_index("context_condition")
    short = {"ambig": "amb", "disambig": "disamb"}
    for cond, s in short.items():
        assert t.loc[cond, "accuracy"] == pytest.approx(res[f"accuracy_{s},none"], abs=1e-12)
        assert t.loc[cond, "bias_score"] == pytest.approx(res[f"{s}_bias_score,none"], abs=1e-12)
        assert t.loc[cond, "n_clusters"] == 6 and "template clusters" in t.loc[cond, "bias_ci_method"]
        assert t.loc[cond, "bias_ci_low"] <= t.loc[cond, "bias_score"] <= t.loc[cond, "bias_ci_high"]
        assert t.loc[cond, "accuracy_ci_low"] <= t.loc[cond, "accuracy"] <= t.loc[cond, "accuracy_ci_high"]
    per_cat = score_intervals(lg.items, ["category"]).set_index(["category", "context_condition"])
    assert set(lg.items.category) == {"Gender_identity", "Age"}
    for (cat, cond), r in per_cat.iterrows():
        assert r.bias_score == pytest.approx(res[f"{short[cond]}_bias_score_{cat},none"], abs=1e-12)


def test_bbq_every_category_imports_from_target_loc_and_the_harness_check_explains_each_difference(tmp_path):
    """Nationality and Race_x_SES (30 random rows each; lm-eval's own bbq utils made the log): every row imports, the
    biased answer is BBQ's target_loc (read here independently from the mirror's metadata file), accuracies equal
    lm-eval's exactly, and every per-category bias-score difference is lm-eval's own biased-answer mapping."""
    from biaslab.cli import main
    from biaslab.sources import raw_path
    (lg,) = importers.read("lm-eval", BBQ_NAT_SES)
    samples = _samples(BBQ_NAT_SES)
    assert len(lg.items) == len(samples) == 60 and len(lg.excluded) == 0
    assert set(lg.items.category) == {"Nationality", "Race_x_SES"}
    meta = pd.read_csv(raw_path("nyu-mll/BBQ", "supplemental/additional_metadata.csv"), low_memory=False)
    meta = meta.drop_duplicates(["category", "example_id"]).set_index(["category", "example_id"]).target_loc
    assert [int(meta[(c, e)]) for c, e in zip(lg.items.category, lg.items.example_id)] == list(lg.items.biased_index)
    assert (lg.items.biased_source == "target_loc").all()
    assert (lg.items.correct == lg.items.harness_acc).all()
    res = _results(BBQ_NAT_SES)["results"]["local_bbq"]
    assert main(["import", "lm-eval", str(BBQ_NAT_SES), "--out", str(tmp_path)]) == 0
    check = pd.read_csv(tmp_path / "tables" / "bbq_harness_check.csv")
    acc = check[check.metric == "accuracy"].set_index("context_condition")
    assert acc.loc["ambig", "biaslab_target_loc"] == res["accuracy_amb,none"]
    assert acc.loc["disambig", "biaslab_target_loc"] == res["accuracy_disamb,none"]
    assert check.explained.all() and len(check[check.metric == "bias_score"]) == 2 * 3
    # a bias-score difference only where lm-eval's mapping differs from target_loc on some of the rows
    bias = check[check.metric == "bias_score"]
    assert ((bias.abs_difference < 1e-12) | (bias.n_mapping_differs > 0)).all()
    assert (bias.abs_difference > 0.05).any()
    diffs = pd.read_csv(tmp_path / "tables" / "bbq_mapping_differences.csv", keep_default_na=False)
    by_id = {s["doc_id"]: s["doc"] for s in samples}
    expected = [f"local_bbq:{i}" for i, d in by_id.items()
                if [k for k in range(3) if d[f"ans{k}"] in d["biased_answers"]] != [int(meta[(d["category"],
                                                                                               d["example_id"])])]]
    assert sorted(diffs.prompt_id) == sorted(expected) and len(expected) == 12
    assert diffs.why.str.startswith("lm-eval marks").all()


def test_mbbq_run_imports_as_notebook_7s_items_with_the_harness_accuracy(tmp_path):
    """lm-eval 0.4.13's bbq_multiple_choice with each row's three options, on MBBQ rows (local_mbbq_en and _nl: 24
    items of Age and Gender_identity, bias and control set): recognised as MBBQ by the docs' texts, every row imports
    with the loader's item, language and set, each task's accuracy is lm-eval's own, and every accuracy and bias
    score of the import is recomputed here from the samples and the raw files alone."""
    from biaslab.benchmarks import mbbq
    from biaslab.cli import main
    logs = {lg.task: lg for lg in importers.read("lm-eval", MBBQ_RUN)}
    res = _results(MBBQ_RUN)["results"]
    assert {t: lg.kind for t, lg in logs.items()} == {"local_mbbq_en": "mbbq", "local_mbbq_nl": "mbbq"}
    for task, lg in logs.items():
        assert len(lg.items) == len(_task_samples(MBBQ_RUN, task)) == 48 and len(lg.excluded) == 0
        assert (lg.items.correct == lg.items.harness_acc).all()
        assert lg.items.correct.mean() == pytest.approx(res[task]["acc,none"], abs=1e-12)
        assert set(lg.items.language) == {task[-2:]} and set(lg.items.set) == {"bias", "control"}
    items = pd.concat(lg.items for lg in logs.values())
    assert items["item"].nunique() == 24 and (items.groupby("item").size() == 4).all()   # 2 languages x 2 sets
    p = mbbq.load().prompts.set_index("prompt_id")
    assert (p.loc[items.prompt_id, "item"].to_numpy() == items["item"].to_numpy()).all()
    assert main(["import", "lm-eval", str(MBBQ_RUN), "--out", str(tmp_path)]) == 0
    t = pd.read_csv(tmp_path / "tables" / "mbbq_accuracy_bias_score_intervals.csv")
    assert len(t) == 2 * 2 * 2 and (t.n_clusters == 6).all()
    # independently, per language x set x context: the set from which raw file the row's texts are in, the option
    # with the highest log-likelihood (the choices are ans0-ans2 in order), the biased answer by BBQ's rule on the
    # answer_info tags (gender words read as F/M), BBQ's bias score (Parrish et al. 2022, section 4)
    words = {"woman": "F", "girl": "F", "vrouw": "F", "meisje": "F", "man": "M", "boy": "M", "jongen": "M"}
    counts = {}
    for lang in ("en", "nl"):
        set_of = {(c, json.loads(x)["context"]): st for c in ("Age", "Gender_identity") for st, sfx in
                  (("bias", ""), ("control", "_control")) for x in
                  (ROOT / "data/raw/Veranep/MBBQ/data" / f"{c}{sfx}_{lang}.jsonl").read_text("utf-8").splitlines()}
        for s in _task_samples(MBBQ_RUN, f"local_mbbq_{lang}"):
            d = s["doc"]
            assert [a["arg_1"] for a in s["arguments"].values()] == [" " + d[f"ans{i}"] for i in range(3)]
            lls = [float(r[0][0]) for r in s["resps"]]
            choice = lls.index(max(lls))
            tags = {i: words.get(d["answer_info"][f"ans{i}"][1], d["answer_info"][f"ans{i}"][1]) for i in range(3)}
            unknown = [i for i in range(3) if tags[i] == "unknown"][0]
            groups = d["additional_metadata"]["stereotyped_groups"]
            target = [i for i in range(3) if i != unknown and tags[i] in groups]
            assert len(target) == 1
            biased = target[0] if d["question_polarity"] == "neg" else ({0, 1, 2} - {unknown, target[0]}).pop()
            c = counts.setdefault((lang, set_of[(d["category"], d["context"])], d["context_condition"]), [0, 0, 0, 0])
            c[0], c[1] = c[0] + 1, c[1] + (choice == d["label"])
            c[2], c[3] = c[2] + (choice == biased), c[3] + (choice not in (biased, unknown))
    assert len(counts) == len(t) == 8
    for r in t.itertuples():
        n, n_correct, n_biased, n_other = counts[(r.language, r.set, r.context_condition)]
        s_dis = 2 * n_biased / (n_biased + n_other) - 1
        assert (r.n, r.accuracy) == (n, pytest.approx(n_correct / n, abs=1e-12))
        assert r.bias_score == pytest.approx((1 - n_correct / n) * s_dis if r.context_condition == "ambig" else s_dis,
                                             abs=1e-12)
    assert t.bias_score.abs().max() > 0.1                  # the check is not of zeros only
    check = pd.read_csv(tmp_path / "tables" / "mbbq_harness_check.csv")
    assert (check.harness - check.recomputed).abs().max() < 1e-12


def test_mbbq_rows_are_told_from_bbq_by_their_texts(tmp_path, capsys):
    """A row whose texts are in no MBBQ file is excluded, counted, with its reason; a log of rows that are in both
    BBQ's and MBBQ's English files (same id, same texts) cannot be told apart: a one-line error asks to name it,
    and --benchmark does."""
    from biaslab.cli import main
    samples = _task_samples(MBBQ_RUN, "local_mbbq_nl")
    samples[0]["doc"]["context"] += " (edited)"
    f = tmp_path / "samples_edited_2026-01-01T00-00-00.000000.jsonl"
    f.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples), encoding="utf-8")
    (lg,) = importers.read("lm-eval", f)
    assert lg.kind == "mbbq" and len(lg.items) == 47 and len(lg.excluded) == 1
    assert lg.excluded.reason.iloc[0].startswith("not a row of MBBQ's files")
    cat = "Disability_status"                     # 8 of its English bias rows are BBQ's own, unchanged
    key = ["example_id", "context", "question", "ans0", "ans1", "ans2"]
    ours = [json.loads(x) for x in (ROOT / "data/raw/Veranep/MBBQ/data" / f"{cat}_en.jsonl").read_text().splitlines()]
    theirs = {tuple(json.loads(x)[k] for k in key)
              for x in (ROOT / "data/raw/nyu-mll/BBQ/data" / f"{cat}.jsonl").read_text().splitlines()}
    both = next(d for d in ours if tuple(d[k] for k in key) in theirs)
    sample = {"doc_id": 0, "doc": both, "target": both["label"], "resps": [[["-1.5", "False"]], [["-0.5", "False"]],
                                                                           [["-2.5", "False"]]],
              "arguments": {f"gen_args_{i}": {"arg_0": both["context"], "arg_1": " " + both[f"ans{i}"]}
                            for i in range(3)}}
    g = tmp_path / "both" / "samples_both_2026-01-01T00-00-00.000000.jsonl"
    g.parent.mkdir()
    g.write_text(json.dumps(sample) + "\n", encoding="utf-8")
    rc, err = _cli(["import", "lm-eval", str(g.parent), "--out", str(tmp_path / "out")], capsys)
    _one_line_error(rc, err, g.name, "cannot tell", "--benchmark")
    (lg,) = importers.read("lm-eval", g, benchmark="mbbq")
    assert lg.kind == "mbbq" and len(lg.items) + len(lg.excluded) == 1
    assert main(["import", "lm-eval", str(g.parent), "--out", str(tmp_path / "bbq"), "--benchmark", "bbq"]) == 0
    assert pd.read_csv(tmp_path / "bbq" / "tables" / "responses.csv").choice.tolist() == [1]


def test_inspect_log_of_a_real_run(tmp_path):
    """inspect_evals' BBQ solver and scorer, run by inspect_ai 0.3.285 against SmolLM2 on llama.cpp: the model never
    wrote inspect's `ANSWER: X` line, so its scorer read no answer, and every row is excluded with that reason."""
    from biaslab.cli import main
    (js,) = sorted(INSPECT.glob("*.json"))
    (ev,) = sorted(INSPECT.glob("*.eval"))
    raw = json.loads(js.read_text())
    assert importers.detect(INSPECT) == importers.detect(js) == "inspect"
    (lg,) = importers.read("inspect", INSPECT)          # the .json; the .eval of the same log is not read twice
    assert lg.kind == "bbq" and lg.model == raw["eval"]["model"] and lg.task == "local_bbq"
    assert lg.identity["harness_version"] == "0.3.285" and lg.identity["limit"] == 8
    assert len(lg.items) + len(lg.excluded) == len(raw["samples"]) == 8
    answers = {s["id"]: s["scores"]["choice"] for s in raw["samples"]}
    for r in lg.excluded.itertuples():
        assert answers[r.row]["answer"] == "" and answers[r.row]["reason"] in r.reason
    assert main(["import", "inspect", str(INSPECT), "--out", str(tmp_path / "imp")]) == 0
    assert len(pd.read_csv(tmp_path / "imp" / "tables" / "excluded.csv")) == 8
    with pytest.raises(importers.ImportError_, match="inspect log convert --to json") as e:
        importers.read("inspect", ev)
    assert "\n" not in str(e.value)
    # the same samples with the answer inspect's choice() scorer writes for a parsed `ANSWER: X` line
    for letter, s in zip("ABCABCAB", raw["samples"]):
        s["scores"]["choice"].update(answer=letter, value="C" if letter == s["target"] else "I", reason=None)
    raw["samples"][0]["scores"]["choice"]["answer"] = "A, B"
    f = tmp_path / "parsed.json"
    f.write_text(json.dumps(raw))
    (lg,) = importers.read("inspect", f)
    assert list(lg.excluded.reason) == ["the scorer's answer 'A, B' is not one letter A-C"]
    assert list(lg.items.choice) == ["ABC".index(x) for x in "BCABCAB"]
    assert list(lg.items.correct) == [int(v == "C") for v in lg.items.harness_value]
    assert set(lg.items.biased_index) <= {0, 1, 2} and lg.items.template.str.startswith("Gender_identity:").all()


FR_RAW = ("shijing001/bayes_factor_bias_detection", "crows_pairs_FR_languagearc_contribution+210.csv")


def test_raw_french_file_matches_by_normalised_text_and_excludes_the_empty_pair(tmp_path):
    """The French run read the raw file with pandas defaults, as lm-eval's csv loader does: its sentences keep their
    trailing spaces, which biaslab's loader strips, so the loader's texts are found by normalised text (the rule is
    in the fingerprint); pair 128 has an empty sent_less, which the harness scored as the text 'None': excluded,
    with that reason."""
    from biaslab.benchmarks import crows_pairs
    from biaslab.models.imported import TEXT_MATCHING
    from biaslab.sources import raw_path
    lm = models.load({"imported": str(CROWS_FR)})
    assert lm.fingerprint["text_matching"] == TEXT_MATCHING
    (lg,) = lm.logs
    fr = crows_pairs.load_french().prompts
    def norm(df):
        return list(zip(df.sent_more.str.split().str.join(" "), df.sent_less.str.split().str.join(" ")))
    fr = fr.set_index(pd.MultiIndex.from_tuples(norm(fr)))
    ours = fr[~fr.index.duplicated()].loc[norm(lg.items)]         # the file repeats a few pairs
    assert len(ours) == len(lg.items)
    stripped = [i for i, a, b, c, d in zip(lg.items.pair_id, lg.items.sent_more, lg.items.sent_less,
                                           ours.sent_more, ours.sent_less) if (a, b) != (c, d)]
    assert len(stripped) >= 5                    # the log's texts differ from the loader's on these pairs
    got = Scorer(lm, cache_dir=False, progress=False).sequence_logprob(list(ours.sent_more) + list(ours.sent_less))
    assert list(got.sum_logprob) == list(lg.items.logp_more) + list(lg.items.logp_less)
    # what differs is said, with the log's nearest text
    wrong = ours.sent_more.iloc[0].replace("solution", "solutoin")
    with pytest.raises(NotInLog, match=r"nearest in the log: .*differs at character \d+") as e:
        Scorer(lm, cache_dir=False, progress=False).sequence_logprob([wrong])
    assert "\n" not in str(e.value) and "NFC" in str(e.value)
    # pair 128 as lm-eval logs it: the raw row read with pandas defaults (empty cell -> NaN -> null), scored "None"
    raw = pd.read_csv(raw_path(*FR_RAW), sep="\t")
    row = raw.iloc[128]
    assert pd.isna(row.sent_less)
    lines = (sorted(CROWS_FR.glob("samples_*.jsonl"))[0]).read_text().splitlines()[:3]
    s = json.loads(lines[0])
    s.update(doc_id=128, doc={k: (None if pd.isna(v) else str(v)) for k, v in row.items()})
    s["arguments"] = {"gen_args_0": {"arg_0": "", "arg_1": row.sent_more}, "gen_args_1": {"arg_0": "", "arg_1": "None"}}
    f = tmp_path / "samples_local_crows_fr_2026-01-01T00-00-00.000000.jsonl"
    f.write_text("\n".join(lines + [json.dumps(s)]) + "\n")
    (lg,) = importers.read("lm-eval", f)
    assert len(lg.items) == 3 and list(lg.excluded.row) == [128]
    assert lg.excluded.reason.iloc[0] == "empty sent_less in the data (the harness scored the text 'None')"


def test_imported_backend_names_the_first_request_the_log_lacks():
    lm = models.load({"imported": str(CROWS_EN)})
    sc = Scorer(lm, cache_dir=False, progress=False)
    first = lm.logs[0].items.sent_more.iloc[0]
    with pytest.raises(NotInLog, match=r"not in the lm-eval log of .*'A sentence nobody scored\.'"):
        sc.sequence_logprob([first, "A sentence nobody scored."])
    with pytest.raises(ValueError, match=r"the preference scheme: not in the lm-eval log of .* no generations "
                                         r"\(capability 'generate'\).*no preference prompt"):
        sc.require("generate", why="the preference scheme")
    assert sc.missing("prompt_logprobs") is None
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
    assert res and all(r["aggregate"]["evaluation_results"] for r in res.values())   # no model without results
    assert sorted(tmp_path.rglob("*.json"))
    for model, r in res.items():
        for er in r["aggregate"]["evaluation_results"]:
            unc = er["score_details"].get("uncertainty", {})
            if "confidence_interval" not in unc:     # only lm-eval's CrowS metrics come without an interval
                assert er["metric_config"]["metric_name"] in ("pct_stereotype", "likelihood_diff")
                continue
            ci = unc["confidence_interval"]
            assert ci["method"] and math.isfinite(ci["lower"]) and math.isfinite(ci["upper"])


def test_eee_round_trip_gives_the_same_tables(tmp_path):
    folder = ROOT / "outputs" / "03_crows_pairs_bayes"
    eee.export_run(folder, tmp_path)
    back = eee.tables_from_records(eee.read_records(tmp_path))
    original = pd.read_csv(folder / "tables" / "pair_scores.csv")
    got = back["pair_scores"].sort_values("model", kind="stable")     # files are read in path order
    pd.testing.assert_frame_equal(got.reset_index(drop=True)[list(original.columns)],
                                  original.sort_values("model", kind="stable").reset_index(drop=True),
                                  check_dtype=False, check_exact=True)
    logs = importers.read("eee", tmp_path)
    assert {lg.model for lg in logs} == set(original.model)


@pytest.mark.notebook
@pytest.mark.model
def test_notebook3_takes_imported_models_beside_a_scored_one(tmp_path):
    """Notebook 3, unchanged, on two imported lm-eval logs (SmolLM2 and Gemma, the first 12 English pairs, which
    their --limit runs scored) and Gemma scored here: an imported model's likelihood table is `biaslab import
    lm-eval`'s on the same pairs, the imported Gemma agrees with the scored one, the preference scheme is skipped
    with the reason shown, and the three models are compared pair by pair (in notebook 3, and by a notebook-5
    run on that output folder)."""
    from biaslab.run import execute
    from biaslab.cli import main
    from biaslab.stats import hypothesis as hyp

    n, gemma_imp = 12, "gemma-3-270m (lm-eval)"
    code = execute.reproduce("smoke", only=["03_crows_pairs_bayes"], outputs_dir=tmp_path / "out", html=False,
                             overrides={"models": [{"imported": str(CROWS_EN)},
                                                  {"imported": str(GEMMA_EN), "name": gemma_imp}, "gemma-3-270m"],
                                       "datasets": ["crows_pairs_en"], "max_pairs": n, "allocation": "first"})
    folder = tmp_path / "out" / "03_crows_pairs_bayes"
    failed = folder / "MANIFEST.failed.json"
    assert code == 0, json.loads(failed.read_text()).get("error") if failed.exists() else code
    tables = folder / "tables"
    (lg,) = importers.read("lm-eval", CROWS_EN)
    name = lg.model
    assert main(["import", "lm-eval", str(CROWS_EN), "--out", str(tmp_path / "imp")]) == 0
    imp = pd.read_csv(tmp_path / "imp" / "tables" / "pair_scores.csv").head(n)
    nb_pairs = pd.read_csv(tables / "pair_scores.csv")
    mine = nb_pairs[nb_pairs.model == name].reset_index(drop=True)
    assert list(mine.pair_id) == list(imp.pair_id)
    cols = ["logp_more", "n_more", "logp_less", "n_less", "d_logprob", "d_norm_logprob", "d_perplexity"]
    pd.testing.assert_frame_equal(mine[cols], imp[cols], check_dtype=False)
    lik = pd.read_csv(tables / "likelihood_tests.csv")
    design = {c: list(mine[c]) for c in ("stratum", "weight") if c in mine}     # the notebook's sampling design
    ref = hyp.likelihood_tests(imp.assign(dataset="crows_pairs_en", bias_type=list(mine.bias_type), **design),
                               by=("model", "dataset")).reset_index(drop=True)
    num = [c for c in ref.columns if c in lik.columns and pd.api.types.is_float_dtype(ref[c])]
    assert {"mean_d", "t_p", "bf10"} <= set(num)
    pd.testing.assert_frame_equal(lik[lik.model == name].reset_index(drop=True)[["bias_type", "score"] + num],
                                  ref[["bias_type", "score"] + num], check_dtype=False, rtol=1e-9)
    # the same model, imported and scored here: LPBS within 1e-4
    g_imp, g_own = (nb_pairs[nb_pairs.model == m].reset_index(drop=True) for m in (gemma_imp, "gemma-3-270m"))
    assert list(g_imp.n_more) == list(g_own.n_more) and list(g_imp.n_less) == list(g_own.n_less)
    assert abs(g_imp.d_norm_logprob.mean() - g_own.d_norm_logprob.mean()) < 1e-4
    skipped = pd.read_csv(tables / "preference_skipped.csv").set_index("model").reason
    for m in (name, gemma_imp):
        assert "not in the lm-eval log" in skipped[m] and "no preference prompt" in skipped[m]
        assert "needs a model" in skipped[m]
    assert "prompt_base_models=False" in skipped["gemma-3-270m"]
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert any(skipped[name] in note for note in manifest["notes"])
    cmp = pd.read_csv(tables / "paired_comparisons.csv")
    assert len(cmp) == 2 * 3 and (cmp.n_pairs == n).all()
    # notebook 5 on this output folder: its paired differences between every two of the three models
    assert execute.reproduce("smoke", only=["05_compare"], outputs_dir=tmp_path / "nb5", html=False,
                             overrides={"outputs_root": str(tmp_path / "out")}) == 0
    pairs5 = pd.read_csv(tmp_path / "nb5" / "05_compare" / "tables" / "paired_differences.csv")
    assert {frozenset((r.model_a, r.model_b)) for r in pairs5.itertuples()} == {
        frozenset(p) for p in [(name, gemma_imp), (name, "gemma-3-270m"), (gemma_imp, "gemma-3-270m")]}
    assert (pairs5.n_pairs == n).all()


# ---------------------------------------------------------------- input faults: confined, atomic, one line each ---
def _cli(argv, capsys) -> tuple[int, str]:
    from biaslab.cli import main
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    return rc, err


def _cli_out(argv, capsys) -> tuple[int, str]:
    """The exit code and what was printed (stdout and stderr)."""
    from biaslab.cli import main
    rc = main(argv)
    got = capsys.readouterr()
    return rc, got.out + got.err


def _one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def _eee_records(tmp_path) -> Path:
    src = tmp_path / "src"
    eee.export_run(ROOT / "outputs" / "03_crows_pairs_bayes", src)
    (f,) = sorted(src.rglob("*_samples.jsonl"))[:1]
    return f


@pytest.mark.parametrize("table", ["../../../escaped", "/tmp/biaslab_escaped_abs", "a/b"])
def test_eee_import_never_writes_outside_out(tmp_path, capsys, table):
    f = _eee_records(tmp_path)
    lines = f.read_text().splitlines()[:3]
    rec = json.loads(lines[0])
    rec["metadata"]["table"] = table
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(rec)] + lines[1:]) + "\n")
    out = tmp_path / "deep" / "er" / "out"
    before = set(tmp_path.rglob("*"))
    rc, err = _cli(["import", "eee", str(bad), "--out", str(out)], capsys)
    _one_line_error(rc, err, "bad.jsonl:1", "metadata.table", "not a plain table name")
    assert set(tmp_path.rglob("*")) == before and not Path("/tmp/biaslab_escaped_abs.csv").exists()


def test_eee_import_refuses_list_lines_schema_failures_and_non_utf8(tmp_path, capsys):
    f = _eee_records(tmp_path)
    good = f.read_text().splitlines()[:2]
    for name, content, needles in [
            ("list.jsonl", good[0] + "\n[1, 2]\n", ("list.jsonl:2", "a JSON list, not an object")),
            ("schema.jsonl", json.dumps({**json.loads(good[0]), "interaction_type": 5}) + "\n",
             ("schema.jsonl:1", "not a valid Every Eval Ever instance record", "interaction_type")),
            ("latin1.jsonl", None, ("latin1.jsonl:2", "0xe9", "not UTF-8"))]:
        p = tmp_path / name
        if content is None:
            p.write_bytes((good[0] + "\n").encode() + good[1].replace("sent", "s\u00e9nt").encode("latin-1",
                                                                                                   "replace") + b"\n")
        else:
            p.write_text(content)
        rc, err = _cli(["import", "eee", str(p), "--out", str(tmp_path / f"out_{name}")], capsys)
        _one_line_error(rc, err, *needles)
        assert not (tmp_path / f"out_{name}").exists()


def test_truncated_lm_eval_log_is_detected(tmp_path, capsys):
    """Cut at a line boundary (60 of 120 samples): results_*.json says 120 were scored."""
    run = tmp_path / "run"
    shutil.copytree(CROWS_EN, run)
    (f,) = sorted(run.glob("samples_*.jsonl"))
    lines = f.read_text().splitlines()
    f.write_text("\n".join(lines[:60]) + "\n")
    rc, err = _cli(["import", "lm-eval", str(run), "--out", str(tmp_path / "out")], capsys)
    _one_line_error(rc, err, "60 sample line(s)", "scored 120", "truncated")
    # bytes that are not UTF-8 name the file and line
    f.write_bytes(("\n".join(lines[:2]) + "\n").encode() + b'{"doc_id": 9, "doc": "\xff"}\n')
    rc, err = _cli(["import", "lm-eval", str(f), "--out", str(tmp_path / "out")], capsys)
    _one_line_error(rc, err, f"{f.name}:3", "0xff", "not UTF-8")


def test_two_models_in_one_folder_stay_two_models(tmp_path, capsys):
    """SmolLM2's and Gemma's CrowS runs in one folder: --name (one model's name) is refused; without it each model
    gets its own run folder, its own pairs and a MANIFEST naming it alone."""
    both = tmp_path / "both"
    for src in (CROWS_EN, GEMMA_EN):
        shutil.copytree(src, both / src.name)
    rc, err = _cli(["import", "lm-eval", str(both), "--name", "merged", "--out", str(tmp_path / "m")], capsys)
    _one_line_error(rc, err, "2 models", "--name names one model")
    assert not (tmp_path / "m").exists()
    rc, _ = _cli(["import", "lm-eval", str(both), "--out", str(tmp_path / "sep")], capsys)
    assert rc == 0
    folders = sorted(p.parent for p in (tmp_path / "sep").rglob("MANIFEST.json"))
    assert [p.name for p in folders] == ["gemma-3-270m", "smollm2-135m-instruct"]
    for folder, src in zip(folders, (GEMMA_EN, CROWS_EN)):
        pairs = pd.read_csv(folder / "tables" / "pair_scores.csv")
        (lg,) = importers.read("lm-eval", src)
        assert set(pairs.model) == {folder.name} and list(pairs.logp_more) == list(lg.items.logp_more)
        assert list(json.loads((folder / "MANIFEST.json").read_text())["models"]) == [folder.name]
        from biaslab.files import integrity
        assert integrity.verify(folder).ok


def test_an_import_into_a_folder_being_written_is_refused_and_nothing_mixes(tmp_path, capsys):
    from biaslab.run import publish
    out = tmp_path / "out"
    assert _cli(["import", "lm-eval", str(CROWS_EN), "--out", str(out)], capsys)[0] == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with publish.RunLock(out, "someone-else"):            # a concurrent import (or run) holds the folder
        rc, err = _cli(["import", "lm-eval", str(GEMMA_EN), "--out", str(out)], capsys)
    _one_line_error(rc, err, "being written by another run")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.staging")]
    # a folder that is not a run folder is never replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    rc, err = _cli(["import", "lm-eval", str(CROWS_EN), "--out", str(tmp_path / "mine")], capsys)
    _one_line_error(rc, err, "is not a run folder")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_default_outputs_are_scratch_never_the_committed_outputs(tmp_path, capsys, monkeypatch):
    from biaslab.files import integrity
    from biaslab import paths
    monkeypatch.setattr(paths, "SCRATCH_DIR", tmp_path / "scratch")
    assert _cli(["import", "lm-eval", str(CROWS_EN)], capsys)[0] == 0
    assert (tmp_path / "scratch" / "imported" / CROWS_EN.name / "MANIFEST.json").exists()
    rc, err = _cli(["import", "lm-eval", str(CROWS_EN), "--out", str(paths.OUTPUTS_DIR / "imported" / "x")], capsys)
    _one_line_error(rc, err, "committed results folder")
    run = tmp_path / "run"
    shutil.copytree(ROOT / "outputs" / "02_calm", run)
    assert _cli(["export", "eee", str(run)], capsys)[0] == 0
    assert sorted((tmp_path / "scratch" / "eee").rglob("*.json")) and integrity.verify(run).ok
    rc, err = _cli(["export", "eee", str(run), "--out", str(run / "eee")], capsys)
    _one_line_error(rc, err, "inside the run folder")
    assert integrity.verify(run).ok
    # an existing file as the target, and (unless root, who writes anyway) a read-only folder
    (tmp_path / "afile").write_text("x")
    rc, err = _cli(["export", "eee", str(run), "--out", str(tmp_path / "afile")], capsys)
    _one_line_error(rc, err, "afile")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        rc, err = _cli(["export", "eee", str(run), "--out", str(ro)], capsys)
        _one_line_error(rc, err, "ro")


def test_export_names_never_escape_and_uuids_are_per_run(tmp_path, capsys):
    """A model named '..' cannot name a folder; two runs of one model get two evaluation ids and two UUIDs; a model
    with no result is not exported."""
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    assert _cli(["import", "lm-eval", str(BBQ), "--out", str(run_a)], capsys)[0] == 0
    assert _cli(["import", "lm-eval", str(BBQ_NAT_SES), "--out", str(run_b)], capsys)[0] == 0
    ids = [next(iter(eee.export_run(r, tmp_path / "eee").values()))["aggregate"]["evaluation_id"]
           for r in (run_a, run_b)]
    files = sorted(p.name for p in (tmp_path / "eee").rglob("*.json"))
    assert len(set(ids)) == 2 and len(files) == 2 and len(set(files)) == 2
    dotted = tmp_path / "dotted"
    shutil.copytree(run_a, dotted)
    t = dotted / "tables" / "accuracy_bias_score_intervals.csv"
    t.write_text(t.read_text().replace("smollm2-135m-instruct", ".."))
    with pytest.raises(ValueError, match="no usable folder name"):
        eee.export_run(dotted, tmp_path / "eee2")
    assert not list((tmp_path / "eee2").rglob("*.json")) if (tmp_path / "eee2").exists() else True


@pytest.mark.notebook
def test_notebook3_takes_a_run_of_the_raw_french_file(tmp_path):
    """Notebook 3, unchanged, on Gemma's lm-eval run of the raw French file (trailing spaces kept, as pandas read
    it): every pair of its first 30 is found by normalised text, and the imported pair scores are the log's."""
    from biaslab.run import execute
    n = 30
    code = execute.reproduce("smoke", only=["03_crows_pairs_bayes"], outputs_dir=tmp_path / "out", html=False,
                             overrides={"models": [{"imported": str(CROWS_FR)}], "datasets": ["crows_pairs_fr"],
                                       "preference_datasets": [], "max_pairs": n, "allocation": "first"})
    folder = tmp_path / "out" / "03_crows_pairs_bayes"
    failed = folder / "MANIFEST.failed.json"
    assert code == 0, json.loads(failed.read_text()).get("error") if failed.exists() else code
    pairs = pd.read_csv(folder / "tables" / "pair_scores.csv")
    (lg,) = importers.read("lm-eval", CROWS_FR)
    logged = dict(zip(lg.items.sent_more.str.split().str.join(" "), lg.items.logp_more))
    assert len(pairs) == n
    from biaslab.benchmarks import crows_pairs
    fr = crows_pairs.load_french().prompts.set_index("prompt_id")
    texts = [fr.loc[p, "sent_more"] for p in pairs.prompt_id]
    assert sum(t != t.strip() or "  " in t for t in lg.items.sent_more.head(n)) >= 1
    assert list(pairs.logp_more) == [logged[" ".join(t.split())] for t in texts]
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert "NFC" in next(iter(manifest["models"].values()))["text_matching"]


# ------------------------------------- rows that cannot be scored or placed; exports that are whole and portable ---
def _mutated(src: Path, dst: Path, change) -> Path:
    """A copy of the log folder ``src`` at ``dst`` with ``change(task, sample)`` applied to every sample line."""
    shutil.copytree(src, dst)
    for f in sorted(dst.glob("samples_*.jsonl")):
        task = lm_eval._task_and_date(f)[0]
        lines = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        for s in lines:
            change(task, s)
        f.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in lines), encoding="utf-8")
    return dst


def test_bbq_shaped_rows_of_no_known_category_are_excluded_or_stop_the_import(tmp_path, capsys):
    """An MBBQ log (English and Dutch) whose docs have a category neither BBQ nor MBBQ has is not imported as BBQ,
    pooling both languages into one score: it stops in one line; one such doc in a BBQ log is excluded with why; a
    folder where one task is of no known category imports the other and lists it (its rows in excluded.csv)."""
    def rename(task, s):
        s["doc"]["category"] = "Religion_x_Age"
    unknown = _mutated(MBBQ_RUN, tmp_path / "unknown", rename)
    rc, err = _cli(["import", "lm-eval", str(unknown), "--out", str(tmp_path / "out")], capsys)
    _one_line_error(rc, err, "no task can be imported", "'Religion_x_Age'", "no doc's category is one of BBQ's or MBBQ's",
                    "supported:")
    assert not (tmp_path / "out").exists()

    def one(task, s):
        if s["doc_id"] == 5:
            s["doc"]["category"] = "Nonexistent"
    (lg,) = importers.read("lm-eval", _mutated(BBQ, tmp_path / "bbq", one))
    assert lg.kind == "bbq" and len(lg.items) == 23 and list(lg.excluded.row) == [5]
    assert lg.excluded.reason.iloc[0].startswith("category 'Nonexistent' is none of BBQ's or MBBQ's")

    def dutch_only(task, s):
        if task.endswith("_nl"):
            s["doc"]["category"] = "Religion_x_Age"
    mixed = _mutated(MBBQ_RUN, tmp_path / "mixed", dutch_only)
    rc, printed = _cli_out(["import", "lm-eval", str(mixed), "--out", str(tmp_path / "m")], capsys)
    assert rc == 0 and "local_mbbq_en: mbbq, 48 items" in printed and "local_mbbq_nl: not imported" in printed
    t = pd.read_csv(tmp_path / "m" / "tables" / "mbbq_accuracy_bias_score_intervals.csv")
    assert set(t.language) == {"en"} and set(t.dataset) == {"local_mbbq_en"}
    excluded = pd.read_csv(tmp_path / "m" / "tables" / "excluded.csv")
    assert len(excluded) == 48 and set(excluded.task) == {"local_mbbq_nl"}
    assert excluded.reason.str.startswith("task not imported:").all()


def test_one_unsupported_task_does_not_block_the_others(tmp_path, capsys):
    """A log folder with a CrowS-Pairs task and a task of no supported kind: CrowS-Pairs imports, the other is
    listed with why (stdout, excluded.csv, MANIFEST notes); a folder of the unsupported task alone is one line."""
    run = tmp_path / "run"
    shutil.copytree(CROWS_EN, run)
    good = json.loads((sorted(CROWS_EN.glob("samples_*.jsonl"))[0]).read_text().splitlines()[0])
    other = [{**good, "doc_id": i, "doc": {"question": f"{i}+2?", "answer": str(i + 2)}} for i in range(4)]
    (res,) = run.glob("results_*.json")                 # one lm_eval call, two tasks: one results file
    (res.parent / f"samples_gsm_{res.stem.removeprefix('results_')}.jsonl").write_text(
        "".join(json.dumps(o) + "\n" for o in other))
    r = json.loads(res.read_text())
    r["configs"]["gsm"], r["n-samples"]["gsm"] = {"task": "gsm"}, {"original": 4, "effective": 4}
    res.write_text(json.dumps(r))
    rc, printed = _cli_out(["import", "lm-eval", str(run), "--out", str(tmp_path / "out")], capsys)
    assert rc == 0 and "local_crows_en: crows_pairs, 120 items" in printed
    assert "gsm: not imported" in printed and "neither CrowS-Pairs nor BBQ" in printed
    assert len(pd.read_csv(tmp_path / "out" / "tables" / "pair_scores.csv")) == 120
    excluded = pd.read_csv(tmp_path / "out" / "tables" / "excluded.csv")
    assert list(excluded.row) == [0, 1, 2, 3] and (excluded.task == "gsm").all()
    notes = json.loads((tmp_path / "out" / "MANIFEST.json").read_text())["notes"]
    assert any(n.startswith("gsm: 4 row(s) excluded") for n in notes)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(next(run.glob("samples_gsm_*.jsonl")), alone)
    rc, err = _cli(["import", "lm-eval", str(alone), "--out", str(tmp_path / "none")], capsys)
    _one_line_error(rc, err, "task 'gsm' is neither CrowS-Pairs nor BBQ", "supported: crows_pairs")


def test_nan_log_likelihoods_are_excluded_and_the_harness_check_says_they_explain_the_gap(tmp_path, capsys):
    """lm-eval logs a failed forward pass as NaN (as text or as JSON's NaN) or infinity: those pairs are excluded
    and counted, never scored; the harness's own values (over all 120 pairs) stand beside biaslab's (over 117) with
    the reason for the gap; the export has 117 instance records and no NaN."""
    bad = {3: "nan", 7: float("nan"), 11: "-inf"}

    def broken(task, s):
        if s["doc_id"] in bad:
            s["resps"][1] = [[bad[s["doc_id"]], "False"]]
    run = _mutated(CROWS_EN, tmp_path / "run", broken)
    (lg,) = importers.read("lm-eval", run)
    assert len(lg.items) == 117 and sorted(lg.excluded.row) == sorted(bad)
    assert lg.excluded.reason.str.endswith("in resps is not a finite number").all()
    out = tmp_path / "out"
    assert _cli(["import", "lm-eval", str(run), "--out", str(out)], capsys)[0] == 0
    pairs = pd.read_csv(out / "tables" / "pair_scores.csv")
    assert len(pairs) == 117 and pairs.logp_less.map(math.isfinite).all()
    check = pd.read_csv(out / "tables" / "harness_check.csv")
    assert (check.n == 117).all() and (check.n_excluded == 3).all()
    assert check.note.str.startswith("3 row(s) of local_crows_en excluded").all()
    assert check.note.str.endswith("which explains a difference").all()
    lik = pd.read_csv(out / "tables" / "likelihood_tests.csv")
    assert (lik[lik.bias_type == "overall"].n == 117).all()
    (r,) = eee.export_run(out, tmp_path / "eee").values()
    assert len(r["instances"]) == 117
    (jl,) = (tmp_path / "eee").rglob("*_samples.jsonl")
    assert len(jl.read_text().splitlines()) == 117 and "NaN" not in jl.read_text()


def test_pairs_without_a_finite_score_are_counted_not_exported_as_outcomes(tmp_path):
    """A run whose per-pair table holds pairs without a finite log-probability (a table written by other means):
    they are counted in the aggregate's source_metadata, never written as "score 0, is_correct true"; lm-eval's
    summaries are over the other pairs (before: the export failed on NaN after writing the samples file)."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "outputs" / "03_crows_pairs_bayes", run)
    t = run / "tables" / "pair_scores.csv"
    df = pd.read_csv(t)
    model = df.model.iloc[0]
    hit = df.index[df.model == model][:2]
    df.loc[hit, ["logp_more", "d_logprob"]] = float("nan")
    df.to_csv(t, index=False)
    res = eee.export_run(run, tmp_path / "eee")
    agg, inst = res[model]["aggregate"], res[model]["instances"]
    assert len(inst) == int((df.model == model).sum()) - 2
    assert json.loads(agg["source_metadata"]["additional_details"]["items_without_finite_score"]) == {
        "pair_scores": 2}
    assert not {json.loads(i["metadata"]["biaslab_row"])["prompt_id"] for i in inst} & set(df.loc[hit, "prompt_id"])
    written = [x for p in (tmp_path / "eee").rglob("*_samples.jsonl") for x in p.read_text().splitlines()]
    assert len(written) == sum(len(r["instances"]) for r in res.values()) and "NaN" not in "".join(written)


def test_a_failed_export_leaves_no_file(tmp_path, monkeypatch):
    """Every record is validated before the first file is written: an export refused at its last check (the last
    model's aggregate) leaves nothing (before: the samples files, and earlier models' records, stayed)."""
    folder = ROOT / "outputs" / "03_crows_pairs_bayes"
    last = sorted(eee.export_run(folder))[-1]
    real = eee.validate

    def fail_on_the_last(record, name):
        if name == "eval.schema.json" and record["model_info"]["name"] == last:
            raise ValueError("refused at the last check")
        return real(record, name)
    monkeypatch.setattr(eee, "validate", fail_on_the_last)
    with pytest.raises(ValueError, match="refused at the last check"):
        eee.export_run(folder, tmp_path / "eee")
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_concurrent_imports_into_one_folder_the_second_is_refused(tmp_path, capsys, monkeypatch):
    """An import holds the folder's run lock from its first read to its publish: a second import into the same
    folder while the first is scoring is refused in one line (before: both exited 0 and the later one won)."""
    from biaslab.run import log_import
    out, second = tmp_path / "out", {}
    real = log_import.crows_tables

    def while_scoring(*a, **k):
        if not second:
            second["started"] = True                  # once: the second import scores here too if it gets this far
            second["rc"], second["err"] = _cli(["import", "lm-eval", str(GEMMA_EN), "--out", str(out)], capsys)
        return real(*a, **k)
    monkeypatch.setattr(log_import, "crows_tables", while_scoring)
    rc = _cli(["import", "lm-eval", str(CROWS_EN), "--out", str(out)], capsys)[0]
    assert rc == 0
    _one_line_error(second["rc"], second["err"], "being written by another run")
    assert set(pd.read_csv(out / "tables" / "pair_scores.csv").model) == {"smollm2-135m-instruct"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]          # no lock or staging folder left


def _record_text(eee_dir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(eee_dir.rglob("*.json*")))


def _imported_and_exported(tmp_path, capsys) -> dict:
    """CROWS_EN copied to a folder of this machine, imported and exported: the export of its one model."""
    src = tmp_path / "logs" / "deep" / "smollm2"
    shutil.copytree(CROWS_EN, src)
    out = tmp_path / "imp"
    assert _cli(["import", "lm-eval", str(src), "--out", str(out)], capsys)[0] == 0
    (r,) = eee.export_run(out, tmp_path / "eee").values()
    return r


def test_imported_records_name_the_harness_and_its_version_its_commit_unknown(tmp_path, capsys):
    """The EEE record of an imported lm-eval run: eval_library is lm-eval at the version its log states; its own
    commit is unknown; its log's git_hash (a commit of this repository, where it was started) is named as the
    launch folder's, never as the harness's."""
    lib = _imported_and_exported(tmp_path, capsys)["aggregate"]["eval_library"]
    res = _results(CROWS_EN)
    assert lib["name"] == "lm-evaluation-harness" and lib["version"] == res["lm_eval_version"] == "0.4.13"
    details = lib["additional_details"]
    assert details["local_crows_en.harness_commit"] == "unknown"
    assert details["local_crows_en.launch_dir_git_commit"] == res["git_hash"]
    assert [k for k, v in details.items() if v == res["git_hash"]] == ["local_crows_en.launch_dir_git_commit"]
    assert "not the harness's" in details["commits"] and details["converted_by"].startswith("biaslab ")


def test_records_name_no_absolute_local_path(tmp_path, capsys):
    """No absolute local path (the model folder of lm-eval's model_args, the log's location) is in any record."""
    r = _imported_and_exported(tmp_path, capsys)
    res = _results(CROWS_EN)
    assert res["config"]["model_args"]["pretrained"].startswith("/")           # the log names a local folder
    text = _record_text(tmp_path / "eee")
    for local in (str(tmp_path), str(Path.home()), res["config"]["model_args"]["pretrained"], "/root/", "/tmp/"):
        assert local not in text, local
    assert "pretrained=<local>/smollm2-135m-instruct" in r["aggregate"]["model_info"]["additional_details"][
        "model_args"]
    assert eee.no_local_paths("C:\\Users\\me\\m,x=/opt/a/b https://hf.co/x and/or ~/y") == \
        "<local>/m,x=<local>/b https://hf.co/x and/or <local>/y"


def test_a_reimport_exported_again_replaces_its_own_record(tmp_path, capsys):
    """The evaluation id of an imported run derives from the log it was read from, not from the MANIFEST (which
    holds the import's wall time): importing the same log again and exporting to the same place leaves one
    record; another log is another record."""
    out, dest = tmp_path / "imp", tmp_path / "eee"
    ids = []
    for _ in range(2):
        assert _cli(["import", "lm-eval", str(CROWS_EN), "--out", str(out)], capsys)[0] == 0
        ids.append(next(iter(eee.export_run(out, dest).values()))["aggregate"]["evaluation_id"])
    assert ids[0] == ids[1]
    assert len(list(dest.rglob("*.json"))) == 1 and len(list(dest.rglob("*_samples.jsonl"))) == 1
    assert _cli(["import", "lm-eval", str(GEMMA_EN), "--out", str(out)], capsys)[0] == 0
    eee.export_run(out, dest)
    assert len(list(dest.rglob("*.json"))) == 2


def test_an_imported_mbbq_run_round_trips_through_every_eval_ever_with_every_item(tmp_path, capsys):
    """lm-eval's MBBQ run (English and Dutch, 96 rows): every item becomes an instance record and comes back equal;
    each aggregate result names its own language's task, not all of them at once; the records import again as
    MBBQ, per language."""
    imp = tmp_path / "imp"
    assert _cli(["import", "lm-eval", str(MBBQ_RUN), "--out", str(imp)], capsys)[0] == 0
    original = pd.read_csv(imp / "tables" / "mbbq_responses.csv")
    assert len(original) == 96
    (r,) = eee.export_run(imp, tmp_path / "eee").values()
    assert len(r["instances"]) == 96
    assert {(i["metadata"]["language"], i["metadata"]["set"]) for i in r["instances"]} == {
        (lang, s) for lang in ("en", "nl") for s in ("bias", "control")}
    back = eee.tables_from_records(eee.read_records(tmp_path / "eee"))["mbbq_responses"]
    pd.testing.assert_frame_equal(back[list(original.columns)], original, check_dtype=False, check_exact=True)
    scored = [x for x in r["aggregate"]["evaluation_results"]
              if x["source_data"]["additional_details"]["table"] == "tables/mbbq_accuracy_bias_score_intervals.csv"]
    assert len(scored) == 2 * 2 * 2 * 2             # language x set x context x (accuracy, bias score)
    for x in scored:
        lang = x["source_data"]["additional_details"]["language"]
        assert x["source_data"]["dataset_name"] == f"local_mbbq_{lang}"
    assert {lg.kind for lg in importers.read("eee", tmp_path / "eee")} == {"mbbq"}
    assert _cli(["import", "eee", str(tmp_path / "eee"), "--out", str(tmp_path / "again")], capsys)[0] == 0
    t = pd.read_csv(tmp_path / "again" / "tables" / "mbbq_accuracy_bias_score_intervals.csv")
    first = pd.read_csv(imp / "tables" / "mbbq_accuracy_bias_score_intervals.csv")
    cols = ["language", "set", "context_condition", "n", "accuracy", "bias_score"]
    pd.testing.assert_frame_equal(t[cols], first[cols], check_dtype=False)
