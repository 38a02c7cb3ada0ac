"""The design-based (stratified) estimator of the CrowS-Pairs claims against hand-worked examples and an independent
re-computation (own numpy/scipy code), and the committed claims against their pair scores and design table."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.stats import hypothesis as hyp
from biaslab.stats import reanalysis as S
from biaslab.stats import paired
from biaslab.stats.stratified import share_swap_p, stratified_mean
from biaslab import plan as P
from helpers import COMMITTED_PLAN, V4_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with
#: plan v4 for fabricated data: a v5 plan decides only the families its profile lists (real models), so made-up
#: models ("m", "A", "B") would be descriptive there; v4 decides every model's (or model pair's) family
V4 = P.load(V4_PLAN)

ROOT = Path(__file__).resolve().parents[1]


def independent(y, h, N_h, null=0.0, fpc=False):
    """Cochran (1977) eqs. 5.1, 5.7, 5.16 written out again: stratified mean, variance, Satterthwaite df, t."""
    y, h = np.asarray(y, float), np.asarray(h)
    N = sum(N_h.values())
    est = var = den = 0.0
    for s, Ns in N_h.items():
        ys = y[(h == s) & np.isfinite(y)]
        W, n = Ns / N, len(ys)
        g = W ** 2 * (1 - (n / Ns if fpc else 0)) / n
        est += W * ys.mean()
        var += g * ys.var(ddof=1)
        den += (g * ys.var(ddof=1)) ** 2 / (n - 1)
    df = var ** 2 / den
    t = (est - null) / np.sqrt(var)
    return est, np.sqrt(var), df, 2 * stats.t.sf(abs(t), df)


def test_hand_worked_unequal_strata():
    # A: 1, 2, 3 of N_A = 6 (weight 2); B: 4, 8 of N_B = 14 (weight 7). W = 0.3, 0.7; means 2, 6; s² 1, 8.
    # estimate 0.3*2 + 0.7*6 = 4.8; variance 0.09*1/3 + 0.49*8/2 = 0.03 + 1.96 = 1.99;
    # df = 1.99² / (0.03²/2 + 1.96²/1)
    y, h, w = [1, 2, 3, 4, 8], list("AAABB"), [2, 2, 2, 7, 7]
    r = stratified_mean(y, h, w)
    assert r["estimate"] == pytest.approx(4.8)
    assert r["se"] == pytest.approx(np.sqrt(1.99))
    assert r["df"] == pytest.approx(1.99 ** 2 / (0.03 ** 2 / 2 + 1.96 ** 2))
    assert r["n_population"] == 20 and r["n"] == 5
    q = stats.t.ppf(0.975, r["df"])
    assert r["ci_low"] == pytest.approx(4.8 - q * np.sqrt(1.99))
    assert r["p_value"] == pytest.approx(2 * stats.t.sf(4.8 / np.sqrt(1.99), r["df"]))
    # with the FPC: f = 3/6 and 2/14, so the variance is 0.03 * 1/2 + 1.96 * 6/7 = 1.695
    assert stratified_mean(y, h, w, fpc=True)["se"] == pytest.approx(np.sqrt(1.695))
    # the unweighted sample mean is another estimand: 3.6
    assert np.mean(y) == pytest.approx(3.6)


def test_random_designs_equal_an_independent_recomputation():
    rng = np.random.default_rng(3)
    for _ in range(20):
        H = rng.integers(2, 6)
        N_h = {f"s{i}": int(rng.integers(20, 400)) for i in range(H)}
        n_h = {s: int(rng.integers(2, min(N, 40))) for s, N in N_h.items()}
        h = np.concatenate([[s] * n for s, n in n_h.items()])
        y = rng.normal(rng.normal(size=H).repeat(list(n_h.values())), 1)
        y[rng.random(y.size) < 0.05] = np.nan                       # missing within strata (ties)
        if any(np.isfinite(y[h == s]).sum() < 2 for s in N_h):
            continue
        w = np.array([N_h[s] / n_h[s] for s in h])
        for fpc in (False, True):
            r = stratified_mean(y, h, w, null=0.1, fpc=fpc)
            est, se, df, p = independent(y, h, N_h, null=0.1, fpc=fpc)
            assert (r["estimate"], r["se"], r["df"], r["p_value"]) == pytest.approx((est, se, df, p), rel=1e-10)


def test_census_is_the_plain_stratified_t():
    """Every pair scored (weights 1): the stratified mean is the plain mean, the variance the within-stratum one."""
    rng = np.random.default_rng(0)
    h = np.repeat(["a", "b", "c"], [30, 50, 20])
    y = rng.normal(h == "b", 1.0)
    r = stratified_mean(y, h, np.ones(h.size))
    assert r["estimate"] == pytest.approx(y.mean())
    est, se, df, p = independent(y, h, {"a": 30, "b": 50, "c": 20})
    assert (r["se"], r["df"], r["p_value"]) == pytest.approx((se, df, p))
    # the within-stratum variance: sum_h (n_h/n)^2 s_h^2 / n_h
    within = sum((np.sum(h == s) / 100) ** 2 * y[h == s].var(ddof=1) / np.sum(h == s) for s in "abc")
    assert r["se"] ** 2 == pytest.approx(within)
    assert r["n_eff"] == pytest.approx(y.var(ddof=1) * 100 / 99 * 99 / 100 / within, rel=1e-9)


def test_undefined_designs_say_why_and_bad_weights_are_refused():
    assert "no sampled item" in stratified_mean([1.0, np.nan], ["a", "b"], [1, 1])["method"]
    r = stratified_mean([1.0, 2.0, 3.0], ["a", "a", "b"], [1, 1, 1])
    assert r["estimate"] == pytest.approx((1.5 * 2 + 3) / 3) and np.isnan(r["se"]) and "single" in r["method"]
    with pytest.raises(ValueError, match="stratum 'a' has unequal design weights"):
        stratified_mean([1, 2, 3], ["a", "a", "b"], [1, 2, 1])
    with pytest.raises(ValueError, match=">= 1"):
        stratified_mean([1, 2], ["a", "a"], [0.5, 0.5])


def test_pooled_rows_are_weighted_and_their_bayes_factor_is_on_the_same_t():
    rng = np.random.default_rng(1)
    h = np.repeat(["a", "b"], [40, 40])
    w = np.where(h == "a", 500 / 40, 100 / 40)
    d = rng.normal(np.where(h == "a", 0.0, 0.3), 0.5)
    pairs = pd.DataFrame({"model": "m", "dataset": "x", "bias_type": h, "stratum": h, "weight": w,
                          "d_norm_logprob": d, "d_perplexity": -d, "d_logprob": d})
    lik = hyp.likelihood_tests(pairs)
    o = lik[(lik.bias_type == "overall") & (lik.score == "norm_logprob")].iloc[0]
    st = stratified_mean(d, h, w)
    assert o["mean_d"] == pytest.approx(st["estimate"]) and o["t_p"] == pytest.approx(st["p_value"])
    assert o["mean_d"] == pytest.approx(500 / 600 * d[:40].mean() + 100 / 600 * d[40:].mean())
    assert (o["mean_ci_low"], o["mean_ci_high"]) == pytest.approx((st["ci_low"], st["ci_high"]))
    assert o["bf10"] == pytest.approx(np.exp(hyp.log_jzs_bf10(st["t"], st["n_eff"], hyp.SQRT2_2, st["df"])))
    assert o["n_population"] == 600 and o["estimator"].startswith("stratified")
    bt = lik[(lik.bias_type == "a") & (lik.score == "norm_logprob")].iloc[0]     # a type: its plain t
    assert bt["t_p"] == pytest.approx(stats.ttest_1samp(d[:40], 0).pvalue) and bt["n_population"] == 500
    # the share: the stratified share's sentence-swap randomization test and its t interval on the pooled row, the
    # exact binomial on a type's row
    x = (d > 0).astype(float)
    x[3] = np.nan                                                  # a tie: left out within its stratum
    pref = hyp.preference_tests(pairs.assign(x=x, source="likelihood"))
    po = pref[pref.bias_type == "overall"].iloc[0]
    sx = stratified_mean(x, h, w, null=0.5)
    assert (po["pi_hat"], po["pi_ci_low"]) == pytest.approx((sx["estimate"], sx["ci_low"]))
    assert po["p_value"] == pytest.approx(share_swap_p(x, h, w)["p_value"], rel=1e-12)
    assert po["p_method"].startswith("sentence-swap randomization test (exact, all 1,640 points; 2 strata)")
    assert np.isnan(po["binom_p"]) and po["n"] == 79 and po["n_excluded"] == 1
    pb = pref[pref.bias_type == "b"].iloc[0]
    assert pb["p_value"] == pytest.approx(stats.binomtest(int(x[40:].sum()), 40).pvalue)
    k, n = sx["estimate"] * sx["n_eff"], sx["n_eff"]
    from scipy.special import betaln
    assert po["bf10"] == pytest.approx(np.exp(betaln(k + 1, n - k + 1) + n * np.log(2)))


def test_stratified_paired_difference():
    h = np.repeat(["a", "b"], 6)
    w = np.where(h == "a", 10.0, 2.0)
    ya = np.array([1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0], float)
    yb = np.array([0, 1, 0, 0, 1, 1, 0, 0, 0, 1, np.nan, 0], float)
    df = pd.concat([pd.DataFrame({"model": m, "unit": range(12), "y": y, "stratum": h, "weight": w})
                    for m, y in (("A", ya), ("B", yb))])
    r = paired.paired_difference(df, "y", "A", "B", None, unit="unit", binary=True, stratified=True)
    dd = ya - yb                                                  # unit 10: B tied (NaN), left out within b
    st = independent(dd, h, {"a": 60, "b": 12})
    assert (r["difference"], r["p_value"]) == pytest.approx((st[0], st[3]))
    assert r["n_pairs"] == 11 and r["n_population"] == 72


def _seed(folder) -> int:
    import json
    return int(json.loads((ROOT / "outputs" / folder / "MANIFEST.json").read_text())["parameters"].get("seed", 0))


def _committed(folder, stem):
    p = ROOT / "outputs" / folder / "tables" / f"{stem}.csv"
    if not p.exists():
        pytest.fail(f"{p} is missing: run notebook {folder}")
    return pd.read_csv(p)


def test_committed_crows_claims_equal_their_weighted_recomputation():
    """Every weighted confirmatory CrowS-Pairs claim, recomputed from the committed pair scores and the design table
    (datasets.csv: N_h after exclusions, n_h scored) by this file's own code, equals the committed row."""
    ps = _committed("03_crows_pairs_bayes", "pair_scores")
    ds = _committed("03_crows_pairs_bayes", "datasets")
    lik = _committed("03_crows_pairs_bayes", "likelihood_tests")
    pref = _committed("03_crows_pairs_bayes", "preference_tests")
    pd5 = _committed("05_compare", "paired_differences")
    assert {"N_h", "n_h"} <= set(ds.columns), "datasets.csv must give N_h and n_h per bias type"
    N = {(r.dataset, r.bias_type): r.N_h for r in ds.itertuples()}
    prefs = {}
    for (m, d), g in ps.groupby(["model", "dataset"]):
        assert g.groupby("bias_type").size().to_dict() == ds[ds.dataset == d].set_index("bias_type")[
            "n_h"][lambda s: s > 0].to_dict(), f"{m} {d}: scored pairs per type differ from datasets.csv"
        Nh = {bt: N[(d, bt)] for bt in g["bias_type"].unique()}
        row = lik[(lik.model == m) & (lik.dataset == d) & (lik.bias_type == "overall")
                  & (lik.score == "norm_logprob")].iloc[0]
        est, se, df, p = independent(g["d_norm_logprob"], g["bias_type"], Nh)
        assert (row["mean_d"], row["t_p"]) == pytest.approx((est, p), rel=1e-6), f"lpbs-mean {m} {d}"
        x = np.where(g["logp_more"] == g["logp_less"], np.nan, (g["logp_more"] > g["logp_less"]).astype(float))
        prefs[(m, d)] = pd.Series(x, index=g["pair_id"].astype(str).to_numpy())
        row = pref[(pref.model == m) & (pref.dataset == d) & (pref.source == "likelihood")
                   & (pref.bias_type == "overall")].iloc[0]
        est, se, df, p = independent(x, g["bias_type"], Nh, null=0.5)
        if str(row["p_method"]).startswith("sentence-swap"):       # the share's randomization test, the run's seed
            w = g["bias_type"].map({bt: Nh[bt] / n for bt, n in g["bias_type"].value_counts().items()})
            p = share_swap_p(x, g["bias_type"].to_numpy(), w.to_numpy(), seed=_seed("03_crows_pairs_bayes"))["p_value"]
        assert (row["pi_hat"], row["p_value"]) == pytest.approx((est, p), rel=1e-6), f"stereotype-share {m} {d}"
    en = ps[ps.dataset == "crows_pairs_en"].drop_duplicates("pair_id")
    en.index = en["pair_id"].astype(str)
    claimed = pd5[pd5.metric == "crows_en_stereotype_preferred"]
    assert len(claimed), "notebook 5 has no crows-en-share row"
    for r in claimed.itertuples():
        dd = prefs[(r.model_a, "crows_pairs_en")] - prefs[(r.model_b, "crows_pairs_en")]
        bt = en["bias_type"].reindex(dd.index)
        est, se, df, p = independent(dd.to_numpy(), bt.to_numpy(),
                                     {b: N[("crows_pairs_en", b)] for b in bt.unique()})
        assert (r.difference, r.p_value) == pytest.approx((est, p), rel=1e-6), "crows-en-share"


def test_sensitivity_rows_follow_the_agreed_schema_and_recompute_each_analysis():
    from biaslab.papers.crows_pairs import decisions, sensitivity
    rng = np.random.default_rng(2)
    h = np.repeat(["a", "b"], 30)
    w = np.where(h == "a", 300 / 30, 60 / 30)
    d = rng.normal(np.where(h == "a", 0.0, 0.4), 0.5)
    pairs = pd.DataFrame({"model": "m", "dataset": "crows_pairs_en", "bias_type": h, "stratum": h, "weight": w,
                          "d_norm_logprob": d, "d_perplexity": -d, "d_logprob": d, "logp_more": d,
                          "logp_less": 0.0, "prompt_id": range(60)})
    lik = hyp.likelihood_tests(pairs)
    pref = hyp.preference_tests(pairs.assign(x=(d > 0).astype(float), source="likelihood"))
    decided = decisions.decide(lik, pref, plan=V4)
    sens = sensitivity.notebook3(pairs, decided, plan=V4)
    assert list(sens.columns[:len(S.COLUMNS)]) == S.COLUMNS
    assert len(sens) == 6 and set(sens["analysis"]) == {"primary", "unweighted", "fpc"}
    lp = sens[sens["claim"] == "lpbs-mean"].set_index("analysis")
    assert lp.loc["unweighted", "estimate"] == pytest.approx(d.mean())
    assert lp.loc["unweighted", "p_value"] == pytest.approx(stats.ttest_1samp(d, 0).pvalue)
    assert lp.loc["fpc", "p_value"] == pytest.approx(independent(d, h, {"a": 300, "b": 60}, fpc=True)[3])
    assert lp.loc["primary", "p_value"] == pytest.approx(independent(d, h, {"a": 300, "b": 60})[3])
    sh = sens[sens["claim"] == "stereotype-share"].set_index("analysis")
    assert sh.loc["unweighted", "p_value"] == pytest.approx(stats.binomtest(int((d > 0).sum()), 60).pvalue)
    assert (sens["verdict_survives"] == (sens["verdict"] == sens["primary_verdict"])).all()
    assert sens["verdict"].isin(["distinguishable", "not distinguishable"]).all()


def test_notebook5_sensitivity_rows_are_one_call():
    from biaslab.papers import compare
    from biaslab.papers.crows_pairs import sensitivity
    rng = np.random.default_rng(4)
    h = np.repeat(["a", "b", "c"], 20)
    w = np.select([h == "a", h == "b"], [200 / 20, 50 / 20], 30 / 20)
    resp = pd.concat([pd.DataFrame({"model": m, "unit": [str(i) for i in range(60)], "pair_id": range(60),
                                    "stratum": h, "weight": w,
                                    "stereotype_preferred": (rng.random(60) < p).astype(float)})
                      for m, p in (("A", 0.7), ("B", 0.45))])
    res = paired.paired_difference(resp, "stereotype_preferred", "A", "B", None, unit="unit", binary=True,
                                   stratified=True)
    pairs = compare.decide_pairs(pd.DataFrame([{"metric": "crows_en_stereotype_preferred", **res,
                                                "answer_mode_a": "x", "answer_mode_b": "x"}]), plan=V4)
    prim = pairs.assign(_index=pairs.index).to_dict("records")[0]
    alts = sensitivity.paired_rows(resp, pairs)
    sens = S.decide(pd.DataFrame([{"claim": prim["claim"], "family": prim["family"], "instance": alts[0]["instance"],
                                   "analysis": "primary", "estimate": prim["difference"], "p_value": prim["p_value"],
                                   "n_families": prim["n_families"], "share": prim["share"]}] + alts))
    assert list(sens.columns[:len(S.COLUMNS)]) == S.COLUMNS and len(sens) == 3
    s = sens.set_index("analysis")
    assert s.loc["primary", "estimate"] == pytest.approx(res["difference"])
    assert s.loc["primary", "verdict"] == pairs["verdict"].iloc[0]
    ya, yb = (resp.loc[resp.model == m, "stereotype_preferred"].to_numpy() for m in "AB")
    assert s.loc["unweighted", "estimate"] == pytest.approx(ya.mean() - yb.mean())
    assert s.loc["fpc", "p_value"] == pytest.approx(
        independent(ya - yb, h, {"a": 200, "b": 50, "c": 30}, fpc=True)[3])


def test_the_share_swap_test_on_hand_examples():
    """Stratum a: 2 pairs of 2 in the file (weight 1), stratum b: 1 pair of 2 (weight 2), so W = (1/2, 1/2) and the
    swap distribution of the share's distance from 1/2 is 0.5 (k_a/2 - 1/2) + 0.5 (k_b - 1/2), k_a ~ Bin(2, 1/2),
    k_b ~ Bin(1, 1/2): -0.5, -0.25, 0, 0, 0.25, 0.5 with probabilities 1/8, 1/4, 1/8, 1/8, 1/4, 1/8."""
    h, w = np.array(["a", "a", "b"]), np.array([1.0, 1.0, 2.0])
    r = share_swap_p([1, 1, 1], h, w)               # share 1, distance 0.5: the two extreme points, 1/8 + 1/8
    assert (r["estimate"], r["p_value"]) == pytest.approx((1.0, 0.25))
    r = share_swap_p([1, 0, 1], h, w)               # share 0.75, distance 0.25: all but the two zeros, 3/4
    assert (r["estimate"], r["p_value"]) == pytest.approx((0.75, 0.75))
    # a tie (NaN) leaves stratum b with no pair: no share, no test
    assert np.isnan(share_swap_p([1, 0, np.nan], h, w)["p_value"])
    # one stratum, or equal weights N_h / n_h over strata (a self-weighting sample): the exact binomial test
    x = np.r_[np.ones(31), np.zeros(19)]
    assert share_swap_p(x, np.zeros(50), np.ones(50))["p_value"] == pytest.approx(stats.binomtest(31, 50).pvalue)
    big = np.repeat(list("abcdefgh"), 40)
    y = (np.random.default_rng(1).random(320) < 0.58).astype(float)
    r = share_swap_p(y, big, np.full(320, 3.0))
    assert r["p_value"] == pytest.approx(stats.binomtest(int(y.sum()), 320).pvalue) and "binomial" in r["method"]


def test_the_share_swap_test_draws_agree_with_its_enumeration():
    """Beyond N_SWAP + 1 points the p is (1 + #{D* >= D}) / (B + 1) from B random swaps: within 4 Monte Carlo SEs
    of the enumerated swap distribution's exact p (here 1.1 million points)."""
    rng = np.random.default_rng(3)
    h = np.repeat(["a", "b", "c", "d"], [40, 41, 30, 20])
    w = np.repeat([5.0, 2.0, 3.0, 2.5], [40, 41, 30, 20])
    x = (rng.random(h.size) < np.repeat([0.62, 0.5, 0.55, 0.45], [40, 41, 30, 20])).astype(float)
    drawn, exact = share_swap_p(x, h, w, seed=4), share_swap_p(x, h, w, n_max=2_000_000)
    assert "random swaps" in drawn["method"] and "exact" in exact["method"]
    assert abs(drawn["p_value"] - exact["p_value"]) < 4 * np.sqrt(exact["p_value"] * (1 - exact["p_value"]) / 99_999)
    assert 0.001 < exact["p_value"] < 0.5                   # a p the comparison can resolve
