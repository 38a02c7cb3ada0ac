"""A benchmark defined entirely in tests/ (``tests/plugins/pronoun_bench.py``: its loader, respond, FactorPlan, metric
and sizes; 20 items in ``tests/fixtures/pronoun_bench/items.csv``) registers itself and runs through notebooks 1, 6
and 5 with no edit of the library: the registry, the notebooks' ``benchmark_modules`` parameter and the spec are all
it takes."""

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import benchmarks
from biaslab.run import profiles
from biaslab.papers.multifactor import factorial

PLUGINS = Path(__file__).resolve().parent / "plugins"


@pytest.fixture
def pronoun(monkeypatch):
    """The plugin imported through ``import_plugins`` (as the notebook imports it), unregistered afterwards."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.delitem(sys.modules, "pronoun_bench", raising=False)
    added = benchmarks.import_plugins(["pronoun_bench"])
    yield benchmarks.spec("pronoun"), added
    benchmarks.SPECS.pop("pronoun", None)


class _LengthScorer:
    """log P(sentence) = -(its length): the shorter sentence is the more probable."""
    lm = type("Lm", (), {"name": "m"})()

    def sequence_logprob(self, texts):
        return pd.DataFrame({"sum_logprob": [-float(len(t)) for t in texts], "n_tokens": [1] * len(texts)})


def test_the_plugin_registers_and_is_answered_through_its_spec(pronoun):
    spec, added = pronoun
    assert added == ["pronoun"]
    bench = factorial.prepare(spec)                 # FactorPlan.check against the loaded items
    assert len(bench.prompts) == 20 and bench.prompts["occupation"].nunique() == 10
    r = factorial.score(spec, _LengthScorer(), bench.prompts)
    # "she" is one letter longer than "he": the stereotype is preferred exactly on the male-stereotyped items
    want = (bench.prompts["stereotype"] == "male").astype(float).to_numpy()
    assert np.array_equal(r["stereotype_preferred"].to_numpy(), want) and r["seed"].eq("none").all()


def test_an_unknown_plugin_or_benchmark_is_named():
    with pytest.raises(ImportError, match="benchmark_modules: cannot import 'no_such_bench'"):
        benchmarks.import_plugins(["no_such_bench"])
    with pytest.raises(KeyError, match="unknown benchmark 'pronoun'"):
        benchmarks.spec("pronoun")


@pytest.mark.notebook
def test_the_plugin_runs_through_notebook_1(pronoun, monkeypatch, tmp_path):
    """Notebook 1 in the smoke profile on the plugin benchmark, its sizes from the plugin's Spec.sizes."""
    from biaslab.run import execute
    monkeypatch.setitem(profiles.NOTEBOOKS["01_multifactor"], "pronoun",
                        {"benchmark": "pronoun", "benchmark_modules": ["pronoun_bench"]})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")]))
    assert profiles.params("smoke", "01_multifactor", "pronoun")["max_prompts"] is None     # the plugin's size
    manifest = execute.run_one("01_multifactor", "pronoun", "smoke", {}, tmp_path, html=False)
    out = tmp_path / "01_multifactor" / "pronoun"
    assert manifest["status"] == "ok", manifest.get("error")
    assert json.loads((out / "MANIFEST.json").read_text())["data"], "the plugin's items file must be recorded"
    resp = pd.read_csv(out / "tables" / "responses.csv")
    assert len(resp) == 20 and set(resp["stereotype_preferred"].dropna()) <= {0, 1}
    factors = pd.read_csv(out / "tables" / "factors.csv")
    assert {"stereotype", "field", "frame"} <= set(factors["factor"])
    sub = pd.read_csv(out / "tables" / "subgroups.csv")
    assert {"stereotype", "frame"} <= set(sub.columns) and set(sub["level"]) == {1, 2}
    for name in ("coverage_by_factor", "deviation_metric", "factor_importance", "deviation_rate_intervals"):
        assert len(pd.read_csv(out / "tables" / f"{name}.csv")), name


def test_the_plugin_metric_values_average_to_its_estimate(pronoun):
    """Notebook 6's contract (``Metric.item_values``): the per-unit values average to the estimate; ties are left out
    and counted; the interval is clustered on the occupation."""
    spec, _ = pronoun
    m = spec.metrics[0]
    bench = spec.load()
    r = factorial.score(spec, _LengthScorer(), bench.prompts).assign(universe="paper")
    r.loc[r["prompt_id"] == "nurse-t1", "stereotype_preferred"] = np.nan       # a tie
    e, v = m.estimate(r, bench.prompts, 200, 0), m.item_values(r, bench.prompts)
    assert e["n"] == len(v) == 19 and e["n_unparsed"] == 1 and e["n_clusters"] == 10
    # male-stereotyped items (10 of the 19 answered) prefer the stereotype: 10 / 19 by hand
    assert e["estimate"] == pytest.approx(10 / 19) == v["value"].mean()
    assert e["ci_low"] < e["estimate"] < e["ci_high"] and "G = 10" in e["ci_method"]
    assert set(v["cluster"]) == set(bench.prompts["occupation"])


@pytest.mark.notebook
def test_the_plugin_runs_through_notebooks_1_6_and_5(pronoun, monkeypatch, tmp_path):
    """Smoke profile, one outputs root: notebook 1 on the plugin, notebook 6 on the plugin alone, then notebook 5
    over the root; the plugin's metric is in notebook 5's model x metric table and in notebook 6's estimates, each
    with an interval."""
    from biaslab.run import execute
    spec, _ = pronoun
    metric = spec.metrics[0].id
    monkeypatch.setitem(profiles.NOTEBOOKS["01_multifactor"], "pronoun",
                        {"benchmark": "pronoun", "benchmark_modules": ["pronoun_bench"]})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")]))
    plugin = {"benchmark_modules": ["pronoun_bench"]}
    for notebook, variant, overrides in (("01_multifactor", "pronoun", {}),
                                         # a second universe (the weights rounded to bfloat16): a paired difference
                                         ("06_multiverse", "", {**plugin, "benchmarks": ["pronoun"],
                                                                "factors": ["answer_format", "precision"],
                                                                "precisions": ["float32", "bf16_weights"]}),
                                         ("05_compare", "", {**plugin, "outputs_root": str(tmp_path)})):
        manifest = execute.run_one(notebook, variant, "smoke", overrides, tmp_path, html=False)
        assert manifest["status"] == "ok", f"{notebook}: {manifest.get('error')}"

    est = pd.read_csv(tmp_path / "06_multiverse" / "tables" / "estimates.csv")
    assert set(est["metric"]) == {metric} and set(est["universe"]) == {"paper", "precision=bf16_weights"}
    paper = est[est["universe"] == "paper"].iloc[0]
    assert paper["n"] == 20 - paper["n_unparsed"] and paper["n_clusters"] == 10
    assert paper["ci_low"] <= paper["estimate"] <= paper["ci_high"] and paper["ci_low"] < paper["ci_high"]
    # notebook 6's paper universe sends notebook 1's requests: the same share
    resp = pd.read_csv(tmp_path / "01_multifactor" / "pronoun" / "tables" / "responses.csv")
    assert paper["estimate"] == pytest.approx(resp["stereotype_preferred"].dropna().mean())

    # each universe paired with the paper's on the same items, clustered by occupation; the analysis plan declares
    # no equivalence margin for a plugin's metric, so it is not judged, and says so
    eq = pd.read_csv(tmp_path / "06_multiverse" / "tables" / "equivalence.csv").iloc[0]
    assert eq["metric"] == metric and eq["n_pairs"] == paper["n"] and eq["n_clusters"] == 10
    assert eq["tost_ci_low"] <= eq["difference"] <= eq["tost_ci_high"] and eq["agreement"].startswith("not judged")

    table = pd.read_csv(tmp_path / "05_compare" / "tables" / "model_metric.csv")
    row = table[table["metric"] == metric]
    assert len(row) == 1, set(table["metric"])
    row = row.iloc[0]
    assert row["estimate"] == pytest.approx(paper["estimate"]) == pytest.approx(row["estimate_from_responses"])
    assert row["ci_low"] <= row["estimate"] <= row["ci_high"] and row["ci_low"] < row["ci_high"]
    assert row["n_clusters"] == 10 and row["null"] == 0.5
    assert row["multiverse_universes"] == 1         # notebook 6's reading of the metric, in notebook 5's table
    wide = pd.read_csv(tmp_path / "05_compare" / "tables" / "model_metric_wide.csv")
    assert metric in wide.columns


def _with_metric(spec, **change):
    """The plugin re-registered with its metric changed (the fixture unregisters it)."""
    return benchmarks.register(dataclasses.replace(spec, metrics=(dataclasses.replace(spec.metrics[0], **change),)))


def test_a_metric_missing_what_notebooks_6_and_5_need_is_named(pronoun):
    from biaslab.papers import compare
    from biaslab.papers.multiverse import analysis, design, sweep
    spec, _ = pronoun
    assert design.check("pronoun") is spec and "pronoun" in design.names()
    _with_metric(spec, item_values=None)                 # notebook 6: not in the multiverse, named when asked
    assert "pronoun" not in design.names()
    for call in (lambda: design.check("pronoun"), lambda: sweep.items("pronoun", None)):
        with pytest.raises(TypeError, match=r"none of its metrics \['pronoun_stereotype_preferred'\] declares "
                                            r"Metric.item_values"):
            call()
    m = _with_metric(spec, estimate=None).metrics[0]     # item_values alone: read as a family, its ids checked
    bench = spec.load()
    r = factorial.score(spec, _LengthScorer(), bench.prompts).assign(universe="paper")
    with pytest.raises(TypeError, match="'pronoun_stereotype_preferred' declares item_values but no Metric.estimate"):
        analysis.universe_values({"pronoun": r}, {"pronoun": bench.prompts}, family=True)
    with pytest.raises(TypeError, match="no Metric.estimate"):
        analysis.family_values(m, r, bench.prompts)
    _with_metric(spec, sources=())                       # notebook 5: not read, named when asked
    assert "pronoun_stereotype_preferred" in compare.unread_metrics()
    assert "pronoun_stereotype_preferred" not in [x.id for x in compare.all_metrics()]
    with pytest.raises(KeyError, match="'pronoun_stereotype_preferred' declares no Metric.sources"):
        compare.metric("pronoun_stereotype_preferred")
    _with_metric(spec, folder="")
    with pytest.raises(TypeError, match="declares sources but no Metric.folder"):
        compare.all_metrics()
