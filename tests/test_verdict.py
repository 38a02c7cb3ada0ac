"""The verdict layer (biaslab.stats.verdict) and the per-metric responder checks, on hand-worked tables under a small
analysis plan: Holm within a claim's family and a Benjamini–Hochberg screen for exploratory rows (checked against
statsmodels and by hand); the graphical procedure (Bretz et al. 2009: Holm as its special case, their parallel
gatekeeping graph by hand, the power rule), descriptive, not-reached and not-decided instances; families across tables,
untested rows left out of their family, the null's interval test at its edge, Bayes-factor direction only over a
whole prior range, and the categorical verdict for undefined, degenerate, incomparable and interval-only rows."""

from __future__ import annotations

import functools
import itertools
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from biaslab import plan as P
from biaslab.stats import responders as R
from biaslab.stats import verdict as V

PLAN_TEXT = """
version: 1
issued: 2026-01-01
alpha: 0.05
procedure: holm
history: [{version: 1, date: 2026-01-01, change: hand-worked, reason: tests}]
rationale: a hand-worked plan
notebooks:
  nbt:
    title: a hand-worked notebook
    family_by: [kind]
    claims:
      - {id: headline, label: the headline, table: t, rows: {kind: headline}, estimate: est, p: p_value,
         ci: [ci_low, ci_high], null_value: 0, sides: two-sided, test: t,
         estimand: {items: all, variable: x, summary: mean, unparseable: none, degenerate: not tested, position: none}}
      - {id: headline-b, label: the headline in b, table: b, rows: {kind: headline}, estimate: est, p: p_value,
         ci: [ci_low, ci_high], null_value: 0, sides: two-sided, test: t,
         estimand: {items: all, variable: x, summary: mean, unparseable: none, degenerate: not tested, position: none}}
      - {id: headline-a, label: the headline in a, table: a, rows: {kind: headline}, estimate: est, p: p_value,
         ci: [ci_low, ci_high], null_value: 0, sides: two-sided, test: t,
         estimand: {items: all, variable: x, summary: mean, unparseable: none, degenerate: not tested, position: none}}
"""


@functools.cache
def _plan():
    f = Path(tempfile.mkdtemp()) / "plan.yaml"
    f.write_text(PLAN_TEXT)
    cols = ("kind", "est", "p_value", "ci_low", "ci_high")
    return P.load(f, tables={"nbt": {"t": cols, "a": cols, "b": cols}})


def dec(df, spec, table, *a, **k):
    return V.decide(df, spec, table, *a, notebook="nbt", plan=_plan(), **k)


def dect(tables):
    return V.decide_tables(tables, "nbt", plan=_plan())


def _effects(**kw):
    return V.Effects(estimate="est", null=0.0, **kw)


def _table(p, kind="headline", **cols):
    n = len(p)
    return pd.DataFrame({"model": [f"m{i}" for i in range(n)], "kind": kind, "est": 0.1, "p_value": p,
                         "ci_low": 0.05, "ci_high": 0.2, **cols})


def test_holm_and_bh_within_their_families_match_statsmodels_and_hand_values():
    # Holm by hand: sorted 0.01, 0.03, 0.04 -> 3*0.01, 2*0.03, max(0.06, 0.04) = 0.03, 0.06, 0.06
    d = dec(_table([0.01, 0.04, 0.03]), _effects(), "t")
    assert d["p_adjusted"].tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert d["p_adjust_method"].eq(V.BUDGET).all() and d["family_kind"].eq("confirmatory").all()
    assert d["verdict"].tolist() == ["distinguishable", "not distinguishable", "not distinguishable"]
    # the same p-values, exploratory: Benjamini-Hochberg (0.03, 0.04, 0.04 by hand)
    e = dec(_table([0.01, 0.04, 0.03], kind="other"), _effects(), "t")
    assert e["p_adjusted"].tolist() == pytest.approx([0.03, 0.04, 0.04])
    assert e["family"].eq("nbt · t: exploratory").all() and e["p_adjust_method"].eq("Benjamini-Hochberg (FDR)").all()
    assert e["verdict"].eq("exploratory").all() and not e["verdict"].str.contains("distinguishable").any()
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 0.2, 12)
    mixed = _table(p, kind=np.where(np.arange(12) < 5, "headline", "other"))
    m = dec(mixed, _effects(), "t")
    conf = m["family"] == "nbt · headline"
    assert np.allclose(m.loc[conf, "p_adjusted"], multipletests(p[:5], method="holm")[1])
    assert np.allclose(m.loc[~conf, "p_adjusted"], multipletests(p[5:], method="fdr_bh")[1])
    assert (m.loc[conf, "family_size"] == 5).all() and (m.loc[~conf, "family_size"] == 7).all()


def test_a_family_spans_tables_and_untested_rows_stay_out_of_it():
    a, b = _table([0.01, 0.02]), _table([0.03])
    d = dect({"a": (a, _effects()), "b": (b, _effects())})
    assert d["a"]["p_adjusted"].tolist() == pytest.approx(multipletests([0.01, 0.02, 0.03], method="holm")[1][:2])
    assert d["b"]["family_size"].iloc[0] == 3
    # a degenerate responder keeps its row but leaves the family (two tests left)
    status = pd.DataFrame({"model": ["m0"], "responder_status": ["degenerate: always 'yes'"]})
    one = dec(_table([0.01, 0.02, 0.03]), _effects(), "t", status)
    assert one["verdict"].iloc[0] == "not tested (degenerate responder: always 'yes')"
    assert np.isnan(one["p_adjusted"].iloc[0]) and (one["family_size"].iloc[1:] == 2).all()
    assert one["p_adjusted"].iloc[1:].tolist() == pytest.approx([0.04, 0.04])
    assert len(one) == 3 and one["responder_status"].iloc[1] == "not judged: no responder row for this model"


def test_interval_touching_the_null_does_not_exclude_it_and_missing_parts_are_na():
    ex = V.excludes_null([0.0, 0.01, np.nan, -0.2], [0.3, 0.3, 0.3, -0.1], [0.0, 0.0, 0.0, np.nan])
    assert ex.tolist()[:2] == [False, True] and ex.isna().tolist() == [False, False, True, True]
    d = dec(_table([0.5], ci_low=[0.0]).drop(columns="p_value"), V.Effects(estimate="est", p=None, null=0.0), "t")
    assert d["verdict"].iloc[0] == "not distinguishable" and d["p_adjust_method"].iloc[0] == V.INTERVAL_ONLY
    assert d["significant"].isna().all()


def test_bayes_factor_direction_needs_the_whole_prior_range():
    bf = [10.0, 10.0, 0.1, 0.1, 2.0, np.nan]
    lo = [4.0, 0.5, 0.05, 0.2, np.nan, 1.0]
    hi = [40.0, 12.0, 0.3, 0.5, np.nan, 2.0]
    assert V.bf_direction(bf, lo, hi).tolist() == ["H1", "inconclusive", "H0", "inconclusive", pd.NA, pd.NA]
    # one prior only (no range columns): no direction at all
    d = dec(_table([0.01], bf10=[1e6]), _effects(), "t")
    assert pd.isna(d["bf_direction"].iloc[0])
    d = dec(_table([0.01], bf10=[1e6], bf10_min=[50.0], bf10_max=[2e6]), _effects(), "t")
    assert d["bf_direction"].iloc[0] == "H1"
    d = dec(_table([0.01]).assign(log10_bf10=-2.0, bf10_min=0.001, bf10_max=0.2), _effects(), "t")
    assert d["bf_direction"].iloc[0] == "H0"


def test_undefined_incomparable_and_untested_rows():
    t = _table([0.01, 0.01, np.nan, np.nan], est=[np.nan, 0.1, 0.1, 0.1],
               ci_low=[np.nan, 0.05, np.nan, 0.05], ci_high=[np.nan, 0.2, np.nan, 0.2])
    spec = V.Effects(estimate="est", null=0.0,
                     undefined=lambda df: np.where(df["model"] == "m1", "no template left", ""))
    d = dec(t, spec, "t")
    assert d["verdict"].tolist() == ["undefined (estimate not computable)", "undefined (no template left)",
                                     "not tested (the test could not be computed here)", "distinguishable"]
    assert d["p_adjust_method"].iloc[3] == V.INTERVAL_ONLY and d["family_size"].iloc[3] == 0
    comp = pd.DataFrame({"comparable": [True, False], "comparability": ["", "label probabilities vs text"]})
    c = dec(_table([0.01, 0.01]), _effects(), "t", comparable=comp)
    assert c["verdict"].tolist() == ["distinguishable", "not tested (not comparable: label probabilities vs text)"]
    assert c["family_size"].iloc[0] == 1


def test_a_test_repeated_on_several_rows_counts_once_and_decide_is_idempotent():
    t = pd.DataFrame({"model": "m", "factor": ["a", "a", "a", "b", "b"], "level": list("xyzuv"),
                      "mean": 0.5, "wald_p": [0.01, 0.01, 0.01, 0.04, 0.04]})
    spec = V.Effects(estimate="mean", p=("wald_p",), ci=(), null=None, test=("model", "factor"))
    d = dec(t, spec, "bd")
    assert (d["family_size"] == 2).all()
    assert d["p_adjusted"].tolist() == pytest.approx([0.02] * 3 + [0.04] * 2)
    again = dec(d, spec, "bd")
    pd.testing.assert_frame_equal(again, d)
    assert list(d.columns[-len(V.VERDICT_COLUMNS):]) == V.VERDICT_COLUMNS


def test_pair_tables_name_the_degenerate_model():
    t = pd.DataFrame({"model_a": ["a", "a"], "model_b": ["b", "c"], "difference": [0.1, 0.2], "p_value": 0.01,
                      "ci_low": 0.05, "ci_high": 0.3})
    status = pd.DataFrame({"model": ["a", "b", "c"],
                           "responder_status": ["informative", "degenerate: one answer", "informative"]})
    d = dec(t, V.Effects(estimate="difference", null=0.0, pair=("model_a", "model_b")), "p", status)
    assert d["verdict"].tolist() == ["not tested (degenerate responder: b: one answer)", "exploratory"]
    # a status without its reasons still names the model and the word
    status.loc[1, "responder_status"] = "degenerate"
    d = dec(t, V.Effects(estimate="difference", null=0.0, pair=("model_a", "model_b")), "p", status)
    assert d["verdict"].iloc[0] == "not tested (degenerate responder: b: degenerate)"


# ----------------------------------------------------------------------------- responders, per metric

def _slot_three(n=200, seed=0):
    """Five choices; the top choice is always slot 3 but the probabilities are nearly uniform (SmolLM2 on the
    agentic five-choice prompts: normalized entropy ~0.96, label mass ~0.98)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(5, 400.0), size=n)
    p[:, 2] = p.max(axis=1) + 0.02
    p /= p.sum(axis=1, keepdims=True)
    df = pd.DataFrame(p, columns=[f"p_{j}" for j in range(1, 6)])
    return df.assign(model="m", label_mass=0.98, top_position=p.argmax(axis=1) + 1)


def test_a_constant_top_choice_is_degenerate_for_answers_but_not_for_probabilities():
    df = _slot_three()
    ans = R.responder_check(df, answer="top_position", n_options=5).iloc[0]
    prob = R.probability_check(df, [f"p_{j}" for j in range(1, 6)]).iloc[0]
    assert ans["degenerate"] and ans["modal_share"] == 1.0 and ans["reads"] == "answer"
    assert not prob["degenerate"] and prob["distribution_entropy"] > 0.95 and prob["reads"] == "probabilities"
    # all probability on one slot: degenerate for the probability metric too; and a tiny label mass
    onehot = df.assign(**{f"p_{j}": float(j == 3) for j in range(1, 6)})
    assert R.probability_check(onehot, [f"p_{j}" for j in range(1, 6)])["degenerate"].item()
    low = R.probability_check(df.assign(label_mass=0.05), [f"p_{j}" for j in range(1, 6)]).iloc[0]
    assert low["degenerate"] and low["reasons"].startswith("label mass 0.05")
    # the entropy of the mean distribution by hand
    q = df[[f"p_{j}" for j in range(1, 6)]].mean().to_numpy()
    assert prob["distribution_entropy"] == pytest.approx(-(q * np.log(q)).sum() / np.log(5))


def test_responder_status_combines_rows_of_one_metric_and_names_them():
    check = pd.DataFrame({"model": ["m", "m", "n"], "k": [3, 5, 3], "degenerate": [False, True, False],
                          "reasons": ["", "modal answer '3' in 100%", "not judged: n = 8 < 20"]})
    st = V.responder_status(check).set_index("model")["responder_status"]
    assert st["m"] == "degenerate: k = 5: modal answer '3' in 100%"
    assert st["n"] == "not judged: n = 8 < 20"
    per = check.assign(metric=["a", "b", "a"])
    assert V.metric_status(per, "a").set_index("model")["responder_status"].to_dict() == {
        "m": "informative", "n": "not judged: n = 8 < 20"}


# ----------------------------------------------------------------------------- the error budget

def _budget_rows():
    return pd.DataFrame({"notebook": ["A"] * 4 + ["B"] * 2, "family": ["A·1"] * 3 + ["A·2"] + ["B·1"] * 2,
                         "p": [0.004, 0.001, 0.2, 0.03, 0.02, 0.01]})


def test_budget_by_hand_two_notebooks_shares_and_holm_levels():
    # A: share 0.3 over 2 families -> level 0.05 * 0.3 / 2 = 0.0075. Family A·1, sorted 0.001, 0.004, 0.2: 0.001 <
    # 0.0075/3 = 0.0025 rejected; 0.004 >= 0.0075/2 = 0.00375 stops (it and 0.2 tested at 0.00375). Holm p 0.003,
    # 0.008, 0.2 -> project scale x 2 / 0.3: 0.02, 0.0533, 1 (capped). A·2: one test, 0.03 x 2 / 0.3 = 0.2.
    # B: share 0.7, one family at 0.035: 0.01 < 0.0175 and 0.02 < 0.035 both rejected; Holm p 0.02 -> 0.02 / 0.7.
    b = V.budget_decisions(_budget_rows(), 0.05, {"A": 0.3, "B": 0.7})
    assert b["alpha_family"].tolist() == pytest.approx([0.0075] * 4 + [0.035] * 2)
    assert b["n_families"].tolist() == [2] * 4 + [1] * 2 and b["family_size"].tolist() == [3, 3, 3, 1, 2, 2]
    assert b["p_adjusted"].tolist() == pytest.approx([0.008 / 0.15, 0.02, 1.0, 0.2, 0.02 / 0.7, 0.02 / 0.7])
    assert b["rejected"].tolist() == [False, True, False, False, True, True]
    assert b["tested_level"].tolist() == pytest.approx([0.00375, 0.0025, 0.00375, 0.0075, 0.035, 0.0175])
    # the families' levels spend exactly alpha (Bonferroni across families: the familywise error is <= alpha)
    assert b.drop_duplicates("family")["alpha_family"].sum() == pytest.approx(0.05)
    # more families in the run than rows show (a family with no claim row): the level shrinks
    four = V.budget_decisions(_budget_rows(), 0.05, {"A": 0.3, "B": 0.7}, {"A": 4})
    assert four.loc[0, "alpha_family"] == pytest.approx(0.00375) and four.loc[1, "p_adjusted"] == pytest.approx(0.04)
    with pytest.raises(ValueError, match="n_families below"):
        V.budget_decisions(_budget_rows(), 0.05, {"A": 0.3, "B": 0.7}, {"A": 1})
    with pytest.raises(KeyError, match="no budget share for notebook"):
        V.budget_decisions(_budget_rows(), 0.05, {"A": 1.0})


def test_budget_keeps_the_familywise_error_under_the_global_null():
    # 3 families per replication (two in A, one in B), independent uniform p under the null: by simulation the
    # chance of any rejection is <= alpha; exactly it is 1 - prod_f (1 - a_f / m_f)^m_f (Holm rejects iff min p <
    # a_f / m_f), which the simulated rate must match. Without the split over A's families it would be ~0.064.
    reps, rng = 1500, np.random.default_rng(7)
    one = _budget_rows()
    rep = np.repeat(np.arange(reps), len(one))
    rows = pd.DataFrame({"notebook": np.tile(one["notebook"], reps), "replicate": rep, "p": rng.uniform(size=len(rep)),
                         "family": np.tile(one["family"], reps) + "·" + rep.astype(str)})
    b = V.budget_decisions(rows, 0.05, {"A": 0.3, "B": 0.7})
    assert (b["n_families"] == np.where(b["notebook"] == "A", 2, 1)).all()
    fwer = b.groupby("replicate")["rejected"].any().mean()
    # Holm within each family is statsmodels' (the first 50 families, taken lazily: statsmodels' holm calls
    # gc.collect(), which walks every live object, and 4,500 group frames held alive made each call cost 0.6 s)
    for _, g in itertools.islice(b.groupby("family"), 50):
        scale = g["n_families"].iloc[0] / g["share"].iloc[0]
        assert np.allclose(g["p_adjusted"], np.minimum(1, multipletests(g["p"], method="holm")[1] * scale))
    exact = 1 - (1 - 0.0075 / 3) ** 3 * (1 - 0.0075) * (1 - 0.035 / 2) ** 2
    assert exact < 0.05 and abs(fwer - exact) < 4 * np.sqrt(exact * (1 - exact) / reps)


def test_a_plan_with_claims_in_several_notebooks_needs_shares_summing_to_one(tmp_path):
    two = PLAN_TEXT.replace("  nbt:", "  nbu:\n    title: u\n    family_by: [kind]\n    claims:\n"
                            "      - {id: u, label: u, table: t, rows: {}, "
                            "estimate: est, "
                            "p: p_value, ci: [], null_value: 0, sides: two-sided, test: t, estimand: {items: all, "
                            "variable: x, summary: mean, unparseable: none, degenerate: none, position: none}}\n  nbt:")
    cols = ("kind", "est", "p_value", "ci_low", "ci_high")
    TWO = {"nbt": {"t": cols, "a": cols, "b": cols}, "nbu": {"t": cols}}
    f = tmp_path / "p.yaml"
    f.write_text(two)
    with pytest.raises(ValueError, match=r"p\.yaml: budget: missing budget\.shares"):
        P.load(f, tables=TWO)
    f.write_text(two.replace("notebooks:", "budget: {shares: {nbt: 0.5, nbu: 0.4}}\nnotebooks:"))
    with pytest.raises(ValueError, match="claims sum to 0.9, not 1"):
        P.load(f, tables=TWO)
    f.write_text(two.replace("notebooks:", "budget: {shares: {nbt: 0.5, nbx: 0.5}}\nnotebooks:"))
    with pytest.raises(ValueError, match="budget.shares: unknown notebook 'nbx'"):
        P.load(f, tables=TWO)
    f.write_text(two.replace("notebooks:", "budget: {shares: {nbt: 0.25, nbu: 0.75}}\nnotebooks:"))
    assert P.load(f, tables=TWO).share("nbu") == 0.75
    assert P.load().shares and sum(P.load().shares.values()) == pytest.approx(1)


def _step_down_levels(p, a):
    """Holm's step-down walked by hand: the level each rank was tested at."""
    order, m, level = np.argsort(p, kind="stable"), len(p), np.empty(len(p))
    stop = None
    for r, i in enumerate(order, start=1):
        if stop is None and not p[i] < a / (m - r + 1):
            stop = r
        level[i] = a / (m - (stop or r) + 1)
    return level


def test_the_adjusted_interval_is_dual_to_the_test_at_its_holm_level():
    from scipy import stats
    rng = np.random.default_rng(11)
    for trial in range(12):
        n = 6
        est, se = rng.normal(0, 1, n), rng.uniform(0.2, 0.6, n)
        dfs = rng.choice([9.0, 29.0, np.inf], n)
        p = 2 * stats.t.sf(np.abs(est / se), dfs)
        t = pd.DataFrame({"model": "m", "kind": "headline", "est": est, "se": se, "df": dfs, "p_value": p,
                          "ci_low": est - 1.96 * se, "ci_high": est + 1.96 * se})
        t.loc[0, "p_value"] = min(1.0, p[0] * 1.3)          # a bootstrap p: not the t test's, no dual interval
        d = dec(t, _effects(), "t")
        fam = d.iloc[0]
        assert fam["n_families"] == 1 and fam["share"] == 1 and fam["alpha_family"] == pytest.approx(0.05)
        level = _step_down_levels(d["p_value"].to_numpy(), 0.05)
        assert np.allclose(d["ci_level"], 1 - level)
        assert pd.isna(d.loc[0, "ci_adj_low"])
        assert d.loc[0, "ci_adj_note"].startswith("no dual interval computed: this row's p")
        rest = d.iloc[1:]
        q = stats.t.ppf(1 - level[1:] / 2, rest["df"])
        assert np.allclose(rest["ci_adj_low"], rest["est"] - q * rest["se"])
        excl = (rest["ci_adj_low"] > 0) | (rest["ci_adj_high"] < 0)
        assert (excl == (rest["verdict"] == "distinguishable")).all(), trial
    # the standard error can come from the statistic; one-sided claims get a one-sided interval
    one = _table([2 * stats.t.sf(2.5, 20)], est=[0.5], statistic=[2.5], df=[20.0])
    d = dec(one, _effects(), "t")
    assert d["ci_adj_low"].iloc[0] == pytest.approx(0.5 - stats.t.ppf(0.975, 20) * 0.2)
    # an untested row has no adjusted interval
    status = pd.DataFrame({"model": ["m0"], "responder_status": ["degenerate: always 'yes'"]})
    u = dec(_table([0.01]), _effects(), "t", status)
    assert u["ci_adj_note"].iloc[0] == "not tested: no adjusted interval" and pd.isna(u["ci_level"].iloc[0])


def test_a_row_without_variance_is_not_estimable_never_tested_or_significant():
    """Zero variance is no certainty: the producer's "not estimable (…)" note (biaslab.stats.clustered.without_variance)
    becomes the verdict; the row has no p, no interval, no place in its family and no ``significant``, confirmatory
    or exploratory; a row whose p comes from a test with a size keeps it even where its interval is not estimable."""
    from biaslab.stats import clustered as C
    r = C.mean_inference(np.ones(12), np.repeat(np.arange(6), 2))
    assert r["ci_method"] == r["p_method"] == "not estimable (no variation in 12 items)"
    t = pd.DataFrame([{"model": "m0", "kind": "headline", "est": r["estimate"], "p_value": r["p_value"],
                       "ci_low": r["ci_low"], "ci_high": r["ci_high"], "ci_method": r["ci_method"]},
                      {"model": "m1", "kind": "headline", "est": 0.1, "p_value": 0.01, "ci_low": 0.05,
                       "ci_high": 0.2, "ci_method": "t"}])
    for kind in ("headline", "other"):
        d = dec(t.assign(kind=kind), _effects(), "t")
        assert d["verdict"].iloc[0] == "not estimable (no variation in 12 items)"
        assert d["significant"].isna().iloc[0] and np.isnan(d["p_adjusted"].iloc[0])
        assert d["family_size"].iloc[1] == 1 and V.screen(d).iloc[0] == d["verdict"].iloc[0]
    exact = dec(t.assign(kind="other", p_value=[0.002, 0.01]), _effects(), "t")
    assert exact["verdict"].eq("exploratory").all() and exact["significant"].all()


# ----------------------------------------------------------------------------- the graphical procedure

from biaslab.stats import multiplicity as M                      # noqa: E402
from biaslab.stats import power as W                             # noqa: E402


def test_the_graphical_procedure_with_holms_graph_is_holm():
    """Equal weights and a complete graph with equal transitions (Bretz et al. 2009, section 2) reproduce Holm's
    adjusted p, rejections and step-down levels (statsmodels' holm; the levels walked by hand)."""
    rng = np.random.default_rng(3)
    for trial in range(40):          # m = 1..6, each several times
        m = int(rng.integers(1, 7))
        p = rng.uniform(0, 0.06, m) ** rng.choice([1, 2])
        w, g = M.holm_graph(m)
        r = M.graphical(p, w, g, 0.05)
        assert np.allclose(r["p_adjusted"], multipletests(p, method="holm")[1]), (trial, p)
        assert (r["rejected"] == (multipletests(p, alpha=0.05, method="holm")[0])).all(), (trial, p)
        assert np.allclose(r["level"], _step_down_levels(p, 0.05)), (trial, p)
    # gMCP's example (BonferroniHolm(5), p = 0.01, 0.02, 0.04, 0.04, 0.7)
    r = M.graphical([0.01, 0.02, 0.04, 0.04, 0.7], *M.holm_graph(5), 0.05)
    assert r["p_adjusted"].tolist() == pytest.approx([0.05, 0.08, 0.12, 0.12, 0.7])
    assert r["rejected"].tolist() == [True, False, False, False, False]


def test_the_graphical_procedure_by_hand_on_bretz_et_als_parallel_gatekeeping_graph():
    """Two primary hypotheses H1, H2 (weight 1/2 each), each passing its level to its secondary (H1 -> H3, H2 -> H4),
    each secondary passing on to the other primary (H3 -> H2, H4 -> H1); p = 0.01, 0.005, 0.015, 0.022 at alpha
    0.025. By hand (Algorithm 1): H1, H2 at 0.0125 are both rejected; H3 and H4 then get 0.0125 each (H1's and H2's
    levels), 0.015 and 0.022 exceed it: stop. Adjusted p: H2 0.005/0.5 = 0.01; H1 0.01/0.5 = 0.02; then H3
    0.015/0.5 = 0.03; H4, alone with weight 1, 0.022, raised to the running maximum 0.03."""
    g = np.array([[0, 0, 1, 0], [0, 0, 0, 1], [0, 1, 0, 0], [1, 0, 0, 0]], dtype=float)
    r = M.graphical([0.01, 0.005, 0.015, 0.022], [0.5, 0.5, 0, 0], g, 0.025)
    assert r["rejected"].tolist() == [True, True, False, False]
    assert r["p_adjusted"].tolist() == pytest.approx([0.02, 0.01, 0.03, 0.03])
    assert r["level"].tolist() == pytest.approx([0.0125] * 4)
    # a fixed sequence (H1 then H2): H2 is tested only once H1 is rejected; otherwise its level stays 0
    seq = np.array([[0, 1], [0, 0]], dtype=float)
    assert M.graphical([0.03, 0.001], [1, 0], seq, 0.05)["rejected"].tolist() == [True, True]
    stuck = M.graphical([0.06, 0.001], [1, 0], seq, 0.05)
    assert stuck["rejected"].tolist() == [False, False] and stuck["level"].tolist() == [0.05, 0.0]
    assert stuck["p_adjusted"].tolist() == pytest.approx([0.06, 0.06])


def test_the_power_rule_rejects_only_where_the_level_reached_is_powered_and_passes_nothing_else():
    seq = np.array([[0, 1], [0, 0]], dtype=float)
    # H1's p is tiny, but its level 0.05 is below the 0.06 its test needs: not rejected, H2 never reached
    r = M.graphical([1e-6, 1e-6], [1, 0], seq, 0.05, min_level=[0.06, 0.0])
    assert r["rejected"].tolist() == [False, False] and r["level"].tolist() == [0.05, 0.0]
    # under any graph the adjusted p is the smallest alpha that rejects: p_adjusted <= alpha exactly when rejected
    rng = np.random.default_rng(5)
    for trial in range(300):
        m = int(rng.integers(2, 6))
        w = rng.dirichlet(np.ones(m)) * rng.choice([1.0, 0.7])
        g = rng.dirichlet(np.ones(m), size=m) * rng.uniform(0.5, 1.0, (m, 1))
        np.fill_diagonal(g, 0.0)
        p, need = rng.uniform(0, 0.05, m) ** 1.5, rng.uniform(0, 0.03, m) * (rng.random(m) < 0.5)
        r = M.graphical(p, w, g, 0.05, need)
        assert ((r["p_adjusted"] <= 0.05) == r["rejected"]).all(), trial
        assert (r["level"][r["rejected"]] >= need[r["rejected"]]).all()
        plain = M.graphical(p, w, g, 0.05)
        assert not (r["rejected"] & ~plain["rejected"]).any()        # the rule only ever rejects less


def test_the_instance_graph_splits_a_claims_weight_and_passes_level_along_then():
    w, g = M.expand_graph(["P", "S", "S", "T"], {"P": 1, "S": 0, "T": 0}, {"P": {"S": 1}, "S": {"T": 0.5}})
    assert w.tolist() == [1, 0, 0, 0]
    assert g[0].tolist() == [0, 0.5, 0.5, 0]                        # P's level to S's two instances, equally
    assert g[1].tolist() == [0, 0, 0.5, 0.5] and g[3].tolist() == [0, 0, 0, 0]     # half to T, half to the sibling
    # a claim without an instance here leaves the claim graph: its weight goes where its edges go
    w, g = M.expand_graph(["S", "S"], {"P": 1, "S": 0}, {"P": {"S": 1}})
    assert w.tolist() == [0.5, 0.5] and g.tolist() == [[0, 1], [1, 0]]
    # one claim, no then: Holm
    w, g = M.expand_graph(["S"] * 3, {"S": 1}, {})
    assert np.allclose(w, M.holm_graph(3)[0]) and np.allclose(g, M.holm_graph(3)[1])


GRAPH_PLAN = """
version: 1
issued: 2026-01-01
alpha: 0.05
procedure: graphical
history: [{version: 1, date: 2026-01-01, change: hand-worked, reason: tests}]
rationale: a hand-worked graph
notebooks:
  nbg:
    title: a hand-worked graph
    family_by: [kind]
    families: {default: [f1]}
    claims:
      - {id: prim, label: the primary, table: t, rows: {which: prim}, estimate: est, p: p_value,
         ci: [ci_low, ci_high], null_value: 0, sides: two-sided, test: z,
         estimand: {items: all, variable: x, summary: mean, unparseable: none, degenerate: not tested, position: none},
         sesoi: 0.5, sesoi_rationale: by hand, weight: 1, then: {sec: 1},
         design: {default: {model: z, n: 100, sd: 1, source: by hand}}}
      - {id: sec, label: the secondary, table: t, rows: {which: sec}, estimate: est, p: p_value,
         ci: [ci_low, ci_high], null_value: 0, sides: two-sided, test: z,
         estimand: {items: all, variable: x, summary: mean, unparseable: none, degenerate: not tested, position: none},
         sesoi: 0.5, sesoi_rationale: by hand, weight: 0,
         design: {default: {model: z, n: 100, se: SEC_SE, source: by hand}}}
"""


def _graph_decide(rows, sec_se, profile="default"):
    f = Path(tempfile.mkdtemp()) / "plan.yaml"
    f.write_text(GRAPH_PLAN.replace("SEC_SE", str(sec_se)))
    cols = ("kind", "which", "est", "p_value", "ci_low", "ci_high")
    plan = P.load(f, tables={"nbg": {"t": cols}}, profile=profile)
    t = pd.DataFrame(rows, columns=["which", "p_value"]).assign(kind="f1", est=0.3, ci_low=0.1, ci_high=0.5,
                                                                model=[f"m{i}" for i in range(len(rows))])
    return V.decide(t, V.Effects(estimate="est", null=0.0), "t", "informative", notebook="nbg", plan=plan), plan


def test_a_graph_tests_the_secondary_only_once_the_primary_is_rejected():
    d, _ = _graph_decide([("prim", 0.001), ("sec", 0.01)], 0.1)
    assert d["verdict"].tolist() == ["distinguishable", "distinguishable"]
    assert d["tested_level"].tolist() == pytest.approx([0.05, 0.05]) and d["sesoi"].tolist() == [0.5, 0.5]
    assert d["ci_level"].tolist() == pytest.approx([0.95, 0.95])
    assert d["power"].iloc[1] == pytest.approx(W.power_t(0.5, 0.1, None, 0.05))
    d, _ = _graph_decide([("prim", 0.2), ("sec", 0.001)], 0.1)
    assert d["verdict"].tolist() == ["not distinguishable",
                                     "not reached (α not propagated: `prim` was not rejected)"]
    assert d["tested_level"].iloc[1] == 0 and pd.isna(d["ci_level"].iloc[1]) and pd.isna(d["significant"].iloc[1])
    assert d["ci_adj_note"].iloc[1] == "not reached: no adjusted interval"


def test_an_instance_without_power_at_its_planned_level_is_descriptive_and_says_which_n_would_power_it():
    d, _ = _graph_decide([("prim", 0.001), ("sec", 1e-6)], 0.5)
    pw, n = W.power_t(0.5, 0.5, None, 0.05), W.n_for_power({"model": "z", "n": 100, "se": 0.5}, 0.5, 0.05)
    assert d["verdict"].iloc[1] == (f"descriptive (power {pw:.2f} for SESOI 0.5 at level 0.05; "
                                    f"n ≈ {int(float(f'{n:.2g}')):,} would power it)")
    assert d["verdict"].iloc[0] == "distinguishable" and d["family_size"].tolist() == [1, 1]
    assert pd.isna(d["p_adjusted"].iloc[1]) and pd.isna(d["tested_level"].iloc[1])
    assert d["planned_level"].iloc[1] == pytest.approx(0.05) and d["power"].iloc[1] == pytest.approx(pw)
    # a profile the plan has no design or family for decides nothing
    s, _ = _graph_decide([("prim", 0.001), ("sec", 1e-6)], 0.1, profile="smoke")
    assert s["verdict"].str.startswith("descriptive (family f1 is not among the plan's families").all()


def test_an_instance_whose_level_reached_is_below_its_power_is_not_decided_and_passes_nothing_on():
    # two primaries, each passing its level to the secondary; the secondary is powered at 0.05 (both primaries
    # rejected: its planned level) but not at the 0.025 one rejection gives it (effect / SE = 2.9: power 0.83 vs 0.74)
    se = 0.5 / 2.9
    d, _ = _graph_decide([("prim", 0.001), ("prim", 0.4), ("sec", 1e-6)], se)
    assert d["planned_level"].iloc[2] == pytest.approx(0.05)
    pw = W.power_t(0.5, se, None, 0.025)
    assert d["verdict"].tolist() == ["distinguishable", "not distinguishable",
                                     f"not decided (power {pw:.2f} for SESOI 0.5 at its tested level 0.025)"]
    assert d["tested_level"].iloc[2] == pytest.approx(0.025) and pd.isna(d["significant"].iloc[2])
    both, _ = _graph_decide([("prim", 0.001), ("prim", 0.002), ("sec", 1e-6)], se)
    assert both["verdict"].tolist() == ["distinguishable"] * 3


def test_the_budget_applies_the_plans_graph_in_every_family():
    rows = pd.DataFrame({"notebook": "A", "family": ["f1", "f1", "f2", "f2"], "claim": ["P", "S", "P", "S"],
                         "p": [0.001, 0.01, 0.04, 0.001]})
    b = V.budget_decisions(rows, 0.05, {"A": 1.0}, graphs={"A": ({"P": 1, "S": 0}, {"P": {"S": 1}})})
    # each family at 0.025: f1 rejects P, then S at 0.025; f2's P (0.04) fails, so S is never reached
    assert b["rejected"].tolist() == [True, True, False, False]
    assert b["tested_level"].tolist() == pytest.approx([0.025, 0.025, 0.025, 0.0])
    assert b["p_adjusted"].tolist() == pytest.approx([0.002, 0.02, 0.08, 0.08])
