"""The factor framework on every benchmark: each SPEC's FactorPlan, its rules, and notebook 1's generic glue."""

import numpy as np
import pandas as pd
import pytest

from biaslab import benchmarks
from biaslab.run import profiles
from biaslab.benchmarks import agentic, crows_pairs as cp
from biaslab.benchmarks.spec import FactorPlan, Spec
from biaslab.papers.multifactor import factorial, responses as multifactor
from biaslab.stats import coverage as cov

PLANNED = [n for n, s in benchmarks.SPECS.items() if s.factor_plan is not None]


@pytest.fixture(scope="module")
def agentic_bench():
    return factorial.prepare(benchmarks.spec("agentic"))


def test_every_benchmark_with_a_plan_is_a_notebook_1_run_naming_its_outcome():
    assert list(profiles.NOTEBOOKS["01_multifactor"]) == PLANNED and len(PLANNED) >= 5
    expected = {"ssqa": "deviated", "bbq": "deviated", "calm": "correct", "crows_pairs": "stereotype_preferred",
                "agentic": "low_entropy"}
    assert {k: benchmarks.spec(k).factor_plan.outcome for k in expected} == expected


@pytest.mark.parametrize("name", PLANNED)
def test_each_plan_fits_its_benchmark(name):
    """Every factor a plan names is one of its benchmark's (FactorPlan.check), and the sunburst reads subgroups."""
    s = benchmarks.spec(name)
    b = factorial.prepare(s)            # runs FactorPlan.check
    assert set(s.factor_plan.sunburst) <= set(s.factor_plan.subgroup_factors)
    assert b.cluster not in s.factor_plan.regression


_PLAN = dict(coverage_factors=["a", "b"], overall_sets={"a, b": ["a", "b"]}, heatmaps=[("a", "b")],
             sunburst=("a", "b"), subgroup_factors=["a", "b"], ecdf_factors=["a", "b"], regression=["a", "b"],
             regression_subset=["a"], bayes_fixed=["a"], bayes_group=["b"], bayes_group_subset=["b"], strata=["a"])


@pytest.mark.parametrize("change,field", [
    ({"sunburst": ("a", "c")}, "FactorPlan.sunburst"), ({"regression": ["a", "a"]}, "FactorPlan.regression"),
    ({"strata": []}, "FactorPlan.strata"), ({"ideal": 2.0}, "FactorPlan.ideal"),
    ({"chance_factor": "a"}, "FactorPlan.chance_factor"), ({"cot": lambda b: b}, "FactorPlan.cot")])
def test_a_plan_breaking_a_rule_names_the_field(change, field):
    FactorPlan(**_PLAN)                                         # the valid plan
    with pytest.raises(ValueError, match=field):
        FactorPlan(**{**_PLAN, **change})


def test_a_regression_on_the_cluster_or_an_unknown_factor_is_refused_with_its_name():
    b = benchmarks.Benchmark("toy", pd.DataFrame({"prompt_id": ["1", "2"], "a": ["x", "y"], "b": ["u", "v"],
                                                  "unit": ["t1", "t2"]}),
                             benchmarks.FactorSpec([benchmarks.Factor("a", "prompt", ("x", "y"), "x"),
                                                    benchmarks.Factor("b", "prompt", ("u", "v"), "u")]), cluster="unit")
    FactorPlan(**_PLAN).check(b)
    with pytest.raises(ValueError, match=r"FactorPlan.regression of 'toy': \['unit'\] is the cluster"):
        FactorPlan(**{**_PLAN, "regression": ["a", "unit"]}).check(b)
    with pytest.raises(ValueError, match=r"\['zz'\] are not factors"):
        FactorPlan(**{**_PLAN, "strata": ["zz"]}).check(b)


def test_a_spec_missing_a_field_names_it():
    with pytest.raises(TypeError, match="load"):
        Spec(name="x", title="X")                                   # noqa: the required loader
    with pytest.raises(TypeError, match="respond"):
        Spec(name="x", title="X", load=lambda: None, protocol=benchmarks.spec("bbq").protocol, formats=("option_ll",))
    with pytest.raises(TypeError, match="Spec.factor_plan"):
        factorial.plan_of(Spec(name="x", title="X", load=lambda: None))


def test_agentic_coverage_matches_the_documented_balanced_design(agentic_bench):
    """README of data/agentic: 17 domains x 3 question types x 2 polarities x 5 class types x 2 replicates. Every
    cell of the design holds 2 prompts, so CP = 1 and GI = 0; per factor each level holds 1020 / n_levels."""
    plan = agentic.SPEC.factor_plan
    spec = agentic_bench.factors.with_factors(plan.extra_factors)
    levels = cov.spec_levels(spec)
    p = agentic_bench.prompts
    by = cov.coverage_by_factor(p, plan.coverage_factors, levels).set_index("factor")
    n_levels = {"domain": 17, "question_type": 3, "polarity": 2, "class_type": 5}
    for f, k in n_levels.items():
        assert by.loc[f, "n_levels"] == k
        assert by.loc[f, "min_count"] == by.loc[f, "max_count"] == 1020 // k
        assert by.loc[f, "coverage_percentage"] == 1.0
        assert by.loc[f, "gini"] == pytest.approx(0.0, abs=1e-12)
    o = cov.coverage_overall(p, plan.coverage_factors, levels).iloc[0]
    assert o["n_combinations"] == 17 * 3 * 2 * 5 == 510
    assert o["n_covered"] == 510 and o["coverage_percentage"] == 1.0 and o["n_prompts"] == 1020
    assert o["gini"] == pytest.approx(0.0, abs=1e-12)
    # the same cells counted independently: 2 prompts each
    counts = p.groupby(plan.coverage_factors).size()
    assert len(counts) == 510 and (counts == 2).all()


def test_gini_detects_an_unbalanced_agentic_subset(agentic_bench):
    """The test above can fail: drop one class type from half the domains and GI leaves 0 (hand value)."""
    p = agentic_bench.prompts
    doms = sorted(p["domain"].unique())[:8]
    q = p[~(p["domain"].isin(doms) & (p["class_type"] == "race"))]
    g = cov.coverage_by_factor(q, ["class_type"]).set_index("factor").loc["class_type", "gini"]
    counts = np.sort(q.groupby("class_type").size().to_numpy())      # [108, 204, 204, 204, 204]
    n, tot = len(counts), counts.sum()
    hand = 1 - 2 * sum(c / tot * (n - k + 0.5) / n for k, c in enumerate(counts, 1))
    assert g == pytest.approx(hand) and g > 0.05


def test_agentic_scored_subset_is_the_one_notebook_4_scores(agentic_bench):
    p = agentic_bench.prompts
    a = factorial.sample(agentic.SPEC.factor_plan, p, 150, seed=0)
    b = agentic.balanced_subset(p, 150, seed=0)
    assert list(a["prompt_id"]) == list(b["prompt_id"])


def test_crows_combined_has_a_dataset_factor_and_unique_ids():
    b = factorial.prepare(cp.SPEC)
    p = b.prompts
    assert set(p["dataset"]) == set(cp.SPEC.datasets)
    assert p["prompt_id"].is_unique and b.cluster == "pair_id"
    assert p.groupby("dataset").size().to_dict() == {d: len(cp.SPEC.dataset(d).prompts) for d in cp.SPEC.datasets}
    s = factorial.sample(cp.SPEC.factor_plan, p, 30, seed=0)
    assert s.groupby("dataset").size().to_dict() == {d: 10 for d in cp.SPEC.datasets}


class _FakeScorer:
    """Log-probabilities from sentence length: the shorter sentence is the more probable one."""
    lm = type("Lm", (), {"name": "m"})()

    def sequence_logprob(self, texts):
        return pd.DataFrame({"sum_logprob": [-float(len(t)) for t in texts], "n_tokens": [1] * len(texts)})


def test_crows_outcome_is_the_likelihood_comparison():
    p = pd.DataFrame({"prompt_id": ["a", "b", "c"], "sent_more": ["xx", "xxxx", "same"],
                      "sent_less": ["xxx", "x", "same"]})
    r = factorial.score(cp.SPEC, _FakeScorer(), p)
    assert r["answer"].tolist()[:2] == ["more", "less"] and r["seed"].eq("none").all()
    assert r["stereotype_preferred"].tolist()[:2] == [1.0, 0.0] and np.isnan(r["stereotype_preferred"].iloc[2])


def test_response_factor_reference_is_the_models_usual_answer():
    plan = agentic.SPEC.factor_plan
    spec = factorial.prepare(agentic.SPEC).factors.with_factors(plan.extra_factors)
    d = pd.DataFrame({"answer_position": [3, 3, 2, 1]})
    assert multifactor.references(spec, plan, d)["answer_position"] == 3
    assert multifactor.references(spec, plan)["answer_position"] == 1


def test_crows_variant_scores_the_sentences_notebook_3_scores():
    """Same pairs, same sentences as notebook 3's per-dataset sample, so its cached scores serve notebook 1."""
    p = factorial.prepare(cp.SPEC).prompts
    per_file = {"crows_pairs_en": 20, "crows_pairs_en_revised": 20, "crows_pairs_fr": 12}
    for n, of in ((3 * 20, lambda d: 20), (per_file, per_file.get)):        # one size for all, a size per file
        s = factorial.sample(cp.SPEC.factor_plan, p, n, seed=0)
        for d in cp.SPEC.datasets:
            ref = cp.subsample(cp.SPEC.dataset(d), of(d), seed=0).prompts
            got = s[s["dataset"] == d]
            assert len(got) == of(d)
            assert list(got["sent_more"]) == list(ref["sent_more"]) and list(got["sent_less"]) == list(ref["sent_less"])
    for prof in profiles.PROFILE_NAMES:
        mp = profiles.params(prof, "03_crows_pairs_bayes")["max_pairs"]
        want = mp if mp is None or isinstance(mp, dict) else 3 * mp
        assert profiles.params(prof, "01_multifactor", "crows_pairs")["max_prompts"] == want
        assert (profiles.params(prof, "01_multifactor", "agentic")["max_prompts"]
                == profiles.params(prof, "04_agentic_entropy")["max_prompts"])
        c = profiles.params(prof, "02_calm")     # notebook 1 on CALM selects notebook 2's prompts (calm.SPEC.sizes)
        assert profiles.params(prof, "01_multifactor", "calm")["selection"] == {
            k: c.get(k) for k in ("k_shot", "templates_per_task", "names_per_group", "template_ids",
                                  "max_prompt_words")}
