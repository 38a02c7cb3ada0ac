"""The plan file as input: validated before any work (one line per problem: file, key path, fix), read safely, its
path resolved once and the bytes the kernel decided with hashed; its dated history; per-instance estimands; every
claim's n and design-based MDE recomputed. Each fault test writes the faulty plan the fault report used and checks
the one-line error (the plan loader used to answer these with a traceback, a silent rc 0 or a minute of alias
expansion)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import oracles as O
from biaslab import paths, plan as P
from biaslab.plan import schema as S
from biaslab.run import profiles, execute
from biaslab.stats import power as W

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs"
SHIPPED = P.DEFAULT.read_text()


def _plan(tmp_path, text: str, name: str = "plan.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def _one_line_errors(f: Path) -> list[str]:
    with pytest.raises(S.PlanError) as e:
        P.load(f)
    lines = e.value.problems
    assert lines and all("\n" not in x and x.startswith(f"{f}: ") and "Fix" in x for x in lines), lines
    return lines


def test_the_shipped_plan_is_valid():
    plan = P.load()
    assert plan.version == "7" and plan.issued == str(plan.history[-1]["date"]) and plan.graphical
    assert abs(sum(plan.budget["shares"].values()) - 1) < 1e-12


@pytest.mark.parametrize("old,new,where,needle", [
    ("alpha: 0.05", "alpha: 1.5", "alpha", "greater than or equal to the maximum of 1"),
    ("alpha: 0.05", "alpha: 0", "alpha", "less than or equal to the minimum of 0"),
    ("  03_crows_pairs_bayes:\n    title", "  03_crows_pairs_bayse:\n    title", "notebooks",
     "unknown notebook '03_crows_pairs_bayse' (did you mean '03_crows_pairs_bayes'?)"),
    ("table: likelihood_tests", "table: likelihood_test", "notebooks.03_crows_pairs_bayes.claims[0].table",
     "did you mean 'likelihood_tests'"),
    ("rows: {bias_type: overall, score: norm_logprob, dataset: crows_pairs_en}",
     "rows: {bias_typ: overall, score: norm_logprob, dataset: crows_pairs_en}",
     "notebooks.03_crows_pairs_bayes.claims[0].rows.bias_typ", "has no column 'bias_typ'"),
    ("estimate: mean_d", "estimate: mean_dd", "notebooks.03_crows_pairs_bayes.claims[0]", "no column 'mean_dd'"),
    ("rows: {bias_type: overall, score: norm_logprob, dataset: crows_pairs_en}", "rows: 5",
     "notebooks.03_crows_pairs_bayes.claims[0].rows", "must be object, not a number"),
    ("    family_by: [model_a, model_b]\n    families:\n      default: [smollm2-135m-instruct · gemma-3-270m, "
     "granite-3.0-8b · llama-3.1-8b]\n    claims:\n      - id: crows",
     "    family_by: 5\n    families:\n      default: [smollm2-135m-instruct · gemma-3-270m, "
     "granite-3.0-8b · llama-3.1-8b]\n    claims:\n      - id: crows", "notebooks.05_compare.family_by",
     "must be array"),
    ("ci: [mean_ci_low, mean_ci_high]", "ci: [mean_ci_low]", "notebooks.03_crows_pairs_bayes.claims[0].ci",
     "[low column, high column] or []"),
    ("- id: stereotype-share", "- id: lpbs-mean", "notebooks.03_crows_pairs_bayes.claims[2].id",
     "also used in notebooks.03_crows_pairs_bayes"),
    ("02_calm: 0.16", "02_calm: 0.26", "budget.shares", "sum to 1.1, not 1"),
    ("procedure: graphical", "procedure: bonferroni", "procedure", "graphical"),
    ("issued: 2026-12-05", "issued: 05.12.2026", "issued", "is not a 'date'"),
    ("version: 7\nissued", "version: 8\nissued", "history", "must increase and end with version 8"),
    ("        null_value: 0.5\n", "        null_value: [0.5]\n", "notebooks.03_crows_pairs_bayes.claims[2].null_value",
     "must be string or number or boolean"),
    ("crows_pairs_en_revised: {design: {default: {level: 0.002,",
     "crows_pairs_en_revised: {design: {default: {deff: 0.5, level: 0.002,",
     "notebooks.03_crows_pairs_bayes.claims[1].instances.crows_pairs_en_revised.design.default.deff",
     "less than the minimum of 1"),
    # the graph's fields
    ("        weight: 1\n        then: {lpbs-other: 0.5, stereotype-share: 0.5}",
     "        weight: 1\n        then: {lpbs-other: 0.5, stereotype-share: 0.6}",
     "notebooks.03_crows_pairs_bayes.claims[0].then", "fractions sum to 1.1, more than 1"),
    ("        weight: 1\n        then: {lpbs-other: 0.5, stereotype-share: 0.5}",
     "        weight: 1\n        then: {lpbs-othr: 0.5, stereotype-share: 0.5}",
     "notebooks.03_crows_pairs_bayes.claims[0].then.lpbs-othr", "not another claim of 03_crows_pairs_bayes"),
    ("        weight: 0\n        then: {stereotype-share: 1}", "        weight: 0.5\n        then: {stereotype-share: 1}",
     "notebooks.03_crows_pairs_bayes.claims", "weights sum to 1.5, more than 1"),
    ("        sesoi: 0.2\n        sesoi_rationale: As for lpbs-mean", "        sesoi_rationale: As for lpbs-mean",
     "notebooks.03_crows_pairs_bayes.claims[1]", "missing key(s) sesoi"),
    ("        sesoi: 0.2\n        sesoi_rationale: As for lpbs-mean", "        sesoi: -0.2\n        sesoi_rationale: As for lpbs-mean",
     "notebooks.03_crows_pairs_bayes.claims[1].sesoi", "less than or equal to the minimum of 0"),
    ("            model: chi2\n", "            model: chisq\n",
     "notebooks.04_agentic_entropy.claims[0].design.default.model", "one of t, z, chi2, range"),
    ("            model: chi2\n            n: 10\n", "            model: chi2\n",
     "notebooks.04_agentic_entropy.claims[0].design.default (instance age)", "model chi2 needs n"),
    ("      default: [smollm2-135m-instruct · gemma-3-270m, granite-3.0-8b · llama-3.1-8b]\n    claims:\n      - id: crows",
     "      smoke: [smollm2-135m-instruct · gemma-3-270m]\n    claims:\n      - id: crows",
     "notebooks.05_compare.claims[0].design.default", "profile 'default' has no families"),
    ("              granite-3.0-8b · llama-3.1-8b:\n                n: 10360\n                se: 0.0258",
     "              granite-3.0-8b · llama-3.2-8b:\n                n: 10360\n                se: 0.0258",
     "notebooks.05_compare.claims[1].design.default (family granite-3.0-8b · llama-3.2-8b)",
     "did you mean 'granite-3.0-8b · llama-3.1-8b'"),
    ("procedure: graphical", "procedure: holm", "notebooks.01_multifactor",
     "design, families, sesoi, sesoi_rationale, then, weight belong to the graphical procedure"),
    # a number is finite: NaN passes every range check (every claim then silently decides nothing)
    ("alpha: 0.05", "alpha: .nan", "alpha", "nan is not a finite number. Fix: write a familywise error rate"),
    ("alpha: 0.05", "alpha: .inf", "alpha", "inf is not a finite number"),
    ("alpha: 0.05", "alpha: -0.05", "alpha", "less than or equal to the minimum of 0"),
    ("02_calm: 0.16", "02_calm: .nan", "budget.shares.02_calm", "nan is not a finite number"),
    ("02_calm: 0.16", "02_calm: .inf", "budget.shares.02_calm", "inf is not a finite number"),
    ("02_calm: 0.16", "02_calm: -0.16", "budget.shares.02_calm", "less than or equal to the minimum of 0"),
    ("02_calm: 0.16", "02_calm: 1.16", "budget.shares.02_calm", "greater than the maximum of 1"),
    ("        sesoi: 0.2\n", "        sesoi: .nan\n", "notebooks.03_crows_pairs_bayes.claims[0].sesoi",
     "nan is not a finite number"),
    ("          bbq:\n            null_value: 0\n", "          bbq:\n            null_value: .nan\n",
     "notebooks.01_multifactor.claims[1].instances.bbq.null_value", "nan is not a finite number"),
    ("        bbq_bias_ambig: 0.1", "        bbq_bias_ambig: .inf", "notebooks.06_multiverse.equivalence.margins",
     "inf is not a finite number"),
])
def test_a_faulty_plan_gets_one_line_per_problem_naming_the_key_path(tmp_path, old, new, where, needle):
    assert old in SHIPPED, old
    f = _plan(tmp_path, SHIPPED.replace(old, new, 1))
    lines = _one_line_errors(f)
    hit = [x for x in lines if x.startswith(f"{f}: {where}") and needle in x]
    assert hit, lines


@pytest.mark.parametrize("text,where,needle", [
    ("version: 2\nnotebooks:\n  - 01_multifactor\n", "notebooks", "must be object, not a list"),
    (SHIPPED.split("notebooks:\n")[0] + "notebooks:\n  05_compare:\n    title: x\n    family_by: [model]\n"
     "    claims: [ssqa-deviation-rate]\n", "notebooks.05_compare.claims[0]", "must be object, not a string"),
    ("- [1, 2\n", "line 2, column 1", "Fix the YAML there"),
    ("version: 2\nversion: 2\n", "line 1", "key 'version' appears twice"),
    ("[1, 2]\n", "top level", "must be a mapping"),
    ("", "top level", "must be a mapping"),
])
def test_wrong_types_and_yaml_errors_are_one_line_without_traceback(tmp_path, text, where, needle):
    f = _plan(tmp_path, text)
    lines = _one_line_errors(f)
    assert any(x.startswith(f"{f}: {where}") and needle in x for x in lines), lines


def test_every_problem_is_named_at_once(tmp_path):
    f = _plan(tmp_path, SHIPPED.replace("alpha: 0.05", "alpha: 1.5").replace(
        "  03_crows_pairs_bayes:\n    title", "  03_crows_pairs_bayse:\n    title").replace(
        "  - version: 2\n", "  - version: 1\n"))
    lines = _one_line_errors(f)
    assert [x.split(": ")[1] for x in lines] == ["alpha", "notebooks"], lines      # then, once fixed, the history
    f.write_text(SHIPPED.replace("  - version: 2\n", "  - version: 1\n"))
    assert "history: versions [1, 1, 3, 4, 5, 6, 7] must increase" in _one_line_errors(f)[0]


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    """A 9 x 9 'billion laughs' expansion took 60-110 s and a MemoryError; aliases are now refused while parsing."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    f = _plan(tmp_path, "\n".join(lines) + "\nnotebooks: *a8\n")
    t0 = time.perf_counter()
    (line,) = _one_line_errors(f)
    assert time.perf_counter() - t0 < 2
    assert line.startswith(f"{f}: line 1, column 5: anchors and aliases")


def test_a_huge_or_binary_file_is_refused_before_parsing(tmp_path):
    (line,) = _one_line_errors(_plan(tmp_path, "# x\n" * (S.MAX_BYTES // 4 + 10)))
    assert "larger than 256 KB" in line
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"version: 2\n\xff\xfe\n")
    (line,) = _one_line_errors(f)
    assert line.startswith(f"{f}: byte 11: not UTF-8")


@pytest.mark.parametrize("old,new", [("alpha: 0.05", "alpha: 1.5"),
                                     ("  03_crows_pairs_bayes:\n    title", "  03_crows_pairs_bayse:\n    title"),
                                     ("alpha: 0.05", "alpha: [0.05")])
def test_dry_run_refuses_a_faulty_plan_with_rc_2_and_no_traceback(tmp_path, capsys, monkeypatch, old, new):
    from biaslab import cli
    monkeypatch.chdir(tmp_path)
    _plan(tmp_path, SHIPPED.replace(old, new, 1), "rel_plan.yaml")
    assert cli.main(["reproduce", "--only", "05", "--dry-run", "-p", "analysis_plan=rel_plan.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(x.startswith(f"biaslab reproduce: error: {tmp_path / 'rel_plan.yaml'}: ") for x in err), err
    assert "Traceback" not in "\n".join(err)
    assert cli.main(["reproduce", "--only", "05", "--dry-run", "--plan", "rel_plan.yaml"]) == 2


#: columns the code writes now that the committed outputs predate (the stratified share's design-based p of notebook
#: 3); each must be missing from the committed header, so the entry fails, and goes, once the outputs are regenerated
NOT_YET_REGENERATED: dict = {}
#: notebooks whose outputs the committed outputs/ do not hold yet (added since the last regeneration); each entry
#: fails, and goes, once its folder is committed
NOT_YET_PUBLISHED: set = set()


def test_the_declared_tables_are_the_committed_tables_columns():
    """Each notebook's claim-able tables and columns (plan.schema.TABLES) exist in the committed outputs' CSV
    headers (for notebook 1: of every benchmark's run); every claim of the shipped plan names one of them."""
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    for nb, tables in S.TABLES.items():
        if nb in NOT_YET_PUBLISHED:
            assert not (OUT / nb).exists(), f"outputs/{nb} is committed: remove it from NOT_YET_PUBLISHED"
            continue
        for table, cols in tables.items():
            files = sorted((OUT / nb).glob(f"**/tables/{table}.csv"))
            assert files, (nb, table)
            pending = NOT_YET_REGENERATED.get((nb, table), set())
            for f in files:
                header = set(pd.read_csv(f, nrows=0).columns)
                assert set(cols) - pending <= header, (f, set(cols) - header)
                assert not pending & header, f"{f} has {pending & header}: remove them from NOT_YET_REGENERATED"
    assert set(S.TABLES) == {p.stem for p in (ROOT / "notebooks").glob("0*.py")}


def test_a_claim_that_matches_no_row_is_a_noted_deviation(tmp_path, caplog):
    from biaslab.report.outputs import OutputDir
    from biaslab.papers import compare
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    f = _plan(tmp_path, SHIPPED.replace("rows: {metric: bbq_bias_ambig}", "rows: {metric: bbq_bias_ambiguous}"))
    out = OutputDir(tmp_path / "run", P.load(f))
    decided = compare.decide_pairs(pd.read_csv(OUT / "05_compare/tables/paired_differences.csv"),
                                   pd.read_csv(OUT / "05_compare/tables/responder_status.csv"), plan=P.load(f))
    assert not (decided["claim"] == "bbq-ambiguous").any()
    notes = json.loads((tmp_path / "run/provenance.json").read_text())["notes"]
    assert any("deviation from the analysis plan: claim bbq-ambiguous (05_compare) matched no row of "
               "paired_differences" in n for n in notes), notes


def test_a_claim_about_another_run_of_notebook_1_is_no_deviation(caplog):
    """Notebook 1's BBQ run has no SSQA row: dm-ssqa is about the SSQA run, so no deviation is noted there; the SSQA
    run without one is a deviation."""
    from biaslab.stats import verdict
    plan = P.load()
    dm = next(c for c in plan.claims if c.id == "dm-ssqa")
    t = pd.DataFrame({"model_a": ["a"], "model_b": ["b"], "metric_difference": [0.1], "p_value": [0.5]})
    assert dm.about_another_run(t.columns, {"benchmark": "bbq"}) and not dm.about_another_run(t.columns,
                                                                                             {"benchmark": "ssqa"})
    for bench, noted in (("bbq", False), ("ssqa", True)):
        caplog.clear()
        with caplog.at_level("WARNING"):
            verdict._claims(t.iloc[:0], "paired_subgroup_tests", "01_multifactor", {"benchmark": bench}, plan)
        assert any("claim dm-ssqa (01_multifactor) matched no row" in r.message for r in caplog.records) == noted


# ---- one plan, one path -------------------------------------------------------------------------------------

def test_a_run_records_the_plan_it_is_given_and_its_report_reads_that_plan(tmp_path):
    """No module global: the OutputDir records the hash of the plan the notebook passed it, and the report's
    decision panel loads the plan the MANIFEST names (the repository's when none is recorded)."""
    from biaslab.report.outputs import OutputDir
    f = _plan(tmp_path, SHIPPED.replace("alpha: 0.05", "alpha: 0.1"))
    plan = P.load(f)
    OutputDir(tmp_path / "run", plan)
    prov = json.loads((tmp_path / "run/provenance.json").read_text())
    assert prov["analysis_plan"] == plan.entry() and prov["analysis_plan"]["path"] == str(f.resolve())
    assert P.recorded(prov).alpha == 0.1 and P.recorded(prov).sha256 == plan.sha256
    assert P.recorded({}).path == P.DEFAULT.resolve() and P.recorded({"analysis_plan": None}).alpha == 0.05
    OutputDir(tmp_path / "bare")
    assert "analysis_plan" not in json.loads((tmp_path / "bare/provenance.json").read_text())
    f.unlink()
    with pytest.raises(FileNotFoundError, match="plan.yaml not found"):
        P.recorded(prov)


def test_the_plan_path_is_resolved_against_where_the_command_ran(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert P.resolve("rel.yaml") == tmp_path / "rel.yaml"
    assert P.resolve(str(tmp_path / "abs.yaml")) == tmp_path / "abs.yaml"
    assert P.resolve(None) == P.DEFAULT.resolve() == P.resolve("None")
    params = execute.resolve_params("05_compare", "", "smoke", {"analysis_plan": "rel.yaml"}, check_models=False)
    assert params["analysis_plan"] == str(tmp_path / "rel.yaml")


@pytest.fixture
def toy(tmp_path, monkeypatch):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('output_dir = "x"\nprofile = "default"\nmodels = []\nanalysis_plan = None')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "from biaslab import plan\nfrom biaslab.report.outputs import OutputDir\n"
        "out = OutputDir(output_dir, plan.load(analysis_plan))")]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nbformat.write(nb, nbdir / "00_toy.ipynb")
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", nbdir)
    monkeypatch.setattr(profiles, "NOTEBOOKS", {"00_toy": {"": {}}})
    monkeypatch.setattr(profiles, "PROFILES", {p: {"*": {"models": ["smollm2-135m-instruct"]}}
                                               for p in profiles.PROFILE_NAMES})
    monkeypatch.setattr(paths, "SCRATCH_DIR", tmp_path / "scratch")
    monkeypatch.setattr(paths, "OUTPUTS_DIR", tmp_path / "published")
    return tmp_path


@pytest.mark.parametrize("how", ["relative", "absolute", "default"])
def test_the_manifest_hashes_the_plan_bytes_the_kernel_decided_with(toy, monkeypatch, how):
    """`-p analysis_plan=rel_plan.yaml` from the repository root was hashed as ./rel_plan.yaml while the kernel
    (working folder notebooks/) read notebooks/rel_plan.yaml. Both files exist here, with different versions."""
    monkeypatch.chdir(toy)
    mine = _plan(toy, SHIPPED.replace("version: 7\nissued", "version: 902\nissued", 1).replace(
        "  - version: 7\n    date: 2026-12-05", "  - version: 902\n    date: 2026-12-05"), "rel_plan.yaml")
    _plan(toy / "notebooks", SHIPPED, "rel_plan.yaml")           # what a kernel in notebooks/ would have read
    arg = {"relative": "rel_plan.yaml", "absolute": str(mine), "default": None}[how]
    overrides = {} if arg is None else {"analysis_plan": arg}
    assert execute.reproduce("smoke", overrides=overrides, outputs_dir=toy / "out", html=False) == 0
    m = json.loads((toy / "out/00_toy/MANIFEST.json").read_text())
    want = P.DEFAULT if arg is None else mine
    assert m["analysis_plan"]["sha256"] == hashlib.sha256(want.read_bytes()).hexdigest()
    assert m["analysis_plan"]["version"] == ("7" if arg is None else "902")
    assert "notebooks" not in m["analysis_plan"]["path"]
    assert m["written"].startswith("20")


def test_a_plan_edited_after_the_runner_read_it_is_recorded_as_the_kernel_read_it(toy, monkeypatch):
    """The runner validates and hashes the plan before the kernel starts; if the file changes before the kernel
    reads it, the MANIFEST records the kernel's bytes and says so in a note."""
    monkeypatch.chdir(toy)
    mine = _plan(toy, SHIPPED, "mine.yaml")
    edited = SHIPPED.replace("alpha: 0.05", "alpha: 0.01")
    nb = nbformat.read(toy / "notebooks/00_toy.ipynb", as_version=4)
    nb.cells[1].source = f"from pathlib import Path\nPath(analysis_plan).write_text({edited!r})\n" + nb.cells[1].source
    nbformat.write(nb, toy / "notebooks/00_toy.ipynb")
    assert execute.reproduce("smoke", overrides={"analysis_plan": "mine.yaml"}, outputs_dir=toy / "out",
                             html=False) == 0
    m = json.loads((toy / "out/00_toy/MANIFEST.json").read_text())
    assert m["analysis_plan"]["sha256"] == hashlib.sha256(mine.read_bytes()).hexdigest()
    assert m["analysis_plan"]["sha256"] != hashlib.sha256(SHIPPED.encode()).hexdigest()
    assert any("the analysis plan changed while this run ran" in n for n in m["notes"]), m["notes"]


def test_verify_reports_a_plan_missing_changed_or_issued_after_the_results(tmp_path):
    f = _plan(tmp_path, SHIPPED)
    manifest = {"analysis_plan": P.load(f).entry() | {"path": str(f), "issued": "2026-11-25"}, "written": "2026-11-26"}
    assert P.changed_since(manifest) == ""
    f.write_text(SHIPPED.replace("alpha: 0.05", "alpha: 0.01"))
    note = P.changed_since(manifest)
    assert note.startswith(P.CHANGED) and "issued 2026-12-05, after these results were written (2026-11-26)" in note
    f.unlink()
    assert "is missing" in P.changed_since(manifest) and str(f) in P.changed_since(manifest)


def test_a_plan_issued_in_the_future_is_refused_and_verify_fails_a_run_that_records_one(tmp_path, capsys):
    """A plan dated after today was accepted with no note, and `biaslab verify` passed a run that recorded it."""
    from biaslab import cli
    future = (datetime.now(timezone.utc).date() + timedelta(days=2)).isoformat()
    issued = P.load().issued
    f = _plan(tmp_path, SHIPPED.replace(f"issued: {issued}", f"issued: {future}")
              .replace(f"    date: {issued}", f"    date: {future}"))
    (line,) = _one_line_errors(f)
    assert line.startswith(f"{f}: issued: {future} is after today")
    run = tmp_path / "out/00_x"
    run.mkdir(parents=True)
    written = datetime.now(timezone.utc).date().isoformat()
    manifest = {"files": {}, "written": written, "analysis_plan": P.load().entry() | {"issued": future}}
    (run / "MANIFEST.json").write_text(json.dumps(manifest))
    assert cli.main(["verify", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert f"{P.ISSUED_AFTER}: the MANIFEST records plan v{P.load().version} issued {future}, after these results were written " \
           f"({written})" in out and "0 of 1 run folder(s) verified" in out
    run.joinpath("MANIFEST.json").write_text(json.dumps(manifest | {"analysis_plan": P.load().entry()}))
    assert cli.main(["verify", str(tmp_path / "out")]) == 0


# ---- history ------------------------------------------------------------------------------------------------

def test_the_history_says_when_v1_was_written():
    """v1 was committed after the exploratory runs of these data; its entry must not claim otherwise, and no text
    of the repository says the plan was fixed before the data."""
    plan = P.load()
    v1, last = plan.history[0], plan.history[-1]
    assert [h["version"] for h in plan.history] == [1, 2, 3, 4, 5, 6, 7] and last["date"] == plan.issued
    for h in (v1, last):                        # a version written after runs it was chosen knowing says so
        assert "after" in h["reason"] and "knowing those runs" in h["reason"]
    first = subprocess.run(["git", "-C", str(ROOT), "log", "--follow", "--diff-filter=A", "--format=%ad",
                            "--date=short", "--", "analysis_plan.yaml"], capture_output=True, text=True)
    if first.returncode == 0 and first.stdout.strip():
        assert str(v1["date"]) == first.stdout.split()[-1]
    for needle in ("before the data", "before any data", "pre-regist", "fixed before"):
        # tracked files only (an editable install's egg-info holds a copy of an older README)
        hits = subprocess.run(["git", "grep", "-niI", needle, "--", "README.md", "analysis_plan.yaml", "lib",
                               "notebooks", "docs"], cwd=ROOT, capture_output=True, text=True).stdout
        assert hits == "", hits
    assert not re.search(r"0\.7.0\.97|within about \+-0\.3", SHIPPED)


# ---- per-instance estimands, planning designs and power ------------------------------------------------------

def test_notebook_1_states_each_benchmarks_own_outcome_ideal_and_handling():
    from biaslab.benchmarks import SPECS
    plans = {n: s.factor_plan for n, s in SPECS.items() if s.factor_plan is not None}
    ssqa, other = (next(c for c in P.load().claims if c.id == i) for i in ("dm-ssqa", "dm-other"))
    assert set(other.instances) | {"ssqa"} == set(plans) and ssqa.rows == {"benchmark": "ssqa"}
    assert set(other.rows["benchmark"]) == set(other.instances)
    for bench, spec in plans.items():
        est = ssqa.estimand if bench == "ssqa" else other.instance(bench)["estimand"]
        assert est["variable"].startswith(spec.outcome + ","), bench
        assert f"ideal rate C = {spec.ideal:g}" in est["variable"], bench
        assert est["items"] == other.estimand["items"]                    # not overridden: the claim's own
        assert "per instance" not in " ".join(est.values()), bench
    assert spec_subgroups("bbq") == ["category", "context_condition"]       # the code's subgroups, as the plan says
    assert "per category x context condition" in other.instance("bbq")["estimand"]["variable"]
    assert "position preference" in other.instance("agentic")["estimand"]["position"]
    assert other.instance("unknown")["estimand"] == other.estimand and other.instance()["n"] is None


def spec_subgroups(benchmark):
    from biaslab.benchmarks import SPECS
    return list(SPECS[benchmark].factor_plan.ecdf_factors)


def _merged(plan):
    """Every planning design the plan states: (claim, instance key, profile, family) -> (claim, design)."""
    out = {}
    for c in plan.claims:
        raw = {"design": dict(c.design), "instances": dict(c.instances)}
        for (key, prof, fam), d in S._merged_designs(raw).items():
            out[(c.id, key, prof, fam)] = (c, d)
    return out


def test_every_stated_power_is_the_designs_power_at_its_stated_level():
    """The plan states, per instance and profile, the level it is planned at and the power its test has there for
    the SESOI; both recomputed here from the design alone (biaslab.stats.power.design_power)."""
    plan = P.load()
    got = _merged(plan)
    assert len(got) >= 25
    for (cid, key, prof, fam), (c, d) in got.items():
        assert {"model", "level", "power", "source"} <= set(d), (cid, key, fam, d)
        want = W.design_power(d, c.sesoi, d["level"], c.sides)
        assert d["power"] == pytest.approx(want, abs=6e-4), (cid, key, fam, want)
        assert c.sesoi_rationale and "observed" not in c.sesoi_rationale


def _rows_of_the_default_run(plan):
    """The claim instances of the committed default run under ``plan``, per notebook and family: (claim, design,
    sides) of every row a claim matches in the committed tables (notebook 1: every benchmark's run)."""
    from biaslab.stats.verdict import _adjust  # noqa: F401  (the module the planning lives in)
    out = {}
    for c in plan.claims:
        files = sorted((OUT / c.notebook).glob(f"**/tables/{c.table}.csv"))
        for f in files:
            t = pd.read_csv(f)
            ctx = {"benchmark": f.parent.parent.name} if c.notebook == "01_multifactor" else None
            m = c.mask(t, ctx)
            for r in t[m].to_dict("records"):
                fam = c.family(r, ctx)
                label = fam.split(" · ", 1)[1]
                if label not in plan.families(c.notebook):
                    continue
                key = c.key_of(r, ctx)
                out.setdefault((c.notebook, fam), []).append((c, key, label, c.design_of(key, plan.profile, label)))
    return out


def test_every_stated_level_is_the_graphs_planned_level_in_the_default_run():
    """The level each design states is the one the verdict layer plans for the committed default run's rows
    (biaslab.stats.verdict.plan_family: the family's level x the instance's weight once the claims that pass it
    alpha are rejected; the least powered instances out of the graph first), and the instances below 0.8 power are
    exactly those the plan marks descriptive."""
    from biaslab.stats.verdict import plan_family
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    plan = P.load()
    seen = set()
    for (nb, fam), rows in _rows_of_the_default_run(plan).items():
        a_f = plan.alpha * plan.share(nb) / len(plan.families(nb))
        got = plan_family([c.id for c, *_ in rows], [d for *_, d in rows], [c.sesoi for c, *_ in rows],
                          [c.sides for c, *_ in rows], plan.graph(nb), a_f)
        for (c, key, label, d), g in zip(rows, got.to_dict("records")):
            assert d["level"] == pytest.approx(g["planned_level"], rel=1e-3), (c.id, key, label)
            assert d["power"] == pytest.approx(g["planned_power"], abs=6e-4), (c.id, key, label)
            assert g["descriptive"] == (d["power"] < 0.8), (c.id, key, label)
            seen.add(c.id)
    assert seen == {c.id for c in plan.claims}


def _bound_design(claim, key):
    """(n, clusters, Kish design effect) of a bound-based claim instance in the default profile, from the committed
    run's design columns (units and clusters) and CrowS-Pairs' stratum sizes: no outcome enters."""
    t = lambda f: pd.read_csv(OUT / f)                                       # noqa: E731
    crows = t("03_crows_pairs_bayes/tables/datasets.csv")
    kish = lambda d: O.kish_deff(crows[crows.dataset == d]["N_h"], crows[crows.dataset == d]["n_h"])  # noqa: E731
    if claim in ("lpbs-mean", "lpbs-other", "stereotype-share"):
        key = key or "crows_pairs_en"
        r = t("03_crows_pairs_bayes/tables/likelihood_tests.csv")
        r = r[(r.dataset == key) & (r.bias_type == "overall")].iloc[0]
        return int(r["n"]), None, kish(key)
    if claim == "group-choice":
        r = t("04_agentic_entropy/tables/uniformity_tests.csv")
        r = r[(r.class_type == key) & (r.unit == "group")].iloc[0]
        return int(r["n"]), None, 1.0
    if claim == "mbbq-ambig-en":        # Kish's design effect of its weights needs the MBBQ data: not checked here
        r = t("07_mbbq/tables/metrics.csv")
        r = r[(r.metric == "bias_score_ambig") & (r.language == "en") & (r.set == "bias") & (r.category == "all")]
        return int(r["n"].iloc[0]), None, None
    metric = {"ssqa-deviation-rate": "ssqa_deviation_rate", "crows-en-share": "crows_en_stereotype_preferred"}[claim]
    r = t("05_compare/tables/paired_differences.csv")
    r = r[(r.metric == metric) & (r.model_a == "smollm2-135m-instruct")].iloc[0]
    clusters = int(r["n_clusters"]) if r["n_clusters"] < r["n_pairs"] else None
    return (int(r["n_pairs"]), clusters,
            kish("crows_pairs_en") if claim == "crows-en-share" else r["n_pairs"] / r["n_clusters"])


def test_the_bound_designs_are_the_committed_default_runs_design_and_the_scales_bound():
    """A design whose SD comes from the scale's bound states that bound (a share 0.5, a share difference
    sqrt(0.5), a standardized mean 1) and the committed default run's n, clusters and design effect (Kish's of the
    weights, or the cluster bound n / clusters)."""
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    bounds = {"lpbs-mean": "standardized", "lpbs-other": "standardized", "stereotype-share": "share",
              "crows-en-share": "share_difference", "ssqa-deviation-rate": "share_difference"}
    checked = 0
    for (cid, key, prof, fam), (c, d) in _merged(P.load()).items():
        if prof != "default" or fam is not None or not d["source"].startswith(("bound", "the design alone: 10")):
            continue
        n, clusters, deff = _bound_design(cid, key)
        assert d["n"] == n and d.get("clusters") == clusters, (cid, key, d)
        assert deff is None or d.get("deff", 1.0) == pytest.approx(deff, abs=1e-3), (cid, key, deff)
        if cid in bounds:
            assert d["sd"] == pytest.approx(O.PLANNING_SD[bounds[cid]], abs=1e-4), cid
        checked += 1
    assert checked >= 10


def test_power_of_a_t_test_far_in_the_tail_is_a_number():
    # t(699), noncentrality 0.2 * sqrt(700) = 5.29 at level 1e-5: scipy's nct.cdf of the far tail is NaN there
    d = {"model": "t", "n": 700, "sd": 1}
    assert W.design_power(d, 0.2, 1e-5) == pytest.approx(0.798, abs=2e-3)
    lv = W.level_for_power(d, 0.2)
    assert 1e-6 < lv < 1e-4 and W.design_power(d, 0.2, lv) == pytest.approx(0.8, abs=1e-6)


def test_a_descriptive_instance_says_what_n_would_power_it_against_what_the_data_hold():
    from biaslab.stats.verdict import _n_that_would
    d = {"model": "t", "n": 100, "sd": 1}                  # d_z 0.2 at level 0.004: n ~ 350
    assert _n_that_would(d, 0.2, 0.004, "two-sided").startswith("n ≈ 350 would power it")
    assert _n_that_would({**d, "max_n": 1000}, 0.2, 0.004, "two-sided") == "n ≈ 350 would power it"
    assert _n_that_would({**d, "max_n": 300}, 0.2, 0.004, "two-sided") == (
        "n ≈ 350 would power it, more than the 300 the data hold: no profile decides it")


def test_power_at_a_level_by_hand():
    # z: effect 0.1, SE 0.025 (z = 4) at level 0.01 two-sided: Phi(4 - 2.5758) + Phi(-4 - 2.5758) = 0.9228
    assert W.power_t(0.1, 0.025, None, 0.01) == pytest.approx(0.92280, abs=1e-4)
    assert W.power_t(0.1, 0.025, None, 0.005, "one-sided (above)") == pytest.approx(0.92280, abs=1e-4)
    # t(36): the noncentral t, below the normal's power
    assert W.power_t(0.1, 0.025, 36, 0.01) < W.power_t(0.1, 0.025, None, 0.01)
    # Cohen's w 0.3, n 100, df 2 at 0.05: noncentrality 9, chi2 crit 5.991 -> 0.7706 (Cohen 1988, Table 7.3.16: .77)
    assert W.power_chi2(0.3, 100, 2, 0.05) == pytest.approx(0.7706, abs=1e-3)
    d = {"model": "t", "n": 150, "clusters": 37, "sd": 1.0, "deff": 150 / 37}
    lv = W.level_for_power(d, 0.6)
    assert W.design_power(d, 0.6, lv) == pytest.approx(0.8, abs=1e-6)
    n = W.n_for_power(d, 0.5, 0.004)            # the smallest n that powers it, the cluster size kept
    assert W.design_power(W._scaled(d, n), 0.5, 0.004) >= 0.8 > W.design_power(W._scaled(d, n - 1), 0.5, 0.004)
    # Kish: proportional allocation has deff 1; two strata N = (100, 300) sampled 50 each: 100 * (2^2*50 + 6^2*50)
    # / (2*50 + 6*50)^2 = 100 * 2000 / 160000 = 1.25
    assert O.kish_deff([100, 300], [25, 75]) == pytest.approx(1.0)
    assert O.kish_deff([100, 300], [50, 50]) == pytest.approx(1.25)


def test_the_verdict_layer_reads_each_instances_own_null(tmp_path):
    """An instance's null_value (here notebook 1's agentic instance moved onto the estimate) decides that instance's
    rows; the other benchmarks keep the claim's null."""
    from biaslab.papers.multifactor import decisions as D1
    if not (OUT / "01_multifactor/agentic").exists():
        pytest.skip("no committed outputs")
    c = next(c for c in P.load().claims if c.id == "dm-other")
    assert c.key_of({"model_a": "x"}, {"benchmark": "calm"}) == "calm" and c.key_of({"model_a": "x"}) is None
    assert c.design_of("calm", "default")["n"] == 84 and c.design_of("calm", "smoke") is None
    old = "          agentic:\n            null_value: 0\n"
    assert old in SHIPPED
    r = lambda b, t: pd.read_csv(OUT / f"01_multifactor/{b}/tables/{t}.csv")          # noqa: E731
    at = float(r("agentic", "paired_subgroup_tests")["metric_difference"].iloc[0])    # the null on the estimate
    f = _plan(tmp_path, SHIPPED.replace(old, old.replace("null_value: 0", f"null_value: {at!r}")))
    got = {}
    for plan_file in (None, f):
        got[plan_file] = {b: D1.decide(b, {"paired_subgroup_tests": r(b, "paired_subgroup_tests")},
                                       r(b, "responders"), plan=P.load(plan_file))["paired_subgroup_tests"]
                          for b in ("agentic", "bbq")}
    assert bool(got[None]["agentic"]["excludes_null"].iloc[0]) is True
    assert bool(got[f]["agentic"]["excludes_null"].iloc[0]) is False
    assert got[None]["bbq"]["excludes_null"].equals(got[f]["bbq"]["excludes_null"])
