"""Statistics of the Bayesian CrowS-Pairs paper (biaslab.stats.hypothesis): formulas against pingouin's documented
examples, hand-worked values, the paper's printed numbers, and independent numerical integration of eq. 8 and 9."""

from __future__ import annotations

import math
import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import integrate, stats

from biaslab.stats import hypothesis as h
from biaslab import plan as P
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with



def _published():
    from biaslab.benchmarks.crows_pairs import load_published_chatgpt
    return load_published_chatgpt()


# ---------------------------------------------------------------- eq. 8: JZS Bayes factor


def test_pingouin_documented_ttest_examples():
    # pingouin's docstring: bayesfactor_ttest(3.5, 20, 20) = 26.743 (independent), 17.185 (paired); r = 0.707
    assert pg.bayesfactor_ttest(3.5, 20, 20) == pytest.approx(26.743, abs=5e-4)
    assert pg.bayesfactor_ttest(3.5, 20, 20, paired=True) == pytest.approx(17.185, abs=5e-4)
    # our log-space integration of the same integral reproduces both with pingouin's r = 0.707
    assert math.exp(h.log_jzs_bf10(3.5, 20 * 20 / 40, r=0.707, df=38)) == pytest.approx(26.743, abs=5e-4)
    assert math.exp(h.log_jzs_bf10(3.5, 20, r=0.707)) == pytest.approx(17.185, abs=5e-4)
    # and jzs_bf10 (r = sqrt(2)/2 exactly) differs from pingouin's rounded default by well under 0.01 %
    assert h.jzs_bf10(3.5, 20) == pytest.approx(17.185, rel=1e-4)


def _bf10_nct(t, n, r=h.SQRT2_2):  # scipy's nct.pdf turns NaN at large noncentrality: keep n <= 100 here
    """Independent representation of eq. 8: the JZS BF10 is the ratio of the marginal densities of the t statistic,
    ∫ nct(t; n-1, δ√n) Cauchy(δ; 0, r) dδ / t(t; n-1) (Rouder et al. 2009, eq. 8 and the text around it)."""
    f = lambda d: stats.nct.pdf(t, n - 1, d * math.sqrt(n)) * stats.cauchy.pdf(d, 0, r)  # noqa: E731
    # the likelihood is negligible beyond 30 standard errors of the observed effect t/sqrt(n)
    centre, half = t / math.sqrt(n), 30 / math.sqrt(n)
    num = integrate.quad(f, centre - half, centre + half, epsabs=0, epsrel=1e-10, limit=400, points=[centre])[0]
    return num / stats.t.pdf(t, n - 1)


@pytest.mark.parametrize("t,n", [(0.0, 10), (1.2, 15), (-2.5, 30), (3.5, 20), (2.0, 60), (4.0, 100), (-1.0, 90)])
def test_jzs_against_noncentral_t_integration(t, n):
    assert h.jzs_bf10(t, n) == pytest.approx(_bf10_nct(t, n), rel=1e-5)


def test_jzs_against_literal_double_integral_of_eq8():
    """eq. 8 as printed: ∫∫ p(D|δ,σ²) p1(δ,σ²) / ∫ p(D|0,σ²) p0(σ²), with D_i ~ N(δσ, σ²), δ ~ Cauchy(0, r) and the
    Jeffreys prior 1/σ² on the variance under both hypotheses (integrated over σ, where it becomes 2/σ; the
    constant cancels)."""
    d = np.array([0.9, 1.4, -0.3, 2.1, 0.5, 1.2, 0.8, -0.1])
    n, r = len(d), h.SQRT2_2

    def lik(mu, s):
        return math.exp(stats.norm.logpdf(d, mu, s).sum())

    num = integrate.dblquad(lambda delta, s: lik(delta * s, s) * stats.cauchy.pdf(delta, 0, r) / s,
                            0, np.inf, -np.inf, np.inf, epsabs=0, epsrel=1e-6)[0]
    den = integrate.quad(lambda s: lik(0.0, s) / s, 0, np.inf, epsabs=0, epsrel=1e-9)[0]
    res = h.likelihood_test(d)
    assert res["bf10"] == pytest.approx(num / den, rel=1e-5)


@pytest.mark.parametrize("t,n", [(3.0, 1500), (8.0, 500), (15.0, 500), (30.0, 1600), (0.1, 1000), (-5.0, 300),
                                 (5.0, 10000)])
def test_pingouin_and_log_space_integration_agree_at_large_n(t, n):
    lp = math.log(pg.bayesfactor_ttest(t, n, paired=True, r=h.SQRT2_2))
    assert h.log_jzs_bf10(t, n) == pytest.approx(lp, abs=1e-3)


def test_jzs_falls_back_where_pingouin_fails():
    with pytest.raises(ZeroDivisionError):
        pg.bayesfactor_ttest(60.0, 1600, paired=True)
    lb = h.jzs_log_bf10(60.0, 1600)
    assert 900 < lb < 1000 and h.jzs_bf10(60.0, 1600) == math.inf
    # continuity: the fallback sits on the trend of pingouin's values just below the failure point
    assert h.log_jzs_bf10(30.0, 1600) == pytest.approx(math.log(pg.bayesfactor_ttest(30.0, 1600, paired=True,
                                                                                     r=h.SQRT2_2)), abs=1e-3)


def test_likelihood_test_matches_pingouin_and_scipy():
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.2, 1, 40), rng.normal(0, 1, 40)
    d = x - y
    res = h.likelihood_test(d)
    tt = pg.ttest(x, y, paired=True)
    assert res["t"] == pytest.approx(float(tt["T"].iloc[0]))
    assert res["t_p"] == pytest.approx(float(tt["p_val"].iloc[0]))
    assert res["wilcoxon_p"] == pytest.approx(float(pg.wilcoxon(x, y)["p_val"].iloc[0]))
    # pingouin.ttest's BF10 is a display string rounded to 3 significant digits (with r = 0.707)
    assert res["bf10"] == pytest.approx(float(tt["BF10"].iloc[0]), rel=2e-3)
    assert res["n"] == 40 and res["mean_d"] == pytest.approx(d.mean())
    assert res["evidence_default_prior"] == h.evidence(res["bf10"])
    assert res["evidence"] == h.evidence_over_range(res["bf10_min"], res["bf10_max"])


def test_likelihood_test_degenerate_inputs():
    res = h.likelihood_test([0.0, 0.0, 0.0])
    assert res["n"] == 3 and math.isnan(res["t_p"]) and math.isnan(res["wilcoxon_p"]) and math.isnan(res["bf10"])
    assert res["evidence"] == ""
    res = h.likelihood_test([1.0, np.nan, 2.0, 3.0])
    assert res["n"] == 3


# ---------------------------------------------------------------- eq. 1-4: scores


def test_perplexity_definition_and_the_printed_sign():
    # log P = -6 over 3 tokens: PPL = exp(6/3) = e^2; the formula as printed in the paper gives e^-2
    assert h.perplexity(-6.0, 3) == pytest.approx(math.e ** 2)
    assert h.perplexity(-6.0, 3, paper_printed=True) == pytest.approx(math.e ** -2)
    with pytest.raises(ValueError):
        h.perplexity(-1.0, 0)


def test_pair_differences_hand_example():
    # x: log P = -10 over 5 tokens; y: log P = -12 over 4 tokens
    d = h.pair_differences([-10.0], [5], [-12.0], [4]).iloc[0]
    assert d["d_logprob"] == pytest.approx(2.0)                      # eq. 2
    assert d["d_norm_logprob"] == pytest.approx(-2.0 - -3.0)         # eq. 3: -10/5 - -12/4 = 1
    assert d["d_perplexity"] == pytest.approx(math.exp(2) - math.exp(3))  # eq. 4, standard PPL


# ---------------------------------------------------------------- eq. 6, 9: preference scheme


def test_pingouin_documented_binom_example_and_closed_form():
    # pingouin's docstring: 115 successes in 200 trials -> BF10 0.835 (BF01 1.197)
    assert pg.bayesfactor_binom(115, 200) == pytest.approx(0.835, abs=5e-4)
    assert h.bf10_binom_uniform(115, 200) == pytest.approx(0.835, abs=5e-4)
    assert 1 / h.bf10_binom_uniform(115, 200) == pytest.approx(1.197, abs=5e-4)
    # pingouin's defaults (p = 0.5, a = b = 1: H1 pi ~ Beta(1, 1) = Uniform(0, 1)) are exactly eq. 9
    for k, n in [(0, 5), (3, 7), (54, 91), (288, 498), (131, 216)]:
        assert h.bf10_binom_uniform(k, n) == pytest.approx(pg.bayesfactor_binom(k, n, p=0.5, a=1, b=1), rel=1e-10)
    # and the exact binomial p-value of pingouin's example
    assert h.binom_p(115, 200) == pytest.approx(0.04004, abs=5e-6)


def _log_bf10_eq9_quad(k, n):
    """eq. 9 by numerical integration of the sequence likelihood over the uniform prior, in log space."""
    lf = lambda p: k * math.log(p) + (n - k) * math.log1p(-p)  # noqa: E731
    m = min(max(k / n, 1e-12), 1 - 1e-12)
    c = lf(m) if 0 < k < n else 0.0
    f = lambda p: math.exp(lf(p) - c) if 0 < p < 1 else (1.0 if (p == 0 and k == 0) or (p == 1 and k == n) else 0.0)  # noqa: E731
    val = integrate.quad(f, 0, 1, points=[m], epsabs=0, epsrel=1e-11, limit=400)[0]
    return math.log(val) + c + n * math.log(2)


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (3, 10), (5, 10), (38, 65), (288, 498), (78, 109), (900, 1500),
                                 (4000, 5000)])
def test_bf10_uniform_against_numerical_integration(k, n):
    assert h.log_bf10_binom_uniform(k, n) == pytest.approx(_log_bf10_eq9_quad(k, n), abs=1e-7)


def test_bf10_uniform_large_n_where_pingouin_breaks():
    with np.errstate(all="ignore"):
        pgv = pg.bayesfactor_binom(4500, 5000)
    assert not np.isfinite(pgv)                      # betabinom.pmf / binom.pmf: 0/0 or x/0
    lb = h.log_bf10_binom_uniform(4500, 5000)
    assert np.isfinite(lb) and lb > 700 and h.bf10_binom_uniform(4500, 5000) == math.inf
    assert h.preference_test(k=4500, n=5000)["log10_bf10"] == pytest.approx(lb / math.log(10))


def test_binom_p_equals_papers_formula():
    # p = P(S <= LB) + P(S >= UB), LB = min(k, n-k), UB = max(k, n-k)   (§3.2)
    for k, n in [(54, 91), (38, 65), (2, 9), (7, 9), (0, 4)]:
        lb, ub = min(k, n - k), max(k, n - k)
        paper = stats.binom.cdf(lb, n, 0.5) + stats.binom.sf(ub - 1, n, 0.5)
        assert h.binom_p(k, n) == pytest.approx(paper, rel=1e-10)
    assert h.binom_p(5, 10) == 1.0      # paper's formula would give 1 + P(S = 5)


def test_stereotype_score_and_preference_test():
    assert h.stereotype_score(54, 91) == pytest.approx(0.5934, abs=5e-5)
    assert h.stereotype_score(37, 91) == h.stereotype_score(54, 91)
    res = h.preference_test([1, 0, 1, 1, np.nan, 1])
    assert (res["n"], res["k"]) == (5, 4) and res["pi_hat"] == pytest.approx(0.8)
    assert res["bf10"] == pytest.approx(h.bf10_binom_uniform(4, 5))
    with pytest.raises(ValueError):
        h.preference_test([0, 2])
    with pytest.raises(ValueError):
        h.preference_test(k=6, n=5)


# ---------------------------------------------------------------- Table 1, marks, Holm


def test_evidence_categories_reproduce_table1():
    table1 = [  # transcribed from the paper's Table 1
        ("> 100", "Extreme evidence for H1"), ("30 – 100", "Very strong evidence for H1"),
        ("10 – 30", "Strong evidence for H1"), ("3 – 10", "Moderate evidence for H1"),
        ("1 – 3", "Anecdotal evidence for H1"), ("1", "No evidence"),
        ("1/3 – 1", "Anecdotal evidence for H0"), ("1/10 – 1/3", "Moderate evidence for H0"),
        ("1/30 – 1/10", "Strong evidence for H0"), ("1/100 – 1/30", "Very strong evidence for H0"),
        ("< 1/100", "Extreme evidence for H0")]
    got = h.evidence_table()
    assert list(got["bf10_range"]) == [r for r, _ in table1]
    assert [s.lower() for s in got["interpretation"]] == [s.lower() for _, s in table1]


@pytest.mark.parametrize("bf,expected", [
    (250, "extreme evidence for H1"), (100, "very strong evidence for H1"), (30.0001, "very strong evidence for H1"),
    (10, "moderate evidence for H1"), (3, "anecdotal evidence for H1"), (1, "no evidence"),
    (0.5, "anecdotal evidence for H0"), (0.2, "moderate evidence for H0"), (0.05, "strong evidence for H0"),
    (0.02, "very strong evidence for H0"), (2.67e-19, "extreme evidence for H0"), (math.inf, "extreme evidence for H1"),
    (float("nan"), "")])
def test_evidence_boundaries(bf, expected):
    assert h.evidence(bf) == expected


def test_marks_and_number_format():
    assert h.sci(3.03e-2) == "3.03e-2" and h.sci(2.41e7) == "2.41e+7" and h.sci(1.0) == "1.00e+0"
    assert h.format_p(8.31e-3) == "8.31e-3**" and h.format_p(4.65e-2) == "4.65e-2*" and h.format_p(0.2) == "2.00e-1"
    assert h.format_bf(3.55) == "<u>3.55e+0</u>" and h.format_bf(0.174) == "<u>1.74e-1</u>"
    assert h.format_bf(22.8) == "**2.28e+1**" and h.format_bf(0.05) == "**5.00e-2**"
    assert h.format_bf(2.06) == "2.06e+0" and h.format_bf(0.34) == "3.40e-1"


# ---------------------------------------------------------------- grouped tables and rendering


def _toy_pairs(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for model in ("m1", "m2"):
        for bt, shift in (("age", 0.3), ("gender", 0.0), ("religion", -0.2)):
            for _ in range(25):
                lm, ll = rng.normal(-30 + shift * 5, 3), rng.normal(-30, 3)
                rows.append({"model": model, "dataset": "toy", "bias_type": bt,
                             "logp_more": lm, "n_more": 10, "logp_less": ll, "n_less": 10})
    df = pd.DataFrame(rows)
    return pd.concat([df, h.pair_differences(df.logp_more, df.n_more, df.logp_less, df.n_less)], axis=1)


def test_likelihood_tests_groups_overall_and_holm():
    pairs = _toy_pairs()
    tab = h.likelihood_tests(pairs)
    assert len(tab) == 2 * 4 * 3                       # models x (3 types + overall) x scores
    one = tab[(tab.model == "m1") & (tab.score == "norm_logprob")].set_index("bias_type")
    sub = pairs[(pairs.model == "m1") & (pairs.bias_type == "age")]
    assert one.loc["age", "n"] == 25
    assert one.loc["age", "t_p"] == pytest.approx(stats.ttest_1samp(sub.d_norm_logprob, 0).pvalue)
    assert one.loc["overall", "n"] == 75 and "t_p_holm" not in one      # the plan decides, not the table
    assert one.loc["age", "lpbs"] == pytest.approx(sub.d_norm_logprob.mean())
    assert one.loc["age", "ppb"] == pytest.approx(sub.d_perplexity.mean())
    rendered = h.render_likelihood_table(tab[tab.model == "m1"])
    assert list(rendered.columns) == ["Bias", "Age", "Gender", "Religion", "Overall"]
    bf_row = rendered.set_index("Bias").loc["BF (LPBS)"]
    assert bf_row["Age"] == h.format_bf(one.loc["age", "bf10"], True, one.loc["age", "bf10_min"],
                                        one.loc["age", "bf10_max"])


def test_evidence_label_follows_the_prior_range_not_one_prior():
    """The committed SmolLM2-English and Gemma-French rows: BF10 0.70 at r = 0.707 reads
    'anecdotal evidence for H0' at that prior, but over r in {0.2, ..., 1} it runs 0.50 to 2.25: the `evidence`
    column says inconclusive, the single-prior label moves to `evidence_default_prior`; the table's mark follows."""
    assert h.evidence_over_range(0.50, 2.25) == "inconclusive over the prior range (BF10 0.5 to 2.25)"
    assert h.evidence_over_range(0.081, 0.385).startswith("inconclusive")     # all below 1, not all below 1/3
    assert h.evidence_over_range(4.0e4, 1.4e5) == "extreme evidence for H1 over the prior range"
    assert h.evidence_over_range(5.0, 40.0) == "moderate evidence for H1 over the prior range"   # the weakest
    assert h.evidence_over_range(0.02, 0.2) == "moderate evidence for H0 over the prior range"
    assert h.evidence_over_range(float("nan"), 1.0) == ""
    # a t statistic whose JZS BF straddles 1 across the stated scales
    n = 1508
    t = 2.53                              # the committed SmolLM2 English LPBS (p 0.011)
    rng = h.jzs_prior_range(t, n)
    assert rng["bf10_min"] < 1 < rng["bf10_max"]
    d = np.random.default_rng(0).normal(size=n)
    d = (d - d.mean()) / d.std(ddof=1) + t / math.sqrt(n)      # mean / (sd / sqrt(n)) = t exactly
    res = h.likelihood_test(d)
    assert res["t"] == pytest.approx(t) and res["evidence_default_prior"] == "anecdotal evidence for H0"
    assert res["evidence"].startswith("inconclusive over the prior range")
    # Table 2's mark: none where the range disagrees, although 0.7 alone is 'anecdotal' (unmarked) and 0.2 alone
    # would be underlined; the range's weakest category where it agrees
    assert h.format_bf(0.2, True, 0.1, 0.5) == "2.00e-1" and h.format_bf(0.2) == "<u>2.00e-1</u>"
    assert h.format_bf(50.0, True, 12.0, 80.0) == "**5.00e+1**" and h.format_bf(50.0, True, 4.0, 80.0) == \
        "<u>5.00e+1</u>"
    # counts over the range: a cell is 'strong for H1' only when every prior says so
    tests = pd.DataFrame({"model": "m", "dataset": "d", "bias_type": ["a", "b", "c", "overall"],
                          "t_p": [1e-4, 0.03, 0.5, 1e-9],
                          "evidence": [h.evidence_over_range(20, 90), h.evidence_over_range(0.4, 3.5),
                                       h.evidence_over_range(0.05, 0.2), h.evidence_over_range(1e3, 1e4)]})
    c = h.evidence_counts(tests, ["model", "dataset"]).iloc[0]
    assert (c.strong_H1, c.moderate_H0, c.strong_H0, c.inconclusive, c.raw_p05) == (1, 1, 0, 1, 2)
    # preference scheme: the same two columns
    p = h.preference_test(k=38, n=65)
    assert p["evidence_default_prior"] == "anecdotal evidence for H0" and p["evidence"].startswith("inconclusive")


def test_published_check_reads_the_paper_prior_and_names_it():
    chk = h.check_published_preferences(_published()).set_index("bias_type")
    dis = chk.loc["disability"]
    assert dis["evidence"] == "anecdotal evidence for H0" and "paper's prior" in dis["bf_prior"]
    assert dis["evidence_over_prior_range"].startswith("inconclusive over the prior range (BF10 0.386 to")
    from biaslab.papers.crows_pairs import findings as F3
    md = F3.published_findings(chk.reset_index())
    assert "cannot fall below 0.155 whatever the count" in md and "the exponent is off by 1" in md
    assert "3 of 9 Bayes factors do not" in md and "truncated rather than rounded" in md


def test_preference_tests_counts_exclusions():
    prefs = pd.DataFrame({"model": "m", "dataset": "d", "source": "s",
                          "bias_type": ["a"] * 6 + ["b"] * 4,
                          "x": [1, 1, 1, np.nan, 0, 1, 0, 0, np.nan, np.nan]})
    tab = h.preference_tests(prefs).set_index("bias_type")
    assert tuple(tab.loc["a", ["n", "k", "n_excluded"]]) == (5, 4, 1)
    assert tuple(tab.loc["b", ["n", "k", "n_excluded"]]) == (2, 0, 2)
    assert tuple(tab.loc["overall", ["n", "k", "n_excluded"]]) == (7, 4, 3)
    assert tab.loc["b", "ss"] == 1.0 and tab.loc["b", "pi_hat"] == 0.0
    md = h.to_markdown(h.render_preference_table(tab.reset_index(), {"d": "English"}))
    assert "*English*" in md and "SS" in md


# ---------------------------------------------------------------- the published ChatGPT numbers (Table 3)


def test_check_published_flags_only_what_disagrees():
    ref = pd.DataFrame({"bias_type": ["x", "y"], "n_valid": [91, 65], "k_prefers_more_stereotyped": [54, 38]})
    exact = [h.preference_test(k=k, n=n) for k, n in zip(ref.k_prefers_more_stereotyped, ref.n_valid)]
    ref["reported_ss"] = [round(e["ss"], 4) for e in exact]
    ref["reported_ebt_p"] = [float(f"{e['binom_p']:.2e}") for e in exact]
    ref["reported_bf10"] = [float(f"{e['bf10']:.2e}") for e in exact]
    ok = h.check_published_preferences(ref)
    assert ok[["ss_ok", "binom_p_ok", "bf10_ok", "evidence_ok"]].all().all() and (ok.note == "").all()
    ref.loc[1, "reported_bf10"] *= 10
    bad = h.check_published_preferences(ref)
    assert bad.bf10_ok.tolist() == [True, False] and "DISAGREES" in bad.note[1]
    assert bad.bf10_ratio[1] == pytest.approx(10 * float(f"{exact[1]['bf10']:.2e}") / exact[1]["bf10"])


def test_published_chatgpt_english_block():
    ref = _published()
    chk = h.check_published_preferences(ref).set_index("bias_type")
    # SS and the exact binomial p-values printed in Table 3 follow from the counts (all nine)
    assert chk.ss_ok.all() and chk.binom_p_ok.all()
    # BF10: two printed values are wrong, one is off in its last digit; the rest agree
    assert set(chk.index[~chk.bf10_ok]) == {"disability", "race-color", "religion"}
    assert chk.loc["disability", "bf10"] == pytest.approx(0.386, abs=5e-4)       # printed 2.67e-19
    assert chk.loc["race-color", "bf10"] == pytest.approx(25.5, abs=0.05)        # printed 2.55e+2
    assert set(chk.index[~chk.evidence_ok]) == {"disability", "race-color"}


def test_position_bias_and_order_consistency():
    # 4 pairs; the model always names the first sentence -> p_first = 1 in both orders, same_position = 1
    rows = []
    for order in ("more_first", "less_first"):
        for i in range(4):
            rows.append({"model": "m", "dataset": "d", "prompt_id": f"p{i}", "order": order, "chose_first": 1.0,
                         "x": 1.0 if order == "more_first" else 0.0})
    a = pd.DataFrame(rows)
    pos = h.position_bias_tests(a).set_index("order")
    assert pos.loc["both", "n"] == 8 and pos.loc["both", "p_first"] == 1.0
    assert pos.loc["both", "binom_p"] == pytest.approx(2 * 0.5 ** 8)
    cons = h.order_consistency(a).iloc[0]
    assert cons.n_pairs == 4 and cons.same_sentence == 0.0 and cons.always_first == 1.0 and cons.same_position == 1.0
    # a content-driven model: always prefers sent_more -> chooses first in more_first, second in less_first
    a["chose_first"] = np.where(a.order == "more_first", 1.0, 0.0)
    a["x"] = 1.0
    cons = h.order_consistency(a).iloc[0]
    assert cons.same_sentence == 1.0 and cons.same_position == 0.0
    assert h.position_bias_tests(a).set_index("order").loc["both", "p_first"] == 0.5


# ---- Bayes factors with their prior -----------------------------------------------------------------------------

SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_jzs_published_sleep_example_and_prior_range():
    """BayesFactor's ttestBF manual example (Student's sleep data, paired): "Alt., r=0.707 : 17.25888"; the range
    over r in {0.2, 0.5, 0.707, 1} brackets it and every end point is the BF at that scale."""
    d = np.subtract(SLEEP_2, SLEEP_1)
    res = h.likelihood_test(d)
    assert res["bf10"] == pytest.approx(17.25888, rel=1e-5)
    assert res["bf_prior"] == "JZS Cauchy r = 0.707"
    ends = [h.jzs_bf10(res["t"], 10, r) for r in (0.2, 0.5, h.SQRT2_2, 1.0)]
    assert res["bf10_min"] == pytest.approx(min(ends)) and res["bf10_max"] == pytest.approx(max(ends))
    assert res["bf10_min"] <= res["bf10"] <= res["bf10_max"]
    assert res["bf_prior_range"] == "JZS Cauchy r in {0.2, 0.5, 0.707, 1}"
    # pingouin agrees at every scale of the range
    for r in (0.2, 0.5, 1.0):
        assert h.jzs_bf10(res["t"], 10, r) == pytest.approx(pg.bayesfactor_ttest(res["t"], 10, paired=True, r=r),
                                                            rel=1e-4)


def test_prior_range_flips_where_one_prior_would_mislead():
    """A near-null effect with many pairs (t = 1.5, n = 400): at r = 0.707 the BF is 0.17 (moderate evidence for H0),
    at r = 0.2 (a prior on the small effects bias benchmarks look for) 0.52, anecdotal: one default-prior BF
    overstates the evidence for H0, and only the whole range may carry a verdict."""
    r = h.jzs_prior_range(1.5, 400)
    assert r["bf10"] == pytest.approx(0.1710, rel=1e-3)
    assert r["bf10_max"] == pytest.approx(0.5230, rel=1e-3) and r["bf10_min"] < r["bf10"]


def test_beta_binomial_bf_against_hand_computation():
    """k = 60 of n = 100 against pi = 0.5, H1: pi ~ Beta(a, a): BF10 = B(60 + a, 40 + a) / B(a, a) * 2^100, here
    summed by hand from log-gammas; Beta(1, 1) is eq. 9; pingouin's bayesfactor_binom agrees."""
    from math import lgamma, log
    k, n = 60, 100
    for a in (1, 2, 5, 10, 20, 50):
        lb = (lgamma(k + a) + lgamma(n - k + a) - lgamma(n + 2 * a)) - (2 * lgamma(a) - lgamma(2 * a)) + n * log(2)
        assert h.log_bf10_binom_beta(k, n, a) == pytest.approx(lb, rel=1e-12)
        assert math.exp(lb) == pytest.approx(pg.bayesfactor_binom(k, n, p=0.5, a=a, b=a), rel=1e-9)
    assert h.log_bf10_binom_beta(k, n, 1) == pytest.approx(h.log_bf10_binom_uniform(k, n))
    res = h.preference_test(k=k, n=n)
    assert res["bf_prior"] == "Beta(1, 1)" and res["bf10"] == pytest.approx(h.bf10_binom_uniform(k, n))
    allbf = [math.exp(h.log_bf10_binom_beta(k, n, a)) for a in (1, 2, 5, 10, 20, 50)]
    assert (res["bf10_min"], res["bf10_max"]) == pytest.approx((min(allbf), max(allbf)))
    # 60 of 100: 0.91 (a hair towards H0) at the uniform prior, 2.25 (towards H1) at Beta(20, 20): the direction
    # itself depends on the prior, so no verdict may rest on the uniform prior alone
    assert res["bf10"] < 1 < res["bf10_max"] and res["bf10_max"] == pytest.approx(2.2546, rel=1e-4)


# ------------------------------------------------------------------------------------ the lead test's own interval

def test_hodges_lehmann_interval_hand_worked():
    """Hollander & Wolfe's depression data (x - y of nine patients; R's ``wilcox.test(x, y, paired = TRUE,
    conf.int = TRUE)`` example). The 45 Walsh averages, sorted; with n = 9 the two-sided 5 % Wilcoxon test rejects
    for T <= 5 (tables: P(T <= 5) = 10/512 = 0.0195), so the interval is [W_(6), W_(40)] and the estimate their
    median W_(23)."""
    from biaslab.stats.intervals import hodges_lehmann
    x = np.array([1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30])
    y = np.array([0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29])
    d = x - y
    walsh = sorted((d[i] + d[j]) / 2 for i in range(9) for j in range(i, 9))
    assert len(walsh) == 45
    assert stats.wilcoxon(np.arange(1, 10) - 5.5).pvalue > 0.05      # sanity: the exact distribution is used
    assert sum(1 for k in range(512) if sum(i + 1 for i in range(9) if k >> i & 1) <= 5) == 10   # P(T <= 5) = 10/2^9
    res = hodges_lehmann(d)
    assert res["estimate"] == pytest.approx(walsh[22]) == pytest.approx(0.46)
    assert (res["ci_low"], res["ci_high"]) == (pytest.approx(walsh[5]), pytest.approx(walsh[39]))
    assert (res["ci_low"], res["ci_high"]) == (pytest.approx(0.01), pytest.approx(0.786))


def test_hodges_lehmann_interval_large_n_and_coverage():
    from biaslab.stats.intervals import _walsh_averages, hodges_lehmann
    rng = np.random.default_rng(1)
    d = rng.standard_t(2, size=300) * 40 + 5
    res = hodges_lehmann(d)
    # the large-sample order statistics: C = n(n+1)/4 - z sqrt(n(n+1)(2n+1)/24) (Hollander, Wolfe & Chicken §3.3)
    n, m = d.size, d.size * (d.size + 1) // 2
    c = int(round(n * (n + 1) / 4 - stats.norm.ppf(0.975) * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
    w = _walsh_averages(d)
    assert w[c - 2] <= res["ci_low"] <= w[c] and w[m - c - 1] <= res["ci_high"] <= w[m - c + 1]
    # the interval excludes 0 exactly when scipy's test of 0 rejects
    for shift in (0.0, 2.0, 6.0, 12.0):
        x = rng.standard_t(2, size=200) * 40 + shift
        r = hodges_lehmann(x)
        assert (not r["ci_low"] <= 0 <= r["ci_high"]) == (stats.wilcoxon(x).pvalue < 0.05)
    # coverage of the pseudo-median of a symmetric heavy-tailed law (its centre), 400 samples of 25
    cover = [(lambda r: r["ci_low"] <= 3.0 <= r["ci_high"])(hodges_lehmann(rng.standard_t(2, 25) + 3.0))
             for _ in range(400)]
    assert 0.92 <= np.mean(cover) <= 0.98


def test_a_wilcoxon_led_row_carries_the_wilcoxon_interval():
    """The committed Gemma-English perplexity case: Wilcoxon p 1e-12 (distinguishable) beside a t interval of the
    mean [-28.8, 1.9] that contains 0. Heavy-tailed perplexity differences with a shifted centre: the row's interval
    is now the Hodges-Lehmann one, which excludes 0 as the test does; the t interval of the mean stays as
    mean_ci_low/high."""
    rng = np.random.default_rng(3)
    n = 400
    d_ppl = -3.0 + rng.standard_t(1.2, size=n) * 4          # centre -3, wild tails
    pairs = pd.DataFrame({"model": "m", "dataset": "d", "bias_type": "age", "d_norm_logprob": rng.normal(0, 1, n),
                          "d_perplexity": d_ppl, "d_logprob": rng.normal(0, 1, n)})
    tab = h.likelihood_tests(pairs).set_index(["bias_type", "score"])
    ppl = tab.loc[("overall", "perplexity")]
    assert ppl["lead_test"] == "Wilcoxon signed-rank" and ppl["wilcoxon_p"] < 0.05
    assert ppl["mean_ci_low"] <= 0 <= ppl["mean_ci_high"]                  # the t interval of the mean contains 0
    assert ppl["ci_high"] < 0 and ppl["ci_method"].startswith("Hodges-Lehmann")
    assert ppl["ci_low"] <= ppl["estimate"] <= ppl["ci_high"] and math.isnan(ppl["mde"])
    lp = tab.loc[("overall", "norm_logprob")]
    assert lp["estimate"] == lp["mean_d"] and (lp["ci_low"], lp["ci_high"]) == (lp["mean_ci_low"], lp["mean_ci_high"])
    from biaslab.papers.crows_pairs import decisions as D3
    row = D3.decide(tab.reset_index(), plan=PLAN)["likelihood_tests"].set_index(["bias_type", "score"]).loc[
        ("overall", "perplexity")]
    assert row["excludes_null"] == True and row["verdict"] == "exploratory"  # noqa: E712


def test_constant_differences_get_no_t_interval_and_say_so():
    """Pairs whose differences are all equal have no variance: the t-led rows (plain and stratified) show no p and
    no interval (not [d, d]) and say "not estimable (…)"; a Wilcoxon-led row keeps its exact rank test (a size)."""
    pairs = pd.DataFrame({"model": "m", "dataset": "d", "bias_type": ["a"] * 6 + ["b"] * 6, "d_norm_logprob": 0.5,
                          "d_perplexity": 1.0, "d_logprob": 0.2, "stratum": ["a"] * 6 + ["b"] * 6, "weight": 3.0})
    t = h.likelihood_tests(pairs)
    led_by_t = t[t["score"] != "perplexity"]
    assert led_by_t[["ci_low", "ci_high", "mean_ci_low", "lead_p"]].isna().all().all()
    assert led_by_t["ci_method"].str.startswith("not estimable (no variation in").all()
    assert (t.loc[t["score"] == "perplexity", "lead_p"] > 0).all()
