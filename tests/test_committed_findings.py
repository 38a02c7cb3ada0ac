"""The committed outputs' findings, checked sentence by sentence against their rows.

Each paper's findings are rendered from the tables committed under ``outputs/`` (whatever run is committed: tables
written before the verdict layer get their verdict columns derived here, by the same ``decisions`` modules the
notebooks use), and every "distinguishable" / "not distinguishable" / "undefined" / "not tested" in a sentence is
checked against the ``verdict`` of the row it is about. The README's generated block must equal what the committed
outputs render to, and no sentence outside it may quote a committed result.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pytest

from biaslab.report import headline
from biaslab.papers.agentic import decisions as D4
from biaslab.papers.agentic import findings as F4
from biaslab.papers.calm import decisions as D2
from biaslab.papers.calm import findings as F2
from biaslab.papers.crows_pairs import decisions as D3
from biaslab.papers.crows_pairs import findings as F3
from biaslab.papers.multifactor import decisions as D1
from biaslab.papers.multifactor import findings as F1
from biaslab import plan as P
from helpers import COMMITTED_PLAN

PLAN = P.load(COMMITTED_PLAN)   # the plan the committed outputs were decided with

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs"


def _read(folder: str, stem: str) -> pd.DataFrame | None:
    p = OUT / folder / "tables" / f"{stem}.csv"
    return pd.read_csv(p) if p.exists() and os.path.getsize(p) > 1 else None


def _need(folder: str, stem: str) -> pd.DataFrame:
    t = _read(folder, stem)
    if t is None:
        pytest.skip(f"no committed outputs/{folder}/tables/{stem}.csv")
    return t


def says(text: str, verdict: str) -> bool:
    """Whether ``text`` states exactly ``verdict`` (and not its opposite)."""
    if verdict == "distinguishable":
        return re.search(r"(?<!not )distinguishable from", text) is not None and "not distinguishable" not in text
    if verdict == "not distinguishable":
        return "not distinguishable" in text
    return verdict.split(":")[0] in text


def _bullet(text: str, head: str) -> str:
    hits = [b for b in text.splitlines() if b.startswith(f"- {head}")]
    assert len(hits) == 1, (head, text)
    return hits[0]


def test_says_tells_the_verdicts_apart():
    assert says("x, distinguishable from chance (Holm …)", "distinguishable")
    assert not says("x, not distinguishable from chance", "distinguishable")
    assert says("x, not distinguishable from chance", "not distinguishable")
    assert not says("x, distinguishable from chance", "not distinguishable")


MULTIFACTOR_CLAUSES = {"paired_subgroup_tests": "the difference of their deviation metrics is ",
                       "paired_comparisons": "their paired deviation rates differ by ",
                       "ks_tests": "the paper's two-sample KS test "}
VERDICT_WORDS = re.compile(r"distinguishable from|undefined|not tested")


def clauses(bullet: str, heads: dict[str, str]) -> dict[str, str]:
    """The bullet cut at its clause heads: each clause runs from its head to the next head (or the bullet's end).
    Clauses are not cut at ';': an interval's method ("CR1 SE; G = 37 …") and a decision's remarks contain one."""
    at = sorted((bullet.find(h), name) for name, h in heads.items() if h in bullet)
    return {name: bullet[i: (at[k + 1][0] if k + 1 < len(at) else len(bullet))] for k, (i, name) in enumerate(at)}


@pytest.fixture(scope="module")
def rendered() -> str:
    if not (OUT / "01_multifactor").exists():
        pytest.skip("no committed outputs")
    return headline.headline(OUT, P.load())     # `biaslab summary` renders under the repository's plan


def test_the_readme_block_is_what_the_committed_outputs_render_to(rendered):
    text = (ROOT / "README.md").read_text()
    assert headline.BEGIN in text and headline.END in text
    block = text.split(headline.BEGIN, 1)[1].split(headline.END, 1)[0]
    assert block.strip() == rendered.strip(), "README's headline block is stale: run `biaslab summary`"


def test_splice_replaces_only_the_block(tmp_path):
    text = f"intro 0.5\n{headline.BEGIN}\nold 0.1\n{headline.END}\ntail\n"
    assert headline.splice(text, "new\n") == f"intro 0.5\n{headline.BEGIN}\nnew\n{headline.END}\ntail\n"
    with pytest.raises(ValueError, match="markers"):
        headline.splice("no markers here", "x")
    # a section whose tables are missing says so instead of failing
    for render in (headline.render, headline.headline):
        assert render(tmp_path, PLAN).count("not available:") == len(headline.SECTIONS)


@pytest.mark.parametrize("folder,render", [("02_calm", "calm"), ("03_crows_pairs_bayes", "crows"),
                                           ("04_agentic_entropy", "agentic")])
def test_committed_claim_sentences_match_their_rows(folder, render):
    """Every claim sentence a notebook renders from its committed tables states its row's verdict and estimate, and
    the number of "distinguishable" sentences equals the number of claims that are."""
    from biaslab.report import wording as W
    if render == "calm":
        t = [D2.decide(_need(folder, "bias_scores"), _read(folder, "responders"), plan=PLAN)]
        text = F2.bias_findings(t[0], plan=PLAN)
    elif render == "crows":
        d = D3.decide(_need(folder, "likelihood_tests"), _read(folder, "preference_tests"), None,
                      _read(folder, "responders"), _read(folder, "preference_answers"), plan=PLAN)
        t = [d["likelihood_tests"], d["preference_tests"]]
        text = F3.likelihood_findings(*t, plan=PLAN)
    else:
        resp = _read(folder, "responders")
        t = [D4.decide("uniformity_tests", _need(folder, "uniformity_tests"), resp, plan=PLAN)]
        text = F4.uniformity_findings(t[0], plan=PLAN)
    # the sentences come in the plan's claim order (wording.claim_findings), table by table within a claim
    rows = pd.concat([x[x["claim"] == c.id] for c in PLAN.of(folder) for x in t if x is not None and "claim" in x])
    assert len(rows) == sum(int((x["claim"] != "").sum()) for x in t)
    lines = text.splitlines()
    assert len(lines) == len(rows) and "n/a" not in text and "nan" not in text
    for line, r in zip(lines, rows.to_dict("records")):
        assert len(line.removeprefix("- ").split()) <= 35, line
        assert says(line, r["verdict"]) if r["verdict"] in ("distinguishable", "not distinguishable") else \
            r["verdict"].split(" (")[0] in line
    n = int((rows["verdict"] == "distinguishable").sum())
    assert sum(bool(re.search(r"(?<!not )distinguishable from", x)) for x in lines) == n


# ------------------------------------------------------------------------------------- notebook 6 (multiverse)
MULTIVERSE_TABLES = ("universes", "costs", "equivalence", "robustness", "estimates", "group_preference",
                     "importance_by_factor", "format_agreement", "ordering_kendall_w")


@pytest.fixture(scope="module")
def multiverse() -> dict:
    """Notebook 6's tables under the outputs root (``BIASLAB_OUTPUTS``, default ``outputs/``); skipped while they
    predate the columns its findings now render from (``findings.stale``)."""
    from biaslab import paths
    from biaslab.papers.multiverse import findings as F6
    why = F6.stale(paths.OUTPUTS_DIR)
    if why:
        pytest.skip(f"{paths.OUTPUTS_DIR}/06_multiverse cannot be checked: {why}")
    t = {n: F6.read_table(paths.OUTPUTS_DIR, n) for n in MULTIVERSE_TABLES}
    t["_dir"] = F6.tables_dir(paths.OUTPUTS_DIR)
    return t


def test_multiverse_summary_and_readme_are_rendered_from_their_tables(multiverse):
    from biaslab.papers.multiverse import findings as F6
    t = multiverse
    lines = F6.summary_lines(t["universes"], t["costs"], t["robustness"], t["importance_by_factor"],
                             t["ordering_kendall_w"], t["format_agreement"], t["estimates"])
    assert (t["_dir"] / "summary.md").read_text() == "\n".join(f"- {s}" for s in lines) + "\n"
    readme = F6.readme_section(t["robustness"], t["importance_by_factor"], t["format_agreement"], t["universes"],
                               t["estimates"])
    assert (t["_dir"] / "readme_section.md").read_text().strip() == readme.strip()
    from biaslab.papers.multiverse import analysis
    again = F6.robustness_table(analysis.robustness(t["equivalence"]))
    pd.testing.assert_frame_equal(again, t["robustness"], check_dtype=False)


def test_multiverse_counts_match_their_rows(multiverse):
    """Every count notebook 6's summary states, against the table it counts (universes, cache,
    the unit of the group preference, degenerate universes, the paper's estimate at the null, separated terms, the
    matched open answers, whole reasons)."""
    t = multiverse
    text = (t["_dir"] / "summary.md").read_text()
    u, costs = t["universes"], t["costs"]
    m = re.search(r"(\d+) of (\d+) model × benchmark universes scored", text)
    assert (int(m.group(1)), int(m.group(2))) == (int((u["status"] == "run").sum()), len(u))
    for reason in set(u.loc[u["status"] != "run", "status"]):
        assert reason in text, f"reason not given whole: {reason}"
    m = re.search(r"(\d+) of (\d+) universes came entirely from the score cache", text)
    cached = costs["cache_misses"] == 0
    assert (int(m.group(1)), int(m.group(2))) == (int(cached.sum()), len(costs))
    assert (costs.loc[cached, "positions_computed"] == 0).all()
    _robustness_rows_match_their_equivalence(t)
    readme = (t["_dir"] / "readme_section.md").read_text()
    by = t["importance_by_factor"]
    named = readme.split("The choice that moves a number most (judged universes): ", 1)[1].split(" (separated terms", 1)[0]
    named = named.split(". ", 1)[0]
    # one choice named per benchmark x model, a ranked one (the top among universes that were judged, so a
    # degenerate universe's factor may give way to the next)
    for (b, m), g in by[by["status"] == "ranked"].groupby(["benchmark", "model"]):
        assert sum(f"{f} ({b}, {m})" in named for f in g["factor"]) == 1, (b, m, named)
    for r in by[by["status"] != "ranked"].itertuples():
        assert f"{r.factor} ({r.benchmark}, {r.model})" not in named
    for r in t["format_agreement"].itertuples():
        assert f"the {r.n_matched} of {r.n_items} items whose open answer was matched ({r.n_items - r.n_matched} " \
               f"not: {r.n_unmatched} unmatched, {r.n_multiple} naming several options) for {r.model}" in readme


def _robustness_rows_match_their_equivalence(t: dict) -> None:
    """Every count of a robustness sentence, against the per-universe equivalence rows it counts."""
    from biaslab.papers.multiverse import analysis
    from biaslab.papers.multiverse import findings as F6
    eq, text = t["equivalence"], F6.robustness_findings(t["robustness"])
    for r in t["robustness"].to_dict("records"):
        rows = eq[(eq["model"] == r["model"]) & (eq["metric"].str.split(":").str[0] == r["metric"])]
        n = rows["agreement"].value_counts()
        assert r["n_equivalent"] == n.get(analysis.EQUIVALENT, 0) and r["n_differs"] == n.get(analysis.DIFFERS, 0)
        assert r["n_not_judged"] == len(rows) - r["n_judged"]
        b = _bullet(text, f"**{r['model']}**, {r['metric']}:")
        assert f"of {int(r['n_judged'])} " in b and f"{int(r['n_equivalent'])} equivalent" in b
        assert rows["same_sign"].notna().sum() == r["n_sign_compared"]


# ----------------------------------------------------------------------- words from rows: levels, n and power
#: what a sentence may quote of its row: an interval's confidence, the level of an adjusted interval, a power (as a
#: percentage, or a claim's "power 0.83 for an effect of 0.1 at level 0.0008"), an α, and counts of units
LEVEL_CI = re.compile(r"(\d+(?:\.\d+)?) % CI\b")
AT_LEVEL = re.compile(r"\] at (\d+(?:\.\d+)?) %")
POWER_PCT = re.compile(r"(\d+(?:\.\d+)?) % power\b")
POWER_AT = re.compile(r"\bpower (\d[\d.]*) for an effect of (\d[\d.e−-]*) at level (\d(?:[\d.e−-]*\d)?)")
ALPHA = re.compile(r"α = (\d[\d.e−-]*)")
COUNT = re.compile(r"(\d[\d,]*) (?:prompts|pairs|items)\b")


def _f(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def row_level(row, low: str) -> float:
    """The confidence of the row's interval with lower bound ``low``, as the row states it: ``ci95_*`` by name, the
    verdict layer's adjusted interval at ``ci_level``, else a method column saying "NN% two-sided", else 95 %."""
    if low.startswith("ci95"):
        return 0.95
    for col in (low.removesuffix("_low") + "_method", "ci_method"):
        m = re.search(r"(\d+(?:\.\d+)?)% two-sided", str(row.get(col, "")))
        if m:
            return float(m.group(1)) / 100
    return 0.95


def quote_mismatches(sentence: str, row, low: str | None = "ci_low", counts=()) -> list[str]:
    """What ``sentence`` quotes that its ``row`` does not say: an interval at another confidence than the row's
    interval (``low``: its lower-bound column), an adjusted interval at another level than ``ci_level``, a power or α
    other than the row's ``power``/``alpha`` (a claim row: its tested level), a power quoted without its level, a
    count of prompts/pairs/items not among ``counts`` (the row's n columns)."""
    bad = []
    for m in LEVEL_CI.finditer(sentence):
        if low is None or abs(_f(m.group(1)) - 100 * row_level(row, low)) > 1e-6:
            bad.append(f"{m.group(0)!r}: the row's interval is at {100 * row_level(row, low or 'ci_low'):g} %")
    for m in AT_LEVEL.finditer(sentence):
        if f"{100 * float(row['ci_level']):.4g}" != m.group(1):
            bad.append(f"{m.group(0)!r}: the row's adjusted interval is at {100 * float(row['ci_level']):.4g} %")
    tested = row.get("tested_level") if pd.notna(row.get("tested_level", float("nan"))) else (
        1 - float(row["ci_level"]) if pd.notna(row.get("ci_level", float("nan"))) else None)
    for m in POWER_PCT.finditer(sentence):
        if pd.isna(row.get("power", float("nan"))) or abs(_f(m.group(1)) - 100 * float(row["power"])) > 1e-6:
            bad.append(f"{m.group(0)!r}: the row's power is {row.get('power')}")
    for m in POWER_AT.finditer(sentence):
        if tested is None or f"{float(row['power']):.2g}" != f"{_f(m.group(1)):.2g}" or \
                f"{tested:.2g}" != m.group(3):
            bad.append(f"{m.group(0)!r}: the row's power {row.get('power')} at level {tested}")
    if POWER_PCT.search(sentence) and not ALPHA.search(sentence):
        bad.append("a power quoted without the level it holds at")
    for m in ALPHA.finditer(sentence):
        a = row.get("alpha") if pd.notna(row.get("alpha", float("nan"))) else tested
        if a is None or abs(_f(m.group(1)) - float(a)) > 1e-12:
            bad.append(f"{m.group(0)!r}: the row's α is {a}")
    for m in COUNT.finditer(sentence):
        if int(_f(m.group(1))) not in {int(c) for c in counts if pd.notna(c)}:
            bad.append(f"{m.group(0)!r}: the row counts {list(counts)}")
    return bad


def test_the_quote_check_finds_a_wrong_level_power_alpha_and_count():
    row = {"ci_low": 0.1, "ci_high": 0.4, "ci_method": "noncentral F inverted, 90% two-sided (each bound one-sided "
           "95%)", "ci_level": 0.9992, "power": 0.8, "alpha": 0.05, "n": 510}
    assert quote_mismatches("w 0.2 (unadjusted 90 % CI 0.1, 0.4) over 510 prompts", row, counts=[510]) == []
    assert quote_mismatches("w 0.2 (unadjusted 95 % CI 0.1, 0.4)", row)
    assert quote_mismatches("0.2 [0.1, 0.3] at 99.9 %", row) and not quote_mismatches("0.2 [0.1, 0.3] at 99.92 %", row)
    assert quote_mismatches("the design had 80 % power for effects of at least 0.07", row)     # no level
    assert not quote_mismatches("the design had 80 % power for effects of at least 0.07 (α = 0.05)", row)
    assert quote_mismatches("the design had 90 % power for effects of at least 0.07 (α = 0.05)", row)
    assert quote_mismatches("x (α = 0.05)", {**row, "alpha": float("nan")})          # a claim tested at 0.0008
    assert not quote_mismatches("power 0.83 for an effect of 0.1 at level 0.0008", {**row, "power": 0.83})
    assert quote_mismatches("power 0.83 for an effect of 0.1 at level 0.05", {**row, "power": 0.83})
    assert quote_mismatches("over 500 prompts", row, counts=[510])


def _claim_rows():
    """(sentence, row, claim) of every instance of the plan's claims in the committed outputs, each sentence rendered
    by :func:`biaslab.report.wording.claim_sentence` from its decided row (the notebooks' and README's machinery)."""
    from biaslab.report import wording as W
    out = []
    for nb, fn in headline.SECTIONS:
        claims = {c.id: c for c in PLAN.of(nb)}
        try:
            frames = fn(OUT, PLAN)
        except headline.Missing:
            continue
        for t in frames:
            if t is None or "claim" not in t:
                continue
            for r in t[t["claim"].isin(claims)].to_dict("records"):
                out.append((W.claim_sentence(r, claims[r["claim"]]), r, claims[r["claim"]]))
    return out


def test_every_claim_sentence_quotes_its_rows_level_and_power():
    """The rendered claim sentences of every notebook: each interval at the confidence its row states (notebook 4's
    group-choice and notebook 2's calm-eq1 intervals are 90 %), an adjusted interval at its ``ci_level``, and a
    power only at the level at which the row was tested."""
    rows = _claim_rows()
    if not rows:
        pytest.skip("no committed claim rows")
    bad = {s: m for s, r, c in rows if (m := quote_mismatches(s, r, c.ci[0] if c.ci else None))}
    assert not bad, bad
    assert any(LEVEL_CI.search(s) or AT_LEVEL.search(s) for s, _, _ in rows)


def test_power_and_descriptive_sentences_quote_their_rows():
    """Power sentences (notebooks 1, 2, 3: power, α and n from ``power.csv``), notebook 4's entropy lines (the
    interval's confidence, the prompts), notebook 7's bias-score line (the intervals' confidence) and notebook 6's
    design lines (items, power, α), each rendered from one committed row and checked against it."""
    from biaslab.papers.agentic import findings as F4
    from biaslab.papers.mbbq import figures as F7
    from biaslab.papers.multiverse import findings as F6
    from biaslab.stats import power as PW
    checked = 0
    for folder in sorted(p.parent.parent.relative_to(OUT).as_posix() for p in OUT.glob("*/**/tables/power.csv")):
        power = _read(folder, "power")
        if power is None:
            continue
        for r in power.to_dict("records"):
            one = pd.DataFrame([r])
            if folder.startswith("01_multifactor") and r["quantity"].endswith("(paired)"):
                text = F1.power_findings(one)
            elif folder == "02_calm":
                text = F2.power_findings(one)
            elif folder == "03_crows_pairs_bayes" and r["quantity"].startswith("SS vs 0.5"):
                text = F3.power_findings(one, r["benchmark"])
            else:
                continue
            assert not (bad := quote_mismatches(text, r, counts=[r["n"], r["required_n"]])), (folder, text, bad)
            checked += 1
    by_model = _read("04_agentic_entropy", "entropy_by_model")
    if by_model is not None:
        for r in by_model.to_dict("records"):
            text = F4.entropy_findings(pd.DataFrame([r]), {"a": 0.6, "b": 0.98})
            assert not (bad := quote_mismatches(text, r, "ci95_low", counts=[r["n"]])), (text, bad)
            checked += 1
    metrics, adjusted = _read("07_mbbq", "metrics"), _read("07_mbbq", "adjusted_contrasts")
    if metrics is not None and adjusted is not None:
        bias = metrics[(metrics["metric"] == "bias_score_ambig") & (metrics["category"] == "all")]
        for r in bias.to_dict("records"):
            text = F7.score_line(pd.DataFrame([r]), "Ambiguous bias score (bias set")
            assert not (bad := quote_mismatches(text, r)), (text, bad)
            checked += 1
    design = _read("06_multiverse", "design_power")
    if design is not None and {"alpha", "power"} <= set(design):
        for r in design.to_dict("records"):
            text = F6.design_findings(pd.DataFrame([r]))
            assert not (bad := quote_mismatches(text, r, counts=[r["n"]])), (text, bad)
            checked += 1
    assert checked > 0 and PW.POWER == 0.8
