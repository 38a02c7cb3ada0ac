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
"""

from __future__ import annotations

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


def _pool(df: pd.DataFrame, outcome: str, columns: list[str]) -> pd.DataFrame:
    g = df.groupby(columns, observed=True, dropna=False)[outcome].agg(["sum", "size"]).reset_index()
    return g.rename(columns={"sum": "k", "size": "n"})


def hierarchical_logistic(df: pd.DataFrame, fixed: Sequence[str], group: Sequence[str], references: dict,
                          outcome: str = "deviated", draws: int = 500, tune: int = 500, chains: int = 2,
                          seed: int = 0, hdi_prob: float = 0.95, cores: int = 1, numba: bool = False,
                          keep_idata: bool = False, noncentered: bool | str = "auto",
                          target_accept: float | None = None) -> BayesResult:
    """Fit ``outcome ~ fixed + (1|group...)`` as a binomial model with bambi; return summary and diagnostics."""
    import arviz as az
    import bambi as bmb

    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("bambi").setLevel(logging.ERROR)
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
    model = bmb.Model(formula, data, family="binomial", noncentered=noncentered)
    t0 = time.perf_counter()
    kw = dict(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed, progressbar=False)
    if numba:
        kw["compile_kwargs"] = {"mode": "NUMBA"}
    if target_accept:
        kw["target_accept"] = target_accept
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:                      # pragma: no cover
        import contextlib
        threadpool_limits = lambda **k: contextlib.nullcontext()   # noqa: E731
    with threadpool_limits(limits=1, user_api="blas"):
        idata = model.fit(**kw)
    seconds = time.perf_counter() - t0
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
    return BayesResult(summ, ge, diag, formula, idata if keep_idata else None)
