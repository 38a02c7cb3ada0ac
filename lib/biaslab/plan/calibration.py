"""Calibration of a run's confirmatory tests and the familywise error of the headline table (docs/calibration.md).

Every tested instance of a plan claim (a row of a run's table whose ``claim`` is set and whose verdict is
"distinguishable" or "not distinguishable") becomes a :class:`biaslab.stats.null_simulation.Design`: the raw data the
claim's test is computed from (the two models' answers, a pair's two sentences, the two languages' answers, the
choices' group labels, CALM's responses), rebuilt from the run's own item-level tables and checked against the
committed estimate (a builder that recomputes another quantity fails loudly), with the function that recomputes
the test's input from permuted raw data; and the level the row was tested at (:func:`tested_level`). Then

* :func:`run` (one call per notebook) simulates each instance under its raw-data null, at alpha and at its tested
  level with replications scaled to that level, and writes ``tables/calibration.csv``;
* :func:`fwer` simulates every instance of every notebook's graph under the global null at once, applies the error
  budget exactly as the run did (:func:`budget_rejections`, the verdict layer's rule) and counts the replications
  with at least one false "distinguishable".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from .. import plan as P
from ..benchmarks import SPECS, spec
from ..stats import null_simulation as C
from ..stats.reanalysis import in_graph

#: replications of the familywise-error simulation that ``biaslab reproduce --publish`` runs; also the block size
#: :func:`fwer` simulates at once (memory is one block's: the committed outputs' 52 instances take ~0.8 GB per block,
#: the largest design 20,720 units x 2,000 replications, whatever the count asked for)
FWER_REPLICATIONS = 2000
#: the most replications :func:`fwer` takes: at ~19 ms per replication on 2 cores (the committed outputs) 100,000
#: take ~30 minutes, and their Monte Carlo SE (at most 0.0016, 0.0007 at a familywise error of 0.05) is far below
#: what could change a conclusion; a billion would take ~7 months
MAX_REPLICATIONS = 100_000
#: the notebooks with confirmatory claims, in the order of the headline table
NOTEBOOKS = ("01_multifactor", "02_calm", "03_crows_pairs_bayes", "04_agentic_entropy", "05_compare", "07_mbbq")


@dataclass
class Instance:
    """One claim instance in the run's graph: where it is decided, the design its test reads (None: ``why`` says why
    the run's tables cannot rebuild it; every plan claim has a test in :data:`biaslab.stats.null_simulation.TESTS`),
    the level it was tested at (:func:`tested_level`) and ``need``, the decided row's ``level_for_power`` (0 under a
    plan without SESOIs)."""
    notebook: str
    claim: str
    family: str
    instance: str
    design: C.Design | None
    why: str = ""
    level: float = float("nan")
    need: float = 0.0       # the level its test needs for 80 % power for its SESOI (the plan's power rule)


def _read(path: Path) -> pd.DataFrame:
    """A run's table, or an empty frame where the run wrote none or an empty one (no pair, no claim row)."""
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _read_header(path: Path) -> list[str]:
    try:
        return list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        return []


def _tested(t: pd.DataFrame) -> pd.DataFrame:
    """The rows of a decided table that are claim instances in the run's graph: tested, and neither descriptive nor
    untested (decided, not reached, or not decided for want of power at the level they reached)."""
    if "claim" not in t or "verdict" not in t:
        return t.iloc[0:0]
    v = t["verdict"].astype(str)
    return t[t["claim"].fillna("").ne("") & v.map(in_graph)]


def _instance(notebook: str, r, who: str, design: C.Design | None, why: str = "") -> Instance:
    """The instance decided on row ``r``: its level (:func:`tested_level`) and ``need`` (its ``level_for_power``)."""
    need = getattr(r, "level_for_power", 0.0)
    return Instance(notebook, r.claim, r.family, who, design, why, tested_level(r),
                    float(need) if need is not None and np.isfinite(need) else 0.0)


def _check(where: str, what: str, value: float, committed: float, tol: float = 1e-7) -> None:
    if not (np.isfinite(committed) and math.isclose(value, committed, rel_tol=tol, abs_tol=tol)):
        raise ValueError(f"{where}: the rebuilt design's {what} is {value!r}, the committed table says {committed!r}; "
                         "the calibration would simulate another quantity (rerun the notebook, or fix the builder)")


def _labels(df: pd.DataFrame, cols) -> list[np.ndarray]:
    return [df[c].astype(str).to_numpy() for c in cols]


def tested_level(row) -> float:
    """The level a decided row was tested at (its ``tested_level``, the verdict layer's); NaN where it is not set."""
    level = getattr(row, "tested_level", np.nan)
    return float(level) if isinstance(level, (int, float)) and np.isfinite(level) else float("nan")


# ------------------------------------------------------------------------------------------------ per notebook
def dm_design(sums_a: np.ndarray, sums_b: np.ndarray, statistic, label: str) -> C.Design:
    """The swap design of notebook 1's deviation-metric difference (``dm-ssqa``, ``dm-other``) from
    :func:`biaslab.stats.paired.deviation_metric_swap_design` (the two models' answers summed per template and
    subgroup, and the statistic): ``values`` recomputes ``DM_a - DM_b`` from the totals after the answers are
    exchanged in the swapped templates."""
    from ..stats.clustered import swap_statistics
    g = sums_a.shape[0]

    def values(s):
        return np.concatenate([swap_statistics(sums_a, sums_b, statistic, s[i:i + 10_000])
                               for i in range(0, len(s), 10_000)])[:, None]
    return C.Design(values(np.zeros((1, g)))[0], None, units=g, values=values, label=label)


def multifactor_instances(tables: Path, benchmark: str, data: pd.DataFrame | None = None,
                          seed: int | None = None) -> list[Instance]:
    """Notebook 1's ``dm-ssqa`` and ``dm-other``: the two models' answers summed per template (the first of the
    benchmark's ``cluster_columns``) and subgroup, the difference of their deviation metrics recomputed from the totals
    after the answers are exchanged in random templates (:func:`biaslab.stats.paired.deviation_metric_swap_design`).
    ``data``: the notebook's no-CoT responses with their factors (read from ``responses*.csv`` when None, SSQA's
    missing factors joined from its prompt table); ``seed``: the run's (default its MANIFEST's), with which a row
    decided by the swap test must reproduce its p."""
    from ..stats.clustered import cluster_swap_p
    from ..stats.paired import deviation_metric_swap_design
    rows = _tested(_read(tables / "paired_subgroup_tests.csv"))
    if rows.empty:
        return []
    bspec = spec(benchmark)
    plan = bspec.need("factor_plan", "notebook 1's calibration")
    bench = (plan.prepare or bspec.load)()
    if data is None:
        data = pd.concat([pd.read_csv(p) for p in sorted(tables.glob("responses*.csv"))], ignore_index=True)
        data = data[data["cot"].astype(str) == "no"] if "cot" in data else data
        for f in [f for f in plan.ecdf_factors if f not in data or data[f].isna().any()]:
            joined = data["prompt_id"].map(bench.prompts.set_index("prompt_id")[f])
            data[f] = data[f].fillna(joined) if f in data else joined
        data = data[data[plan.outcome].notna()].assign(**{plan.outcome: lambda d: d[plan.outcome].astype(int)})
    seed = _run_seed(tables) if seed is None else seed
    out = []
    for r in rows.itertuples():
        where = f"{tables}/paired_subgroup_tests.csv ({r.model_a} - {r.model_b})"
        who = f"{benchmark} · {r.model_a} - {r.model_b}"
        design = deviation_metric_swap_design(data, plan.outcome, plan.ecdf_factors, r.model_a, r.model_b,
                                              bench.cluster_columns, ideal=plan.ideal)
        if isinstance(design, str):
            out.append(_instance("01_multifactor", r, who, None, design))
            continue
        d = dm_design(*design, f"{benchmark}: {r.model_a} - {r.model_b}, {design[0].size} template x subgroup "
                               f"cells, answers swapped within {bench.cluster_columns[0]}")
        g = d.n_swap
        _check(where, "metric difference", float(d.y[0]), float(r.metric_difference))
        _check(where, "number of clusters", g, float(r.n_clusters))
        if str(getattr(r, "test", "")).startswith("randomization test"):       # the row's own p, with the run's seed
            _check(where, f"swap-test p (seed {seed})", cluster_swap_p(*design, seed=seed)["p_value"],
                   float(r.p_value), tol=1e-12)
        out.append(_instance("01_multifactor", r, who, d))
    return out


def _stratified(ok: np.ndarray, frame: pd.DataFrame) -> dict:
    """The stratified design of the units ``ok`` of ``frame`` (the others have no outcome: left out within their
    stratum, which keeps its population size N_h = sum of the design weights N_h/n_h, as
    :mod:`biaslab.stats.stratified` does); an unweighted table (no ``stratum``/``weight``) is one stratum."""
    from ..stats.stratified import has_design
    if not has_design(frame):
        return {}
    pop = frame.groupby(frame["stratum"].astype(str))["weight"].sum().to_dict()
    return {"strata": frame["stratum"].astype(str).to_numpy()[ok], "population": pop}


def crows_instances(tables: Path) -> list[Instance]:
    """Notebook 3's ``lpbs-mean`` (per-pair normalized log-probability differences) and ``stereotype-share`` (1 when
    log P(more) > log P(less), ties left out within their bias type) from ``pair_scores.csv``, the null swapping each
    pair's two sentences (their log-probabilities; per token for lpbs): pairs independent, stratified by bias type
    and weighted to the file where the table carries the sampling design (``stratum``, ``weight``); the rebuilt
    weighted estimate must equal the table's."""
    from ..benchmarks.crows_pairs import likelihood_preferences
    pairs = _read(tables / "pair_scores.csv")
    out = []
    for stem, claim_col, stat, null in (("likelihood_tests", "mean_d", np.subtract, 0.0),
                                        ("preference_tests", "pi_hat", likelihood_preferences, 0.5)):
        for r in _tested(_read(tables / f"{stem}.csv")).itertuples():
            g = pairs[(pairs["model"] == r.model) & (pairs["dataset"] == r.dataset)]
            where = f"{tables}/{stem}.csv ({r.model}, {r.dataset})"
            a, b = g["logp_more"].to_numpy(float), g["logp_less"].to_numpy(float)
            if stem == "likelihood_tests":                      # lpbs: per token
                a, b = a / g["n_more"].to_numpy(float), b / g["n_less"].to_numpy(float)
            ok = np.isfinite(stat(a, b))
            d = C.arms_design(a[ok], b[ok], None, stat, **_stratified(ok, g), null=null, binary=null == 0.5,
                              label=f"{r.dataset}, {r.model}: {int(ok.sum())} pairs (independent), the two "
                                    "sentences swapped")
            _check(where, claim_col, float(d.W @ (np.bincount(d.h, weights=d.y) / np.bincount(d.h))),
                   float(getattr(r, claim_col)))
            out.append(_instance("03_crows_pairs_bayes", r, f"{r.model} · {r.dataset}", d))
    return out


def agentic_instances(tables: Path) -> list[Instance]:
    """Notebook 4's ``group-choice``: each prompt's top group (a category code) clustered by scenario; the null
    re-randomizes which group sits in which answer slot within every scenario, which permutes the top groups' labels
    within the scenario (:func:`biaslab.stats.null_simulation.relabel`)."""
    resp = _read(tables / "responses.csv")
    out = []
    for r in _tested(_read(tables / "uniformity_tests.csv")).itertuples():
        cats = [c.rsplit(": ", 1)[0] for c in r.counts.split("; ")]
        g = resp[(resp["model"] == r.model) & (resp["class_type"] == r.class_type)]
        pol = getattr(r, "polarity", None)          # one instance per class type x question polarity
        if isinstance(pol, str) and pol:
            g = g[g["polarity"] == pol]
        who = " · ".join(str(x) for x in (r.model, r.class_type, pol) if isinstance(x, str) and x)
        where = f"{tables}/uniformity_tests.csv ({who})"
        unknown = set(g["top_group"].astype(str)) - set(cats)
        if unknown:
            raise ValueError(f"{where}: top groups {sorted(unknown)} are not among the row's groups {cats}")
        y = g["top_group"].astype(str).map({c: i for i, c in enumerate(cats)}).to_numpy(float)
        _check(where, "number of prompts", float(y.size), float(r.n))
        d = C.Design(y, _labels(g, ["scenario_id"]), categories=len(cats),
                     label=f"{who}: {y.size} prompts, {len(cats)} groups, clusters scenario_id")
        _check(where, "Rao-Scott p", float(C.rao_scott(y[None, :], d)["p"][0]), float(r.p_value), tol=1e-6)
        out.append(_instance("04_agentic_entropy", r, who, d))
    return out


def _ratio_arms(m, both: pd.DataFrame, a: str, b: str) -> tuple:
    """A ratio score's raw answers per unit for both models, ``(deviated, non_unknown, correct)`` (units in the order
    of model a's rows), and the statistic that recomputes the per-unit difference of the two models' pseudo-values
    (:func:`biaslab.benchmarks.bbq.bias_score_pseudo_values`, each answer weighted by its design weight scaled to mean
    1 where the table has weights, as the metric's ``derive`` does); checked against the derived pseudo-values."""
    from ..benchmarks.bbq import bias_score_pseudo_values
    cond = set(both["context_condition"])
    if len(cond) != 1:
        raise ValueError(f"{m.id}: the calibration recomputes one context condition's score, the units hold {cond}")
    ambig = cond == {"ambig"}
    ra = both[both["model"] == a].set_index("unit")
    rb = both[both["model"] == b].set_index("unit").reindex(ra.index)
    w = _weights(ra)
    cols = ["deviated", "non_unknown", "correct"]
    if "non_unknown" not in ra:
        ra, rb = (x.assign(non_unknown=1 - x["chose_unknown"].astype(int)) for x in (ra, rb))

    def statistic(xa, xb):
        return (bias_score_pseudo_values(*(w * xa[..., j] for j in range(3)), ambig=ambig)
                - bias_score_pseudo_values(*(w * xb[..., j] for j in range(3)), ambig=ambig))
    xa, xb = ra[cols].to_numpy(float), rb[cols].to_numpy(float)
    got = statistic(xa[None], xb[None])[0]
    if not np.allclose(got, (ra[m.outcome] - rb[m.outcome]).to_numpy(float), rtol=1e-9, atol=1e-12):
        raise ValueError(f"{m.id}: the calibration's recomputed pseudo-values differ from the metric's derive; the "
                         "calibration would simulate another quantity (fix _ratio_arms)")
    return xa, xb, statistic, ra


def compare_instances(root: Path, tables: Path) -> list[Instance]:
    """Notebook 5's paired-difference claims: the two models' answers per unit on the metric's design, rebuilt from
    the source notebooks' responses under ``root`` as :func:`biaslab.papers.compare.tables.paired_table` does, the
    null exchanging them within clusters and recomputing what the test reads (a ratio score's pseudo-values from the
    exchanged answers)."""
    from ..papers.compare import tables as T
    rows = _tested(_read(tables / "paired_differences.csv"))
    out = []
    for r in rows.itertuples():
        m = T.metric(r.metric)
        resp = T.unit_responses(m, Path(root))
        both = resp[resp["model"].isin([r.model_a, r.model_b])]
        common = set(both.loc[both["model"] == r.model_a, "unit"]) & set(both.loc[both["model"] == r.model_b, "unit"])
        both = both[both["unit"].isin(common)]
        if m.kind == "ratio_linearized":
            both = T._derive(m, both)
        where = f"{tables}/paired_differences.csv ({r.metric}, {r.model_a} - {r.model_b})"
        who = f"{r.metric} · {r.model_a} - {r.model_b}"
        if m.stratified and "weight" in both:       # every unit of the file (a tie: left out within its stratum)
            units = both.drop_duplicates("unit").set_index("unit")
            wide = both.pivot_table(index="unit", columns="model", values=m.outcome, aggfunc="mean",
                                    dropna=False).reindex(units.index)
            ya, yb = wide[r.model_a].to_numpy(float), wide[r.model_b].to_numpy(float)
            ok = np.isfinite(ya - yb)
            d = C.arms_design(ya[ok], yb[ok], None, **_stratified(ok, units.reset_index()), binary=True,
                              label=f"{r.metric}: {r.model_a} - {r.model_b}, {int(ok.sum())} units, stratified, "
                                    "units independent, the two models' answers swapped")
            _check(where, "difference", float(d.W @ (np.bincount(d.h, weights=d.y) / np.bincount(d.h))),
                   float(r.difference))
            out.append(_instance("05_compare", r, who, d))
            continue
        both = both[both[m.outcome].notna()]
        cl, _ = T.design(m, both)
        cols = [cl] if isinstance(cl, str) else list(cl or [])
        if m.kind == "ratio_linearized":
            xa, xb, stat, first = _ratio_arms(m, both, r.model_a, r.model_b)
        else:
            wide = both.pivot_table(index="unit", columns="model", values=m.outcome, aggfunc="mean").dropna()
            first = both.drop_duplicates("unit").set_index("unit").reindex(wide.index)
            xa, xb, stat = wide[r.model_a].to_numpy(float), wide[r.model_b].to_numpy(float), np.subtract
        d = C.arms_design(xa, xb, _labels(first, cols) if cols else None, stat, binary=m.kind == "binary",
                          label=f"{r.metric}: {r.model_a} - {r.model_b}, {len(xa)} units, clusters "
                                f"{' x '.join(cols) or 'none'}, the two models' answers swapped within "
                                f"{cols[0] if cols else 'units'}")
        _check(where, "difference", float(d.y.mean()), float(r.difference))
        out.append(_instance("05_compare", r, who, d))
    return out


def _run_seed(tables: Path) -> int:
    """The seed a notebook ran with: its MANIFEST's parameters (the notebooks' default 0 where not overridden)."""
    import json
    m = tables.parent / "MANIFEST.json"
    return int(json.loads(m.read_text()).get("parameters", {}).get("seed", 0)) if m.is_file() else 0


def calm_instances(tables: Path, data: pd.DataFrame | None = None, seed: int | None = None) -> list[Instance]:
    """Notebook 2's ``calm-eq1``: the overall eq.-1 score of the paper variant against its permutation null, rebuilt
    from ``responses.csv`` (or ``data``, the notebook's responses): the run's own reference permutations (its
    ``n_perm`` and ``seed``, default the run's MANIFEST's), which must reproduce the committed score, floor and p, and
    fresh permutation draws as the null replications (:func:`biaslab.stats.null_simulation.permuted`)."""
    from ..papers.calm import bias as cb
    rows = _tested(_read(tables / "bias_scores.csv"))
    if rows.empty:
        return []
    resp = _read(tables / "responses.csv") if data is None else data
    if resp.empty:              # notebook 2 writes responses.csv up to 50,000 rows (the paper profile has more)
        return [_instance("02_calm", r, str(r.model), None, "not simulated: the run wrote no responses.csv (over "
                          "50,000 responses); run the calibration inside notebook 2") for r in rows.itertuples()]
    result = cb.bias_scores(resp, "paper")
    seed = _run_seed(tables) if seed is None else seed
    refs = {}
    out = []
    for r in rows.itertuples():
        where = f"{tables}/bias_scores.csv ({r.model}, {r.variant}, {r.task}, {r.bias_type})"
        if r.variant != "paper":
            raise ValueError(f"{where}: calm-eq1 is calibrated on the paper variant; the plan's rows select it")
        n_perm = int(r.n_perm)
        if n_perm not in refs:               # notebook 2 draws every model's permutations at once, with its seed
            refs[n_perm] = cb.permutation_draws(resp, result, n_perm, seed)
        obs, ref = refs[n_perm][r.model][(r.task, r.bias_type)]
        ref = ref[np.isfinite(ref)]
        _check(where, "eq.-1 score", float(obs), float(r.bias_score))
        _check(where, f"permutation floor (seed {seed})", float(ref.mean()), float(r.null_mean))
        p = (1 + int((ref >= obs - 1e-12).sum())) / (1 + ref.size)
        _check(where, "permutation p", p, float(r.p_value))
        d = C.Design(np.array([obs]), None, reference=ref, units=int(r.n_clusters),
                     draw=lambda n, s, m=r.model, k=(r.task, r.bias_type): cb.permutation_draws(
                         resp[resp["model"] == m], result, n, s)[m][k][1],
                     label=f"{r.model}: eq.-1 score over {int(r.n_templates_used)} templates, group labels "
                           f"permuted within template ({ref.size} reference permutations)")
        out.append(_instance("02_calm", r, str(r.model), d))
    return out


def _weights(part: pd.DataFrame) -> np.ndarray:
    """Design weights scaled to mean 1 within ``part`` (1 without weights), as notebook 7 scales them."""
    return part["weight"].to_numpy(float) / part["weight"].mean() if "weight" in part else np.ones(len(part))


def _contrast_design(resp: pd.DataFrame, r, where: str) -> C.Design:
    """``mbbq-adjusted-contrast``'s templates (:func:`biaslab.papers.mbbq.analysis.template_table`) rebuilt from the
    answers: per template ``db`` (the mean over its bias-set items of the language-minus-English pseudo-values, each
    language's pseudo-values computed over its items) and ``da`` (its control items' accuracy, language minus
    English), recomputed after the two languages' answers are exchanged within random templates (bias and control
    items alike; the item weights stay)."""
    from ..benchmarks.bbq import bias_score_pseudo_values
    from ..papers.mbbq import analysis as A
    t = A.template_table(resp, r.metric, r.model, r.language)
    d, cond, ref = resp[resp["model"] == r.model], A.METRICS[r.metric], A.REFERENCE
    bias = d[(d["set"] == "bias") & d["language"].isin([r.language, ref])]
    both = bias.groupby("item")["language"].nunique()
    bias = bias[bias["item"].isin(both[both == 2].index) & (bias["context_condition"] == cond)]
    lang = bias[bias["language"] == r.language].set_index("item").sort_index()
    eng = bias[bias["language"] == ref].set_index("item").reindex(lang.index)
    acc = d[(d["set"] == "control") & (d["context_condition"] == cond)].pivot_table(
        index=A.CLUSTER, columns="language", values="correct", aggfunc="mean")
    templates = sorted(set(lang[A.CLUSTER]) | set(acc.index))
    item_t = pd.Index(templates).get_indexer(lang[A.CLUSTER])
    unit_t = pd.Index(templates).get_indexer(t.index)
    acc = acc.reindex(templates)
    da = (acc[r.language] - acc[ref]).to_numpy(float)[unit_t]
    mean_of = (item_t[:, None] == unit_t[None, :]) / t["w"].to_numpy(float)     # items -> their template's mean
    al, ae = _weights(lang), _weights(eng)
    if r.metric == "accuracy_gap":
        cols, consistent = ["correct"], (lang["correct_is_biased"] == "yes").to_numpy()

        def pseudo(x, a):
            return A.gap_pseudo_values(x[..., 0], consistent, a)
    else:
        cols = ["deviated", "non_unknown", "correct"]

        def pseudo(x, a):
            return bias_score_pseudo_values(*(a * x[..., j] for j in range(3)), ambig=cond == "ambig")
    xl, xe = lang[cols].to_numpy(float), eng[cols].to_numpy(float)

    def values(s):
        s = np.asarray(s, dtype=bool)
        f = s[:, item_t][..., None]
        db = (pseudo(np.where(f, xe, xl), al) - pseudo(np.where(f, xl, xe), ae)) @ mean_of
        return np.stack([db, np.where(s[:, unit_t], -da, da)], axis=2)
    d = C.Design(t["db"].to_numpy(float), None, weights=t["w"].to_numpy(float), values=values,
                 units=len(templates),
                 label=f"{r.model}, {r.contrast}: {len(t)} templates, the two languages' answers swapped within "
                       "templates")
    got = values(np.zeros((1, len(templates))))[0]
    if not np.allclose(got, t[["db", "da"]].to_numpy(float), rtol=1e-9, atol=1e-12):
        raise ValueError(f"{where}: the recomputed templates differ from template_table's; the calibration would "
                         "simulate another quantity (fix calibrate._contrast_design)")
    return d


def mbbq_instances(tables: Path) -> list[Instance]:
    """Notebook 7's claims from ``responses.csv``, the null exchanging answers within templates and recomputing:
    ``mbbq-ambig-en``, the items' terms of BBQ's ambiguous score clustered on templates, the biased and
    counter-biased answers exchanged within a random half of the templates (the terms recomputed:
    :func:`biaslab.papers.mbbq.analysis.ambiguous_terms`; they change sign, so its sign-flip test is the swap's exact
    randomization test); ``mbbq-adjusted-contrast``, the per-template bias and control-accuracy differences (language
    minus English) of the WLS whose intercept is the claim, one unit per template, the two languages' answers
    exchanged within random templates and both differences recomputed (:func:`_contrast_design`)."""
    from ..papers.mbbq import analysis as A
    resp = _read(tables / "responses.csv")
    out = []
    for r in _tested(_read(tables / "metrics.csv")).itertuples():
        where = f"{tables}/metrics.csv ({r.model}, {r.metric}, {r.language}, {r.set}, {r.category})"
        part = resp[(resp["model"] == r.model) & (resp["language"] == r.language) & (resp["set"] == r.set)
                    & (resp["context_condition"] == A.METRICS[r.metric])]
        part = part if r.category == "all" else part[part["category"] == r.category]
        dev, nu, c = (part[k].to_numpy(float) for k in ("deviated", "non_unknown", "correct"))
        w = _weights(part)
        d = C.arms_design(dev, nu - dev, _labels(part, [A.CLUSTER]),
                          lambda x, y, c=c, w=w: A.ambiguous_terms(x, x + y, c, w),
                          label=f"{r.model}, {r.language}: {len(part)} items, clusters {A.CLUSTER}, biased and "
                                "counter-biased answers swapped within templates")
        _check(where, "estimate", float(d.y.sum()), float(r.estimate))
        _check(where, "number of clusters", d.n_clusters, float(r.n_clusters))
        _check(where, "p_swap", float(C.sign_flip_rule(d.y[None], d)["p"][0]), float(r.p_swap), tol=1e-9)
        out.append(_instance("07_mbbq", r, f"{r.model} · {r.language}", d))
    for r in _tested(_read(tables / "adjusted_contrasts.csv")).itertuples():
        if not np.isfinite(r.p_value):      # not estimable (no variation): no test whose size could be simulated
            continue
        where = f"{tables}/adjusted_contrasts.csv ({r.model}, {r.metric}, {r.contrast})"
        d = _contrast_design(resp, r, where)
        obs = C.intercept_rule(d.values(np.zeros((1, d.n_swap))), d)
        _check(where, "adjusted contrast", float(obs["estimate"][0]), float(r.adjusted))
        _check(where, "p", float(obs["p"][0]), float(r.p_value), tol=1e-6)
        out.append(_instance("07_mbbq", r, f"{r.model} · {r.contrast}", d))
    return out


def instances(notebook: str, tables: Path, root: Path | None = None, data: pd.DataFrame | None = None,
              benchmark: str | None = None, seed: int | None = None) -> list[Instance]:
    """The tested claim instances of one run (``tables``: its tables folder; ``root``: the outputs folder notebook
    5 reads; ``benchmark``: notebook 1's; ``data``: notebook 1's or 2's responses; ``seed``: the run's, where a
    design re-draws the run's own permutations, default its MANIFEST's)."""
    tables = Path(tables)
    build = {"01_multifactor": lambda: multifactor_instances(tables, benchmark, data, seed),
             "02_calm": lambda: calm_instances(tables, data, seed),
             "03_crows_pairs_bayes": lambda: crows_instances(tables),
             "04_agentic_entropy": lambda: agentic_instances(tables),
             "05_compare": lambda: compare_instances(root, tables), "07_mbbq": lambda: mbbq_instances(tables)}
    if notebook not in build:
        raise ValueError(f"notebook {notebook!r} has no confirmatory claims to calibrate; one of {NOTEBOOKS}")
    return build[notebook]()


# ------------------------------------------------------------------------------------------------ calibration
def calibration_table(insts: list[Instance], replications: int, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """One row per instance in the agreed ``calibration.csv`` schema (:data:`biaslab.stats.null_simulation.
    CALIBRATION_COLUMNS`): ``replications`` at alpha, and as many more at the instance's tested level as keep the
    relative Monte Carlo SE (:func:`biaslab.stats.null_simulation.replications_for`); an instance without a design
    says why in ``test`` and has no rates."""
    if replications < 1:
        raise ValueError(f"calibration replications must be >= 1, got {replications}")
    rows = []
    for i, inst in enumerate(insts):
        if inst.design is None:
            rows.append({"claim": inst.claim, "test": inst.why or "no design", "design": inst.instance,
                         "replications": 0, "alpha": alpha, "tested_level": inst.level, "seed": seed + i})
            continue
        rows.append(C.calibration_row(inst.claim, inst.design, replications, seed + i, alpha, inst.level))
    return pd.DataFrame(rows, columns=C.CALIBRATION_COLUMNS)


def run(out, notebook: str, replications: int, seed: int = 0, root: Path | None = None,
        data: pd.DataFrame | None = None, benchmark: str | None = None, *, plan) -> pd.DataFrame:
    """The one call per notebook: calibrate the run's tested claim instances (read from ``out.tables``) at the
    alpha of ``plan`` and write ``tables/calibration.csv``. Returns the table."""
    table = calibration_table(instances(notebook, out.tables, root, data, benchmark, seed), replications, seed,
                              plan.alpha)
    out.table(table, "calibration")
    return table


def oversize_line(table: pd.DataFrame) -> str:
    """The sentence under a notebook's calibration table: how many claim instances reject a true null more often
    than :data:`biaslab.stats.null_simulation.MAX_RATIO` times the level they were tested at, and which."""
    over = C.flag_oversize(table)
    return (f"{len(over)} of {len(table)} claim instances reject a true null more often than {C.MAX_RATIO:g} times "
            "the level they were tested at"
            + (": " + ", ".join(over["claim"] + " (" + over["design"] + ", "
                                 + over["size_ratio"].map("{:.2f}".format) + "x)") if len(over) else ""))


# ------------------------------------------------------------------------------------------------ familywise error
def budget_of(root: Path, plan: "P.Plan") -> tuple[dict[str, float], dict[str, int]]:
    """Per notebook, the share of alpha and the number of families its confirmatory rows were decided with: the
    decided rows' ``share`` and ``n_families`` columns (:func:`biaslab.stats.verdict.budget_decisions`; notebook 1's
    families are its model pairs, each over every benchmark run) where the committed tables carry them, else
    the plan's ``budget.shares`` and the distinct families of the rows. A share that differs from the plan's is
    refused (the run was decided under another plan)."""
    shares, n_fam, fams = dict(plan.shares), {}, {}
    for nb in NOTEBOOKS:
        for path in sorted((Path(root) / nb).rglob("tables/*.csv")):
            head = _read_header(path)
            if not {"claim", "family", "family_kind"} <= set(head):
                continue
            t = pd.read_csv(path, usecols=[c for c in head if c in ("claim", "family", "family_kind", "n_families",
                                                                     "share")])
            t = t[t["claim"].fillna("").ne("") & (t["family_kind"] == "confirmatory")]
            fams.setdefault(nb, set()).update(t["family"])
            if "n_families" in t and t["n_families"].notna().any():
                n_fam[nb] = max(n_fam.get(nb, 0), int(t["n_families"].max()))
            if "share" in t and t["share"].notna().any():
                got = sorted(set(t["share"].dropna().astype(float)))
                if len(got) > 1 or not math.isclose(got[0], plan.share(nb), rel_tol=1e-9):
                    raise ValueError(f"{path}: decided with budget share {got} for {nb}, the plan {plan.path} says "
                                     f"{plan.share(nb)}; rerun the notebook under this plan or pass the run's plan")
    for nb, f in fams.items():
        n_fam[nb] = max(n_fam.get(nb, 0), len(f))
    return shares, n_fam


def all_instances(root: Path) -> list[Instance]:
    """Every tested claim instance of the committed outputs under ``root``."""
    root = Path(root)
    insts = []
    for nb in NOTEBOOKS:
        if nb == "01_multifactor":
            for bench in (n for n, s in SPECS.items() if s.factor_plan is not None):
                if (root / nb / bench / "tables").exists():
                    insts += instances(nb, root / nb / bench / "tables", benchmark=bench)
        elif (root / nb / "tables").exists():
            insts += instances(nb, root / nb / "tables", root=root)
    return insts


def _rows(p: np.ndarray, insts: list[Instance], family=lambda r, i: f"{r}|{i.family}") -> pd.DataFrame:
    reps, m = p.shape
    return pd.DataFrame({"replicate": np.repeat(np.arange(reps), m),
                         "notebook": np.tile([i.notebook for i in insts], reps),
                         "claim": np.tile([i.claim for i in insts], reps),
                         "level_for_power": np.tile([i.need for i in insts], reps),
                         "family": [family(r, i) for r in range(reps) for i in insts], "p": p.ravel()})


def budget_rejections(p: np.ndarray, insts: list[Instance], shares: Mapping[str, float],
                      n_families: Mapping[str, int], alpha: float = 0.05,
                      graphs: Mapping[str, tuple] | None = None) -> np.ndarray:
    """(R x I) rejections of R replications of the I instances under the error budget, by the verdict layer's own
    rule (:func:`biaslab.stats.verdict.budget_decisions`: each notebook's share over its ``n_families``, at least its
    instances' families, the plan's ``graphs`` within each family, Holm where a notebook has none; an instance is
    rejected only at a level where its test has 80 % power, its ``need``; each replication its own families)."""
    from ..stats.verdict import budget_decisions
    if not p.shape[1]:
        return np.zeros(p.shape, dtype=bool)
    b = budget_decisions(_rows(p, insts), alpha, shares, n_families, graphs)
    return b["rejected"].fillna(False).to_numpy(bool).reshape(p.shape)


def unsplit_rejections(p: np.ndarray, insts: list[Instance], alpha: float = 0.05,
                       graphs: Mapping[str, tuple] | None = None) -> np.ndarray:
    """(R x I) rejections under the same rule within each family at ``alpha`` itself, with no split across
    notebooks and families (the budget's split is what this comparison leaves out): every family its own notebook
    with share 1."""
    own = [replace(i, notebook=f"{i.notebook}\x1f{i.family}") for i in insts]
    keys, graphs = {i.notebook for i in own}, graphs or {}
    return budget_rejections(p, own, dict.fromkeys(keys, 1.0), dict.fromkeys(keys, 1), alpha,
                             {k: graphs[k.split("\x1f")[0]] for k in keys if k.split("\x1f")[0] in graphs})


def check_replications(replications: int) -> None:
    """ValueError naming the bound unless 1 <= ``replications`` <= :data:`MAX_REPLICATIONS`."""
    if not 1 <= replications <= MAX_REPLICATIONS:
        what = "too few" if replications < 1 else "too many"
        raise ValueError(f"{replications:,} replications are {what}: pass 1 to {MAX_REPLICATIONS:,} (~19 ms each on "
                         f"2 cores, so {MAX_REPLICATIONS:,} take ~30 minutes; {FWER_REPLICATIONS:,} give a Monte Carlo "
                         "SE of at most 0.011)")


def fwer(root: Path, replications: int, seed: int = 0, plan=None,
         insts: list[Instance] | None = None, shares: Mapping[str, float] | None = None,
         n_families: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Familywise error of the headline table under the global null, under exactly the run's rule: every instance
    the run's graph tested (descriptive and untested instances are not in it) has its data swapped / relabelled
    within clusters (independently across instances) and its test recomputed; the replications are decided under
    the budget as the run decided it (:func:`budget_rejections` at :func:`budget_of`'s shares and family counts;
    ``shares``/``n_families`` override them) and, for comparison, within each family at alpha with no split
    (:func:`unsplit_rejections`); per rule the share of replications with at least one false "distinguishable",
    with its Monte Carlo SE. ``plan``: a :class:`biaslab.plan.Plan` or its path (default the repository's); its
    alpha and graphs. Replications are simulated in blocks of :data:`FWER_REPLICATIONS` (the first block's draws
    are those of a single run of that size), at most :data:`MAX_REPLICATIONS`."""
    check_replications(replications)
    plan = plan if isinstance(plan, P.Plan) else P.load(plan)
    alpha = plan.alpha
    insts = all_instances(root) if insts is None else insts
    sim = [i for i in insts if i.design is not None]
    graphs = ({nb: plan.graph(nb) for nb in {i.notebook for i in sim} if plan.of(nb)} if plan.graphical
              else None)
    foreign = sorted({f"{i.notebook}: {i.claim}" for i in sim if i.notebook in (graphs or {})
                      and i.claim not in graphs[i.notebook][0]})
    if foreign:
        raise ValueError(f"{root}: claim instances {foreign} are not claims of the plan {plan.path}: the run was "
                         "decided under another plan; rerun it under this plan, or simulate with the run's plan")
    run_shares, run_fam = budget_of(root, plan)
    shares = dict(shares or run_shares)
    n_fam = {**run_fam, **(n_families or {})}
    for i in sim:
        n_fam[i.notebook] = max(n_fam.get(i.notebook, 0), len({j.family for j in sim if j.notebook == i.notebook}))
    within = f"{'graph' if plan.graphical else 'holm'} within families, no split"
    hits = {"budget": 0, within: 0}
    for b, start in enumerate(range(0, replications, FWER_REPLICATIONS)):   # block b: seeds seed + b * I + k
        reps = min(FWER_REPLICATIONS, replications - start)
        p = np.column_stack([C.simulate(i.claim, i.design, reps, seed + b * len(sim) + k, alpha)["p"]
                             for k, i in enumerate(sim)]) if sim else np.ones((reps, 0))   # no claim: no rejection
        hits["budget"] += int(budget_rejections(p, sim, shares, n_fam, alpha, graphs).any(axis=1).sum())
        hits[within] += int(unsplit_rejections(p, sim, alpha, graphs).any(axis=1).sum())
    rows = []
    for rule, n in hits.items():
        f = n / replications
        rows.append({"rule": rule, "instances": len(sim), "not_simulated": len(insts) - len(sim),
                     "families": sum(n_fam.values()), "replications": replications, "alpha": alpha, "fwer": f,
                     "fwer_mc_se": math.sqrt(f * (1 - f) / replications),
                     "shares": "; ".join(f"{nb} {shares[nb]:g} over {n_fam[nb]} families" for nb in sorted(n_fam)),
                     "seed": seed})
    return pd.DataFrame(rows)


def write_fwer(root: Path, replications: int = FWER_REPLICATIONS, seed: int = 0,
               plan_path: str | Path | None = None) -> tuple[pd.DataFrame, Path]:
    """:func:`fwer` over the outputs under ``root``, written to ``root/fwer.csv``."""
    table = fwer(Path(root), replications, seed, plan=plan_path)
    path = Path(root) / "fwer.csv"
    table.to_csv(path, index=False)
    return table, path
