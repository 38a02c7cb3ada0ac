"""Familywise error of the headline table under the global null: the budget's arithmetic, a known answer, the
run's own rule (the plan's graph, descriptive instances out, the power rule), and a seeded small run on the committed
outputs under the plan they were decided with."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.plan import calibration as K
from biaslab import paths, plan as P
from biaslab.stats import null_simulation as C
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
    assert t.iloc[1].name.endswith("within families, no split")
    assert t.iloc[1]["fwer"] == pytest.approx(1 - 0.95 ** 13, abs=0.03)
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
    t = K.fwer(root, 300, seed=0, insts=insts, plan=COMMITTED_PLAN).set_index("rule")
    b = t.loc["budget"]
    # under plan v5 the committed run tests only the 12 CrowS instances of these: the 20 agentic ones are
    # descriptive (under 0.8 power), CALM's 2 and MBBQ's 8 not measurable
    assert [len(K.instances(nb, root / nb / "tables")) for nb in ("04_agentic_entropy", "02_calm", "07_mbbq")] \
        == [0, 0, 0]
    assert b["instances"] == 12 and b["not_simulated"] == 0
    assert "07_mbbq 0.2 over 2 families" in b["shares"]
    assert b["fwer"] <= 0.05 + 3 * b["fwer_mc_se"]
    assert t.loc["graph within families, no split", "fwer"] > b["fwer"]         # v5 is graphical


#: the plan the committed outputs were decided with (their MANIFESTs record its sha256)
COMMITTED_PLAN = Path(__file__).resolve().parents[1] / "analysis_plan.yaml"


def _graph_instances():
    """Two families of one notebook, each with two primary instances and a secondary (the claims of a plan's graph);
    the secondary needs level 0.03 for its power, more than half a family's level."""
    rng = np.random.default_rng(4)
    return [K.Instance("nbg", c, f"f{f}", str(i), C.Design(rng.normal(size=60), None), need=need)
            for f in range(2) for i, (c, need) in enumerate([("prim", 0.0), ("prim", 0.0), ("sec", 0.03)])]


GRAPH = {"nbg": ({"prim": 1.0, "sec": 0.0}, {"prim": {"sec": 1.0}})}


def test_the_familywise_simulation_applies_the_runs_graph_and_power_rule():
    insts = _graph_instances()
    p = np.random.default_rng(0).random((40, 6)) ** 4
    rej = K.budget_rejections(p, insts, {"nbg": 1.0}, {"nbg": 2}, 0.1, GRAPH)
    from biaslab.stats.verdict import budget_decisions
    for r in range(40):
        rows = pd.DataFrame({"notebook": "nbg", "family": [i.family for i in insts], "claim": [i.claim for i in insts],
                             "level_for_power": [i.need for i in insts], "p": p[r]})
        assert rej[r].tolist() == budget_decisions(rows, 0.1, {"nbg": 1.0}, {"nbg": 2}, GRAPH)["rejected"].tolist()
    # the secondary reaches 0.05 only when both primaries are rejected, and is rejected only there (its 0.03)
    sec = rej[:, [2, 5]]
    both = rej[:, [0, 1]].all(axis=1), rej[:, [3, 4]].all(axis=1)
    assert (sec[:, 0] <= both[0]).all() and (sec[:, 1] <= both[1]).all() and sec.any()
    # under the global null the rule keeps the familywise error at alpha (uniform p: exact tests)
    null = np.random.default_rng(1).random((4000, 6))
    f = K.budget_rejections(null, insts, {"nbg": 1.0}, {"nbg": 2}, 0.1, GRAPH).any(axis=1).mean()
    assert f <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / 4000)


def test_outputs_decided_under_another_plan_are_refused(tmp_path):
    insts = [K.Instance("01_multifactor", "dm-difference", "01_multifactor · bbq · a · b", "x",
                        C.Design(np.random.default_rng(0).normal(size=30), None))]       # a v4 claim
    with pytest.raises(ValueError, match="dm-difference.*decided under another plan"):
        K.fwer(tmp_path, 10, insts=insts)


def test_the_simulated_instances_are_the_graphs_descriptive_ones_left_out():
    t = pd.DataFrame({"claim": ["a", "a", "a", "a", "a", ""],
                      "verdict": ["distinguishable", "not distinguishable", "not reached (α not propagated: `x`)",
                                  "not decided (power 0.5 for SESOI 0.1 at its tested level 0.002)",
                                  "descriptive (power 0.41 for SESOI 0.1 at level 0.004; n ≈ 1,400 would power it)",
                                  "exploratory"]})
    assert K._tested(t).index.tolist() == [0, 1, 2, 3]


def test_a_run_without_pairs_has_no_instances(tmp_path):
    (tmp_path / "paired_differences.csv").write_text("")          # a one-model run writes an empty table
    (tmp_path / "paired_subgroup_tests.csv").write_text("")
    assert K.instances("05_compare", tmp_path, root=tmp_path) == []
    assert K.instances("01_multifactor", tmp_path, benchmark="bbq") == []
    assert K.calibration_table([], 10).columns.tolist() == C.CALIBRATION_COLUMNS


def test_no_tested_claim_means_no_false_rejection(tmp_path):
    t = K.fwer(tmp_path, 20, insts=[])
    assert (t["fwer"] == 0).all() and (t["instances"] == 0).all()


def test_replications_are_simulated_in_blocks_and_bounded(monkeypatch):
    """`--replications 1000000000` allocated one (1e9 x n) array per instance until a 276 GiB MemoryError: the
    simulation runs in blocks of FWER_REPLICATIONS (memory is one block's), the first block's draws those of a
    single run of that size, and a count beyond MAX_REPLICATIONS is refused before any work."""
    insts = iid_instances(3)
    seen, simulate = [], C.simulate
    monkeypatch.setattr(C, "simulate", lambda claim, d, reps, *a, **k: seen.append(reps) or simulate(claim, d, reps,
                                                                                                          *a, **k))
    n = K.FWER_REPLICATIONS * 2 + 7
    t = K.fwer(Path("."), n, seed=4, shares={"nb": 1.0}, insts=insts).set_index("rule")
    assert max(seen) == K.FWER_REPLICATIONS and sum(seen) == 3 * n and t["replications"].eq(n).all()
    one = K.fwer(Path("."), K.FWER_REPLICATIONS, seed=4, shares={"nb": 1.0}, insts=insts).set_index("rule")
    p = np.column_stack([simulate(i.claim, i.design, K.FWER_REPLICATIONS, 4 + k)["p"] for k, i in enumerate(insts)])
    unsplit = one.index[one.index.str.endswith("within families, no split")][0]      # graph or holm, by the plan
    assert one.loc[unsplit, "fwer"] == np.mean((p < 0.05).any(axis=1))
    seen.clear()
    for bad in (0, K.MAX_REPLICATIONS + 1, 10 ** 9):
        with pytest.raises(ValueError, match=f"pass 1 to {K.MAX_REPLICATIONS:,}"):
            K.fwer(Path("."), bad, insts=insts)
    assert not seen


@pytest.mark.parametrize("argv,needle", [
    (["--replications", "1000000000"], "argument --replications: 1,000,000,000 replications are too many: pass 1 to"),
    (["--replications", "0"], "argument --replications: 0 replications are too few"),
    (["--seed", "-1"], "argument --seed: -1 is out of range: pass a seed from 0 to 4294967295"),
    (["--seed", "x"], "argument --seed: 'x' is not an integer"),
])
def test_calibrate_names_the_flag_of_an_unworkable_value(capsys, argv, needle):
    from biaslab import cli
    with pytest.raises(SystemExit) as e:
        cli.main(["calibrate", "fwer", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"biaslab calibrate: error: {needle}" or err[-1].startswith(f"biaslab calibrate: error: "
                                                                                   f"{needle}"), err


def test_calibrate_never_rewrites_the_committed_table_and_refuses_a_folder_without_claims(tmp_path, monkeypatch,
                                                                                          capsys):
    import shutil
    from biaslab import cli
    committed, scratch = tmp_path / "outputs", tmp_path / "scratch"
    # a run folder with tested claims (under plan v5 notebook 4's are all descriptive; notebook 3's are tested)
    shutil.copytree(paths.OUTPUTS_DIR / "03_crows_pairs_bayes", committed / "03_crows_pairs_bayes")
    (committed / "fwer.csv").write_text("committed\n")
    monkeypatch.setattr(paths, "OUTPUTS_DIR", committed)
    monkeypatch.setattr(paths, "SCRATCH_DIR", scratch)
    assert cli.main(["calibrate", "fwer", "--replications", "5"]) == 0
    assert (committed / "fwer.csv").read_text() == "committed\n"
    assert pd.read_csv(scratch / "fwer.csv")["instances"].gt(0).all()
    assert f"wrote {scratch / 'fwer.csv'} (the committed outputs/fwer.csv is written by" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    for folder, needle in ((tmp_path / "empty", "holds no decided claim"), (tmp_path / "nowhere", "is not a folder")):
        assert cli.main(["calibrate", "fwer", "--replications", "5", "--dir", str(folder)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"biaslab calibrate: error: --dir {folder} {needle}") and "pass the outputs" in line
    assert not (tmp_path / "empty" / "fwer.csv").exists()
