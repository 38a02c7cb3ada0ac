"""Familywise error of the headline table under the global null: the budget's arithmetic, a known answer, and a
seeded small run on the committed outputs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import calibrate as K, paths
from biaslab.stats import calibration as C
from biaslab.stats.multiplicity import adjust


def test_budget_rejections_are_the_verdict_layers_decisions():
    from biaslab.stats.verdict import budget_decisions
    insts = iid_instances(2, per_family=2, notebook="a") + iid_instances(1, notebook="b")
    p = np.random.default_rng(0).random((30, 5)) ** 3
    rej = K.budget_rejections(p, insts, {"a": 0.6, "b": 0.4}, {"a": 3, "b": 1})
    for r in range(30):                     # each replication decided alone by the verdict layer
        rows = pd.DataFrame({"notebook": [i.notebook for i in insts], "family": [i.family for i in insts],
                             "p": p[r]})
        assert rej[r].tolist() == budget_decisions(rows, 0.05, {"a": 0.6, "b": 0.4}, {"a": 3})["rejected"].tolist()


def iid_instances(n_families, per_family=1, notebook="nb"):
    rng = np.random.default_rng(1)
    return [K.Instance(notebook, "lpbs-mean", f"f{f}", str(i), C.arms_design(rng.normal(size=60), np.zeros(60)))
            for f in range(n_families) for i in range(per_family)]


def test_thirteen_single_test_families_reach_the_known_49_percent_and_the_budget_holds_alpha(tmp_path):
    insts = iid_instances(13)
    t = K.fwer(tmp_path, 3000, seed=2, shares={"nb": 1.0}, insts=insts).set_index("rule")
    # 13 independent level-0.05 tests, no split: 1 - 0.95^13 = 0.487
    assert t.loc["holm within families, no split", "fwer"] == pytest.approx(1 - 0.95 ** 13, abs=0.03)
    # the budget: 13 families share alpha -> each at 0.05 / 13; FWER <= alpha within Monte Carlo error
    b = t.loc["budget"]
    assert b["fwer"] <= 0.05 + 3 * b["fwer_mc_se"] and b["families"] == 13 and b["shares"] == "nb 1 over 13 families"


def test_budget_scale_follows_shares_and_family_count():
    insts = iid_instances(2, notebook="a") + iid_instances(1, notebook="b")
    p = np.array([[0.02, 0.5, 0.04], [0.004, 0.5, 0.01]])
    rej = K.budget_rejections(p, insts, {"a": 0.5, "b": 0.5}, {"a": 2, "b": 1})
    # a: scale 2 / 0.5 = 4 -> 0.08, 0.016 ; b: scale 2 -> 0.08, 0.02
    assert rej.tolist() == [[False, False, False], [True, False, True]]


def test_the_family_count_is_the_decided_rows_and_a_foreign_share_is_refused(tmp_path):
    from biaslab import plan as P
    plan = P.load()
    tables = tmp_path / "01_multifactor" / "bbq" / "tables"
    tables.mkdir(parents=True)
    row = {"claim": "dm-difference", "family": "01_multifactor · bbq · a · b", "family_kind": "confirmatory",
           "n_families": 5, "share": plan.share("01_multifactor")}
    pd.DataFrame([row]).to_csv(tables / "paired_subgroup_tests.csv", index=False)
    shares, n_fam = K.budget_of(tmp_path, plan)        # 5 benchmarks x 1 pair decided, one table present
    assert n_fam == {"01_multifactor": 5} and shares == plan.shares
    pd.DataFrame([{**row, "share": 0.5}]).to_csv(tables / "paired_subgroup_tests.csv", index=False)
    with pytest.raises(ValueError, match="budget share"):
        K.budget_of(tmp_path, plan)


def test_seeded_fwer_on_the_committed_outputs():
    root = paths.OUTPUTS_DIR
    insts = (K.instances("03_crows_pairs_bayes", root / "03_crows_pairs_bayes" / "tables")
             + K.instances("04_agentic_entropy", root / "04_agentic_entropy" / "tables")
             + K.instances("02_calm", root / "02_calm" / "tables")
             + K.instances("07_mbbq", root / "07_mbbq" / "tables"))
    t = K.fwer(root, 300, seed=0, insts=insts).set_index("rule")
    b = t.loc["budget"]
    assert b["instances"] == 42 and b["not_simulated"] == 0          # 12 CrowS + 20 agentic + 2 CALM + 8 MBBQ
    assert "07_mbbq 0.2 over 2 families" in b["shares"]
    assert b["fwer"] <= 0.05 + 3 * b["fwer_mc_se"]
    assert t.loc["holm within families, no split", "fwer"] > b["fwer"]


def test_a_run_without_pairs_has_no_instances(tmp_path):
    (tmp_path / "paired_differences.csv").write_text("")          # a one-model run writes an empty table
    (tmp_path / "paired_subgroup_tests.csv").write_text("")
    assert K.instances("05_compare", tmp_path, root=tmp_path) == []
    assert K.instances("01_multifactor", tmp_path, benchmark="bbq") == []
    assert K.calibration_table([], 10).columns.tolist() == C.CALIBRATION_COLUMNS


def test_no_tested_claim_means_no_false_rejection(tmp_path):
    t = K.fwer(tmp_path, 20, insts=[])
    assert (t["fwer"] == 0).all() and (t["instances"] == 0).all()
