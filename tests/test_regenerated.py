"""Comparing a regeneration with the committed outputs (biaslab.run.regenerated, the end of `biaslab reproduce`): on
copies of committed tables, perturbed on purpose (fast: no model runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from biaslab import paths
from biaslab.run import regenerated, execute
from biaslab.scoring import tolerance

NB6 = paths.OUTPUTS_DIR / "06_multiverse"


def _copy(tmp_path: Path, name: str, src: Path = NB6) -> Path:
    dst = tmp_path / name / "06_multiverse"
    (dst / "tables").mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "MANIFEST.json", dst / "MANIFEST.json")
    for t in ("equivalence.csv", "responses_crows_pairs.csv", "estimates.csv", "timings.csv"):
        shutil.copy2(src / "tables" / t, dst / "tables" / t)
    return dst


def _edit(folder: Path, table: str, fn) -> None:
    p = folder / "tables" / table
    df = pd.read_csv(p, low_memory=False)
    fn(df)
    df.to_csv(p, index=False)


def _line(old: Path, new: Path, tols=None):
    rc = regenerated.compare_run(old, new, "06_multiverse", tols or {})
    return rc, regenerated.summary_line(rc)


def test_key_columns_hand_worked():
    df = pd.DataFrame({"model": ["a", "a", "b", "b"], "ci_method": ["x"] * 4, "universe": ["p", "q", "p", "q"],
                       "n": [1, 1, 1, 1], "estimate": [0.1, 0.2, 0.3, 0.4], "verdict": ["v"] * 4})
    # ci_method separates no rows, the decision column is never a key, floats are never keys
    assert regenerated.key_columns(df) == ["model", "universe"]
    tied = pd.DataFrame({"model": ["a", "a"], "x": [1.0, 2.0]})
    assert regenerated.key_columns(tied) == []               # nothing separates them: matched in order of appearance
    d = regenerated.compare_table("t.csv", tied, tied.assign(x=[1.0, 2.5]))
    assert d.numbers == ["row 2: x 2 → 2.5"]
    inf = pd.DataFrame({"x": [float("inf"), float("nan"), 1.0]})
    assert not regenerated.compare_table("t.csv", inf, inf).differs           # equal infinities and NaNs agree
    d = regenerated.compare_table("t.csv", inf, pd.DataFrame({"x": [1.0, 1.0, float("nan")]}))
    assert len(d.numbers) == 3                                              # inf → 1, NaN → 1, 1 → NaN


def test_an_unchanged_copy_is_identical_and_timings_are_not_results(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new, "timings.csv", lambda d: d.__setitem__("seconds", d["seconds"] * 3))
    rc, line = _line(old, new)
    assert line.startswith("06_multiverse: identical (4 tables") and rc.verdict_changes == 0


def test_numbers_within_tolerance_say_so(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new, "responses_crows_pairs.csv", lambda d: d.__setitem__("logp_more", d["logp_more"] + 3e-5))
    rc, line = _line(old, new)
    assert "numbers within 1e-4, verdicts identical (largest |Δ| 3e-5" in line
    assert rc.verdict_changes == 0


def test_a_number_beyond_tolerance_names_its_table_and_row(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    first = pd.read_csv(old / "tables" / "responses_crows_pairs.csv").iloc[0]

    def bump(d):
        d.loc[0, "logp_more"] += 0.01        # scale max(1, |-72|): 0.01 > 1e-4 x 72.3
    _edit(new, "responses_crows_pairs.csv", bump)
    rc, line = _line(old, new)
    assert rc.verdict_changes == 0
    assert "differs — responses_crows_pairs.csv: 1 number(s) beyond tolerance 1e-4" in line
    assert f"prompt_id={first.prompt_id}" in line and "logp_more" in line
    assert "VERDICTS CHANGED" not in line


def test_a_number_that_became_infinite_is_reported_not_a_crash(tmp_path):
    """An interval bound that became infinite (a smaller design) made the largest |Δ| inf, which the summary line's
    number format could not print: the end of a cold `make reproduce` failed after publishing."""
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new, "responses_crows_pairs.csv", lambda d: d.__setitem__("logp_more", d["logp_more"].astype(float))
          or d.loc.__setitem__((0, "logp_more"), float("inf")))
    rc, line = _line(old, new)
    assert "differs — responses_crows_pairs.csv: 1 number(s) beyond tolerance 1e-4 (largest |Δ| inf)" in line
    assert regenerated.fmt(float("nan")) == "nan" and regenerated.fmt(4e-4) == "4e-4"


def test_rows_whose_key_holds_empty_cells_are_compared_not_a_crash():
    """Notebook 3's responders table keys rows by (dataset, modal_answer), and rows that were not judged have no modal
    answer: with more such rows in the regeneration than committed, numbering them skipped the empty keys (pandas'
    text dtype keeps NaN through astype(str)), the regeneration's index repeated, and the end of a cold `make
    reproduce` failed after publishing."""
    old = pd.DataFrame({"dataset": ["en", "fr", "en", "fr"], "modal_answer": ["second", "second", None, None],
                        "n": [60, 60, 30, 30]})
    new = pd.concat([old, old.iloc[2:].assign(n=[20, 20])], ignore_index=True)
    d = regenerated.compare_table("responders.csv", old, new)
    assert d.numbers == [] and len(d.only_new) == 2 and not d.only_committed


def test_a_flipped_verdict_is_named_and_fails_check(tmp_path, monkeypatch, capsys):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    eq = pd.read_csv(old / "tables" / "equivalence.csv")
    i = int((eq["agreement"] == "inconclusive").to_numpy().nonzero()[0][0])

    def flip(d):
        d.loc[i, "agreement"] = "equivalent"
    _edit(new, "equivalence.csv", flip)
    rc, line = _line(old, new)
    assert rc.verdict_changes == 1
    assert line.startswith("06_multiverse: differs — VERDICTS CHANGED (1) | equivalence.csv: 1 verdict(s) changed")
    assert f"universe={eq.loc[i, 'universe']}" in line and "agreement inconclusive → equivalent" in line


def test_a_missing_row_with_a_verdict_is_a_changed_verdict(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new, "equivalence.csv", lambda d: d.drop(index=d.index[-1], inplace=True))
    rc, line = _line(old, new)
    assert rc.verdict_changes == 1 and "row missing from the regeneration" in line


def _with_bf16_universe(folder: Path) -> None:
    """The paper universe's rows again at bf16_weights (the default profile runs float32 only; the paper profile's
    precision universes look like this)."""
    p = folder / "tables" / "responses_crows_pairs.csv"
    d = pd.read_csv(p, low_memory=False)
    low = d[(d["universe"] == "paper") & (d["precision"].astype(str) == "float32")]
    pd.concat([d, low.assign(universe="precision=bf16_weights", precision="bf16_weights")]).to_csv(p, index=False)


def test_the_recorded_tolerance_of_a_precision_applies_to_its_rows_only(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    for f in (old, new):
        _with_bf16_universe(f)
    r = pd.read_csv(old / "tables" / "responses_crows_pairs.csv")
    prec = r["precision"].astype(str)
    lowp = prec[prec != "float32"].iloc[0]
    bump = 5e-3 * r["logp_more"].abs().clip(lower=1)                # 5e-3 relative: beyond 1e-4, within 1e-2
    _edit(new, "responses_crows_pairs.csv", lambda d: d.__setitem__(
        "logp_more", d["logp_more"] + bump.where(prec == lowp, 0.0)))
    model = r.loc[prec == lowp, "model"].iloc[0]
    tols = {(model, lowp): 1e-2}
    rc, line = _line(old, new, tols)
    beyond = [t for t in rc.tables if t.name == "responses_crows_pairs.csv"][0].numbers
    others = r[(prec == lowp) & (r["model"] != model)]
    # rows of the other model at that precision take the precision's largest recorded tolerance
    assert not beyond, beyond
    assert "numbers within 1e-2, verdicts identical" in line and len(others) >= 0
    rc, line = _line(old, new, {})                                    # without the record: float32's 1e-4
    assert "beyond tolerance 1e-4" in line


def test_tolerance_table_is_read_and_checked(tmp_path):
    t = tmp_path / regenerated.TOLERANCE_TABLE
    t.parent.mkdir(parents=True)
    pd.DataFrame([{"model": "m", "precision": "bf16_weights", "n_texts": 16, "schedules": "a · b",
                   "max_abs_delta_logprob": 2e-5, "tolerance": 2e-4}]).to_csv(t, index=False)
    assert regenerated.tolerances(tmp_path) == {("m", "bf16_weights"): 2e-4}
    pd.DataFrame({"model": ["m"]}).to_csv(t, index=False)
    with pytest.raises(ValueError, match="precision_tolerance.csv: column.*missing; regenerate notebook 6"):
        regenerated.tolerances(tmp_path)


def test_a_missing_table_counts_its_verdicts(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    (new / "tables" / "timings.csv").unlink()
    rc, line = _line(old, new)
    assert rc.verdict_changes == 0 and line.endswith("tables missing from the regeneration: timings.csv")
    (new / "tables" / "equivalence.csv").unlink()
    rc, line = _line(old, new)
    assert rc.verdict_changes == len(pd.read_csv(old / "tables" / "equivalence.csv"))


def test_a_deleted_committed_table_counts_its_verdicts_as_appeared(tmp_path):
    """A committed table with verdicts deleted from outputs/: the regeneration's verdicts appear, a change."""
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    (old / "tables" / "equivalence.csv").unlink()
    rc, line = _line(old, new)
    assert rc.verdict_changes == len(pd.read_csv(new / "tables" / "equivalence.csv")) > 0
    assert "VERDICTS CHANGED" in line and line.endswith("new tables: equivalence.csv")


def test_tolerance_rule_hand_worked():
    assert regenerated.fmt(1e-4) == "1e-4" and regenerated.fmt(5.3e-05) == "5.3e-5"
    assert tolerance.tolerance(0.0) == 1e-4                 # the float32 engine's floor
    assert tolerance.tolerance(2.3e-5) == pytest.approx(3e-4)     # 10 x 2.3e-5, rounded up to one digit
    assert tolerance.tolerance(0.059) == pytest.approx(0.6)


def test_another_profile_is_not_compared(tmp_path):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    m = (new / "MANIFEST.json").read_text().replace('"profile": "default"', '"profile": "smoke"')
    (new / "MANIFEST.json").write_text(m)
    rc, line = _line(old, new)
    assert line == "06_multiverse: not compared: the committed run is profile default, this one smoke"


def test_reproduce_prints_the_comparison_and_check_exits_3(tmp_path, monkeypatch, capsys):
    """The runner's end, with the notebook run replaced by a copy of the committed tables with one verdict flipped."""
    out = tmp_path / "out"

    def fake_run(notebook, variant, profile, overrides, outputs_dir, **kw):
        dst = _copy(tmp_path, "out")
        _edit(dst, "equivalence.csv", lambda d: d.__setitem__(
            "agreement", d["agreement"].replace({"inconclusive": "equivalent"})))
        return {"notebook": notebook, "variant": "", "status": "ok", "wall_time_s": 1.0}
    monkeypatch.setattr(execute, "run_one", fake_run)
    monkeypatch.setattr(execute, "resolve_params", lambda *a, **k: {})
    monkeypatch.setattr(execute.preflight, "check_not_published", lambda *a, **k: None)
    code = execute.reproduce("default", only=["06"], outputs_dir=out, html=False, check=True)
    text = capsys.readouterr().out
    assert "compared with the committed outputs" in text and "06_multiverse: differs — VERDICTS CHANGED" in text
    assert code == 3
    code = execute.reproduce("default", only=["06"], outputs_dir=out, html=False, check=False)
    assert code == 0


@pytest.mark.parametrize("how,reason", [
    ("profile", "06_multiverse (the committed run is profile default, this one smoke)"),
    ("no committed run", "06_multiverse (no committed run)"),
])
def test_check_fails_when_a_run_was_not_compared(tmp_path, monkeypatch, capsys, how, reason):
    """--check against another profile (or with no committed run) compared nothing and exited 0."""
    committed = tmp_path / "committed"
    if how == "profile":
        _copy(tmp_path, "committed")
    else:
        committed.mkdir()

    def fake_run(notebook, variant, profile, overrides, outputs_dir, **kw):
        dst = _copy(tmp_path, "out")
        m = (dst / "MANIFEST.json").read_text().replace('"profile": "default"', f'"profile": "{profile}"')
        (dst / "MANIFEST.json").write_text(m)
        return {"notebook": notebook, "variant": "", "status": "ok", "wall_time_s": 1.0}
    monkeypatch.setattr(execute, "run_one", fake_run)
    monkeypatch.setattr(execute, "resolve_params", lambda *a, **k: {})
    monkeypatch.setattr(execute.paths, "OUTPUTS_DIR", committed)
    code = execute.reproduce("smoke", only=["06"], outputs_dir=tmp_path / "out", html=False, check=True)
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("--check:")]
    assert code == 3 and lines == [f"--check: not compared with the committed outputs ({committed}): {reason}; their "
                                   "verdicts are unchecked. Fix: check runs of the profile the committed runs have, "
                                   "of notebooks with a committed run"], lines
    assert execute.reproduce("smoke", only=["06"], outputs_dir=tmp_path / "out", html=False) == 0
