"""Inference helpers checked against independent computations: scipy's exact interval, the analytic
design effect 1 + (m - 1) rho, a hand-computed sandwich, simulations of power, hand-worked Holm."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.benchmarks.base import Benchmark, FactorSpec
from biaslab.sources import DataError
from biaslab.stats import clustered, importance, intervals, multiplicity, paired, power, responders
import oracles


def _clustered(g, m, p, rho, seed):
    """G clusters of m Bernoulli outcomes with cluster rates ~ Beta(a, b), a + b = (1 - rho) / rho: ICC = rho."""
    rng = np.random.default_rng(seed)
    s = (1 - rho) / rho
    pg = rng.beta(p * s, (1 - p) * s, size=g)
    y = rng.random((g, m)) < pg[:, None]
    return pd.DataFrame({"y": y.ravel().astype(int), "cl": np.repeat(np.arange(g), m)})


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (7, 13), (13, 13), (120, 300), (3, 1508)])
def test_clopper_pearson_matches_scipy_exact(k, n):
    lo, hi = clustered.clopper_pearson(k, n)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert float(lo) == pytest.approx(ref.low, abs=1e-10)
    assert float(hi) == pytest.approx(ref.high, abs=1e-10)


def test_design_effect_matches_icc_formula():
    m, rho = 10, 0.2
    expected = 1 + (m - 1) * rho                       # 2.8
    ests, boots = [], []
    for seed in range(5):
        d = _clustered(400, m, 0.3, rho, seed)
        ests.append(oracles.design_effect(d["y"], d["cl"]))
        r = intervals.rate_intervals(d, "y", "cl").iloc[0]
        boots.append((r["se_cluster"] / r["se_naive"]) ** 2)
    assert np.mean(ests) == pytest.approx(expected, rel=0.12)
    assert np.mean(boots) == pytest.approx(expected, rel=0.12)
    # independent outcomes: design effect about 1
    indep = [oracles.design_effect(d["y"], d["cl"]) for d in (_clustered(400, m, 0.3, 1e-6, s) for s in range(8))]
    assert np.mean(indep) == pytest.approx(1.0, abs=0.08)


def test_clustered_rate_interval_covers_and_widens():
    d = _clustered(300, 8, 0.4, 0.3, 1)
    r = intervals.rate_intervals(d, "y", "cl").iloc[0]
    naive_half = 1.96 * r["se_naive"]
    assert r["ci_high"] - r["ci_low"] > 2 * naive_half * 1.5            # deff ~ 3.1: about 1.76x wider
    assert r["ci_low"] < r["rate"] < r["ci_high"]
    assert r["ci_method"].startswith("Korn-Graubard") and r["df"] == 299
    # few clusters: Clopper-Pearson on the Korn-Graubard n* = n / deff x (t_{n-1} / t_{G-1})^2 (CR1 deff)
    small = d[d["cl"] < 4]
    s = intervals.rate_intervals(small, "y", "cl").iloc[0]
    y, g = small["y"].to_numpy(float), small["cl"].to_numpy()
    e = (y - y.mean()) / len(y)
    v_cr1 = 4 / 3 * sum(e[g == c].sum() ** 2 for c in range(4))
    deff = v_cr1 / (y.mean() * (1 - y.mean()) / len(y))
    n_star = len(y) / max(deff, 1) * (stats.t.ppf(0.975, len(y) - 1) / stats.t.ppf(0.975, 3)) ** 2
    assert s["n_effective"] == pytest.approx(n_star)
    lo, hi = clustered.clopper_pearson(s["rate"] * n_star, n_star)
    assert (s["ci_low"], s["ci_high"]) == pytest.approx((float(lo), float(hi)))


def test_rate_intervals_by_group_and_generic_bootstrap():
    d = pd.concat([_clustered(50, 5, 0.2, 0.1, 2).assign(model="a"), _clustered(50, 5, 0.6, 0.1, 3).assign(model="b")])
    t = intervals.rate_intervals(d, "y", "cl", by="model")
    assert list(t["model"]) == ["a", "b"]
    assert t.loc[0, "rate"] == pytest.approx(d.loc[d.model == "a", "y"].mean())
    b = oracles.cluster_bootstrap(d[d.model == "a"], lambda x: x["y"].mean(), "cl", n_boot=300)
    assert b["ci_low"] < b["estimate"] < b["ci_high"]


def test_cluster_robust_se_matches_hand_sandwich():
    rng = np.random.default_rng(0)
    n_cl, m = 12, 6
    df = pd.DataFrame({"cl": np.repeat(np.arange(n_cl), m),
                       "f": rng.choice(["a", "b", "c"], n_cl * m),
                       "g": np.repeat(rng.choice(["x", "y"], n_cl), m)})
    eta = -0.3 + 0.8 * (df["f"] == "b") - 0.5 * (df["f"] == "c") + 0.7 * (df["g"] == "y") + np.repeat(
        rng.normal(0, 0.8, n_cl), m)
    df["deviated"] = (rng.random(len(df)) < 1 / (1 + np.exp(-eta))).astype(int)
    res = importance.logistic_regression(df, ["f", "g"], {"f": "a", "g": "x"}, cluster="cl")
    X = res.design.X.to_numpy()
    beta = res.table["coef"].to_numpy()
    mu = 1 / (1 + np.exp(-X @ beta))
    bread = np.linalg.inv(X.T @ (X * (mu * (1 - mu))[:, None]))
    score = X * (df["deviated"].to_numpy() - mu)[:, None]
    sg = np.vstack([score[df["cl"].to_numpy() == c].sum(axis=0) for c in range(n_cl)])
    N, K = X.shape
    c = n_cl / (n_cl - 1) * (N - 1) / (N - K)
    se_hand = np.sqrt(np.diag(c * bread @ (sg.T @ sg) @ bread))
    np.testing.assert_allclose(res.table["se_cluster"].to_numpy(), se_hand, rtol=1e-6)
    np.testing.assert_allclose(res.table["se"].to_numpy(), np.sqrt(np.diag(bread)), rtol=1e-5)
    np.testing.assert_allclose(res.table["design_effect"], (se_hand / np.sqrt(np.diag(bread))) ** 2, rtol=1e-5)


def test_separated_term_gets_no_cluster_robust_p_value():
    """A level whose outcome is all 0 has no finite estimate: neither its naive nor its sandwich SE means anything."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"cl": np.repeat(np.arange(20), 10), "f": np.tile(["a", "b", "c", "d", "e"], 40)})
    df["deviated"] = (rng.random(len(df)) < 0.4).astype(int)
    df.loc[df["f"] == "e", "deviated"] = 0
    t = importance.logistic_regression(df, ["f"], {"f": "a"}, cluster="cl").table
    row = t[t["level"] == "e"].iloc[0]
    assert row["separated"] and np.isnan(row["p_cluster"]) and np.isnan(row["se_cluster"])
    assert t.loc[~t["separated"], "p_cluster"].notna().all()


def test_exact_binomial_power_matches_simulation():
    n, p1 = 80, 0.65
    rng = np.random.default_rng(0)
    ks = rng.binomial(n, p1, size=3000)
    sim = np.mean([stats.binomtest(int(k), n, 0.5).pvalue <= 0.05 for k in ks])
    assert power.exact_binomial_power(n, p1) == pytest.approx(sim, abs=0.03)
    # at p1 = p0 the exact test's rejection rate is at most alpha
    assert power.exact_binomial_power(n, 0.5) <= 0.05


def test_mde_gives_target_power_by_simulation():
    n1 = n2 = 300
    p = 0.3
    delta = oracles.mde_two_proportions(n1, n2, p)
    rng = np.random.default_rng(1)
    a = rng.binomial(n1, p + delta, 4000) / n1
    b = rng.binomial(n2, p, 4000) / n2
    z = (2 * np.arcsin(np.sqrt(a)) - 2 * np.arcsin(np.sqrt(b))) / np.sqrt(1 / n1 + 1 / n2)
    assert np.mean(np.abs(z) > 1.96) == pytest.approx(0.80, abs=0.03)
    # one-sample: normal MDE close to the exact test's, and a design effect of 4 doubles the MDE roughly
    m_norm = power.mde_proportion(1508)
    m_exact = power.mde_proportion(1508, exact=True)
    assert m_norm == pytest.approx(m_exact, abs=0.004)
    assert oracles.power_proportion(1508, 0.5 + m_norm) == pytest.approx(0.80, abs=1e-4)
    assert power.mde_proportion(1508, deff=4) == pytest.approx(2 * m_norm, rel=0.05)
    # planner inverts the MDE
    n = power.required_n_proportion(0.5 + m_norm)
    assert abs(n - 1508) <= 1
    assert power.required_n_proportion(0.55, deff=2.5) == math.ceil(
        2.5 * power.NormalIndPower().solve_power(abs(power.proportion_effectsize(0.55, 0.5)), nobs1=None,
                                                 alpha=0.05, power=0.8, ratio=0))


def test_mde_paired_mean_matches_ttest_simulation():
    n = 50
    dz = power.mde_paired_mean(n)
    rng = np.random.default_rng(2)
    x = rng.normal(dz, 1, size=(3000, n))
    p = stats.ttest_1samp(x, 0, axis=1).pvalue
    assert np.mean(p <= 0.05) == pytest.approx(0.80, abs=0.03)


def test_responder_check_flags_constant_passes_varied():
    rng = np.random.default_rng(0)
    df = pd.concat([pd.DataFrame({"model": "const", "answer": ["yes"] * 150}),
                    pd.DataFrame({"model": "varied", "answer": rng.choice(["yes", "no", "can't tell"], 150)}),
                    pd.DataFrame({"model": "mute", "answer": [None] * 120 + ["no"] * 30})])
    chk = responders.responder_check(df, n_options=3).set_index("model")
    assert chk.loc["const", "degenerate"] and "modal answer 'yes'" in chk.loc["const", "reasons"]
    assert chk.loc["const", "answer_entropy"] == 0.0
    assert not chk.loc["varied", "degenerate"] and chk.loc["varied", "answer_entropy"] > 0.9
    assert chk.loc["mute", "unparseable_share"] == pytest.approx(0.8)
    assert "unparseable" in chk.loc["mute", "reasons"]
    assert set(chk.index[~chk["degenerate"].astype(bool)]) == {"varied"}
    # the label mass is reported beside an answer, but judges only probability metrics (responders per metric)
    low = pd.DataFrame({"model": "m", "answer": rng.choice(["a", "b"], 40), "mass": 0.05, "p_1": 0.5, "p_2": 0.5})
    ans = responders.responder_check(low, label_mass="mass").iloc[0]
    assert not ans["degenerate"] and ans["label_mass"] == pytest.approx(0.05) and ans["reads"] == "answer"
    prob = responders.probability_check(low, ["p_1", "p_2"], label_mass="mass").iloc[0]
    assert prob["degenerate"] and "label mass 0.05" in prob["reasons"] and prob["reads"] == "probabilities"
    few = responders.responder_check(pd.DataFrame({"model": "m", "answer": ["yes"] * 6})).iloc[0]
    assert not few["degenerate"] and few["reasons"].startswith("not judged")


def test_mcnemar_and_paired_difference():
    a = np.array([1] * 30 + [0] * 10 + [1] * 5 + [0] * 55)
    b = np.array([1] * 30 + [1] * 10 + [0] * 5 + [0] * 55)
    r = paired.mcnemar_exact(a, b)
    assert (r["discordant_a"], r["discordant_b"]) == (5, 10)
    assert r["p_value"] == pytest.approx(stats.binomtest(5, 15, 0.5).pvalue)
    d = _clustered(200, 5, 0.4, 0.3, 4)
    d["prompt_id"] = np.arange(len(d))
    rng = np.random.default_rng(5)
    flip = rng.random(len(d)) < 0.1
    d2 = d.assign(y=np.where(flip, 1, d["y"]))           # model b deviates more on 10 % of prompts
    both = pd.concat([d.assign(model="a"), d2.assign(model="b")])
    r = paired.paired_difference(both, "y", "a", "b", cluster="cl")
    truth = (d["y"] - d2["y"]).mean()
    assert r["difference"] == pytest.approx(truth)
    assert r["ci_low"] < truth < r["ci_high"] < 0
    # prompts share clusters: the p-value is the Wald t(G - 1) on the CR1 SE (statsmodels OLS with cluster-robust
    # covariance gives the same SE); McNemar (over prompts) kept as naive
    import statsmodels.api as sm
    diff = (d["y"] - d2["y"]).to_numpy(float)
    ols = sm.OLS(diff, np.ones(len(diff))).fit(cov_type="cluster", cov_kwds={"groups": d["cl"].to_numpy()})
    assert r["se_cluster"] == pytest.approx(float(ols.bse[0]), rel=1e-10)
    assert r["test"] == "Wald t(199) on the CR1 SE" and r["df"] == 199
    assert r["p_value"] == pytest.approx(2 * stats.t.sf(abs(r["difference"]) / r["se_cluster"], 199))
    assert r["test_naive"].startswith("McNemar")
    assert r["p_naive"] == pytest.approx(paired.mcnemar_exact(d["y"], d2["y"])["p_value"])
    # one prompt per cluster: the exact test is valid and is the p-value
    solo = paired.paired_difference(both.assign(cl=both["prompt_id"]), "y", "a", "b", cluster="cl")
    assert solo["test"].startswith("McNemar") and "p_naive" not in solo
    # fewer than 30 clusters: the wild cluster restricted bootstrap (Webb), p-value and inverted interval
    few = both.assign(cl=both["prompt_id"] % 6)
    r6 = paired.paired_difference(few, "y", "a", "b", cluster="cl")
    assert r6["test"].startswith("wild cluster bootstrap-t") and r6["n_clusters"] == 6
    assert r6["ci_low"] < r6["difference"] < r6["ci_high"]
    assert r6["mde"] > 0 and "paired" in r6["mde_design"]
    w = paired.wilcoxon_paired([1.0, 2.0, -0.5, 3.0, 0.0, 2.5], [0, 0, 0, 0, 0, 0])
    assert w["p_value"] == pytest.approx(stats.wilcoxon([1.0, 2.0, -0.5, 3.0, 2.5]).pvalue)
    assert w["n_nonzero"] == 5


def test_paired_subgroup_test():
    rng = np.random.default_rng(0)
    rows = []
    for t in range(30):
        for s in range(8):
            base = rng.random() * 0.5
            for model, shift in (("a", 0.0), ("b", 0.2)):
                rows.append({"template": t, "stigma": s, "model": model, "y": int(rng.random() < base + shift)})
    df = pd.DataFrame(rows)
    r = paired.paired_subgroup_test(df, "y", ["stigma"], "a", "b", "template")
    assert r["n_subgroups"] == 8
    assert r["ci_high"] < 0 and r["metric_difference"] == pytest.approx(r["metric_a"] - r["metric_b"])
    assert r["test"] == ("randomization test, the two models' answers swapped within template clusters (99,999 "
                         "random swaps), G = 30, two-sided") and r["p_value"] < 0.05 and r["n_clusters"] == 30
    assert r["ci_method"].startswith("cluster-robust t(29)") and r["ci_method"].endswith("(not the test's dual)")
    rates_ab = df.groupby(["model", "stigma"])["y"].mean()
    assert r["p_naive"] == pytest.approx(stats.wilcoxon(rates_ab["a"] - rates_ab["b"]).pvalue)
    # the metric is the paper's deviation metric (eq. 4), computed independently by stats.subgroups
    from biaslab.stats import subgroups as sg
    rates = df.groupby(["model", "stigma"])["y"].mean()
    assert r["metric_a"] == pytest.approx(sg.deviation_metric(rates["a"]))
    # the linearized SE agrees with the generic cluster-paired bootstrap of the same difference (resampling frames)
    slow = oracles.cluster_bootstrap(
        df, lambda d: (sg.deviation_metric(d[d.model == "a"].groupby("stigma")["y"].mean())
                       - sg.deviation_metric(d[d.model == "b"].groupby("stigma")["y"].mean())), "template", n_boot=300)
    assert slow["se"] == pytest.approx((r["ci_high"] - r["ci_low"]) / (2 * stats.t.ppf(0.975, 29)), rel=0.25)
    per = paired.subgroup_metric_intervals(df, "y", ["stigma"], "template").set_index("model")
    assert per.loc["a", "estimate"] == pytest.approx(r["metric_a"])
    assert per.loc["a", "ci_low"] < per.loc["a", "estimate"] < per.loc["a", "ci_high"]
    # fewer than 30 templates (notebook 1's CALM variant has 12): the wild cluster bootstrap, G reported
    few = df[df["template"] < 12]
    r12 = paired.paired_subgroup_test(few, "y", ["stigma"], "a", "b", "template")
    assert r12["test"].endswith("(all 4,096 swaps), G = 12, two-sided") and r12["n_clusters"] == 12
    assert r12["ci_method"].startswith("wild cluster bootstrap-t") and r12["df"] == 11
    assert r12["p_value"] == pytest.approx(oracles.template_swap_p(few, "y", ["stigma"], "a", "b", "template"))
    assert r12["ci_low"] <= r12["metric_difference"] <= r12["ci_high"]
    p12 = paired.subgroup_metric_intervals(few, "y", ["stigma"], "template")
    assert p12["ci_method"].str.startswith("wild cluster bootstrap-t").all() and (p12["n_clusters"] == 12).all()


def test_swap_test_of_the_metric_difference_is_the_brute_force_randomization_test():
    """The template-swap test of DM_a - DM_b against the written-out definition (tests/oracles.py: every one of the
    2^G subsets of templates, the two models' rows exchanged there, both metrics recomputed from the rates): equal
    where the swaps are enumerated; from random swaps, (1 + hits) / (B + 1) within Monte Carlo error of it; crossed
    clusters swap the first (template); a design the models answered unequally has no test, and says why."""
    rng = np.random.default_rng(5)
    rows = []
    for t in range(9):
        for s in range(4):
            for rep in range(int(rng.integers(1, 4))):
                base = rng.random() * 0.6
                for model, shift in (("a", 0.0), ("b", 0.15)):
                    rows.append({"template": t, "stigma": s, "gender": rep % 2, "model": model,
                                 "y": int(rng.random() < base + shift)})
    df = pd.DataFrame(rows)
    for factors, ideal in ((["stigma"], 0.0), (["stigma", "gender"], 0.5)):
        exact = oracles.template_swap_p(df, "y", factors, "a", "b", "template", ideal=ideal)
        r = paired.paired_subgroup_test(df, "y", factors, "a", "b", ["template", "stigma"], ideal=ideal)
        assert "(all 512 swaps), G = 9" in r["test"] and r["p_value"] == pytest.approx(exact, abs=1e-12)
        assert r["statistic"] == pytest.approx(r["metric_difference"])
        drawn = paired.paired_subgroup_test(df, "y", factors, "a", "b", "template", ideal=ideal, n_swaps=400, seed=2)
        assert "(400 random swaps)" in drawn["test"] and abs(drawn["p_value"] - exact) < 4 * np.sqrt(exact / 400) + 0.01
    assert 0 < exact < 1
    lost = df.drop(index=df.index[(df["model"] == "b") & (df["template"] == 0)][:1])
    r = paired.paired_subgroup_test(lost, "y", ["stigma"], "a", "b", "template")
    assert np.isnan(r["p_value"]) and r["test"].startswith("no swap test: in 1 template x subgroup cells")


def test_holm_and_bh_hand_worked():
    p = [0.01, 0.04, 0.03, np.nan, 0.005]
    # Holm over 4 finite: sorted .005,.01,.03,.04 -> 4*.005=.02, 3*.01=.03, 2*.03=.06, 1*.04=.04 -> monotone .06
    np.testing.assert_allclose(multiplicity.adjust(p, "holm"), [0.03, 0.06, 0.06, np.nan, 0.02])
    # BH: .005*4/1=.02, .01*4/2=.02, .03*4/3=.04, .04*4/4=.04
    np.testing.assert_allclose(multiplicity.adjust(p, "fdr_bh"), [0.02, 0.04, 0.04, np.nan, 0.02])
    # two families of two (the verdict layer adjusts each family on its own)
    np.testing.assert_allclose(multiplicity.adjust([0.01, 0.04], "holm"), [0.02, 0.04])
    np.testing.assert_allclose(multiplicity.adjust([0.02, 0.5], "holm"), [0.04, 0.5])


def test_benchmark_cluster_must_be_a_column():
    prompts = pd.DataFrame({"prompt_id": ["a", "b"], "template": ["t", "t"]})
    assert Benchmark("x", prompts, FactorSpec([]), cluster="template").cluster == "template"
    with pytest.raises(DataError):
        Benchmark("x", prompts, FactorSpec([]), cluster="scenario")


def test_ss_interval_folds_pi_interval():
    from biaslab.stats import hypothesis as hyp
    lo, hi = hyp.ss_interval([0.55, 0.2, 0.45], [0.7, 0.35, 0.6])
    np.testing.assert_allclose(lo, [0.55, 0.65, 0.5])
    np.testing.assert_allclose(hi, [0.7, 0.8, 0.6])
    prefs = pd.DataFrame({"model": "m", "dataset": "d", "source": "s", "bias_type": ["a"] * 20,
                          "x": [1] * 14 + [0] * 6})
    t = hyp.preference_tests(prefs).iloc[0]
    ref = stats.binomtest(14, 20).proportion_ci(method="exact")
    assert (t["pi_ci_low"], t["pi_ci_high"]) == pytest.approx((ref.low, ref.high))


def test_mean_intervals_and_mask_tests():
    d = _clustered(60, 5, 0.5, 0.2, 7)
    t = intervals.mean_intervals(d, "y", "cl").iloc[0]
    r = intervals.rate_intervals(d, "y", "cl").iloc[0]
    assert t["mean"] == pytest.approx(r["rate"]) and t["ci_low"] < t["mean"] < t["ci_high"]
    few = intervals.mean_intervals(d[d.cl.isin([3, 5, 8])], "y", "cl").iloc[0]
    assert few["ci_method"].startswith("wild cluster bootstrap-t") and few["n_clusters"] == 3
    alike = intervals.mean_intervals(d[d.cl < 3], "y", "cl").iloc[0]          # three clusters of mean 0.6
    assert alike["ci_method"] == "not estimable (no variation between the 3 clusters of 15 items)"
    chk = pd.DataFrame({"model": ["a", "b"], "degenerate": [True, False], "reasons": ["constant", ""]})
    tab = pd.DataFrame({"model": ["a", "a", "b"], "p_value": [0.01, 0.2, 0.03]})
    m = responders.mask_tests(tab, chk)
    assert m["p_value"].isna().tolist() == [True, True, False]
    assert m["responder"].iloc[0].endswith("constant") and m["responder"].iloc[2] == "informative"


def test_bbq_score_intervals_match_bias_scores():
    from biaslab.benchmarks import bbq
    from biaslab.benchmarks.bbq import score_intervals
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"model": "m", "template": rng.integers(0, 25, n),
                       "context_condition": rng.choice(["ambig", "disambig"], n)})
    choice = rng.integers(0, 3, n)
    df["chose_unknown"] = (choice == 0).astype(int)
    df["deviated"] = (choice == 1).astype(int)
    df["correct"] = np.where(df.context_condition == "ambig", choice == 0, choice == 2).astype(int)
    t = score_intervals(df, ["model"])
    ref = bbq.bias_scores(df, ["model"])
    np.testing.assert_allclose(t["bias_score"], ref["bias_score"])
    np.testing.assert_allclose(t["accuracy"], ref["accuracy"])
    assert ((t.bias_ci_low < t.bias_score) & (t.bias_score < t.bias_ci_high)).all()
    # fewer than 30 templates: the wild cluster bootstrap of the linearized score (stats.clustered's rule)
    assert t["bias_ci_method"].str.startswith("wild cluster bootstrap-t").all() and (t["n_clusters"] == 25).all()


def test_bbq_pseudo_values_linearize_the_score():
    """The pseudo-values' mean is the score, and their sandwich SE is the delta-method SE (checked against a
    numerical gradient of the score in the four totals)."""
    from biaslab.benchmarks import bbq
    rng = np.random.default_rng(1)
    n = 300
    choice = rng.integers(0, 3, n)
    dev, nu = (choice == 1).astype(float), (choice != 0).astype(float)
    cor = (rng.random(n) < 0.4).astype(float)
    for ambig in (False, True):
        p = bbq.bias_score_pseudo_values(dev, nu, cor, ambig)
        tot = np.array([[dev.sum(), nu.sum(), cor.sum(), n]])
        assert p.mean() == pytest.approx(bbq.bias_score_from_totals(tot, ambig)[0])
        x = np.c_[dev, nu, cor, np.ones(n)]
        grad = np.array([(bbq.bias_score_from_totals(tot + h, ambig)[0] - bbq.bias_score_from_totals(tot - h, ambig)[0])
                         / 2e-6 for h in 1e-6 * np.eye(4)])
        psi = (x - x.mean(0)) @ grad                       # influence of each answer on the score (times n / n)
        assert np.sum(((p - p.mean()) / n) ** 2) == pytest.approx(np.sum(psi ** 2), rel=1e-5)


@pytest.mark.parametrize("n", [12, 50, 102, 120, 1020])
def test_power_helpers_return_floats(n):
    # statsmodels' solver returns a 1-element array for some n (it did for 120): the helpers must give floats
    for v in (power.mde_paired_mean(n), power.mde_proportion(n), oracles.mde_two_proportions(n, 2 * n, 0.3)):
        assert isinstance(v, float) and 0 < v < 1.5


def test_linearized_deviation_metric_interval_covers_with_12_templates():
    """Notebook 1's CALM variant has 12 templates: the deviation metric's interval is the wild cluster bootstrap of
    its linearization (stats.clustered's rule below 30 clusters). Coverage of the population metric over 200
    simulated data sets (template effects on the logit scale, 7 groups x 3 names per template): at least 93 %."""
    rng = np.random.default_rng(0)
    g_n, groups, names, ideal = 12, 7, 3, 1.0
    p_true = np.array([0.3, 0.45, 0.6, 0.7, 0.55, 0.4, 0.8])

    def sim():
        t = np.repeat(np.arange(g_n), groups * names)
        g = np.tile(np.repeat(np.arange(groups), names), g_n)
        eta = np.log(p_true[g] / (1 - p_true[g])) + rng.normal(0, 0.8, g_n)[t]
        y = (rng.random(t.size) < 1 / (1 + np.exp(-eta))).astype(float)
        return pd.DataFrame({"model": "m", "template": t, "group": g, "y": y})

    truth = np.mean(np.abs(np.mean([sim().groupby("group")["y"].mean() for _ in range(400)], axis=0) - ideal))
    rows = [paired.subgroup_metric_intervals(sim(), "y", ["group"], "template", ideal=ideal).iloc[0]
            for _ in range(200)]
    assert all(r["ci_method"].startswith("wild cluster bootstrap-t") and r["n_clusters"] == 12 for r in rows)
    assert np.mean([r["ci_low"] <= truth <= r["ci_high"] for r in rows]) >= 0.93


def test_subgroups_of_one_prompt_leave_the_metric_without_an_interval():
    """SSQA's embedded subset (87 stigma x gender subgroups from 150 prompts, most of one prompt): a subgroup's own
    rate fits its single prompt exactly, so the linearized variance is not estimable — the interval is undefined and
    says why, never a 0-width or made-up one."""
    df = pd.DataFrame({"model": np.repeat(["a", "b"], 6), "template": np.tile([0, 1, 2, 3, 4, 5], 2),
                       "stigma": np.tile(["s1", "s1", "s2", "s3", "s3", "s4"], 2), "y": [1, 0, 1, 0, 1, 1] * 2})
    ci = paired.subgroup_metric_intervals(df, "y", ["stigma"], "template")
    assert ci["ci_low"].isna().all() and ci["ci_method"].str.startswith("undefined: 2 of 4 subgroups hold one").all()
    t = paired.paired_subgroup_test(df, "y", ["stigma"], "a", "b", "template")
    assert np.isnan(t["ci_low"]) and t["ci_method"].startswith("undefined: 4 of 8 subgroups hold one")
    # both models answer alike: every template swap leaves the data as they are, so the swap test has no size
    assert np.isnan(t["p_value"]) and t["test"] == ("not estimable (no variation between the two models' answers in "
                                                    "any of the 6 template clusters)")
    u = paired.paired_subgroup_test(df.assign(y=np.r_[[1, 0, 1, 0, 1, 1], [0, 0, 1, 1, 1, 0]]), "y", ["stigma"], "a",
                                    "b", "template")
    assert np.isnan(u["ci_low"]) and "(all 64 swaps)" in u["test"] and 0 < u["p_value"] <= 1   # a test, no interval
    from biaslab.report.wording import interval
    assert interval(ci.iloc[0].to_dict()).startswith("(no interval, undefined: 2 of 4 subgroups")


def test_an_empty_responder_check_masks_nothing():
    """Notebook 3 with only unprompted models (no answers, so an empty responder check) failed with a pandas
    KeyError: the empty check's object `degenerate` column was read as a list of column names."""
    import pandas as pd
    from biaslab.papers.crows_pairs import decisions
    empty = decisions.responder_table(pd.DataFrame())
    tab = pd.DataFrame({"model": ["m"], "dataset": ["d"], "binom_p": [0.2]})
    out = responders.mask_tests(tab, empty, by=["model", "dataset"], test_cols=["binom_p"])
    assert out["binom_p"].tolist() == [0.2] and out["responder"].tolist() == ["informative"]
