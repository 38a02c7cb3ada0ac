"""Notebook 5 glue: one report across models and benchmarks, read from the tables notebooks 1-4 wrote; nothing is
scored here. :func:`all_metrics` gathers every benchmark's headline metrics from its spec
(:class:`biaslab.benchmarks.spec.Metric` says where each is read and how it is intervalled).

Every interval and test follows the one rule of :mod:`biaslab.stats.clustered` on the source notebook's design
(``Metric.cluster``: the generating unit, or two crossed ones), so an effect reported by notebook 1 and here has one
interval: Korn-Graubard for 0/1 outcomes, CR1 t(G - 1) (the wild cluster bootstrap below 30 clusters) for means
(BBQ's bias score as the mean of its pseudo-values), notebook 2's projection interval for CALM's range statistic, and
the design-based estimate (:mod:`biaslab.stats.stratified`) for a metric scored on a stratified sample. Paired model
differences (:func:`paired_table`) are decided by the plan's claims of notebook 5 and otherwise exploratory; the
exact McNemar / Wilcoxon p over clustered prompts is kept beside them (``p_naive``).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from ...benchmarks import SPECS
from ...benchmarks.spec import Metric
from ...report.display import column_label
from ...stats import intervals, paired, ranking
from ...stats import responders as R
from ...stats import verdict as V


def metric_headers(metrics) -> dict:
    """What a reader sees as each metric's column header: its benchmark's title, then the rest of its id in words
    ("bbq_bias_ambig": "BBQ bias ambiguous"; ``biaslab.report.display`` reads ``attrs["labels"]``)."""
    return {m.id: f"{m.benchmark} {column_label(m.id.partition('_')[2])}" for m in metrics}


def all_metrics() -> tuple[Metric, ...]:
    """Every registered benchmark's metrics that notebook 5 reads (those with a source table), in registry order;
    a call, not a constant, so that a benchmark registered later (``benchmark_modules``) is seen."""
    out = tuple(m for s in SPECS.values() for m in s.metrics if m.sources)
    for m in out:
        if not m.folder:
            raise TypeError(f"metric {m.id!r} declares sources but no Metric.folder (the output folder, relative to "
                            "the outputs root, whose tables/ hold them), which notebook 5 (05_compare) needs")
    return out


def unread_metrics() -> tuple[str, ...]:
    """The registered metrics notebook 5 does not read: those without ``Metric.sources`` (notebook 6 only)."""
    return tuple(m.id for s in SPECS.values() for m in s.metrics if not m.sources)


def _or_all(metrics) -> tuple[Metric, ...]:
    return all_metrics() if metrics is None else tuple(metrics)


def metric(metric_id: str) -> Metric:
    for m in all_metrics():
        if m.id == metric_id:
            return m
    if metric_id in unread_metrics():
        raise KeyError(f"metric {metric_id!r} declares no Metric.sources (the table and column of its notebook's "
                       "output holding its value per model), which notebook 5 (05_compare) needs; set them in its "
                       "module's SPEC (docs/adding_a_benchmark.md)")
    raise KeyError(f"no metric {metric_id!r}; metrics are {[m.id for m in all_metrics()]}")


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
    """model, estimate, source (file), plus the source's own interval (and its G) where it has one."""
    rows = []
    for s in m.sources:
        t = read_table(root, m.folder, s.table)
        if t is None or s.column not in t:
            continue
        t = _filter(t, s.filters)
        for r in t.itertuples(index=False):
            d = r._asdict()
            rows.append({"model": d["model"], "estimate": float(d[s.column]),
                         "source": f"{m.folder}/tables/{s.table}.csv", "answer_mode": s.answer_mode or m.answer_mode,
                         "source_ci_low": d.get(s.ci[0], np.nan), "source_ci_high": d.get(s.ci[1], np.nan),
                         "source_ci_method": d.get(s.ci[2], ""), "source_n_clusters": d.get("n_clusters", np.nan)})
    out = pd.DataFrame(rows, columns=["model", "estimate", "source", "answer_mode", "source_ci_low",
                                      "source_ci_high", "source_ci_method", "source_n_clusters"])
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
    if r.empty:
        return r.assign(unit=pd.Series(dtype=str))
    r["unit"] = r[list(m.unit)].astype(str).agg("|".join, axis=1) if len(m.unit) > 1 else r[m.unit[0]].astype(str)
    dup = r.duplicated(["model", "unit"])
    if dup.any():         # one row per model and unit, or counts and paired differences double rows
        raise ValueError(f"{m.id}: {int(dup.sum())} (model, unit) rows repeat after filtering {m.response_filters} "
                         f"(e.g. {r.loc[dup, 'model'].iloc[0]}, {r.loc[dup, 'unit'].iloc[0]}): the filters must select "
                         "one row per unit")
    return _derive(m, r)


def no_responses(m: Metric, root: Path) -> str:
    """Why a metric has no per-unit responses: none written, or written without a column its filters need (a table
    from before that column was added: its notebook must be rerun)."""
    for stem in m.responses:
        t = read_table(root, m.folder, stem)
        lacking = [c for c in m.response_filters if t is not None and c not in t]
        if lacking:
            return (f"no usable per-prompt responses: {m.folder}/tables/{stem}.csv has no {', '.join(lacking)} "
                    "column (written before it was added; rerun that notebook)")
    return "no per-prompt responses in the source folder"


def _derive(m: Metric, r: pd.DataFrame) -> pd.DataFrame:
    """``m.derive`` applied per model (a derived outcome such as BBQ's pseudo-values belongs to one model's answers)."""
    if m.derive is None or r.empty:
        return r
    return pd.concat([m.derive(g) for _, g in r.groupby("model", sort=False)]).loc[r.index]


# ------------------------------------------------------------------------------------------------ statistics
def design(m: Metric, r: pd.DataFrame) -> tuple[str | list[str] | None, str]:
    """The metric's clusters that every row of ``r`` carries (one column, two crossed ones as a list, or None) and a
    note for ``ci_method`` when one is missing (a source table written before it carried that column)."""
    want = [m.cluster] if isinstance(m.cluster, str) else list(m.cluster or ())
    have = [c for c in want if c in r and r[c].notna().all()]
    if have == want:
        return (None if not have else have[0] if len(have) == 1 else have), ""
    lost = ", ".join(c for c in want if c not in have)
    return (have[0] if have else None), (f" (cluster column {lost} missing from the source responses: "
                                         + (f"clustered on {have[0]} only)" if have else
                                            "prompts treated as independent)"))


#: the columns of an estimate without responses to compute it from
NO_INTERVAL = {"estimate_from_responses": np.nan, "ci_low": np.nan, "ci_high": np.nan, "ci_method": "",
               "n_clusters": np.nan}


def interval(m: Metric, r: pd.DataFrame, seed: int = 0, n_boot: int | None = None) -> dict:
    """Estimate from one model's responses and its interval, by the rule of :mod:`biaslab.stats.clustered` on the
    metric's design: Korn-Graubard for 0/1 outcomes, the mean's CR1 t(G - 1) / wild cluster bootstrap interval for
    means (BBQ: the mean of the score's pseudo-values)."""
    cl, missing = design(m, r)
    if m.stratified and "weight" in r:   # every unit of the file, weighted back from the sample (ties kept: NaN)
        from ...stats.stratified import stratified_mean
        t = stratified_mean(r[m.outcome], r["stratum"], r["weight"], null=m.null)
        lo, hi = (max(t["ci_low"], 0.0), min(t["ci_high"], 1.0)) if m.kind == "binary" else (t["ci_low"], t["ci_high"])
        how = (t["method"] if t["method"].startswith("not estimable") else
               "t interval of the " + t["method"] + (", clipped to [0, 1]" if m.kind == "binary" else ""))
        return {"estimate_from_responses": t["estimate"], "ci_low": lo, "ci_high": hi, "n_clusters": t["n"],
                "ci_method": how}
    if m.kind == "binary":
        t = intervals.rate_intervals(r[r[m.outcome].notna()], m.outcome, cl).iloc[0]
        est, n = t["rate"], int(t["n_clusters"])
    elif m.kind in ("continuous", "ratio_linearized"):
        t = intervals.mean_intervals(r, m.outcome, cl, seed=seed, n_boot=n_boot).iloc[0]
        est, n = t["mean"], t["n_clusters"]
    else:
        return dict(NO_INTERVAL)
    return {"estimate_from_responses": est, "ci_low": t["ci_low"], "ci_high": t["ci_high"],
            "ci_method": t["ci_method"] + missing, "n_clusters": n}


def model_metric_table(root: Path, metrics=None, models: list[str] | None = None, n_boot: int | None = None,
                       seed: int = 0) -> pd.DataFrame:
    """Long model x metric table (one row per metric and model). ``n_units`` and ``n_prompt_set`` both count the
    units the estimate rests on (those with a defined outcome), from one list. ``n_boot``: draws of the wild cluster
    bootstrap where the rule uses it (None: the rule's 9,999, as notebooks 1-4)."""
    rows = []
    for m in _or_all(metrics):
        h = headline_values(m, root)
        if models is not None:
            h = h[h["model"].isin(models)]
        r_all = unit_responses(m, root)
        for row in h.itertuples(index=False):
            r = r_all[r_all["model"] == row.model] if len(r_all) else r_all
            res = (interval(m, r, seed=seed, n_boot=n_boot) if len(r) else
                   {**NO_INTERVAL, "ci_method": no_responses(m, root)})
            if m.kind == "source_interval":
                how = row.source_ci_method if isinstance(row.source_ci_method, str) and row.source_ci_method else \
                    m.note.split(";")[0]
                res.update(ci_low=row.source_ci_low, ci_high=row.source_ci_high, n_clusters=row.source_n_clusters,
                           ci_method=f"the source notebook's interval: {how}")
            units = _answered_units(m, r)
            rows.append({"metric": m.id, "benchmark": m.benchmark, "label": m.label, "model": row.model,
                         "estimate": row.estimate, **res, "direction": m.direction, "orientation": m.orientation,
                         "null": m.null, "null_meaning": m.null_meaning, "source": row.source,
                         "answer_mode": row.answer_mode, "n_units": len(units) if len(r) else np.nan,
                         "n_prompt_set": len(units),
                         "prompt_set": _set_id(units)})
    out = pd.DataFrame(rows)
    return comparison_groups(out) if len(out) else out


def _answered_units(m: Metric, r: pd.DataFrame) -> list[str]:
    """The units (prompts, pairs, templates) a model's estimate rests on: those with a defined outcome."""
    if r is None or r.empty or "unit" not in r:
        return []
    if m.outcome and m.outcome in r:
        r = r[r[m.outcome].notna()]
    return sorted(set(r["unit"].astype(str)))


def _set_id(units: list[str]) -> str:
    import hashlib
    return hashlib.sha1("\n".join(units).encode()).hexdigest()[:10] if units else ""


def comparison_groups(table: pd.DataFrame) -> pd.DataFrame:
    """``comparison_group`` per model × metric: models whose estimates rest on the same prompt set and the same
    answer mode (like with like); only models of one group are ranked against each other. A group is
    labelled by its answer mode and the size of its prompt set (with a letter where two sets have the same size). A
    model whose units are unknown (no per-unit responses) shares its prompts with no one it could be shown to share
    them with: it is a group of its own."""
    out = table.copy()
    labels = []
    for mid, g in out.groupby("metric", sort=False):
        sid = g["prompt_set"].fillna("").where(g["prompt_set"].fillna("") != "", "unknown: " + g["model"])
        rows = list(zip(g["answer_mode"].fillna(""), sid, g["n_prompt_set"].fillna(0)))
        keys = list(dict.fromkeys(rows))
        sizes = pd.Series([k[2] for k in keys]).value_counts()
        name = {}
        for i, (mode, s_id, n) in enumerate(keys):
            tag = f" (set {chr(65 + i)})" if sizes[n] > 1 else ""
            name[(mode, s_id, n)] = (f"{mode or 'one answer mode'} · {int(n):,} units{tag}" if n else
                                     f"{mode or 'one answer mode'} · units unknown ({s_id.removeprefix('unknown: ')})")
        labels += [(i, name[k]) for i, k in zip(g.index, rows)]
    out["comparison_group"] = pd.Series(dict(labels))
    return out


NOTEBOOK = "05_compare"


def paired_table(root: Path, metrics=None, models: list[str] | None = None, n_boot: int | None = None,
                 seed: int = 0, *, plan,
                 responders: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pair of models on each metric, on the units both answered, with the verdict columns of
    :mod:`biaslab.stats.verdict`.

    The analysis plan's claims of notebook 5 decide (one Holm family per model pair over its claimed metrics); every
    other metric's pairs are exploratory. A pair whose two models' answers were obtained differently (``answer_mode``:
    label probabilities vs generated text) is not comparable: its difference and interval are shown, its verdict is
    "not tested (not comparable: …)". A pair with a model that is degenerate *for this metric* (``responders``,
    :func:`responder_table`) keeps its difference and interval; its verdict is "not tested (degenerate responder:
    …)", or "not measurable (…)" where the model's instrument failed the plan's scoring rule. Neither enters the
    family. Every pair is :func:`biaslab.stats.paired.paired_difference` on the metric's design (BBQ: on the two
    models' score pseudo-values over the units both answered, whose mean difference is the difference of their scores
    there). ``n_boot``: draws of the wild cluster bootstrap where it is used."""
    rows = []
    for m in _or_all(metrics):
        r = unit_responses(m, root)
        if r.empty:
            continue
        if models is not None:
            r = r[r["model"].isin(models)]
        modes = headline_values(m, root).set_index("model")["answer_mode"]
        names = list(pd.unique(r["model"]))
        for a, b in itertools.combinations(names, 2):
            ra, rb = r[r["model"] == a], r[r["model"] == b]
            common = sorted(set(ra["unit"]) & set(rb["unit"]))
            base = {"metric": m.id, "model_a": a, "model_b": b, "n_pairs": len(common),
                    "answer_mode_a": modes.get(a, m.answer_mode), "answer_mode_b": modes.get(b, m.answer_mode)}
            if not common:
                rows.append({**base, "difference": np.nan, "ci_method": "no unit answered by both models"})
                continue
            both = r[r["model"].isin([a, b])]
            if m.kind == "ratio_linearized":    # pseudo-values on the common units: their mean is the score there
                both = _derive(m, both[both["unit"].isin(common)])
            strat = m.stratified and "weight" in both      # ties stay (NaN): left out within their stratum
            both = both if strat else both[both[m.outcome].notna()]
            cl, missing = design(m, both)
            res = paired.paired_difference(both, m.outcome, a, b, cl, unit="unit", binary=(m.kind == "binary"),
                                           n_boot=n_boot, seed=seed, stratified=strat)
            res.pop("model_a"), res.pop("model_b")
            if m.kind == "ratio_linearized":    # a signed-rank test of pseudo-values tests no score difference
                res.pop("p_naive", None), res.pop("test_naive", None)
            res["ci_method"] = res.get("ci_method", "") + missing
            rows.append({**base, **res, "n_pairs": res.get("n_pairs", len(common))})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return decide_pairs(out, responders, plan=plan)


def _no_common(df: pd.DataFrame) -> pd.Series:
    n = pd.to_numeric(df.get("n_pairs", pd.Series(np.nan, index=df.index)), errors="coerce")
    return pd.Series(np.where(n == 0, "no prompt answered by both models", ""), index=df.index)


def decide_pairs(pairs: pd.DataFrame, responders: pd.DataFrame | None = None,
                 *, plan) -> pd.DataFrame:
    """The verdict columns of a paired-differences table (see :func:`paired_table`): comparability from the two
    answer modes, responder status per metric from ``responders`` (metric, model, responder_status), the plan's
    claims of notebook 5 decided (Holm per model pair), every other row exploratory."""
    spec = V.Effects(estimate="difference", null=("null_value", 0.0), pair=("model_a", "model_b"),
                     undefined=_no_common, screen_by=("metric",))
    ma = pairs.get("answer_mode_a", pd.Series("", index=pairs.index)).fillna("").astype(str)
    mb = pairs.get("answer_mode_b", pd.Series("", index=pairs.index)).fillna("").astype(str)
    same = (ma == mb).to_numpy()
    comparable = pd.DataFrame({
        "comparable": same,
        "comparability": np.where(same, "same prompts (paired), same answer mode",
                                  "different answer modes: " + pairs["model_a"].astype(str) + ": " + ma + " vs "
                                  + pairs["model_b"].astype(str) + ": " + mb)})
    status = (responders[["metric", "model", "responder_status"]] if responders is not None and len(responders)
              else pd.DataFrame(columns=["metric", "model", "responder_status"]))
    old = [c for c in ("responder", "family_size", "adjustment", "p_adjusted", "significant") if c in pairs]
    return V.decide(pairs.drop(columns=old), spec, "paired_differences", status, comparable, plan=plan,
                    notebook=NOTEBOOK)


UNDECIDED = "not ranked: the plan decides no comparison on this metric (estimates and intervals only)"


def tie_group_table(table: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Tie groups per metric and comparison group (same prompt set and answer mode), models ranked from most to
    least biased by the oriented estimate, only for the metrics the plan decides (a pair of the metric carries a
    ``claim``). Two models are separated only by a pair whose verdict is "distinguishable". A metric the plan does
    not decide lists its models with their estimates, unranked and without groups (a metric with no decision must
    not read as a tie). A model that is degenerate or not measurable for the metric is listed but not ranked
    (``ranked`` False, ``note`` says why); so is a model alone in its comparison group (nothing like it to rank
    against)."""
    out = []
    claimed = (set(pairs.loc[pairs["claim"].fillna("").astype(str) != "", "metric"])
               if len(pairs) and {"claim", "metric"} <= set(pairs.columns) else set())
    for mid, t in table.groupby("metric", sort=False):
        status = t["responder_status"] if "responder_status" in t else pd.Series("", index=t.index)
        deg = status.fillna("").map(V.excluded)          # degenerate or not measurable: listed, not ranked
        deg_note = "not ranked: " + status.fillna("").astype(str).str.replace("degenerate:", "degenerate responder:",
                                                                              n=1)
        if mid not in claimed:
            out.append(pd.DataFrame({"model": t["model"].to_numpy(), "estimate": t["estimate"].to_numpy(),
                                     "rank": np.nan, "groups": "", "n_tied_with": np.nan, "ranked": False,
                                     "note": deg_note.where(deg, UNDECIDED).to_numpy()}).assign(
                metric=mid, comparison_group=t.get("comparison_group", pd.Series("all", index=t.index)).to_numpy(),
                n_models=0))
            continue
        orient = int(t["orientation"].iloc[0])
        pr = pairs[pairs["metric"] == mid] if len(pairs) else pd.DataFrame(columns=["model_a", "model_b"])
        pr = pr.assign(separated=(pr["verdict"] == V.DISTINGUISHABLE) if "verdict" in pr else False)
        for grp, g in t.groupby(t.get("comparison_group", pd.Series("all", index=t.index)), sort=False):
            ok = g[~deg.loc[g.index]]
            if len(ok) >= 2:
                est = ok.set_index("model")["estimate"] * orient
                tg = ranking.tie_groups(est, pr, differ_col="separated")
                tg["estimate"] = tg["estimate"] * orient
                tg = tg.assign(ranked=True, note="")
            else:
                tg = pd.DataFrame(columns=["model", "estimate", "rank", "groups", "n_tied_with", "ranked", "note"])
            rest = g[~g["model"].isin(tg["model"])]
            extra = [{"model": r.model, "estimate": r.estimate, "rank": np.nan, "groups": "", "n_tied_with": np.nan,
                      "ranked": False, "note": deg_note[i] if deg[i] else
                      "not ranked: no other model on the same prompts and answer mode"}
                     for i, r in zip(rest.index, rest.itertuples())]
            part = pd.concat([tg, pd.DataFrame(extra)], ignore_index=True) if extra else tg
            out.append(part.assign(metric=mid, comparison_group=grp, n_models=int(part["ranked"].sum())))
    cols = ["metric", "comparison_group", "model", "estimate", "ranked", "rank", "groups", "n_tied_with",
            "n_models", "note"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


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
    # the columns also when there is no second metric (an outputs root with one benchmark's run)
    none = pd.Series(dtype=float)
    return pd.DataFrame(rows, columns=["metric_a", "metric_b", "models",
                                       *ranking.spearman_interval(none, none, min_models=min_models)])


def _probability_rows(m: Metric, root: Path) -> pd.DataFrame:
    """The probability check computed from the metric's own per-prompt responses (a source written before responders
    were judged per metric has only answer rows): per model and number of choices."""
    r = unit_responses(m, root)
    probs = [c for c in r.columns if c.startswith("p_") and c[2:].isdigit()]
    if r.empty or not probs:
        return pd.DataFrame()
    by = ["model"] + (["k"] if "k" in r else [])
    return R.probability_check(r, probs, label_mass="label_mass", by=by)


def responder_table(root: Path, metrics=None) -> pd.DataFrame:
    """metric, model, responder_status (and reads): each metric judged by the rows of its source's
    ``responders.csv`` that read what the metric reads (``Metric.responders`` filters, ``Metric.reads``); a
    metric no rule applies to is "not judged: <why>". Rows of several k / tasks of one model combine to "degenerate"
    when any is, naming which (:func:`biaslab.stats.verdict.responder_status`)."""
    rows = []
    for m in _or_all(metrics):
        h = headline_values(m, root)
        if m.responders is None:
            rows += [{"metric": m.id, "model": x, "responder_status": f"not judged: {m.not_judged}",
                      "reads": m.reads} for x in h["model"]]
            continue
        t = read_table(root, m.folder, "responders")
        t = _filter(t, m.responders) if t is not None else None
        if (t is None or t.empty) and m.reads == R.PROBABILITIES:
            t = _probability_rows(m, root)
        look = (V.responder_status(t, ("model",)).set_index("model")["responder_status"]
                if t is not None and len(t) else {})
        rows += [{"metric": m.id, "model": x,
                  "responder_status": look.get(x, "not judged: no responder row for this model"), "reads": m.reads}
                 for x in h["model"]]
    return pd.DataFrame(rows, columns=["metric", "model", "responder_status", "reads"])


def source_provenance(root: Path, metrics=None) -> tuple[dict, dict]:
    """(model fingerprints, {table file: sha256}) of what notebook 5 read: the fingerprints the source notebooks
    recorded (their ``MANIFEST.json``; ``provenance.json`` while a run is still in progress) and the hash of every
    source and response table."""
    import json

    from ...sources import sha256_file
    models, files = {}, {}
    for m in _or_all(metrics):
        folder = Path(root) / m.folder
        for name in ("MANIFEST.json", "provenance.json"):
            if (folder / name).exists():
                models.update(json.loads((folder / name).read_text()).get("models") or {})
        for stem in [s.table for s in m.sources] + list(m.responses):
            p = folder / "tables" / f"{stem}.csv"
            if p.exists():
                files[f"outputs/{m.folder}/tables/{stem}.csv"] = sha256_file(p)
    return models, files


def outputs_root(explicit: str | Path | None, output_dir: str | Path, metrics=None) -> Path:
    """Where notebook 5 reads: ``explicit`` when given; else the folder holding its own output folder when notebooks
    1-4 wrote there (a full run into scratch/ or outputs/), else the published ``outputs/``."""
    if explicit:
        return Path(explicit)
    from ... import paths
    for c in (Path(output_dir).resolve().parent, paths.OUTPUTS_DIR):
        if any((c / m.folder / "tables").exists() for m in _or_all(metrics)):
            return c
    return Path(output_dir).resolve().parent
