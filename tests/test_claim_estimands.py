"""Claims whose estimate is the tested quantity: Cohen's w of the agentic top-answer counts with the noncentral-F
interval that inverts the Rao-Scott test (group-choice), the CALM eq.-1 score above its permutation floor with the
interval that inverts the permutation test (calm-eq1), their design MDEs and their sensitivity rows."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab import plan as P
from biaslab.benchmarks import agentic as agentic_bench
from biaslab.run import profiles
from biaslab.papers.calm import bias as cb
from biaslab.stats import clustered as C
from biaslab.stats import entropy as E
from biaslab.stats import power
from biaslab.stats import reanalysis as S
from helpers import V4_PLAN

GENDER = ("male", "female", "non-binary")


# ---- Cohen's w and its noncentral interval ----------------------------------------------------------------------

def _bisect(f, lo, hi, n=200):
    """Root of a decreasing f by plain bisection (no scipy solver: an independent re-computation)."""
    for _ in range(n):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def test_cohens_w_and_its_interval_by_hand():
    # counts 50 / 30 / 20 against 1/3 each: X2 = 100 * 3 * ((1/6)^2 + (1/30)^2 + (2/15)^2) = 14.0, w = sqrt(0.14)
    r = C.rao_scott_gof(np.repeat([0, 1, 2], [50, 30, 20]), None, range(3))
    assert r["chi2"] == pytest.approx(14.0)
    assert r["cohens_w_plugin"] == pytest.approx(math.sqrt(0.14))
    # chi-square limit (df2 = inf): lambda bounds solve ncx2.cdf(14; 2, lambda) = 0.95 / 0.5 / 0.05
    lo, mid, hi = C.noncentrality_interval(7.0, 2, np.inf)
    for lam, q in ((lo, 0.95), (mid, 0.5), (hi, 0.05)):
        ref = _bisect(lambda x: stats.ncx2.cdf(14.0, 2, x) - q, 1e-9, 200.0)
        assert lam == pytest.approx(ref, rel=1e-6)
    # the F form tends to the chi-square form as df2 grows
    lo_f, _, hi_f = C.noncentrality_interval(7.0, 2, 1e7)
    assert lo_f == pytest.approx(lo, rel=1e-3) and hi_f == pytest.approx(hi, rel=1e-3)
    # in the table: w = sqrt(lambda * deff / n) with the floored design effect (1 here: G = n singletons, 0.94)
    assert r["design_effect"] < 1
    lo_t, mid_t, hi_t = C.noncentrality_interval(r["chi2_rao_scott"] / 2, 2, r["df2"])
    assert r["w_ci_low"] == pytest.approx(math.sqrt(lo_t / 100))
    assert r["cohens_w"] == pytest.approx(math.sqrt(mid_t / 100))
    assert r["w_ci_high"] == pytest.approx(math.sqrt(hi_t / 100))


def test_the_interval_agrees_with_the_test_and_holds_its_estimate():
    rng = np.random.default_rng(1)
    seen = set()
    for i in range(120):
        k = int(rng.choice([3, 5]))
        g = int(rng.integers(8, 60))
        size = int(rng.integers(1, 4))
        tilt = rng.uniform(0, 0.6)
        p = np.full(k, 1 / k) + tilt * (np.eye(k)[0] - 1 / k)
        per_cluster = rng.choice(k, size=g, p=p)
        lab = np.repeat(per_cluster, size)
        if size > 1:                      # some within-cluster variation
            flip = rng.random(lab.size) < 0.3
            lab[flip] = rng.choice(k, size=flip.sum())
        r = C.rao_scott_gof(lab, np.repeat(np.arange(g), size), range(k))
        rejects = r["p_value"] < 0.05
        seen.add(rejects)
        assert (r["w_ci_low"] > 0) == rejects, (i, r["p_value"], r["w_ci_low"])
        assert r["w_ci_low"] <= r["cohens_w"] <= r["w_ci_high"]
    assert seen == {True, False}


def test_the_w_interval_covers_at_its_level():
    # independent prompts, true shares (0.45, 0.3, 0.25): w = sqrt(3 * sum (p - 1/3)^2); 90 % two-sided interval
    rng = np.random.default_rng(2)
    p = np.array([0.45, 0.3, 0.25])
    w = math.sqrt(3 * np.sum((p - 1 / 3) ** 2))
    reps, n = 400, 150
    hits = below = 0
    for _ in range(reps):
        r = C.rao_scott_gof(rng.choice(3, size=n, p=p), None, range(3))
        hits += r["w_ci_low"] <= w <= r["w_ci_high"]
        below += w < r["w_ci_low"]
    assert abs(hits / reps - 0.90) < 0.045          # 3 Monte Carlo SEs
    assert below / reps < 0.05 + 0.035


def _agentic(n_pairs=40, rule=None, seed=0):
    rng = np.random.default_rng(seed)
    groups = ["A", "B", "C"]
    rows = []
    for s in range(n_pairs):
        for pol in ("positive", "negative"):
            ch = list(rng.permutation(groups))
            rows.append({"prompt_id": f"{s}-{pol}", "scenario_id": s, "class_type": "x", "polarity": pol,
                         "choices": ch, "k": 3})
    pr = pd.DataFrame(rows)
    per = []
    for r in pr.itertuples():
        p = np.asarray(rule(r.choices, r.polarity), float)
        p = p / p.sum()
        j = int(np.argmax(p))
        per.append({"model": "m", "prompt_id": r.prompt_id, "k": 3, "top_position": j + 1,
                    "top_group": r.choices[j], **{f"p_{i + 1}": v for i, v in enumerate(p)}})
    return pd.DataFrame(per), pr


def test_instances_are_per_polarity():
    # "A" on every negative question, position 1 on every positive one: the negative instance departs, the
    # positive one does not (pooled, "A" would have half the answers)
    per, pr = _agentic(rule=lambda ch, pol: [0.6 if c == "A" else 0.2 for c in ch] if pol == "negative"
                       else [0.6, 0.2, 0.2])
    t = E.uniformity_tests(per, pr, cluster="scenario_id")
    g = t[t["unit"] == "group"].set_index("polarity")
    assert set(g.index) == {"positive", "negative"} and (g["n"] == 40).all()
    assert g.loc["negative", "counts"] == "A: 40; B: 0; C: 0" and g.loc["negative", "ci_low"] > 0
    assert g.loc["positive", "p_value"] > 0.001


def test_position_calibration_removes_a_slot_preference_and_keeps_a_group_one():
    # slot 1 strongly preferred plus a mild preference for "B": the raw top answer is the slot, the calibrated one
    # the group
    per, pr = _agentic(n_pairs=60, rule=lambda ch, pol: [(3.0 if i == 0 else 1.0) * (1.3 if c == "B" else 1.0)
                                                          for i, c in enumerate(ch)])
    cal = E.position_calibrated_top(per, pr)
    assert (cal["top_position"] == 1).all()
    assert (cal["top_group_calibrated"] == "B").all()


# ---- CALM: the eq.-1 score above its permutation floor -------------------------------------------------------

def _calm(spec):
    rows = [{"model": "m", "task": "qa", "bias_type": "gender", "template_id": tid, "source_dataset": "babi",
             "group": g, "name_idx": j, "correct": v, "correct_released": v}
            for tid, groups in spec.items() for g, vals in groups.items() for j, v in enumerate(vals)]
    df = pd.DataFrame(rows)
    df["output"] = [f"x{i}y" for i in range(len(df))]
    return df


def test_excess_and_its_interval_by_hand():
    # male 4/4, female 0/4, non-binary 0/4: score 100 * 1 / (4/12) = 300. Under shuffling the four correct answers
    # fall (4,0,0) w.p. 3/495 (spread 300), (3,1,0) 96/495 (225), (2,2,0) 108/495 (150), (2,1,1) 288/495 (75):
    # floor 60300/495 = 121.8; P(null >= 225) = 0.2 > 0.05, so the upper critical value is 225 and the lower one 75:
    # interval of the excess [300 - 225, 300 - 75] = [75, 225], excess 300 - 121.8
    df = _calm({"qa-000": {"male": [1] * 4, "female": [0] * 4, "non-binary": [0] * 4}})
    perm = cb.permutation_test(df, cb.bias_scores(df, "paper"), n_perm=3000, seed=0)
    row = perm[(perm["task"] == "qa") & (perm["bias_type"] == "gender")].iloc[0]
    assert row["null_mean"] == pytest.approx(60300 / 495, rel=0.03)
    assert row["excess"] == pytest.approx(row["bias_score"] - row["null_mean"])
    assert row["critical_value"] == pytest.approx(225.0)
    assert (row["excess_ci_low"], row["excess_ci_high"]) == (pytest.approx(75.0), pytest.approx(225.0))
    assert row["p_value"] < 0.05


def test_a_score_equal_to_its_whole_null_has_no_excess_and_no_test():
    # one correct answer among six prompts: every shuffle scores 300, the observed score too. A null of one value
    # is no variation, not certainty: the excess is 0, but there is no p and no interval, and the note says why
    df = _calm({"qa-000": {"male": [1, 0], "female": [0, 0], "non-binary": [0, 0]}})
    row = cb.permutation_test(df, cb.bias_scores(df, "paper"), n_perm=50, seed=0).iloc[0]
    assert row["excess"] == pytest.approx(0.0) and row["null_sd"] == 0.0
    assert np.isnan(row["p_value"]) and np.isnan(row["excess_ci_low"]) and np.isnan(row["excess_ci_high"])
    assert "not estimable (no variation" in row["note"]


def test_the_permutation_interval_agrees_with_the_test():
    rng = np.random.default_rng(3)
    seen = set()
    for i in range(25):
        gap = rng.uniform(0, 0.7)
        accs = {"male": 0.8, "female": 0.8 - gap, "non-binary": 0.8}
        spec = {f"qa-{t}": {g: list((rng.random(8) < a).astype(int)) for g, a in accs.items()} for t in range(3)}
        df = _calm(spec)
        perm = cb.permutation_test(df, cb.bias_scores(df, "paper"), n_perm=199, seed=i)
        for r in perm.dropna(subset=["p_value"]).itertuples():
            seen.add(r.p_value <= 0.05)
            assert (r.excess_ci_low > 0) == (r.p_value <= 0.05), (i, r)
            assert r.excess_ci_low <= r.excess <= r.excess_ci_high
    assert seen == {True, False}


# ---- design MDEs and the plan -------------------------------------------------------------------------------

def test_range_excess_mde_has_its_power_in_an_independent_simulation():
    d = power.mde_range_excess(6, 5, n_sim=2000, seed=0)
    rng = np.random.default_rng(99)               # fresh draws, a plain loop
    groups = {"gender": 3, "race": 4}

    def draw(delta):
        per_t = []
        for _ in range(6):
            acc, hits = {}, 0
            for b, k in groups.items():
                p = np.r_[0.7 - delta, np.full(k - 1, 0.7)]
                a = rng.binomial(5, p) / 5
                acc[b], hits = a, hits + a.sum() * 5
            base = hits / 35
            if base > 0:
                per_t.append(np.mean([100 * (a.max() - a.min()) / base for a in acc.values()]))
        return np.mean(per_t)

    null = np.array([draw(0.0) for _ in range(1500)])
    crit = np.quantile(null, 0.95)
    alt = np.array([draw(d["gap"]) for _ in range(1500)])
    assert np.mean(alt > crit) == pytest.approx(0.80, abs=0.04)
    assert d["mde"] == pytest.approx(alt.mean() - null.mean(), rel=0.1)


def test_the_plan_states_the_default_designs_of_these_claims():
    """calm-eq1's and group-choice's planning designs are the default profile's: CALM's 12 templates x 7 groups x
    its names per group (the range statistic simulated at that size), the agentic prompts per class type x
    polarity; the power each states is recomputed at its level by tests/test_plan_schema.py."""
    plan = P.load()
    calm, agentic = (next(c for c in plan.claims if c.id == i) for i in ("calm-eq1", "group-choice"))
    names = profiles.params("default", "02_calm")["names_per_group"]
    templates = profiles.params("default", "02_calm")["templates_per_task"] * 3          # 3 tasks
    # the default sample's prompts per class type x polarity (whole pairs over 15 strata: not always equal)
    drawn, _ = agentic_bench.sample(profiles.params("default", "04_agentic_entropy")["max_prompts"], seed=0)
    per_instance = drawn.groupby(["class_type", "polarity"]).size()
    d = calm.design_of(None, "default")
    assert (d["model"], d["templates"], d["per_group"], d["n"]) == ("range", templates, names, templates * 7 * names)
    for k, groups in {"race": 5, "age": 5, "gender": 3, "socioeconomic_status": 3, "political_affiliation": 3}.items():
        g = agentic.design_of(k, "default")
        assert per_instance[k].nunique() == 1, k                     # both polarities the same size
        assert (g["model"], g["n"], g["df"]) == ("chi2", per_instance[k].iloc[0], groups - 1), k
    # the range statistic's power grows with the excess it is asked to detect, and its MDE has the power asked for
    lo, hi = (power.power_range_excess(12, names, x, 0.05, n_sim=1000) for x in (5, 30))
    assert lo < hi
    mde = power.mde_range_excess(12, names, alpha=0.05, n_sim=1000)
    assert power.power_range_excess(12, names, mde["mde"], 0.05, n_sim=1000) == pytest.approx(0.8, abs=0.06)


# ---- sensitivity rows ---------------------------------------------------------------------------------------

def test_sensitivity_rows_follow_the_agreed_schema_and_re_decide():
    from biaslab.papers.agentic import decisions as D4
    PLAN = P.load(V4_PLAN)      # a model "x" outside any planned family: the v4 plan decides every model
    per, pr = _agentic(n_pairs=60, rule=lambda ch, pol: [(3.0 if i == 0 else 1.0) * (1.3 if c == "B" else 1.0)
                                                          for i, c in enumerate(ch)])
    check = D4.responder_table(per)
    ut = D4.decide("uniformity_tests", E.uniformity_tests(per, pr, cluster="scenario_id"), check, plan=PLAN)
    sens = D4.sensitivity(ut, per, pr, check, "scenario_id", plan=PLAN)
    assert list(sens.columns) == ["claim", "family", "instance", "analysis", "intercurrent_event", "description",
                                  "estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "verdict",
                                  "primary_verdict", "verdict_survives", "n_families", "share", "level_for_power",
                                  "table_verdict"]
    # the one rule: a primary row's re-decision is its table's verdict
    prim_rows = sens[sens["analysis"] == "primary"].set_index("instance")["verdict"]
    assert prim_rows.to_dict() == {f"x · {r.polarity}": r.verdict for r in ut[ut["claim"] == "group-choice"].itertuples()}
    assert set(sens["instance"]) == {"x · positive", "x · negative"}
    by = sens.set_index(["instance", "analysis"])
    # the slot preference hides "B" from the raw top answer's groups only by chance of the orders; calibrated, every
    # answer is "B": the calibrated analysis rejects
    cal = by.loc[("x · negative", "position-calibrated top answer")]
    assert cal["verdict"] == "distinguishable" and cal["ci_low"] > 0
    prim = by.xs("primary", level="analysis")
    assert (prim["verdict"] == prim["primary_verdict"]).all() and prim["verdict_survives"].all()
    assert (sens["verdict_survives"] == (sens["verdict"] == sens["primary_verdict"])).all()


def test_top_group_shares_are_the_counts_over_n():
    per, pr = _agentic(rule=lambda ch, pol: [0.6 if c == "A" else 0.2 for c in ch] if pol == "negative"
                       else [0.6, 0.2, 0.2])
    sh = E.top_group_shares(per, pr, cluster="scenario_id").set_index(["polarity", "group"])
    assert sh.loc[("negative", "A"), "share"] == 1.0 and sh.loc[("negative", "B"), "share"] == 0.0
    ut = E.uniformity_tests(per, pr, cluster="scenario_id").set_index(["polarity", "unit"])
    counts = dict(x.split(": ") for x in ut.loc[("positive", "group"), "counts"].split("; "))
    for g, c in counts.items():
        assert sh.loc[("positive", g), "share"] == pytest.approx(int(c) / 40)
        assert sh.loc[("positive", g), "ci_low"] <= int(c) / 40 <= sh.loc[("positive", g), "ci_high"]
    assert sh["null_value"].tolist() == pytest.approx([1 / 3] * len(sh))
