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

PLAN = P.load()             # the repository's analysis plan (the committed outputs')

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
    return headline.headline(OUT, PLAN)


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
    rows = pd.concat([x[x["claim"] != ""] for x in t])
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
