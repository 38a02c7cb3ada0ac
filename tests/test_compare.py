"""Notebook 5's library (biaslab.papers.compare) against the tables the source notebooks wrote.

The source tables come from smoke runs of notebooks 1 (SSQA, BBQ), 2, 3 and 4 with both embedded models, written
once per test session and shared with the notebook tests (``tests/conftest.py``).
Every number of the model x metric table is checked against the source notebook's own table *and* recomputed here
independently from the per-prompt responses, with plain pandas.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.run import profiles
from biaslab.papers import compare
from biaslab.stats import multiplicity
from biaslab.stats.clustered import FEW_CLUSTERS
from biaslab import plan as P
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with

SOURCES = ["01_multifactor/ssqa", "01_multifactor/bbq", "02_calm", "03_crows_pairs_bayes", "04_agentic_entropy"]
MODELS = list(profiles.EMBEDDED_MODELS)


@pytest.fixture(scope="module")
def root(smoke_run):
    for label in SOURCES:         # the session's smoke runs, with both embedded models (tests/conftest.py)
        smoke_run(label)
    return smoke_run.root


@pytest.fixture(scope="module")
def table(root):
    return compare.model_metric_table(root, n_boot=300)


@pytest.fixture(scope="module")
def pairs(root):
    return compare.paired_table(root, n_boot=300, plan=PLAN)


def _src(root, folder, stem):
    return pd.read_csv(Path(root) / folder / "tables" / f"{stem}.csv")


def _cell(table, metric, model, col="estimate"):
    r = table[(table["metric"] == metric) & (table["model"] == model)]
    assert len(r) == 1, (metric, model)
    return float(r[col].iloc[0])


pytestmark = pytest.mark.notebook


def test_every_metric_has_every_model(table):
    # the smoke profile of notebook 3 scores the revised English and the French sets, not the original English one;
    # notebook 7's smoke run two of MBBQ's four languages
    from biaslab.run import profiles
    smoke_languages = profiles.params("smoke", "07_mbbq")["languages"]
    unscored = {f"mbbq_bias_ambig_{lang}" for lang in ("en", "es", "nl", "tr") if lang not in smoke_languages}
    present = set(table["metric"])
    assert unscored and present >= {m.id for m in compare.all_metrics()} - {"crows_en_stereotype_preferred"} - unscored
    for m in present:
        assert set(table.loc[table["metric"] == m, "model"]) >= set(MODELS), m


def test_ssqa_and_bbq_numbers_equal_notebook_1_tables(root, table):
    ld = _src(root, "01_multifactor/ssqa", "label_distribution").set_index("model")
    ra = _src(root, "01_multifactor/ssqa", "released_answers").set_index("model")
    for m in MODELS:
        assert _cell(table, "ssqa_deviation_rate", m) == ld.loc[m, "deviation_rate"]
    for m in ("granite-3.0-8b", "llama-3.1-8b"):
        assert _cell(table, "ssqa_deviation_rate", m) == ra.loc[m, "deviation_rate"]
        # released answers per prompt: all 10,360 prompts, the rate recomputed independently
        rr = _src(root, "01_multifactor/ssqa", "responses_released")
        assert _cell(table, "ssqa_deviation_rate", m, "n_units") == 10360
        assert _cell(table, "ssqa_deviation_rate", m, "estimate_from_responses") == pytest.approx(
            rr.loc[rr["model"] == m, "deviated"].mean())
    bs = _src(root, "01_multifactor/bbq", "accuracy_bias_scores")
    resp = _src(root, "01_multifactor/bbq", "responses")
    for m in MODELS:
        for ctx in ("ambig", "disambig"):
            src = bs[(bs["model"] == m) & (bs["context_condition"] == ctx)]["bias_score"].iloc[0]
            got = _cell(table, f"bbq_bias_{ctx}", m)
            assert got == src
            # independent recomputation of BBQ's score from the per-prompt choices
            r = resp[(resp["model"] == m) & (resp["context_condition"] == ctx)]
            nu = (r["chose_unknown"] == 0).sum()
            s_dis = 2 * r["deviated"].sum() / nu - 1 if nu else np.nan
            hand = (1 - r["correct"].mean()) * s_dis if ctx == "ambig" else s_dis
            assert _cell(table, f"bbq_bias_{ctx}", m, "estimate_from_responses") == pytest.approx(hand, nan_ok=True)


def test_calm_crows_agentic_numbers_equal_their_notebooks_tables(root, table):
    bs = _src(root, "02_calm", "bias_scores")
    pt = _src(root, "03_crows_pairs_bayes", "preference_tests")
    ps = _src(root, "03_crows_pairs_bayes", "pair_scores")
    eb = _src(root, "04_agentic_entropy", "entropy_by_model").set_index("model")
    ar = _src(root, "04_agentic_entropy", "responses")
    for m in MODELS:
        row = bs[(bs["model"] == m) & (bs["variant"] == "paper") & (bs["task"] == "all") & (bs["bias_type"] == "all")]
        assert _cell(table, "calm_bias_overall", m) == row["bias_score"].iloc[0]
        assert _cell(table, "calm_bias_overall", m, "ci_low") == row["score_ci_low"].iloc[0]   # the score's own interval
        for d in ("crows_pairs_en_revised", "crows_pairs_fr"):
            metric = f"crows_{d.removeprefix('crows_pairs_')}_stereotype_preferred"
            row = pt[(pt["model"] == m) & (pt["dataset"] == d) & (pt["source"] == "likelihood")
                     & (pt["bias_type"] == "overall")]
            assert _cell(table, metric, m) == row["pi_hat"].iloc[0]
            s = ps[(ps["model"] == m) & (ps["dataset"] == d)]
            k, n = (s["d_logprob"] > 0).sum(), (s["d_logprob"] != 0).sum()
            # the file's share, weighted back from the sample: sum_h (N_h / N) * (share of type h's scored pairs)
            x = np.where(s["d_logprob"] == 0, np.nan, (s["d_logprob"] > 0).astype(float))
            N_h = s.groupby("stratum")["weight"].sum()
            share = pd.Series(x, index=s.index).groupby(s["stratum"]).mean()
            assert _cell(table, metric, m, "estimate_from_responses") == pytest.approx((N_h * share).sum() / N_h.sum())
            assert row["k"].iloc[0] == k and row["n"].iloc[0] == n
        assert _cell(table, "agentic_mean_entropy", m) == eb.loc[m, "mean_entropy"]
        assert _cell(table, "agentic_mean_entropy", m, "estimate_from_responses") == pytest.approx(
            ar.loc[ar["model"] == m, "entropy"].mean(), abs=1e-6)


def test_intervals_contain_their_estimates_and_name_their_method(table):
    has = table["ci_low"].notna()
    flat = table["ci_method"].str.startswith("not estimable (no variation")       # no interval from no variance
    assert not (has & flat).any()
    assert (has | flat).sum() >= len(compare.all_metrics()) * len(MODELS) - 2 * len(MODELS)  # BBQ: may lack one
    t = table[has]
    assert ((t["ci_low"] <= t["estimate"] + 1e-12) & (t["estimate"] <= t["ci_high"] + 1e-12)).all()
    assert t["ci_method"].str.len().gt(0).all()
    assert not table["ci_method"].str.contains("cluster column missing").any()


def test_paired_differences_equal_independent_computation(root, pairs):
    """The agentic paired difference is the mean of per-prompt entropy differences; Holm within each model pair's
    family of the plan's claims."""
    ar = _src(root, "04_agentic_entropy", "responses")
    w = ar.pivot_table(index="prompt_id", columns="model", values="entropy")
    p = pairs[pairs["metric"] == "agentic_mean_entropy"].iloc[0]
    hand = (w[p["model_a"]] - w[p["model_b"]]).mean()
    assert p["difference"] == pytest.approx(hand) and p["n_pairs"] == len(w)
    from scipy import stats
    if p["n_clusters"] >= FEW_CLUSTERS:   # the rule of stats.clustered: Wald t(G - 1) on the CR1 SE
        assert p["p_value"] == pytest.approx(2 * stats.t.sf(abs(p["difference"]) / p["se_cluster"], p["n_clusters"] - 1))
    else:   # few scenarios (smoke size): the wild cluster bootstrap
        assert p["test"].startswith("wild cluster bootstrap")
    assert p["p_naive"] == pytest.approx(stats.wilcoxon((w[p["model_a"]] - w[p["model_b"]])[lambda d: d != 0]).pvalue)
    # the analysis plan's claims are decided, Holm within each model pair's family; untested claim rows stay out of
    # it; every other row is exploratory and decides nothing
    decided = pairs["verdict"].isin(["distinguishable", "not distinguishable"])
    assert (pairs.loc[decided, "claim"] != "").all()
    for _, g in pairs[decided].groupby("family"):
        # Holm within the family, on the project's scale (x n_families / share: the plan's error budget)
        scale = g["n_families"].iloc[0] / g["share"].iloc[0]
        assert np.allclose(g["p_adjusted"], np.minimum(1, multiplicity.adjust(g["p_value"], "holm") * scale))
        assert (g["family_size"] == len(g)).all()
    conf = pairs["claim"] != ""
    assert pairs.loc[conf & ~decided, "p_adjusted"].isna().all()


def test_ssqa_released_and_embedded_are_paired_on_common_prompts(root, pairs):
    rel = _src(root, "01_multifactor/ssqa", "responses_released")
    emb = _src(root, "01_multifactor/ssqa", "responses")
    emb = emb[emb["cot"] == "no"]
    common = set(rel["prompt_id"]) & set(emb.loc[emb["model"] == MODELS[0], "prompt_id"])
    p = pairs[(pairs["metric"] == "ssqa_deviation_rate")
              & (pairs[["model_a", "model_b"]].isin([MODELS[0], "granite-3.0-8b"]).all(axis=1))]
    assert len(p) == 1 and p["n_pairs"].iloc[0] == len(common) > 0


def test_tie_groups_and_agreement_from_the_tables(table, pairs):
    groups = compare.tie_group_table(table, pairs)
    assert set(groups["metric"]) == set(table["metric"])
    assert set(map(tuple, groups[["metric", "model"]].to_numpy())) == set(map(tuple, table[["metric", "model"]].to_numpy()))
    for mid, g in groups.groupby("metric"):
        sig = pairs[(pairs["metric"] == mid) & (pairs["verdict"] == "distinguishable")]
        for r in sig.itertuples():   # a distinguishable pair never shares a letter
            la = g.loc[g["model"] == r.model_a, "groups"].iloc[0]
            lb = g.loc[g["model"] == r.model_b, "groups"].iloc[0]
            assert not set(la) & set(lb)
    agreement = compare.agreement_table(table)
    assert (agreement["status"].str.startswith("too few models")).all()     # two or four models here
    lines = compare.summary_lines(table, pairs, groups, agreement, plan=PLAN)
    assert "cannot be assessed" in lines[-1]


def test_degenerate_responders_are_not_tested(root):
    flags = pd.DataFrame([{"metric": "agentic_mean_entropy", "model": MODELS[1],
                           "responder_status": "degenerate: fabricated"}])
    p = compare.paired_table(root, [compare.metric("agentic_mean_entropy")], n_boot=100, responders=flags, plan=PLAN)
    assert p["verdict"].str.startswith("not tested (degenerate responder").all() and p["p_adjusted"].isna().all()
    assert p["difference"].notna().all()
    t = compare.model_metric_table(root, [compare.metric("agentic_mean_entropy")], n_boot=100).merge(
        flags, on=["metric", "model"], how="left")
    g = compare.tie_group_table(t, p).set_index("model")
    assert not g.loc[MODELS[1], "ranked"] and "degenerate" in g.loc[MODELS[1], "note"]


def test_responder_rows_that_judge_each_metric(root):
    st = compare.responder_table(root)
    r = _src(root, "01_multifactor/ssqa", "responders")
    r = r[r["cot"] == "no"].set_index("model")["degenerate"]
    f = st[st["metric"] == "ssqa_deviation_rate"].set_index("model")["responder_status"]
    assert {m: s.startswith("degenerate") for m, s in f.items()} == r.astype(bool).to_dict()
    # the agentic entropy reads probabilities: judged by notebook 4's probability rows, never by its answer rows
    a = _src(root, "04_agentic_entropy", "responders")
    prob = a[a["reads"] == "probabilities"].groupby("model")["degenerate"].any()
    got = st[st["metric"] == "agentic_mean_entropy"].set_index("model")["responder_status"]
    assert {m: s.startswith("degenerate") for m, s in got.items()} == prob.astype(bool).to_dict()
    assert st.loc[st["metric"].str.startswith("crows"), "responder_status"].str.startswith("not judged").all()


def test_outputs_root_falls_back_to_the_published_outputs(root, tmp_path):
    from biaslab import paths
    assert compare.outputs_root(None, Path(root) / "05_compare") == Path(root).resolve()
    assert compare.outputs_root(None, tmp_path / "05_compare") == paths.OUTPUTS_DIR
    assert compare.outputs_root(str(tmp_path), "anything") == tmp_path


def test_metric_headers_come_from_each_metrics_benchmark():
    """The model x metric table's headers name the benchmark by its spec's title, then the metric in words."""
    from biaslab.benchmarks import SPECS
    heads = compare.metric_headers(compare.all_metrics())
    for s in SPECS.values():
        for m in s.metrics:
            if m.id in heads:
                assert heads[m.id].startswith(s.title + " ") and "_" not in heads[m.id]
    assert heads["bbq_bias_ambig"] == "BBQ bias ambiguous"
