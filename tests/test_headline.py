"""The error budget where it is read: the headline table (n, null, estimate with the interval that agrees with its
verdict and its level, p, adjusted p, family size and level; no decision-looking interval on a row not decided), the
budget sentence and the method text generated from the plan, markdown that names only columns its tables have and
no hand-written family or procedure, and tie groups only for metrics the plan decides."""

from __future__ import annotations

import ast
import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.report import wording as W
from biaslab import plan as P
from biaslab.report import headline
from biaslab.papers import compare
from biaslab.stats import verdict as V
from helpers import COMMITTED_PLAN, V4_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.py"))


def _row(**k):
    base = {"notebook": "05_compare", "claim": "bbq-ambiguous", "who": "a − b", "n": 76, "null": 0.0,
            "estimate": 0.2, "ci_low": 0.05, "ci_high": 0.35, "ci_level": 0.99, "ci_adj_low": 0.01,
            "ci_adj_high": 0.39, "ci_adj_note": "t interval dual to the test", "p": 0.001, "p_adjusted": 0.03,
            "family": "05_compare · a · b", "family_size": 2, "n_families": 6, "alpha_family": 0.05 * 0.2 / 6,
            "sesoi": 0.1, "planned_level": 0.005, "tested_level": 0.005, "power": 0.91, "verdict": "distinguishable"}
    return {**base, **k}


def test_the_headline_table_shows_what_decides(monkeypatch):
    rows = pd.DataFrame([
        _row(),
        _row(who="c − d", estimate=0.1, ci_adj_low=np.nan, ci_adj_high=np.nan, p=0.02, p_adjusted=0.6,
             ci_adj_note="no dual interval computed: an exact p", verdict="not distinguishable"),
        _row(who="e − f", estimate=0.3, ci_low=0.1, ci_high=0.5, ci_adj_low=np.nan, ci_adj_high=np.nan, p=np.nan,
             p_adjusted=np.nan, verdict="not tested (not comparable: different answer modes)", n=12, clusters=11,
             tested_level=np.nan, power=np.nan),
        _row(who="g − h", estimate=0.05, p_adjusted=np.nan, tested_level=np.nan, planned_level=0.004, power=0.41,
             verdict="descriptive (power 0.41 for SESOI 0.1 at level 0.004; n ≈ 1,400 would power it)"),
        _row(who="i − j", estimate=0.06, p_adjusted=0.2, tested_level=0.0, power=np.nan,
             verdict="not reached (α not propagated: `crows-en-share` was not rejected)")],
        columns=headline.COLUMNS)
    monkeypatch.setattr(headline, "claim_rows", lambda root, plan: rows)
    text = headline.render(None, PLAN)
    head = [x for x in text.splitlines() if x.startswith("| notebook")][0]
    for col in ("n (plan)", "null", "SESOI", "adjusted interval", "level", "| p |", "adjusted p", "tested at (power)",
                "family", "verdict"):
        assert col in head, col
    lines = [x for x in text.splitlines() if x.startswith("| 05")]
    assert ("| 76 | 0 | 0.1 | 0.2 [0.01, 0.39] (99 %) | 0.001 | 0.03 | 0.005 (0.91) | 2 (0.0017; of 6) | "
            "distinguishable") in lines[0]
    # a descriptive row: its estimate alone, its planned level and power, as its verdict quotes them
    assert "| 0.05 |  |  | planned 0.004 (0.41) |" in lines[3] and "power 0.41 for SESOI 0.1 at level 0.004" in lines[3]
    assert "| 0.06 |  |  | 0 |" in lines[4] and "| not reached (α not propagated) |" in lines[4]
    assert "| 0.1 † | 0.02 | 0.6 |" in lines[1] and "† no interval at the adjusted level: an exact p." in text
    # not tested: the estimate only, no interval (its unadjusted one excludes 0), no p
    assert "| 0.3 |  |  |  |" in lines[2] and "0.1, 0.5" not in text and "[0.1" not in text
    assert "| 12 in 11 clusters | 0 |" in lines[2]          # the units n counts, and the clusters they fall in
    assert headline.budget_sentence(PLAN) in text


def test_the_readme_headline_counts_each_claims_verdicts_and_shows_the_distinguishable(monkeypatch):
    """The README's block: one row per claim, its instances counted by verdict, each distinguishable instance with
    its adjusted interval; the full table (:func:`headline.render`) is linked, not repeated."""
    rows = pd.DataFrame([
        _row(),
        _row(who="c − d", estimate=0.1, ci_adj_low=np.nan, ci_adj_high=np.nan, p=0.02, p_adjusted=0.6,
             ci_adj_note="no dual interval computed: an exact p", verdict="not distinguishable"),
        _row(who="e − f", estimate=0.3, verdict="not tested (not comparable: different answer modes)"),
        _row(who="g − h", estimate=0.4, verdict="not tested (not comparable: different prompts)"),
        _row(claim="crows-en-share", who="i − j", estimate=0.7, ci_adj_low=0.5, ci_adj_high=0.9, verdict=
             "distinguishable"),
        _row(who="k − l",
             verdict="descriptive (power 0.41 for SESOI 0.1 at level 0.004; n ≈ 1,400 would power it)"),
        _row(who="m − n", verdict="not reached (α not propagated: `crows-en-share` was not rejected)"),
        _row(notebook="02_calm", claim="", who="", verdict="not available: 02_calm/tables/bias_scores.csv is missing")],
        columns=headline.COLUMNS)
    monkeypatch.setattr(headline, "claim_rows", lambda root, plan: rows)
    text = headline.headline(None, PLAN)
    lines = {x.split(" | ")[1].split("`")[1] if "`" in x else x.split(" | ")[0]: x for x in text.splitlines()
             if x.startswith(("| 05", "| 02"))}
    assert ("| 6 | a − b: 0.2 [0.01, 0.39] (99 %) | 1 | 1 | 1 | 2 not tested (not comparable) |"
            in lines["bbq-ambiguous"])
    assert "c − d" not in text and "e − f" not in text and "0.6" not in text and "k − l" not in text
    assert "| 1 | i − j: 0.7 [0.5, 0.9] (99 %) | 0 | 0 | 0 |  |" in lines["crows-en-share"]
    assert "not available: 02_calm/tables/bias_scores.csv is missing" in lines["| 02"]
    assert headline.budget_sentence(PLAN) in text and "(outputs/SUMMARY.md)" in text


def test_the_readme_headline_names_every_distinguishable_instance_of_the_committed_run(claims):
    text = headline.headline(OUT, PLAN)
    c = claims[claims["claim"] != ""]
    for r in c[c["verdict"] == "distinguishable"].to_dict("records"):
        assert f"{r['who']}: {W.num(r['estimate'])}" in text, r["who"]
    counted = [int(x.split(" | ")[2]) for x in text.splitlines() if x.startswith("| 0")]
    assert sum(counted) == len(c) and len(counted) == c["claim"].nunique()


def test_the_budget_sentence_is_the_plans(tmp_path):
    f = tmp_path / "plan.yaml"
    f.write_text(P.DEFAULT.read_text().replace("alpha: 0.05", "alpha: 0.1").replace(
        "01_multifactor: 0.16, 02_calm: 0.16", "01_multifactor: 0.06, 02_calm: 0.26"))
    s = headline.budget_sentence(P.load(f))
    assert "α = 0.1 " in s and "01 0.06, 02 0.26, 03 0.16" in s and "compare it with 0.1" in s


@pytest.fixture(scope="module")
def claims() -> pd.DataFrame:
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    return headline.claim_rows(OUT, PLAN)


def test_every_adjusted_interval_agrees_with_its_verdict(claims):
    """On every committed claim row (re-derived under the current plan): the interval at the level at which Holm
    tested the row excludes the null exactly when the verdict is "distinguishable"; a row without one says why."""
    c = claims[claims["claim"] != ""]
    has = c["ci_adj_low"].notna() & c["ci_adj_high"].notna()
    assert has.any()
    num = c[has].assign(null=pd.to_numeric(c.loc[has, "null"]))
    excl = (num["ci_adj_low"] > num["null"]) | (num["ci_adj_high"] < num["null"])
    assert (excl == (num["verdict"] == "distinguishable")).all(), num[["claim", "who", "verdict"]]
    assert (c.loc[~has, "ci_adj_note"].astype(str).str.len() > 0).all()
    decided = c["verdict"].isin(["distinguishable", "not distinguishable"])
    assert (c.loc[decided, "p_adjusted"] <= 1).all() and (c.loc[decided, "ci_level"] > 0.95).all()
    # the levels of the run's families spend at most alpha in all (shares sum to 1, equal split over families)
    fam = c[decided].drop_duplicates("family")
    plan = PLAN
    for nb, g in fam.groupby("notebook"):
        assert g["alpha_family"].iloc[0] == pytest.approx(plan.alpha * plan.share(nb) / g["n_families"].iloc[0])


# ------------------------------------------------------------------------------------------ method text

def _markdown(path: Path) -> list[str]:
    """The markdown cells of a jupytext percent notebook."""
    cells, cur = [], None
    for line in path.read_text().splitlines():
        if line.startswith("# %%"):
            if cur is not None:
                cells.append("\n".join(cur))
            cur = [] if "[markdown]" in line else None
        elif cur is not None:
            cur.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    if cur is not None:
        cells.append("\n".join(cur))
    return cells


#: a backticked name that reads as an inference or decision column (p, adjusted p, interval, family)
DECISION_COLUMN = re.compile(r"`([a-z][a-z0-9_]*(?:^p_|_p\b|_p_|holm|_bh\b|adj|ci_|famil|q_value)[a-z0-9_]*)`")
#: a sentence naming a family or a multiplicity procedure: only the plan's method text may
PROCEDURE = re.compile(r"\bHolm|\bfamil(y|ies)\b|Bonferroni|Benjamini|\bBH\b|\bFWER\b|\bFDR\b")


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;])\s+|\n\s*\n|\n\* |\n- ", text.replace("\n", " \n")) if s.strip()]


def _hand_written_procedures(text: str) -> list[str]:
    """Sentences of ``text`` that name a family or a procedure and are not one of the allowed true statements: an
    exploratory screen (Benjamini–Hochberg or a family of rows that are never decided) or a Bonferroni level inside
    an interval's construction."""
    bad = []
    for s in _sentences(re.sub(r"`[^`]*`", "", text)):         # a backticked column name (`family`) is no claim
        if not PROCEDURE.search(s):
            continue
        if re.search(r"Holm|FWER", s) or (re.search(r"\bfamil(y|ies)\b", s) and "exploratory" not in s):
            bad.append(s)
        elif re.search(r"Benjamini|\bBH\b|FDR", s) and not re.search(r"exploratory|screen", s):
            bad.append(s)
        elif "Bonferroni" in s and "interval" not in s:
            bad.append(s)
    return bad


def test_the_checks_catch_the_stale_sentences_they_replace():
    old = ("Holm across the paired tests of the notebook (its confirmatory family: family-wise control). Holm within "
           "each model × dataset × score across bias types is kept in the tables (`t_p_holm`) as before.")
    assert len(_hand_written_procedures(old)) == 2 and DECISION_COLUMN.findall(old) == ["t_p_holm"]
    assert not _hand_written_procedures("The terms are exploratory: a Benjamini–Hochberg screen per model is shown.")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_markdown_names_no_family_procedure_or_column_its_run_lacks(path):
    md = "\n\n".join(_markdown(path))
    assert _hand_written_procedures(md) == []
    cols = set(V.VERDICT_COLUMNS)
    for f in (OUT / path.stem).rglob("tables/*.csv"):
        with open(f) as fh:
            cols |= set(next(csv.reader(fh), []))
    if not (OUT / path.stem).exists():
        pytest.skip(f"no committed outputs/{path.stem}")
    missing = sorted(set(DECISION_COLUMN.findall(md)) - cols)
    assert missing == [], f"{path.name} names column(s) {missing} that none of its tables has"


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pages_name_no_family_or_procedure_outside_their_generated_blocks(path):
    from helpers import outside_blocks
    assert _hand_written_procedures(outside_blocks(path.read_text())) == []


FINDINGS = [ROOT / "lib/biaslab/report/wording.py", *sorted((ROOT / "lib/biaslab/papers").glob("*/findings.py"))]


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_findings_text_names_no_family_or_procedure_by_hand(path):
    """The strings a findings module renders (docstrings excepted) name no family or procedure: that text is
    :meth:`biaslab.plan.Plan.method_text` / :func:`biaslab.report.headline.budget_sentence`, generated from the plan."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    text = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]
    assert _hand_written_procedures("\n".join(text)) == []


def test_method_text_is_the_plans_and_names_only_verdict_columns(tmp_path):
    plan = PLAN
    for nb in plan.notebooks:
        text = plan.method_text(nb)
        # `then`: the plan's graph field the method sentence names
        assert set(re.findall(r"`([a-z_]+)`", text)) - {c.id for c in plan.of(nb)} <= set(V.VERDICT_COLUMNS) | {"then"}
        if plan.of(nb):
            assert f"{plan.share(nb):g} of α = {plan.alpha:g}" in text
            assert ("a graph (Bretz et al. 2009)" in text) if plan.graphical else plan.procedure.capitalize() in text
            assert " × ".join(plan.of(nb)[0].family_by) in text
        else:
            assert "No confirmatory claim" in text
    # with a decided table: the run's families, sizes and levels as they ran (plan v4 decides every model pair; v5
    # only the pairs it lists)
    v4 = P.load(V4_PLAN)
    t = pd.DataFrame({"model_a": ["a", "a", "c"], "model_b": ["b", "b", "d"], "metric": ["bbq_bias_ambig"] * 3,
                      "difference": [0.1, 0.2, 0.3], "p_value": [0.001, 0.2, 0.5]})
    t.loc[1, "metric"] = "crows_en_stereotype_preferred"
    d = compare.decide_pairs(t, plan=v4)
    text = v4.method_text("05_compare", d)
    level = v4.alpha * v4.share("05_compare") / 2                               # two families (a-b, c-d)
    assert f"This run: 2 families: 05_compare · a · b (2 tests, level {level:.2g})" in text
    # a different share in the plan changes the text
    f = tmp_path / "plan.yaml"
    f.write_text(P.DEFAULT.read_text().replace("05_compare: 0.16, 07_mbbq: 0.2", "05_compare: 0.26, 07_mbbq: 0.1"))
    assert "0.26 of α = 0.05" in P.load(f).method_text("05_compare")


def test_claim_sentences_show_the_interval_that_agrees_with_the_verdict():
    claim = next(c for c in PLAN.claims if c.id == "bbq-ambiguous")
    row = {"model_a": "a", "model_b": "b", "difference": 0.2, "ci_low": 0.01, "ci_high": 0.39, "verdict":
           "not distinguishable", "p_adjusted": 0.3, "ci_adj_low": -0.02, "ci_adj_high": 0.42, "ci_level": 0.998}
    s = W.claim_sentence(row, claim)
    assert "[−0.02, 0.42] at 99.8 %" in s and "0.01" not in s and "adjusted p = 0.3" in s
    s = W.claim_sentence({**row, "ci_adj_low": np.nan, "ci_adj_high": np.nan}, claim)
    assert "(unadjusted 95 % CI 0.01, 0.39)" in s
    s = W.claim_sentence({**row, "verdict": "not tested (degenerate responder: x)"}, claim)
    assert "0.01" not in s and "0.39" not in s


# ------------------------------------------------------------------------------------------ tie groups

def test_tie_groups_only_for_metrics_the_plan_decides():
    """Agentic mean entropy has no claim: its paired difference (t = -8.3 in the committed run) must not read as a
    tie ("a/a"); a claimed metric keeps its groups."""
    t = pd.DataFrame({"metric": ["agentic_mean_entropy"] * 2 + ["bbq_bias_ambig"] * 2, "model": ["a", "b"] * 2,
                      "estimate": [0.80, 0.82, 0.1, 0.2], "orientation": -1, "comparison_group": "all",
                      "responder_status": "informative"})
    pairs = compare.decide_pairs(pd.DataFrame({"metric": ["agentic_mean_entropy", "bbq_bias_ambig"],
                                               "model_a": "a", "model_b": "b", "difference": [-0.016, -0.1],
                                               "p_value": [1e-12, 0.4]}), plan=PLAN)
    g = compare.tie_group_table(t, pairs).set_index(["metric", "model"])
    ent = g.loc["agentic_mean_entropy"]
    assert (ent["groups"] == "").all() and not ent["ranked"].any()
    assert (ent["note"] == compare.tables.UNDECIDED).all() and ent["estimate"].tolist() == [0.80, 0.82]
    bbq = g.loc["bbq_bias_ambig"]
    assert bbq["ranked"].all() and bbq["groups"].tolist() == ["a", "a"]


@pytest.fixture(scope="module")
def claims_v5() -> pd.DataFrame:
    if not (OUT / "05_compare").exists():
        pytest.skip("no committed outputs")
    return headline.claim_rows(OUT, P.load())          # as `biaslab summary` renders them: the repository's plan


def test_every_n_level_power_and_sesoi_the_summary_quotes_is_its_rows(claims_v5):
    """SUMMARY.md's n is the plan's (the planning design's n, not the table's subgroups or cells), and every power,
    SESOI and level a verdict quotes is the row's own (power at the planned level for a descriptive instance, at the
    tested level for one not decided)."""
    c = claims_v5[claims_v5["claim"] != ""]
    plan = P.load()
    other = c[(c["claim"] == "dm-other") & c["who"].str.endswith(", bbq")].iloc[0]
    assert other["n"] == next(x for x in plan.claims if x.id == "dm-other").design_of("bbq", "default")["n"] == 150
    quoted = 0
    for r in c.to_dict("records"):
        m = re.search(r"power ([\d.]+) for SESOI ([\d.]+) at (its tested )?level ([\d.e-]+)", str(r["verdict"]))
        if not m:
            continue
        level = r["tested_level"] if m[3] else r["planned_level"]
        assert m[1] == f"{r['power']:.2f}" and float(m[2]) == r["sesoi"], r
        assert float(m[4]) == pytest.approx(level, rel=0.05), r
        quoted += 1
    # the committed run's descriptive instances (BBQ's dm-other, the Granite - Llama SSQA rows, bbq-ambiguous; the
    # not measurable ones quote no power)
    assert quoted >= 4
    text = headline.render(OUT, P.load())
    for line in (x for x in text.splitlines() if "| descriptive (power" in x):
        cells = line.split(" | ")
        m = re.search(r"power ([\d.]+) for SESOI [\d.]+ at level ([\d.e-]+)", cells[-1])
        assert f"planned {m[2]} ({m[1]})" in cells, line


def test_notebook_1s_benchmark_runs_are_decided_together_when_a_family_spans_them():
    """Under v5 a family is a model pair and the benchmarks its instances: the graph needs every run's instance at
    once (decide_runs, as `biaslab summary` and the decision panel read them). The SmolLM2 - Gemma family's SSQA
    primary is not tested (a degenerate responder), so dm-other gets the family's level; Winogender is not
    measurable (both models at chance), so CrowS-Pairs, its only powered tested instance, is tested at the whole 0.004."""
    from biaslab.papers.multifactor import decisions as D1
    if not (OUT / "01_multifactor" / "crows_pairs").exists():
        pytest.skip("no committed outputs")
    r = lambda b, t: pd.read_csv(OUT / "01_multifactor" / b / "tables" / f"{t}.csv")          # noqa: E731
    runs = {b.name: ({"paired_subgroup_tests": r(b.name, "paired_subgroup_tests")}, r(b.name, "responders"))
            for b in sorted((OUT / "01_multifactor").iterdir()) if b.is_dir()}
    plan = P.load()
    joint = {b: d["paired_subgroup_tests"] for b, d in D1.decide_runs(runs, plan=plan).items()}
    assert joint["crows_pairs"]["tested_level"].tolist() == pytest.approx([0.004])
    assert joint["winogender"]["verdict"].iloc[0].startswith("not measurable (")
    for b in ("crows_pairs", "winogender"):
        own = [c for c in runs[b][0]["paired_subgroup_tests"].columns if c not in V.VERDICT_COLUMNS]
        assert list(joint[b].columns) == own + V.VERDICT_COLUMNS, b          # its own columns, no stacked others
    assert joint["bbq"]["verdict"].iloc[0].startswith("descriptive (power 0.08")
    alone = D1.decide("crows_pairs", runs["crows_pairs"][0], runs["crows_pairs"][1], plan=plan)
    assert alone["paired_subgroup_tests"]["tested_level"].tolist() == pytest.approx([0.004])
    # families per benchmark run (the v4 plan): each run is decided alone, as its notebook did
    v4 = P.load(V4_PLAN)
    old = D1.decide_runs(runs, plan=v4)["bbq"]["paired_subgroup_tests"]
    assert old["verdict"].tolist() == D1.decide("bbq", runs["bbq"][0], runs["bbq"][1], plan=v4)[
        "paired_subgroup_tests"]["verdict"].tolist()
