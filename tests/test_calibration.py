"""Calibration simulators and vectorised tests: known sizes, agreement with the library's own tests, and the flag
on a deliberately anti-conservative test."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.stats import null_simulation as C
from biaslab.stats.clustered import mean_inference, rao_scott_gof, wild_cluster_mean_test, webb_weights


def clustered_design(g=12, size=(2, 15), icc=0.5, seed=1, null=0.0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(size[0], size[1], g)
    cl = np.repeat(np.arange(g), sizes)
    y = rng.normal(size=g)[cl] * np.sqrt(icc) + rng.normal(size=cl.size) * np.sqrt(1 - icc)
    return C.Design(y, [cl], null=null, label="test")


def test_iid_t_test_has_size_005_within_mc_error():
    y = np.random.default_rng(0).normal(size=80)
    d = C.Design(y, None)
    row = C.calibration_row("lpbs-mean", d, 4000, seed=3)
    assert abs(row["type_i_error"] - 0.05) < 3 * row["type_i_mc_se"] + 0.005
    assert row["coverage"] == pytest.approx(1 - row["type_i_error"])     # the t interval inverts the t test
    assert row["clusters"] == 80 and "1 strata" in row["test"]     # one stratum: the one-sample t(n - 1)


def test_naive_se_on_clustered_data_is_flagged_and_the_rule_is_not():
    d = clustered_design(g=40, size=(5, 30), icc=0.6)

    def naive(y, d, alpha=0.05, seed=0):     # treats the prompts as independent: the anti-conservative test
        n = y.shape[1]
        t = (y.mean(1) - d.null) / (y.std(1, ddof=1) / np.sqrt(n))
        p = 2 * stats.t.sf(np.abs(t), n - 1)
        return {"p": p, "covers": p > alpha, "method": "naive t"}

    bad = C.summarize(**{k: v for k, v in C.simulate("x", d, 2000, tests={"x": (C.swap, naive)}).items()
                         if k in ("p", "covers")})
    good = C.summarize(**{k: v for k, v in C.simulate("ssqa-deviation-rate", d, 2000).items() if k in ("p", "covers")})
    table = pd.DataFrame([{**bad, "claim": "naive"}, {**good, "claim": "rule"}])
    assert list(C.flag_oversize(table)["claim"]) == ["naive"]
    from biaslab.plan.calibration import oversize_line
    assert oversize_line(table.assign(design=["G = 40", "G = 40"])) == (
        f"1 of 2 claim instances reject a true null more often than {C.MAX_SIZE}: naive (G = 40)")
    assert bad["type_i_error"] > 0.2
    assert good["type_i_error"] < C.MAX_SIZE


def test_vectorised_mean_rule_equals_the_library_on_one_replication():
    for g in (40, 12):                                  # CR1 t(G - 1) and, below 30 clusters, the wild bootstrap
        d = clustered_design(g=g)
        y = C.swap(d, 3, np.random.default_rng(5))
        r = C.mean_rule(y, d)
        for i in range(3):
            lib = mean_inference(y[i], d.dims[0], null=0.0, n_boot=C.CALIBRATION_BOOT)
            if g >= 30:
                assert r["p"][i] == pytest.approx(lib["p_value"], rel=1e-9)
            else:                                       # same Webb weights as the calibration's matrix
                tot = np.bincount(d.dims[0], weights=y[i])
                size = np.bincount(d.dims[0]).astype(float)
                v = webb_weights(g, C.CALIBRATION_BOOT, 0)
                assert r["p"][i] == pytest.approx(wild_cluster_mean_test(tot, size, 0.0, v=v))


def test_two_way_rule_equals_the_library():
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 37, 150), rng.integers(0, 60, 150)
    d = C.Design(rng.normal(size=150) + rng.normal(size=37)[a], [a, b])
    y = C.swap(d, 2, rng)
    r = C.mean_rule(y, d)
    for i in range(2):
        assert r["p"][i] == pytest.approx(mean_inference(y[i], [a, b])["p_value"], rel=1e-9)


def test_rao_scott_equals_the_library_and_relabel_is_uniform():
    rng = np.random.default_rng(4)
    cl = np.repeat(np.arange(30), 10)
    labels = np.where(rng.random(300) < 0.5, 0, rng.integers(0, 5, 300))
    d = C.Design(labels, [cl], categories=5)
    y = C.relabel(d, 400, rng)
    assert np.allclose(np.bincount(y.astype(int).ravel(), minlength=5) / y.size, 0.2, atol=0.01)
    r = C.rao_scott(y[:2], d)
    for i in range(2):
        assert r["p"][i] == pytest.approx(rao_scott_gof(y[i].astype(int), cl, range(5))["p_value"], rel=1e-9)
    assert np.array_equal(np.sort(np.bincount(y[0][cl == 3].astype(int), minlength=5)),
                          np.sort(np.bincount(labels[cl == 3], minlength=5)))      # a cluster keeps its pattern


def stratified_design(seed=7, binary=False, null=0.0):
    rng = np.random.default_rng(seed)
    h = np.repeat(["race", "gender", "age", "religion"], 50)             # a balanced sample of unequal strata
    y = (rng.random(200) < 0.6).astype(float) if binary else rng.normal(size=200) * np.repeat([1, 3, 0.5, 2], 50)
    return C.Design(y, None, null=null, binary=binary, strata=h,
                    population={"race": 516, "gender": 262, "age": 87, "religion": 105})


def test_stratified_rule_equals_the_library_and_keeps_its_size():
    from biaslab.stats.stratified import stratified_mean
    for binary, null in ((False, 0.0), (True, 0.5)):
        d = stratified_design(binary=binary, null=null)
        y = C.swap(d, 3, np.random.default_rng(2))
        r = C.stratified_rule(y, d)
        h = np.asarray(d.strata)
        w = pd.Series(h).map({k: v / 50 for k, v in d.population.items()}).to_numpy()     # N_h / n_h
        for i in range(3):
            lib = stratified_mean(y[i], h, w, null=null)
            assert r["p"][i] == pytest.approx(lib["p_value"], rel=1e-9)
            assert r["covers"][i] == (lib["ci_low"] <= null <= lib["ci_high"])
        row = C.calibration_row("stereotype-share" if binary else "lpbs-mean", d, 2000, seed=1)
        assert row["type_i_error"] <= 0.05 + 3 * row["type_i_mc_se"] and "stratified" in row["test"]
        assert row["coverage"] == pytest.approx(1 - row["type_i_error"])


def test_a_stratum_without_population_size_is_refused():
    with pytest.raises(ValueError, match="population size"):
        C.Design(np.zeros(4), None, strata=np.array(["a", "a", "b", "b"]), population={"a": 10})


def test_cohens_w_interval_covers_zero_exactly_when_the_test_does_not_reject():
    rng = np.random.default_rng(4)
    cl = np.repeat(np.arange(40), 3)
    d = C.Design(np.where(rng.random(120) < 0.4, 0, rng.integers(0, 3, 120)), [cl], categories=3)
    y = C.relabel(d, 40, rng)
    r = C.rao_scott(y, d)
    for i in range(40):
        lib = rao_scott_gof(y[i].astype(int), cl, range(3))
        assert r["p"][i] == pytest.approx(lib["p_value"], rel=1e-9)
        assert r["covers"][i] == (lib["w_ci_low"] <= 0)


def test_unknown_claim_names_the_registry():
    with pytest.raises(KeyError, match="calibration.TESTS"):
        C.simulate("nope", C.Design(np.zeros(3), None), 10)


def test_paired_rule_follows_paired_difference_when_every_cluster_is_one_unit():
    from biaslab.stats.paired import paired_difference
    rng = np.random.default_rng(3)
    for binary, n in ((True, 20), (False, 20), (True, 60), (False, 60)):
        ya = (rng.random(n) < 0.5).astype(float) if binary else rng.normal(size=n)
        yb = (rng.random(n) < 0.5).astype(float) if binary else rng.normal(size=n)
        long = pd.DataFrame({"prompt_id": np.tile(np.arange(n), 2), "model": np.repeat(["a", "b"], n),
                             "y": np.r_[ya, yb], "pair": np.tile(np.arange(n), 2)})
        lib = paired_difference(long, "y", "a", "b", "pair", binary=binary, n_boot=C.CALIBRATION_BOOT)
        d = C.Design(ya - yb, [np.arange(n)], binary=binary)
        r = C.paired_rule((ya - yb)[None, :], d)
        assert r["p"][0] == pytest.approx(lib["p_value"], rel=1e-9), (binary, n)
        if n < 30:                                      # the interval: the wild bootstrap's, as mean_inference's
            assert "wild cluster bootstrap" in r["method"] and "wild cluster bootstrap" in lib["ci_method"]


def test_permutation_rule_is_the_calm_permutation_test_and_its_size_is_at_most_alpha():
    from biaslab.papers.calm import bias as cb
    rng = np.random.default_rng(0)
    ref = np.sort(rng.gamma(2.0, 10.0, 999))

    def draw(n, seed):                   # a continuous permutation null
        return np.random.default_rng(seed).gamma(2.0, 10.0, n)
    d = C.Design(np.array([30.0]), None, draw=draw, reference=ref, units=12)
    r = C.permutation_rule(np.array([[30.0], [80.0]]), d)
    assert r["p"] == pytest.approx([(1 + (ref >= 30).sum()) / 1000, (1 + (ref >= 80).sum()) / 1000])
    row = C.calibration_row("calm-eq1", d, 4000, seed=2)
    assert row["clusters"] == 12 and row["cluster_sizes"] == ""
    assert abs(row["type_i_error"] - 0.05) < 4 * row["type_i_mc_se"] + 0.01       # conditional on the reference
    assert 0.85 < row["coverage"] < 0.95                          # the 90 % location-shift interval
    assert "permutation" in row["test"] and callable(cb.permutation_draws)


def test_intercept_rule_is_statsmodels_wls_hc1_and_swap_pairs_flips_both_differences():
    import statsmodels.api as sm
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=11), rng.integers(1, 3, 11).astype(float)
    d = C.Design(0.3 + 0.8 * x + rng.normal(size=11), None, covariate=x, weights=w)
    yx = C.swap_pairs(d, 3, rng)
    s = np.sign(yx[:, :, 1] / x)                                   # one sign per unit flips both
    assert np.allclose(yx[:, :, 0], s * d.y) and set(np.unique(s)) <= {-1.0, 1.0}
    r = C.intercept_rule(yx, d)
    for i in range(3):
        fit = sm.WLS(yx[i, :, 0], sm.add_constant(yx[i, :, 1]), weights=w).fit(cov_type="HC1", use_t=True)
        lo, hi = fit.conf_int()[0]
        assert r["estimate"][i] == pytest.approx(fit.params[0]) and r["p"][i] == pytest.approx(fit.pvalues[0])
        assert r["covers"][i] == (lo <= 0 <= hi)


def test_notebook7_designs_rebuild_the_committed_tables_and_their_nulls_hold():
    from biaslab.plan import calibration as K
    from biaslab import paths
    from biaslab.papers.mbbq import analysis as A
    tables = paths.OUTPUTS_DIR / "07_mbbq" / "tables"
    insts = K.instances("07_mbbq", tables)           # each rebuild checked against the committed estimate (and p)
    assert sorted({i.claim for i in insts}) == ["mbbq-adjusted-contrast", "mbbq-ambig-en"]
    en = next(i for i in insts if i.claim == "mbbq-ambig-en")
    resp = pd.read_csv(tables / "responses.csv")
    part = resp[(resp["model"] == en.instance.split(" · ")[0]) & (resp["language"] == "en") & (resp["set"] == "bias")
                & (resp["context_condition"] == "ambig")]
    # the answer swap (biased <-> counter-biased answer, recomputed from the data) in any set of templates equals
    # flipping those templates' terms: so the sign-flip test is the swap null's exact randomization test
    rng = np.random.default_rng(1)
    tpl = part["template"].to_numpy()
    for _ in range(5):
        flip = set(rng.choice(np.unique(tpl), size=4, replace=False))
        swapped = part.assign(deviated=np.where(np.isin(tpl, list(flip)), part["non_unknown"] - part["deviated"],
                                                part["deviated"]))
        score = A.pseudo_values(swapped, "bias_score_ambig").mean()
        signs = np.where(np.isin(tpl, list(flip)), -1.0, 1.0)
        assert score == pytest.approx(float(np.sum(signs * en.design.y)), abs=1e-12)
    p = C.sign_flip_rule(C.swap(en.design, 4000, np.random.default_rng(0)), en.design)["p"]
    assert np.mean(p < 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000)      # exact: size at most alpha
    t = K.calibration_table(insts, 200)
    assert (t["replications"] == 200).all() and t["type_i_error"].between(0, 1).all()
