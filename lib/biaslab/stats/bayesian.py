"""Hierarchical Bayesian logistic regression of deviations with bambi (beyond the multi-factor paper, §3.4).

``logit P(deviated) = b0 + sum_f b_f[level] + u_stigma[s] + u_template[t]``,
``u_stigma ~ N(0, sigma_s^2)``, ``u_template ~ N(0, sigma_t^2)``: the common (fixed) factors enter with treatment
coding at their reference levels, as in the maximum-likelihood model, while stigma and template are group-level
(random) intercepts. Partial pooling keeps factors that the maximum-likelihood model must drop (``template`` next to
``gender`` and ``biased_answer``, which are functions of it): their effects are identified through the priors and
the posterior intervals say how well. bambi's default weakly informative priors; NUTS via PyMC.

Parameterisation: centred when the groups have many responses per level (SSQA's full data: the non-centred form
mixed badly), non-centred when they have few (a scored subset: the centred form did not converge); ``"auto"`` picks
by responses per group level (< 20: non-centred).

Rows with the same covariates are pooled into binomial counts (``p(k, n) ~ ...``), which is exact and makes
repeated seeds cheap. The fit reports the sampler's convergence diagnostics: R-hat (want <= 1.01), bulk and tail
effective sample sizes (want >= 400 for stable intervals) and divergent transitions (want 0).

The posterior draws of a fit are cached on disk (``CACHE_DIR/posteriors``, netCDF) under a key of the pooled data,
the formula and parameterisation, the sampler settings, the seed and the bambi / PyMC / PyTensor versions: a rerun
reads them back instead of sampling. Every completed fit is kept, converged or not: with a fixed seed a refit would
repeat the same draws, and asking for more draws (the cure for a fit that did not converge) is a new key.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd


@dataclass
class BayesResult:
    summary: pd.DataFrame          # arviz summary of common terms and group-level standard deviations
    group_effects: pd.DataFrame    # posterior mean and interval of each group-level intercept
    diagnostics: dict
    formula: str
    idata: object = field(repr=False, default=None)
    cached: bool = False           # the draws were read from the cache, not sampled by this call


def _pool(df: pd.DataFrame, outcome: str, columns: list[str]) -> pd.DataFrame:
    g = df.groupby(columns, observed=True, dropna=False)[outcome].agg(["sum", "size"]).reset_index()
    return g.rename(columns={"sum": "k", "size": "n"})


def hierarchical_logistic(df: pd.DataFrame, fixed: Sequence[str], group: Sequence[str], references: dict,
                          outcome: str = "deviated", draws: int = 500, tune: int = 500, chains: int = 2,
                          seed: int = 0, hdi_prob: float = 0.95, cores: int = 1, numba: bool = False,
                          keep_idata: bool = False, noncentered: bool | str = "auto",
                          target_accept: float | None = None, cache: bool = True) -> BayesResult:
    """Fit ``outcome ~ fixed + (1|group...)`` as a binomial model with bambi; return summary and diagnostics.

    ``cache``: read the posterior draws from, and write them to, the on-disk cache (module docstring)."""
    import arviz as az
    fixed, group = list(fixed), list(group)
    data = _pool(df, outcome, fixed + group)
    for f in fixed:
        levels = [references[f]] + sorted({v for v in data[f].unique() if v != references[f]}, key=str)
        data[f] = pd.Categorical(data[f], categories=levels, ordered=True)   # first category = reference
    for g in group:
        data[g] = data[g].astype(str)
    # bambi formulas need plain names
    rename = {c: c.replace(" ", "_") for c in fixed + group}
    data = data.rename(columns=rename)
    rhs = [rename[f] for f in fixed] + [f"(1|{rename[g]})" for g in group]
    formula = "p(k, n) ~ " + " + ".join(rhs)
    if noncentered == "auto":
        # many responses per group level: the centred form samples better; few: the non-centred one
        per_level = len(df) / max(1, sum(data[rename[g]].nunique() for g in group))
        noncentered = bool(per_level < 20)
    kw = dict(draws=draws, tune=tune, chains=chains, random_seed=seed, progressbar=False)
    if numba:
        kw["compile_kwargs"] = {"mode": "NUMBA"}
    if target_accept:
        kw["target_accept"] = target_accept
    path = _cache_path(data, formula, noncentered, kw) if cache else None
    idata = _read_draws(path) if path else None
    cached = idata is not None
    if idata is None:
        idata = _sample(formula, data, noncentered, kw | {"cores": cores})
        if path:
            _write_draws(path, idata)
    seconds = float(idata.posterior.attrs.get("biaslab_fit_seconds", np.nan))
    common = ["Intercept"] + [rename[f] for f in fixed] + [f"1|{rename[g]}_sigma" for g in group]
    var_names = [v for v in common if v in idata.posterior]
    summ = az.summary(idata, var_names=var_names, hdi_prob=hdi_prob)
    summ.index.name = "term"
    summ = summ.reset_index()
    summ["odds_ratio_mean"] = np.where(summ["term"].str.contains("sigma"), np.nan, np.exp(summ["mean"]))
    ge = az.summary(idata, var_names=[f"1|{rename[g]}" for g in group], hdi_prob=hdi_prob)
    ge.index.name = "term"
    ge = ge.reset_index()
    full = az.summary(idata, hdi_prob=hdi_prob)
    div = int(idata.sample_stats["diverging"].sum()) if "diverging" in idata.sample_stats else -1
    diag = {"formula": formula, "noncentered": noncentered, "n_rows": int(len(df)), "n_binomial_cells": int(len(data)), "chains": chains,
            "draws": draws, "tune": tune, "seed": seed, "seconds": round(seconds, 1),
            "max_r_hat": float(full["r_hat"].max()), "min_ess_bulk": float(full["ess_bulk"].min()),
            "min_ess_tail": float(full["ess_tail"].min()), "divergences": div,
            "converged": bool(full["r_hat"].max() <= 1.01 and full["ess_bulk"].min() >= 400 and div == 0)}
    return BayesResult(summ, ge, diag, formula, idata if keep_idata else None, cached)


def _sample(formula: str, data: pd.DataFrame, noncentered: bool, kw: dict):
    import bambi as bmb
    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("bambi").setLevel(logging.ERROR)
    model = bmb.Model(formula, data, family="binomial", noncentered=noncentered)
    from .importance import threadpool_limits          # threadpoolctl's, or a no-op without it
    t0 = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        idata = model.fit(**kw)
    idata.posterior.attrs["biaslab_fit_seconds"] = round(time.perf_counter() - t0, 1)
    return idata


def _cache_path(data: pd.DataFrame, formula: str, noncentered: bool, kw: dict):
    """Cache file of a fit: keyed by the pooled data (values, column order, category order = reference levels),
    the formula, parameterisation, sampler settings, seed and library versions (``cores`` does not change draws)."""
    from importlib.metadata import version

    from ..files import result_cache
    cats = {c: [str(x) for x in data[c].cat.categories] for c in data.columns if hasattr(data[c], "cat")}
    key = result_cache.digest({
        "data": hashlib.sha256(data.to_csv(index=False).encode()).hexdigest(), "categories": cats,
        "formula": formula, "family": "binomial", "noncentered": bool(noncentered), "sampler": kw,
        "versions": {p: version(p) for p in ("bambi", "pymc", "pytensor", "arviz")}})
    return result_cache.folder("posteriors") / f"{key}.nc"


def _read_draws(path):
    import arviz as az

    from ..files import result_cache
    if not path.exists():
        return None
    try:
        idata = az.from_netcdf(path, engine="h5netcdf")
        idata.load()                         # into memory, not lazily from the file
        return idata
    except Exception as exc:  # noqa: BLE001 - an unreadable cache file is recomputed
        result_cache.set_aside(path, exc)
        return None


def _write_draws(path, idata) -> None:
    from ..files import result_cache
    result_cache.atomic_write(path, lambda tmp: idata.to_netcdf(str(tmp), engine="h5netcdf"), suffix=path.suffix)
