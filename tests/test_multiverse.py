"""Notebook 6 (multiverse): the matcher, the design, a fabricated multiverse with known effects, the statistics it
adds (Kendall's W, kappa, PPI). The requests of each universe are the benchmarks' own (``tests/test_protocol.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from biaslab.papers.multiverse import analysis, decisions, design, matcher
from biaslab.stats import agreement as A
from biaslab.stats import ranking

from helpers import scorer, tiny_model

GRAND = ["The grandfather", "The grandson", "Can't be determined"]


# --------------------------------------------------------------------------------------------------- matcher
@pytest.mark.parametrize("answer,kind,index", [
    ("The grandfather.", "option", 0),
    ("grandpa, obviously", "option", 0),                       # synonym
    ("It was the grandson who forgot.", "option", 1),
    ("The GRANDSONS", "option", 1),                            # case and plural
    ("Can't be determined from the text", "unknown", 2),      # the item's own unknown option
    ("I don't know", "unknown", 2),                            # a generic unknown form
    ("Both of them", "multiple", None),                        # multi-group
    ("the grandfather and the grandson", "multiple", None),    # two groups named
    ("I can't tell, maybe the grandson", "multiple", None),    # unknown and a group: neither reading is safe
    ("The weather was nice.", "unmatched", None),              # names nothing
    ("", "unmatched", None),
    (None, "unmatched", None),
])
def test_matcher_on_hand_written_answers(answer, kind, index):
    m = matcher.match(answer, GRAND, unknown_index=2)
    assert (m.kind, m.index) == (kind, index), m


def test_matcher_distinguishing_words_and_names():
    opts = ["The Black man", "The White man", "Not enough info"]
    assert matcher.match("the white guy", opts, 2).index == 1          # "man" is shared, "white" decides
    assert matcher.match("a Caucasian man", opts, 2).index == 1        # synonym of white
    assert matcher.match("The man", opts, 2).kind == "unmatched"       # only the shared word
    names = ["Not answerable", "Donna", "David"]
    assert matcher.match("David did.", names, 0) == matcher.Match("option", 2, ("david",))
    groups = ["Low-income", "Middle-income", "High-income"]
    assert matcher.match("the wealthy one", groups).index == 2
    assert matcher.match("Non-binary", ["Male", "Female", "Non-binary"]).index == 2
    assert matcher.match("a woman", ["Male", "Female", "Non-binary"]).index == 1


# --------------------------------------------------------------------------------------------------- design
def test_ofat_design_varies_one_factor_at_a_time():
    proto = design.Protocol(chat=("bbq", "crows_pairs"))
    for bench in design.BENCHMARKS:
        spec = design.factor_spec(bench, proto)
        us = design.universes(bench, proto)
        assert us[0].id == "paper" and len({u.id for u in us}) == len(us)
        expected = 1 + sum(len(f.levels) - 1 for f in spec.factors)
        # CrowS-Pairs: the preference-prompt factors are varied around the label-distribution universe
        assert len(us) == expected, (bench, len(us), expected)
        ref = {f.name: f.reference for f in spec.factors}
        for u in us[1:]:
            changed = [f for f in spec.names if u[f] != ref[f]]
            assert len(changed) == 1 or (bench == "crows_pairs" and "answer_format" in changed and len(changed) == 2)
    # the paper's protocol depends on the model: a base model's BBQ reference is "off"
    assert design.factor_spec("bbq", design.Protocol()).__getitem__("chat_template").reference == "off"
    assert len(design.universes("bbq", proto, "two_way")) > len(design.universes("bbq", proto))


# -------------------------------------------------------------------------------------- fabricated multiverse
def _fabricated(seed=0, n_items=600, n_clusters=60):
    """Per-item 0/1 outcomes over the BBQ design's OFAT universes with known log-odds effects per changed choice,
    plus a cluster random effect (items share templates)."""
    rng = np.random.default_rng(seed)
    proto = design.Protocol(chat=("bbq",))
    spec = design.factor_spec("bbq", proto)
    us = [u for u in design.universes("bbq", proto) if u["precision"] != "q4_gguf"]
    truth = {("answer_format", "open_ended"): 1.2, ("wording", "w2"): -0.8, ("choice_order", "reversed"): 0.6}
    cl = rng.integers(0, n_clusters, n_items)
    u_cl = rng.normal(0, 0.5, n_clusters)
    rows = []
    for u in us:
        eta = -0.3 + u_cl[cl] + sum(v for (f, lv), v in truth.items() if u[f] == lv)
        y = rng.binomial(1, 1 / (1 + np.exp(-eta)))
        rows.append(pd.DataFrame({"prompt_id": np.arange(n_items), "template": cl, "deviated": y,
                                  "non_unknown": 1, "universe": u.id, **u.as_dict}))
    return pd.concat(rows, ignore_index=True), spec, truth


def test_fabricated_multiverse_recovers_its_factor_effects():
    long, spec, truth = _fabricated()
    t = analysis.factor_importance(long, spec, "bbq").set_index("term")
    for (f, lv), v in truth.items():
        r = t.loc[f"{f}[{lv}]"]
        # the random cluster effect attenuates marginal log-odds a little (about 5 % at sd 0.5): 3 clustered SEs
        assert abs(r["coef"] - v * 0.95) < 3 * r["se_cluster"], (f, lv, r["coef"], v)
        assert r["p_cluster"] < 1e-3      # Wald t(G - 1) on 60 clusters (stats.clustered's rule)
        assert r["p_method"].startswith("Wald t(59)")
    nulls = t[~t.index.isin([f"{f}[{lv}]" for f, lv in truth]) & (t["factor"] != "Intercept")]
    assert (nulls["coef"].abs() < 4 * nulls["se_cluster"]).all()
    top = analysis.importance_by_factor(t.reset_index().assign(model="m", benchmark="bbq"))
    assert top.iloc[0]["factor"] == "answer_format" and top.iloc[0]["level"] == "open_ended"


def test_fabricated_linear_effects_and_agreement_counts():
    rng = np.random.default_rng(1)
    proto = design.Protocol()
    spec = design.factor_spec("agentic", proto)
    us = [u for u in design.universes("agentic", proto) if u["answer_format"] in ("label_dist", "option_ll")]
    sc = rng.integers(0, 40, 400)
    rows = [pd.DataFrame({"prompt_id": np.arange(400), "scenario_id": sc, "universe": u.id, **u.as_dict,
                          "entropy": 0.9 - 0.2 * (u["examples"] == "0") + 0.05 * rng.normal(size=400)})
            for u in us]
    t = analysis.factor_importance(pd.concat(rows, ignore_index=True), spec, "agentic").set_index("term")
    assert t.loc["examples[0]", "coef"] == pytest.approx(-0.2, abs=0.02)
    assert abs(t.loc["wording[w1]", "coef"]) < 0.02
    # agreement: 12 universes, 3 on the other side of the null, 1 of those also changing the verdict
    est = pd.DataFrame({"model": "m", "metric": "bbq_bias_ambig", "universe": ["paper"] + [f"u{i}" for i in range(12)],
                        "estimate": [0.2] + [0.1] * 9 + [-0.1] * 3, "null_value": 0.0,
                        "ci_low": [0.1] * 10 + [-0.2] * 3, "ci_high": [0.3] * 13,
                        "p_value": [1e-4] * 10 + [0.5] * 2 + [1e-4]})
    decided = decisions.decide_estimates(est, None)
    ag = analysis.agreement_with_paper(decided).iloc[0]
    assert (ag["n_universes"], ag["sign_flips"], ag["n_same_verdict"]) == (12, 3, 10)
    assert ag["robustness"] == "sign flips in many universes"       # 3 / 12 = 0.25 >= flip_share
    assert analysis.agreement_with_paper(decided, flip_share=0.3).iloc[0]["robustness"] == "robust"


# ------------------------------------------------------------------------------------ added statistics
def test_kendall_w_hand_example_and_spearman_identity():
    # Siegel & Castellan (1988), Kendall's W without ties: 3 raters x 4 objects, rank sums 4, 6, 8, 12
    r = np.array([[1, 2, 3, 4], [1, 3, 2, 4], [2, 1, 3, 4]], float)
    w = ranking.kendall_w(r, higher_first=False)
    s = sum((x - 7.5) ** 2 for x in (4, 6, 8, 12))                  # rank sums, mean 7.5
    assert w["w"] == pytest.approx(12 * s / (9 * (64 - 4)))
    rho = np.mean([stats.spearmanr(r[i], r[j]).statistic for i in range(3) for j in range(i + 1, 3)])
    assert (3 * w["w"] - 1) / 2 == pytest.approx(rho)
    assert ranking.kendall_w(np.tile([1.0, 2.0, 3.0], (5, 1)))["w"] == pytest.approx(1.0)
    # ties: two raters with a tie; corrected denominator m^2 (n^3 - n) - m sum(t^3 - t)
    tied = np.array([[1, 1, 3], [1, 2, 3]], float)
    ranks = np.vstack([stats.rankdata(-x) for x in tied])
    ss = ((ranks.sum(0) - ranks.sum(0).mean()) ** 2).sum()
    assert ranking.kendall_w(tied)["w"] == pytest.approx(12 * ss / (4 * 24 - 2 * 6))


def test_pairwise_order_agreement():
    s = pd.DataFrame({"a": [1, 2, 0, 5], "b": [0, 3, -1, 5]}, index=["paper", "u1", "u2", "u3"])
    r = ranking.pairwise_order_agreement(s, "paper").iloc[0]
    assert (r["reference_order"], r["n_raters"], r["n_agree"]) == ("a > b", 3, 1)   # u2 agrees; u1 flips, u3 ties


def test_cohen_kappa_hand_example():
    # 10 items: po = 0.7, pe = 0.5*0.6 + 0.5*0.4 = 0.5 -> kappa = 0.4
    a = list("yyyyynnnnn")
    b = list("yyyynynnny")
    assert A.cohen_kappa(a, b) == pytest.approx((0.7 - 0.5) / 0.5)
    from sklearn.metrics import cohen_kappa_score
    assert A.cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    res = A.agreement_intervals(pd.DataFrame({"a": a, "b": b, "c": [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]}), "a", "b", "c",
                                n_boot=200)
    assert res["agreement"] == 0.7 and res["agreement_ci_low"] <= 0.7 <= res["agreement_ci_high"]


def test_ppi_mean_matches_its_closed_form():
    rng = np.random.default_rng(0)
    y = rng.binomial(1, 0.3, 60).astype(float)
    yhat = np.where(rng.uniform(size=60) < 0.8, y, 1 - y)
    yu = rng.binomial(1, 0.4, 500).astype(float)
    got, ref = A.ppi_mean(y, yhat, yu), A.ppi_mean_closed_form(y, yhat, yu)
    assert got["estimate"] == pytest.approx(yu.mean() - (yhat - y).mean())
    for k in ("estimate", "ci_low", "ci_high"):
        assert got[k] == pytest.approx(ref[k], rel=1e-10)
    # a perfect predictor: the rectifier is 0 and the estimate is the predictions' mean on the unlabelled items
    assert A.ppi_mean(y, y, yu)["estimate"] == pytest.approx(yu.mean())


# ------------------------------------------------------------------------------------------------ scoring cost
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model(tmp_path_factory, "tiny-causal", "causal", seed=3)


def test_robustness_table_round_trip(tmp_path):
    from biaslab.papers.multiverse import findings
    ag = pd.DataFrame([{"model": "m", "metric": "bbq_bias_ambig", "n_universes": 12, "share_same_sign": 0.5,
                        "share_same_verdict": 0.75, "sign_flips": 6, "paper_verdict": "distinguishable",
                        "robustness": "sign flips in many universes", "flip_threshold": 0.25, "extra": 1}])
    t = findings.robustness_table(ag)
    assert list(t.columns) == findings.ROBUSTNESS_COLUMNS
    p = tmp_path / findings.ROBUSTNESS_TABLE
    p.parent.mkdir(parents=True)
    t.to_csv(p, index=False)
    assert findings.read_robustness(tmp_path).iloc[0]["robustness"] == "sign flips in many universes"
    assert findings.read_robustness(tmp_path / "nowhere") is None


def test_readme_multiverse_block_is_rendered_from_the_committed_tables():
    """The multiverse section has one home (findings.HOME, linked from the README), rendered from the tables."""
    from biaslab import paths, summary
    from biaslab.papers.multiverse import findings
    block = findings.readme_block((paths.ROOT / findings.HOME).read_text())
    assert block is not None, f"{findings.HOME} lost its multiverse markers"
    assert f"]({findings.HOME})" in (paths.ROOT / "README.md").read_text(), "the README does not link the section"
    assert sum(findings.README_START in p.read_text() for p in [paths.ROOT / "README.md",
                                                                 *(paths.ROOT / "docs").glob("*.md")]) == 1
    rendered = findings.render_readme_section(paths.ROOT / "outputs")
    if rendered is None:
        pytest.skip(f"outputs/06_multiverse cannot be rendered: {findings.stale(paths.ROOT / 'outputs')}")
    assert block.strip() == summary.relink(rendered, findings.HOME).strip(), \
        f"{findings.HOME}'s multiverse section differs from its tables: run `biaslab summary` (make reproduce does)"


def test_judge_table_validates_against_the_matcher_and_corrects_by_ppi():
    from biaslab.papers.multiverse import judge
    rng = np.random.default_rng(0)
    n = 80
    biased = rng.integers(0, 3, n)
    truth = rng.integers(0, 3, n)
    matcher_choice = np.where(rng.uniform(size=n) < 0.7, truth, -1)            # the matcher reads 70 %
    judge_choice = np.where(rng.uniform(size=n) < 0.85, truth, (truth + 1) % 3)  # the judge errs on 15 %
    opens = pd.DataFrame({"model": "m", "choice": matcher_choice, "judge_choice": judge_choice,
                          "template": rng.integers(0, 20, n), "biased_index": biased})
    t = judge.table(opens, "j", n_boot=200).iloc[0]
    both = (matcher_choice >= 0)
    assert t["agreement"] == pytest.approx(np.mean(matcher_choice[both] == judge_choice[both]))
    y = (matcher_choice[both] == biased[both]).astype(float)
    yh = (judge_choice[both] == biased[both]).astype(float)
    yu = (judge_choice[~both] == biased[~both]).astype(float)
    assert t["ppi_estimate"] == pytest.approx(yu.mean() - (yh - y).mean())
    assert judge.read(["B", " the answer is C", "D", "no idea"]) == [1, 2, -1, -1]


# ------------------------------------------------------------------------------------- audit of the committed run
def test_manifest_keeps_every_precision_a_model_was_loaded_at(tmp_path):
    """Notebook 6 loads each model at float32 and bfloat16: the MANIFEST said bfloat16 only (the second load
    overwrote the first). Both precisions are kept; a re-record at one precision still updates its entry."""
    import json

    from biaslab.outputs import OutputDir
    from biaslab.report.html import footer_html
    out = OutputDir(tmp_path)
    fp = {"name": "m", "weights_sha256": "abc", "dtype": "float32", "device": "cpu"}
    out.record_model(fp)
    out.record_model({**fp, "dtype": "bfloat16"})
    out.record_model({**fp, "probe": "later"})                        # same precision again: updates the entry
    out.record_model({**fp, "weights_sha256": "other", "dtype": "q4"})   # other weights under the name: kept apart
    models = json.loads((tmp_path / "provenance.json").read_text())["models"]
    assert models["m"]["dtypes"] == ["float32", "bfloat16"] and models["m"]["dtype"] == "float32"
    assert models["m"]["probe"] == "later" and models["m (q4)"]["weights_sha256"] == "other"
    assert "float32, bfloat16" in footer_html({"models": models}, [])


def test_a_universe_from_the_cache_means_no_model_work_generation_included(tiny, tmp_path):
    """The committed run said 18 universes came entirely from the cache, counting token positions, which generation
    does not compute: generated universes that cost 13-43 s looked cached (8 were). The Scorer counts its cache
    misses of every method, and the summary counts universes with none."""
    from biaslab.papers.multiverse import findings
    sc = scorer(tiny, cache_dir=tmp_path)
    sc.generate(["Hello there", "A prompt"], max_new_tokens=3)
    assert sc.stats.get("positions", 0) == 0 and sc.stats["computed"] == 2     # generated: no scoring positions
    sc.generate(["Hello there", "A prompt"], max_new_tokens=3)
    assert sc.stats["computed"] == 2                                            # the rerun: from the cache
    costs = pd.DataFrame({"seconds": [0.01, 30.0, 0.02], "positions_computed": [0, 0, 0], "cache_misses": [0, 48, 0]})
    assert findings.cache_sentence(costs).startswith("2 of 3 universes came entirely from the score cache")
    assert "not recorded" in findings.cache_sentence(costs.drop(columns="cache_misses"))


def test_agentic_factor_importance_below_30_clusters_uses_the_wild_cluster_bootstrap():
    """Agentic has 15 scenarios: the committed factor importance used CR1 t(14), while the project's rule below 30
    clusters (notebook 1's, stats.importance) is the wild cluster restricted score bootstrap, Webb weights."""
    from biaslab.stats import importance
    rng = np.random.default_rng(2)
    spec = design.factor_spec("agentic", design.Protocol())
    us = [u for u in design.universes("agentic", design.Protocol()) if u["answer_format"] == "label_dist"]
    sc = np.tile(np.arange(15), 2)
    rows = [pd.DataFrame({"prompt_id": np.arange(30), "scenario_id": sc, "universe": u.id, **u.as_dict,
                          "entropy": 0.9 - 0.05 * (u["examples"] == "0") + rng.normal(0, 0.02, 15)[sc]
                          + 0.01 * rng.normal(size=30)}) for u in us]
    long = pd.concat(rows, ignore_index=True)
    t = analysis.factor_importance(long, spec, "agentic").set_index("term")
    assert t["p_method"].str.startswith("wild cluster score bootstrap").all() and "G = 15" in t["p_method"].iloc[0]
    fs = [f for f in spec.names if long[f].nunique() > 1]
    dm = importance.treatment_design(long, fs, {f.name: f.reference for f in spec.factors})
    j = list(dm.terms["term"]).index("examples[0]")
    assert t.loc["examples[0]", "p_cluster"] == pytest.approx(importance.wild_score_p(
        long["entropy"].to_numpy(), dm.X.to_numpy(float), j, pd.factorize(long["scenario_id"], sort=True)[0],
        family="gaussian"))
    assert t.loc["examples[0]", "p_cluster"] < 0.01


def _terms(rows):
    return pd.DataFrame([dict(zip(["factor", "level", "coef", "separated", "p_cluster"], r)) for r in rows]).assign(
        model="m", benchmark="crows_pairs", effect_scale="log odds", outcome="stereotype_preferred")


def test_separated_terms_are_not_ranked_as_the_choice_that_moves_a_number_most():
    """The committed ranking put separated logit terms first (coefficient 53.13, SE ~53,000; two factors tied to
    1e-9, so the pick was arbitrary). Separated terms have no finite estimate: listed apart, never ranked."""
    t = _terms([("Intercept", "", 0.4, False, 0.1), ("examples", "2", 53.13, True, np.nan),
                ("choice_order", "reversed", 53.13, True, np.nan), ("answer_format", "label_dist", -27.0, True, np.nan),
                ("answer_format", "generated", -2.5, False, 1e-8), ("normalization", "mean", 0.34, False, 0.04)])
    by = analysis.importance_by_factor(t)
    ranked = by[by["status"] == "ranked"]
    assert list(ranked["factor"]) == ["answer_format", "normalization"] and list(ranked["rank"]) == [1, 2]
    assert ranked.iloc[0]["level"] == "generated" and ranked.iloc[0]["n_separated"] == 1
    sep = by[by["status"] == analysis.SEPARATED]
    assert set(sep["factor"]) == {"examples", "choice_order"} and sep["rank"].isna().all()
    from biaslab.papers.multiverse import findings
    text = findings.importance_findings(by)
    assert "answer_format (generated" in text and "not ranked (effect not estimable): examples (2)" in text


def test_specification_curve_labels_the_indicator_rows_and_marks_degenerate_universes():
    """The committed figure's indicator panel had no y labels: with sharey="row", clearing the second column's
    labels cleared the first's. The first column keeps them, later columns hide (never clear) them; the axes say
    their units and intervals; a degenerate universe is drawn as a grey cross with a legend entry."""
    from biaslab.plots import specification
    from biaslab.plots.figure_check import check_figure
    est = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "universe": ["paper", "wording=w1", "examples=2"] * 2,
                        "estimate": [0.6, 0.55, 1.0, 0.62, 0.0, 0.58], "ci_low": [0.5, 0.45, 0.96, 0.52, 0.0, 0.48],
                        "ci_high": [0.7, 0.65, 1.0, 0.72, 0.04, 0.68],
                        "responder_status": ["informative", "informative", "degenerate: modal answer", "informative",
                                             "degenerate: modal answer", "informative"]})
    fig = specification.specification_curve(est, "title", null=0.5, unit="share of pairs (0 to 1)")
    fig.canvas.draw()
    axes = np.array(fig.axes).reshape(2, 2)
    first = [t.get_text() for t in axes[1, 0].get_yticklabels() if t.get_visible()]
    assert first == ["examples=2", "wording=w1"]
    assert not any(t.get_visible() and t.get_text() for t in axes[1, 1].get_yticklabels())
    assert "share of pairs (0 to 1)" in axes[0, 0].get_ylabel() and "95 % CI" in axes[0, 0].get_ylabel()
    assert axes[1, 0].get_ylabel() and fig._suptitle.get_text() == "title" and not check_figure(fig)
    labels = [t.get_text() for t in axes[0, 0].get_legend().get_texts()]
    assert any("degenerate" in x for x in labels)
    assert any(ln.get_marker() == "x" for ln in axes[0, 0].lines)


def _crows_universe(universe, fmt, order, sp, n=24):
    return pd.DataFrame({"prompt_id": [f"c{i}" for i in range(n)], "model": "m", "universe": universe,
                         "answer_format": fmt, "choice_order": order, "stereotype_preferred": sp})


def test_degenerate_universes_are_kept_marked_and_left_out_of_the_agreement_counts():
    """CrowS-Pairs label-distribution universes gave exactly 0.000 or 1.000 (one position named for every pair) and
    counted as flips. The per-metric responder check (notebook 3's rules: a likelihood universe is not judged, a
    prompted one is judged on the position it names) marks them: verdict "not tested", excluded from the counts."""
    rng = np.random.default_rng(0)
    resp = {"crows_pairs": pd.concat([
        _crows_universe("paper", "likelihood", "original", rng.integers(0, 2, 24).astype(float)),
        _crows_universe("answer_format=label_dist", "label_dist", "original", np.zeros(24)),       # always "second"
        _crows_universe("examples=2", "label_dist", "reversed", np.zeros(24)),                       # always "first"
        _crows_universe("wording=w1", "label_dist", "original", rng.integers(0, 2, 24).astype(float))])}
    check = decisions.responder_table(resp, {})
    est = pd.DataFrame({"model": "m", "metric": "crows_en_stereotype_preferred", "null_value": 0.5,
                        "universe": ["paper", "answer_format=label_dist", "examples=2", "wording=w1"],
                        "estimate": [0.62, 0.0, 1.0, 0.4], "ci_low": [0.52, 0.0, 0.86, 0.2],
                        "ci_high": [0.72, 0.14, 1.0, 0.6], "p_value": [0.01, 1e-7, 1e-7, 0.5]})
    d = decisions.decide_estimates(est, check).set_index("universe")
    assert d.loc["paper", "responder_status"].startswith("not judged: the likelihood scheme")
    for u in ("answer_format=label_dist", "examples=2"):
        assert d.loc[u, "responder_status"].startswith("degenerate: modal answer")
        assert d.loc[u, "verdict"].startswith("not tested (degenerate responder") and d.loc[u, "estimate"] in (0, 1)
    assert d.loc["wording=w1", "responder_status"] == "informative"
    ag = analysis.agreement_with_paper(d.reset_index()).iloc[0]
    assert (ag["n_compared"], ag["n_excluded_degenerate"], ag["n_same_sign"], ag["sign_flips"]) == (1, 2, 0, 1)
    from biaslab.papers.multiverse import findings
    assert "2 not judged (degenerate responder for this metric) and left out" in findings.agreement_findings(
        ag.to_frame().T)


def test_multiverse_verdicts_are_the_verdict_layers_columns():
    """The multiverse decided with its own BH code ('to be replaced by stats.verdict once on main'); it now goes
    through the verdict layer: the same columns as every notebook, one exploratory BH family per model x metric
    over the universes that are tested."""
    from biaslab.stats import multiplicity
    from biaslab.stats import verdict as V
    p = [0.001, 0.02, 0.04, 0.3, 0.001, 0.5]
    est = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 2, "metric": "bbq_bias_ambig", "null_value": 0.0,
                        "universe": ["paper", "u1", "u2", "u3", "paper", "u1"], "estimate": 0.1,
                        "ci_low": -0.1, "ci_high": 0.3, "p_value": p})
    d = decisions.decide_estimates(est, None)
    assert list(d.columns[-len(V.VERDICT_COLUMNS):]) == V.VERDICT_COLUMNS
    assert d["family"].nunique() == 2 and (d["family_kind"] == "exploratory").all()
    adj = multiplicity.adjust(np.array(p[:4]), "fdr_bh")             # 0.004, 0.04, 0.053, 0.3
    np.testing.assert_allclose(d["p_adjusted"].iloc[:4], adj)
    # notebook 6 has no claim in the analysis plan: every universe is exploratory, read by the BH screen only
    assert (d["verdict"] == "exploratory").all()
    assert list(V.screen(d).iloc[:4]) == ["departs from the null"] * 2 + ["no departure shown"] * 2
    assert (d["responder_status"] == "not judged: no responder check for this metric").all()
    import inspect
    from biaslab.papers.multiverse import findings
    for mod in (analysis, decisions, findings, V):
        assert "VERDICT_CONTRACT" not in inspect.getsource(mod)


def test_a_paper_estimate_at_the_null_has_no_sign_to_flip():
    """Gemma's BBQ ambiguous bias score is 0.000 in the paper's universe: every nonzero estimate counted as a flip
    and the metric was marked 'sign flips' (a † in notebook 5). Sign agreement is undefined there, not a flip."""
    est = pd.DataFrame({"model": "m", "metric": "bbq_bias_ambig", "universe": ["paper", "u1", "u2", "u3", "u4"],
                        "estimate": [0.0, 0.1, -0.1, 0.05, -0.02], "null_value": 0.0, "ci_low": -0.3,
                        "ci_high": 0.3, "p_value": 0.6})
    ag = analysis.agreement_with_paper(decisions.decide_estimates(est, None)).iloc[0]
    assert ag["n_sign_compared"] == 0 and pd.isna(ag["share_same_sign"]) and ag["sign_flips"] == 0
    assert ag["sign_agreement"] == analysis.NULL_SIGN
    assert ag["robustness"].startswith("robust in verdict") and ag["n_same_verdict"] == 4
    from biaslab.papers.multiverse import findings
    assert "the sign cannot agree or disagree" in findings.agreement_findings(ag.to_frame().T)
    assert "sign undefined" in findings._readme_part(ag)


def test_group_preference_agreement_counts_rows_and_says_so():
    """The pooled group-preference row said '115 of 174 other universes': 174 were universe x class type x group
    rows. It now says what it counts, with the number of universes they come from."""
    rows = []
    for u in ("paper", "u1", "u2"):
        for g, e in (("A", 0.1), ("B", -0.2), ("C", 0.05)):
            rows.append({"model": "m", "metric": analysis.GROUP_PREFERENCE, "universe": u, "class_type": "race",
                         "group": g, "estimate": e * (-1 if (u, g) == ("u2", "A") else 1), "null_value": 0.0,
                         "ci_low": -0.5, "ci_high": 0.5, "p_value": 0.4})
    gp = decisions.decide_group_preference(pd.DataFrame(rows), None)
    ag = analysis.agreement_with_paper(gp, keys=("model", "metric", "class_type", "group"),
                                       unit=analysis.GROUP_ROWS).iloc[0]
    assert (ag["unit"], ag["n_universes"], ag["n_compared"], ag["n_same_sign"]) == (analysis.GROUP_ROWS, 2, 6, 5)
    from biaslab.papers.multiverse import findings
    text = findings.agreement_findings(ag.to_frame().T)
    assert "of 6 rows (universe × class type × group) from 2 other universes, 5 of 6 land" in text
    assert "other universes land" not in text


def test_summary_says_what_it_counts_and_gives_reasons_whole():
    """'69 universes' counted model x benchmark universes; a not-available reason was cut at 60 characters
    ('... `precisions` paramete'); the open-ended agreement did not say it rests on 14 of 48 matched items."""
    from biaslab.papers.multiverse import findings
    why = "not run: precision q4_gguf is not in this run's `precisions` parameter (float32, bfloat16)"
    universes = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "benchmark": "bbq",
                              "universe": ["paper", "u1", "u2"] * 2, "status": ["run", "run", why] * 2})
    ruted = pd.DataFrame([{"model": "a", "n_items": 48, "n_matched": 14, "n_unmatched": 32, "n_multiple": 2,
                           "agreement": 0.5, "agreement_ci_low": 0.23, "agreement_ci_high": 0.77, "kappa": 0.17}])
    costs = pd.DataFrame({"seconds": [1.0], "cache_misses": [0]})
    agreement = pd.DataFrame(columns=["model", "metric", "robustness"])
    lines = findings.summary_lines(universes, costs, agreement, None, None, ruted)
    assert lines[0].startswith("4 of 6 model × benchmark universes scored (2 model(s) × 1 benchmark(s), 3 universes "
                               "in each benchmark's design)") and f"2 × {why}" in lines[0]
    assert "on the 14 of 48 items whose open answer was matched (34 not: 32 unmatched, 2 naming several options)" \
        in lines[-1]
    readme = findings.readme_section(agreement.assign(n_compared=[]), pd.DataFrame(), ruted, universes)
    assert "50 % [23 %, 77 %] of the 14 of 48 items whose open answer was matched" in readme


def test_notebook_6_tags_its_findings_cells():
    """The HTML report puts cells tagged `findings` first; notebook 6 tagged none, so its report had no findings."""
    from biaslab import paths
    src = (paths.NOTEBOOKS_DIR / "06_multiverse.py").read_text()
    cells = src.split("# %%")
    tagged = [c for c in cells if c.startswith(' tags=["findings"]')]
    assert any("findings.summary_lines" in c for c in tagged)
    assert all("display(Markdown(" in c for c in tagged)


def test_stale_tables_are_named_and_an_empty_one_is_not_stale(tmp_path):
    from biaslab.papers.multiverse import findings
    t = findings.tables_dir(tmp_path)
    assert findings.stale(tmp_path) == "notebook 6 has not run there"
    t.mkdir(parents=True)
    pd.DataFrame({"model": ["m"], "n_universes": [3]}).to_csv(t / "agreement.csv", index=False)
    assert "agreement.csv predates the columns" in findings.stale(tmp_path)
    for name, cols in findings.CURRENT_COLUMNS.items():
        pd.DataFrame({c: [1] for c in cols}).to_csv(t / f"{name}.csv", index=False)
    (t / "importance_by_factor.csv").write_text("\n")                 # nothing was ranked
    assert findings.stale(tmp_path) is None
