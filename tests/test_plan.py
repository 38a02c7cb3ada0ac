"""The analysis plan (analysis_plan.yaml, biaslab.plan) and what it decides: its shape (at most three claims per
notebook, every estimand field), the MANIFEST hash and the "plan changed" note, one verdict per test across
notebooks, claim sentences that agree with their rows and stay short, and the contradictions the plan removed
(each test below fails on the tables and wording the project had before the plan)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from biaslab.report import wording as W
from biaslab import plan as P
from biaslab.report import headline
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs"


def test_the_shipped_plan_is_valid_and_small():
    plan = P.load()
    assert plan.version and plan.rationale and plan.procedure == "graphical"
    for nb in plan.notebooks:
        assert len(plan.of(nb)) <= P.MAX_CLAIMS
    for c in plan.claims:
        assert set(P.ESTIMAND_FIELDS) <= set(c.estimand), c.id
    # comparisons of models on the headline metrics are notebook 5's only
    assert {c.notebook for c in plan.claims if c.table == "paired_differences"} == {"05_compare"}
    assert plan.render("05_compare").count("\n- `") == len(plan.of("05_compare"))
    assert "no confirmatory claim" in plan.render("06_multiverse")


def test_a_bad_plan_is_refused_naming_file_and_claim(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(P.DEFAULT.read_text().replace(
        "        label: LPBS (eq. 3), original English file\n", ""))
    with pytest.raises(ValueError, match=r"p\.yaml: notebooks\.03_crows_pairs_bayes\.claims\[0\]: missing key\(s\) "
                                         "label"):
        P.load(f)
    with pytest.raises(FileNotFoundError, match="analysis plan"):
        P.load(tmp_path / "missing.yaml")


def test_plan_changed_since_the_manifest(tmp_path):
    f = tmp_path / "plan.yaml"
    shutil.copy(P.DEFAULT, f)
    manifest = {"analysis_plan": P.load(f).entry()}
    assert manifest["analysis_plan"]["sha256"] == P.load(f).sha256 and P.changed_since(manifest) == ""
    f.write_text(f.read_text().replace("alpha: 0.05", "alpha: 0.01"))
    assert P.changed_since(manifest).startswith(P.CHANGED)
    assert "no analysis plan recorded" in P.changed_since({"notebook": "x"})


def test_verify_prints_the_plan_note(tmp_path):
    from biaslab import cli
    f = tmp_path / "plan.yaml"
    shutil.copy(P.DEFAULT, f)
    (tmp_path / "MANIFEST.json").write_text(pd.Series({"analysis_plan": P.load(f).entry()}).to_json())
    assert cli.plan_note(tmp_path) == ""
    f.write_text(f.read_text() + "\n# edited after the run\n")
    assert cli.plan_note(tmp_path).startswith(P.CHANGED)


@pytest.fixture(scope="module")
def claims() -> pd.DataFrame:
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    return headline.claim_rows(OUT, PLAN)


def _decided_tables():
    from biaslab.papers import compare
    from biaslab.papers.crows_pairs import decisions as D3
    from biaslab.papers.multifactor import decisions as D1
    r = lambda f, s: pd.read_csv(OUT / f / "tables" / f"{s}.csv")      # noqa: E731
    nb1 = D1.decide("ssqa", {"paired_comparisons": r("01_multifactor/ssqa", "paired_comparisons")},
                    r("01_multifactor/ssqa", "responders"), plan=PLAN)["paired_comparisons"]
    nb3 = D3.decide(r("03_crows_pairs_bayes", "likelihood_tests"), None,
                    r("03_crows_pairs_bayes", "paired_comparisons"), plan=PLAN)["paired_comparisons"]
    nb5 = compare.decide_pairs(r("05_compare", "paired_differences"), r("05_compare", "responder_status"), plan=PLAN)
    return nb1, nb3, nb5


def test_one_test_has_one_verdict_in_every_notebook(claims):
    """The McNemar SmolLM2 vs Gemma on CrowS-Pairs EN revised was "distinguishable" in notebook 3 (BH over 6) and
    "not distinguishable" in notebook 5 (Holm over 8); the SSQA Granite–Llama contrast was Holm over 2 in notebook 1
    and over 8 in notebook 5. Now notebook 5 decides, the others show it as exploratory and say so."""
    nb1, nb3, nb5 = _decided_tables()
    assert not nb3["verdict"].isin(["distinguishable", "not distinguishable"]).any()
    assert not nb1["verdict"].isin(["distinguishable", "not distinguishable"]).any()
    en = nb3[(nb3["dataset"] == "crows_pairs_en") & (nb3["outcome"] == "likelihood preference X_i")]
    assert en["verdict"].iloc[0] == "exploratory (decided in 05_compare, claim crows-en-share)"
    assert nb1["verdict"].iloc[0] == "exploratory (decided in 05_compare, claim ssqa-deviation-rate)"
    rev = nb5[nb5["metric"] == "crows_en_revised_stereotype_preferred"]
    assert rev["verdict"].eq("exploratory").all()
    # the same p everywhere it is shown
    g = nb5[(nb5["metric"] == "ssqa_deviation_rate") & (nb5["model_a"] == "granite-3.0-8b")]
    assert g["p_value"].iloc[0] == pytest.approx(nb1["p_value"].iloc[0])


def test_only_claims_are_decided_and_the_readme_counts_them(claims):
    """306 "distinguishable" verdicts (17 Holm, 271 BH, 18 on intervals) became the claims' only."""
    n_dist = int((claims["verdict"] == "distinguishable").sum())
    block = headline.render(OUT, PLAN)
    assert block.count("| distinguishable") == n_dist
    assert len(re.findall(r"(?<!not )distinguishable", block)) == n_dist
    assert set(claims["claim"]) - {""} <= {c.id for c in PLAN.claims}


def test_claim_sentences_agree_with_their_rows_and_are_short(claims):
    from biaslab.papers.compare import tables as T
    nb5 = _decided_tables()[2]
    plan = PLAN
    text = W.claim_findings([nb5], plan.of(T.NOTEBOOK))
    # the sentences come in the plan's claim order (W.claim_findings), not the table's
    rows = pd.concat([nb5[nb5["claim"] == c.id] for c in plan.of(T.NOTEBOOK)])
    assert len(rows) == int((nb5["claim"] != "").sum())
    assert len(text.splitlines()) == len(rows)
    for line, r in zip(text.splitlines(), rows.to_dict("records")):
        assert len(line.removeprefix("- ").split()) <= 35, line
        assert f"`{r['claim']}` {r['model_a']} − {r['model_b']}:" in line
        head = r["verdict"].split(" (")[0]
        assert head in line
        if r["verdict"] == "distinguishable":
            assert "not distinguishable" not in line
        assert W.num(r["difference"]) in line                         # the row's estimate, with its sign
    assert text.count("distinguishable from") - text.count("not distinguishable from") == \
        int((rows["verdict"] == "distinguishable").sum())


def test_no_sentence_code_says_undetected_or_cannot_be_detected():
    """MDEs are power statements ("the design had 80 % power for effects of at least X")."""
    out = subprocess.run(["grep", "-rn", r"cannot be detected\|undetected", str(ROOT / "lib"), str(ROOT / "notebooks"),
                          "--include=*.py"], capture_output=True, text=True)
    assert out.stdout == "", out.stdout
    row = {"power": 0.83, "sesoi": 0.1, "tested_level": 0.0008, "ci_level": 0.9992}
    assert W.power_at_level(row) == "power 0.83 for an effect of 0.1 at level 0.0008"
    assert W.power_at_level({"mde": 0.071, "ci_level": 0.9992}) == ""      # an MDE at 0.05 is not quoted


def test_calm_claim_reads_the_eq1_score_not_a_deviation_rate(claims):
    """Notebook 1's CALM paired difference once called accuracy a "deviation rate"; the only CALM sentence now is
    the plan's eq.-1 claim, worded from its own row."""
    from biaslab.papers.calm import decisions as D2
    from biaslab.papers.calm import findings as F2
    bs = D2.decide(pd.read_csv(OUT / "02_calm/tables/bias_scores.csv"), plan=PLAN)
    text = F2.bias_findings(bs, plan=PLAN)
    assert "deviation" not in text and text.count("`calm-eq1`") == int((bs["claim"] == "calm-eq1").sum())


def test_exploratory_findings_make_no_decision():
    """KS tests, prompted preferences, position tests: no sentence calls them distinguishable ("KS … distinguishable
    in the sentence that says it ignores pairing"; "evidence for a preference" beside "answers by position")."""
    import inspect
    from biaslab.papers.agentic import findings as F4
    from biaslab.papers.crows_pairs import findings as F3
    from biaslab.papers.multifactor import findings as F1
    for mod in (F1, F3, F4):
        src = inspect.getsource(mod)
        assert "KS test" not in src and "evidence for" not in src and "first in the biased direction" not in src


def test_crows_headings_count_the_tables_pairs_not_the_release():
    """Notebook 3's headings said "French CrowS-Pairs (1,677 pairs)" over tables of 1,676 and 1,673 pairs: the count
    in a heading is the pooled row's n of the table it heads."""
    from biaslab.papers.crows_pairs import findings as F3
    t = pd.DataFrame({"bias_type": ["overall", "age"], "n": [1676, 87]})
    assert F3.dataset_title("crows_pairs_fr", t) == "French CrowS-Pairs (1,676 pairs)"
    assert F3.dataset_title("crows_pairs_fr", t.assign(n=[1673, 87])) == "French CrowS-Pairs (1,673 pairs)"
    assert F3.dataset_title("crows_pairs_fr") == "French CrowS-Pairs"
    src = (ROOT / "notebooks" / "03_crows_pairs_bayes.py").read_text()
    assert not re.search(r"CrowS-Pairs \([^)]*1,677 pairs\)", src)
    assert "1,677" not in " ".join(F3.DATASET_NAMES.values())


def test_no_nan_in_the_power_sentence():
    """Notebook 3 served "only when |π − 0.5| ≥ nan" for a bias type of 4 pairs: an undefined MDE says so."""
    from biaslab.papers.crows_pairs import findings as F3
    from biaslab.stats import power
    rows = pd.DataFrame([power.power_row("crows_pairs_en", "smoke", "SS vs 0.5, pooled", 40, 0.222),
                         power.power_row("crows_pairs_en", "smoke", "SS vs 0.5, typical bias type", 4, float("nan"),
                                         note="undefined: too few pairs for the exact test")])
    text = F3.power_findings(rows, "crows_pairs_en")
    assert "nan" not in text.lower() and "n/a" not in text
    assert "had 80 % power for |π − 0.5| ≥ 0.222" in text and "no minimum detectable effect" in text
    assert "not distinguishable" not in text


def test_first_in_the_biased_direction_cannot_come_back():
    """Notebook 5 said "first in the biased direction" for a model whose estimate lay on the counter-stereotyped
    side or at 0; its metric lines now list the estimates without a ranking word."""
    from biaslab.papers.compare import findings as S5
    t = pd.DataFrame({"metric": "bbq_bias_ambig", "model": ["a", "b"], "estimate": [0.0, -0.145],
                      "ci_low": [-0.26, -0.34], "ci_high": [0.26, 0.05], "direction": "higher = more stereotyped",
                      "null": 0.0})
    line = S5.metric_line("bbq_bias_ambig", t, pd.DataFrame())
    assert "biased direction" not in line and "first" not in line
    src = "".join(p.read_text() for p in (ROOT / "lib" / "biaslab").rglob("*.py"))
    assert "biased direction" not in src and "evidence for a preference" not in src


def test_ks_and_goodness_of_fit_tests_are_never_decided():
    """A KS test (it ignores pairing and clustering) and a goodness-of-fit test of positions are exploratory under
    the shipped plan: their verdict is never "distinguishable"; and the only decided goodness-of-fit test (notebook
    4's group-choice claim) is worded without naming a group, since a departure from equal counts names none."""
    from biaslab.papers.multifactor import decisions as D1
    ks = pd.DataFrame({"level": 1, "factors": "stigma", "model_a": "a", "model_b": "b", "n_a": 90, "n_b": 90,
                       "ks_statistic": 0.5, "p_value": 1e-9, "models": "released"}, index=[0])
    out = D1.decide("ssqa", {"ks_tests": ks}, plan=PLAN)["ks_tests"]
    assert out["verdict"].iloc[0] == "exploratory" and out["claim"].iloc[0] == ""
    from biaslab.papers.agentic import decisions as D4
    from biaslab.papers.agentic import findings as F4
    ut = pd.read_csv(OUT / "04_agentic_entropy/tables/uniformity_tests.csv")
    decided = D4.decide("uniformity_tests", ut, None, plan=PLAN)
    assert (decided["claim"] != "").any()
    assert not decided.loc[decided["unit"] != "group", "verdict"].eq("distinguishable").any()
    text = F4.uniformity_findings(decided, plan=PLAN)
    for r in decided[decided["claim"] != ""].to_dict("records"):
        assert str(r["top"]) not in text


def test_a_prompted_preference_gets_no_claim_sentence_beside_its_position_reading():
    """Notebook 3 said "evidence for a preference" beside "answers by position, not by content" for the same model
    and pairs: the prompted preference rows are exploratory (the plan's share claim covers the likelihood scheme
    only), so the only sentence about them is the position reading."""
    from biaslab.papers.crows_pairs import decisions as D3
    from biaslab.papers.crows_pairs import findings as F3
    pref = pd.DataFrame({"model": "m", "dataset": "crows_pairs_en_revised", "bias_type": "overall",
                         "source": ["likelihood", "prompt:more_first", "prompt:order_averaged"],
                         "n": 40, "k": [22, 40, 20], "pi_hat": [0.55, 1.0, 0.5], "ss": [0.55, 1.0, 0.5],
                         "binom_p": [0.6, 1e-12, 1.0], "pi_ci_low": [0.4, 0.91, 0.35], "pi_ci_high": [0.7, 1.0, 0.65],
                         "n_excluded": 0})
    out = D3.decide_table("preference_tests", pref, plan=PLAN)
    assert list(out["claim"]) == ["stereotype-share", "", ""]
    assert set(out["verdict"].iloc[1:]) == {"exploratory"}
    text = F3.likelihood_findings(out, plan=PLAN)
    assert "prompt" not in text and text.count("`stereotype-share`") == 1
    pos = pd.DataFrame({"model": "m", "dataset": "crows_pairs_en_revised", "order": ["more_first", "less_first"],
                        "p_first": [1.0, 1.0]})
    cons = pd.DataFrame({"model": ["m"], "dataset": ["crows_pairs_en_revised"], "same_sentence": [0.0],
                         "same_position": [1.0], "n_pairs": [40]})
    reading = F3.position_findings(pos, cons)
    assert "by **position**" in reading and "preference" not in reading and "evidence" not in reading


def test_the_plan_names_the_subgroups_the_code_computes():
    """Each notebook-1 instance of the deviation-metric claim says "per X x Y subgroup" in the plan; the benchmark's
    FactorPlan computes the metric over exactly those factors (BBQ: category x context, as BBQ reports each context
    apart; the code had used question polarity)."""
    from biaslab.benchmarks import SPECS
    words = {"context": "context_condition", "context condition": "context_condition", "referent": "answer", "class type": "class_type",
             "question type": "question_type", "bias type": "bias_type", "pronoun gender": "pronoun_gender"}
    # v5 splits the deviation-metric claim: dm-ssqa (SSQA, its estimand on the claim) and dm-other (one instance per
    # other benchmark)
    claims = {c.id: c for c in PLAN.of("01_multifactor")}
    variables = {"ssqa": claims["dm-ssqa"].estimand["variable"]}
    variables |= {bench: inst["estimand"]["variable"] for bench, inst in claims["dm-other"].instances.items()}
    assert set(variables) == set(SPECS)
    for bench, variable in variables.items():
        said = re.search(r"per (.+?) subgroup", " ".join(str(variable).split())).group(1)
        said = re.sub(r"\s*\([^)]*\)", "", said)           # "context condition (ambiguous / disambiguated)"
        factors = [words.get(w.strip(), w.strip()) for w in said.split(" x ")]
        assert factors == list(SPECS[bench].factor_plan.ecdf_factors), (bench, said)


def test_a_notebook_whose_primary_the_default_cannot_decide_says_so_on_its_first_screen():
    """The plan's cold-budget arithmetic is printed in the plan block at the top of the report (default and smoke
    profiles), not in the paper profile's; the paper design it names is one the plan can decide with."""
    for nb in ("01_multifactor", "02_calm"):
        text = P.load(profile="default").notebooks[nb]["cold_budget"]
        assert text.split(",")[0] in P.load(profile="default").render(nb)
        assert "cannot decide" not in P.load(profile="paper").render(nb)
    calm = next(c for c in P.load(profile="paper").claims if c.id == "calm-eq1")
    assert calm.design_of(None, "paper")["power"] >= 0.8
    assert "smollm2-135m-instruct" in P.load(profile="paper").families("02_calm")
