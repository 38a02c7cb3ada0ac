"""Notebook 5's decisions on fabricated tables (fast; the end-to-end checks on notebook runs are in test_compare.py):
like is ranked only with like, the analysis plan's claims decide (one family per model pair, at its share of the budget), a degenerate model is
listed but not ranked, and the summary's sentences count what the pair table says. Plus: notebooks 1, 4 and 5 give
the same responder verdict for the same model and metric on the committed outputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from biaslab import plan as P
from biaslab.papers import compare
from biaslab.papers.agentic import decisions as D4
from biaslab.stats import verdict as V
from biaslab.stats import validity as VA
from biaslab import plan as P
from helpers import COMMITTED_PLAN, V4_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with
#: plan v4 for the fabricated tables: a v5 plan decides only the families its profile lists (real model pairs), so
#: made-up models ("emb1", "rel1") would be descriptive there; v4 decides every model pair's family
V4 = P.load(V4_PLAN)

OUT = Path(__file__).resolve().parents[1] / "outputs"


SSQA, CROWS = "ssqa_deviation_rate", "crows_en_stereotype_preferred"     # two metrics the plan claims


def _table():
    """SSQA-like: two embedded models on a 150-prompt subset (label probabilities), two released models on all
    prompts (generated text); and a second metric with two models on the same prompts."""
    rows = [(SSQA, "emb1", 0.50, "labels", 150, "s1"), (SSQA, "emb2", 0.39, "labels", 150, "s1"),
            (SSQA, "rel1", 0.25, "text", 10360, "s2"), (SSQA, "rel2", 0.34, "text", 10360, "s2"),
            (CROWS, "emb1", 0.56, "logprobs", 1508, "s3"), (CROWS, "emb2", 0.58, "logprobs", 1508, "s3")]
    t = pd.DataFrame(rows, columns=["metric", "model", "estimate", "answer_mode", "n_prompt_set", "prompt_set"])
    t = t.assign(benchmark=t["metric"], label=t["metric"], ci_low=t["estimate"] - 0.05, ci_high=t["estimate"] + 0.05,
                 direction="higher = more biased", orientation=1, null=0.0)
    return compare.comparison_groups(t)


def _pairs(p_rel=0.002, p_crows=0.03, p_emb=0.3):
    rows = [(SSQA, "emb1", "emb2", "labels", "labels", 0.11, p_emb), (SSQA, "emb1", "rel1", "labels", "text", 0.28,
                                                                      1e-6),
            (SSQA, "rel1", "rel2", "text", "text", -0.09, p_rel), (CROWS, "emb1", "emb2", "logprobs", "logprobs",
                                                                   -0.03, p_crows)]
    p = pd.DataFrame(rows, columns=["metric", "model_a", "model_b", "answer_mode_a", "answer_mode_b", "difference",
                                    "p_value"])
    return p.assign(n_pairs=150, ci_low=p["difference"] - 0.04, ci_high=p["difference"] + 0.04)


def test_comparison_groups_put_like_with_like():
    t = _table().set_index(["metric", "model"])["comparison_group"]
    assert t[SSQA, "emb1"] == t[SSQA, "emb2"] != t[SSQA, "rel1"] == t[SSQA, "rel2"]
    assert t[SSQA, "emb1"] == "labels · 150 units" and t[SSQA, "rel1"] == "text · 10,360 units"


def test_one_holm_family_per_model_pair_and_incomparable_pairs_shown_apart():
    d = compare.decide_pairs(_pairs(), plan=V4)
    v = d.set_index(["metric", "model_a", "model_b"])["verdict"]
    fam = d.set_index(["metric", "model_a", "model_b"])["family"]
    assert v[SSQA, "emb1", "rel1"].startswith("not tested (not comparable: different answer modes: emb1: labels")
    assert fam[SSQA, "emb1", "emb2"] == fam[CROWS, "emb1", "emb2"] == "05_compare · emb1 · emb2"
    emb = d[(d["model_a"] == "emb1") & (d["model_b"] == "emb2")]
    # Holm within the pair's family, on the project's scale: x n_families (3 model pairs here) / notebook 5's share
    assert (d["n_families"] == 3).all() and (d["share"] == V4.share("05_compare")).all()
    assert np.allclose(emb["p_adjusted"], np.minimum(1, multipletests(emb["p_value"], method="holm")[1] * 3 / V4.share("05_compare")))
    # raw 0.03 on CrowS, Holm 0.06 over the pair's two claims; the released pair's one claim: Holm = raw
    assert v[CROWS, "emb1", "emb2"] == "not distinguishable" and v[SSQA, "rel1", "rel2"] == "distinguishable"
    # a metric without a claim is exploratory: shown, never decided
    other = compare.decide_pairs(_pairs().assign(metric="agentic_mean_entropy"), plan=V4)
    assert not other["verdict"].isin(["distinguishable", "not distinguishable"]).any()


def test_degenerate_for_this_metric_is_listed_not_ranked():
    st = pd.DataFrame({"metric": [SSQA, CROWS], "model": ["emb2", "emb2"],
                       "responder_status": ["degenerate: always 'yes'", "not judged: log-probabilities"]})
    pairs = compare.decide_pairs(_pairs(), st, plan=V4)
    v = pairs.set_index(["metric", "model_a", "model_b"])["verdict"]
    assert v[SSQA, "emb1", "emb2"].startswith("not tested (degenerate responder: emb2: always 'yes'")
    assert v[CROWS, "emb1", "emb2"] in ("distinguishable", "not distinguishable")     # not judged is no flag
    t = _table().merge(st, on=["metric", "model"], how="left")
    g = compare.tie_group_table(t, pairs).set_index(["metric", "model"])
    assert not g.loc[(SSQA, "emb2"), "ranked"] and "degenerate responder: always 'yes'" in g.loc[(SSQA, "emb2"),
                                                                                                 "note"]
    assert not g.loc[(SSQA, "emb1"), "ranked"]           # alone in its group once emb2 is out
    assert g.loc[(SSQA, "rel2"), "rank"] == 1 and g.loc[(SSQA, "rel2"), "groups"] != g.loc[(SSQA, "rel1"), "groups"]
    assert len(g) == len(t)                                  # nobody disappears
    lines = compare.summary_lines(t, pairs, compare.tie_group_table(t, pairs), pd.DataFrame(), plan=V4)
    ssqa = [x for x in lines if x.startswith(SSQA)][0]
    assert "emb2 0.39 [0.34, 0.44]" in ssqa and "1 pair with a degenerate responder, not tested" in ssqa
    assert "1 pair across answer modes, not tested" in ssqa
    claims = [x for x in lines if x.startswith("`")]
    assert len(claims) == int((pairs["claim"] != "").sum())
    assert sum("distinguishable from" in x and "not distinguishable" not in x for x in claims) == \
        int((pairs["verdict"] == "distinguishable").sum())


def _committed(folder, stem):
    p = OUT / folder / "tables" / f"{stem}.csv"
    if not p.exists() or os.path.getsize(p) < 2:
        pytest.skip(f"no committed {folder}/tables/{stem}.csv")
    return pd.read_csv(p)


def test_notebooks_1_4_and_5_agree_on_each_models_responder_status():
    """A committed SmolLM2 case: notebook 4 flagged it on the top position while its entropy reads probabilities,
    notebook 1 called it informative and notebook 5 flagged it on every metric. Per metric they agree."""
    resp4 = _committed("04_agentic_entropy", "responders")
    if "metric" not in resp4:
        resp4 = D4.responder_table(_committed("04_agentic_entropy", "responses"))
    prob4 = V.metric_status(resp4, D4.PROBABILITIES).set_index("model")["responder_status"]
    nb5 = compare.responder_table(OUT, [compare.metric("agentic_mean_entropy")]).set_index("model")[
        "responder_status"]
    assert prob4.to_dict() == nb5.to_dict()
    # the top answer by group (what notebook 1's agentic variant reads): degenerate in 4 iff degenerate in 1
    grp4 = V.metric_status(resp4, D4.BY_GROUP).set_index("model")["responder_status"].str.startswith("degenerate")
    nb1 = _committed("01_multifactor/agentic", "responders")
    nb1 = nb1[nb1["reads"] == "answer"]             # the answer check (the validity rows stand beside it)
    deg1 = nb1.set_index("model")["degenerate"].astype(str).str.lower().eq("true")
    assert grp4.to_dict() == deg1.to_dict()


def test_notebook_4s_group_check_is_notebook_1s_on_the_same_answers():
    """By construction: notebook 4's "top answer by group" rows are notebook 1's agentic answer
    check (``responder_check`` of the top group per model) — on fabricated answers with one degenerate model, and on
    the committed notebook-4 responses recomputed with this code (what the regenerated responders.csv will hold).
    Before, notebook 4 passed a per-prompt table without ``class_type`` and wrote no group row at all, so every group
    row of uniformity_tests.csv read "not judged: no responder row for this model"."""
    from biaslab.stats import responders as R
    rng = np.random.default_rng(0)
    groups = ["White", "Black", "Asian", "Female", "Male", "Young", "Old"]
    per = pd.DataFrame({"prompt_id": range(60), "model": ["a"] * 30 + ["b"] * 30, "k": 3,
                        "top_group": list(rng.choice(groups, 30)) + ["White"] * 30, "label_mass": 0.9,
                        "top_position": 1, "p_1": 0.4, "p_2": 0.3, "p_3": 0.3})
    mine = V.metric_status(D4.responder_table(per), D4.BY_GROUP).set_index("model")["responder_status"]
    nb1 = R.responder_check(per.assign(answer=per["top_group"]), answer="answer", by="model",
                            label_mass="label_mass").set_index("model")["degenerate"]
    assert mine.str.startswith("degenerate").to_dict() == nb1.astype(bool).to_dict() == {"a": False, "b": True}
    ut = D4.decide("uniformity_tests", pd.DataFrame([
        {"model": m, "class_type": "race", "unit": u, "k": 3, "n": 30, "top": "White", "cohens_w": 0.3,
         "p_value": 0.01, "log10_bf10": 1.0} for m in ("a", "b") for u in ("group", "position")]),
        D4.responder_table(per), plan=PLAN).set_index(["model", "unit"])
    assert ut.loc[("a", "group"), "responder_status"] == "informative"
    assert ut.loc[("b", "group"), "verdict"].startswith("not tested (degenerate responder")
    assert not ut["responder_status"].str.contains("no responder row").any()
    # the committed notebook-4 answers through this code (its validity check included), against the committed
    # notebook 1
    from biaslab.benchmarks import agentic, instrument
    answers = _committed("04_agentic_entropy", "responses")
    prompts, _ = agentic.sample(len(answers) // answers["model"].nunique(), seed=0)
    rows, sel = instrument.validity(agentic.SPEC, prompts, agentic.validity_answers(answers).assign(
        formulation="paper", normalization=""), "scenario_id", instrument.one_formulation(PLAN, agentic.SPEC, prompts))
    resp4 = D4.responder_table(answers, validity=VA.responder_rows(sel, rows))
    grp4 = V.metric_status(resp4, D4.BY_GROUP).set_index("model")["responder_status"].str.startswith("degenerate")
    nb1c = _committed("01_multifactor/agentic", "responders")
    nb1c = nb1c[nb1c["reads"] == "answer"]          # the answer check (the validity rows stand beside it)
    assert grp4.to_dict() == nb1c.set_index("model")["degenerate"].astype(str).str.lower().eq("true").to_dict()
    prob4 = V.metric_status(resp4, D4.PROBABILITIES).set_index("model")["responder_status"]
    nb5 = compare.responder_table(OUT, [compare.metric("agentic_mean_entropy")]).set_index("model")[
        "responder_status"]
    assert prob4.to_dict() == nb5.to_dict()
