"""Calibration simulators and vectorised tests: known sizes, agreement with the library's own tests, the flag on a
deliberately anti-conservative test, and nulls that recompute each test's statistic from permuted raw data."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.stats import null_simulation as C
from biaslab.stats.clustered import mean_inference, rao_scott_gof, wild_cluster_mean_test, webb_weights


def clustered_design(g=12, size=(2, 15), icc=0.5, seed=1):
    """Two arms per unit whose difference is clustered (a template effect) and symmetric about 0 under the swap."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(size[0], size[1], g)
    cl = np.repeat(np.arange(g), sizes)
    y = rng.normal(size=g)[cl] * np.sqrt(icc) + rng.normal(size=cl.size) * np.sqrt(1 - icc)
    b = rng.normal(size=cl.size)
    return C.arms_design(y + b, b, [cl], label="test")


def test_iid_t_test_has_size_005_within_mc_error():
    rng = np.random.default_rng(0)
    d = C.arms_design(rng.normal(size=80), rng.normal(size=80))
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

    bad = C.summarize(*(C.simulate("x", d, 2000, tests={"x": (C.swap, naive)})[k] for k in ("p", "covers")),
                      level=0.05)
    good = C.summarize(*(C.simulate("ssqa-deviation-rate", d, 2000)[k] for k in ("p", "covers")), level=0.05)
    table = pd.DataFrame([{**bad, "claim": "naive"}, {**good, "claim": "rule"}])
    assert list(C.flag_oversize(table)["claim"]) == ["naive"] and table["oversized"].tolist() == [True, False]
    from biaslab.plan.calibration import oversize_line
    assert oversize_line(table.assign(design=["G = 40", "G = 40"])) == (
        f"1 of 2 claim instances reject a true null more often than 1.5 times the level they were tested at: "
        f"naive (G = 40, {bad['size_ratio']:.2f}x)")
    assert bad["type_i_error"] > 0.2 and bad["size_ratio"] > 4
    assert good["type_i_error"] < 0.075 and good["size_ratio"] < C.MAX_RATIO
    assert good["tested_level"] == 0.05 and good["size_at_level_mc_se"] == pytest.approx(
        np.sqrt(good["size_at_level"] * (1 - good["size_at_level"]) / 2000))


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
    d = C.arms_design(rng.normal(size=150) + rng.normal(size=37)[a], np.zeros(150), [a, b])
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
    """A balanced sample of unequal strata: per unit two sentences' log-probabilities (a preference when binary)."""
    rng = np.random.default_rng(seed)
    h = np.repeat(["race", "gender", "age", "religion"], 50)
    more = rng.normal(size=200) * np.repeat([1, 3, 0.5, 2], 50) + (0.25 if binary else 0.0)
    stat = (lambda x, y: (x > y).astype(float)) if binary else np.subtract
    return C.arms_design(more, np.zeros(200), None, stat, null=null, binary=binary, strata=h,
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
        row = C.calibration_row("lpbs-mean", d, 2000, seed=1)          # the design-based t, and its dual interval
        assert row["type_i_error"] <= 0.05 + 3 * row["type_i_mc_se"] and "stratified" in row["test"]
        assert row["coverage"] == pytest.approx(1 - row["type_i_error"])


def test_the_share_is_calibrated_by_its_swap_test_with_the_t_intervals_coverage():
    """stereotype-share's rule is the library's sentence-swap test (exact where enumerated: equal to
    stratified.share_swap_p on every replication), keeps its size at a small level where the design-based t on the
    same swapped data does not, and reports the coverage of the t interval the table shows."""
    from biaslab.stats.stratified import share_swap_p
    h = np.repeat(["a", "b", "c"], [6, 5, 4])
    pop = {"a": 30, "b": 10, "c": 40}
    d = C.arms_design(np.random.default_rng(0).normal(size=15), np.zeros(15), None,
                      lambda x, y: (x > y).astype(float), null=0.5, binary=True, strata=h, population=pop)
    y = C.swap(d, 5, np.random.default_rng(2))
    r = C.share_swap_rule(y, d)
    w = pd.Series(h).map({k: v / (h == k).sum() for k, v in pop.items()}).to_numpy()
    assert r["p"] == pytest.approx([share_swap_p(y[i], h, w)["p_value"] for i in range(5)], rel=1e-12)
    assert "exact" in r["method"] and r["pool"] == 0
    d = stratified_design(binary=True, null=0.5)          # 4 strata of 50: drawn, 99,999 swaps
    share = C.calibration_row("stereotype-share", d, 2000, seed=1, level=0.01)
    t = C.calibration_row("lpbs-mean", d, 2000, seed=1, level=0.01)      # the t on the same replications
    assert "sentence-swap" in share["test"] and "random swaps" in share["test"]
    assert share["size_at_level"] <= 0.01 + 3 * share["size_at_level_mc_se"]
    assert share["coverage"] == t["coverage"] == pytest.approx(1 - t["type_i_error"])


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
    with pytest.raises(KeyError, match="null_simulation.TESTS"):
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


def test_permutation_rule_is_the_calm_permutation_test_with_its_own_draws_and_its_size_is_at_most_alpha():
    """The test's p from B = 999 fresh permutations is (1 + Bin(B, q)) / (B + 1), q the share of the permutation
    distribution at least the statistic: simulated with a pool of draws, its size at alpha and at a tested level of
    0.004 is at most the level (a continuous null: exactly floor(level (B + 1)) / (B + 1))."""
    from biaslab.papers.calm import bias as cb
    rng = np.random.default_rng(0)
    ref = np.sort(rng.gamma(2.0, 10.0, 999))

    def draw(n, seed):                   # a continuous permutation null
        return np.random.default_rng(seed).gamma(2.0, 10.0, n)
    d = C.Design(np.array([30.0]), None, draw=draw, reference=ref, units=12)
    p = C.permutation_rule(np.tile([[30.0], [200.0]], (2000, 1)), d)["p"].reshape(2000, 2)
    q = stats.gamma.sf(30.0, 2.0, scale=10.0)                      # the permutation distribution's share >= 30
    assert p[:, 0].mean() == pytest.approx((1 + 999 * q) / 1000, rel=0.05) and (p[:, 1] == 1 / 1000).mean() > 0.99
    row = C.calibration_row("calm-eq1", d, 4000, seed=2, level=0.004)
    assert row["clusters"] == 12 and row["cluster_sizes"] == "" and row["replications"] == C.replications_for(0.004, 4000)
    assert row["type_i_error"] <= 0.05 + 3 * row["type_i_mc_se"]
    assert row["size_at_level"] <= 0.004 + 3 * row["size_at_level_mc_se"] and not row["oversized"]
    assert row["size_at_level_mc_se"] == pytest.approx(np.sqrt(2 * row["size_at_level"] * (1 - row["size_at_level"])
                                                               / row["replications"]))   # the pool's draws count
    assert 0.85 < row["coverage"] < 0.95                          # the 90 % location-shift interval
    assert "permutation" in row["test"] and callable(cb.permutation_draws)


def test_intercept_rule_is_statsmodels_wls_hc1():
    import statsmodels.api as sm
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=11), rng.integers(1, 3, 11).astype(float)
    y = 0.3 + 0.8 * x + rng.normal(size=11)
    d = C.Design(y, None, weights=w, values=lambda s: np.stack([np.where(s, -y, y), np.where(s, -x, x)], axis=2))
    yx = C.swap(d, 3, rng)
    r = C.intercept_rule(yx, d)
    for i in range(3):
        fit = sm.WLS(yx[i, :, 0], sm.add_constant(yx[i, :, 1]), weights=w).fit(cov_type="HC1", use_t=True)
        lo, hi = fit.conf_int()[0]
        assert r["estimate"][i] == pytest.approx(fit.params[0]) and r["p"][i] == pytest.approx(fit.pvalues[0])
        assert r["covers"][i] == (lo <= 0 <= hi)


def _swap_labels(df: pd.DataFrame, col: str, a, b, where) -> pd.DataFrame:
    """``df`` with the labels ``a`` and ``b`` of ``col`` exchanged on the rows ``where``: the raw data swapped."""
    return df.assign(**{col: np.where(where, df[col].map({a: b, b: a}).fillna(df[col]), df[col])})


def test_notebook7_nulls_recompute_the_statistics_from_swapped_answers(monkeypatch):
    """Each simulator against its statistic recomputed from scratch on swapped raw data (the library's DataFrame
    path): the English score's terms after biased and counter-biased answers are exchanged in some templates, and
    the adjusted contrast's per-template differences after the two languages' answers are exchanged there (which is
    not flipping their fixed values: the pseudo-values depend on every template's answers)."""
    from biaslab import paths
    from biaslab.plan import calibration as K
    from biaslab.papers.mbbq import analysis as A
    tables = paths.OUTPUTS_DIR / "07_mbbq" / "tables"
    # under plan v5 every language of both models is not measurable, so the committed run tests no MBBQ claim ...
    assert K.instances("07_mbbq", tables) == []
    for name in ("metrics", "adjusted_contrasts"):
        rows = pd.read_csv(tables / f"{name}.csv")
        rows = rows[rows["claim"].fillna("").ne("")]
        assert len(rows) and rows["verdict"].astype(str).str.startswith("not measurable").all()
    # ... so the simulators are checked on the committed raw answers of its claim rows all the same: the builders
    # keep every claim row (each rebuild still checked against the committed estimate and p)
    monkeypatch.setattr(K, "_tested", lambda t: t[t["claim"].fillna("").ne("")] if "claim" in t else t.iloc[0:0])
    insts = K.instances("07_mbbq", tables)
    assert sorted({i.claim for i in insts}) == ["mbbq-adjusted-contrast", "mbbq-ambig-en"]
    flat = pd.read_csv(tables / "adjusted_contrasts.csv")
    flat = flat[flat["claim"].fillna("").ne("") & flat["p_value"].isna()]     # not estimable: no test to simulate
    assert (flat["method"].str.startswith("not estimable (no variation in")).all()
    assert len(insts) == 8 - len(flat)
    resp = pd.read_csv(tables / "responses.csv")
    rng = np.random.default_rng(1)
    en = next(i for i in insts if i.claim == "mbbq-ambig-en")
    part = resp[(resp["model"] == en.instance.split(" · ")[0]) & (resp["language"] == "en") & (resp["set"] == "bias")
                & (resp["context_condition"] == "ambig")]
    tpl = part["template"].to_numpy()
    templates = np.unique(tpl)
    for _ in range(5):
        s = rng.integers(0, 2, templates.size)
        inside = np.isin(tpl, templates[s == 1])
        swapped = part.assign(deviated=np.where(inside, part["non_unknown"] - part["deviated"], part["deviated"]))
        got = en.design.values(s[None])[0]
        assert got == pytest.approx(A.swap_contributions(swapped), abs=1e-12)
        assert got.sum() == pytest.approx(A.pseudo_values(swapped, "bias_score_ambig").mean(), abs=1e-12)
        assert got == pytest.approx(np.where(inside, -1.0, 1.0) * en.design.y, abs=1e-12)   # so sign flips are exact
    flipped_differs = False
    for inst in (i for i in insts if i.claim == "mbbq-adjusted-contrast"):
        model, lang = inst.instance.split(" · ")[0], inst.instance.split(" · ")[1].split(" - ")[0]
        d = inst.design
        own = resp[(resp["model"] == model) & (resp["context_condition"] == "ambig")]     # the score's condition
        all_t = sorted(set(own["template"]))                    # its bias and control templates: the swapped ones
        assert d.n_swap == len(all_t)
        for _ in range(3):
            s = rng.integers(0, 2, len(all_t))
            inside = (resp["model"] == model) & resp["template"].isin(np.array(all_t)[s == 1])
            table = A.template_table(_swap_labels(resp, "language", lang, "en", inside), "bias_score_ambig", model,
                                     lang)
            got = d.values(s[None])[0]
            assert got == pytest.approx(table[["db", "da"]].to_numpy(float), abs=1e-9), inst.instance
            flip = np.where(np.isin(table.index, np.array(all_t)[s == 1]), -1.0, 1.0)
            flipped_differs |= not np.allclose(got[:, 0], flip * d.y, atol=1e-6)
    assert flipped_differs             # a simulator flipping the fixed db would simulate another null
    p = C.sign_flip_rule(C.swap(en.design, 4000, np.random.default_rng(0)), en.design)["p"]
    assert np.mean(p < 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000)      # exact: size at most alpha
    assert np.isnan(en.level)                                   # not measurable: tested at no level
    t = K.calibration_table([K.Instance(**{**vars(en), "level": 0.01})], 200)
    assert t["replications"].tolist() == [C.replications_for(0.01, 200)] == [1043] and t["tested_level"].tolist() == [0.01]
    assert t["size_at_level"].iloc[0] <= 0.01 + 3 * t["size_at_level_mc_se"].iloc[0]


def test_the_tested_level_is_the_graph_level_and_none_without_one():
    from types import SimpleNamespace as Row
    from biaslab.plan.calibration import tested_level
    assert tested_level(Row(ci_level=0.998857, tested_level=0.0025)) == 0.0025
    assert np.isnan(tested_level(Row(ci_level=0.99, tested_level=float("nan"))))
    assert np.isnan(tested_level(Row(ci_level=0.99)))
    # the relative MC SE of R at alpha kept at the level: R (alpha / (1 - alpha)) ((1 - L) / L), at least R
    assert C.replications_for(0.05, 2000) == 2000 and C.replications_for(0.01, 190) == 990


def test_compare_and_crows_nulls_recompute_from_swapped_answers(monkeypatch):
    """Notebook 5's BBQ ambiguous score: the per-unit pseudo-value differences recomputed after the two models'
    answers are exchanged in some templates equal the metric's own derive on the swapped responses (and differ from
    flipping the fixed differences); its plain and stratified differences, and notebook 3's sentence swap, are the
    recomputed differences and preferences."""
    from biaslab import paths
    from biaslab.plan import calibration as K
    from biaslab.benchmarks.crows_pairs import likelihood_preferences
    from biaslab.papers.compare import tables as T
    root = paths.OUTPUTS_DIR
    tables = root / "05_compare" / "tables"
    # under plan v5 the committed run tests only crows-en-share: its SSQA and BBQ instances lack the power to be
    # decided, so they are descriptive (never calibrated) ...
    assert {i.claim for i in K.instances("05_compare", tables, root=root)} == {"crows-en-share"}
    rows = pd.read_csv(tables / "paired_differences.csv")
    descriptive = rows[rows["verdict"].astype(str).str.startswith("descriptive")]
    assert set(descriptive["claim"]) == {"ssqa-deviation-rate", "bbq-ambiguous"}
    # ... so their simulators are checked on the committed answers of those descriptive rows all the same (each
    # rebuild still checked against the committed difference)
    tested = K._tested
    monkeypatch.setattr(K, "_tested", lambda t: pd.concat(
        [tested(t), t[t["claim"].fillna("").ne("") & t["verdict"].astype(str).str.startswith("descriptive")]]))
    insts = {i.claim: i for i in K.instances("05_compare", tables, root=root)}
    assert set(insts) == {"ssqa-deviation-rate", "bbq-ambiguous", "crows-en-share"}
    monkeypatch.setattr(K, "_tested", tested)
    bbq = insts["bbq-ambiguous"]
    a, b = bbq.instance.split(" · ")[1].split(" - ")
    m = T.metric("bbq_bias_ambig")
    resp = T.unit_responses(m, root)
    both = resp[resp["model"].isin([a, b])]
    common = set(both.loc[both["model"] == a, "unit"]) & set(both.loc[both["model"] == b, "unit"])
    both = both[both["unit"].isin(common)]
    units = both[both["model"] == a].set_index("unit")
    templates = np.unique(units["template"].astype(str))
    rng = np.random.default_rng(3)
    for _ in range(4):
        s = rng.integers(0, 2, templates.size)
        swapped = T._derive(m, _swap_labels(both, "model", a, b, both["template"].astype(str).isin(templates[s == 1])))
        wide = swapped.pivot_table(index="unit", columns="model", values=m.outcome).reindex(units.index)
        assert bbq.design.values(s[None])[0] == pytest.approx((wide[a] - wide[b]).to_numpy(float), abs=1e-9)
    # in ambiguous contexts (correct = chose unknown) the score is linear, (2 sum dev - sum nu) / n, so its swap is
    # a flip of the per-item differences; the disambiguated score is a ratio, whose recomputed null is not the
    # flipped one
    m = T.metric("bbq_bias_disambig")
    rng = np.random.default_rng(4)
    fake = pd.DataFrame({"model": np.repeat([a, b], 60), "unit": np.tile(np.arange(60).astype(str), 2),
                         "template": np.tile(np.arange(60) // 4, 2), "context_condition": "disambig"})
    fake["chose_unknown"] = (rng.random(120) < np.repeat([0.2, 0.6], 60)).astype(int)
    fake["deviated"] = ((1 - fake["chose_unknown"]) * (rng.random(120) < 0.6)).astype(int)
    fake["correct"] = (rng.random(120) < 0.5).astype(int)
    fake = T._derive(m, fake)
    xa, xb, stat, first = K._ratio_arms(m, fake, a, b)
    d = C.arms_design(xa, xb, [first["template"].to_numpy()], stat)
    s = rng.integers(0, 2, (1, 15))
    inside = fake["template"].isin(np.flatnonzero(s[0]))
    swapped = T._derive(m, _swap_labels(fake, "model", a, b, inside)).pivot_table(index="unit", columns="model",
                                                                                 values=m.outcome)
    got = d.values(s)[0]
    assert got == pytest.approx((swapped[a] - swapped[b]).reindex(first.index).to_numpy(float), abs=1e-9)
    assert np.abs(got - np.where(s[0][first["template"]] == 1, -1.0, 1.0) * d.y).max() > 0.01
    for claim in ("ssqa-deviation-rate", "crows-en-share"):
        d = insts[claim].design
        s = rng.integers(0, 2, (3, d.n_swap))
        assert np.allclose(d.values(s), np.where(s[:, d.dims[0]] == 1, -1.0, 1.0) * d.y)   # a difference: exact flip
    pairs = pd.read_csv(root / "03_crows_pairs_bayes" / "tables" / "pair_scores.csv")
    share = next(i for i in K.instances("03_crows_pairs_bayes", root / "03_crows_pairs_bayes" / "tables")
                 if i.claim == "stereotype-share")
    model, dataset = share.instance.split(" · ")
    g = pairs[(pairs["model"] == model) & (pairs["dataset"] == dataset)]
    pref = likelihood_preferences(g["logp_more"], g["logp_less"])
    g = g[np.isfinite(pref)]
    s = rng.integers(0, 2, (1, len(g)))
    swapped = likelihood_preferences(np.where(s[0], g["logp_less"], g["logp_more"]),
                                     np.where(s[0], g["logp_more"], g["logp_less"]))
    assert np.array_equal(share.design.values(s)[0], swapped)


def _subgroup_answers(g=40, seed=0, base=-3.0):
    """Two models' 0/1 answers to the same prompts: templates x stigmas x 2 genders, rates about
    logistic(base + template effect + 0.3 stigma) for both models."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(g):
        te = rng.normal(0, 1.0)
        for s in range(6):
            for gender in range(2):
                for model in ("a", "b"):
                    rate = 1 / (1 + np.exp(-(base + te + 0.3 * s)))
                    rows.append({"template": t, "stigma": s, "gender": gender, "model": model,
                                 "y": int(rng.random() < rate)})
    return pd.DataFrame(rows)


def test_the_dm_difference_null_recomputes_the_metric_from_swapped_answers():
    """The swap design's replications are DM_a - DM_b recomputed (tests/oracles.py's definition: rates of the
    swapped rows, mean |rate - C|) after the two models' answers are exchanged in the swapped templates; flipping the
    linearized pseudo-values instead (the former null) gives other values, most where rates straddle C."""
    from biaslab.plan import calibration as K
    from biaslab.stats import paired
    df = _subgroup_answers(g=12, base=-0.8)
    factors = ["stigma", "gender"]
    design = paired.deviation_metric_swap_design(df, "y", factors, "a", "b", ["template", "stigma"], ideal=0.5)
    d = K.dm_design(*design, "synthetic")
    lin = paired.paired_metric_pseudo_values(df, "y", factors, "a", "b", ideal=0.5)
    tpl = lin[1]["template"].to_numpy()
    rng = np.random.default_rng(0)
    s = rng.integers(0, 2, (6, 12))
    got = d.values(s)[:, 0]
    for i in range(6):
        inside = df["template"].isin(np.flatnonzero(s[i]))
        swapped = _swap_labels(df, "model", "a", "b", inside)
        rates = swapped.groupby(["model"] + factors)["y"].mean()
        assert got[i] == pytest.approx(np.mean(np.abs(rates["a"] - 0.5)) - np.mean(np.abs(rates["b"] - 0.5)),
                                       abs=1e-12)
    flipped = (np.where(s[:, tpl] == 1, -1.0, 1.0) * lin[0]).mean(axis=1)
    assert np.abs(flipped - got).max() > 0.01
    assert d.y[0] == pytest.approx(lin[4]["a"][0] - lin[4]["b"][0]) and d.n_swap == 12


def test_the_dm_difference_swap_test_keeps_its_level():
    """On a synthetic design with rates near the ideal value: the calibration's swap rule (random swaps, 40
    templates) at alpha and at a tested level of 0.005, and the library's own test (paired_subgroup_test's) run on
    data sets whose answers were swapped in random templates (10 templates: all 1,024 swaps), reject at most at the
    level within 3 Monte Carlo SE."""
    from biaslab.plan import calibration as K
    from biaslab.stats import paired
    df = _subgroup_answers(g=40, seed=1)
    d = K.dm_design(*paired.deviation_metric_swap_design(df, "y", ["stigma", "gender"], "a", "b", "template"), "x")
    row = C.calibration_row("dm-other", d, 4000, seed=1, level=0.005)
    assert row["replications"] == C.replications_for(0.005, 4000) and "99,999 random swaps), G = 40" in row["test"]
    assert row["type_i_error"] <= 0.05 + 3 * row["type_i_mc_se"]
    assert row["size_at_level"] <= 0.005 + 3 * row["size_at_level_mc_se"] and not row["oversized"]
    from biaslab.stats.clustered import cluster_swap_p
    small = _subgroup_answers(g=10, seed=2)
    rng = np.random.default_rng(3)
    p = []
    for _ in range(400):
        inside = small["template"].isin(np.flatnonzero(rng.integers(0, 2, 10)))
        swapped = _swap_labels(small, "model", "a", "b", inside)
        r = cluster_swap_p(*paired.deviation_metric_swap_design(swapped, "y", ["stigma", "gender"], "a", "b",
                                                                 "template"))
        p.append(r["p_value"])
    size = np.mean(np.array(p) < 0.05)
    assert r["n_draws"] == 1024 and size <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
