"""Words against numbers (issue 18): every findings function renders only from the verdict columns of
biaslab.stats.verdict, so on fabricated tables — a raw p that is significant while the adjusted one is not, intervals
touching the null, undefined scores, responders degenerate on one metric only — it says what those columns imply; no
markdown cell of a notebook, and no sentence of the README outside its generated block, quotes a number of a
committed run's result tables (those sentences are rendered from the tables instead)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import findings as W
from biaslab.papers.agentic import decisions as D4
from biaslab.papers.agentic import findings as F4
from biaslab.papers.calm import decisions as D2
from biaslab.papers.calm import findings as F2
from biaslab.papers.crows_pairs import decisions as D3
from biaslab.papers.crows_pairs import findings as F3
from biaslab.papers.multifactor import decisions as D1
from biaslab.papers.multifactor import findings as F1
from biaslab.stats import verdict as V

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- wording

def test_wording_helpers():
    assert W.num(0.95354) == "0.954" and W.num(-7.4, 2) == "−7.4" and W.num(float("nan")) == "n/a"
    assert W.num(pd.NA) == "n/a" and W.pct(pd.NA) == "n/a" and W.pval(pd.NA) == "p n/a"
    assert W.pval(0.0004) == "p < 0.001" and W.pval(0.0123) == "p = 0.012"
    row = {"ci_low": 0.1, "ci_high": 0.2, "ci_method": "cluster bootstrap"}
    assert W.interval(row) == "(95 % CI, cluster bootstrap 0.1–0.2)" and W.excludes(row, 0.5) is True
    assert W.interval({"ci95_low": 0.1, "ci95_high": 0.2}) == "(95 % CI 0.1–0.2)"
    assert W.interval({}) == "" and W.excludes({}, 0.5) is None and W.excludes(row, float("nan")) is None
    with pytest.raises(KeyError, match="verdict"):
        W.decision({"p_value": 0.01})             # words never decide from a raw p


def _decided(p, est=0.1, lo=0.05, hi=0.2, kind=V.CONFIRMATORY, **cols):
    """A one-family table decided by the verdict layer (the only way a findings function gets its words)."""
    t = pd.DataFrame({"model": [f"m{i}" for i in range(len(p))], "est": est, "p_value": p, "ci_low": lo,
                      "ci_high": hi, "n": 100, **cols})
    return V.decide(t, V.Effects(estimate="est", null=0.0, default=V.Family("f", kind)), "t")


def test_decision_follows_the_adjusted_p_not_the_raw_one():
    # raw p 0.03 in a Holm family of three: adjusted 0.09 -> not distinguishable, and the sentence says why
    d = _decided([0.03, 0.5, 0.6]).iloc[0]
    text = W.decision(d, "chance", "0")
    assert text.startswith("not distinguishable from chance at this sample size")
    assert "Holm-adjusted p = 0.09 over 3 confirmatory tests" in text and "0.03" not in text
    assert "unadjusted 95 % interval excludes 0" in text
    # significant after adjustment although the 95 % interval (another method) touches the null
    e = _decided([0.001], lo=0.0).iloc[0]
    assert W.decision(e, "chance", "0") == ("distinguishable from chance (Holm-adjusted p = 0.001 over 1 "
                                            "confirmatory test; its 95 % interval still contains 0)")
    # the MDE of a null result is said, as an absolute value
    m = _decided([0.4], mde=-0.07).iloc[0]
    assert "effects smaller than 0.07 would go undetected" in W.decision(m)
    und = _decided([np.nan], est=np.nan, lo=np.nan, hi=np.nan).iloc[0]
    assert W.decision(und) == "undefined (estimate not computable)"


def test_evidence_only_over_the_whole_prior_range():
    one = {"bf10": 0.64, "bf_prior": "JZS Cauchy r = 0.707", "bf_direction": pd.NA}
    assert "no prior range" in W.evidence(one) and "evidence for" not in W.evidence(one)
    wide = {"bf10": 0.64, "bf10_min": 0.2, "bf10_max": 4.1, "bf_prior_range": "r in {0.2, 1}",
            "bf_direction": "inconclusive"}
    assert W.evidence(wide).startswith("Bayes factor inconclusive") and "0.2 to 4.1 over r in {0.2, 1}" in \
        W.evidence(wide)
    h0 = {**wide, "bf10_max": 0.25, "bf_direction": "H0"}
    assert W.evidence(h0, h0="no bias").startswith("evidence for no bias over the whole prior range")
    assert W.evidence({}) == ""


# ------------------------------------------------------------------------------------------ notebook 4

def _uniformity(p_groups, top_share=0.5, bf=None):
    """Group rows with the given raw p-values (one class type each) plus one position row per class type."""
    rows = []
    for i, p in enumerate(p_groups):
        ct = f"ct{i}"
        rows.append({"model": "m", "class_type": ct, "unit": "group", "k": 3, "n": 30, "top": "Female",
                     "top_share": top_share, "p_value": p, "log10_bf10": 2.0 if bf is None else bf})
        rows.append({"model": "m", "class_type": ct, "unit": "position", "k": 3, "n": 30, "top": "2",
                     "top_share": 0.4, "p_value": 0.5, "log10_bf10": -1.0})
    return D4.decide("uniformity_tests", pd.DataFrame(rows), None)


def _gp(p, diff):
    gp = pd.DataFrame({"model": "m", "class_type": "gender", "group": ["Female", "Male"], "n_pairs": 15,
                       "diff_pos_minus_neg": [diff, -diff / 2], "wilcoxon_p": [p, 0.9],
                       "diff_ci_low": [diff - 0.05, -0.1], "diff_ci_high": [diff + 0.05, 0.1]})
    return D4.decide("group_preference", gp, None)


def test_agentic_uniformity_words_follow_the_confirmatory_family():
    biased = F4.uniformity_findings(_uniformity([0.001]))
    assert "the top answer is Female in 15 of 30" in biased and "distinguishable from uniform (Holm" in biased
    assert "1 of 1 model × class-type cells (chi-square, Holm over 1 confirmatory test)" in biased
    assert "no prior range was computed" in biased and "strong evidence" not in biased
    # raw p 0.034 among five confirmatory tests (the American Indian row): Holm 0.17, not named
    five = F4.uniformity_findings(_uniformity([0.034, 0.4, 0.5, 0.6, 0.7]))
    assert "0 of 5 model × class-type cells" in five and "top answer is Female" not in five
    null = F4.uniformity_findings(_uniformity([0.6], top_share=0.37))
    assert "top answer is Female" not in null and "0 of 1 model × class-type cells" in null


def test_agentic_degenerate_on_one_metric_only():
    # a model degenerate for the group counts (constant group) but informative for probabilities
    per = pd.DataFrame({"model": "m", "k": 3, "class_type": "gender", "top_group": "Female",
                        "top_position": np.tile([1, 2, 3], 10), "label_mass": 0.9,
                        "p_1": 0.3, "p_2": 0.35, "p_3": 0.35})
    chk = D4.responder_table(per)
    ut = D4.decide("uniformity_tests", pd.DataFrame([
        {"model": "m", "class_type": "gender", "unit": "group", "k": 3, "n": 30, "top": "Female",
         "top_share": 1.0, "p_value": 1e-9, "log10_bf10": 9.0},
        {"model": "m", "class_type": "gender", "unit": "position", "k": 3, "n": 30, "top": "1",
         "top_share": 0.33, "p_value": 0.9, "log10_bf10": -1.0}]), chk)
    assert ut.set_index("unit").loc["group", "verdict"].startswith("not tested (degenerate responder")
    assert ut.set_index("unit").loc["position", "responder_status"].startswith("not judged")
    text = F4.uniformity_findings(ut)
    assert "0 of 1 model × class-type cells" in text and "not tested (degenerate responder" in text
    cyc = D4.decide("cyclic_by_model", pd.DataFrame({
        "model": ["m"], "n": [30], "mean_entropy_stored": [0.9], "mean_entropy_cyclic_avg": [0.99],
        "mean_entropy_position_avg": [0.9], "mean_gain": [0.09], "wilcoxon_p": [1e-6]}), chk)
    assert cyc["responder_status"].iloc[0] == "informative"
    assert "the gain is 0.09, distinguishable from zero" in F4.cyclic_findings(cyc)


def test_agentic_group_preference_and_position_words():
    gb, gn = F4.group_preference_findings(_gp(0.001, 0.2)), F4.group_preference_findings(_gp(0.8, 0.01))
    assert "1 of 2" in gb and "are distinguishable" in gb and "20 percentage points" in gb
    assert "0 of 2" in gn and "not distinguishable from chance at this sample size" in gn
    # raw p 0.04 with a second test at 0.045: BH keeps both at 0.045; with 0.9 beside it BH gives 0.08
    assert "1 of 2" not in F4.group_preference_findings(_gp(0.04, 0.2).assign(wilcoxon_p=[0.04, 0.9]).pipe(
        lambda d: D4.decide("group_preference", d, None)))

    def pb(spread, lo_pad=0.01):
        p = np.array([1 / 3 - spread, 1 / 3, 1 / 3 + spread])
        return D4.decide("position_bias", pd.DataFrame({
            "model": "m", "k": 3, "position": [1, 2, 3], "mean_p": p, "ci95_low": p - lo_pad,
            "ci95_high": p + lo_pad, "uniform": 1 / 3}), None)
    assert "more probability at position 3" in F4.position_findings(pb(0.1))
    assert "no position is distinguishable" in F4.position_findings(pb(0.0))
    # an interval that reaches exactly to 1/3 does not exclude it
    assert "no position is distinguishable" in F4.position_findings(pb(0.05, lo_pad=0.05))


def test_agentic_summary_direction():
    def cyc(after, p=0.001):
        return D4.decide("cyclic_by_model", pd.DataFrame({
            "model": ["m"], "n": [12], "mean_entropy_stored": [0.9], "mean_entropy_cyclic_avg": [after],
            "mean_entropy_position_avg": [0.9], "mean_gain": [after - 0.9], "wilcoxon_p": [p]}), None)
    by_model = pd.DataFrame({"model": ["m"], "n": [30], "mean_entropy": [0.9]})
    pos_only = F4.summary_findings(by_model, cyc(0.995), _uniformity([0.6]), _gp(0.8, 0.01))
    group = F4.summary_findings(by_model, cyc(0.91), _uniformity([0.001]), _gp(0.001, 0.2))
    assert "preference for answer **positions**" in pos_only and "No group-level result" in pos_only
    assert "mostly **not** a preference for positions" in group
    assert ("after adjustment: m's Female on ct0 and m's Female on gender (more probable as the answer to positive "
            "than to negative questions)") in group
    assert "cannot be separated" in F4.summary_findings(by_model, None, _uniformity([0.6]), _gp(0.8, 0.01))
    tentative = F4.summary_findings(by_model, cyc(0.995, p=0.5), _uniformity([0.6]), _gp(0.8, 0.01))
    assert "tentative reading" in tentative and "from 0.9 to 0.995" in tentative


def test_agentic_entropy_findings_place_against_paper_and_flag_a_degenerate_metric():
    def bm(h, status="informative"):
        t = pd.DataFrame({"model": ["m"], "n": [30], "mean_entropy": [h], "ci95_low": [h - 0.01],
                          "ci95_high": [h + 0.01], "share_below_half": [0.0], "mean_label_mass": [0.95]})
        return D4.decide("entropy_by_model", t, None).assign(responder_status=status)
    paper = {"a": 0.6, "b": 0.98}
    assert "within the range" in F4.entropy_findings(bm(0.9), paper)
    assert "below the range" in F4.entropy_findings(bm(0.4), paper)
    assert "Responder check for this metric: degenerate" in F4.entropy_findings(bm(0.4, "degenerate: x"), paper)


def test_agentic_paired_comparison_words():
    cmp_ = D4.decide("paired_comparisons", pd.DataFrame({
        "model_a": ["a"], "model_b": ["b"], "n_pairs": [1020], "difference": [-0.0161], "ci_low": [-0.0199],
        "ci_high": [-0.0125], "p_value": [1e-17]}), None)
    assert "differs by −0.0161" in F4.comparison_findings(cmp_) and "distinguishable from no difference" in \
        F4.comparison_findings(cmp_)


# ------------------------------------------------------------------------------------------ notebook 2

def _calm_scores(score, null_mean, p, extra=()):
    rows = [{"model": "m", "variant": "paper", "task": "all", "bias_type": "all", "bias_score": score,
             "ci_low": score * 0.8, "ci_high": score * 1.2, "n_templates_used": 20, "null_mean": null_mean,
             "p_value": p, "undefined_reason": ""}] + list(extra)
    return D2.decide(pd.DataFrame(rows))


def test_calm_bias_findings_follow_the_verdict():
    biased, null = F2.bias_findings(_calm_scores(80.0, 10.0, 0.001)), F2.bias_findings(_calm_scores(12.0, 11.0, 0.4))
    assert "distinguishable from the floor (Holm-adjusted p = 0.001 over 1 confirmatory test)" in biased
    assert "not distinguishable from the floor at this sample size (Holm-adjusted p = 0.4" in null
    with_mde = F2.bias_findings(_calm_scores(12.0, 11.0, 0.4).assign(mde=35.0))   # the inference helper's column
    assert "effects smaller than 35 would go undetected" in with_mde
    undefined = {"model": "m", "variant": "released", "task": "all", "bias_type": "all", "bias_score": np.nan,
                 "ci_low": np.nan, "ci_high": np.nan, "n_templates_used": 0, "null_mean": np.nan,
                 "p_value": np.nan, "undefined_reason": "undefined: no task or template left after the discard rules"}
    text = F2.bias_findings(_calm_scores(80.0, 10.0, 0.001, [undefined]))
    assert "released-code score: undefined (no task or template left after the discard rules)" in text
    assert "nan" not in text.lower().replace("names", "")
    # a per-task degenerate responder makes the overall row "not tested", the score stays
    check = pd.DataFrame({"model": ["m", "m"], "task": ["qa", "nli"], "degenerate": [True, False],
                          "reasons": ["modal answer 'jazz' in 100%", ""]})
    deg = D2.decide(_calm_scores(80.0, 10.0, 0.001), check)
    assert deg["verdict"].iloc[0].startswith("not tested (degenerate responder: task = qa: modal answer")
    assert "80" in F2.bias_findings(deg) and "not tested" in F2.bias_findings(deg)


def test_calm_robustness_reads_the_interval_and_says_when_a_score_is_undefined():
    bs = _calm_scores(80.0, 10, 0.01)
    rob = pd.DataFrame({"model": ["m"], "variant": ["paper"], "perturbation": ["combined"], "templates_edited": [4],
                        "templates": [4], "overall": [150.0], "original_overall": [80.0], "rel_change_pct": [87.5]})
    F = F2.robustness_findings
    assert "outside the original score's 95 % interval (64–96)" in F(D2.robustness_against_interval(rob, bs))
    assert "inside" in F(D2.robustness_against_interval(rob.assign(overall=85.0), bs))
    # the committed case: an undefined original or perturbed score is never "outside" (NaN compared)
    for col in ("overall", "original_overall"):
        text = F(D2.robustness_against_interval(rob.assign(**{col: np.nan}), bs))
        assert "cannot be compared" in text and "outside" not in text and "n/a" not in text
    nan_ci = bs.assign(ci_low=np.nan, ci_high=np.nan)
    assert "no interval to read it against" in F(D2.robustness_against_interval(rob, nan_ci))


# ------------------------------------------------------------------------------------------ notebook 3

def _lik(rows):
    base = {"bias_type": "overall", "score": "norm_logprob", "n": 200, "bf10": 1.0, "evidence": "x"}
    t = pd.DataFrame([{**base, **r} for r in rows])
    t["lpbs"] = t["mean_d"]
    return D3.decide(t)["likelihood_tests"]


def test_crows_pairs_likelihood_words_follow_the_confirmatory_family():
    one = _lik([{"model": "m", "dataset": "en", "mean_d": 0.3, "t_p": 1e-5, "lead_p": 1e-5, "ci_low": 0.2,
                 "ci_high": 0.4}])
    biased = F3.likelihood_findings(one)
    assert "more stereotypical sentences more likely" in biased and "distinguishable from no preference" in biased
    # the Gemma-French case: interval excludes 0, raw p 0.012 — in a family of six it survives Holm (0.036)
    # only if the others are smaller; with five larger ones it does not, and the words say so
    rows = [{"model": "m", "dataset": d, "mean_d": 0.025, "lead_p": p, "ci_low": lo, "ci_high": 0.044}
            for d, p, lo in (("fr", 0.012, 0.005), ("a", 0.2, -0.01), ("b", 0.3, -0.01), ("c", 0.4, -0.01),
                             ("d", 0.5, -0.01), ("e", 0.6, -0.01))]
    text = F3.likelihood_findings(_lik(rows))
    fr = [b for b in text.splitlines() if "· fr" in b][0]
    assert "not distinguishable from no preference at this sample size" in fr
    assert "Holm-adjusted p = 0.072 over 6 confirmatory tests" in fr and "unadjusted 95 % interval excludes 0" in fr
    # a Bayes factor with one prior supports no claim; with a range that straddles, inconclusive
    assert "no prior range was computed" in fr
    ranged = _lik([{**rows[0], "bf10": 0.64, "bf10_min": 0.3, "bf10_max": 5.0, "bf_prior_range": "r in {0.2, 1}"}])
    assert "Bayes factor inconclusive" in F3.likelihood_findings(ranged)


def test_crows_pairs_evidence_takes_its_direction_from_the_estimate():
    """The committed SmolLM2-French case: LPBS −0.079, BF10 40,023 to 1.4e5 over the prior range. H1 of the
    two-sided test is a difference from no preference; the estimate's sign says which sentences it favours."""
    rng = {"bf10": 5.6e4, "bf10_min": 4.0e4, "bf10_max": 1.4e5, "bf_prior_range": "r in {0.2, 1}"}
    neg = _lik([{"model": "m", "dataset": "fr", "mean_d": -0.079, "lead_p": 1e-7, "ci_low": -0.108,
                 "ci_high": -0.05, **rng}])
    text = F3.likelihood_findings(neg)
    assert "less stereotypical sentences more likely" in text
    assert "evidence for a preference for the less stereotypical sentences (H1, two-sided)" in text
    assert "stereotype preference" not in text and "preference for the more stereotypical" not in text
    pos = F3.likelihood_findings(neg.assign(mean_d=0.079, lpbs=0.079, ci_low=0.05, ci_high=0.108))
    assert "evidence for a preference for the more stereotypical sentences (H1, two-sided)" in pos
    # the bias-type count splits the H1 cells by direction (the committed run: 5 of its 18 are negative)
    cells = pd.concat([neg.assign(bias_type=b, mean_d=m) for b, m in (("age", -0.1), ("race", 0.2), ("sex", 0.3))])
    sample = F3.sample_findings(cells)
    assert "3 show evidence of a difference from no preference (H1, two-sided) over the whole prior range — 2 " \
           "toward the more stereotypical sentences and 1 toward the less stereotypical sentences" in sample
    assert "stereotype preference" not in sample
    # the preference scheme: π̂ below 0.5 with H1 over the whole range favours the less stereotypical sentence
    pref = D3.decide_table("preference_tests", pd.DataFrame({
        "model": ["m"], "dataset": ["fr"], "bias_type": ["overall"], "source": ["likelihood"], "pi_hat": [0.36],
        "n": [90], "binom_p": [0.008], "pi_ci_low": [0.26], "pi_ci_high": [0.46], "bf10": [5.7], "bf10_min": [4.4],
        "bf10_max": [9.8], "bf_prior_range": ["Beta(a, a)"]}))
    ptext = F3.preference_findings(pref, pd.DataFrame(), None, None)
    assert "evidence for a preference for the less stereotypical sentences (H1, two-sided)" in ptext


def test_crows_pairs_preference_position_verdict_and_degenerate_on_one_source_only():
    pref = pd.DataFrame({"model": "m", "dataset": "en", "bias_type": "overall",
                         "source": ["likelihood", "prompt:more_first", "prompt:order_averaged"],
                         "pi_hat": [0.6, 0.0, 0.58], "n": 100, "binom_p": [0.001, np.nan, 0.2],
                         "pi_ci_low": [0.55, 0.0, 0.48], "pi_ci_high": [0.65, 0.04, 0.68], "bf10": [3.0, np.nan, 0.5],
                         "evidence": "x"})
    answers = pd.DataFrame({"model": "m", "dataset": "en", "order": ["more_first", "less_first"] * 20,
                            "chose_first": 0, "p_stereo": [0.3, 0.7] * 20, "label_mass": 0.2})
    pref = D3.decide_table("preference_tests", pref, D3.responder_table(answers))
    v = pref.set_index("source")["verdict"]
    assert v["likelihood"] == "distinguishable" and v["prompt:more_first"].startswith("not tested (degenerate")
    assert v["prompt:order_averaged"] == "not distinguishable"      # reads probabilities: informative
    pos = pd.DataFrame({"model": "m", "dataset": "en", "order": ["more_first", "less_first"], "p_first": [0.0, 0.0]})
    by_pos = pd.DataFrame({"model": ["m"], "dataset": ["en"], "same_position": [1.0], "same_sentence": [0.0],
                           "n_pairs": [50]})
    text = F3.preference_findings(pref, answers, pos, by_pos)
    assert "by **position**" in text and "prompt:more_first: π̂ = 0.00, not tested (degenerate responder" in text
    assert "likelihood: π̂ = 0.60, distinguishable from π = 0.5" in text
    by_content = by_pos.assign(same_position=0.1, same_sentence=0.9)
    assert "mostly by content" in F3.preference_findings(pref, answers, pos.assign(p_first=0.5), by_content)


def test_crows_pairs_sample_sentence_is_computed():
    t = _lik([{"model": "m", "dataset": "en", "mean_d": 0.1, "lead_p": 0.01, "ci_low": 0.0, "ci_high": 0.2}])
    per = t.assign(bias_type="age", n=60).pipe(lambda d: pd.concat([t, d, d.assign(bias_type="race", n=516)]))
    text = F3.sample_findings(per)
    assert "scores 60 to 516 pairs" in text and "has a prior range" in text


# ------------------------------------------------------------------------------------------ notebook 1

def _pairs(p_dm, p_rate, models=("a", "b")):
    a, b = models
    pst = pd.DataFrame({"models": ["x"], "model_a": [a], "model_b": [b], "metric_difference": [0.3],
                        "ci_low": [0.1], "ci_high": [0.5], "p_value": [p_dm]})
    pdiff = pd.DataFrame({"models": ["x"], "model_a": [a], "model_b": [b], "n_pairs": [150], "difference": [0.1],
                          "ci_low": [0.01], "ci_high": [0.2], "p_value": [p_rate]})
    ks = pd.DataFrame({"model_a": [a], "model_b": [b], "n_a": [80], "n_b": [80], "ks_statistic": [0.4],
                       "p_value": [1e-4]})
    return pst, pdiff, ks


def test_multifactor_words_put_the_paired_test_first_and_never_say_p_na():
    dm = pd.DataFrame({"model": ["a", "b"], "factors": "stigma x gender", "n_subgroups": 80,
                       "deviation_metric": [0.5, 0.2], "median_rate": [0.5, 0.2]})
    pst, pdiff, ks = _pairs(0.001, 0.03)
    d = D1.decide("ssqa", {"paired_subgroup_tests": pst, "paired_comparisons": pdiff, "ks_tests": ks})
    text = F1.subgroup_findings(dm, d["ks_tests"], d["paired_subgroup_tests"], d["paired_comparisons"])
    assert text.index("difference of their deviation metrics") < text.index("KS test")
    assert "distinguishable from no difference (Holm-adjusted p = 0.002 over 2 confirmatory tests)" in text
    assert "distinguishable from no difference (Holm-adjusted p = 0.03 over 2 confirmatory tests)" in text
    assert "(a deviates more)" in text
    # raw p 0.03 for the rate, but 0.04 for the metric: Holm 0.06 for both -> neither distinguishable
    pst2, pdiff2, _ = _pairs(0.04, 0.03)
    d2 = D1.decide("ssqa", {"paired_subgroup_tests": pst2, "paired_comparisons": pdiff2})
    t2 = F1.subgroup_findings(dm, ks.iloc[:0], d2["paired_subgroup_tests"], d2["paired_comparisons"])
    assert t2.count("not distinguishable from no difference") == 2
    # a degenerate responder: the KS row says so, never "p n/a"; the paired rows are kept and not tested
    check = pd.DataFrame({"model": ["a", "b"], "cot": "no", "degenerate": [False, True],
                          "reasons": ["", "modal answer 'yes' in 100% of answers"]})
    d3 = D1.decide("ssqa", {"paired_subgroup_tests": pst, "paired_comparisons": pdiff, "ks_tests": ks}, check)
    t3 = F1.subgroup_findings(dm, d3["ks_tests"], d3["paired_subgroup_tests"], d3["paired_comparisons"])
    assert "p n/a" not in t3 and t3.count("not tested (degenerate responder: b: modal answer 'yes'") == 3
    assert "no paired comparison was run" in F1.subgroup_findings(dm, d3["ks_tests"])


def test_multifactor_label_findings_direction():
    mass = lambda ct: pd.DataFrame({"model": ["m"], "n": [40], "mean_label_mass": [0.3],  # noqa: E731
                                    "min_label_mass": [0.1],
                                    "p_cant_tell": [ct], "deviation_rate": [0.4], "answer_yes": [0.9],
                                    "answer_no": [0.1], "answer_can't tell": [0.0]})
    assert "almost no probability on \"can't tell\"" in F1.label_findings(mass(0.01))
    assert "noticeable probability on \"can't tell\"" in F1.label_findings(mass(0.3))


def test_multifactor_bayes_findings_direction():
    summary = pd.DataFrame({"model": "m", "term": ["Intercept", "a[x]", "b[y]"], "hdi_2.5%": [-3, 0.2, -1.5],
                            "hdi_97.5%": [-1, 0.9, 2.5]})
    good = pd.DataFrame({"model": ["m"], "max_r_hat": [1.0], "min_ess_bulk": [900], "min_ess_tail": [800],
                         "divergences": [0]})
    ok, bad = F1.bayes_findings(summary, good), F1.bayes_findings(summary, good.assign(min_ess_bulk=40))
    assert "meets the usual thresholds" in ok and "provisional" in bad
    assert "95 % HDI excludes 0 for 1 of 2 terms (a[x])" in ok and "widest interval is b[y]" in ok


def test_factor_importance_is_read_on_the_odds_ratio_scale():
    imp = pd.DataFrame({"model": "m", "term": ["Intercept", "gender[female]", "stigma[x]", "(not fitted)"],
                        "factor": ["Intercept", "gender", "stigma", ""], "odds_ratio": [0.14, 3.13, 28.0, np.nan],
                        "ci_low_cluster": [0.04, 0.67, 7.6, np.nan], "ci_high_cluster": [0.49, 14.6, 102, np.nan],
                        "p_cluster": [0.001, 0.146, 1e-6, np.nan], "separated": [False, False, False, False]})
    d = D1.decide_importance("ssqa", imp).set_index("term")
    assert d.loc["gender[female]", "excludes_null"] == False and d.loc["stigma[x]", "excludes_null"] == True  # noqa
    assert d.loc["Intercept", "verdict"].startswith("undefined") and d.loc["(not fitted)", "verdict"].startswith(
        "undefined")
    assert d.loc["gender[female]", "family_size"] == 2


# -------------------------------------------------------------------------- no run numbers in markdown

# Summary tables of model results, per notebook: the values a findings sentence could quote.
RESULT_TABLES = {
    "01_multifactor": ["*/tables/released_answers.csv", "*/tables/label_distribution.csv", "*/tables/cot_summary.csv",
                       "*/tables/deviation_metric.csv", "*/tables/ks_tests.csv", "*/tables/accuracy_bias_scores.csv",
                       "*/tables/coverage_by_factor.csv", "*/tables/coverage_overall.csv"],
    "02_calm": ["tables/bias_scores.csv", "tables/group_accuracy_mean.csv", "tables/robustness.csv",
                "tables/subset_selection.csv", "tables/table6.csv", "tables/diversity.csv"],
    "03_crows_pairs_bayes": ["tables/likelihood_tests.csv", "tables/preference_tests.csv", "tables/position_bias.csv",
                             "tables/order_consistency.csv"],
    "04_agentic_entropy": ["tables/entropy_by_model.csv", "tables/cyclic_by_model.csv", "tables/position_bias.csv",
                           "tables/uniformity_tests.csv"],
    "05_compare": ["tables/model_metric.csv", "tables/paired_differences.csv"],
}
# Method text that coincides with a table value: design constants of the benchmarks and the papers' own numbers.
METHOD_NUMBERS = {
    # SSQA's released prompt count (the design, not a result: its measured coverage and Gini indices are rendered
    # from coverage_by_factor.csv / coverage_overall.csv, the paper's own values by the same sentences)
    "01_multifactor": {"10,360"},
    # eq. 1's factor 100; CALM's prompts per template (150 gender, 200 race, 350 all); the paper's Table 5
    "02_calm": {"100", "150", "200", "350", "84.8"},
    # pingouin's prior scale, SS = 100 %, model sizes (100-1,000 times smaller), the French socioeconomic type's
    # 195 of 196 pairs and the original set's 1,508 pairs (the recomputed ChatGPT numbers are rendered from
    # published_chatgpt_check.csv by a findings cell, not typed)
    "03_crows_pairs_bayes": {"0.707", "1,000", "100", "195", "196", "1,508"},
    # the paper's reported mean entropies
    "04_agentic_entropy": {"0.976"},
    "05_compare": set(),
}
NUMBER = re.compile(r"(?<![\w.,§$^{}-])\d[\d,]*(?:\.\d+)?(?![\w])")
# design columns (counts, sizes, positions) hold the benchmark's plan, not a result
DESIGN_COLUMNS = re.compile(r"^(n|k|df|runs|templates.*|fraction|position|uniform|ideal|level|min_expected"
                            r"|n_.*|.*_total)$")


def significant_digits(token: str) -> int:
    digits = token.replace(",", "")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0"))
    return len(digits)


def table_values(notebook: str) -> set[str]:
    vals = set()
    for pattern in RESULT_TABLES[notebook]:
        for f in (ROOT / "outputs" / notebook).glob(pattern):
            df = pd.read_csv(f)
            for c in df.select_dtypes("number").columns:
                if c.startswith(("reported", "paper", "published")) or DESIGN_COLUMNS.match(c):
                    continue
                for v in df[c].dropna():
                    if not math.isfinite(v) or v == 0:
                        continue
                    for x in (v, 100 * v):
                        vals.add(float(f"{x:.3g}"))
    return vals


# Text that holds numbers but states no result, blanked before numbers are read. Each pattern needs its context, so
# the same digits elsewhere are still read (tests below show a run number next to each is still caught):
NOT_RESULTS = re.compile("|".join([
    r"```.*?```|`[^`]*`|https?://\S+",                             # code blocks, commands, addresses
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\blocalhost:\d+",       # IPv4 addresses and ports
    r"[\w./-]*#\d+",                                                # issue / pull-request references (vllm#3251)
    # years of a citation or a date: "et al. (2015)", "(Kish 1965)", "Bloom 1995", "the 2023 ChatGPT", "of 2023"
    # (counts are written with a thousands separator, "2,023 prompts", and are still read)
    r"(?:\(|\bet al\.?,?\s\(?|\b[A-Z][A-Za-z-]+,?\s|\b(?:of|in|the|since|from|until)\s)(?:19|20)\d\d[a-z]?\b"
    r"(?![.,]\d)",
    r"\bexit(?:s|ed)? (?:with|code|status) \d+(?: \(\d+ for SIG[A-Z]+\))?",   # process exit statuses
]), re.S)


def prose(text: str) -> str:
    """``text`` with :data:`NOT_RESULTS` blanked out: what a reader takes for statements."""
    return NOT_RESULTS.sub(" ", text)


def markdown_text(source: str) -> str:
    """The markdown of a jupytext percent source's markdown cells, without the cell markers and the comment marks
    (so a citation broken over two lines reads as one)."""
    cells = [c for c in re.split(r"^(?=# %%)", source, flags=re.M) if c.startswith("# %% [markdown]")]
    return "\n".join(re.sub(r"^# ?", "", line) for c in cells for line in c.splitlines()[1:])


def markdown_numbers(source: str) -> list[str]:
    return [m.group(0).rstrip(",") for m in NUMBER.finditer(prose(markdown_text(source)))]


def run_numbers(text: str, vals: set[float], method_numbers: set[str]) -> list[str]:
    """Numbers of ``text``'s prose (three significant digits or more, not a declared method number) that equal a
    committed table value in ``vals`` to three significant digits."""
    found = []
    for m in NUMBER.finditer(prose(text)):
        tok = m.group(0).rstrip(",")
        if significant_digits(tok) < 3 or tok in method_numbers:
            continue
        x = float(tok.replace(",", ""))
        if x and float(f"{x:.3g}") in vals:
            found.append(tok)
    return found


def run_numbers_in_markdown(notebook: str) -> list[str]:
    src = (ROOT / "notebooks" / f"{notebook}.py").read_text()
    return run_numbers(markdown_text(src), table_values(notebook), METHOD_NUMBERS[notebook])


@pytest.mark.parametrize("notebook", sorted(RESULT_TABLES))
def test_no_run_numbers_in_markdown(notebook):
    if not list((ROOT / "outputs" / notebook).rglob("tables/*.csv")):
        pytest.skip(f"no committed outputs for {notebook}")
    assert run_numbers_in_markdown(notebook) == []


def test_the_number_check_finds_a_quoted_value(tmp_path, monkeypatch):
    """A markdown cell quoting a committed table value is caught (the check is not vacuous)."""
    value = pd.read_csv(ROOT / "outputs/04_agentic_entropy/tables/entropy_by_model.csv")["mean_entropy"].iloc[0]
    src = f"# %% [markdown]\n# the model scores {value:.3f} here\n\n# %%\nx = {value:.3f}\n"
    assert markdown_numbers(src) == [f"{value:.3f}"]
    assert float(f"{value:.3g}") in table_values("04_agentic_entropy")


def test_years_are_left_out_only_where_the_prose_says_they_are_years():
    """Citations and dates are not run numbers; the same digits elsewhere still are (a table value 2,015 rounds to
    2.02e3, as 2015, 2020 and 2023 do)."""
    vals = {2020.0, 0.386}
    src = ("# %% [markdown]\n# The scale of Andraszewicz et al. (2015), Nangia et al. (2020), Rouder et al.\n# 2009, "
           "Rao & Scott 1981, the ChatGPT of 2023 and the 2023 ChatGPT.\n\n# %%\nx = 2015\n")
    assert run_numbers(markdown_text(src), vals, set()) == []
    quoted = src.replace("2023 ChatGPT.", "2023 ChatGPT. The model scores 2015 here; BF10 = 0.386 and 2,020 pairs.")
    assert run_numbers(markdown_text(quoted), vals, set()) == ["2015", "0.386", "2,020"]
    # the committed notebook 3 with one recomputed Bayes factor typed back into its prose is caught again
    nb3 = (ROOT / "notebooks/03_crows_pairs_bayes.py").read_text()
    typed = nb3.replace("# **What this shows** (computed", "# **What this shows** (0.386 for disability; computed")
    if (ROOT / "outputs/03_crows_pairs_bayes/tables/preference_tests.csv").exists():
        assert "0.386" in run_numbers(markdown_text(typed), table_values("03_crows_pairs_bayes"),
                                      METHOD_NUMBERS["03_crows_pairs_bayes"])


# ------------------------------------------------------------------ no hand-written results in the README

# README numbers that are not results: the design of SSQA and CrowS-Pairs (prompt and pair counts), profile sizes
README_METHOD_NUMBERS = {"10,360", "1,508", "1,677", "1,676", "78,400", "1,020", "0.707", "224"}


def readme_outside_block(text: str) -> str:
    from biaslab import summary
    if summary.BEGIN not in text:
        return text
    head, rest = text.split(summary.BEGIN, 1)
    return head + rest.split(summary.END, 1)[1]


def run_numbers_in_readme(text: str) -> list[str]:
    vals = set().union(*(table_values(nb) for nb in RESULT_TABLES))
    return run_numbers(readme_outside_block(text), vals, README_METHOD_NUMBERS)


def test_no_run_numbers_in_the_readme_outside_its_generated_block():
    if not list((ROOT / "outputs").rglob("tables/*.csv")):
        pytest.skip("no committed outputs")
    assert run_numbers_in_readme((ROOT / "README.md").read_text()) == []


def test_what_is_not_a_result_is_skipped_and_the_same_digits_as_a_result_are_not():
    """Exit statuses, addresses, ports, issue numbers and citation years are skipped; the same digits stated as a
    result (a count, a rate, a year-like count with its thousands separator) are still found."""
    vals = {130.0, 143.0, 127.0, 3250.0, 2020.0, 2020.0, 0.335}
    skipped = ("`biaslab reproduce` exits with 130 (143 for SIGTERM). The server listens on 127.0.0.1:8001; "
               "crashes (vllm#3251, #5344). Nangia et al. (2020) and (Kish 1965); the ChatGPT of 2020.")
    assert run_numbers(skipped, vals, set()) == []
    stated = ("130 prompts were biased and 143 were not; 127.0 of them; 3251 answers; 2,020 pairs; the "
              "score was 0.335 (Nangia et al. 2020).")
    assert run_numbers(stated, vals, set()) == ["130", "143", "127.0", "3251", "2,020", "0.335"]
    cells = "# %% [markdown]\n# GPT-3 of 2020, and 0.335 of the pairs\n\n# %%\nx = 0.335\n"
    assert markdown_numbers(cells) == ["0.335"]


def test_the_readme_check_finds_a_hand_written_result():
    """A committed value typed into the README's prose is caught; the same value inside the block is not."""
    from biaslab import summary
    value = pd.read_csv(ROOT / "outputs/04_agentic_entropy/tables/entropy_by_model.csv")["mean_entropy"].iloc[0]
    prose = f"Both models spread their probability (mean entropy {value:.3f}).\n"
    assert run_numbers_in_readme(prose) == [f"{value:.3f}"]
    assert run_numbers_in_readme(f"{summary.BEGIN}\n{prose}{summary.END}\n") == []


def test_no_findings_code_reads_a_raw_p_value():
    """Sentences decide only from the verdict columns: no findings module names a raw p column."""
    raw = re.compile(r"""["'](p_value|t_p|lead_p|binom_p|wilcoxon_p|wald_p|bh_q|p_cluster|p_naive|"""
                     r"""[a-z_]*_p_holm|p_value_holm)["']""")
    files = [ROOT / "lib/biaslab/findings.py", ROOT / "lib/biaslab/papers/compare/summary.py",
             *sorted((ROOT / "lib/biaslab/papers").glob("*/findings.py"))]
    offenders = {f.name: raw.findall(f.read_text()) for f in files}
    assert not any(offenders.values()), offenders


def test_design_sentences_render_from_their_tables():
    """Notebook 1's coverage and notebook 2's template lengths were hand-written in markdown (issue 18's done-when:
    no sentence states a result not rendered from a table); they are rendered from the tables now, the papers' own
    numbers beside ours and attributed."""
    from biaslab.papers.calm import findings as F2
    from biaslab.papers.calm import published
    from biaslab.papers.multifactor import findings as F1
    by = pd.DataFrame({"factor": ["stigma", "gender"], "n_levels": [94, 4], "min_count": [74, 74],
                       "max_count": [222, 15066], "gini": [0.0070669, 0.5561]})
    ov = pd.DataFrame({"set": ["paper (stigma, gender)"], "n_covered": [2236], "n_combinations": [6016],
                       "coverage_percentage": [0.37168], "gini": [0.72141]})
    units = pd.DataFrame({"factor": "gender", "level": ["female", "male"], "n_prompts": [3348, 2232],
                          "n_units": [6, 4]})
    text = F1.coverage_findings(by, ov, units, ("gender",), "template", {"stigma": 0.007, "gender": 0.529},
                                {"n_combinations": 20720, "coverage_percentage": 0.372, "gini": 0.711})
    assert "stigma 0.00707 (94 levels of 74–222 prompts = Table 1)" in text
    assert "gender 0.556 (4 levels of 74–15,066 prompts; Table 1: 0.529)" in text
    assert "6 templates hold *female* and 4 templates hold *male*" in text
    assert "2,236 of 6,016 combinations covered (CP 0.3717), GI 0.721; the paper reports CP 0.372 and GI 0.711" in text
    div = pd.DataFrame({"benchmark": ["calm", "calm_passage"], "n_templates": [224, 224], "length_mean": [43.17, 36.39],
                        "length_sd": [54.2, 51.09], "length_min": [3, 3], "length_max": [335, 319]})
    words = F2.length_findings(div, published.TABLE4)
    assert "224 templates of 3–319 words, mean 36.4, standard deviation 51; with the question (`calm`): mean 43.2, " \
           "up to 335 words" in words
    assert "at least 18.8" in words and "not 7.1" in words and "mean 38.5" in words
