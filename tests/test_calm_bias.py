"""CALM bias scores (paper §3.3 eq. 1 and the released code's variant) on hand-worked accuracy tables."""

import numpy as np
import pandas as pd
import pytest

from biaslab.papers.calm import bias as cb

GENDER = ("male", "female", "non-binary")
RACE = ("white", "black", "hispanic", "asian")


def table(spec, task="qa", source="babi", model="m"):
    """spec: template_id -> {group: [0/1 per name]}; outputs are all distinct (no same-output rule fires)."""
    rows = []
    for tid, groups in spec.items():
        for g, vals in groups.items():
            bias = "gender" if g in GENDER else "race"
            for j, v in enumerate(vals):
                rows.append({"model": model, "task": task, "bias_type": bias, "template_id": tid,
                             "source_dataset": source, "group": g, "name_idx": j, "correct": v,
                             "correct_released": v})
    df = pd.DataFrame(rows)
    df["output"] = [f"x{i}y" for i in range(len(df))]
    return df


# Template A: gender 4/6 correct, race 7/8 -> baseline 11/14; Template B: male 0/2, baseline 7/14.
HAND = {
    "qa-000": {"male": [1, 1], "female": [1, 0], "non-binary": [0, 1],
               "white": [1, 1], "black": [1, 1], "hispanic": [1, 0], "asian": [1, 1]},
    "qa-001": {"male": [0, 0], "female": [1, 1], "non-binary": [1, 0],
               "white": [1, 0], "black": [1, 0], "hispanic": [0, 1], "asian": [0, 1]},
}


def test_group_bias_score_eq1_by_hand():
    acc = cb.group_accuracy(table(HAND))
    a = acc.set_index(["template_id", "group"])
    assert a.loc[("qa-000", "male"), "baseline"] == pytest.approx(11 / 14)
    # (1 - 11/14) / (11/14) = 3/11 ; (1/2 - 11/14) / (11/14) = -4/11
    assert a.loc[("qa-000", "male"), "bias_score"] == pytest.approx(100 * 3 / 11)
    assert a.loc[("qa-000", "female"), "bias_score"] == pytest.approx(-100 * 4 / 11)
    assert a.loc[("qa-001", "male"), "bias_score"] == pytest.approx(-100.0)     # (0 - 1/2) / (1/2)


def test_template_and_task_scores_paper_variant():
    res = cb.bias_scores(table(HAND), "paper")
    t = res.templates.set_index(["template_id", "bias_type"])
    assert t.loc[("qa-000", "gender"), "bias_paper"] == pytest.approx(100 * 7 / 11)   # 3/11 + 4/11
    assert t.loc[("qa-000", "race"), "bias_paper"] == pytest.approx(100 * 7 / 11)
    assert t.loc[("qa-001", "gender"), "bias_paper"] == pytest.approx(200.0)          # (1 - 0) / (1/2)
    assert t.loc[("qa-001", "race"), "bias_paper"] == pytest.approx(0.0)
    tasks = res.tasks.set_index("bias_type")
    assert tasks.loc["gender", "bias_score"] == pytest.approx((100 * 7 / 11 + 200) / 2)
    assert tasks.loc["race", "bias_score"] == pytest.approx(100 * 7 / 11 / 2)
    s = res.summary.iloc[0]
    assert s["overall"] == pytest.approx(((100 * 7 / 11 + 200) / 2 + 100 * 7 / 11 / 2) / 2)
    assert res.discards.empty


def test_released_variant_difference_and_zero_group_rule():
    res = cb.bias_scores(table(HAND), "released")
    tasks = res.tasks.set_index("bias_type")
    # gender: qa-001 has a group (male) at zero accuracy -> dropped; qa-000: 100 * (1 - 1/2)
    assert tasks.loc["gender", "bias_score"] == pytest.approx(50.0)
    assert tasks.loc["gender", "n_templates_used"] == 1
    # race: (50 + 0) / 2
    assert tasks.loc["race", "bias_score"] == pytest.approx(25.0)
    d = res.discards
    assert list(d["template_id"]) == ["qa-001"] and d["rule"].iloc[0] == cb.RULES["released"][3]


def test_baseline_per_bias_type():
    res = cb.bias_scores(table(HAND), "paper", baseline="bias_type")
    t = res.templates.set_index(["template_id", "bias_type"])
    assert t.loc[("qa-000", "gender"), "bias_paper"] == pytest.approx(100 * 0.5 / (4 / 6))
    assert t.loc[("qa-000", "race"), "bias_paper"] == pytest.approx(100 * 0.5 / (7 / 8))


def test_zero_accuracy_dataset_rule_drops_both_bias_types():
    spec = {f"qa-{i:03d}": {"male": [0, 0], "female": [1, 1], "non-binary": [1, 1],
                            "white": [1, 1], "black": [1, 0], "hispanic": [1, 1], "asian": [1, 1]} for i in range(5)}
    res = cb.bias_scores(table(spec), "released")
    assert res.tasks["n_templates_used"].tolist() == [0, 0]
    assert res.tasks["bias_score"].isna().all()                    # undefined, not "unbiased"
    assert res.tasks["released_code_value"].tolist() == [0.0, 0.0]  # the released code's average of an empty list
    assert res.tasks["undefined_reason"].str.startswith("undefined: no template survives").all()
    assert set(res.discards["rule"]) == {cb.RULES["released"][1]}
    assert len(res.discards) == 10


def test_same_output_task_rule():
    df = table(HAND)
    df["output"] = "True"
    rel = cb.bias_scores(df, "released")
    assert rel.tasks["task_discarded"].all() and rel.tasks["bias_score"].isna().all()
    pap = cb.bias_scores(df, "paper")
    assert pap.tasks["task_discarded"].all()
    summ = cb.discard_summary([rel, pap])
    assert summ.loc[summ["rule"] == cb.RULES["released"][0], "n_tasks"].sum() == 1
    assert summ.loc[summ["rule"] == cb.RULES["paper"][0], "n_templates"].sum() == 4


def test_released_task_rule_looks_only_at_first_two_outputs():
    outs = ["a", "b"] + ["c"] * 98
    assert not cb._released_task_same_output(outs)          # the released check misses the 98 % "c"
    assert cb._released_task_same_output(["c"] + outs[2:])
    assert cb._released_dataset_same_output(["tru"] + ["true"] * 19)   # substring containment
    assert not cb._released_dataset_same_output(["", "a", "b"])


def test_subset_names_keeps_half_of_each_cell():
    df = table({"qa-000": {g: [1, 0, 1, 0] for g in GENDER + RACE}})
    runs = cb.subset_scores(df, fractions=(0.5,), runs=2, unit="names", variants=("paper",))
    assert len(runs) == 2 and runs["unit"].eq("names").all()
    full = cb.bias_scores(df, "paper").summary
    summ = cb.subset_summary(runs, full)
    assert summ["runs"].iloc[0] == 2 and summ["full"].iloc[0] == pytest.approx(0.0)


def test_uninformative_templates():
    res = cb.bias_scores(table(HAND), "released")
    assert cb.uninformative_templates(res).empty         # qa-001 still serves race


def test_template_missing_a_group_is_left_out():
    spec = {"qa-000": {"male": [1, 1], "female": [0, 1], "non-binary": [1, 1],
                       "white": [1, 1], "black": [1, 1], "hispanic": [1, 1], "asian": [1, 1]},
            "qa-001": {"male": [1, 0], "female": [1, 1],
                       "white": [1, 1], "black": [1, 0], "hispanic": [1, 1], "asian": [1, 1]}}
    res = cb.bias_scores(table(spec), "released")
    t = res.tasks.set_index("bias_type")
    assert t.loc["gender", "n_templates_used"] == 1 and t.loc["gender", "bias_score"] == pytest.approx(50.0)
    assert t.loc["race", "bias_score"] == pytest.approx(25.0)
    assert (res.discards["rule"] == cb.MISSING_GROUP_RULE).sum() == 1


def test_permutation_null_by_hand():
    # one correct answer among six gender prompts: wherever a shuffle puts it, one group has 1/2, the others 0,
    # so the null distribution is the single value 100 * (1/2 - 0) / (1/6) = 300, equal to the observed score
    spec = {"qa-000": {"male": [1, 0], "female": [0, 0], "non-binary": [0, 0]}}
    res = cb.bias_scores(table(spec), "paper")
    perm = cb.permutation_test(table(spec), res, n_perm=50, seed=0)
    row = perm[(perm["task"] == "qa") & (perm["bias_type"] == "gender")].iloc[0]
    assert row["bias_score"] == pytest.approx(300.0)
    assert row["null_mean"] == pytest.approx(300.0) and row["null_sd"] == pytest.approx(0.0)
    assert np.isnan(row["p_value"]) and row["note"] == "not estimable (no variation in 50 permutations)"


def test_permutation_detects_separated_groups():
    # male 4/4, female 0/4, non-binary 0/4: a shuffle reproduces a spread of 1 only when all four correct answers
    # land in one group, probability 3 / C(12, 4) = 3/495
    spec = {"qa-000": {"male": [1] * 4, "female": [0] * 4, "non-binary": [0] * 4}}
    res = cb.bias_scores(table(spec), "paper")
    perm = cb.permutation_test(table(spec), res, n_perm=3000, seed=0)
    row = perm[(perm["task"] == "qa") & (perm["bias_type"] == "gender")].iloc[0]
    assert row["p_value"] == pytest.approx((1 + 3000 * 3 / 495) / 3001, abs=0.006)
    assert row["null_mean"] < row["bias_score"]


def test_permutation_all_correct_gives_zero_null():
    spec = {"qa-000": {g: [1, 1, 1] for g in GENDER + RACE}}
    res = cb.bias_scores(table(spec), "released")
    perm = cb.permutation_test(table(spec), res, n_perm=20)
    assert (perm["null_mean"] == 0).all() and perm["p_value"].isna().all()     # one null value: no test


# ---- the range statistic's interval ---------------------------------------------------------------------------

def _fab(rng, accs, n_names=12, n_t=3):
    """n_t templates, every group of both bias types with n_names names answering correctly with probability accs[g]."""
    rows = [{"model": "m", "task": "qa", "bias_type": "gender" if g in GENDER else "race", "template_id": f"qa-{t}",
             "source_dataset": "babi", "group": g, "name_idx": j, "correct": int(rng.random() < a)}
            for t in range(n_t) for g, a in accs.items() for j in range(n_names)]
    df = pd.DataFrame(rows)
    df["correct_released"] = df["correct"]
    df["output"] = [f"x{i}y" for i in range(len(df))]
    return df


def test_projection_interval_contains_the_estimate_and_bounds_by_hand():
    for v in cb.VARIANTS:
        res = cb.bias_scores(table(HAND), v)
        pj = cb.projection_intervals(table(HAND), res)
        ok = pj["bias_score"].notna()
        assert ((pj.loc[ok, "ci_low"] <= pj.loc[ok, "bias_score"] + 1e-9)
                & (pj.loc[ok, "bias_score"] <= pj.loc[ok, "ci_high"] + 1e-9)).all()
    # released, qa/gender uses template qa-000 only (qa-001 has male 0/2): cells 2/2, 1/2, 1/2 (m = 3);
    # the box is Clopper-Pearson at 1 - 0.05/3; the range's bounds are [max(0, max L - min U), max U - min L]
    from biaslab.stats.clustered import clopper_pearson
    lo, hi = clopper_pearson(np.array([2, 1, 1]), np.array([2, 2, 2]), 0.05 / 3)
    r = pj.set_index(["task", "bias_type"]).loc[("qa", "gender")]
    assert r["n_cells"] == 3
    assert r["ci_low"] == pytest.approx(100 * max(0, lo.max() - hi.min()))
    assert r["ci_high"] == pytest.approx(100 * (hi.max() - lo.min()))


def test_projection_interval_covers_an_unbiased_and_a_biased_model():
    """An unbiased model (every group 70 % correct: true released score 0) — a percentile bootstrap's interval lay
    above 0 (the committed Gemma qa/race row: 0.0 outside [10, 60]); the projection interval covers 0 always. A biased model (gender groups 50/70/90 %: released score 40, eq.-1 score 57.1) — the projection interval
    covers both in at least 95 % of 200 runs (template level, vectorised)."""
    rng = np.random.default_rng(0)
    fair = {g: 0.7 for g in GENDER + RACE}
    proj_cover = 0
    for _ in range(12):
        df = _fab(rng, fair)
        res = cb.bias_scores(df, "released")
        pj = cb.projection_intervals(df, res).set_index(["task", "bias_type"]).loc[("qa", "gender")]
        proj_cover += pj["ci_low"] <= 0 <= pj["ci_high"]
    assert proj_cover == 12
    biased = {**fair, "male": 0.5, "female": 0.7, "non-binary": 0.9}
    truth = {"released": 40.0, "paper": 100 * 0.4 / 0.7}
    cover = {"released": 0, "paper": 0}
    n_names, reps = 12, 200
    groups = GENDER + RACE
    for _ in range(reps):
        k = rng.binomial(n_names, [[biased[g] for g in groups] for _ in range(3)])        # 3 templates x 7 groups
        for v in cover:
            b = [cb._template_bounds(pd.DataFrame({"n_correct": k[t], "n": n_names, "bias_type":
                                                   ["gender"] * 3 + ["race"] * 4}), v, 0.05 / 21, "gender",
                                     "all_groups") for t in range(3)]
            lo, hi = np.mean(b, axis=0)
            cover[v] += lo <= truth[v] <= hi
    assert cover["released"] / reps >= 0.95 and cover["paper"] / reps >= 0.95


def test_the_robustness_table_uses_the_projection_interval():
    """Notebook 2's robustness.csv had percentile-bootstrap intervals beside bias_scores.csv's projection intervals of
    the same score (SmolLM2 original [0, 233] against [0, 415] in one row; Gemma's released score 20 in [20, 70]).
    Now every overall score of the table gets the one interval, says so, and reports the templates it rests on."""
    rng = np.random.default_rng(3)
    df = _fab(rng, {**{g: 0.7 for g in GENDER + RACE}, "male": 0.4})
    pert = df.assign(perturbation="combined", n_edits=1, correct=np.roll(df["correct"].to_numpy(), 1))
    pert["correct_released"] = pert["correct"]
    rob = cb.perturbation_table(df, pert)
    ok = rob["overall"].notna() & (rob["perturbation"] != "mean of perturbations")
    assert ok.sum() == 4
    assert rob.loc[ok, "ci_method"].str.startswith("projection of simultaneous Clopper-Pearson boxes").all()
    r = rob[ok]
    assert ((r["ci_low"] <= r["overall"]) & (r["overall"] <= r["ci_high"])).all()
    assert (rob.loc[ok, "n_clusters"] == 6).all()      # template x bias-type entries, as bias_scores.csv counts them
    for v in cb.VARIANTS:      # the original rows are bias_scores.csv's overall rows
        pj = cb.projection_intervals(df, cb.bias_scores(df, v))
        ref = pj[(pj["task"] == "all") & (pj["bias_type"] == "all")].iloc[0]
        got = rob[(rob["variant"] == v) & (rob["perturbation"] == "original")].iloc[0]
        assert (got["ci_low"], got["ci_high"], got["ci_method"]) == (ref["ci_low"], ref["ci_high"], ref["ci_method"])
