"""Computed findings: each notebook's findings functions on a fabricated biased and a fabricated null result table
give sentences that differ in the right direction, and no markdown cell of a notebook quotes a number of a
committed run's result tables (those sentences are rendered from the tables instead)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import findings as W
from biaslab.papers.agentic import findings as F4
from biaslab.papers.calm import findings as F2
from biaslab.papers.crows_pairs import findings as F3
from biaslab.papers.multifactor import findings as F1

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- wording

def test_wording_helpers():
    assert W.num(0.95354) == "0.954" and W.num(-7.4, 2) == "−7.4" and W.num(float("nan")) == "n/a"
    assert W.pval(0.0004) == "p < 0.001" and W.pval(0.0123) == "p = 0.012"
    assert W.chance_verdict(0.01).startswith("distinguishable")
    assert "not distinguishable" in W.chance_verdict(0.3, 20) and "n = 20" in W.chance_verdict(0.3, 20)
    assert "would go undetected" in W.chance_verdict(0.3, 20, mde=0.12)
    row = {"ci_low": 0.1, "ci_high": 0.2, "ci_method": "cluster bootstrap"}
    assert W.interval(row) == "(95 % CI, cluster bootstrap 0.1–0.2)" and W.excludes(row, 0.5) is True
    assert W.interval({"ci95_low": 0.1, "ci95_high": 0.2}) == "(95 % CI 0.1–0.2)"
    assert W.interval({}) == "" and W.excludes({}, 0.5) is None


# ------------------------------------------------------------------------------------------ notebook 4

def _uniformity(p_group: float, top_share: float) -> pd.DataFrame:
    return pd.DataFrame([
        {"model": "m", "class_type": "gender", "unit": "group", "k": 3, "n": 30, "top": "Female",
         "top_share": top_share, "p_value": p_group, "log10_bf10": 2.0 if p_group < 0.05 else -1.2},
        {"model": "m", "class_type": "gender", "unit": "position", "k": 3, "n": 30, "top": "2",
         "top_share": 0.4, "p_value": 0.5, "log10_bf10": -1.0}])


def _gp(q: float, diff: float) -> pd.DataFrame:
    return pd.DataFrame({"model": "m", "class_type": "gender", "group": ["Female", "Male"], "n_pairs": 15,
                         "diff_pos_minus_neg": [diff, -diff / 2], "bh_q": [q, 0.9]})


def test_agentic_group_findings_direction():
    biased, null = F4.uniformity_findings(_uniformity(0.001, 0.7)), F4.uniformity_findings(_uniformity(0.6, 0.37))
    assert "the top answer is Female in 21 of 30" in biased and "strong evidence against chance" in biased
    assert "top answer is Female" not in null
    assert "1 of 1 model × class-type cells" in biased and "0 of 1 model × class-type cells" in null
    gb, gn = F4.group_preference_findings(_gp(0.001, 0.2)), F4.group_preference_findings(_gp(0.8, 0.01))
    assert "1 of 2" in gb and "are distinguishable from chance" in gb and "20 percentage points" in gb
    assert "0 of 2" in gn and "not distinguishable from chance at this sample size" in gn


def test_agentic_position_and_summary_direction():
    def pb(spread):
        p = np.array([1 / 3 - spread, 1 / 3, 1 / 3 + spread])
        return pd.DataFrame({"model": "m", "k": 3, "position": [1, 2, 3], "mean_p": p, "ci95_low": p - 0.01,
                             "ci95_high": p + 0.01, "uniform": 1 / 3})
    assert "more probability at position 3" in F4.position_findings(pb(0.1))
    assert "no position is distinguishable" in F4.position_findings(pb(0.0))

    def cyc(after):
        return pd.DataFrame({"model": ["m"], "n": [12], "mean_entropy_stored": [0.9],
                             "mean_entropy_cyclic_avg": [after],
                             "mean_entropy_position_avg": [0.9], "wilcoxon_p": [0.001]})
    by_model = pd.DataFrame({"model": ["m"], "n": [30], "mean_entropy": [0.9]})
    pos_only = F4.summary_findings(by_model, cyc(0.995), _uniformity(0.6, 0.37), _gp(0.8, 0.01))
    group = F4.summary_findings(by_model, cyc(0.91), _uniformity(0.001, 0.7), _gp(0.001, 0.2))
    assert "preference for answer **positions**" in pos_only and "No group-level result" in pos_only
    assert "mostly **not** a preference for positions" in group
    assert "distinguishable from chance: m's Female on gender" in group
    assert "cannot be separated" in F4.summary_findings(by_model, None, _uniformity(0.6, 0.37), _gp(0.8, 0.01))


def test_agentic_entropy_findings_place_against_paper():
    def bm(h):
        return pd.DataFrame({"model": ["m"], "n": [30], "mean_entropy": [h], "ci95_low": [h - 0.01],
                             "ci95_high": [h + 0.01], "share_below_half": [0.0], "mean_label_mass": [0.95]})
    paper = {"a": 0.6, "b": 0.98}
    assert "within the range" in F4.entropy_findings(bm(0.9), paper)
    assert "below the range" in F4.entropy_findings(bm(0.4), paper)


# ------------------------------------------------------------------------------------------ notebook 2

def _calm_scores(score, null_mean, p):
    return pd.DataFrame({"model": ["m"], "variant": ["paper"], "task": ["all"], "bias_type": ["all"],
                         "bias_score": [score], "ci_low": [score * 0.8], "ci_high": [score * 1.2],
                         "n_templates_used": [20], "null_mean": [null_mean], "p_value": [p]})


def test_calm_bias_findings_direction():
    biased, null = F2.bias_findings(_calm_scores(80.0, 10.0, 0.001)), F2.bias_findings(_calm_scores(12.0, 11.0, 0.4))
    assert "distinguishable from chance (p = 0.001)" in biased and "not distinguishable" not in biased
    assert "not distinguishable from chance at this sample size (p = 0.4)" in null
    with_mde = F2.bias_findings(_calm_scores(12.0, 11.0, 0.4).assign(mde=35.0))   # the inference helper's column
    assert "effects smaller than 35 would go undetected" in with_mde
    empty = _calm_scores(0.0, 0.0, 1.0).assign(n_templates_used=0, variant="released")
    assert "by construction, not a measurement" in F2.bias_findings(empty)


def test_calm_robustness_reads_the_interval():
    rob = pd.DataFrame({"model": ["m"], "variant": ["paper"], "perturbation": ["combined"], "templates_edited": [4],
                        "templates": [4], "overall": [150.0], "original_overall": [80.0], "rel_change_pct": [87.5]})
    assert "outside the original score's 95 % interval" in F2.robustness_findings(rob, _calm_scores(80.0, 10, 0.01))
    assert "inside" in F2.robustness_findings(rob.assign(overall=85.0), _calm_scores(80.0, 10, 0.01))


# ------------------------------------------------------------------------------------------ notebook 3

def test_crows_pairs_likelihood_findings_direction():
    def lik(mean_d, p, bf):
        return pd.DataFrame({"model": ["m"], "dataset": ["en"], "bias_type": ["overall"], "score": ["norm_logprob"],
                             "lpbs": [mean_d], "mean_d": [mean_d], "n": [200], "t_p": [p], "bf10": [bf],
                             "evidence": ["x"]})
    biased, null = F3.likelihood_findings(lik(0.3, 1e-5, 500.0)), F3.likelihood_findings(lik(-0.01, 0.7, 0.1))
    assert "more stereotypical sentences more likely" in biased and "distinguishable from chance (p < 0.001)" in biased
    assert "less stereotypical" in null and "not distinguishable from chance at this sample size" in null


def test_crows_pairs_preference_position_verdict():
    pref = pd.DataFrame({"model": "m", "dataset": "en", "bias_type": "overall", "source": ["likelihood"],
                         "pi_hat": [0.6], "n": [100], "bf10": [3.0], "evidence": ["moderate evidence for H1"]})
    pos = pd.DataFrame({"model": "m", "dataset": "en", "order": ["more_first", "less_first"], "p_first": [1.0, 1.0]})
    by_pos = pd.DataFrame({"model": ["m"], "dataset": ["en"], "same_position": [1.0], "same_sentence": [0.0],
                           "n_pairs": [50]})
    by_content = by_pos.assign(same_position=0.1, same_sentence=0.9)
    ans = pd.DataFrame({"x": [1]})
    assert "by **position**" in F3.preference_findings(pref, ans, pos, by_pos)
    assert "mostly by content" in F3.preference_findings(pref, ans, pos.assign(p_first=0.5), by_content)


# ------------------------------------------------------------------------------------------ notebook 1

def test_multifactor_subgroup_findings_direction():
    dm = pd.DataFrame({"model": ["a", "b"], "factors": "stigma x gender", "n_subgroups": 80,
                       "deviation_metric": [0.5, 0.2], "median_rate": [0.5, 0.2]})
    ks = lambda p: pd.DataFrame({"model_a": ["a"], "model_b": ["b"], "n_a": [80], "n_b": [80],  # noqa: E731
                                 "ks_statistic": [0.4], "p_value": [p]})
    assert "(a deviates more)" in F1.subgroup_findings(dm, ks(1e-4))
    assert "not distinguishable from chance at this sample size" in F1.subgroup_findings(dm, ks(0.6))


def test_multifactor_label_findings_direction():
    mass = lambda ct: pd.DataFrame({"model": ["m"], "n": [40], "mean_label_mass": [0.3],  # noqa: E731
                                    "min_label_mass": [0.1],
                                    "p_cant_tell": [ct], "deviation_rate": [0.4], "answer_yes": [0.9],
                                    "answer_no": [0.1], "answer_can't tell": [0.0]})
    assert "almost no probability on \"can't tell\"" in F1.label_findings(mass(0.01))
    assert "noticeable probability on \"can't tell\"" in F1.label_findings(mass(0.3))


def test_multifactor_bayes_findings_direction():
    summary = pd.DataFrame({"model": "m", "term": ["Intercept", "a[x]", "b[y]"], "hdi_2.5%": [-3, 0.2, -1.5],
                            "hdi_97.5%": [-1, 0.9, 2.5]})
    good = pd.DataFrame({"model": ["m"], "max_r_hat": [1.0], "min_ess_bulk": [900], "min_ess_tail": [800],
                         "divergences": [0]})
    ok, bad = F1.bayes_findings(summary, good), F1.bayes_findings(summary, good.assign(min_ess_bulk=40))
    assert "meets the usual thresholds" in ok and "provisional" in bad
    assert "95 % HDI excludes 0 for 1 of 2 terms (a[x])" in ok and "widest interval is b[y]" in ok


# -------------------------------------------------------------------------- no run numbers in markdown

# Summary tables of model results, per notebook: the values a findings sentence could quote.
RESULT_TABLES = {
    "01_multifactor": ["*/tables/released_answers.csv", "*/tables/label_distribution.csv", "*/tables/cot_summary.csv",
                       "*/tables/deviation_metric.csv", "*/tables/ks_tests.csv", "*/tables/accuracy_bias_scores.csv"],
    "02_calm": ["tables/bias_scores.csv", "tables/group_accuracy_mean.csv", "tables/robustness.csv",
                "tables/subset_selection.csv", "tables/table6.csv"],
    "03_crows_pairs_bayes": ["tables/likelihood_tests.csv", "tables/preference_tests.csv", "tables/position_bias.csv",
                             "tables/order_consistency.csv"],
    "04_agentic_entropy": ["tables/entropy_by_model.csv", "tables/cyclic_by_model.csv", "tables/position_bias.csv",
                           "tables/uniformity_tests.csv"],
}
# Method text that coincides with a table value: design constants of the benchmarks and the papers' own numbers.
METHOD_NUMBERS = {
    # prompt counts and coverage of SSQA's design; Granite's count of improper outputs in the released answers
    # and the design's per-factor Gini indices (the paper's 0.359 for category, ours 0.556 for gender)
    "01_multifactor": {"10,360", "0.246", "0.3717", "0.372", "456", "0.359", "0.556"},
    # eq. 1's factor 100; CALM's prompts per template (150 gender, 200 race, 350 all); the paper's Table 5
    "02_calm": {"100", "150", "200", "350", "84.8"},
    # the paper's Table 3 (printed and recomputed values, counts), pingouin's prior scale, SS = 100 %, model sizes
    # and the original set's 1,508 pairs; race-color's 288 of 498 and religion's recomputed 3,805 (Table 3)
    "03_crows_pairs_bayes": {"0.155", "0.386", "0.707", "1,000", "100", "195", "196", "25.5", "288", "498", "3,805",
                             "1,508"},
    # the paper's reported mean entropies
    "04_agentic_entropy": {"0.976"},
}
NUMBER = re.compile(r"(?<![\w.,§$^{}-])\d[\d,]*(?:\.\d+)?(?![\w])")
# design columns (counts, sizes, positions) hold the benchmark's plan, not a result
DESIGN_COLUMNS = re.compile(r"^(n|k|df|runs|templates.*|fraction|position|uniform|ideal|level|min_expected"
                            r"|n_.*|.*_total)$")


def significant_digits(token: str) -> int:
    digits = token.replace(",", "")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0"))
    return len(digits)


def table_values(notebook: str) -> set[str]:
    vals = set()
    for pattern in RESULT_TABLES[notebook]:
        for f in (ROOT / "outputs" / notebook).glob(pattern):
            df = pd.read_csv(f)
            for c in df.select_dtypes("number").columns:
                if c.startswith(("reported", "paper", "published")) or DESIGN_COLUMNS.match(c):
                    continue
                for v in df[c].dropna():
                    if not math.isfinite(v) or v == 0:
                        continue
                    for x in (v, 100 * v):
                        vals.add(float(f"{x:.3g}"))
    return vals


def markdown_numbers(source: str) -> list[str]:
    cells = re.split(r"^(?=# %%)", source, flags=re.M)
    return [m.group(0).rstrip(",") for c in cells if c.startswith("# %% [markdown]") for m in NUMBER.finditer(c)]


def run_numbers_in_markdown(notebook: str) -> list[str]:
    vals = table_values(notebook)
    src = (ROOT / "notebooks" / f"{notebook}.py").read_text()
    found = []
    for tok in markdown_numbers(src):
        if significant_digits(tok) < 3 or tok in METHOD_NUMBERS[notebook]:
            continue
        x = float(tok.replace(",", ""))
        if x and float(f"{x:.3g}") in vals:
            found.append(tok)
    return found


@pytest.mark.parametrize("notebook", sorted(RESULT_TABLES))
def test_no_run_numbers_in_markdown(notebook):
    if not list((ROOT / "outputs" / notebook).rglob("tables/*.csv")):
        pytest.skip(f"no committed outputs for {notebook}")
    assert run_numbers_in_markdown(notebook) == []


def test_the_number_check_finds_a_quoted_value(tmp_path, monkeypatch):
    """A markdown cell quoting a committed table value is caught (the check is not vacuous)."""
    value = pd.read_csv(ROOT / "outputs/04_agentic_entropy/tables/entropy_by_model.csv")["mean_entropy"].iloc[0]
    src = f"# %% [markdown]\n# the model scores {value:.3f} here\n\n# %%\nx = {value:.3f}\n"
    assert markdown_numbers(src) == [f"{value:.3f}"]
    assert float(f"{value:.3g}") in table_values("04_agentic_entropy")


def test_agentic_summary_is_tentative_when_the_rotation_test_is_not_significant():
    cyc = pd.DataFrame({"model": ["m"], "n": [2], "mean_entropy_stored": [0.9], "mean_entropy_cyclic_avg": [0.995],
                        "mean_entropy_position_avg": [0.9], "wilcoxon_p": [0.5]})
    text = F4.summary_findings(pd.DataFrame({"model": ["m"]}), cyc, _uniformity(0.6, 0.37), _gp(0.8, 0.01))
    assert "tentative reading" in text and "from 0.9 to 0.995" in text
