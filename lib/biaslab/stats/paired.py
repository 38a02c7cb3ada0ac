"""Paired model comparisons (beyond the four papers; Miller 2024, "Adding Error Bars to Evals", §4).

Two models scored on the same prompts are a *paired* design: comparing them prompt by prompt removes the variance
that comes from which prompts were drawn, and the comparison's interval must resample the same clusters for both.

* :func:`paired_difference` mean of per-prompt differences ``y_a - y_b`` over prompts both models answered, with a
  cluster-paired bootstrap interval (clusters resampled once, both models' outcomes move together), the paired
  design effect, and a test: exact McNemar (binary outcomes; Edwards 1948 / statsmodels ``mcnemar(exact=True)``,
  the binomial test on the discordant pairs) or the Wilcoxon signed-rank test (continuous outcomes; scipy). The
  McNemar / Wilcoxon p-values treat prompts as independent; the bootstrap interval does not, and is the one to read
  when ``design_effect`` is well above 1.
* :func:`paired_subgroup_test` the paired alternative to the two-sample KS test of the multi-factor paper (§3.3):
  both models answer the same subgroups, so compare ``d_a(g) - d_b(g)`` subgroup by subgroup (Wilcoxon signed-rank
  over subgroups) and give the difference of the two deviation metrics a cluster-paired bootstrap interval.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from .intervals import _cluster_codes, cluster_bootstrap, design_effect


def mcnemar_exact(y_a, y_b) -> dict:
    """Exact McNemar test of paired 0/1 outcomes: b = a-only successes, c = b-only, p = binomial test of b vs c."""
    y_a = np.asarray(y_a).astype(int)
    y_b = np.asarray(y_b).astype(int)
    table = np.array([[np.sum((y_a == 1) & (y_b == 1)), np.sum((y_a == 1) & (y_b == 0))],
                      [np.sum((y_a == 0) & (y_b == 1)), np.sum((y_a == 0) & (y_b == 0))]])
    b, c = int(table[0, 1]), int(table[1, 0])
    p = float(mcnemar(table, exact=True).pvalue) if b + c else 1.0
    return {"discordant_a": b, "discordant_b": c, "statistic": float(min(b, c)), "p_value": p,
            "test": "McNemar exact (binomial on discordant pairs)"}


def wilcoxon_paired(x, y=None) -> dict:
    """Wilcoxon signed-rank test of paired differences ``x - y`` (or of ``x`` when ``y`` is None); zero differences
    dropped (Wilcoxon's convention, scipy ``zero_method="wilcox"``)."""
    d = np.asarray(x, dtype=float) - (0 if y is None else np.asarray(y, dtype=float))
    d = d[np.isfinite(d)]
    nz = d[d != 0]
    if nz.size == 0:
        return {"statistic": np.nan, "p_value": 1.0, "n_nonzero": 0, "test": "Wilcoxon signed-rank"}
    r = stats.wilcoxon(nz)
    return {"statistic": float(r.statistic), "p_value": float(r.pvalue), "n_nonzero": int(nz.size),
            "test": "Wilcoxon signed-rank"}


def _paired_frame(df, outcome, model, a, b, unit):
    wide = df[df[model].isin([a, b])].pivot_table(index=unit, columns=model, values=outcome, aggfunc="mean")
    return wide.dropna(subset=[a, b]) if a in wide and b in wide else wide.iloc[:0]


def paired_difference(df: pd.DataFrame, outcome: str, a: str, b: str, cluster: str | None,
                      model: str = "model", unit: str = "prompt_id", binary: bool | None = None,
                      n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Model ``a`` minus model ``b`` on ``outcome``, paired by ``unit`` (the prompt), intervals clustered on
    ``cluster`` (a column constant within each unit). Returns model_a, model_b, n_pairs, n_clusters, mean_a, mean_b,
    difference, se_naive, se_cluster, design_effect, ci_low, ci_high, ci_method, test, statistic, p_value."""
    wide = _paired_frame(df, outcome, model, a, b, unit)
    out = {"model_a": a, "model_b": b, "n_pairs": len(wide)}
    if wide.empty:
        return {**out, "difference": np.nan, "ci_method": "no prompt answered by both models"}
    cl_of = df.drop_duplicates(unit).set_index(unit)[cluster] if cluster else None
    cl = (cl_of.reindex(wide.index).to_numpy() if cluster else wide.index.to_numpy())
    d = (wide[a] - wide[b]).to_numpy(dtype=float)
    codes = pd.factorize(cl)[0]
    g = int(codes.max() + 1)
    s = np.bincount(codes, weights=d)
    m = np.bincount(codes).astype(float)
    rng = np.random.default_rng(seed)
    w = rng.multinomial(g, np.full(g, 1.0 / g), size=n_boot).astype(float)
    reps = (w @ s) / (w @ m)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    if binary is None:
        binary = set(pd.unique(df[outcome].dropna())) <= {0, 1, True, False}
    test = mcnemar_exact(wide[a], wide[b]) if binary else wilcoxon_paired(d)
    return {**out, "n_clusters": g, "mean_a": float(wide[a].mean()), "mean_b": float(wide[b].mean()),
            "difference": float(d.mean()), "se_naive": float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else np.nan,
            "se_cluster": float(reps.std(ddof=1)), "design_effect": design_effect(d, cl) if d.size > 1 else np.nan,
            "ci_low": float(lo), "ci_high": float(hi),
            "ci_method": f"cluster-paired bootstrap percentile ({cluster or unit}, {n_boot} resamples)",
            "test": test["test"], "statistic": test["statistic"], "p_value": test["p_value"]}


def paired_differences(df: pd.DataFrame, outcome: str, cluster: str | None, by: Sequence[str] | str | None = None,
                       model: str = "model", **kw) -> pd.DataFrame:
    """:func:`paired_difference` for every pair of models, within each group of ``by``."""
    by = [by] if isinstance(by, str) else list(by or [])
    parts = [((), df)] if not by else df.groupby(by, sort=False, observed=True)
    rows = []
    for key, part in parts:
        key = key if isinstance(key, tuple) else (key,)
        models = list(pd.unique(part[model]))
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                rows.append({**dict(zip(by, key)), **paired_difference(part, outcome, a, b, cluster, model=model, **kw)})
    return pd.DataFrame(rows)


def paired_subgroup_test(df: pd.DataFrame, outcome: str, factors: Sequence[str], a: str, b: str,
                         cluster: str, metric: Callable[[np.ndarray], float], model: str = "model",
                         n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Paired comparison of two models' subgroup rates over the subgroups defined by ``factors``.

    Wilcoxon signed-rank over subgroups of ``rate_a(g) - rate_b(g)`` (subgroups both models answered), and a
    cluster-paired bootstrap interval for ``metric(rates_a) - metric(rates_b)`` (e.g. the deviation metric, eq. 4):
    clusters are resampled once per replicate and both models' subgroup rates recomputed on that resample.
    """
    factors = list(factors)
    sub = df[df[model].isin([a, b])]

    def rates(d):
        r = d.groupby([model] + factors, observed=True)[outcome].mean().unstack(model)
        return r.dropna(subset=[c for c in (a, b) if c in r]) if a in r and b in r else None

    def diff_metric(d):
        r = rates(d)
        return np.nan if r is None or r.empty else metric(r[a].to_numpy()) - metric(r[b].to_numpy())

    r = rates(sub)
    if r is None or r.empty:
        return {"model_a": a, "model_b": b, "n_subgroups": 0, "p_value": np.nan}
    w = wilcoxon_paired(r[a].to_numpy(), r[b].to_numpy())
    boot = cluster_bootstrap(sub, diff_metric, cluster, n_boot=n_boot, seed=seed, alpha=alpha)
    return {"model_a": a, "model_b": b, "n_subgroups": len(r), "metric_a": metric(r[a].to_numpy()),
            "metric_b": metric(r[b].to_numpy()), "metric_difference": boot["estimate"],
            "ci_low": boot["ci_low"], "ci_high": boot["ci_high"], "ci_method": boot["ci_method"],
            "mean_rate_difference": float((r[a] - r[b]).mean()), "test": w["test"] + " over subgroups",
            "statistic": w["statistic"], "p_value": w["p_value"], "n_clusters": boot["n_clusters"]}
