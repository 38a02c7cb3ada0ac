"""The committed outputs' findings, checked sentence by sentence against their rows (issue 18).

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

from biaslab import summary
from biaslab.papers.agentic import decisions as D4
from biaslab.papers.agentic import findings as F4
from biaslab.papers.calm import decisions as D2
from biaslab.papers.calm import findings as F2
from biaslab.papers.crows_pairs import decisions as D3
from biaslab.papers.crows_pairs import findings as F3
from biaslab.papers.multifactor import decisions as D1
from biaslab.papers.multifactor import findings as F1

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


def test_crows_pairs_sentences_match_their_rows():
    f = "03_crows_pairs_bayes"
    d = D3.decide(_need(f, "likelihood_tests"), _read(f, "preference_tests"), _read(f, "paired_comparisons"),
                  _read(f, "responders"), _read(f, "preference_answers"))
    lik = d["likelihood_tests"]
    text = F3.likelihood_findings(lik)
    rows = lik[(lik["bias_type"] == "overall") & (lik["score"] == "norm_logprob")]
    assert len(rows) == len(text.splitlines())
    for r in rows.to_dict("records"):
        assert says(_bullet(text, f"**{r['model']} · {r['dataset']}**"), r["verdict"]), r
    if "preference_tests" in d:
        pref = d["preference_tests"]
        ptext = F3.preference_findings(pref, pd.DataFrame(), None, None)
        for r in pref[pref["bias_type"] == "overall"].to_dict("records"):
            b = _bullet(ptext, f"**{r['model']} · {r['dataset']}**")
            part = re.search(re.escape(r["source"]) + r": π̂ = [^;]*", b).group(0)
            assert says(part, r["verdict"]), (r["source"], part)


def test_calm_sentences_match_their_rows():
    f = "02_calm"
    bs = D2.decide(_need(f, "bias_scores"), _read(f, "responders"))
    text = F2.bias_findings(bs)
    for r in bs[(bs["task"] == "all") & (bs["bias_type"] == "all")].to_dict("records"):
        name = "eq.-1 score" if r["variant"] == "paper" else "released-code score"
        assert says(_bullet(text, f"**{r['model']}**, {name}"), r["verdict"]), r
    rob = _read(f, "robustness")
    if rob is not None:
        rtext = F2.robustness_findings(D2.robustness_against_interval(rob, bs))
        assert "n/a" not in rtext
        for r in D2.robustness_against_interval(rob, bs).query("perturbation == 'combined'").to_dict("records"):
            b = _bullet(rtext, f"**{r['model']}**, {r['variant']} variant")
            out = r["outside_original_interval"]
            assert ("outside" in b) == (out is True or out == True)  # noqa: E712
            assert ("cannot be compared" in b) == pd.isna(r["overall"]) or pd.isna(r["original_overall"])


def test_agentic_sentences_match_their_rows():
    f = "04_agentic_entropy"
    resp = _read(f, "responders")
    if resp is None or "metric" not in resp:
        resp = D4.responder_table(_need(f, "responses"))
    ut = D4.decide("uniformity_tests", _need(f, "uniformity_tests"), resp)
    text = F4.uniformity_findings(ut)
    for unit in ("group", "position"):
        g = ut[ut["unit"] == unit]
        n = int((g["verdict"] == "distinguishable").sum())
        assert f"Counted by **{unit}**, the top answers are distinguishable from a uniform choice in {n} of {len(g)}" \
            in text
    for r in ut[ut["unit"] == "group"].to_dict("records"):
        named = f"- {r['model']} on {r['class_type']}:" in text
        assert named == (r["verdict"] != "not distinguishable"), r
        if named:
            assert says(_bullet(text, f"{r['model']} on {r['class_type']}:"), r["verdict"])
    for name, render, head in (("cyclic_by_model", F4.cyclic_findings, "**{model}**"),
                               ("paired_comparisons", F4.comparison_findings, "**{model_a} − {model_b}**")):
        t = _read(f, name)
        if t is None:
            continue
        t = D4.decide(name, t, resp)
        text = render(t)
        for r in t.to_dict("records"):
            assert says(_bullet(text, head.format(**r)), r["verdict"])


# the clauses of a model pair's bullet in notebook 1's subgroup findings, by the table each one renders
MULTIFACTOR_CLAUSES = {"paired_subgroup_tests": "the difference of their deviation metrics is ",
                       "paired_comparisons": "their paired deviation rates differ by ",
                       "ks_tests": "the paper's two-sample KS test "}
VERDICT_WORDS = re.compile(r"distinguishable from|undefined|not tested")


def clauses(bullet: str, heads: dict[str, str]) -> dict[str, str]:
    """The bullet cut at its clause heads: each clause runs from its head to the next head (or the bullet's end).
    Clauses are not cut at ';': an interval's method ("CR1 SE; G = 37 …") and a decision's remarks contain one."""
    at = sorted((bullet.find(h), name) for name, h in heads.items() if h in bullet)
    return {name: bullet[i: (at[k + 1][0] if k + 1 < len(at) else len(bullet))] for k, (i, name) in enumerate(at)}


def test_clauses_reach_the_decision_and_can_fail():
    """The parsing is not what decides: a clause whose interval method holds a ';' still reaches its decision, a wrong
    verdict in it is caught, and the next clause's verdict does not leak into it."""
    b = ("- a vs b: the difference of their deviation metrics is 0.1 (95 % CI, x; G = 4 −0.1–0.3), not "
         "distinguishable from no difference (Holm 0.5; effects smaller than 0.2 would go undetected); their paired "
         "deviation rates differ by 0.2 (95 % CI, cluster-robust t(36), CR1 SE; G = 37 template clusters 0.1–0.3) "
         "over 9 prompts, distinguishable from no difference (Holm-adjusted p = 0.01 over 2 confirmatory tests).")
    c = clauses(b, MULTIFACTOR_CLAUSES)
    assert set(c) == {"paired_subgroup_tests", "paired_comparisons"}
    assert all(VERDICT_WORDS.search(part) for part in c.values())
    assert says(c["paired_subgroup_tests"], "not distinguishable")
    assert not says(c["paired_subgroup_tests"], "distinguishable")
    assert says(c["paired_comparisons"], "distinguishable")
    assert not says(c["paired_comparisons"], "not distinguishable")


@pytest.mark.parametrize("benchmark", ["ssqa", "bbq", "calm", "crows_pairs", "agentic"])
def test_multifactor_sentences_match_their_rows(benchmark):
    f = f"01_multifactor/{benchmark}"
    dm = _need(f, "deviation_metric")
    t = D1.decide(benchmark, {n: _read(f, n) for n in MULTIFACTOR_CLAUSES}, _read(f, "responders"))
    text = F1.subgroup_findings(dm, t["ks_tests"], t["paired_subgroup_tests"], t["paired_comparisons"])
    assert "p n/a" not in text
    for name in MULTIFACTOR_CLAUSES:
        tab = t[name]
        if tab is None or tab.empty or "verdict" not in tab:
            continue
        for r in tab.to_dict("records"):
            part = clauses(_bullet(text, f"{r['model_a']} vs {r['model_b']}:"), MULTIFACTOR_CLAUSES)[name]
            assert VERDICT_WORDS.search(part), (name, part)       # the clause reaches its decision
            assert says(part, r["verdict"]), (name, part)


@pytest.fixture(scope="module")
def rendered() -> str:
    if not (OUT / "01_multifactor").exists():
        pytest.skip("no committed outputs")
    return summary.render(OUT)


def test_the_readme_block_is_what_the_committed_outputs_render_to(rendered):
    text = (ROOT / "README.md").read_text()
    assert summary.BEGIN in text and summary.END in text
    block = text.split(summary.BEGIN, 1)[1].split(summary.END, 1)[0]
    assert block.strip() == rendered.strip(), "README's headline block is stale: run `biaslab summary`"


def test_the_across_models_summary_matches_its_pairs(rendered):
    sec = rendered.split("**Across models (notebook 5).**", 1)[1]
    m = re.search(r"(\d+) model pairs were tested, in one family for the whole report \(Holm over (\d+) "
                  r"confirmatory tests\); (\d+) are distinguishable", sec)
    assert m and m.group(1) == m.group(2)
    per_metric = [int(x) for x in re.findall(r"(\d+) of \d+ tested pairs distinguishable", sec)]
    per_metric += [1 for _ in re.findall(r"both answered: [^;]*?, distinguishable \(", sec)]
    assert sum(per_metric) == int(m.group(3))


def test_splice_replaces_only_the_block(tmp_path):
    text = f"intro 0.5\n{summary.BEGIN}\nold 0.1\n{summary.END}\ntail\n"
    assert summary.splice(text, "new\n") == f"intro 0.5\n{summary.BEGIN}\nnew\n{summary.END}\ntail\n"
    with pytest.raises(ValueError, match="markers"):
        summary.splice("no markers here", "x")
    # a section whose tables are missing says so instead of failing
    empty = summary.render(tmp_path)
    assert empty.count("not available:") == len(summary.SECTIONS)


# ------------------------------------------------------------------------------------- notebook 6 (multiverse)
MULTIVERSE_TABLES = ("universes", "costs", "agreement", "robustness", "estimates", "group_preference",
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
    lines = F6.summary_lines(t["universes"], t["costs"], t["agreement"], t["importance_by_factor"],
                             t["ordering_kendall_w"], t["format_agreement"])
    assert (t["_dir"] / "summary.md").read_text() == "\n".join(f"- {s}" for s in lines) + "\n"
    readme = F6.readme_section(t["agreement"], t["importance_by_factor"], t["format_agreement"], t["universes"])
    assert (t["_dir"] / "readme_section.md").read_text().strip() == readme.strip()
    pd.testing.assert_frame_equal(F6.robustness_table(t["agreement"]), t["robustness"], check_dtype=False)


def test_multiverse_counts_match_their_rows(multiverse):
    """Every count notebook 6's summary states, against the table it counts (issue 21 audit: universes, cache,
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
    _agreement_rows_match_their_estimates(t)
    readme = (t["_dir"] / "readme_section.md").read_text()
    by = t["importance_by_factor"]
    top = by[(by["status"] == "ranked") & (by["rank"] == 1)]
    named = readme.split("The choice that moves a number most: ", 1)[1].split(" (separated terms", 1)[0]
    named = named.split(". ", 1)[0]
    for r in top.itertuples():
        assert f"{r.factor} ({r.benchmark}, {r.model})" in named
    for r in by[by["status"] != "ranked"].itertuples():
        assert f"{r.factor} ({r.benchmark}, {r.model})" not in named
    for r in t["format_agreement"].itertuples():
        assert f"the {r.n_matched} of {r.n_items} items whose open answer was matched ({r.n_items - r.n_matched} " \
               f"not: {r.n_unmatched} unmatched, {r.n_multiple} naming several options) for {r.model}" in readme


def _agreement_rows_match_their_estimates(t: dict) -> None:
    from biaslab.papers.multiverse import analysis
    from biaslab.papers.multiverse import findings as F6
    ag = t["agreement"].set_index(["model", "metric"])
    text = F6.agreement_findings(t["agreement"])
    cols = ["n_universes", "n_compared", "n_excluded_degenerate", "n_sign_compared", "n_same_sign",
            "n_same_verdict", "robustness"]
    scalar = analysis.agreement_with_paper(t["estimates"]).set_index(["model", "metric"])
    pooled = analysis.agreement_with_paper(t["group_preference"], keys=("model", "metric", "class_type", "group"),
                                           unit=analysis.GROUP_ROWS).set_index(["model", "metric"]) \
        if len(t["group_preference"]) else scalar.iloc[:0]
    again = pd.concat([scalar, pooled])
    pd.testing.assert_frame_equal(ag.loc[again.index, cols], again[cols], check_dtype=False)
    est = t["estimates"]
    for (model, metric), r in ag.iterrows():
        if r["unit"] == analysis.UNIVERSES:        # the degenerate universes left out, counted from the estimates
            others = est[(est["model"] == model) & (est["metric"] == metric) & (est["universe"] != "paper")
                         & est["estimate"].notna()]
            assert r["n_excluded_degenerate"] == others["responder_status"].str.startswith("degenerate").sum() \
                or str(r["paper_responder_status"]).startswith("degenerate")
            if r["paper_estimate"] == r["paper_estimate"] and r["paper_estimate"] == est.loc[
                    (est["model"] == model) & (est["metric"] == metric) & (est["universe"] == "paper"),
                    "null_value"].iloc[0]:
                assert pd.isna(r["share_same_sign"]) and not str(r["robustness"]).startswith("sign flips")
        if not r["n_compared"]:
            continue
        b = _bullet(text, f"**{model}**, {metric}:")
        unit = "other universes" if r["unit"] == analysis.UNIVERSES else "rows (universe × class type × group)"
        assert f"of {int(r['n_compared'])} {unit}" in b
        assert f"{int(r['n_same_verdict'])} of {int(r['n_compared'])} reach the same verdict" in b
        assert (f"{int(r['n_same_sign'])} of {int(r['n_sign_compared'])} land on the same side" in b
                if r["n_sign_compared"] else "the sign cannot agree or disagree" in b)
        assert (f"{int(r['n_excluded_degenerate'])} not judged" in b) == bool(r["n_excluded_degenerate"])
