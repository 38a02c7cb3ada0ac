"""Every notebook runs end to end under the smoke profile and writes what its issue promises."""

import json

import pandas as pd
import pytest

from biaslab.run import profiles
from helpers import certainty_without_variance

EXPECTED_TABLES = {
    "01_multifactor": ["factors", "coverage_by_factor", "coverage_overall", "subgroups", "deviation_metric",
                       "ks_tests", "factor_importance", "calibration", "sensitivity"],
    "02_calm": ["bias_scores", "group_accuracy", "robustness", "subset_selection", "diversity", "discarded",
                "calibration", "sensitivity"],
    "03_crows_pairs_bayes": ["likelihood_tests", "preference_tests", "published_chatgpt_check", "calibration",
                             "sensitivity", "validity", "validity_panel"],
    "04_agentic_entropy": ["prompts_design", "entropy_by_model", "entropy_breakdown", "group_preference",
                           "position_bias", "uniformity_tests", "calibration", "sensitivity"],
    "05_compare": ["model_metric", "paired_differences", "tie_groups", "agreement", "calibration", "sensitivity"],
    "06_multiverse": ["factors", "universes", "responders", "estimates", "specification_curve", "equivalence",
                      "robustness", "factor_importance", "format_agreement", "costs"],
    "07_mbbq": ["design", "excluded", "factors", "responses", "accuracy", "metrics", "contrasts",
                "adjusted_contrasts", "responders", "validity"],
}
# Tables that may legitimately have no rows under the one-model smoke profile (they compare models, or calibrate
# claims of which none is tested with one model).
MAY_BE_EMPTY = {"ks_tests", "calibration", "sensitivity"}

RUNS = [(nb, v) for nb, variants in profiles.NOTEBOOKS.items() for v in variants]


@pytest.mark.notebook
@pytest.mark.parametrize("notebook,variant", RUNS, ids=[f"{n}/{v}" if v else n for n, v in RUNS])
def test_notebook_smoke(notebook, variant, smoke_run):
    label = f"{notebook}/{variant}" if variant else notebook
    out = smoke_run(label)        # the session's smoke run of that notebook (tests/conftest.py)
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["status"] == "ok" and manifest["profile"] == "smoke"
    assert manifest["models"], "the notebook must record the fingerprint of every model it used"
    assert manifest["data"], "the notebook must record the data files (sha256) it read"
    for name in EXPECTED_TABLES[notebook]:
        path = out / "tables" / f"{name}.csv"
        assert path.exists(), f"{label}: tables/{name}.csv not written"
        if name not in MAY_BE_EMPTY:
            assert len(pd.read_csv(path)) > 0, f"{label}: tables/{name}.csv is empty"
    assert list((out / "figures").glob("*.png")), f"{label}: no figure written"
    assert certainty_without_variance(_tables(out)) == [], label
    _claims_are_calibrated_and_re_decided(out, label)
    assert (out / f"{notebook}.ipynb").stat().st_size < 2_000_000


def _tables(out) -> dict:
    """Every non-empty table a run wrote, by name."""
    tables = {}
    for path in sorted((out / "tables").glob("*.csv")):
        try:
            tables[path.stem] = pd.read_csv(path, low_memory=False)
        except pd.errors.EmptyDataError:          # a comparison with one model: no header
            continue
    return tables


def test_the_table_scan_finds_certainty_from_zero_variance():
    """The scan each smoke run's tables pass (above): a p of 0, an interval [x, x] beside a p, and a significant
    flag without a test are each found; the same rows as the stats layer now writes them (no p, no interval, the
    verdict "not estimable (…)", no flag) pass."""
    bad = pd.DataFrame({"estimate": [1.0, 0.2], "se": [0.0, 0.1], "ci_low": [1.0, 0.1], "ci_high": [1.0, 0.3],
                        "p_value": [0.0, 0.01], "p_adjusted": [0.0, 0.02], "significant": [True, True],
                        "verdict": ["exploratory", "exploratory"]})
    found = certainty_without_variance({"metrics": bad})
    assert [x.split(": ", 1)[1].split(" (")[0] for x in found] == [
        "1 rows with p_value = 0", "1 rows with p_adjusted = 0", "1 zero-width intervals",
        "1 rows marked significant without a test that has a size"]
    good = bad.assign(ci_low=[float("nan"), 0.1], ci_high=[float("nan"), 0.3], p_value=[float("nan"), 0.01],
                      p_adjusted=[float("nan"), 0.02], significant=[pd.NA, True],
                      verdict=["not estimable (no variation in 2 items)", "exploratory"])
    assert certainty_without_variance({"metrics": good}) == []
    flag = good.assign(significant=[True, True])                  # a flag on a row without a test
    assert certainty_without_variance({"metrics": flag}) == [
        "metrics: 1 rows marked significant without a test that has a size"]


def _claims_are_calibrated_and_re_decided(out, label):
    """Every tested claim row of the run has a simulated calibration row, and the sensitivity table's primary rows,
    re-decided by the one sensitivity rule (the plan's graph and power rule), carry exactly the tables' verdicts
    (decided, not reached, not decided, descriptive or not tested, with their reasons)."""
    claims = []
    for path in sorted((out / "tables").glob("*.csv")):
        try:                                 # an empty table (a comparison with one model) has no header
            head = pd.read_csv(path, nrows=0).columns
        except pd.errors.EmptyDataError:
            continue
        if {"claim", "family_kind", "verdict"} <= set(head):
            t = pd.read_csv(path, usecols=["claim", "family_kind", "verdict"])
            claims.append(t[t["claim"].fillna("").ne("") & (t["family_kind"] == "confirmatory")])
    if not claims or not (cal := out / "tables" / "calibration.csv").exists():
        return
    claims = pd.concat(claims)
    tested = claims[claims["verdict"].isin(["distinguishable", "not distinguishable"])]
    c = pd.read_csv(cal) if cal.stat().st_size else pd.DataFrame(columns=["claim", "type_i_error"])
    assert len(c) == len(tested) and c["type_i_error"].notna().all(), f"{label}: calibration.csv {c['test']}"
    sens = out / "tables" / "sensitivity.csv"
    if sens.exists() and sens.stat().st_size and len(s := pd.read_csv(sens)):
        prim = s[s["analysis"] == "primary"]
        assert sorted(prim["verdict"]) == sorted(claims["verdict"]), label
