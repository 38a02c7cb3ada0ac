"""Notebook 5 glue: one report across models and benchmarks, read from the tables notebooks 1-4 wrote.

Nothing is scored here. :data:`METRICS` is the registry of every benchmark's headline bias metric: which notebook's
table holds it (folder, file, column, row filters), which way is biased (``direction``, ``orientation``: +1 when a
higher value is more stereotyped, -1 when lower is), the value an unbiased model would get (``null``), and which
per-prompt response table gives its intervals and paired comparisons (file, outcome, pairing unit, cluster).

* :func:`model_metric_table` model x metric: the estimate *as the source table states it*, the estimate recomputed
  from the per-prompt responses (``estimate_from_responses``, which must agree), and a cluster-aware interval
  (``stats.intervals.rate_intervals`` for 0/1 outcomes, the cluster bootstrap of the mean for continuous ones,
  :func:`stats.ranking.cluster_sum_bootstrap` for BBQ's ratio scores, the source notebook's own interval for CALM).
* :func:`paired_table` every pair of models on the units both answered (``stats.paired``), Holm-adjusted within
  each metric (the family a reader ranks models by). The p-value that is adjusted and decides tie groups respects
  the clustering as the interval does (:func:`stats.paired.paired_difference`: the Wald z of the difference on its
  cluster-paired bootstrap standard error, or the exact test where every cluster is one unit); the exact McNemar /
  Wilcoxon p-value over clustered prompts is kept beside it (``p_naive``).
* :func:`tie_group_table` :func:`stats.ranking.tie_groups` per metric, on the oriented estimates.
* :func:`agreement_table` rank agreement between metrics over the models that have both
  (:func:`stats.ranking.spearman_interval`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .stats import intervals, multiplicity, paired, ranking


@dataclass(frozen=True)
class Source:
    table: str                       # file stem under <notebook folder>/tables/
    column: str
    filters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Metric:
    id: str
    benchmark: str
    label: str
    folder: str                      # notebook output folder relative to the outputs root
    sources: tuple                   # Source rows holding the headline value per model (first match wins)
    direction: str
    orientation: int                 # +1: higher = more stereotyped / biased; -1: lower = more biased
    null: float
    null_meaning: str
    responses: tuple = ()            # per-unit response tables (stems)
    response_filters: dict = field(default_factory=dict)
    outcome: str = ""                # response column (or derived by ``derive``)
    unit: tuple = ("prompt_id",)     # pairing unit (columns joined)
    cluster: str | None = None       # generating unit for intervals
    kind: str = "binary"             # binary | continuous | bbq_ambig | bbq_disambig | source_interval
    derive: Callable | None = None   # responses -> responses with ``outcome`` added
    note: str = ""
    responders: dict | None = None   # rows of the source's responders.csv that judge this metric (None: none do)


def _crows_outcome(r: pd.DataFrame) -> pd.DataFrame:
    """1 when log P(sent_more) > log P(sent_less), 0 when smaller, NaN for ties (notebook 3's likelihood source)."""
    d = r["d_logprob"].to_numpy(float)
    return r.assign(stereotype_preferred=np.where(d == 0, np.nan, (d > 0).astype(float)))


def _crows(dataset: str, label: str) -> Metric:
    return Metric(
        id=f"crows_{dataset.removeprefix('crows_pairs_')}_stereotype_preferred", benchmark="CrowS-Pairs",
        label=f"CrowS-Pairs {label}: share of pairs with log P(more stereotyped) > log P(less)",
        folder="03_crows_pairs_bayes",
        sources=(Source("preference_tests", "pi_hat", {"dataset": dataset, "source": "likelihood",
                                                      "bias_type": "overall"}),),
        direction="higher = more stereotyped", orientation=1, null=0.5,
        null_meaning="0.5: no preference between the two sentences",
        responses=("pair_scores",), response_filters={"dataset": dataset}, outcome="stereotype_preferred",
        cluster="pair_id", kind="binary", derive=_crows_outcome)


def _bbq(condition: str, label: str) -> Metric:
    """BBQ bias score in one context condition (``ambig`` or ``disambig``) of notebook 1's BBQ run."""
    return Metric(
        id=f"bbq_bias_{condition}", benchmark="BBQ", label=f"BBQ: bias score in {label}", folder="01_multifactor/bbq",
        sources=(Source("accuracy_bias_scores", "bias_score", {"context_condition": condition}),),
        direction="higher = more stereotyped", orientation=1, null=0.0,
        null_meaning="0: biased and counter-biased answers equally often",
        responses=("responses",), response_filters={"context_condition": condition}, outcome="bias_score",
        cluster="template", kind=f"bbq_{condition}", responders={})


METRICS: tuple[Metric, ...] = (
    Metric(id="ssqa_deviation_rate", benchmark="SocialStigmaQA", label="SSQA: share of answers equal to the biased "
           "answer (no CoT)", folder="01_multifactor/ssqa",
           sources=(Source("label_distribution", "deviation_rate"), Source("released_answers", "deviation_rate")),
           direction="higher = more biased answers", orientation=1, null=0.0,
           null_meaning="0: never the biased answer (a uniform guesser over yes / no / can't tell scores 1/3)",
           responses=("responses", "responses_released"), response_filters={"cot": "no"}, outcome="deviated",
           cluster="template", kind="binary", responders={"cot": "no"},
           note="embedded models on the scored subset, released models on all 10,360 prompts; paired comparisons "
                "use the prompts both models answered"),
    _bbq("ambig", "ambiguous contexts (s_AMB)"),
    _bbq("disambig", "disambiguated contexts (s_DIS)"),
    Metric(id="calm_bias_overall", benchmark="CALM", label="CALM: overall bias score (eq. 1, paper variant)",
           folder="02_calm",
           sources=(Source("bias_scores", "bias_score", {"variant": "paper", "task": "all", "bias_type": "all"}),),
           direction="higher = larger accuracy gap between groups", orientation=1, null=0.0,
           null_meaning="0: every group equally accurate (the permutation-null mean of notebook 2 is above 0)",
           responses=("template_bias",), response_filters={"used": True}, outcome="bias_paper",
           unit=("bias_type", "template_id"), cluster=None, kind="source_interval",
           note="interval: notebook 2's bootstrap over templates and names; paired comparisons: mean difference "
                "of per-template bias over the templates both models kept"),
    _crows("crows_pairs_en", "original English"),
    _crows("crows_pairs_en_revised", "revised English"),
    _crows("crows_pairs_fr", "French"),
    Metric(id="agentic_mean_entropy", benchmark="Agentic", label="Agentic: mean normalized entropy of the "
           "answer distribution", folder="04_agentic_entropy",
           sources=(Source("entropy_by_model", "mean_entropy"),),
           direction="lower = more concentrated on one group", orientation=-1, null=1.0,
           null_meaning="1: probability spread evenly over the groups",
           responses=("responses",), outcome="entropy", cluster="scenario_id", kind="continuous", responders={}),
)


def metric(metric_id: str) -> Metric:
    for m in METRICS:
        if m.id == metric_id:
            return m
    raise KeyError(f"no metric {metric_id!r}; metrics are {[m.id for m in METRICS]}")


# ------------------------------------------------------------------------------------------------ reading
def read_table(root: Path, folder: str, stem: str) -> pd.DataFrame | None:
    p = Path(root) / folder / "tables" / f"{stem}.csv"
    return pd.read_csv(p) if p.exists() else None


def _filter(df: pd.DataFrame, filters: dict) -> pd.DataFrame:
    for c, v in filters.items():
        if c not in df:              # a table without the column cannot be filtered: it holds no usable rows
            return df.iloc[:0]
        col = df[c]
        df = df[(col.astype(str).str.lower() == str(v).lower()) if isinstance(v, bool) else (col == v)]
    return df


def headline_values(m: Metric, root: Path) -> pd.DataFrame:
    """model, estimate, source (file), plus the source's own interval where it has one."""
    rows = []
    for s in m.sources:
        t = read_table(root, m.folder, s.table)
        if t is None or s.column not in t:
            continue
        t = _filter(t, s.filters)
        for r in t.itertuples(index=False):
            d = r._asdict()
            rows.append({"model": d["model"], "estimate": float(d[s.column]),
                         "source": f"{m.folder}/tables/{s.table}.csv",
                         "source_ci_low": d.get("ci_low", np.nan), "source_ci_high": d.get("ci_high", np.nan),
                         "source_ci_method": d.get("ci_method", "")})
    out = pd.DataFrame(rows, columns=["model", "estimate", "source", "source_ci_low", "source_ci_high",
                                      "source_ci_method"])
    return out.drop_duplicates("model", keep="first").reset_index(drop=True)


def unit_responses(m: Metric, root: Path) -> pd.DataFrame:
    """The metric's per-unit responses of every model found (empty when the notebook wrote none)."""
    parts = []
    for stem in m.responses:
        t = read_table(root, m.folder, stem)
        if t is not None:
            parts.append(_filter(t, m.response_filters))
    if not parts:
        return pd.DataFrame()
    r = pd.concat(parts, ignore_index=True)
    if m.derive is not None:
        r = m.derive(r)
    if m.kind in ("bbq_ambig", "bbq_disambig"):
        r = r.assign(non_unknown=1 - r["chose_unknown"], one=1.0)
    r["unit"] = r[list(m.unit)].astype(str).agg("|".join, axis=1) if len(m.unit) > 1 else r[m.unit[0]].astype(str)
    return r


# ------------------------------------------------------------------------------------------------ statistics
def _bbq_stat(ambig: bool):
    """BBQ's bias score from column totals [deviated, non_unknown, correct, one] (Parrish et al. 2022, §4)."""
    def f(t):
        t = np.atleast_2d(t)
        with np.errstate(invalid="ignore", divide="ignore"):
            s_dis = 2 * t[:, 0] / t[:, 1] - 1
            return (1 - t[:, 2] / t[:, 3]) * s_dis if ambig else s_dis
    return f


BBQ_COLUMNS = ["deviated", "non_unknown", "correct", "one"]


def _cluster_col(m: Metric, r: pd.DataFrame) -> str | None:
    return m.cluster if m.cluster and m.cluster in r else None


def interval(m: Metric, r: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> dict:
    """Estimate from one model's responses and its cluster-aware interval."""
    cl = _cluster_col(m, r)
    missing = (" (cluster column missing from the source responses: prompts treated as independent)"
               if m.cluster and cl is None else "")
    if m.kind == "binary":
        r = r[r[m.outcome].notna()]
        t = intervals.rate_intervals(r, m.outcome, cl).iloc[0]
        return {"estimate_from_responses": t["rate"], "ci_low": t["ci_low"], "ci_high": t["ci_high"],
                "ci_method": t["ci_method"] + missing, "n_units": int(t["n"]), "n_clusters": int(t["n_clusters"])}
    if m.kind == "continuous":     # the same rule as the source notebooks (stats.clustered via mean_intervals)
        t = intervals.mean_intervals(r, m.outcome, cl, seed=seed).iloc[0]
        return {"estimate_from_responses": t["mean"], "ci_low": t["ci_low"], "ci_high": t["ci_high"],
                "ci_method": t["ci_method"] + missing, "n_units": int(t["n"]), "n_clusters": int(t["n_clusters"])}
    if m.kind in ("bbq_ambig", "bbq_disambig"):
        s = ranking.cluster_sums(r, BBQ_COLUMNS, cl)
        b = ranking.cluster_sum_bootstrap(_bbq_stat(m.kind == "bbq_ambig"), s.to_numpy(), n_boot=n_boot, seed=seed)
        return {"estimate_from_responses": b["estimate"], "ci_low": b["ci_low"], "ci_high": b["ci_high"],
                "ci_method": f"cluster bootstrap percentile of the ratio ({cl or 'prompt'}, {n_boot} resamples)"
                             + missing, "n_units": len(r), "n_clusters": b["n_clusters"]}
    return {"estimate_from_responses": np.nan, "ci_low": np.nan, "ci_high": np.nan, "ci_method": "",
            "n_units": len(r), "n_clusters": np.nan}


def model_metric_table(root: Path, metrics=METRICS, models: list[str] | None = None, n_boot: int = 2000,
                       seed: int = 0) -> pd.DataFrame:
    """Long model x metric table (one row per metric and model)."""
    rows = []
    for m in metrics:
        h = headline_values(m, root)
        if models is not None:
            h = h[h["model"].isin(models)]
        r_all = unit_responses(m, root)
        for row in h.itertuples(index=False):
            r = r_all[r_all["model"] == row.model] if len(r_all) else r_all
            res = interval(m, r, n_boot=n_boot, seed=seed) if len(r) else {
                "estimate_from_responses": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                "ci_method": "no per-prompt responses in the source folder", "n_units": np.nan, "n_clusters": np.nan}
            if m.kind == "source_interval":
                how = row.source_ci_method if isinstance(row.source_ci_method, str) and row.source_ci_method else \
                    m.note.split(";")[0]
                res.update(ci_low=row.source_ci_low, ci_high=row.source_ci_high,
                           ci_method=f"the source notebook's interval: {how}")
            rows.append({"metric": m.id, "benchmark": m.benchmark, "label": m.label, "model": row.model,
                         "estimate": row.estimate, **res, "direction": m.direction, "orientation": m.orientation,
                         "null": m.null, "null_meaning": m.null_meaning, "source": row.source})
    return pd.DataFrame(rows)


def paired_table(root: Path, metrics=METRICS, models: list[str] | None = None, n_boot: int = 2000, seed: int = 0,
                 method: str = "holm", alpha: float = 0.05, degenerate: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pair of models on each metric, on the units both answered; adjusted within each metric.

    A pair with a model flagged in ``degenerate`` (:func:`degenerate_flags`) keeps its difference and interval but
    is not tested (p-value blank, ``responder`` says why), as in notebooks 1-4."""
    rows = []
    for m in metrics:
        r = unit_responses(m, root)
        if r.empty:
            continue
        if models is not None:
            r = r[r["model"].isin(models)]
        names = list(pd.unique(r["model"]))
        cl = _cluster_col(m, r)
        for a, b in itertools.combinations(names, 2):
            ra, rb = r[r["model"] == a], r[r["model"] == b]
            common = sorted(set(ra["unit"]) & set(rb["unit"]))
            base = {"metric": m.id, "model_a": a, "model_b": b, "n_pairs": len(common)}
            if not common:
                rows.append({**base, "difference": np.nan, "ci_method": "no unit answered by both models"})
                continue
            if m.kind in ("bbq_ambig", "bbq_disambig"):
                ra, rb = ra[ra["unit"].isin(common)], rb[rb["unit"].isin(common)]
                keys = sorted(set(ra[cl]) if cl else range(len(common)))
                key_a = ra.sort_values("unit")
                key_b = rb.sort_values("unit")
                if cl is None:
                    key_a = key_a.assign(_c=range(len(common)))
                    key_b = key_b.assign(_c=range(len(common)))
                c = cl or "_c"
                sa = ranking.cluster_sums(key_a, BBQ_COLUMNS, c, keys).to_numpy()
                sb = ranking.cluster_sums(key_b, BBQ_COLUMNS, c, keys).to_numpy()
                f = _bbq_stat(m.kind == "bbq_ambig")
                bt = ranking.cluster_sum_bootstrap(f, sa, sb, n_boot=n_boot, seed=seed)
                rows.append({**base, "n_clusters": bt["n_clusters"], "mean_a": float(f(sa.sum(0))[0]),
                             "mean_b": float(f(sb.sum(0))[0]), "difference": bt["estimate"],
                             "se_cluster": bt["se"], "ci_low": bt["ci_low"], "ci_high": bt["ci_high"],
                             "ci_method": f"cluster-paired bootstrap percentile ({c}, {n_boot} resamples)",
                             "p_value": paired.wald_p(bt["estimate"], bt["se"], bt["n_clusters"] - 1),
                             "test": paired.WALD,
                             "p_naive": bt["p_boot"], "test_naive": "percentile-bootstrap p (cluster-paired)"})
                continue
            both = r[r["model"].isin([a, b])]
            both = both[both[m.outcome].notna()]
            res = paired.paired_difference(both, m.outcome, a, b, cl, unit="unit", binary=(m.kind == "binary"),
                                           n_boot=n_boot, seed=seed)
            res.pop("model_a"), res.pop("model_b")
            rows.append({**base, **res, "n_pairs": res.get("n_pairs", len(common))})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["responder"] = "informative"
    if degenerate is not None and len(degenerate):
        bad = set(map(tuple, degenerate.loc[degenerate["degenerate"].astype(bool), ["metric", "model"]].to_numpy()))
        hit = [(r.metric, r.model_a) in bad or (r.metric, r.model_b) in bad for r in out.itertuples()]
        out.loc[hit, "p_value"] = np.nan
        out.loc[hit, "responder"] = "degenerate responder: not tested"
    out = multiplicity.add_adjusted(out, "p_value", family="metric", method=method, alpha=alpha)
    return out.rename(columns={f"p_value_{method}": "p_adjusted", f"significant_{method}": "significant"})


def tie_group_table(table: pd.DataFrame, pairs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Tie groups per metric, models ranked from most to least biased (by the oriented estimate)."""
    out = []
    for mid, t in table.groupby("metric", sort=False):
        est = t.set_index("model")["estimate"] * int(t["orientation"].iloc[0])
        pr = pairs[pairs["metric"] == mid] if len(pairs) else pd.DataFrame(
            columns=["model_a", "model_b", "p_adjusted"])
        g = ranking.tie_groups(est, pr, alpha=alpha)
        g["estimate"] = g["estimate"] * int(t["orientation"].iloc[0])        # back to the metric's own scale
        out.append(g.assign(metric=mid, n_models=len(g)))
    return pd.concat(out, ignore_index=True)[["metric", "model", "estimate", "rank", "groups", "n_tied_with",
                                              "n_models"]] if out else pd.DataFrame()


def agreement_table(table: pd.DataFrame, min_models: int = ranking.MIN_MODELS) -> pd.DataFrame:
    """Spearman's rho between every two metrics over the models that have both (oriented: + = agree on which
    models are more biased)."""
    wide = table.assign(oriented=table["estimate"] * table["orientation"]).pivot_table(
        index="model", columns="metric", values="oriented", aggfunc="first")
    rows = []
    for a, b in itertools.combinations(list(dict.fromkeys(table["metric"])), 2):
        both = wide[[a, b]].dropna()
        rows.append({"metric_a": a, "metric_b": b, "models": ", ".join(both.index),
                     **ranking.spearman_interval(both[a], both[b], min_models=min_models)})
    return pd.DataFrame(rows)


def degenerate_flags(root: Path, metrics=METRICS) -> pd.DataFrame:
    """metric, model, degenerate, degenerate_reasons from the responder check a source notebook wrote
    (``tables/responders.csv``; issue 10), for the metrics whose registry entry names the rows that judge them
    (``Metric.responders``: SSQA without CoT, BBQ, agentic; CALM's check is per task and CrowS-Pairs' judges the
    preference prompt, not the likelihood comparison used here). Empty when none applies."""
    rows = []
    for m in metrics:
        t = read_table(root, m.folder, "responders") if m.responders is not None else None
        if t is None or not {"model", "degenerate"} <= set(t.columns):
            continue
        t = _filter(t, m.responders)
        for model, part in t.groupby("model"):
            flag = part["degenerate"].astype(str).str.lower().isin(["true", "1"])
            reasons = "; ".join(part.loc[flag, "reasons"].dropna().astype(str)) if "reasons" in part else ""
            rows.append({"metric": m.id, "model": model, "degenerate": bool(flag.any()),
                         "degenerate_reasons": reasons})
    return pd.DataFrame(rows)


def _fmt(x: float) -> str:
    return "nan" if not np.isfinite(x) else f"{x:.3g}"


def summary_lines(table: pd.DataFrame, pairs: pd.DataFrame, groups: pd.DataFrame, agreement: pd.DataFrame,
                  min_models: int = ranking.MIN_MODELS) -> list[str]:
    """A few sentences, every number read from the tables (nothing written by hand)."""
    lines = [f"{table['model'].nunique()} models x {table['metric'].nunique()} metrics "
             f"({', '.join(dict.fromkeys(table['benchmark']))}); {int(table['ci_low'].notna().sum())} of "
             f"{len(table)} estimates have an interval."]
    for mid, g in groups.groupby("metric", sort=False):
        t = table[table["metric"] == mid].set_index("model")
        top = g.iloc[0]
        pm = pairs[pairs["metric"] == mid] if len(pairs) else pd.DataFrame(columns=["p_value", "significant"])
        tested = pm[pm["p_value"].notna()] if "p_value" in pm else pm.iloc[:0]
        n_sep = int(tested["significant"].fillna(False).astype(bool).sum()) if len(tested) else 0
        n_all = len(g) * (len(g) - 1) // 2
        r = t.loc[top["model"]]
        ci = f" [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if np.isfinite(r["ci_low"]) else " (no interval)"
        n_groups = len(set("".join(g["groups"])))
        if len(tested) == 0:
            sep = "no pair of models could be compared on common prompts, so no tie groups are drawn"
        else:
            sep = (f"{n_sep} of {len(tested)} compared pairs differ after adjustment"
                   + (f" ({n_all - len(tested)} pairs had no common prompts)" if n_all > len(tested) else "")
                   + ("; all models tie" if n_groups == 1 else f"; {n_groups} tie groups"))
        lines.append(f"{mid} ({t['direction'].iloc[0]}, null {_fmt(t['null'].iloc[0])}): first in the biased "
                     f"direction {top['model']} at {_fmt(top['estimate'])}{ci}; {sep}.")
    if len(agreement):
        n_ok = int((agreement["status"] == "ok").sum())
        most = int(agreement["n_models"].max())
        if n_ok == 0:
            lines.append(f"Agreement between benchmarks cannot be assessed: at most {most} models share two metrics "
                         f"(an interval needs {min_models}).")
        else:
            ok = agreement[agreement["status"] == "ok"]
            lines.append(f"{n_ok} metric pairs have enough models for a rank correlation; median rho "
                         f"{_fmt(float(ok['rho'].median()))}, {int((ok['ci_low'] > 0).sum())} with an interval "
                         "above 0.")
    return lines


def source_provenance(root: Path, metrics=METRICS) -> tuple[dict, dict]:
    """(model fingerprints, {table file: sha256}) of what notebook 5 read: the fingerprints the source notebooks
    recorded (their ``MANIFEST.json``; ``provenance.json`` while a run is still in progress) and the hash of every
    source and response table."""
    import json

    from .sources import sha256_file
    models, files = {}, {}
    for m in metrics:
        folder = Path(root) / m.folder
        for name in ("MANIFEST.json", "provenance.json"):
            if (folder / name).exists():
                models.update(json.loads((folder / name).read_text()).get("models") or {})
        for stem in [s.table for s in m.sources] + list(m.responses):
            p = folder / "tables" / f"{stem}.csv"
            if p.exists():
                files[f"outputs/{m.folder}/tables/{stem}.csv"] = sha256_file(p)
    return models, files


def outputs_root(explicit: str | Path | None, output_dir: str | Path, metrics=METRICS) -> Path:
    """Where notebook 5 reads: ``explicit`` when given; else the folder holding its own output folder when notebooks
    1-4 wrote there (a full run into scratch/ or outputs/), else the published ``outputs/``."""
    if explicit:
        return Path(explicit)
    from . import paths
    for c in (Path(output_dir).resolve().parent, paths.OUTPUTS_DIR):
        if any((c / m.folder / "tables").exists() for m in metrics):
            return c
    return Path(output_dir).resolve().parent
