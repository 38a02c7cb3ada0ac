"""A benchmark defined entirely in tests/ (``tests/plugins/pronoun_bench.py``: its loader, respond, FactorPlan and
sizes; 20 items in ``tests/fixtures/pronoun_bench/items.csv``) registers itself and runs through notebook 1 with no
edit of the library: the registry, the notebook's ``benchmark_modules`` parameter and the spec are all it takes."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import benchmarks, profiles
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
    from biaslab import runner
    monkeypatch.setitem(profiles.NOTEBOOKS["01_multifactor"], "pronoun",
                        {"benchmark": "pronoun", "benchmark_modules": ["pronoun_bench"]})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")]))
    assert profiles.params("smoke", "01_multifactor", "pronoun")["max_prompts"] is None     # the plugin's size
    manifest = runner.run_one("01_multifactor", "pronoun", "smoke", {}, tmp_path, html=False)
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
