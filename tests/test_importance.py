"""Logistic-regression factor importance (multi-factor paper §3.4)."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
import statsmodels.api as sm

from biaslab.stats.importance import AliasingError, identical_levels, identifiable_subset, logistic_regression


def _two_by_two():
    # a0: 10 of 40 deviate, a1: 30 of 40 -> odds ratio (30/10) / (10/30) = 9
    a = ["a0"] * 40 + ["a1"] * 40
    y = [1] * 10 + [0] * 30 + [1] * 30 + [0] * 10
    return pd.DataFrame({"a": a, "deviated": y})


def test_odds_ratio_is_cross_product_ratio():
    r = logistic_regression(_two_by_two(), ["a"], {"a": "a0"})
    t = r.table.set_index("term")
    assert t.loc["a[a1]", "odds_ratio"] == pytest.approx(9.0)
    assert t.loc["Intercept", "coef"] == pytest.approx(np.log(10 / 30))
    se = np.sqrt(1 / 30 + 1 / 10 + 1 / 10 + 1 / 30)
    assert t.loc["a[a1]", "se"] == pytest.approx(se, rel=1e-6)
    assert t.loc["a[a1]", "ci_low"] == pytest.approx(9 * np.exp(-1.959964 * se), rel=1e-5)


def test_matches_statsmodels_formula_fit():
    rng = np.random.default_rng(3)
    n = 600
    df = pd.DataFrame({"f": rng.choice(["r", "s", "t"], n), "g": rng.choice(["u", "v"], n),
                       "h": rng.choice(["k", "l", "m", "o"], n)})
    eta = -0.5 + 0.8 * (df.f == "s") - 0.6 * (df.f == "t") + 0.4 * (df.g == "v") + 0.3 * (df.h == "o")
    df["deviated"] = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(int)
    refs = {"f": "t", "g": "u", "h": "m"}
    ours = logistic_regression(df, ["f", "g", "h"], refs).table.set_index("term")
    ref = smf.glm("deviated ~ C(f, Treatment('t')) + C(g, Treatment('u')) + C(h, Treatment('m'))", df,
                  family=sm.families.Binomial()).fit()
    for name, coef in ref.params.items():
        if name == "Intercept":
            term = "Intercept"
        else:
            fac = name[2]
            lvl = name.split("[T.")[1].rstrip("]")
            term = f"{fac}[{lvl}]"
        assert ours.loc[term, "coef"] == pytest.approx(coef, rel=1e-6, abs=1e-9)
        assert ours.loc[term, "p_value"] == pytest.approx(ref.pvalues[name], rel=1e-5)


def test_refuses_functionally_dependent_factors():
    df = pd.DataFrame({"template": list("aabbcc") * 5, "answer": list("yynnnn") * 5,
                       "style": list("pqpqpq") * 5, "deviated": [0, 1, 1, 0, 1, 1] * 5})
    with pytest.raises(AliasingError, match="template") as e:
        logistic_regression(df, ["template", "answer", "style"], {"template": "a", "answer": "n", "style": "p"})
    assert "answer" in str(e.value)


def test_refuses_collinear_levels_and_names_them():
    # the 'none' prompts are at level 'none' of both factors (as SSQA's no stigma / base)
    df = pd.DataFrame({"stigma": ["none", "s1", "s2", "s1", "s2", "none", "s1", "s2"] * 3,
                       "style": ["base", "o", "o", "p", "p", "base", "p", "o"] * 3,
                       "deviated": [0, 1, 0, 1, 1, 0, 0, 1] * 3})
    assert identical_levels(df, ["stigma", "style"]) == [[("stigma", "none"), ("style", "base")]]
    with pytest.raises(AliasingError, match="stigma='none' = style='base'"):
        logistic_regression(df, ["stigma", "style"], {"stigma": "none", "style": "base"})


def test_missing_reference_and_constant_factor():
    df = _two_by_two().assign(c="k")
    with pytest.raises(AliasingError, match="reference level"):
        logistic_regression(df, ["a"], {"a": "zz"})
    with pytest.raises(AliasingError, match="single level"):
        logistic_regression(df, ["a", "c"], {"a": "a0", "c": "k"})


def test_separation_is_flagged():
    df = pd.DataFrame({"a": ["x"] * 20 + ["y"] * 20 + ["z"] * 20,
                       "deviated": [0] * 20 + [1, 0] * 10 + [1] * 15 + [0] * 5})
    t = logistic_regression(df, ["a"], {"a": "y"}).table.set_index("term")
    assert bool(t.loc["a[x]", "separated"]) and not bool(t.loc["a[z]", "separated"])


def test_identifiable_subset_drops_aliased_in_priority_order():
    df = pd.DataFrame({"template": list("aabbcc") * 5, "answer": list("yynnnn") * 5,
                       "style": list("pqpqpq") * 5, "const": "k", "deviated": [0, 1, 1, 0, 1, 1] * 5})
    refs = {"template": "a", "answer": "n", "style": "p", "const": "k"}
    kept, dropped = identifiable_subset(df, ["answer", "style", "template", "const"], refs)
    assert kept == ["answer", "style"] and set(dropped) == {"template", "const"}
    assert "aliased" in dropped["template"]


def test_more_columns_than_rows_is_refused():
    df = pd.DataFrame({"a": list("pqrs"), "b": list("wxyz"), "deviated": [0, 1, 0, 1]})
    with pytest.raises(AliasingError, match="fewer rows than columns"):
        logistic_regression(df, ["a", "b"], {"a": "p", "b": "w"})


def test_few_clusters_wild_score_bootstrap_holds_its_size():
    """8 templates, a template-level factor (4 templates each) with no effect, template effects (sd 0.8 on
    the logit scale). The cluster-robust Wald test on the normal reference rejected in about 16 % of 300 runs at
    alpha = 0.05; the wild cluster score bootstrap (what p_cluster is below 30 clusters) in about 8 %."""
    import warnings

    from scipy import special, stats

    from biaslab.stats import importance

    rng = np.random.default_rng(0)
    g, reps = 8, 300
    normal = wild = 0
    for _ in range(reps):
        m = rng.integers(10, 60, size=g)
        cl = np.repeat(np.arange(g), m)
        x = np.repeat(rng.permutation(np.r_[np.zeros(g // 2), np.ones(g - g // 2)]), m)
        y = (rng.random(cl.size) < special.expit(-0.5 + rng.normal(0, 0.8, g)[cl])).astype(float)
        X = np.column_stack([np.ones(cl.size), x])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = sm.GLM(y, X, family=sm.families.Binomial()).fit(cov_type="cluster", cov_kwds={"groups": cl})
        normal += 2 * stats.norm.sf(abs(f.params[1] / f.bse[1])) < 0.05
        wild += importance.wild_score_p(y, X, 1, cl) < 0.05
    assert normal / reps > 0.12
    assert wild / reps <= 0.10
    # the regression table uses it below 30 clusters and says so
    df = pd.DataFrame({"y": y.astype(int), "f": np.where(x == 1, "b", "a"), "cl": cl})
    t = importance.logistic_regression(df, ["f"], {"f": "a"}, outcome="y", cluster="cl").table
    row = t[t.term == "f[b]"].iloc[0]
    assert row["p_method"].startswith("wild cluster score bootstrap") and "G = 8" in row["p_method"]
    assert row["p_cluster"] == pytest.approx(importance.wild_score_p(y, X, 1, cl))


def test_no_clustered_test_or_interval_from_score_totals_that_cancel():
    """A factor whose outcome is balanced inside every cluster has cluster score totals of 0: a clustered SE of 0 is
    no certainty, so the term gets no clustered p and no interval and says "not estimable (…)" (notebook 6's smoke
    run: a Winogender universe whose answers are alike in every occupation); the same for an OLS outcome that does
    not vary, and for a bootstrap of agreement whose every resample gives one value."""
    from biaslab.stats import agreement, importance
    df = pd.DataFrame({"f": ["r", "s"] * 24, "g": np.repeat(np.arange(4), 12), "y": [0, 1, 1, 0] * 12})
    t = logistic_regression(df, ["f"], {"f": "r"}, outcome="y", cluster="g").table
    assert t[["p_cluster", "ci_low_cluster", "ci_high_cluster"]].isna().all().all()
    assert (t["p_method"] == "not estimable (no variation between the 4 clusters of 48 items)").all()
    o = importance.linear_regression(df.assign(y=1.0), ["f"], {"f": "r"}, "y", cluster="g")
    assert o[["p_value", "ci_low"]].isna().all().all() and o["p_method"].str.startswith("not estimable").all()
    a = agreement.agreement_intervals(df.assign(b=df["y"]), "y", "b", "g", n_boot=50)
    assert a["agreement"] == 1 and np.isnan([a["agreement_ci_low"], a["kappa_ci_high"]]).all()
