"""Words against numbers: every findings function renders only from the verdict columns of
biaslab.stats.verdict, so on fabricated tables — a raw p that is significant while the adjusted one is not, intervals
touching the null, undefined scores, responders degenerate on one metric only — it says what those columns imply; no
markdown cell of a notebook, and no sentence of the README outside its generated block, quotes a number of a
committed run's result tables (those sentences are rendered from the tables instead)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.report import wording as W
from biaslab.papers.agentic import decisions as D4
from biaslab.papers.agentic import findings as F4
from biaslab.papers.calm import decisions as D2
from biaslab.papers.calm import findings as F2
from biaslab.papers.crows_pairs import decisions as D3
from biaslab.papers.crows_pairs import findings as F3
from biaslab.papers.multifactor import decisions as D1
from biaslab.papers.multifactor import findings as F1
from biaslab.stats import verdict as V
from helpers import COMMITTED_PLAN, outside_blocks
from biaslab import plan as P

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- wording

def _decided(p, est=0.1, lo=0.05, hi=0.2, kind=V.CONFIRMATORY, **cols):
    """A one-family table decided by the verdict layer (the only way a findings function gets its words)."""
    t = pd.DataFrame({"model": [f"m{i}" for i in range(len(p))], "est": est, "p_value": p, "ci_low": lo,
                      "ci_high": hi, "n": 100, **cols})
    return V.decide(t, V.Effects(estimate="est", null=0.0, default=V.Family("f", kind)), "t", plan=PLAN)


# ------------------------------------------------------------------------------------------ notebook 4

def _uniformity(p_groups, cohens_w=0.3, bf=None):
    """Group rows with the given raw p-values (one class type each) plus one position row per class type."""
    rows = []
    for i, p in enumerate(p_groups):
        ct = f"ct{i}"
        rows.append({"model": "m", "class_type": ct, "unit": "group", "k": 3, "n": 30, "top": "Female",
                     "cohens_w": cohens_w, "p_value": p, "log10_bf10": 2.0 if bf is None else bf})
        rows.append({"model": "m", "class_type": ct, "unit": "position", "k": 3, "n": 30, "top": "2",
                     "cohens_w": 0.1, "p_value": 0.5, "log10_bf10": -1.0})
    return D4.decide("uniformity_tests", pd.DataFrame(rows), None, plan=PLAN)


def _gp(p, diff):
    gp = pd.DataFrame({"model": "m", "class_type": "gender", "group": ["Female", "Male"], "n_pairs": 15,
                       "diff_pos_minus_neg": [diff, -diff / 2], "wilcoxon_p": [p, 0.9],
                       "diff_ci_low": [diff - 0.05, -0.1], "diff_ci_high": [diff + 0.05, 0.1]})
    return D4.decide("group_preference", gp, None, plan=PLAN)


def test_agentic_entropy_findings_place_against_paper_and_flag_a_degenerate_metric():
    def bm(h, status="informative"):
        t = pd.DataFrame({"model": ["m"], "n": [30], "mean_entropy": [h], "ci95_low": [h - 0.01],
                          "ci95_high": [h + 0.01], "share_below_half": [0.0], "mean_label_mass": [0.95]})
        return D4.decide("entropy_by_model", t, None, plan=PLAN).assign(responder_status=status)
    paper = {"a": 0.6, "b": 0.98}
    assert "within the range" in F4.entropy_findings(bm(0.9), paper)
    assert "below the range" in F4.entropy_findings(bm(0.4), paper)
    assert "Responder check for this metric: degenerate" in F4.entropy_findings(bm(0.4, "degenerate: x"), paper)


# ------------------------------------------------------------------------------------------ notebook 2

def _calm_scores(score, null_mean, p, extra=()):
    rows = [{"model": "m", "variant": "paper", "task": "all", "bias_type": "all", "bias_score": score,
             "ci_low": score * 0.8, "ci_high": score * 1.2, "n_templates_used": 20, "null_mean": null_mean,
             "p_value": p, "undefined_reason": ""}] + list(extra)
    return D2.decide(pd.DataFrame(rows), plan=PLAN)


# ------------------------------------------------------------------------------------------ notebook 3

def _lik(rows):
    base = {"bias_type": "overall", "score": "norm_logprob", "n": 200, "bf10": 1.0, "evidence": "x"}
    t = pd.DataFrame([{**base, **r} for r in rows])
    t["lpbs"] = t["mean_d"]
    return D3.decide(t, plan=PLAN)["likelihood_tests"]


# ------------------------------------------------------------------------------------------ notebook 1

def _pairs(p_dm, p_rate, models=("a", "b")):
    a, b = models
    pst = pd.DataFrame({"models": ["x"], "model_a": [a], "model_b": [b], "metric_difference": [0.3],
                        "ci_low": [0.1], "ci_high": [0.5], "p_value": [p_dm]})
    pdiff = pd.DataFrame({"models": ["x"], "model_a": [a], "model_b": [b], "n_pairs": [150], "difference": [0.1],
                          "ci_low": [0.01], "ci_high": [0.2], "p_value": [p_rate]})
    ks = pd.DataFrame({"model_a": [a], "model_b": [b], "n_a": [80], "n_b": [80], "ks_statistic": [0.4],
                       "p_value": [1e-4]})
    return pst, pdiff, ks


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
    ok = F1.bayes_findings(summary, good, plan=PLAN)
    bad = F1.bayes_findings(summary, good.assign(min_ess_bulk=40), plan=PLAN)
    assert "meets the usual thresholds" in ok and "provisional" in bad
    assert "95 % HDI excludes 0 for 1 of 2 terms (a[x])" in ok and "widest interval is b[y]" in ok


def test_factor_importance_is_read_on_the_odds_ratio_scale():
    imp = pd.DataFrame({"model": "m", "term": ["Intercept", "gender[female]", "stigma[x]", "(not fitted)"],
                        "factor": ["Intercept", "gender", "stigma", ""], "odds_ratio": [0.14, 3.13, 28.0, np.nan],
                        "ci_low_cluster": [0.04, 0.67, 7.6, np.nan], "ci_high_cluster": [0.49, 14.6, 102, np.nan],
                        "p_cluster": [0.001, 0.146, 1e-6, np.nan], "separated": [False, False, False, False]})
    d = D1.decide_importance("ssqa", imp, plan=PLAN).set_index("term")
    assert d.loc["gender[female]", "excludes_null"] == False and d.loc["stigma[x]", "excludes_null"] == True  # noqa
    assert d.loc["Intercept", "verdict"].startswith("undefined") and d.loc["(not fitted)", "verdict"].startswith(
        "undefined")
    assert d.loc["gender[female]", "family_size"] == 2


# -------------------------------------------------------------------------- no run numbers in markdown

# Summary tables of model results, per notebook: the values a findings sentence could quote.
RESULT_TABLES = {
    "01_multifactor": ["*/tables/released_answers.csv", "*/tables/label_distribution.csv", "*/tables/cot_summary.csv",
                       "*/tables/deviation_metric.csv", "*/tables/ks_tests.csv", "*/tables/accuracy_bias_scores.csv",
                       "*/tables/coverage_by_factor.csv", "*/tables/coverage_overall.csv"],
    "02_calm": ["tables/bias_scores.csv", "tables/group_accuracy_mean.csv", "tables/robustness.csv",
                "tables/subset_selection.csv", "tables/table6.csv", "tables/diversity.csv"],
    "03_crows_pairs_bayes": ["tables/likelihood_tests.csv", "tables/preference_tests.csv", "tables/position_bias.csv",
                             "tables/order_consistency.csv"],
    "04_agentic_entropy": ["tables/entropy_by_model.csv", "tables/cyclic_by_model.csv", "tables/position_bias.csv",
                           "tables/uniformity_tests.csv"],
    "05_compare": ["tables/model_metric.csv", "tables/paired_differences.csv"],
}
# Method text that coincides with a table value: design constants of the benchmarks and the papers' own numbers.
METHOD_NUMBERS = {
    # SSQA's released prompt count (the design, not a result: its measured coverage and Gini indices are rendered
    # from coverage_by_factor.csv / coverage_overall.csv, the paper's own values by the same sentences)
    "01_multifactor": {"10,360"},
    # eq. 1's factor 100; CALM's prompts per template (150 gender, 200 race, 350 all); the paper's Table 5; its 156
    # templates with passages (Table 4's design)
    "02_calm": {"100", "150", "200", "350", "84.8", "156"},
    # pingouin's prior scale, SS = 100 %, model sizes (100-1,000 times smaller), the French socioeconomic type's
    # 195 of 196 pairs, the original set's 1,508 pairs and the revised / French files' 1,677 rows (file sizes; the
    # same digits occur among the sampled pairs' ids and statistics, by coincidence; the recomputed ChatGPT numbers
    # are rendered from published_chatgpt_check.csv by a findings cell, not typed)
    "03_crows_pairs_bayes": {"0.707", "1,000", "100", "195", "196", "1,508", "1,677"},
    # the paper's reported mean entropies; the benchmark's 1,020 prompts (the default profile scores 510 of them)
    "04_agentic_entropy": {"0.602", "0.961", "0.976", "0.965", "1,020"},
    "05_compare": set(),
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


# Text that holds numbers but states no result, blanked before numbers are read. Each pattern needs its context, so
# the same digits elsewhere are still read (tests below show a run number next to each is still caught):
NOT_RESULTS = re.compile("|".join([
    r"```.*?```|`[^`]*`|https?://\S+",                             # code blocks, commands, addresses
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\blocalhost:\d+",       # IPv4 addresses and ports
    r"[\w./-]*#\d+",                                                # issue / pull-request references (vllm#3251)
    # years of a citation or a date: "et al. (2015)", "(Kish 1965)", "Bloom 1995", "the 2023 ChatGPT", "of 2023"
    # (counts are written with a thousands separator, "2,023 prompts", and are still read)
    r"(?:\(|\bet al\.?,?\s\(?|\b[A-Z][A-Za-z-]+,?\s|\b(?:of|in|the|since|from|until)\s)(?:19|20)\d\d[a-z]?\b"
    r"(?![.,]\d)",
    r"\bexit(?:s|ed)? (?:with|code|status) \d+(?: \(\d+ for SIG[A-Z]+\))?",   # process exit statuses
    r"\bdefault \d[\d,.]*",                                        # a setting's default ("(default 120)")
]), re.S)


def prose(text: str) -> str:
    """``text`` with :data:`NOT_RESULTS` blanked out: what a reader takes for statements."""
    return NOT_RESULTS.sub(" ", text)


def markdown_text(source: str) -> str:
    """The markdown of a jupytext percent source's markdown cells, without the cell markers and the comment marks
    (so a citation broken over two lines reads as one)."""
    cells = [c for c in re.split(r"^(?=# %%)", source, flags=re.M) if c.startswith("# %% [markdown]")]
    return "\n".join(re.sub(r"^# ?", "", line) for c in cells for line in c.splitlines()[1:])


def markdown_numbers(source: str) -> list[str]:
    return [m.group(0).rstrip(",") for m in NUMBER.finditer(prose(markdown_text(source)))]


def run_numbers(text: str, vals: set[float], method_numbers: set[str]) -> list[str]:
    """Numbers of ``text``'s prose (three significant digits or more, not a declared method number) that equal a
    committed table value in ``vals`` to three significant digits."""
    found = []
    for m in NUMBER.finditer(prose(text)):
        tok = m.group(0).rstrip(",")
        if significant_digits(tok) < 3 or tok in method_numbers:
            continue
        x = float(tok.replace(",", ""))
        if x and float(f"{x:.3g}") in vals:
            found.append(tok)
    return found


def run_numbers_in_markdown(notebook: str) -> list[str]:
    src = (ROOT / "notebooks" / f"{notebook}.py").read_text()
    return run_numbers(markdown_text(src), table_values(notebook), METHOD_NUMBERS[notebook])


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


def test_years_are_left_out_only_where_the_prose_says_they_are_years():
    """Citations and dates are not run numbers; the same digits elsewhere still are (a table value 2,015 rounds to
    2.02e3, as 2015, 2020 and 2023 do)."""
    vals = {2020.0, 0.386}
    src = ("# %% [markdown]\n# The scale of Andraszewicz et al. (2015), Nangia et al. (2020), Rouder et al.\n# 2009, "
           "Rao & Scott 1981, the ChatGPT of 2023 and the 2023 ChatGPT.\n\n# %%\nx = 2015\n")
    assert run_numbers(markdown_text(src), vals, set()) == []
    quoted = src.replace("2023 ChatGPT.", "2023 ChatGPT. The model scores 2015 here; BF10 = 0.386 and 2,020 pairs.")
    assert run_numbers(markdown_text(quoted), vals, set()) == ["2015", "0.386", "2,020"]
    # the committed notebook 3 with one recomputed Bayes factor typed back into its prose is caught again
    nb3 = (ROOT / "notebooks/03_crows_pairs_bayes.py").read_text()
    typed = nb3.replace("# **What this shows** (computed", "# **What this shows** (0.386 for disability; computed")
    if (ROOT / "outputs/03_crows_pairs_bayes/tables/preference_tests.csv").exists():
        assert "0.386" in run_numbers(markdown_text(typed), table_values("03_crows_pairs_bayes"),
                                      METHOD_NUMBERS["03_crows_pairs_bayes"])


# ------------------------------------------------------------------ no hand-written results in the README

# README numbers that are not results: the design of SSQA and CrowS-Pairs (prompt and pair counts), profile sizes
README_METHOD_NUMBERS = {"10,360", "1,508", "1,677", "1,676", "78,400", "1,020", "0.707", "224",
                         "3.11"}                                  # the Python version


# pages not yet held to the rule: bring_your_own_results.md states its worked example's import-vs-engine comparison
# (lm-eval 0.4.13 log against biaslab's engine on 120 CrowS-Pairs pairs) typed by hand; it is checked once that
# comparison is rendered from a committed results file
PAGES_WITH_TYPED_MEASUREMENTS = {"docs/bring_your_own_results.md"}


def run_numbers_in_readme(text: str) -> list[str]:
    vals = set().union(*(table_values(nb) for nb in RESULT_TABLES))
    return run_numbers(outside_blocks(text), vals, README_METHOD_NUMBERS)


@pytest.mark.parametrize("page", ["README.md", *sorted({p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob(
    "*.md")} - PAGES_WITH_TYPED_MEASUREMENTS)])
def test_no_run_numbers_in_the_readme_outside_its_generated_block(page):
    """Neither the README nor a page under docs/ states a committed result outside a generated block."""
    if not list((ROOT / "outputs").rglob("tables/*.csv")):
        pytest.skip("no committed outputs")
    assert run_numbers_in_readme((ROOT / page).read_text()) == []


def test_what_is_not_a_result_is_skipped_and_the_same_digits_as_a_result_are_not():
    """Exit statuses, addresses, ports, issue numbers and citation years are skipped; the same digits stated as a
    result (a count, a rate, a year-like count with its thousands separator) are still found."""
    vals = {130.0, 143.0, 127.0, 3250.0, 2020.0, 2020.0, 0.335}
    skipped = ("`biaslab reproduce` exits with 130 (143 for SIGTERM). The server listens on 127.0.0.1:8001; "
               "crashes (vllm#3251, #5344). Nangia et al. (2020) and (Kish 1965); the ChatGPT of 2020.")
    assert run_numbers(skipped, vals, set()) == []
    stated = ("130 prompts were biased and 143 were not; 127.0 of them; 3251 answers; 2,020 pairs; the "
              "score was 0.335 (Nangia et al. 2020).")
    assert run_numbers(stated, vals, set()) == ["130", "143", "127.0", "3251", "2,020", "0.335"]
    cells = "# %% [markdown]\n# GPT-3 of 2020, and 0.335 of the pairs\n\n# %%\nx = 0.335\n"
    assert markdown_numbers(cells) == ["0.335"]


def test_the_readme_check_finds_a_hand_written_result():
    """A committed value typed into the README's prose is caught; the same value inside the block is not."""
    from biaslab.report import headline
    value = pd.read_csv(ROOT / "outputs/04_agentic_entropy/tables/entropy_by_model.csv")["mean_entropy"].iloc[0]
    prose = f"Both models spread their probability (mean entropy {value:.3f}).\n"
    assert run_numbers_in_readme(prose) == [f"{value:.3f}"]
    assert run_numbers_in_readme(f"{headline.BEGIN}\n{prose}{headline.END}\n") == []


def test_no_findings_code_reads_a_raw_p_value():
    """Sentences decide only from the verdict columns: no findings module names a raw p column."""
    raw = re.compile(r"""["'](p_value|t_p|lead_p|binom_p|wilcoxon_p|wald_p|bh_q|p_cluster|p_naive|"""
                     r"""[a-z_]*_p_holm|p_value_holm)["']""")
    files = [ROOT / "lib/biaslab/report/wording.py", *sorted((ROOT / "lib/biaslab/papers").glob("*/findings.py"))]
    offenders = {f.name: raw.findall(f.read_text()) for f in files}
    assert not any(offenders.values()), offenders


def test_design_sentences_render_from_their_tables():
    """Notebook 1's coverage and notebook 2's template lengths were hand-written in markdown (no sentence may
    state a result not rendered from a table); they are rendered from the tables now, the papers' own
    numbers beside ours and attributed."""
    from biaslab.papers.calm import findings as F2
    from biaslab.papers.calm import published
    from biaslab.papers.multifactor import findings as F1
    by = pd.DataFrame({"factor": ["stigma", "gender"], "n_levels": [94, 4], "min_count": [74, 74],
                       "max_count": [222, 15066], "gini": [0.0070669, 0.5561]})
    ov = pd.DataFrame({"set": ["paper (stigma, gender)"], "n_covered": [2236], "n_combinations": [6016],
                       "coverage_percentage": [0.37168], "gini": [0.72141]})
    units = pd.DataFrame({"factor": "gender", "level": ["female", "male"], "n_prompts": [3348, 2232],
                          "n_units": [6, 4]})
    text = F1.coverage_findings(by, ov, units, ("gender",), "template", {"stigma": 0.007, "gender": 0.529},
                                {"n_combinations": 20720, "coverage_percentage": 0.372, "gini": 0.711})
    assert "stigma 0.00707 (94 levels of 74–222 prompts = Table 1)" in text
    assert "gender 0.556 (4 levels of 74–15,066 prompts; Table 1: 0.529)" in text
    assert "6 templates hold *female* and 4 templates hold *male*" in text
    assert "2,236 of 6,016 combinations covered (CP 0.3717), GI 0.721; the paper reports CP 0.372 and GI 0.711" in text
    div = pd.DataFrame({"benchmark": ["calm", "calm_passage"], "n_templates": [224, 224], "length_mean": [43.17, 36.39],
                        "length_sd": [54.2, 51.09], "length_min": [3, 3], "length_max": [335, 319]})
    words = F2.length_findings(div, published.TABLE4)
    assert "224 templates of 3–319 words, mean 36.4, standard deviation 51; with the question (`calm`): mean 43.2, " \
           "up to 335 words" in words
    assert "at least 18.8" in words and "not 7.1" in words and "mean 38.5" in words


def test_a_monte_carlo_quantity_carries_its_se_and_only_the_digits_its_draws_support():
    """calm-eq1's excess over a floor of 1,000 permutations (Monte-Carlo SE 0.24-0.44 points) was printed to three
    digits alone: a row with ``<estimate>_mc_se`` prints its estimate (and the interval from the same draws) to the
    place of its SE's first digit, with the SE."""
    assert W.mc_num(17.6789, 0.31) == "17.7" and W.mc_num(17.6789, 2.4) == "18" and W.mc_num(-0.944, 0.044) == "−0.94"
    assert W.with_mc_se({"excess": 17.6789, "excess_mc_se": 0.31}, "excess") == "17.7 (Monte-Carlo SE 0.3)"
    assert W.with_mc_se({"excess": 17.6789}, "excess") == "17.7"
    claim = next(c for c in PLAN.of("02_calm") if c.id == "calm-eq1")
    row = {"model": "m", "verdict": "not distinguishable", "excess": 17.6789, "excess_mc_se": 0.31,
           claim.ci[0]: -9.7234, claim.ci[1]: 29.2311, "ci_method": "permutation, 90% two-sided", "p_adjusted": 1.0}
    s = W.claim_sentence(row, claim)
    assert "17.7 (Monte-Carlo SE 0.3) (unadjusted 90 % CI −9.7, 29.2)" in s, s
