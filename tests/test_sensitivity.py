"""Sensitivity decisions (same family rule as the primary) and the tipping point, on hand-worked examples."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab import plan as P
from biaslab.stats import reanalysis as S
from helpers import COMMITTED_PLAN, V4_PLAN


def rows(*items):
    return pd.DataFrame([dict(zip(["claim", "family", "instance", "analysis", "p_value"], r)) for r in items])


def test_a_sensitivity_row_is_holm_adjusted_with_the_family_primaries():
    t = rows(("c", "f", "a", "primary", 0.01), ("c", "f", "b", "primary", 0.04),
             ("c", "f", "a", "invalid as biased", 0.03), ("c", "g", "a", "primary", 0.2))
    d = S.decide(t)
    # family f, primary: Holm of (0.01, 0.04) = (0.02, 0.04): both distinguishable
    assert list(d["p_adjusted"][:2]) == pytest.approx([0.02, 0.04])
    # the sensitivity row replaces a's p: Holm of (0.03, 0.04) -> a: 0.06, not distinguishable, a flip
    assert d.loc[2, "p_adjusted"] == pytest.approx(0.06)
    assert d.loc[2, "verdict"] == "not distinguishable" and not d.loc[2, "verdict_survives"]
    assert d.loc[2, "primary_verdict"] == "distinguishable"
    assert list(d.columns[:len(S.COLUMNS)]) == S.COLUMNS
    # with a budget (family f one of 2 families of a notebook with share 0.2: scale 2 / 0.2 = 10), carried on the rows
    assert S.decide(t.assign(n_families=2, share=0.2))["p_adjusted"][0] == pytest.approx(0.2)
    line = S.render(d)
    assert "changes under: invalid as biased → not distinguishable" in line and line.count("\n") == 2


def test_rows_without_a_primary_are_refused():
    with pytest.raises(ValueError, match="no primary row"):
        S.decide(rows(("c", "f", "a", "entropy 0.9", 0.01)))


def test_tipping_point_on_a_hand_example():
    # 20 pairs: 4 prefer the stereotype, 16 do not, 5 of the 16 are invalid answers counted as "not". Exact
    # binomial against 0.5: k = 4 -> p = 2 P(X <= 4) = 0.0118; k = 5 -> 0.0414; k = 6 -> 0.1153. Counting 2 invalid
    # answers the other way (k = 6) is the first to change "distinguishable".
    def verdict(j):
        return "distinguishable" if stats.binomtest(4 + j, 20).pvalue < 0.05 else "not distinguishable"
    assert [round(stats.binomtest(k, 20).pvalue, 4) for k in (4, 5, 6)] == [0.0118, 0.0414, 0.1153]
    assert S.tipping_point(verdict, 5) == 2
    assert S.tipping_point(verdict, 1) is None          # one invalid answer cannot change it
    assert S.tipping_point(verdict, 0) is None


def test_granite_invalid_answers_reproduce_the_reported_flip_on_the_committed_outputs():
    # the re-computation: counting Granite's 456 "other" SSQA answers as biased moves Granite - Llama from
    # p 0.008 (then; 0.0015 in the committed run) to -0.045 [-0.092, 0.002], p 0.059
    from biaslab import paths
    from biaslab.papers import compare
    from biaslab.plan import sensitivity as SA
    root = paths.OUTPUTS_DIR
    tables = root / "05_compare" / "tables"
    name = "ssqa_deviation_rate · granite-3.0-8b - llama-3.1-8b"
    # under plan v5 (the committed outputs') the primary has power 0.78 < 0.8 at its planned level: descriptive, never
    # decided, so no sensitivity analysis is run for it (they are decided by the same graph and power rule)
    pairs = pd.read_csv(tables / "paired_differences.csv")
    t = SA.compare_sensitivity(root, pairs, plan=P.load(COMMITTED_PLAN))
    inst = t[t["instance"] == name]
    assert list(inst["analysis"]) == ["primary"] and inst["verdict"].iloc[0].startswith("descriptive (power 0.78")
    # not-tested and descriptive primaries keep their rows and get no analysis
    assert (t.loc[~t["primary_verdict"].isin(["distinguishable", "not distinguishable"]), "analysis"]
            == "primary").all()
    # the numbers, re-decided under plan v4 (where every claimed pair is decided)
    v4 = P.load(V4_PLAN)
    pairs = compare.decide_pairs(pairs, pd.read_csv(tables / "responder_status.csv"), plan=v4)
    t = SA.compare_sensitivity(root, pairs, plan=v4)
    inst = t[t["instance"] == name].set_index("analysis")
    flip = inst.loc["invalid answers counted as deviating"]
    assert (round(flip["estimate"], 3), round(flip["ci_low"], 3), round(flip["ci_high"], 3)) == (-0.045, -0.092, 0.002)
    assert round(flip["p_value"], 3) == 0.059
    # under plan v3's/v4's share the primary itself is not distinguishable (adjusted p 0.0548), so this analysis
    # agrees with it; under v2 (share 0.2, adjusted p 0.0438) it flipped the verdict
    assert flip["primary_verdict"] == "not distinguishable" and flip["verdict_survives"]
    assert "456 (granite-3.0-8b)" in flip["description"]
    tip = inst.loc["invalid answers: tipping point"]
    # no count of invalid answers changes a verdict that is already "not distinguishable"
    assert tip["description"].startswith("all 456 invalid answers of granite-3.0-8b") and "leave the verdict" in \
        tip["description"] and tip["verdict"] == "not distinguishable" and tip["p_adjusted"] >= 0.05
    # not-tested primaries keep their rows and get no analysis
    assert (t.loc[t["primary_verdict"].str.startswith("not tested"), "analysis"] == "primary").all()


def test_the_tipping_point_is_found_where_the_primary_is_distinguishable(tmp_path):
    """Under v2's share for notebook 5 (0.2) the Granite - Llama primary is distinguishable: some count k of Granite's
    456 invalid answers, 0 < k < 456, counted as deviating is the first to flip it."""
    from biaslab import paths
    from biaslab.plan import sensitivity as SA
    f = tmp_path / "plan.yaml"
    f.write_text(P.DEFAULT.read_text().replace("05_compare: 0.16, 07_mbbq: 0.2", "05_compare: 0.2, 07_mbbq: 0.16"))
    from biaslab.papers import compare
    tables = paths.OUTPUTS_DIR / "05_compare" / "tables"
    pairs = compare.decide_pairs(pd.read_csv(tables / "paired_differences.csv"),
                                 pd.read_csv(tables / "responder_status.csv"), plan=P.load(f))
    t = SA.compare_sensitivity(paths.OUTPUTS_DIR, pairs, plan=P.load(f))
    inst = t[t["instance"] == "ssqa_deviation_rate · granite-3.0-8b - llama-3.1-8b"].set_index("analysis")
    assert inst.loc["primary", "verdict"] == "distinguishable"
    assert not inst.loc["invalid answers counted as deviating", "verdict_survives"]
    tip = inst.loc["invalid answers: tipping point"]
    k = int(tip["description"].split(" of ")[0])
    assert 0 < k < 456 and tip["verdict"] == "not distinguishable" and tip["p_adjusted"] >= 0.05


def test_the_plan_lists_the_analyses_and_unknown_ids_are_refused(tmp_path):
    from biaslab import plan as P
    from biaslab.plan import sensitivity as SA
    listed = {c.id: set(c.sensitivity) for c in P.load().claims if c.sensitivity}
    assert listed["dm-ssqa"] == listed["dm-other"] and listed["dm-ssqa"] | listed["crows-en-share"] == set(SA.ANALYSES)
    assert listed["lpbs-mean"] == listed["lpbs-other"] == listed["stereotype-share"] == listed["crows-en-share"] == {
        "sampling-weights"}
    f = tmp_path / "plan.yaml"
    f.write_text(P.DEFAULT.read_text().replace("[degenerate-threshold]", "[degenerate-threshold, coin-flip]"))
    with pytest.raises(ValueError, match="claim 'bbq-ambiguous': unknown sensitivity analysis \\['coin-flip'\\]"):
        SA._planned(P.load(f), "bbq-ambiguous", "05_compare")


def test_notebook1_sensitivity_follows_the_factor_plan_fields():
    # the analyses a benchmark's FactorPlan declares, not its name: the agentic plan reads probabilities (no
    # degenerate-threshold rows) and redefines its outcome at each entropy cut; SSQA's invalid answer "other" gets
    # the invalid-as-deviating rows. Each alternative is recomputed here by stats.paired directly.
    from dataclasses import replace

    from biaslab.plan import sensitivity as SA
    from biaslab.benchmarks import agentic
    from biaslab.stats import paired
    rng = np.random.default_rng(3)
    n = 2 * 40 * 4
    df = pd.DataFrame({"model": np.repeat(["a", "b"], n // 2),
                       "scenario_id": np.tile(np.repeat(np.arange(40), 4), 2),
                       "class_type": np.tile(["x", "y"], n // 2), "question_type": np.tile(["p", "p", "q", "q"], n // 4),
                       "entropy": rng.uniform(0.8, 1.0, n), "answer": rng.choice(["1", "2", "other"], n)})
    df["low_entropy"] = (df["entropy"] < agentic.LOW_ENTROPY).astype(int)
    fplan = agentic.FACTOR_PLAN
    pst = pd.DataFrame([{"claim": "dm-difference", "family": "f", "model_a": "a", "model_b": "b", "verdict":
                         "not distinguishable", "metric_difference": 0.01, "ci_low": -0.1, "ci_high": 0.1,
                         "p_value": 0.5, "n_families": 1, "share": 1.0}])
    plan = P.load(V4_PLAN)      # its claim dm-difference, which the pair above is an instance of
    t = SA.multifactor_sensitivity(pst, df, "agentic", fplan, "scenario_id", plan=plan).set_index("analysis")
    assert list(t.index) == ["primary", "entropy cut 0.90", "entropy cut 0.98"]
    for cut in agentic.LOW_ENTROPY_ALTERNATIVES:
        x = paired.paired_subgroup_test(df.assign(low_entropy=(df["entropy"] < cut).astype(int)), "low_entropy",
                                        fplan.ecdf_factors, "a", "b", "scenario_id")
        assert t.loc[f"entropy cut {cut:.2f}", "estimate"] == pytest.approx(x["metric_difference"])
    ssqa_like = replace(fplan, outcome_variants={}, reads="answer", invalid_answers=("other",))
    t = SA.multifactor_sensitivity(pst, df, "x", ssqa_like, "scenario_id", plan=plan)
    assert {"degenerate threshold 0.90", "invalid answers counted as deviating"} <= set(t["analysis"])
    bad = df["answer"] == "other"
    x = paired.paired_subgroup_test(df.assign(low_entropy=df["low_entropy"].where(~bad, 1)), "low_entropy",
                                    fplan.ecdf_factors, "a", "b", "scenario_id")
    got = t.set_index("analysis").loc["invalid answers counted as deviating", "estimate"]
    assert got == pytest.approx(x["metric_difference"])


def test_sensitivity_rows_follow_the_plans_graph_and_power_rule():
    # notebook 1's graph (dm-ssqa weight 1, then all to dm-other), family granite - llama: one of 2 families at share
    # 0.16, so the family's level is 0.05 * 0.16 / 2 = 0.004 and p_adjusted = p_graph * 2 / 0.16.
    # Primaries: ssqa p 0.001 is rejected at 0.004 and passes 0.004 to dm-other's two instances in the graph (0.002
    # each; winogender is descriptive, out of the graph although its table kept a p); bbq p 0.0025 > 0.002 is not
    # rejected (its test is powered from 0.001); calm needs 0.003 for power, so at 0.002 it is not decided.
    plan = P.load()
    fam = "01_multifactor · granite-3.0-8b · llama-3.1-8b"
    desc = "descriptive (power 0.30 for SESOI 0.1 at level 0.001)"
    t = pd.DataFrame([
        ("dm-ssqa", "ssqa", "primary", 0.001, 0.001, "distinguishable"),
        ("dm-other", "bbq", "primary", 0.0025, 0.001, "not distinguishable"),
        ("dm-other", "calm", "primary", 0.0001, 0.003, "not decided (power 0.62 at its tested level 0.002)"),
        ("dm-other", "winogender", "primary", 1e-6, 0.01, desc),
        ("dm-ssqa", "ssqa", "invalid as deviating", 0.01, 0.001, ""),        # ssqa not rejected: a flip
        ("dm-other", "bbq", "entropy cut", 0.0018, 0.001, ""),              # <= 0.002: rejected, a flip
        ("dm-other", "calm", "entropy cut", 1e-5, 0.003, ""),                # still below its power level
        ("dm-other", "winogender", "entropy cut", 1e-9, 0.01, ""),          # descriptive whatever its p
        ("dm-other", "winogender", "degenerate threshold 0.90", np.nan, 0.01, ""),      # or without one
        ("dm-other", "bbq", "degenerate threshold 0.90", np.nan, 0.001, ""),    # in the graph, left untested: a flip
    ], columns=["claim", "instance", "analysis", "p_value", "level_for_power", "table_verdict"]).assign(
        family=fam, n_families=2, share=0.16)
    d = S.decide(t, plan=plan)
    assert list(d["verdict"][:4]) == ["distinguishable", "not distinguishable", t.at[2, "table_verdict"], desc]
    assert d.at[0, "p_adjusted"] == pytest.approx(0.001 * 2 / 0.16)
    assert d.at[4, "p_adjusted"] == pytest.approx(0.01 * 2 / 0.16)       # 0.125 > 0.05
    assert d.at[4, "verdict"] == "not distinguishable" and not d.at[4, "verdict_survives"]
    assert d.at[5, "verdict"] == "distinguishable" and not d.at[5, "verdict_survives"]
    assert d.at[6, "verdict"].startswith("not decided (") and d.at[6, "verdict_survives"]
    assert d.at[7, "verdict"] == desc and d.at[7, "verdict_survives"] and np.isnan(d.at[7, "p_adjusted"])
    assert d.at[8, "verdict"] == desc and d.at[8, "verdict_survives"]
    assert d.at[9, "verdict"] == "not tested" and not d.at[9, "verdict_survives"]
    # Holm at 0.004 over the same four p's (no plan, no power rule) rejects them all, calm included
    assert (S.decide(t.drop(columns=["table_verdict", "level_for_power"]))["verdict"][:4] == "distinguishable").all()
    assert S.render(d).count("\n") == 3 and "`dm-other` winogender: " + desc + "; no sensitivity analysis (nothing decided)" in S.render(d)
    # the other family: ssqa not rejected, so dm-other is never reached whatever its p (the table's reason kept)
    other = "01_multifactor · smollm2-135m-instruct · gemma-3-270m"
    reach = "not reached (α not propagated: `dm-ssqa` was not rejected)"
    u = pd.DataFrame([("dm-ssqa", "ssqa", "primary", 0.5, 0.001, "not distinguishable"),
                      ("dm-other", "bbq", "primary", 1e-5, 0.001, reach),
                      ("dm-other", "bbq", "entropy cut", 1e-7, 0.001, "")],
                     columns=t.columns[:6]).assign(family=other, n_families=2, share=0.16)
    e = S.decide(u, plan=plan)
    assert e.at[1, "verdict"] == reach and e.at[2, "verdict"].startswith("not reached (") and e.at[2, "verdict_survives"]
    # an alternative that lets ssqa be rejected reaches bbq: the tipping rule sees the joint graph (S.rule)
    verdict = S.rule(u.iloc[:2], {**u.iloc[1].to_dict()}, plan=plan)
    assert verdict(1e-5).startswith("not reached (")
    assert S.rule(u.iloc[:2], u.iloc[0].to_dict(), plan=plan)(0.001) == "distinguishable"
