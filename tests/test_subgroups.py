"""Subgroup statistics (multi-factor paper §3.3: eq. 3 log disparity, eq. 4 deviation metric, KS)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.stats.subgroups import (deviation_metric, deviation_metric_table, ecdf, ks_tests, log_disparity,
                                     subgroups)


def test_log_disparity_hand_computed_odds():
    # inside: 3 of 4 deviate (odds 3); outside: 1 of 4 (odds 1/3) -> raw LD = log 9
    r = log_disparity([3], [4], [1], [4]).iloc[0]
    assert r.log_disparity_raw == pytest.approx(np.log(9))
    # Haldane-Anscombe: (3.5 * 3.5) / (1.5 * 1.5)
    assert r.log_disparity == pytest.approx(np.log(3.5 * 3.5 / (1.5 * 1.5)))
    se = np.sqrt(2 / 3.5 + 2 / 1.5)
    assert r.se == pytest.approx(se)
    assert r.ci_low == pytest.approx(r.log_disparity - 1.959964 * se, rel=1e-5)
    # without correction the estimate is the raw one
    assert log_disparity([3], [4], [1], [4], correction=0).iloc[0].log_disparity == pytest.approx(np.log(9))


def test_log_disparity_rates_zero_and_one():
    r = log_disparity([0, 5], [5, 5], [3, 3], [10, 10])
    assert r.log_disparity_raw.iloc[0] == -np.inf and r.log_disparity_raw.iloc[1] == np.inf
    assert np.isfinite(r.log_disparity).all()
    assert r.log_disparity.iloc[0] < 0 < r.log_disparity.iloc[1]


def test_log_disparity_exact_interval():
    r = log_disparity([12], [20], [30], [100], ci="exact").iloc[0]
    res = stats.contingency.odds_ratio([[12, 8], [30, 70]], kind="conditional")
    ci = res.confidence_interval(0.95)
    assert r.ci_low == pytest.approx(np.log(ci.low)) and r.ci_high == pytest.approx(np.log(ci.high))
    assert r.ci_low < np.log(res.statistic) < r.ci_high


def test_log_disparity_rejects_impossible_counts():
    with pytest.raises(ValueError):
        log_disparity([5], [4], [0], [4])


def _toy():
    # model m: factor a (x: 3/4 deviate, y: 1/4), factor b crossed
    return pd.DataFrame({"model": "m", "a": list("xxxxyyyy"), "b": list("pqpqpqpq"),
                         "deviated": [1, 1, 1, 0, 1, 0, 0, 0]})


def test_subgroups_counts_and_complements():
    s = subgroups(_toy(), ["a", "b"], levels=(1, 2))
    x = s[s.subgroup == "a=x"].iloc[0]
    assert (x.n, x.n_deviated, x.deviation_rate) == (4, 3, 0.75)
    assert x.log_disparity_raw == pytest.approx(np.log(9))
    xp = s[s.subgroup == "a=x & b=p"].iloc[0]
    # inside 2/2, outside 2/6
    ref = log_disparity([2], [2], [2], [6]).iloc[0]
    assert xp.log_disparity == pytest.approx(ref.log_disparity) and xp.n == 2
    assert set(s.level) == {1, 2} and len(s) == 2 + 2 + 4


def test_subgroups_compare_within_model():
    a = _toy()
    b = _toy().assign(model="n", deviated=1 - _toy().deviated)
    s = subgroups(pd.concat([a, b]), ["a"], levels=(1,))
    m = s.set_index(["model", "subgroup"])
    assert m.loc[("m", "a=x"), "log_disparity"] == pytest.approx(-m.loc[("n", "a=x"), "log_disparity"])


def test_deviation_metric_step_function():
    vals = [0.0, 0.5, 1.0]
    assert deviation_metric(vals, 0.0) == pytest.approx(0.5)
    assert deviation_metric(vals, 0.5) == pytest.approx(1 / 3)
    # numerical integration of the empirical quantile function Q(p) = x_(ceil(n p))
    x = np.sort(vals)
    p = (np.arange(300000) + 0.5) / 300000
    q = x[np.ceil(p * x.size).astype(int) - 1]
    for c in (0.0, 0.25, 0.5, 0.9):
        assert deviation_metric(vals, c) == pytest.approx(np.mean(np.abs(q - c)), abs=1e-4)


def test_deviation_metric_area_over_ecdf():
    rng = np.random.default_rng(0)
    v = rng.uniform(size=25)
    x, f = ecdf(v)
    # area between the eCDF and 1 over [0, 1]: sum of (1 - F) on each step
    grid = np.linspace(0, 1, 200001)
    F = np.searchsorted(x, grid, side="right") / x.size
    assert deviation_metric(v) == pytest.approx(np.trapezoid(1 - F, grid), abs=1e-4)


def test_ks_tests_and_dm_table():
    sub = pd.DataFrame({"model": ["a", "a", "b", "b"], "level": 1, "factors": "f",
                        "deviation_rate": [0.1, 0.2, 0.3, 0.4]})
    k = ks_tests(sub).iloc[0]
    assert k.ks_statistic == pytest.approx(1.0)
    assert k.p_value == pytest.approx(stats.ks_2samp([0.1, 0.2], [0.3, 0.4]).pvalue)
    dm = deviation_metric_table(sub).set_index("model")
    assert dm.loc["a", "deviation_metric"] == pytest.approx(0.15)


def test_clustered_log_disparity_matches_statsmodels_cluster_robust_logit():
    """The log disparity's cluster-robust SE (delta method, CR1) equals the sandwich SE of the in-group
    coefficient of a logistic regression of y on the subgroup indicator with template-clustered covariance
    (statsmodels), without the 0.5 correction; and it is wider than the naive Wald SE when templates matter."""
    import statsmodels.api as sm
    from scipy import special
    rng = np.random.default_rng(0)
    g = 20
    tpl = np.repeat(np.arange(g), 40)
    style = np.tile(np.repeat(["a", "b"], 20), g)
    y = (rng.random(tpl.size) < special.expit(-0.5 + 0.4 * (style == "a") + rng.normal(0, 1, g)[tpl])).astype(int)
    df = pd.DataFrame({"y": y, "style": style, "tpl": tpl})
    res = subgroups(df, ["style"], outcome="y", levels=(1,), by=None, correction=0.0, cluster="tpl")
    row = res[res["subgroup"] == "style=a"].iloc[0]
    X = np.column_stack([np.ones(tpl.size), (style == "a").astype(float)])
    fit = sm.GLM(y, X, family=sm.families.Binomial()).fit(cov_type="cluster", cov_kwds={"groups": tpl})
    n = tpl.size
    assert row["log_disparity"] == pytest.approx(fit.params[1], rel=1e-9)
    assert row["se_cluster"] == pytest.approx(fit.bse[1] / np.sqrt((n - 1) / (n - 2)), rel=1e-6)
    assert row["n_clusters"] == g and row["df"] == g - 1
    from scipy import stats
    assert row["ci_high_cluster"] - row["log_disparity"] == pytest.approx(stats.t.ppf(0.975, g - 1) * row["se_cluster"])


def _held_by_few(rng, g=37, held=4, stigmas=8, reps=3):
    """SSQA-like prompts under the null: ``g`` templates crossed with ``stigmas``, a template-level factor whose level
    "male" is held by the first ``held`` templates, template and stigma effects, no effect of the level."""
    from scipy import special
    tpl = np.repeat(np.arange(g), stigmas * reps)
    st = np.tile(np.repeat(np.arange(stigmas), reps), g)
    eta = special.logit(0.3) + rng.standard_normal(g)[tpl] + 0.3 * rng.standard_normal(stigmas)[st]
    return pd.DataFrame({"template": tpl, "stigma": st, "gender": np.where(tpl < held, "male", "neutral"),
                         "deviated": (rng.random(tpl.size) < special.expit(eta)).astype(int)})


@pytest.mark.parametrize("cluster", ["template", ["template", "stigma"]])
def test_level_held_by_four_templates_gets_t3_not_t36(cluster):
    """A level held by 4 of 37 templates (SSQA's gender[male]) rests on 4 clusters: its log disparity's clustered
    interval is t(3) (as its rate's Korn-Graubard interval is), never t(36) over all templates; a level crossed with
    the templates keeps the design's G."""
    df = _held_by_few(np.random.default_rng(0))
    df["style"] = np.where(df.index % 2 == 0, "doubt", "original")          # crossed with the templates
    res = subgroups(df, ["gender", "style"], levels=(1,), by=None, cluster=cluster).set_index("subgroup")
    male = res.loc["gender=male"]
    assert male["n_clusters"] == 4 and male["df"] == 3
    assert male["ci_high_cluster"] - male["log_disparity"] == pytest.approx(stats.t.ppf(0.975, 3) * male["se_cluster"])
    assert res.loc["gender=neutral", "df"] == 3                            # its rest is the same 4 templates
    # crossed: every cluster of the design (two-way: the smaller dimension, 8 stigmas)
    assert res.loc["style=doubt", "df"] == (36 if cluster == "template" else 7)


def test_few_template_level_rejects_near_nominal():
    """Under the null, the clustered interval of a level held by 4 of 37 templates excludes 0 in about 5 % of
    simulated data sets; referred to t(36), the same SE excluded it in about 14 % (the over-rejection this replaced)."""
    rng = np.random.default_rng(1)
    reps, new, old = 400, 0, 0
    q36 = stats.t.ppf(0.975, 36)
    for _ in range(reps):
        r = subgroups(_held_by_few(rng), ["gender"], levels=(1,), by=None, cluster="template").iloc[0]
        assert r["subgroup"] == "gender=male"
        new += not (r["ci_low_cluster"] <= 0 <= r["ci_high_cluster"])
        old += abs(r["log_disparity"]) > q36 * r["se_cluster"]
    assert new / reps <= 0.08, new / reps
    assert old / reps >= 0.10, old / reps


def test_factor_importance_term_of_a_few_template_level_uses_its_clusters():
    """The logistic regression's clustered Wald test of gender[male] (4 of 37 templates) is on t(3), not t(36)."""
    from biaslab.stats import importance as imp
    df = _held_by_few(np.random.default_rng(2))
    res = imp.logistic_regression(df, ["gender"], {"gender": "neutral"}, cluster="template", check=False)
    row = res.table.set_index("term").loc[[t for t in res.table["term"] if "male" in str(t)][0]]
    assert row["n_clusters"] == 4 and "t(3)" in row["p_method"]
    assert row["p_cluster"] == pytest.approx(2 * stats.t.sf(abs(row["coef"] / row["se_cluster"]), 3))
