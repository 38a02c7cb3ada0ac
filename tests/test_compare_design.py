"""Notebook 5 uses the source notebook's design and function, so one effect has one interval in the report, on
fabricated outputs roots (fast; the end-to-end checks on notebook runs are in
test_compare.py):

* SSQA is crossed (template x stigma): notebook 5's rate interval and paired difference are notebook 1's functions on
  ``benchmarks.ssqa.CLUSTERS`` — before, notebook 5 clustered on template only (Llama 0.335 got [0.236, 0.446] there
  and [0.229, 0.456] in notebook 1);
* BBQ's pair rows follow the same rule as every other metric (null 0, t(G - 1) test with its df and statistic, a CR1
  interval of the linearized scores), and its model intervals are notebook 1's ``bbq.score_intervals``;
* CALM's per-template rows are read for the paper variant only: ``n_units`` is the number of templates the score
  rests on (before: 24 rows for Gemma's 22 templates, the released variant's rows counted too).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.benchmarks import ssqa
from biaslab.papers import compare
from biaslab.benchmarks.bbq import score_intervals
from biaslab.stats import intervals, paired
from biaslab import plan as P
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with


def _write(root: Path, folder: str, stem: str, df: pd.DataFrame) -> None:
    d = root / folder / "tables"
    d.mkdir(parents=True, exist_ok=True)
    df.to_csv(d / f"{stem}.csv", index=False)


def _ssqa(root: Path, with_stigma: bool = True) -> pd.DataFrame:
    """Two released models on 37 templates x 12 stigmas x 2 prompts; strong template *and* stigma effects."""
    rng = np.random.default_rng(0)
    t, s = np.meshgrid(np.arange(37), np.arange(12), indexing="ij")
    t, s = np.repeat(t.ravel(), 2), np.repeat(s.ravel(), 2)
    eta = rng.normal(0, 1.0, 37)[t] + rng.normal(0, 1.2, 12)[s]
    rows = []
    for model, shift in (("granite", -0.4), ("llama", 0.0)):
        y = (rng.random(t.size) < 1 / (1 + np.exp(-(eta + shift)))).astype(int)
        rows.append(pd.DataFrame({"prompt_id": [f"p{i}" for i in range(t.size)], "model": model, "cot": "no",
                                  "answer": np.where(y == 1, "yes", "no"), "deviated": y,
                                  "template": [f"T{x:02d}" for x in t], "stigma": [f"s{x}" for x in s]}))
    r = pd.concat(rows, ignore_index=True)
    _write(root, "01_multifactor/ssqa", "released_answers",
           r.groupby("model")["deviated"].mean().rename("deviation_rate").reset_index())
    _write(root, "01_multifactor/ssqa", "responses_released", r if with_stigma else r.drop(columns="stigma"))
    return r


def test_ssqa_intervals_and_pairs_are_notebook_1s_on_the_crossed_design(tmp_path):
    r = _ssqa(tmp_path)
    m = compare.metric("ssqa_deviation_rate")
    assert tuple(m.cluster) == ssqa.CLUSTERS == ("template", "stigma")
    table = compare.model_metric_table(tmp_path, [m]).set_index("model")
    nb1 = intervals.rate_intervals(r, "deviated", list(ssqa.CLUSTERS), by="model").set_index("model")
    for col in ("ci_low", "ci_high", "n_clusters", "ci_method"):
        assert (table[col] == nb1[col]).all(), col
    assert table["ci_method"].str.contains("two-way").all()
    one_way = intervals.rate_intervals(r, "deviated", "template", by="model").set_index("model")
    assert ((one_way["ci_high"] - one_way["ci_low"]) < (nb1["ci_high"] - nb1["ci_low"])).all()   # the old, narrower
    p = compare.paired_table(tmp_path, [m], plan=PLAN).iloc[0]
    ref = paired.paired_difference(r, "deviated", p["model_a"], p["model_b"], list(ssqa.CLUSTERS))
    for col in ("difference", "ci_low", "ci_high", "p_value", "df", "ci_method"):
        assert p[col] == ref[col], col
    assert p["ci_method"].startswith("cluster-robust t(11), CR1 two-way (CGM) SE")


def test_a_source_without_the_crossed_column_says_so(tmp_path):
    _ssqa(tmp_path, with_stigma=False)
    t = compare.model_metric_table(tmp_path, [compare.metric("ssqa_deviation_rate")])
    assert t["ci_method"].str.endswith("(cluster column stigma missing from the source responses: clustered on "
                                       "template only)").all()


def _bbq(root: Path) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for model, bias in (("a", 0.15), ("b", -0.1)):
        for cond in ("ambig", "disambig"):
            n = 40 * 6
            tmpl = np.repeat(np.arange(40), 6)
            u = rng.random(n) + rng.normal(0, 0.15, 40)[tmpl]
            unknown = (u < 0.3).astype(int)
            dev = ((u >= 0.3) & (rng.random(n) < 0.5 + bias)).astype(int)
            correct = np.where(cond == "ambig", unknown, (rng.random(n) < 0.6)).astype(int)
            rows.append(pd.DataFrame({"prompt_id": [f"{cond}{i}" for i in range(n)], "model": model,
                                      "context_condition": cond, "template": tmpl, "chose_unknown": unknown,
                                      "deviated": dev, "correct": correct}))
    r = pd.concat(rows, ignore_index=True)
    from biaslab.benchmarks import bbq
    _write(root, "01_multifactor/bbq", "accuracy_bias_scores", bbq.bias_scores(r, ["model"]))
    _write(root, "01_multifactor/bbq", "responses", r)
    return r


def test_bbq_pairs_and_intervals_follow_the_rule(tmp_path):
    r = _bbq(tmp_path)
    ms = [compare.metric("bbq_bias_ambig"), compare.metric("bbq_bias_disambig")]
    table = compare.model_metric_table(tmp_path, ms)
    assert np.allclose(table["estimate"], table["estimate_from_responses"])
    nb1 = score_intervals(r, ["model"], "template")
    for row in table.itertuples():
        ref = nb1[(nb1["model"] == row.model) & (nb1["context_condition"] == row.metric.split("_")[-1])].iloc[0]
        assert (row.ci_low, row.ci_high, row.ci_method) == (ref["bias_ci_low"], ref["bias_ci_high"],
                                                            ref["bias_ci_method"])
    pairs = compare.paired_table(tmp_path, ms, plan=PLAN)
    assert (pairs["null_value"] == 0).all() and pairs["excludes_null"].notna().all()
    assert (pairs["df"] == 39).all() and pairs["statistic"].notna().all()
    assert (pairs["p_method"] == "Wald t(39) on the CR1 SE").all()
    assert pairs["ci_method"].str.startswith("cluster-robust t(39), CR1 SE").all()
    assert not pairs["ci_method"].str.contains("percentile").any()
    # the difference is the difference of the two scores on the prompts both answered
    est = table.set_index(["metric", "model"])["estimate"]
    for p in pairs.itertuples():
        assert p.difference == pytest.approx(est[p.metric, p.model_a] - est[p.metric, p.model_b])
        assert p.ci_low < p.difference < p.ci_high


def test_calm_units_are_the_paper_variants_templates(tmp_path):
    rows = []
    for variant, used in (("paper", [True] * 22 + [False] * 2), ("released", [True] * 2 + [False] * 22)):
        rows.append(pd.DataFrame({"model": "gemma", "task": "qa", "bias_type": np.repeat(["gender", "race"], 12),
                                  "template_id": [f"qa-{i % 12:03d}" for i in range(24)],
                                  "bias_paper": np.linspace(0, 100, 24), "used": used, "variant": variant}))
    tb = pd.concat(rows, ignore_index=True)
    _write(tmp_path, "02_calm", "template_bias", tb)
    _write(tmp_path, "02_calm", "bias_scores", pd.DataFrame([{
        "model": "gemma", "variant": "paper", "task": "all", "bias_type": "all", "bias_score": 50.0, "ci_low": 0.0,
        "ci_high": 300.0, "ci_method": "projection", "n_templates_used": 22}]))
    t = compare.model_metric_table(tmp_path, [compare.metric("calm_bias_overall")]).iloc[0]
    assert t["n_units"] == t["n_prompt_set"] == 22
    # a filter that lets two variants' rows of one template through is an error, not a double count
    _write(tmp_path, "02_calm", "template_bias", tb.assign(variant="paper"))
    with pytest.raises(ValueError, match="repeat after filtering"):
        compare.model_metric_table(tmp_path, [compare.metric("calm_bias_overall")])


def test_agreement_table_of_one_metric_has_its_columns_and_no_rows():
    """An outputs root with one benchmark's run (e.g. notebook 3 on imported logs) has no pair of metrics."""
    table = pd.DataFrame({"metric": ["m", "m"], "model": ["a", "b"], "estimate": [0.6, 0.7], "orientation": [1, 1]})
    one = compare.agreement_table(table)
    assert one.empty and {"metric_a", "metric_b", "n_models", "rho", "ci_low", "ci_high", "status"} <= set(one)
    two = compare.agreement_table(pd.concat([table, table.assign(metric="n", estimate=[0.2, 0.1])]))
    assert list(one.columns) == list(two.columns) and len(two) == 1
