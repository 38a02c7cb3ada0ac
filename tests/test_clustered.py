"""The one rule for clustered inference: CR1 standard errors (one- and two-way) against statsmodels, the wild cluster
restricted bootstrap against a naive loop, Korn-Graubard and the wild bootstrap against simulated coverage where the
old methods under-cover, and a committed Granite row on fabricated data of the same shape."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import special, stats

from biaslab.stats import clustered as C
from biaslab.stats import intervals, paired
import oracles


def _crossed(seed=0, n_t=12, n_s=15, reps=3, sd_t=0.8, sd_s=0.8, p=0.3):
    """Binary outcomes on a crossed template x stigma design with effects on both."""
    rng = np.random.default_rng(seed)
    t = np.repeat(np.arange(n_t), n_s * reps)
    s = np.tile(np.repeat(np.arange(n_s), reps), n_t)
    eta = special.logit(p) + sd_t * rng.standard_normal(n_t)[t] + sd_s * rng.standard_normal(n_s)[s]
    y = (rng.random(t.size) < special.expit(eta)).astype(float)
    return pd.DataFrame({"y": y, "template": t, "stigma": s})


def test_cr1_one_and_two_way_match_statsmodels():
    d = _crossed()
    y = d["y"].to_numpy()
    ones = np.ones((len(y), 1))
    one = sm.OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": d["template"].to_numpy()})
    two = sm.OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": d[["template", "stigma"]].to_numpy()})
    r1 = C.rate_inference(y, d["template"].to_numpy())
    r2 = C.rate_inference(y, [d["template"].to_numpy(), d["stigma"].to_numpy()])
    assert r1["se"] == pytest.approx(float(one.bse[0]), rel=1e-10)
    assert r2["se"] == pytest.approx(float(two.bse[0]), rel=1e-10)
    assert r2["se"] > r1["se"]                                 # the stigma effect adds variance one-way misses
    assert r2["n_clusters"] == 12 and r2["df"] == 11            # the smaller dimension
    m = intervals.rate_intervals(d, "y", ["template", "stigma"]).iloc[0]
    assert m["se_cluster"] == pytest.approx(r2["se"]) and "two-way" in m["ci_method"]


def test_wild_bootstrap_t_equals_a_naive_loop():
    """The closed-form bootstrap t (cluster totals, polynomial in the null) equals refitting each bootstrap sample:
    y* = mu0 + v_g (y - mu0), t* = (mean(y*) - mu0) / CR1 SE of y* (statsmodels OLS with cluster covariance)."""
    rng = np.random.default_rng(3)
    g = 5
    cl = np.repeat(np.arange(g), rng.integers(3, 9, size=g))
    y = rng.normal(0.3, 1, cl.size) + rng.normal(0, 0.5, g)[cl]
    tot, size = np.bincount(cl, weights=y), np.bincount(cl).astype(float)
    v = C.webb_weights(g, n_boot=40, seed=1)        # 6^5 > 40: 40 random draws
    mu0 = 0.1
    fast = C._WCR(tot, size, v).t(mu0)
    for b in range(len(v)):
        ystar = mu0 + v[b][cl] * (y - mu0)
        fit = sm.OLS(ystar, np.ones((y.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": cl})
        assert fast[b] == pytest.approx((fit.params[0] - mu0) / fit.bse[0], rel=1e-9)
    # enumeration: 6^G vectors when that is at most n_boot, each weight once per position
    w = C.webb_weights(3, n_boot=9999)
    assert w.shape == (216, 3) and np.allclose(w.mean(axis=0), 0) and np.allclose((w ** 2).mean(axis=0), 1)


def test_wild_interval_inverts_the_test_and_contains_the_estimate():
    rng = np.random.default_rng(5)
    cl = np.repeat(np.arange(7), [3, 10, 4, 25, 6, 8, 2])
    y = rng.normal(0, 1, cl.size) + rng.normal(0, 0.7, 7)[cl]
    r = C.mean_inference(y, cl)
    assert r["ci_low"] < r["estimate"] < r["ci_high"]
    tot, size = np.bincount(cl, weights=y), np.bincount(cl).astype(float)
    eps = 1e-3 * r["se"]
    for bound, inside in ((r["ci_low"], r["ci_low"] + eps), (r["ci_high"], r["ci_high"] - eps)):
        assert C.wild_cluster_mean_test(tot, size, inside) > 0.05
        assert C.wild_cluster_mean_test(tot, size, 2 * bound - inside) <= 0.05
    assert r["p_value"] == pytest.approx(C.wild_cluster_mean_test(tot, size, 0.0))
    assert r["ci_method"].startswith("wild cluster bootstrap-t") and "G = 7" in r["ci_method"]


def test_wild_bootstrap_p_is_never_zero_with_random_draws():
    """Davison & Hinkley (1997) eq. 4.11: with B random draws p = (1 + #{t* >= t}) / (B + 1); a far null that no
    draw reaches gets 1 / (B + 1), not 0. Under full enumeration (6^G <= B) p is the exact share, and the all-ones
    weight vector reproduces t, so it is at least 6^-G."""
    rng = np.random.default_rng(7)
    cl = np.repeat(np.arange(8), 5)                     # 6^8 > 999: random draws
    tot = np.bincount(cl, weights=rng.normal(0, 1, cl.size))
    size = np.bincount(cl).astype(float)
    assert C.wild_cluster_mean_test(tot, size, 1e3, n_boot=999) == pytest.approx(1 / 1000)
    v = C.webb_weights(8, 999, seed=0)
    ybar, se = C._wcr_observed(tot, size)
    t_b = np.abs(C._WCR(tot, size, v).t(0.2))
    hits = int(np.sum(t_b >= abs(ybar - 0.2) / se * (1 - 1e-12)))
    assert C.wild_cluster_mean_test(tot, size, 0.2, n_boot=999) == pytest.approx((1 + hits) / 1000)
    assert C.wild_cluster_mean_test(tot[:3], size[:3], 1e3) == pytest.approx(1 / 6 ** 3)    # enumerated: 216


def test_sign_flip_p_by_hand_and_by_draws():
    """Totals (1, 2, 3): the 8 sign vectors give |sums| 6, 4, 2, 0, 0, 2, 4, 6, so p = 2/8 at the observed 6; a
    vector of totals gets one p per row; with more vectors than n_max, (1 + hits) / (n_max + 1)."""
    assert C.sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    assert C.sign_flip_p([1.0, -1.0, 2.0]) == pytest.approx(6 / 8)     # |2|: 2, 0, 4, 2, 2, 4, 0, 2 -> 6 of 8 >= 2
    assert np.isnan(C.sign_flip_p([0.0, 0.0]))          # every total 0: one value, no test (not p = 1)
    np.testing.assert_allclose(C.sign_flip_p(np.array([[1.0, 2.0, 3.0], [1.0, -1.0, 2.0]])), [2 / 8, 6 / 8])
    t = np.arange(1.0, 21.0)                                           # 2^20 vectors > n_max: random draws
    bits = np.frombuffer(np.random.default_rng(3).bytes(999 * 3), dtype=np.uint8).reshape(999, 3)
    s = 1.0 - 2.0 * np.unpackbits(bits, axis=1, count=20)              # one random bit per cluster
    hits = int(np.sum(np.abs(s @ t) >= t.sum() * (1 - 1e-12)))
    assert C.sign_flip_p(t, n_max=999, seed=3) == pytest.approx((1 + hits) / 1000)


def _few_cluster_rates(g, rng, p=0.3, sd=0.8):
    m = rng.integers(20, 300, size=g)
    pg = special.expit(special.logit(p) + sd * rng.standard_normal(g))
    y = np.concatenate([rng.random(k) < q for k, q in zip(m, pg)]).astype(float)
    return y, np.repeat(np.arange(g), m)


def test_few_cluster_rate_interval_covers_where_effective_n_clopper_pearson_did_not():
    """4 unequal clusters, cluster rates logit-normal (sd 0.8) around 0.3: the old interval (Clopper-Pearson on n/deff,
    no t(G - 1) adjustment) covers 78 % here; Korn-Graubard with t(3) 91 %."""
    x = stats.norm.ppf(np.linspace(5e-5, 1 - 5e-5, 20001))
    truth = special.expit(special.logit(0.3) + 0.8 * x).mean()
    rng = np.random.default_rng(11)
    old = new = 0
    reps = 300
    for _ in range(reps):
        y, cl = _few_cluster_rates(4, rng)
        n, ph = y.size, y.mean()
        deff = max(oracles.design_effect(y, cl), 1.0)
        lo, hi = C.clopper_pearson(ph * n / deff, n / deff)
        old += lo <= truth <= hi
        r = C.rate_inference(y, cl)
        new += r["ci_low"] <= truth <= r["ci_high"]
    assert old / reps < 0.84
    assert new / reps >= 0.88


def test_few_cluster_mean_interval_covers_where_the_normal_reference_did_not():
    """5 unequal clusters of a continuous outcome: the wild bootstrap interval covers 94 % here, a Wald interval on
    the same CR1 SE with the normal reference (what paired.py did with 10+ clusters) 82 %."""
    rng = np.random.default_rng(2)
    wild = normal = 0
    reps = 300
    for _ in range(reps):
        sizes = rng.integers(2, 40, size=5)
        cl = np.repeat(np.arange(5), sizes)
        y = rng.normal(0, 1, cl.size) + rng.normal(0, 1, 5)[cl]
        r = C.mean_inference(y, cl, n_boot=999)
        wild += r["ci_low"] <= 0 <= r["ci_high"]
        normal += abs(r["estimate"]) <= 1.96 * r["se"]
    assert wild / reps >= 0.90
    assert normal / reps < 0.86


def test_granite_male_shape_four_templates():
    """A committed Granite-male row (4 templates, 1,116 prompts, rate 0.379): the old effective-n Clopper-Pearson
    gave about [0.258, 0.512]; the new interval uses t(3) and is about as wide as the cluster-robust t(3) interval
    [0.151, 0.607]. Fabricated with the same template rates."""
    rates, sizes = [0.62, 0.18, 0.45, 0.27], [279, 279, 279, 279]
    y = np.concatenate([np.r_[np.ones(round(r * m)), np.zeros(m - round(r * m))] for r, m in zip(rates, sizes)])
    cl = np.repeat(np.arange(4), sizes)
    d = pd.DataFrame({"y": y, "template": cl})
    r = intervals.rate_intervals(d, "y", "template").iloc[0]
    deff = oracles.design_effect(y, cl)
    lo_old, hi_old = C.clopper_pearson(y.mean() * y.size / deff, y.size / deff)
    se = C.mean_inference(y, cl)["se"]
    t3 = (y.mean() - stats.t.ppf(0.975, 3) * se, y.mean() + stats.t.ppf(0.975, 3) * se)
    assert r["df"] == 3 and r["n_clusters"] == 4
    assert (r["ci_high"] - r["ci_low"]) > 1.6 * (hi_old - lo_old)
    assert (r["ci_high"] - r["ci_low"]) == pytest.approx(t3[1] - t3[0], rel=0.15)


def test_paired_difference_uses_t_not_the_normal_with_many_clusters():
    """With 12 templates the old code tested the paired difference against N(0, 1); the rule says t(G - 1) (or the
    wild bootstrap below 30 clusters), and with 40 templates t(39) on the CR1 SE."""
    rng = np.random.default_rng(0)
    rows = []
    for t in range(40):
        shift = rng.normal(0, 0.1)
        for i in range(10):
            p = rng.uniform(0.2, 0.6)
            rows += [{"prompt_id": f"{t}-{i}", "template": t, "model": "a", "y": int(rng.random() < p + shift)},
                     {"prompt_id": f"{t}-{i}", "template": t, "model": "b", "y": int(rng.random() < p)}]
    df = pd.DataFrame(rows)
    r = paired.paired_difference(df, "y", "a", "b", "template")
    assert r["df"] == 39 and r["p_value"] == pytest.approx(2 * stats.t.sf(abs(r["statistic"]), 39))
    assert r["ci_high"] - r["difference"] == pytest.approx(stats.t.ppf(0.975, 39) * r["se_cluster"])
    few = paired.paired_difference(df[df["template"] < 12], "y", "a", "b", "template")
    assert few["test"].startswith("wild cluster bootstrap") and few["n_clusters"] == 12


def test_two_way_falls_back_to_one_way_where_a_dimension_is_constant():
    """SSQA's 37 no-stigma prompts: one stigma, 37 templates — the two-way variance is the template one-way one."""
    d = _crossed(seed=4)
    one = d[d["stigma"] == 0]
    two = C.rate_inference(one["y"].to_numpy(), [one["template"].to_numpy(), one["stigma"].to_numpy()])
    ref = C.rate_inference(one["y"].to_numpy(), one["template"].to_numpy())
    assert two["n_clusters"] == 12 and two["se"] == pytest.approx(ref["se"])


# -------------------------------------------------------------------------------------------- Rao-Scott goodness of fit

def _clustered_null(rng, g, m, k, conc):
    """Categorical outcomes with scenario-level clustering under a uniform null: each cluster draws its own choice
    probabilities from Dirichlet(conc, ..., conc) (mean 1/k), its m units choose from them."""
    pis = rng.dirichlet(np.full(k, conc), size=g)
    u = rng.random((g, m, 1))
    lab = (u > np.cumsum(pis, axis=1)[:, None, :]).sum(axis=2).ravel()
    return lab, np.repeat(np.arange(g), m)


@pytest.mark.parametrize("g, m, k, conc", [(50, 4, 3, 1.0), (102, 2, 5, 0.5), (20, 6, 3, 2.0)])
def test_rao_scott_keeps_its_size_where_the_naive_chi_square_over_rejects(g, m, k, conc):
    """Under a uniform null with scenario-level clustering, the naive Pearson chi-square (prompts independent) rejects
    far more than 5 %; the first-order Rao-Scott test (X2 / CR1 design effect, F(k-1, (k-1)(G-1))) stays near 5 %.
    (102 clusters of 2 with k = 5 is notebook 4's design: 204 prompts of a class type in 102 scenarios.)"""
    rng = np.random.default_rng(g + m + k)
    naive = rs = 0
    reps = 800
    for _ in range(reps):
        lab, cl = _clustered_null(rng, g, m, k, conc)
        r = C.rao_scott_gof(lab, cl, range(k))
        naive += r["p_naive"] < 0.05
        rs += r["p_value"] < 0.05
    assert naive / reps > 0.10 and rs / reps <= 0.07, (naive / reps, rs / reps)


def test_rao_scott_by_hand():
    """Perfectly clustered: each of 30 clusters answers one category twice. Pearson's X2 on the 60 units is twice
    that on the 30 clusters, the design effect is 2 (CR1 with G/(G-1)), and the corrected statistic is the
    clusters' own chi-square up to that factor."""
    per_cluster = np.repeat([0, 1, 2], [14, 8, 8])
    lab, cl = np.repeat(per_cluster, 2), np.repeat(np.arange(30), 2)
    r = C.rao_scott_gof(lab, cl, range(3))
    x2_clusters = stats.chisquare(np.bincount(per_cluster)).statistic
    assert r["chi2"] == pytest.approx(2 * x2_clusters)
    p = np.bincount(lab) / 60
    v = 30 / 29 * np.array([np.sum((2 * (per_cluster == j) - 2 * p[j]) ** 2) for j in range(3)]) / 60 ** 2
    assert r["design_effect"] == pytest.approx(60 / 2 * np.sum(v / (1 / 3)))
    # n V(p_j) = 2 (G / (G - 1)) p_j (1 - p_j): twice the multinomial variance, so delta = 2 G/(G-1) sum p_j(1-p_j)
    # / sum pi_j (1 - pi_j) at these shares
    assert r["design_effect"] == pytest.approx(2 * 30 / 29 * np.sum(p * (1 - p) / (1 / 3)) / 2)
    assert r["chi2_rao_scott"] == pytest.approx(r["chi2"] / r["design_effect"])
    assert r["p_value"] == pytest.approx(stats.f.sf(r["chi2_rao_scott"] / 2, 2, 2 * 29))
    assert r["p_naive"] < r["p_value"]
    # independent units: the floor keeps the naive statistic
    ind = C.rao_scott_gof(per_cluster, None, range(3))
    assert ind["chi2_rao_scott"] == pytest.approx(ind["chi2"]) and ind["n_clusters"] == 30


@pytest.mark.parametrize("g", [8, 40])           # the wild bootstrap (G < 30) and the cluster-robust t
def test_a_cluster_column_named_cluster_is_not_said_twice(g):
    """Notebook 6's per-item values carry their generating unit in a column named ``cluster``: its method strings
    read "G = 8 clusters", never "cluster clusters"; a named unit keeps its name."""
    rng = np.random.default_rng(2)
    cl = np.repeat(np.arange(g), 3)
    d = pd.DataFrame({"unit": np.tile(np.arange(cl.size), 2), "cluster": np.tile(cl, 2),
                      "universe": np.repeat(["u", "paper"], cl.size), "value": rng.normal(0, 1, 2 * cl.size)})
    r = paired.paired_difference(d, "value", "u", "paper", "cluster", model="universe", unit="unit", binary=False)
    assert f"G = {g} clusters" in r["ci_method"] and f"in {g} clusters" in r["mde_design"]
    assert "cluster clusters" not in r["ci_method"] + r["mde_design"]
    named = paired.paired_difference(d.rename(columns={"cluster": "template"}), "value", "u", "paper", "template",
                                     model="universe", unit="unit", binary=False)
    assert f"G = {g} template clusters" in named["ci_method"]


def test_zero_variance_gives_no_p_and_no_interval_anywhere():
    """A variance estimated as 0 — a constant outcome (CR1 and wild bootstrap), arms alike in every cluster, a
    stratified sample without spread, a cluster bootstrap of one value, a paired test without a discordant pair —
    gives p NaN (never 0 or 1) and no interval (never [estimate, estimate]), and says "not estimable (…)" with its n."""
    from biaslab.stats import paired, ranking, stratified
    for g in (40, 6):                                 # CR1 t(G - 1) and the wild cluster bootstrap
        r = C.mean_inference(np.full(2 * g, 0.3), np.repeat(np.arange(g), 2), null=0.0)
        assert np.isnan([r["p_value"], r["ci_low"], r["ci_high"]]).all() and r["estimate"] == pytest.approx(0.3)
        assert r["ci_method"] == f"not estimable (no variation in {2 * g} items)"
    d = np.tile([1.0, -1.0], 8)                       # differences that cancel inside each of 8 clusters
    r = C.mean_inference(d, np.repeat(np.arange(8), 2))
    assert np.isnan(r["p_value"]) and r["ci_method"] == "not estimable (no variation between the 8 clusters of 16 items)"
    assert np.isnan(C.wild_cluster_mean_test([2.0, 2.0], [2, 2], null=0.0))
    assert np.isnan(C.wild_cluster_mean_interval([2.0, 2.0], [2, 2])).all()
    c = C.contrast_inference(np.r_[np.ones(4), np.zeros(4)], np.arange(8) < 4, np.arange(8) % 4)
    assert np.isnan([c["ci_low"], c["ci_high"]]).all() and c["ci_method"].startswith("not estimable")
    s = stratified.stratified_mean(np.ones(6), [0, 0, 0, 1, 1, 1], np.full(6, 3.0), null=0.5)
    assert np.isnan([s["p_value"], s["ci_low"], s["ci_high"]]).all()
    assert s["method"] == "not estimable (no variation in 6 items)"
    b = ranking.cluster_sum_bootstrap(lambda t: t[:, 0] / t[:, 1], np.array([[1.0, 1.0]] * 5), n_boot=50)
    assert np.isnan([b["p_boot"], b["ci_low"], b["ci_high"]]).all() and b["ci_method"].startswith("not estimable")
    for test in (paired.mcnemar_exact([1, 0, 1], [1, 0, 1]), paired.wilcoxon_paired([0.5, 0.2], [0.5, 0.2])):
        assert np.isnan(test["p_value"]) and test["test"].startswith("not estimable")
    assert paired.mcnemar_exact([1, 1, 1, 1], [0, 0, 0, 0])["p_value"] == pytest.approx(0.125)   # a size: kept
