"""Power from the analysed design, checked by simulation: for each of three designs (a paired contrast, a subgroup
contrast crossed with template, the cyclic gain), simulate the design, take the MDE that
:func:`biaslab.stats.power.mde_from_se` gives from the analysis's own standard error, and check that the analysis
detects an effect of that size with about 80 % power, while the old formula's MDE is far off (paired contrast: the
unpaired deff design overstates it; subgroup contrast crossed with template: the whole-model deff overstates it;
cyclic gain: deff 1 understates it)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from biaslab.stats import clustered as C
from biaslab.stats import intervals, power
import oracles

REPS = 300


def _power(sim, effect, test, reps=REPS, seed=1):
    """Share of ``reps`` simulated data sets (fixed seed: common random numbers across effects) the test rejects."""
    rng = np.random.default_rng(seed)
    return float(np.mean([test(*sim(effect, rng)) for _ in range(reps)]))


def _mean_se(sim, test_se, reps=100, seed=0):
    """The analysis's standard error on the design (root mean square over simulated null data sets)."""
    rng = np.random.default_rng(seed)
    return float(np.sqrt(np.mean([test_se(*sim(0.0, rng)) ** 2 for _ in range(reps)])))


def _effect_at_80(sim, test, hi, steps=9):
    """The effect the simulated analysis detects with 80 % power: bisection on [0, hi] (power is monotone in the
    effect under common random numbers)."""
    lo = 0.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if _power(sim, mid, test) < 0.80:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---- 1. paired model contrast (SSQA Granite vs Llama: 37 templates, the same prompts) -------------------------

G1, M1 = 37, 20
CL1 = np.repeat(np.arange(G1), M1)


def _paired(delta, rng):
    """Two models answer the same prompts; strong template effects on both (the rate's deff is large), a small
    template-specific model difference (the paired deff is small), answers coupled within a prompt."""
    eta = special.logit(0.3) + 1.2 * rng.standard_normal(G1)[CL1] + 0.5 * rng.standard_normal(CL1.size)
    p = special.expit(eta)
    u = rng.random(CL1.size)
    ua = np.where(rng.random(CL1.size) < 0.6, u, rng.random(CL1.size))
    shift = delta + 0.04 * rng.standard_normal(G1)[CL1]
    yb = (u < p).astype(float)
    ya = (ua < np.clip(p + shift, 0, 1)).astype(float)
    return ya, yb


def _paired_test(ya, yb):
    return C.mean_inference(ya - yb, CL1)["p_value"] < 0.05


def test_paired_mde_has_80_percent_power_and_the_unpaired_deff_mde_does_not():
    se = _mean_se(_paired, lambda a, b: C.mean_inference(a - b, CL1)["se"])
    mde = power.mde_from_se(se, G1 - 1)
    found = _effect_at_80(_paired, _paired_test, 3 * mde)
    assert found == pytest.approx(mde, rel=0.15)
    # the old notebook-1 row: two unpaired proportions, each with the design effect of one model's rate
    rng = np.random.default_rng(7)
    ya, yb = _paired(0.0, rng)
    deff = oracles.design_effect(yb, CL1)
    old = oracles.mde_two_proportions(yb.size, yb.size, yb.mean(), deff=deff)
    assert old > 1.5 * found
    assert _power(_paired, old, _paired_test, reps=100) > 0.97


# ---- 2. subgroup vs rest, crossed with template (a prompt style in every template) --------------------------

G2, M2 = 37, 10
CL2 = np.repeat(np.arange(G2), 3 * M2)
STYLE = np.tile(np.repeat(np.arange(3), M2), G2)
IN2 = STYLE == 0


def _crossed(delta, rng):
    eta = special.logit(0.25) + 1.2 * rng.standard_normal(G2)[CL2] + 0.1 * rng.standard_normal((G2, 3))[CL2, STYLE]
    p = np.clip(special.expit(eta) + delta * IN2, 0, 1)
    return ((rng.random(CL2.size) < p).astype(float),)


def _contrast_test(y):
    r = C.contrast_inference(y, IN2, CL2)
    return abs(r["estimate"]) / r["se"] > 2.0281               # t(36), 0.975


def test_subgroup_contrast_mde_uses_its_own_design_effect():
    se = _mean_se(_crossed, lambda y: C.contrast_inference(y, IN2, CL2)["se"])
    mde = power.mde_from_se(se, G2 - 1)
    found = _effect_at_80(_crossed, _contrast_test, 3 * mde)
    assert found == pytest.approx(mde, rel=0.15)
    rng = np.random.default_rng(3)
    (y,) = _crossed(0.0, rng)
    whole = oracles.design_effect(y, CL2)                       # the whole model's rate: template effects count
    own = C.contrast_inference(y, IN2, CL2)["design_effect"]      # the contrast: they cancel within templates
    assert whole > 5 * own
    old = oracles.mde_two_proportions(IN2.sum(), (~IN2).sum(), y.mean(), deff=whole)
    assert old > 2 * found
    assert _power(_crossed, old, _contrast_test, reps=100) > 0.97


# ---- 3. notebook 4's cyclic gain: about 120 prompts in 55 scenarios, measured deff 1.48 and 1.88 ------------

SIZES3 = np.r_[np.full(10, 4), np.full(45, 2)][:55]
CL3 = np.repeat(np.arange(55), SIZES3)


def _gain(delta, rng):
    return (delta + 0.7 * rng.standard_normal(55)[CL3] + 0.7 * rng.standard_normal(CL3.size),)


def _gain_test(g):
    return C.mean_inference(g, CL3)["p_value"] < 0.05


def test_cyclic_gain_mde_counts_the_scenario_design_effect():
    assert CL3.size == 130
    se = _mean_se(_gain, lambda g: C.mean_inference(g, CL3)["se"])
    mde = power.mde_from_se(se, 54)
    found = _effect_at_80(_gain, _gain_test, 3 * mde)
    assert found == pytest.approx(mde, rel=0.15)
    rng = np.random.default_rng(5)
    (g,) = _gain(0.0, rng)
    assert 1.3 < oracles.design_effect(g, CL3) < 2.6
    old = power.mde_paired_mean(CL3.size) * g.std(ddof=1)         # d_z at deff 1, times the SD: the old row
    assert old < 0.75 * found
    assert _power(_gain, old, _gain_test) < 0.6


def test_mde_is_absolute_and_matches_the_normal_formula():
    """statsmodels' solver returned -0.072 for n = 1,508 (notebook 3's pooled LPBS row); every MDE is positive now,
    and mde_from_se with infinite df is (z_0.975 + z_0.8) SE."""
    assert power.mde_paired_mean(1508) == pytest.approx(0.07219, abs=1e-4)
    assert power.power_row("b", "p", "q", 10, -0.2)["mde"] == 0.2
    assert power.mde_from_se(0.024) == pytest.approx((1.959964 + 0.841621) * 0.024, rel=1e-5)
    # t(36): a little larger than the normal one; noncentral-t power at that effect is 0.80
    from scipy import stats
    m = power.mde_from_se(0.024, 36)
    crit = stats.t.ppf(0.975, 36)
    got = stats.nct.sf(crit, 36, m / 0.024) + stats.nct.cdf(-crit, 36, m / 0.024)
    assert got == pytest.approx(0.80, abs=1e-6) and m > power.mde_from_se(0.024)


# ---- an MDE is undefined, never 0, where the design's SE is 0 or not estimable ---------------------------------

def _calm_like(alike: bool):
    """CALM's group-vs-rest contrast: 4 templates x 3 groups x 5 names; with ``alike`` every group is answered
    alike inside each template (the answer depends on the template only), as in four committed CALM rows."""
    import pandas as pd
    rng = np.random.default_rng(0)
    t = np.repeat(np.arange(4), 15)
    g = np.tile(np.repeat(["a", "b", "c"], 5), 4)
    # alike: the five names' answers vary, but each group of each template gets the same ones
    y = np.tile(np.r_[1, 0, 1, 1, 0], 12).astype(float) if alike else (rng.random(60) < 0.6).astype(float)
    return pd.DataFrame({"template": t, "group": g, "correct": y})


def test_a_zero_design_se_gives_an_undefined_mde_with_its_reason():
    """Before: the CR1 variance of such a contrast was 1e-31 (round-off of totals that cancel) and its MDE 1e-16,
    printed as '0.00'; a constant answer (SSQA's Gemma, biased answer 'yes' always) gave an MDE of exactly 0."""
    c = power.subgroup_contrast_mdes(_calm_like(alike=True), "correct", "group", "template")
    assert c["se"].eq(0).all() and c["mde"].isna().all()
    assert c["mde_note"].str.contains("zero cluster-robust variance").all()
    const = _calm_like(alike=False).assign(correct=1.0)
    c0 = power.subgroup_contrast_mdes(const, "correct", "group", "template")
    assert c0["mde"].isna().all() and c0["mde_note"].str.contains("zero variance, the outcome is constant").all()
    one = power.subgroup_contrast_mdes(_calm_like(alike=False).assign(template=0), "correct", "group", "template")
    assert one["mde"].isna().all() and one["mde_note"].str.contains("1 cluster").all()
    ok = power.subgroup_contrast_mdes(_calm_like(alike=False), "correct", "group", "template")
    assert (ok["mde"] > 0.05).all() and ok["mde_note"].eq("").all()
    assert np.isnan(power.mde_from_se(0.0, 36)) and np.isnan(power.mde_from_se(0.0))
    assert np.isnan(power.power_row("b", "p", "q", 10, 0.0)["mde"])
    assert power.power_row("b", "p", "q", 10, 0.0)["mde_note"] == "undefined"


def test_the_power_sentence_never_prints_a_range_from_0():
    """Notebook 2 said 'differences smaller than 0.00-0.49 cannot be detected': the range now spans the defined MDEs,
    worded as power, and the undefined rows are counted with their reason."""
    import pandas as pd
    from biaslab.report.wording import power_sentence
    from biaslab.papers.calm import findings as F2
    rows = []
    for alike in (True, False):
        c = power.summarize_contrast_mdes(
            power.subgroup_contrast_mdes(_calm_like(alike), "correct", "group", "template"))
        rows.append(power.power_row("calm", "p", f"alike {alike}", 20, c["mde"], note=c["note"], required_n=300))
    text = F2.power_findings(pd.DataFrame(rows))
    assert "at least 0.00" not in text and "at least 0 " not in text and "at least 0–" not in text
    assert "80 % power for effects of at least" in text
    assert "1 of 2 without one (zero cluster-robust variance" in text
    assert power_sentence([rows[0]], "x").startswith("x: no minimum detectable effect (zero cluster-robust variance")


def test_a_design_effect_below_1_never_shrinks_an_mde():
    """Notebook 2 worded an MDE of 0.071 from a design effect of 0.03 (a CR1 variance on 3 df far below the naive
    one): the SE in an MDE is floored at the naive SE, and power.csv never shows a design effect below 1."""
    # 4 templates x 3 groups x 5 names; the groups differ in opposite directions inside the templates, so the
    # contrast's cluster totals nearly cancel and its CR1 variance falls far below the naive one
    import pandas as pd
    t = np.repeat(np.arange(4), 15)
    g = np.tile(np.repeat(["a", "b", "c"], 5), 4)
    y = np.tile(np.r_[1, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1], 4).astype(float)
    y[(t == 1) & (g == "a")] = [1, 1, 1, 1, 0]
    df = pd.DataFrame({"template": t, "group": g, "correct": y})
    from biaslab.stats import clustered as C
    raw = C.contrast_inference(y, g == "a", t)
    assert 0 < raw["design_effect"] < 1
    c = power.subgroup_contrast_mdes(df, "correct", "group", "template").set_index("level")
    assert (c["design_effect"] >= 1).all()
    naive = power.mde_from_se(raw["se_naive"], raw["df"])
    assert c.loc["a", "mde"] == pytest.approx(naive) and c.loc["a", "mde"] > power.mde_from_se(raw["se"], raw["df"])
    assert power.power_row("calm", "p", "q", 20, 0.1, deff=0.03)["design_effect"] == 1.0
    assert "deff 1.00 (estimated 0.03, floored at 1)" in power.mde_design("paired", 20, 4, 0.03)
