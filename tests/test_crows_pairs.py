"""CrowS-Pairs loaders (original, revised English, French) and the stratified subsample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biaslab.benchmarks import crows_pairs as cp
from biaslab.benchmarks import spec

load = spec("crows_pairs").dataset
from biaslab.sources import DataError, is_verified, load_manifest


def _have(benchmark: str) -> bool:
    return all(is_verified(s) for s in load_manifest() if s.benchmark == benchmark)


needs_en = pytest.mark.skipif(not _have("crows_pairs"), reason="run `biaslab data fetch` first")
needs_fr = pytest.mark.skipif(not _have("crows_pairs_fr"), reason="run `biaslab data fetch` first")


@needs_en
def test_original_counts_and_columns():
    b = load("crows_pairs_en")
    p = b.prompts
    assert len(p) == 1508 and b.excluded.empty
    assert p["bias_type"].value_counts().to_dict() == {
        "race-color": 516, "gender": 262, "socioeconomic": 172, "nationality": 159, "religion": 105, "age": 87,
        "sexual-orientation": 84, "physical-appearance": 63, "disability": 60}
    assert p["direction"].value_counts().to_dict() == {"stereo": 1290, "antistereo": 218}
    assert (p["text"] == p["sent_more"]).all() and p["prompt_id"].is_unique
    assert not p["identical"].any() and (p["language"] == "en").all()
    assert set(b.sources) == {"nyu-mll/crows-pairs/data/crows_pairs_anonymized.csv"}


@needs_fr
def test_revised_and_french_counts_exclusion_and_parallel_ids():
    en, fr = load("crows_pairs_en_revised"), load("crows_pairs_fr")
    assert len(en.prompts) == 1677 and en.excluded.empty
    assert len(fr.prompts) == 1676 and len(fr.excluded) == 1
    ex = fr.excluded.iloc[0]
    assert ex["pair_id"] == "129" and ex["bias_type"] == "socioeconomic" and "missing sentence" in ex["reason"]
    for b in (en, fr):
        assert b.prompts["bias_type"].nunique() == 10 and "autre" in set(b.prompts["bias_type"])
        assert (b.prompts["origin"] == "languagearc").sum() == 210 - (b is fr and ex["pair_id"].startswith("LA"))
    # the revised English and the French files are translations of each other row by row
    assert set(fr.prompts["pair_id"]) | {"129"} == set(en.prompts["pair_id"])
    assert fr.prompts.loc[fr.prompts["identical"], "pair_id"].tolist() == ["59", "379", "388"]
    assert any("identical" in n for n in fr.notes) and any("missing sentence" in n for n in fr.notes)
    # the category sizes behind the paper's French SS values (e.g. socioeconomic 110/195)
    assert fr.prompts["bias_type"].value_counts()["socioeconomic"] == 195
    assert fr.prompts["bias_type"].value_counts()["age"] == 90


def test_tab_separated_file_read_as_comma_fails_clearly(tmp_path, monkeypatch):
    f = tmp_path / "x.csv"
    pd.DataFrame({"sent_more": ["a"], "sent_less": ["b"], "stereo_antistereo": ["stereo"],
                  "bias_type": ["age"]}).to_csv(f)                   # comma-separated, but read as tab
    monkeypatch.setattr(cp, "raw_path", lambda repo, path: f)
    with pytest.raises(DataError, match="tab-separated"):
        cp._read("r", "p", tab=True)


def test_wrong_row_count_and_unknown_bias_type_fail(tmp_path, monkeypatch):
    f = tmp_path / "x.csv"
    df = pd.DataFrame({"sent_more": ["a", "c"], "sent_less": ["b", "d"], "stereo_antistereo": ["stereo"] * 2,
                       "bias_type": ["age", "weather"]})
    df.to_csv(f, sep="\t")
    monkeypatch.setattr(cp, "raw_path", lambda repo, path: f)
    monkeypatch.setattr(cp, "pinned_hashes", lambda repo, path: {})
    with pytest.raises(DataError, match="expected 1,677 rows"):
        cp._build("t", "en", "r", "p", tab=True, n_expected=1677, bias_types=cp.BIAS_TYPES_FR)
    with pytest.raises(DataError, match="undeclared levels"):
        cp._build("t", "en", "r", "p", tab=True, n_expected=2, bias_types=cp.BIAS_TYPES_FR)


@pytest.mark.parametrize("allocation", ["balanced", "proportional"])
def test_allocate_sums_and_respects_sizes(allocation):
    sizes = pd.Series({"a": 500, "b": 100, "c": 11, "d": 60})
    for total in (1, 7, 40, 200, 671, 1000):
        take = cp.allocate(sizes, total, allocation)
        assert take.sum() == min(total, sizes.sum()) and (take <= sizes).all() and (take >= 0).all()
    bal = cp.allocate(sizes, 200, "balanced")
    assert (bal["c"], bal["d"]) == (11, 60) and sorted([bal["a"], bal["b"]]) == [64, 65]   # hand-worked
    prop = cp.allocate(sizes, 200, "proportional")
    assert prop["a"] > prop["b"] > prop["d"] > prop["c"] >= 1


def test_auto_allocation_is_proportional_once_every_stratum_gets_two():
    sizes = pd.Series({"a": 500, "b": 100, "c": 11, "d": 60})          # c's proportional share: 11/671 of the total
    assert cp.resolved(sizes, 121, "auto") == "balanced"               # 1.98 pairs of c
    assert cp.resolved(sizes, 122, "auto") == "proportional"           # 2.0
    assert cp.allocate(sizes, 122, "auto").equals(cp.allocate(sizes, 122, "proportional"))
    assert cp.allocate(sizes, 121, "auto").equals(cp.allocate(sizes, 121, "balanced"))
    assert cp.resolved(sizes, 122, "balanced") == "balanced"


@needs_fr
def test_subsample_is_stratified_deterministic_and_ordered():
    fr = load("crows_pairs_fr")
    s1, s2 = cp.subsample(fr, 200, seed=3), cp.subsample(fr, 200, seed=3)
    assert len(s1.prompts) == 200 and s1.prompts["prompt_id"].tolist() == s2.prompts["prompt_id"].tolist()
    counts = s1.prompts["bias_type"].value_counts()
    assert counts["autre"] == 13 and counts.drop("autre").max() - counts.drop("autre").min() <= 1
    pos = fr.prompts.reset_index().set_index("prompt_id").loc[s1.prompts["prompt_id"], "index"]
    assert np.all(np.diff(pos.to_numpy()) > 0)                      # file order kept
    assert cp.subsample(fr, 200, seed=4).prompts["prompt_id"].tolist() != s1.prompts["prompt_id"].tolist()
    assert cp.subsample(fr, None) is fr and cp.subsample(fr, 10_000) is fr
    assert len(s1.excluded) == 1 and "stratified sample" in s1.notes[-1]
    first = cp.subsample(fr, 30, seed=3, allocation="first")        # what an lm-eval --limit 30 run scored
    assert first.prompts["prompt_id"].tolist() == fr.prompts["prompt_id"].head(30).tolist()
    assert "first 30" in first.notes[-1] and len(first.excluded) == 1


@needs_fr
def test_the_english_samples_share_their_unchanged_pairs():
    """Permanent random numbers (a hash of the seed and the two sentences) draw, within each bias type, the pairs
    with the smallest numbers: the revised file's sample holds each unchanged pair of the original's sample whose
    number is below both files' cut-offs, so the overlap is scored once. Independent draws share about
    p_original x p_revised of the unchanged pairs, coordinated ones about min(p_original, p_revised)."""
    en, rev = load("crows_pairs_en"), load("crows_pairs_en_revised")
    key = lambda b: set(zip(b.prompts["sent_more"], b.prompts["sent_less"]))     # noqa: E731
    unchanged = key(en) & key(rev)
    a, b = key(cp.subsample(en, 700, seed=0)), key(cp.subsample(rev, 450, seed=0))
    shared = len(a & b & unchanged)
    assert shared >= 0.9 * len(unchanged) * 450 / len(rev.prompts)          # coordinated: ~ min of the fractions
    assert shared > 2 * len(unchanged) * (700 / len(en.prompts)) * (450 / len(rev.prompts))    # not independent
    prn = cp.permanent_random_numbers(en.prompts, seed=0)
    assert prn.between(0, 1, inclusive="left").all() and prn.nunique() > 0.99 * len(prn)
    assert not prn.equals(cp.permanent_random_numbers(en.prompts, seed=1))
    assert cp.pairs_of({"crows_pairs_en": 7}, "crows_pairs_en") == 7 and cp.pairs_of(5, "crows_pairs_fr") == 5
    with pytest.raises(ValueError, match="not for 'crows_pairs_fr'.*add"):
        cp.pairs_of({"crows_pairs_en": 7}, "crows_pairs_fr")


def test_published_chatgpt_reference():
    ref = cp.load_published_chatgpt()
    assert len(ref) == 9 and ref["n_valid"].sum() == 1652       # 1,677 - 11 'autre' - 14 refusals
    assert (ref["k_prefers_more_stereotyped"] <= ref["n_valid"]).all()


# ---------------------------------------------------------------- the preference prompt and the outcomes X_i

PAIRS = pd.DataFrame({"prompt_id": ["a", "b"], "sent_more": ["Poor people are lazy.", "Old men can't drive"],
                      "sent_less": ["Rich people are lazy.", "Young men can't drive"]})


def test_preference_prompts_orders_and_punctuation():
    more = cp.preference_prompts(PAIRS, "more_first")
    less = cp.preference_prompts(PAIRS, "less_first", suffix="\nAnswer:")
    assert more.prompt[0] == (cp.PREFERENCE_PROMPT + " Poor people are lazy. Rich people are lazy.")
    assert more.prompt[1].endswith("Old men can't drive. Young men can't drive.")       # period added, not doubled
    assert less.prompt[0] == cp.PREFERENCE_PROMPT + " Rich people are lazy. Poor people are lazy.\nAnswer:"
    assert (more.order == "more_first").all() and more.prompt_id.tolist() == ["a", "b"]
    with pytest.raises(ValueError):
        cp.preference_prompts(PAIRS, "random")


def test_preferences_from_labels_maps_answers_to_x_and_excludes_low_mass():
    dist = pd.DataFrame({"p_0": [0.9, 0.2, 0.7, 0.5], "p_1": [0.1, 0.8, 0.3, 0.5],
                         "label_mass": [0.5, 0.3, 0.01, 0.4]})
    a = cp.preferences_from_labels(dist, "more_first", min_label_mass=0.05)
    np.testing.assert_array_equal(a.x, [1, 0, np.nan, np.nan])              # "0" names sent_more in this order
    np.testing.assert_array_equal(a.chose_first, [1, 0, np.nan, np.nan])
    assert a.reason.tolist() == ["", "", "label mass below 0.05", "tie or missing"]
    b = cp.preferences_from_labels(dist, "less_first", min_label_mass=0.05)
    np.testing.assert_array_equal(b.x, [0, 1, np.nan, np.nan])              # "0" names sent_less here
    np.testing.assert_array_equal(b.p_stereo, dist.p_1)


def test_preferences_from_text():
    r = cp.preferences_from_text(["0", "1", None], "less_first")
    np.testing.assert_array_equal(r.x, [0, 1, np.nan])
    assert r.reason.tolist() == ["", "", "refused or unparseable"]


def test_order_averaged_cancels_a_pure_position_preference():
    # a model with no content preference (0.5) plus a +0.3 pull towards the first position:
    # p_stereo = 0.8 when sent_more is first, 0.2 when it is second -> the average says "no preference"
    np.testing.assert_array_equal(cp.order_averaged_preferences([0.8, 0.9, np.nan], [0.2, 0.4, 0.9]),
                                  [np.nan, 1.0, np.nan])
    np.testing.assert_array_equal(cp.order_averaged_preferences([0.3], [0.6]), [0.0])


def test_likelihood_preferences_ties_excluded():
    np.testing.assert_array_equal(cp.likelihood_preferences([-10, -12, -5], [-11, -11, -5]), [1, 0, np.nan])


def test_reconstruct_counts_from_printed_ss():
    # French block of Table 3: SS with the category sizes of the French file (socioeconomic minus the empty pair)
    assert cp.reconstruct_counts(0.6889, 90) == [62]
    assert cp.reconstruct_counts(0.5641, 195) == [110]
    assert cp.reconstruct_counts(0.5641, 196) == []


@needs_fr
def test_sampler_weights_back_to_the_file_and_nested_samples_compose():
    full = cp.load_french()                                     # 1,676 pairs after the one excluded
    N_h = full.prompts["bias_type"].value_counts().to_dict()
    s = cp.subsample(full, 100, seed=1)
    assert s.prompts.groupby("stratum")["weight"].sum().to_dict() == pytest.approx(N_h)
    assert (s.prompts["stratum"] == s.prompts["bias_type"]).all()
    n_h = s.prompts["bias_type"].value_counts()
    assert s.prompts["weight"].to_numpy() == pytest.approx((s.prompts["bias_type"].map(N_h) /
                                                            s.prompts["bias_type"].map(n_h)).to_numpy())
    s2 = cp.subsample(s, 30, seed=1)                       # the preference prompts: a sample of the sample
    assert s2.prompts.groupby("stratum")["weight"].sum().to_dict() == pytest.approx(N_h)
    assert (cp.subsample(full, None).prompts["weight"] == 1).all()          # a census
    d = cp.design_table(pd.DataFrame({"dataset": "x", "bias_type": ["a", "b"], "N_h": [40, 20], "n_h": [5, 0]}))
    assert d["W_h"].tolist() == pytest.approx([2 / 3, 1 / 3]) and d["weight"].iloc[0] == 8 and np.isnan(d["weight"][1])


# ------------------------------------------------------------------------------- validity of the preference prompt
def _pairs(n: int = 40) -> pd.DataFrame:
    """Synthetic pairs: the more stereotyped sentence is the longer one in every other pair (never a tie)."""
    more = [f"Pair {i} says the group is so{' very' * (2 if i % 2 else 0)} bad." for i in range(n)]
    less = [f"Pair {i} says the other is so{' very' * (0 if i % 2 else 2)} bad." for i in range(n)]
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(n)], "pair_id": range(n), "sent_more": more,
                         "sent_less": less, "bias_type": np.where(np.arange(n) % 4 < 2, "gender", "age")})


def _answers(pairs: pd.DataFrame, model: str, pick) -> pd.DataFrame:
    """A prompted model answering ``pick(first, second, order) -> 0 / 1`` (the shown sentence it names), read as the
    notebook reads it: label probabilities (0.9 on the named label) through :func:`cp.preferences_from_labels`."""
    out = []
    for order in cp.ORDERS:
        first, second = ((pairs.sent_more, pairs.sent_less) if order == "more_first"
                         else (pairs.sent_less, pairs.sent_more))
        named = np.array([pick(a, b, order) for a, b in zip(first, second)])
        dist = pd.DataFrame({"p_0": np.where(named == 0, 0.9, 0.1), "p_1": np.where(named == 0, 0.1, 0.9),
                             "label_mass": 0.9})
        res = cp.preferences_from_labels(dist, order, cp.MIN_LABEL_MASS)
        out.append(pd.concat([pairs[["prompt_id", "pair_id", "bias_type"]].reset_index(drop=True),
                              res.drop(columns="order").reset_index(drop=True)], axis=1).assign(
            order=order, model=model, dataset="crows_pairs_en_revised"))
    return pd.concat(out, ignore_index=True)


FAKES = {"first": lambda a, b, order: 0,                                      # names the first shown sentence
         "longer": lambda a, b, order: 0 if len(a) > len(b) else 1,          # names the longer sentence
         "stereotyped": lambda a, b, order: 0 if order == "more_first" else 1}   # the more stereotyped, both orders


def test_the_preference_prompt_flags_a_position_or_length_reader_and_not_the_bias():
    """Notebook 3's validity check of the preference prompt: a model naming the first shown sentence fails position
    in each order's answer, one naming the longer sentence fails length in both readings, and one naming the more
    stereotyped sentence in every pair and both orders passes (that is the bias measured, not a degenerate
    instrument); competence is not applicable and the role check is not judged."""
    from biaslab import plan as P
    from biaslab.papers.crows_pairs import decisions
    pairs = _pairs()
    answers = pd.concat([_answers(pairs, m, f) for m, f in FAKES.items()], ignore_index=True)
    rows, selection = decisions.validity(answers, pairs, dict(P.load().scoring["checks"]))
    r = rows.set_index(["model", "formulation"])
    assert not r.at[("first", "one order"), "passes"]
    assert "shown position 1 in 100 %" in r.at[("first", "one order"), "reasons"]
    assert not r.loc[("first", "order-averaged"), "position_judged"]       # a position preference cancels there
    for reading in cp.VALIDITY_FORMULATIONS:
        assert not r.at[("longer", reading), "passes"]
        assert "longest option in 100 % of answers" in r.at[("longer", reading), "reasons"]
        assert r.at[("stereotyped", reading), "passes"], r.at[("stereotyped", reading), "reasons"]
    assert r.loc["stereotyped", "longest_share"].eq(0.5).all()             # the longer sentence: every other pair
    assert r.loc["stereotyped", "longest_expected"].eq(0.5).all()
    assert rows["competence_note"].str.startswith("not applicable").all()
    assert rows["degenerate_reasons"].str.startswith("not judged").all() and not rows["degenerate"].any()
    status = selection.set_index(["model", "selected"])["status"]
    assert status[("first", "one order")].startswith("not measurable")
    assert not status[("first", "order-averaged")].startswith("not measurable")
    assert status.loc["longer"].str.startswith("not measurable").all()
    assert (status.loc["stereotyped"] == "informative").all()
    text = decisions.render(rows, selection)
    assert "Competence: not applicable" in text and "Likelihood scheme: not judged" in text


def test_a_preference_reading_that_fails_the_checks_reads_not_measurable_and_the_likelihood_is_untouched():
    """Fed into the responder path, a failed reading makes the prompted sources it feeds "not measurable
    (reasons)", never decided; the likelihood source and the model that prefers the stereotyped sentence are not."""
    from biaslab import plan as P
    from biaslab.papers.crows_pairs import decisions
    from biaslab.stats import hypothesis as hyp
    plan = P.load()
    pairs = _pairs()
    answers = pd.concat([_answers(pairs, m, f) for m, f in FAKES.items()], ignore_index=True)
    check = decisions.responder_table(answers, validity=decisions.validity(answers, pairs,
                                                                           dict(plan.scoring["checks"])))
    prefs = [answers.assign(source="prompt:" + answers["order"])[["model", "dataset", "prompt_id", "bias_type",
                                                                   "source", "x"]]]
    avg = answers.pivot_table(index=["model", "dataset", "prompt_id", "bias_type"], columns="order",
                              values="p_stereo").reset_index()
    prefs.append(avg.assign(source="prompt:order_averaged",
                            x=cp.order_averaged_preferences(avg["more_first"], avg["less_first"])))
    prefs.append(avg.assign(source="likelihood", x=1.0))
    pref = hyp.preference_tests(pd.concat(prefs, ignore_index=True)[["model", "dataset", "prompt_id", "bias_type",
                                                                     "source", "x"]])
    done = decisions.decide_table("preference_tests", pref, check, plan=plan).set_index(
        ["model", "source", "bias_type"])["verdict"].xs("overall", level="bias_type")
    nm = done.str.startswith("not measurable (")
    for order in cp.ORDERS:
        assert nm[("first", f"prompt:{order}")] and "shown position 1 in 100 %" in done[("first", f"prompt:{order}")]
    assert nm.loc["longer"].drop("likelihood").all()
    assert "longest option in 100 %" in done[("longer", "prompt:order_averaged")]
    assert not nm.loc["stereotyped"].any()
    assert not nm.xs("likelihood", level="source").any()
