"""A benchmark kept outside the library (``tests/plugins/pronoun_bench/``: its loader, respond, FactorPlan, metric,
sizes and its own sources table; 20 items mirrored in ``tests/fixtures/pronoun_bench/``) is loaded by
``--benchmark-module`` or an entry point, fetched by ``biaslab data fetch``, checked by ``biaslab check-benchmark``,
and runs through notebooks 1, 6 and 5 by ``biaslab reproduce`` alone; what would shadow a benchmark, misfile a run or
ask an empty text is refused in one line."""

import dataclasses
import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import benchmarks, cli, paths, sources
from biaslab.papers.multifactor import factorial
from biaslab.run import check_benchmark, execute, parameters, profiles
from helpers import load_or_skip, registry_restored

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "plugins" / "pronoun_bench"
MIRROR = HERE / "fixtures" / "pronoun_bench"


@pytest.fixture
def registry(monkeypatch, tmp_path):
    """The registry, the loaded plugins and the sources tables restored afterwards; the plugin's items fetched from
    the fixture mirror into a fresh raw folder (the kernels read it through BIASLAB_RAW_DIR)."""
    raw = tmp_path / "raw"
    monkeypatch.setenv("BIASLAB_RAW_DIR", str(raw))
    monkeypatch.setattr(paths, "RAW_DIR", raw)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for m in [m for m in sys.modules if m.split(".")[0] in ("pronoun_bench", "broken_bench", "bbq_again")]:
        monkeypatch.delitem(sys.modules, m)
    with registry_restored():
        yield raw


@pytest.fixture
def pronoun(registry):
    added = benchmarks.load_plugins([str(PLUGIN)])
    sources.fetch(["pronoun"], mirror=MIRROR)
    return benchmarks.spec("pronoun"), added


def _cli(capsys, *argv) -> tuple[int, str]:
    rc = cli.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_the_plugin_loads_from_its_folder_and_is_recorded(pronoun):
    spec, added = pronoun
    assert added == ["pronoun"] and "pronoun" in profiles.NOTEBOOKS["01_multifactor"]
    rec = benchmarks.PLUGINS["pronoun_bench"]
    # its code, for the MANIFEST: the path inside the repository, never an absolute one, and its sha256
    assert rec["path"] == "tests/plugins/pronoun_bench/__init__.py"
    assert rec["sha256"] == sources.sha256_file(PLUGIN / "__init__.py")
    bench = factorial.prepare(spec)                 # FactorPlan.check against the loaded items
    assert len(bench.prompts) == 20 and bench.prompts["occupation"].nunique() == 10
    r = factorial.score(spec, check_benchmark.FakeScorer(), bench.prompts)
    assert r["stereotype_preferred"].isin([0, 1]).all() and r["seed"].eq("none").all()


def test_an_installed_entry_point_is_loaded(registry, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN.parent))
    ep = importlib.metadata.EntryPoint("pronoun", "pronoun_bench:SPEC", benchmarks.GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == benchmarks.GROUP else [])
    assert benchmarks.load_plugins() == ["pronoun"]
    assert benchmarks.PLUGINS["pronoun_bench"]["how"].startswith("entry point pronoun")


def test_its_sources_table_is_fetched_and_checked(registry, capsys, tmp_path):
    rc, text = _cli(capsys, "data", "fetch", "--only", "pronoun", "--mirror", MIRROR)
    assert rc == 2 and "--benchmark-module" in text            # not loaded: the way to load it is named
    rc, text = _cli(capsys, "data", "fetch", "--benchmark-module", PLUGIN, "--only", "pronoun", "--mirror", MIRROR)
    assert rc == 0 and (registry / "example" / "pronoun-bench" / "items.csv").is_file(), text
    assert [r["state"] for r in sources.status() if r["benchmark"] == "pronoun"] == ["verified"]
    bad = tmp_path / "bad" / "example" / "pronoun-bench"
    bad.mkdir(parents=True)
    (bad / "items.csv").write_text("item_id\n")
    (registry / "example" / "pronoun-bench" / "items.csv").unlink()
    rc, text = _cli(capsys, "data", "fetch", "--benchmark-module", PLUGIN, "--only", "pronoun", "--mirror",
                    tmp_path / "bad")
    assert rc == 2 and "sha256 mismatch" in text and not (registry / "example" / "pronoun-bench" / "items.csv").exists()
    # data/sources.tsv alone is what it was
    assert len(sources.load_manifest(paths.MANIFEST_TSV)) == len(sources.load_manifest()) - 1


def test_an_unknown_plugin_or_benchmark_is_named(registry):
    with pytest.raises(benchmarks.PluginError, match="--benchmark-module 'no_such_bench': cannot import"):
        benchmarks.load_plugins(["no_such_bench"])
    with pytest.raises(KeyError, match="unknown benchmark 'pronoun'.*--benchmark-module"):
        benchmarks.spec("pronoun")
    with pytest.raises(KeyError, match="no registered benchmark 'pronoun'.*--benchmark-module PATH_OR_MODULE"):
        execute.select(["01_multifactor/pronoun"])


def test_a_plugin_cannot_replace_a_benchmark(registry, tmp_path, capsys):
    """A module registering the name ``bbq`` is refused in one line; BBQ stays BBQ."""
    (tmp_path / "bbq_again.py").write_text(
        "import dataclasses, sys\nsys.path.insert(0, %r)\nimport pronoun_bench\n"
        "SPEC = dataclasses.replace(pronoun_bench.SPEC, name='bbq')\n" % str(PLUGIN.parent))
    builtin = benchmarks.SPECS["bbq"]
    rc, text = _cli(capsys, "reproduce", "--benchmark-module", tmp_path / "bbq_again.py", "--only",
                    "01_multifactor/bbq", "--dry-run")
    assert rc == 2 and len(text.strip().splitlines()) == 1
    assert "registers the name 'bbq', already the built-in benchmark BBQ; give its Spec another name" in text
    assert benchmarks.SPECS["bbq"] is builtin


def test_a_plugin_run_cannot_be_filed_under_another_benchmark(pronoun):
    """``--only 01_multifactor/ssqa -p benchmark=pronoun`` would write the plugin's run into SSQA's folder with SSQA's
    sizes: refused, naming the command that runs it in its own folder."""
    with pytest.raises(parameters.ParameterError, match=r"-p benchmark=pronoun would run 01_multifactor/ssqa on "
                                                        r"'pronoun'.* run --only 01_multifactor/pronoun"):
        execute.resolve_params("01_multifactor", "ssqa", "smoke", {"benchmark": "pronoun"}, check_models=False)
    assert execute.select(["01_multifactor/pronoun"]) == [("01_multifactor", "pronoun")]
    p = execute.resolve_params("01_multifactor", "pronoun", "smoke", {}, check_models=False)
    assert p["benchmark"] == "pronoun" and p["max_prompts"] is None and p["benchmark_modules"] == ["pronoun_bench"]


def test_an_empty_text_cell_is_refused_with_its_row(pronoun):
    """An empty sentence was asked as the text "nan"; it is refused, naming the column and the row."""
    spec, _ = pronoun
    items = spec.load().prompts
    items.loc[items["prompt_id"] == "nurse-t1", "sent_anti"] = np.nan
    with pytest.raises(sources.DataError, match=r"empty item cells \(sent_anti in prompt_id nurse-t1\).*Fix: fill"):
        factorial.score(spec, check_benchmark.FakeScorer(), items)


def test_nan_in_the_cluster_column_is_named(pronoun):
    spec, _ = pronoun
    b = spec.load()
    prompts = b.prompts.assign(occupation=b.prompts["occupation"].where(b.prompts["prompt_id"] != "nurse-t2"))
    with pytest.raises(sources.DataError, match=r"cluster column 'occupation' is empty in 1 row\(s\) \(prompt_id "
                                                r"nurse-t2\)\. Fix: fill it"):
        benchmarks.Benchmark("pronoun", prompts, b.factors, cluster="occupation")


def test_the_plugin_metric_values_average_to_its_estimate(pronoun):
    """Notebook 6's contract (``Metric.item_values``): the per-unit values average to the estimate; ties are left out
    and counted; the interval is clustered on the occupation."""
    spec, _ = pronoun
    m = spec.metrics[0]
    bench = spec.load()

    class Length(check_benchmark.FakeScorer):       # log P(sentence) = -(its length): "she" is the less probable
        def sequence_logprob(self, texts, per_token=False):
            return pd.DataFrame({"sum_logprob": [-float(len(t)) for t in texts], "n_tokens": [1] * len(texts)})

    r = factorial.score(spec, Length(), bench.prompts).assign(universe="paper")
    r.loc[r["prompt_id"] == "nurse-t1", "stereotype_preferred"] = np.nan       # a tie
    e, v = m.estimate(r, bench.prompts, 200, 0), m.item_values(r, bench.prompts)
    assert e["n"] == len(v) == 19 and e["n_unparsed"] == 1 and e["n_clusters"] == 10
    # male-stereotyped items (10 of the 19 answered) prefer the stereotype: 10 / 19 by hand
    assert e["estimate"] == pytest.approx(10 / 19) == v["value"].mean()
    assert e["ci_low"] < e["estimate"] < e["ci_high"] and "G = 10" in e["ci_method"]
    assert set(v["cluster"]) == set(bench.prompts["occupation"])


BROKEN = """import dataclasses, sys
sys.path.insert(0, {root!r})
import pronoun_bench as base
m = dataclasses.replace(base.SPEC.metrics[0], folder="01_multifactor/broken", **{metric})
SPEC = dataclasses.replace(base.SPEC, name="broken", metrics=(m,), **{spec})
"""


@pytest.mark.parametrize("spec, metric, named", [
    ({}, {}, None),
    ({"sample": None}, {}, "notebook 6: Spec.sample(n, seed=) -> (items, Benchmark): TypeError: benchmark 'broken' "
                           "declares no Spec.sample"),
    ({"columns": ("prompt_id", "model", "stereotype_preferred", "answer", "p_stereo")}, {},
     "respond returned no column(s) ['p_stereo']"),
    ({}, {"outcome": "stereotype_prefered"}, "the derived responses has no column(s) ['stereotype_prefered']"),
    ({}, {"id": "bbq_bias_ambig"}, "metric 'bbq_bias_ambig' is also a metric of ['bbq']"),
    ({}, {"responder_reads": ("answr",)}, "Metric.responder_reads ['answr'] label no row"),
], ids=["intact", "missing hook", "wrong column", "wrong outcome", "misnamed metric", "misnamed responder rows"])
def test_check_benchmark_names_each_broken_piece(pronoun, tmp_path, capsys, spec, metric, named):
    benchmarks.SPECS.pop("pronoun")          # its items fetched; the variant alone is registered
    (tmp_path / "broken_bench.py").write_text(BROKEN.format(root=str(PLUGIN.parent), spec=spec, metric=metric))
    rc, text = _cli(capsys, "check-benchmark", tmp_path / "broken_bench.py")
    if named is None:
        assert rc == 0 and "FAIL" not in text and "every hook holds" in text, text
    else:
        assert rc == 1 and named in text and "problem(s) in" in text, text
        assert all("Fix: " in line or line.endswith(": as above") for line in text.splitlines()
                   if line.startswith("FAIL")), text


def test_check_benchmark_reads_the_contract_the_built_in_benchmarks_keep():
    spec = benchmarks.spec("winogender")
    load_or_skip(spec.load, "Winogender")
    assert check_benchmark.check_spec(spec, 8, check_benchmark.Checks(out=lambda line: None)) == []


def test_check_benchmark_passes_on_the_plugin(pronoun, capsys):
    rc, text = _cli(capsys, "check-benchmark", PLUGIN)
    assert rc == 0 and text.count("\nok    ") >= 12 and "every hook holds" in text, text


@pytest.mark.notebook
def test_the_plugin_runs_through_notebooks_1_6_and_5_by_reproduce_alone(pronoun, tmp_path, capsys):
    """``biaslab reproduce --benchmark-module tests/plugins/pronoun_bench`` in the smoke profile, one outputs root:
    notebook 1 on the plugin (its own folder, its own sizes), notebook 6 on it, then notebook 5 over the root; the
    plugin's metric is in notebook 5's model x metric table and in notebook 6's estimates, each with an interval, and
    every MANIFEST records the plugin's code without an absolute path."""
    spec, _ = pronoun
    metric = spec.metrics[0].id
    out = tmp_path / "out"
    for only, extra in (("01_multifactor/pronoun", ()),
                        # a second universe (the weights rounded to bfloat16): a paired difference
                        ("06", ("-p", 'benchmarks=["pronoun"]', "-p", 'factors=["answer_format", "precision"]',
                                "-p", 'precisions=["float32", "bf16_weights"]')),
                        ("05", ())):
        rc, text = _cli(capsys, "reproduce", "--profile", "smoke", "--only", only, "--out", out, "--no-html",
                        "--benchmark-module", PLUGIN, *extra)
        assert rc == 0, text
    for folder in ("01_multifactor/pronoun", "06_multiverse", "05_compare"):
        raw = (out / folder / "MANIFEST.json").read_text()
        assert str(paths.ROOT) not in raw, folder       # (the --out folder is recorded as given)
        rec = json.loads(raw)["benchmark_modules"]
        assert rec == [{"module": "pronoun_bench", "path": "tests/plugins/pronoun_bench/__init__.py",
                        "sha256": sources.sha256_file(PLUGIN / "__init__.py"), "benchmarks": ["pronoun"]}], folder
    n1 = out / "01_multifactor" / "pronoun"
    assert json.loads((n1 / "MANIFEST.json").read_text())["data"], "the plugin's items file must be recorded"
    resp = pd.read_csv(n1 / "tables" / "responses.csv")
    assert len(resp) == 20 and set(resp["stereotype_preferred"].dropna()) <= {0, 1}   # all 20: the plugin's size
    assert {"stereotype", "field", "frame"} <= set(pd.read_csv(n1 / "tables" / "factors.csv")["factor"])
    for name in ("coverage_by_factor", "deviation_metric", "factor_importance", "deviation_rate_intervals"):
        assert len(pd.read_csv(n1 / "tables" / f"{name}.csv")), name

    est = pd.read_csv(out / "06_multiverse" / "tables" / "estimates.csv")
    assert set(est["metric"]) == {metric} and set(est["universe"]) == {"paper", "precision=bf16_weights"}
    paper = est[est["universe"] == "paper"].iloc[0]
    assert paper["n"] == 20 - paper["n_unparsed"] and paper["n_clusters"] == 10
    assert paper["ci_low"] <= paper["estimate"] <= paper["ci_high"] and paper["ci_low"] < paper["ci_high"]
    # notebook 6's paper universe sends notebook 1's requests: the same share
    assert paper["estimate"] == pytest.approx(resp["stereotype_preferred"].dropna().mean())
    # each universe paired with the paper's on the same items, clustered by occupation; the analysis plan declares
    # no equivalence margin for a plugin's metric, so it is not judged, and says so; where no pair differs (bf16
    # weights moved no preference), no interval can be had, and it says that
    eq = pd.read_csv(out / "06_multiverse" / "tables" / "equivalence.csv").iloc[0]
    assert eq["metric"] == metric and eq["n_pairs"] == paper["n"] and eq["n_clusters"] == 10
    if pd.isna(eq["tost_ci_low"]):
        assert eq["difference"] == 0 and eq["agreement"].startswith("not estimable (no variation"), eq.to_dict()
    else:
        assert eq["tost_ci_low"] <= eq["difference"] <= eq["tost_ci_high"] and eq["agreement"].startswith("not judged")

    table = pd.read_csv(out / "05_compare" / "tables" / "model_metric.csv")
    row = table[table["metric"] == metric]
    assert len(row) == 1, set(table["metric"])
    row = row.iloc[0]
    assert row["estimate"] == pytest.approx(paper["estimate"]) == pytest.approx(row["estimate_from_responses"])
    assert row["ci_low"] <= row["estimate"] <= row["ci_high"] and row["ci_low"] < row["ci_high"]
    assert row["n_clusters"] == 10 and row["null"] == 0.5
    assert row["multiverse_universes"] == 1         # notebook 6's reading of the metric, in notebook 5's table
    assert metric in pd.read_csv(out / "05_compare" / "tables" / "model_metric_wide.csv").columns


def _with_metric(spec, **change):
    """The plugin re-registered with its metric changed (the fixture restores the registry)."""
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
    r = factorial.score(spec, check_benchmark.FakeScorer(), bench.prompts).assign(universe="paper")
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
