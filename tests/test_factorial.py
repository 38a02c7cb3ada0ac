"""The factor framework on CALM, CrowS-Pairs and the agentic benchmark (issue 11): plans and their glue."""

import numpy as np
import pandas as pd
import pytest

from biaslab.papers.multifactor import factorial, responses as multifactor
from biaslab.benchmarks import agentic
from biaslab.stats import coverage as cov


@pytest.fixture(scope="module")
def agentic_bench():
    return factorial.prepare("agentic")


def test_every_benchmark_has_a_plan_naming_its_outcome():
    assert set(multifactor.PLANS) == {"ssqa", "bbq", "calm", "crows_pairs", "agentic"}
    expected = {"ssqa": "deviated", "bbq": "deviated", "calm": "correct", "crows_pairs": "stereotype_preferred",
                "agentic": "low_entropy"}
    assert {k: p.outcome for k, p in multifactor.PLANS.items()} == expected


def test_agentic_coverage_matches_the_documented_balanced_design(agentic_bench):
    """README of data/agentic: 17 domains x 3 question types x 2 polarities x 5 class types x 2 replicates. Every
    cell of the design holds 2 prompts, so CP = 1 and GI = 0; per factor each level holds 1020 / n_levels."""
    plan = multifactor.PLANS["agentic"]
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
    a = factorial.sample("agentic", p, 150, ["question_type"], seed=0)
    b = agentic.balanced_subset(p, 150, seed=0)
    assert list(a["prompt_id"]) == list(b["prompt_id"])


def test_crows_combined_has_a_dataset_factor_and_unique_ids():
    b = factorial.prepare("crows_pairs")
    p = b.prompts
    assert set(p["dataset"]) == set(factorial.CROWS_DATASETS)
    assert p["prompt_id"].is_unique and b.cluster == "pair_id"
    assert p.groupby("dataset").size().to_dict() == {
        d: len(factorial.load_benchmark(d).prompts) for d in factorial.CROWS_DATASETS}
    s = factorial.sample("crows_pairs", p, 30, ["dataset", "bias_type"], seed=0)
    assert s.groupby("dataset").size().to_dict() == {d: 10 for d in factorial.CROWS_DATASETS}


class _FakeScorer:
    """Log-probabilities from sentence length: the shorter sentence is the more probable one."""
    lm = type("Lm", (), {"name": "m"})()

    def sequence_logprob(self, texts):
        return pd.DataFrame({"sum_logprob": [-float(len(t)) for t in texts], "n_tokens": [1] * len(texts)})


def test_crows_outcome_is_the_likelihood_comparison():
    p = pd.DataFrame({"prompt_id": ["a", "b", "c"], "sent_more": ["xx", "xxxx", "same"],
                      "sent_less": ["xxx", "x", "same"]})
    r = factorial.score("crows_pairs", _FakeScorer(), p)
    assert r["answer"].tolist()[:2] == ["more", "less"] and r["seed"].eq("none").all()
    assert r["stereotype_preferred"].tolist()[:2] == [1.0, 0.0] and np.isnan(r["stereotype_preferred"].iloc[2])


def test_response_factor_reference_is_the_models_usual_answer():
    plan = multifactor.PLANS["agentic"]
    spec = factorial.prepare("agentic").factors.with_factors(plan.extra_factors)
    d = pd.DataFrame({"answer_position": [3, 3, 2, 1]})
    assert multifactor.references(spec, plan, d)["answer_position"] == 3
    assert multifactor.references(spec, plan)["answer_position"] == 1


def test_crows_variant_scores_the_sentences_notebook_3_scores():
    """Same pairs, same sentences as notebook 3's per-dataset sample, so its cached scores serve notebook 1."""
    from biaslab import profiles
    from biaslab.benchmarks import crows_pairs as cp
    p = factorial.prepare("crows_pairs").prompts
    s = factorial.sample("crows_pairs", p, 3 * 20, ["dataset", "bias_type"], seed=0)
    for d in factorial.CROWS_DATASETS:
        ref = cp.subsample(factorial.load_benchmark(d), 20, seed=0).prompts
        got = s[s["dataset"] == d]
        assert list(got["sent_more"]) == list(ref["sent_more"]) and list(got["sent_less"]) == list(ref["sent_less"])
    for prof in profiles.PROFILE_NAMES:
        mp = profiles.params(prof, "03_crows_pairs_bayes")["max_pairs"]
        assert profiles.params(prof, "01_multifactor", "crows_pairs")["max_prompts"] == (None if mp is None else 3 * mp)
        assert (profiles.params(prof, "01_multifactor", "agentic")["max_prompts"]
                == profiles.params(prof, "04_agentic_entropy")["max_prompts"])
