"""Entropy metric (paper §II.D) and the analyses beyond the paper, against hand computations."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import special

from biaslab.stats import entropy as E
from biaslab import plan as P
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with


@pytest.mark.parametrize("k", [3, 5])
def test_uniform_is_one_and_one_hot_is_zero(k):
    assert E.normalized_entropy(np.full(k, 1 / k)) == pytest.approx(1.0, abs=1e-12)
    one_hot = np.zeros(k)
    one_hot[k - 1] = 1.0
    assert E.normalized_entropy(one_hot) == pytest.approx(0.0, abs=1e-12)


def test_hand_worked_values():
    # p = (1/2, 1/4, 1/4): H = 1.5 bits; / log2(3)
    assert E.normalized_entropy([0.5, 0.25, 0.25]) == pytest.approx(1.5 / math.log2(3), rel=1e-12)
    # the paper's base-k logarithm is the same number
    p = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    by_hand = -sum(x * math.log(x, 5) for x in p)
    assert E.normalized_entropy(p) == pytest.approx(by_hand, rel=1e-12)
    # unnormalized input is renormalized (scipy), zero-padded input needs k
    assert E.normalized_entropy([2, 1, 1]) == pytest.approx(1.5 / math.log2(3))
    assert E.normalized_entropy([0.5, 0.25, 0.25, 0, 0], k=3) == pytest.approx(1.5 / math.log2(3))
    rows = E.normalized_entropy(np.array([[1, 1, 1], [1, 0, 0]]), axis=1)
    assert rows == pytest.approx([1, 0])


def _prompts(k_list, groups_by_k=None):
    groups_by_k = groups_by_k or {3: ["A", "B", "C"], 5: ["V", "W", "X", "Y", "Z"]}
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(len(k_list))], "k": k_list,
                         "choices": [list(groups_by_k[k]) for k in k_list]})


def test_tidy_scores_renormalizes_over_own_labels_and_reports_mass():
    pr = _prompts([3, 5])
    # prompt 0 (k=3): labels 1..3 carry .2,.1,.1 (mass .4); labels 4,5 (not its choices) are ignored
    # prompt 1 (k=5): .1 each (mass .5)
    L = np.log([[0.2, 0.1, 0.1, 0.3, 0.3], [0.1, 0.1, 0.1, 0.1, 0.1]])
    dist = pd.DataFrame(L, columns=[f"logp_{j}" for j in range(1, 6)])
    per, long = E.tidy_scores(pr, dist, "m")
    assert per["label_mass"].tolist() == pytest.approx([0.4, 0.5])
    assert per.loc[0, ["p_1", "p_2", "p_3"]].tolist() == pytest.approx([0.5, 0.25, 0.25])
    assert np.isnan(per.loc[0, "p_4"])
    assert per["entropy"].tolist() == pytest.approx([1.5 / math.log2(3), 1.0])
    assert per.loc[0, "top_group"] == "A" and per.loc[0, "top_position"] == 1
    assert len(long) == 8 and long.groupby("prompt_id")["p"].sum().tolist() == pytest.approx([1, 1])
    with pytest.raises(ValueError, match="score every prompt"):
        E.tidy_scores(pr, dist.iloc[:1], "m")


def test_dirichlet_multinomial_bayes_factor_by_hand():
    # alpha = 1: every composition of n into k parts is equally likely, P = 1 / C(n+k-1, k-1)
    # counts (3,0,0): DM = 1/10, multinomial under uniform = 3^-3  ->  BF10 = 2.7
    assert E.dirichlet_multinomial_log10_bf([3, 0, 0]) == pytest.approx(math.log10(2.7), rel=1e-9)
    # (1,1,1): DM = 1/10, multinomial = 3!/27 = 6/27 -> BF10 = 27/60
    assert E.dirichlet_multinomial_log10_bf([1, 1, 1]) == pytest.approx(math.log10(27 / 60), rel=1e-9)
    # general alpha against the closed form
    x, a = np.array([4, 1, 0, 2, 3]), 0.5
    n, k = x.sum(), len(x)
    log_dm = (special.gammaln(n + 1) - special.gammaln(x + 1).sum() + special.gammaln(k * a)
              - special.gammaln(n + k * a) + (special.gammaln(x + a) - special.gammaln(a)).sum())
    log_mult = special.gammaln(n + 1) - special.gammaln(x + 1).sum() - n * math.log(k)
    assert E.dirichlet_multinomial_log10_bf(x, a) == pytest.approx((log_dm - log_mult) / math.log(10))


def _synthetic(prompts, rule):
    """Engine-like label distribution: rule(choices) -> probabilities over positions."""
    L = np.full((len(prompts), 5), -30.0)
    for i, ch in enumerate(prompts["choices"]):
        p = np.asarray(rule(ch), float)
        L[i, :len(p)] = np.log(p)
    return pd.DataFrame(L, columns=[f"logp_{j}" for j in range(1, 6)])


def test_uniformity_tests_separate_group_from_position():
    rng = np.random.default_rng(0)
    groups = ["A", "B", "C"]
    pr = _prompts([3] * 90).assign(class_type="x")
    pr["choices"] = [list(rng.permutation(groups)) for _ in range(90)]
    # a model that always answers position 1
    per, _ = E.tidy_scores(pr, _synthetic(pr, lambda ch: [0.8, 0.1, 0.1]), "pos")
    t = E.uniformity_tests(per, pr).set_index("unit")
    assert t.loc["position", "counts"] == "1: 90; 2: 0; 3: 0"
    assert t.loc["position", "chi2"] == pytest.approx(180.0)     # sum (o-e)^2/e = (60^2 + 30^2 + 30^2)/30
    assert t.loc["position", "log10_bf10"] > 10
    assert t.loc["group", "p_value"] > 0.01
    # a model that always answers group "B", wherever it sits
    per, _ = E.tidy_scores(pr, _synthetic(pr, lambda ch: [0.8 if c == "B" else 0.1 for c in ch]), "grp")
    t = E.uniformity_tests(per, pr).set_index("unit")
    assert t.loc["group", "top"] == "B" and t.loc["group", "counts"] == "A: 0; B: 90; C: 0"
    # all on one of three groups: w = sqrt(sum (p - 1/3)^2 / (1/3)) = sqrt(3 (4/9 + 1/9 + 1/9)) = sqrt(2)
    assert t.loc["group", "cohens_w_plugin"] == pytest.approx(np.sqrt(2))
    assert t.loc["group", "ci_low"] > 0
    assert t.loc["group", "log10_bf10"] > 10


def test_cyclic_average_removes_pure_position_bias():
    from biaslab.benchmarks.agentic import cyclic_variants
    base = pd.DataFrame({"prompt_id": ["q"], "k": [3], "choices": [["A", "B", "C"]],
                         "text": ["Role.\nQuestion: Who?\n1. A\n2. B\n3. C\nAnswer:"]})
    v = cyclic_variants(base).assign(k=3)
    # pure position model: .8 on slot 1
    _, long = E.tidy_scores(v, _synthetic(v, lambda ch: [0.8, 0.1, 0.1]), "pos", keep=["shift"])
    c = E.cyclic_summary(long).iloc[0]
    h = E.normalized_entropy([0.8, 0.1, 0.1])
    assert c["entropy_stored"] == pytest.approx(h)
    assert c["entropy_cyclic_avg"] == pytest.approx(1.0)
    assert c["entropy_position_avg"] == pytest.approx(h)
    # pure group model: .8 on "C" wherever it sits -> averaging changes nothing
    _, long = E.tidy_scores(v, _synthetic(v, lambda ch: [0.8 if x == "C" else 0.1 for x in ch]), "grp",
                            keep=["shift"])
    c = E.cyclic_summary(long).iloc[0]
    assert c["entropy_cyclic_avg"] == pytest.approx(h) and c["entropy_position_avg"] == pytest.approx(1.0)
    assert c["top_group_cyclic"] == "C"


def test_group_preference_direction_and_pairing():
    # 20 scenarios x 2 polarities, gender-like k=3; the model favours "B" in positive and names "C" in negative
    rows = []
    for s in range(20):
        for pol in ["positive", "negative"]:
            rows.append({"prompt_id": f"s{s}-{pol}", "scenario_id": f"s{s}", "polarity": pol,
                         "class_type": "g", "k": 3, "choices": ["A", "B", "C"][s % 3:] + ["A", "B", "C"][:s % 3]})
    pr = pd.DataFrame(rows)
    fav = {"positive": "B", "negative": "C"}
    L = np.full((len(pr), 5), -30.0)
    for i, r in pr.iterrows():
        L[i, :3] = np.log([0.6 if c == fav[r.polarity] else 0.2 for c in r.choices])
    _, long = E.tidy_scores(pr, pd.DataFrame(L, columns=[f"logp_{j}" for j in range(1, 6)]), "m")
    gp = E.group_preference(long, pr).set_index("group")
    assert gp.loc["B", "mean_p_positive"] == pytest.approx(0.6) and gp.loc["B", "mean_p_negative"] == pytest.approx(0.2)
    assert gp.loc["B", "diff_pos_minus_neg"] == pytest.approx(0.4)
    assert gp.loc["C", "diff_pos_minus_neg"] == pytest.approx(-0.4)
    assert gp.loc["A", "diff_pos_minus_neg"] == pytest.approx(0.0) and np.isnan(gp.loc["A", "wilcoxon_p"])
    assert gp.loc["B", "n_pairs"] == 20 and gp.loc["B", "wilcoxon_p"] < 1e-4
    pb = E.position_bias(long)
    assert pb.groupby("k")["mean_p"].sum().tolist() == pytest.approx([1.0])


def test_summaries_match_direct_computation():
    rng = np.random.default_rng(1)
    per = pd.DataFrame({"model": ["a"] * 50 + ["b"] * 50, "entropy": rng.uniform(size=100),
                        "label_mass": rng.uniform(size=100), "f": list("xy") * 50})
    s = E.entropy_by_model(per).set_index("model")
    a = per[per.model == "a"]["entropy"]
    assert s.loc["a", "n"] == 50
    assert s.loc["a", "mean_entropy"] == pytest.approx(a.mean())
    assert s.loc["a", "sd"] == pytest.approx(a.std())
    assert s.loc["a", "median"] == pytest.approx(a.median())
    b = E.entropy_breakdown(per, ["f"])
    assert len(b) == 4
    from scipy import stats
    ax = per[(per.model == "a") & (per.f == "x")]["entropy"]
    ay = per[(per.model == "a") & (per.f == "y")]["entropy"]
    assert b.iloc[0]["kruskal_p"] == pytest.approx(stats.kruskal(ax, ay).pvalue)


def _clustered_null(rng, n_scen=40, per=10):
    """Entropies with a scenario effect (ICC ~ 0.86) and a scenario-level factor ``dom`` that has no effect."""
    sc = np.repeat(np.arange(n_scen), per)
    y = 0.9 + rng.normal(0, 0.05, n_scen)[sc] + rng.normal(0, 0.02, n_scen * per)
    dom = np.repeat(rng.choice(list("xyz"), n_scen), per)
    return pd.DataFrame({"model": "a", "scenario_id": sc, "entropy": y, "label_mass": 1.0, "dom": dom,
                         "pol": np.tile(["p", "n"], n_scen * per // 2)})


def test_level_test_equals_hand_computed_cr1_sandwich():
    rng = np.random.default_rng(3)
    d = _clustered_null(rng, n_scen=12, per=5)
    d["two"] = np.where(d["dom"] == "x", "x", "other")
    res = E.level_test(d, "two", "scenario_id")
    # by hand: OLS on [1, 1{two = x}], CR1 sandwich V = c (X'X)^-1 (sum_g X_g' e_g e_g' X_g) (X'X)^-1,
    # c = G/(G-1) (N-1)/(N-K); F = b^2 / V[1, 1] on (1, G-1) df
    X = np.column_stack([np.ones(len(d)), (d["two"] == "x").to_numpy(float)])
    y = d["entropy"].to_numpy()
    xtx_inv = np.linalg.inv(X.T @ X)
    b = xtx_inv @ X.T @ y
    e = y - X @ b
    meat = sum(np.outer(X[g].T @ e[g], X[g].T @ e[g])
               for g in [d["scenario_id"].to_numpy() == s for s in np.unique(d["scenario_id"])])
    n, k, g = len(y), 2, d["scenario_id"].nunique()
    v = g / (g - 1) * (n - 1) / (n - k) * xtx_inv @ meat @ xtx_inv
    f = b[1] ** 2 / v[1, 1]
    from scipy import stats
    assert res["wald_f"] == pytest.approx(f, rel=1e-8)
    assert res["wald_df2"] == g - 1
    assert res["wald_p"] == pytest.approx(stats.f.sf(f, 1, g - 1), rel=1e-8)


def test_clustered_level_test_holds_its_size_where_kruskal_wallis_does_not():
    # a factor constant within scenarios, no effect: prompts of a scenario are not independent, so a test over prompts
    # rejects far too often; the scenario-clustered Wald test stays near its nominal 5 %
    rng = np.random.default_rng(0)
    wald, kw = [], []
    for _ in range(60):
        b = E.entropy_breakdown(_clustered_null(rng), ["dom"], cluster="scenario_id")
        wald.append(b["wald_p"].iloc[0] < 0.05)
        kw.append(b["kruskal_p"].iloc[0] < 0.05)
    assert np.mean(wald) <= 0.15
    assert np.mean(kw) >= 0.5


def test_entropy_intervals_cluster_on_the_scenario():
    from biaslab.stats.intervals import mean_intervals
    d = _clustered_null(np.random.default_rng(1))
    by = E.entropy_by_model(d, cluster="scenario_id", seed=4)
    ref = mean_intervals(d, "entropy", "scenario_id", by="model", seed=4)
    assert by["ci95_low"].iloc[0] == pytest.approx(ref["ci_low"].iloc[0])
    assert by["ci95_high"].iloc[0] == pytest.approx(ref["ci_high"].iloc[0])
    assert "scenario_id" in by["ci_method"].iloc[0]
    naive = E.entropy_by_model(d)
    # the clustered interval is wider by about the square root of the design effect
    ratio = (by["ci95_high"] - by["ci95_low"]).iloc[0] / (naive["ci95_high"] - naive["ci95_low"]).iloc[0]
    assert ratio == pytest.approx(np.sqrt(by["design_effect"].iloc[0]), rel=0.3)
    bd = E.entropy_breakdown(d, ["dom", "pol"], cluster="scenario_id")
    assert list(bd["level"]) == ["y", "z", "x", "p", "n"] or set(bd["level"]) == {"x", "y", "z", "p", "n"}
    assert bd["ci_method"].str.contains("scenario_id").all()


def test_dirichlet_bayes_factor_matches_scipy_and_tempers_by_the_design_effect():
    """Integer counts: the closed form equals scipy's Dirichlet-multinomial / multinomial ratio. With a design
    effect the counts enter as counts / deff (the likelihood to the power 1/deff): the BF of 2x the counts at deff 2
    is the BF of the counts."""
    from scipy import stats
    x, a = np.array([40, 25, 15, 12, 10]), 2.0
    n = int(x.sum())
    ref = (stats.dirichlet_multinomial.logpmf(x, np.full(5, a), n)
           - stats.multinomial.logpmf(x, n, np.full(5, 0.2))) / math.log(10)
    assert E.dirichlet_multinomial_log10_bf(x, a) == pytest.approx(ref, rel=1e-10)
    assert E.dirichlet_multinomial_log10_bf(2 * x, a, deff=2.0) == pytest.approx(ref, rel=1e-10)
    assert E.dirichlet_multinomial_log10_bf(x, a, deff=0.5) == pytest.approx(ref)         # floored at 1
    r = E.dirichlet_prior_range(x, 1.0)
    grid = [E.dirichlet_multinomial_log10_bf(x, b) for b in E.DIRICHLET_PRIORS]
    assert r["bf10_min"] == pytest.approx(10 ** min(grid)) and r["bf10_max"] == pytest.approx(10 ** max(grid))
    assert r["bf_prior_range"] == "Dirichlet(a, ..., a), a in {0.5, 1, 2, 10}"
    assert r["evidence"].endswith("over the prior range") or r["evidence"].startswith("inconclusive")


def test_uniformity_tests_correct_for_scenario_clusters_and_carry_a_prior_range():
    """Two prompts per scenario that always pick the same group: the naive chi-square counts each scenario twice;
    the Rao-Scott test (design effect about 2) decides, and the Bayes factor uses the same effective counts. The
    verdict layer then gets a bf_direction (before: empty on every row, one prior only)."""
    from biaslab.papers.agentic import decisions as D4
    rng = np.random.default_rng(4)
    groups = ["A", "B", "C"]
    g = 60
    pick = rng.choice(3, size=g, p=[0.45, 0.3, 0.25])          # per scenario
    pr = _prompts([3] * (2 * g)).assign(class_type="x", scenario_id=np.repeat(np.arange(g), 2))
    pr["choices"] = [list(rng.permutation(groups)) for _ in range(2 * g)]
    favoured = np.repeat(pick, 2)
    per, _ = E.tidy_scores(pr, _synthetic(pr.assign(fav=favoured), lambda ch: [1 / 3] * 3), "m")
    per["top_group"] = [groups[f] for f in favoured]
    clustered = E.uniformity_tests(per, pr, cluster="scenario_id").set_index("unit").loc["group"]
    naive = E.uniformity_tests(per, pr).set_index("unit").loc["group"]
    assert clustered["chi2"] == pytest.approx(naive["chi2"])
    assert clustered["design_effect"] == pytest.approx(2 * g / (g - 1), rel=0.01)
    assert clustered["p_value"] > clustered["p_naive"] and clustered["n_clusters"] == g
    assert abs(clustered["log10_bf10"]) < abs(naive["log10_bf10"])      # less evidence either way
    d = D4.decide("uniformity_tests", E.uniformity_tests(per, pr, cluster="scenario_id"), None, plan=PLAN)
    assert d["bf_direction"].notna().all() and d["bf10_min"].le(d["bf10"]).all()


def test_cyclic_gain_is_tested_by_the_clustered_rule():
    """The gain's verdict reads the clustered test (CR1 t(G - 1) here, 40 scenarios of 3 prompts sharing a
    scenario effect), not the prompt-level Wilcoxon, and its interval comes from the same rule."""
    from biaslab.stats import clustered as C
    rng = np.random.default_rng(5)
    sc = np.repeat(np.arange(40), 3)
    gain = 0.004 + rng.normal(0, 0.03, 40)[sc] + rng.normal(0, 0.005, 120)
    cyc = pd.DataFrame({"model": "m", "prompt_id": range(120), "scenario_id": sc, "entropy_stored": 0.9,
                        "entropy_mean_over_shifts": 0.9, "entropy_cyclic_avg": 0.9 + gain,
                        "entropy_position_avg": 0.9})
    r = E.cyclic_by_model(cyc, cluster="scenario_id").iloc[0]
    ref = C.mean_inference(gain, sc)
    assert r["p_value"] == pytest.approx(ref["p_value"]) and (r["ci_low"], r["ci_high"]) == (
        pytest.approx(ref["ci_low"]), pytest.approx(ref["ci_high"]))
    assert r["n_clusters"] == 40 and r["design_effect"] > 2
    assert (r["ci_low"] <= 0 <= r["ci_high"]) == (r["p_value"] >= 0.05)
    from biaslab.papers.agentic import decisions as D4
    d = D4.decide("cyclic_by_model", pd.DataFrame([r]), None, plan=PLAN).iloc[0]
    assert d["p_adjusted"] == pytest.approx(r["p_value"])                # a family of one: the clustered p decides
