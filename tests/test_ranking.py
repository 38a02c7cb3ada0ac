"""Tie groups, rank agreement and the cluster-sum bootstrap (stats/ranking.py) against constructed cases and
independent computation."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.stats import multiplicity, paired, ranking
import oracles


def _simulate(true_rates, n_templates=60, per_template=10, icc_sd=0.3, seed=0):
    """Binary outcomes of models on the same prompts: template effects shared by all models (paired design)."""
    rng = np.random.default_rng(seed)
    t_eff = rng.normal(0, icc_sd, n_templates)
    rows = []
    for m, p in true_rates.items():
        lp = np.log(p / (1 - p))
        for t in range(n_templates):
            for j in range(per_template):
                prob = 1 / (1 + np.exp(-(lp + t_eff[t])))
                rows.append({"model": m, "prompt_id": f"t{t}-{j}", "template": f"t{t}",
                             "y": int(rng.random() < prob)})
    return pd.DataFrame(rows)


def _groups(df):
    pairs = paired.paired_differences(df, "y", "template", n_boot=300)
    pairs = pairs.assign(p_adjusted=multiplicity.adjust(pairs["p_value"].to_numpy(float), "holm"))
    est = df.groupby("model")["y"].mean()
    return ranking.tie_groups(est, pairs).set_index("model")["groups"].to_dict()


def test_tie_groups_recover_three_separated_blocks():
    """Three blocks of two models, 0.3 apart on the probability scale, equal within a block: the letters must be
    exactly the blocks."""
    true = {"A": 0.8, "B": 0.8, "C": 0.5, "D": 0.5, "E": 0.2, "F": 0.2}
    g = _groups(_simulate(true, seed=1))
    assert g["A"] == g["B"] and g["C"] == g["D"] and g["E"] == g["F"]
    assert len({g["A"], g["C"], g["E"]}) == 3
    assert all(len(v) == 1 for v in g.values())


def test_tie_groups_all_tied_when_no_differences():
    true = {m: 0.4 for m in "ABCD"}
    g = _groups(_simulate(true, seed=2))
    assert set(g.values()) == {"a"}


def test_tie_groups_overlap_in_a_chain():
    """Constructed p-values: only the extremes differ (A-C) -> groups {A, B} and {B, C}; B shares both letters."""
    est = pd.Series({"A": 3.0, "B": 2.0, "C": 1.0})
    pairs = pd.DataFrame([("A", "B", 0.3), ("B", "C", 0.2), ("A", "C", 0.001)],
                         columns=["model_a", "model_b", "p_adjusted"])
    g = ranking.tie_groups(est, pairs).set_index("model")
    assert g.loc["A", "groups"] == "a" and g.loc["B", "groups"] == "ab" and g.loc["C", "groups"] == "b"
    assert list(g["rank"]) == [1, 2, 3]
    # a pair that could not be tested (NaN) never separates models
    pairs.loc[2, "p_adjusted"] = np.nan
    assert set(ranking.tie_groups(est, pairs)["groups"]) == {"a"}


def test_tie_groups_all_separated_and_lower_is_better_order():
    est = pd.Series({"A": 1.0, "B": 2.0, "C": 3.0})
    pairs = pd.DataFrame([(a, b, 0.0) for a, b in itertools.combinations("ABC", 2)],
                         columns=["model_a", "model_b", "p_adjusted"])
    g = ranking.tie_groups(est, pairs, higher_first=False)
    assert list(g["model"]) == ["A", "B", "C"] and list(g["groups"]) == ["a", "b", "c"]


def test_spearman_interval_matches_independent_formula():
    x = [0.1, 0.4, 0.35, 0.8, 0.6, 0.9, 0.2]
    y = [1.0, 2.1, 2.3, 3.5, 3.6, 4.0, 1.9]
    r = ranking.spearman_interval(x, y)
    rho = stats.spearmanr(x, y).statistic
    se = np.sqrt((1 + rho ** 2 / 2) / (len(x) - 3))
    assert r["rho"] == pytest.approx(rho)
    assert r["ci_low"] == pytest.approx(np.tanh(np.arctanh(rho) - 1.959964 * se), abs=1e-5)
    assert r["ci_high"] == pytest.approx(np.tanh(np.arctanh(rho) + 1.959964 * se), abs=1e-5)
    assert r["status"] == "ok"


def test_spearman_says_too_few_models():
    r = ranking.spearman_interval([1, 2], [3, 4])
    assert np.isnan(r["ci_low"]) and r["status"].startswith("too few models (n = 2")


def test_cluster_sum_bootstrap_of_a_mean_equals_the_rate_bootstrap():
    """For a mean (sum y / sum 1) the cluster-sum bootstrap is the cluster bootstrap of stats.intervals."""
    from biaslab.stats import intervals
    df = _simulate({"A": 0.3}, n_templates=30, seed=3)
    # clusters in order of appearance, as bootstrap_rate numbers them, so both draw the same resamples
    s = ranking.cluster_sums(df.assign(one=1.0), ["y", "one"], "template", pd.unique(df["template"])).to_numpy()
    b = ranking.cluster_sum_bootstrap(lambda t: t[:, 0] / t[:, 1], s, n_boot=500, seed=7)
    reps = oracles.bootstrap_rate(df["y"], df["template"], n_boot=500, seed=7)
    assert b["estimate"] == pytest.approx(df["y"].mean())
    assert b["ci_low"] == pytest.approx(np.quantile(reps, 0.025))
    assert b["ci_high"] == pytest.approx(np.quantile(reps, 0.975))


def test_cluster_sum_bootstrap_says_why_no_resample_defines_the_statistic():
    """A ratio whose denominator is 0 in every resample (BBQ's bias score of a formulation that never names a person)
    has no interval, and says so in ci_method, the key every caller reads."""
    b = ranking.cluster_sum_bootstrap(lambda t: t[:, 0] / t[:, 1], np.zeros((4, 2)), n_boot=50)
    assert np.isnan(b["ci_low"]) and b["n_boot"] == 0 and b["ci_method"].startswith("undefined")


def test_paired_cluster_sum_bootstrap_detects_a_real_difference_only():
    df = _simulate({"A": 0.6, "B": 0.3, "C": 0.6}, n_templates=40, seed=4).assign(one=1.0)
    f = lambda t: t[:, 0] / t[:, 1]
    s = {m: ranking.cluster_sums(df[df.model == m], ["y", "one"], "template").to_numpy() for m in "ABC"}
    ab = ranking.cluster_sum_bootstrap(f, s["A"], s["B"], n_boot=500)
    ac = ranking.cluster_sum_bootstrap(f, s["A"], s["C"], n_boot=500)
    assert ab["ci_low"] > 0 and ab["p_boot"] < 0.01
    assert ac["ci_low"] < 0 < ac["ci_high"]
