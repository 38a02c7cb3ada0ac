"""Statistical factor importance by logistic regression (Powers et al., multi-factor paper, §3.4).

``logit P(deviated) = b0 + sum_f sum_{l != ref_f} b_{f,l} * I(f = l)``: every factor enters with treatment
(dummy) coding against its reference level (the paper's Table 1 references), fitted by maximum likelihood with
statsmodels (``GLM``, binomial family, logit link). Positive coefficients are risk factors, negative ones protective;
``exp(b)`` is the odds ratio against the reference level; Wald confidence intervals and p-values.

Factor sets whose effects cannot be separated are refused with an :class:`AliasingError` that names the factors:
a factor that is a function of another (in SSQA, ``biased_answer`` and ``gender`` are functions of ``template``), or
any other rank deficiency of the dummy-coded design matrix (found from its null space). Levels that do not occur in
the data are dropped from the design (reported in ``notes``); levels with a deviation rate of 0 or 1 have no finite
maximum-likelihood estimate (separation): their rows are flagged ``separated``.

Clustered prompts (beyond the paper): with ``cluster=`` the same fit also gets cluster-robust (Liang-Zeger
sandwich) standard errors, statsmodels ``cov_type="cluster"`` with its default small-sample factor
``G/(G-1) * (N-1)/(N-K)`` (Cameron & Miller 2015, "A practitioner's guide to cluster-robust inference", eqs. 11-12).
Factors constant within a cluster (SSQA's gender and biased answer are template-level: 37 templates, not 10,360
independent rows) are estimated from G clusters, and their naive Wald p-values are far too small. The table keeps
the naive columns and adds ``se_cluster``, ``p_cluster``, ``ci_low_cluster``, ``ci_high_cluster`` and the
per-coefficient design effect ``design_effect = (se_cluster / se)^2``.

The clustered columns follow the one rule of :mod:`biaslab.stats.clustered`: intervals and Wald p-values on
t(G - 1), not the normal, G the clusters the term's level rests on (``n_clusters``;
:func:`biaslab.stats.clustered.contrast_clusters`: SSQA's gender[male], held by 4 of 37 templates, gets t(3)); with fewer than 30 clusters ``p_cluster`` is the wild cluster restricted *score*
bootstrap (Kline & Santos 2012, "A score based approach to wild bootstrap inference", J. Econometric Methods 1(1);
Roodman et al. 2019 §3.7 for its use with few clusters), Webb weights: for term k the model is refitted without it,
the restricted fit's score contributions ``s_i = x_i (y_i - p~_i)`` are summed per cluster and projected on row k of
the inverse information, ``c_g = (H~^-1 s_g)_k``; the statistic is ``sum_g c_g / sqrt(sum_g c_g^2)`` and its
bootstrap draws ``sum_g v_g c_g / sqrt(sum_g v_g^2 c_g^2)``. ``p_method`` says which p a row carries.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from scipy.linalg import null_space

from .clustered import FEW_CLUSTERS, N_WILD, clusters_label, contrast_clusters, no_variation
from .coverage import functional_dependencies

try:                                   # small dense problems: one BLAS thread is fastest, and on a busy machine
    from threadpoolctl import threadpool_limits   # multi-threaded BLAS can be 30x slower (oversubscription)
except ImportError:                    # pragma: no cover
    import contextlib

    def threadpool_limits(*args, **kwargs):
        return contextlib.nullcontext()


class AliasingError(ValueError):
    """The requested factors are aliased or collinear; the message names them."""


@dataclass
class DesignMatrix:
    X: pd.DataFrame
    terms: pd.DataFrame              # column -> factor, level
    notes: list[str] = field(default_factory=list)


def treatment_design(df: pd.DataFrame, factors: Sequence[str], references: dict) -> DesignMatrix:
    """Intercept + one dummy per non-reference level of each factor (treatment coding at the reference level).

    Column names are ``factor[level]``; levels absent from ``df`` get no column (noted).
    """
    cols = {"Intercept": np.ones(len(df))}
    terms = [{"term": "Intercept", "factor": "Intercept", "level": ""}]
    notes = []
    for f in factors:
        ref = references[f]
        vals = df[f]
        observed = list(pd.unique(vals.dropna()))
        if vals.isna().any():
            raise AliasingError(f"factor {f!r} has {int(vals.isna().sum())} missing values")
        if ref not in observed:
            raise AliasingError(f"the reference level {ref!r} of factor {f!r} does not occur in the data; "
                                "choose another reference or another subset")
        if len(observed) < 2:
            raise AliasingError(f"factor {f!r} takes a single level ({ref!r}) in the data: it is constant, so it "
                                "is aliased with the intercept; leave it out")
        try:
            ordered = [lv for lv in sorted(observed, key=str) if lv != ref]
        except TypeError:
            ordered = [lv for lv in observed if lv != ref]
        for lv in ordered:
            name = f"{f}[{lv}]"
            cols[name] = (vals == lv).to_numpy(dtype=float)
            terms.append({"term": name, "factor": f, "level": lv})
    return DesignMatrix(pd.DataFrame(cols, index=df.index), pd.DataFrame(terms), notes)


def check_aliasing(df: pd.DataFrame, factors: Sequence[str], references: dict, tol: float = 1e-8) -> DesignMatrix:
    """Refuse aliased or collinear factor sets (raises :class:`AliasingError` naming the factors)."""
    factors = list(factors)
    deps = functional_dependencies(df, factors, max_determinant=1)
    if deps:
        msgs = "; ".join(d.message() for d in deps[:4])
        names = sorted({n for d in deps for n in (*d.determinant, d.dependent)})
        raise AliasingError(f"factors {names} are aliased: {msgs}")
    dm = treatment_design(df, factors, references)
    same = identical_levels(df, factors)
    X = dm.X.to_numpy()
    # null space of X: columns with weight there are linearly dependent on the others
    if X.shape[0] >= X.shape[1]:           # thin SVD: vt is p x p, its last rows span the null space
        _, sv, vt = np.linalg.svd(X, full_matrices=False)
        rank = int((sv > tol * sv[0]).sum())
        null = vt[rank:].T
    else:                                   # fewer rows than columns: scipy gives the full null space
        null = null_space(X, rcond=tol)
        rank = X.shape[1] - null.shape[1]
    if null.shape[1]:
        involved = np.abs(null).max(axis=1) > 1e-6
        cols = dm.X.columns[involved]
        fac = sorted(set(dm.terms.set_index("term").loc[cols, "factor"]) - {"Intercept"})
        why = ""
        if same:
            why = " Levels of different factors select exactly the same prompts: " + "; ".join(
                " = ".join(f"{f}={lv!r}" for f, lv in grp) for grp in same[:4]) + \
                " (with such levels as references, or as non-references, the factors' dummies add up to the same " \
                "column)."
        raise AliasingError(
            f"the dummy-coded design of factors {factors} is rank deficient ({rank} of {X.shape[1]} columns "
            f"independent{', fewer rows than columns' if X.shape[0] < X.shape[1] else ''}): factors {fac} are "
            f"collinear.{why} Drop one of them, recode the aliased levels, or "
            "analyse a subset where they are crossed.")
    return dm


def identical_levels(df: pd.DataFrame, factors: Sequence[str]) -> list[list[tuple]]:
    """Groups of (factor, level) from different factors that select exactly the same rows (e.g. in SSQA
    stigma='no stigma', gender='no gender' and prompt_style='base' are the same 37 prompts)."""
    keys: dict[bytes, list[tuple]] = {}
    for f in factors:
        for lv in pd.unique(df[f].dropna()):
            m = np.packbits((df[f] == lv).to_numpy())
            keys.setdefault(m.tobytes(), []).append((f, lv))
    return [g for g in keys.values() if len({f for f, _ in g}) > 1]


@dataclass
class LogitResult:
    table: pd.DataFrame
    result: object                 # statsmodels GLMResults
    design: DesignMatrix
    n: int
    notes: list[str]


def logistic_regression(df: pd.DataFrame, factors: Sequence[str], references: dict, outcome: str = "deviated",
                        alpha: float = 0.05, check: bool = True, cluster: str | None = None) -> LogitResult:
    """Maximum-likelihood logistic regression of ``outcome`` (0/1) on the factors, treatment-coded.

    Returns a table with one row per term: term, factor, level, coef, se, odds_ratio, ci_low, ci_high (odds-ratio
    scale, Wald, level 1 - alpha), z, p_value, n_level (responses at that level), rate_level, separated; with
    ``cluster`` also se_cluster, z_cluster, p_cluster, ci_low_cluster, ci_high_cluster, design_effect, n_clusters.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _logistic_regression(df, factors, references, outcome, alpha, check, cluster)


def _logistic_regression(df, factors, references, outcome, alpha, check, cluster=None) -> LogitResult:
    y = df[outcome].astype(float)
    if not set(pd.unique(y)) <= {0.0, 1.0}:
        raise ValueError(f"outcome {outcome!r} must be 0/1")
    if y.nunique() < 2:
        raise AliasingError(f"outcome {outcome!r} is constant ({y.iloc[0]:g}) in these data: nothing to explain")
    dm = check_aliasing(df, factors, references) if check else treatment_design(df, factors, references)
    notes = list(dm.notes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = sm.GLM(y.to_numpy(), dm.X, family=sm.families.Binomial()).fit()
    for w in caught:
        notes.append(f"statsmodels: {w.message}")
    z = stats.norm.ppf(1 - alpha / 2)
    t = dm.terms.copy()
    t["coef"] = res.params.to_numpy()
    t["se"] = res.bse.to_numpy()
    with np.errstate(over="ignore"):
        t["odds_ratio"] = np.exp(t["coef"])
        t["ci_low"] = np.exp(t["coef"] - z * t["se"])
        t["ci_high"] = np.exp(t["coef"] + z * t["se"])
    t["z"] = res.tvalues.to_numpy()
    t["p_value"] = res.pvalues.to_numpy()
    at = [np.ones(len(df), dtype=bool) if f == "Intercept" else (df[f] == lv).to_numpy()
          for f, lv in zip(t["factor"], t["level"])]
    t["n_level"] = [int(m.sum()) for m in at]
    t["rate_level"] = [float(y[m].mean()) for m in at]
    t["separated"] = (t["factor"] != "Intercept") & t["rate_level"].isin([0.0, 1.0])
    t.loc[t["se"] > 50, "separated"] = True
    if cluster is not None:
        groups = pd.factorize(df[cluster], sort=True)[0]
        n_g, (n_obs, k_par) = int(groups.max() + 1), dm.X.shape
        if n_g < 2 or n_obs <= k_par:     # the CR1 factor G/(G-1) (N-1)/(N-K) is undefined: no clustered SEs
            se_c = np.full(len(t), np.nan)
            notes.append(f"no cluster-robust standard errors: {n_g} {cluster} cluster(s), {n_obs} rows for "
                         f"{k_par} parameters")
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rc = sm.GLM(y.to_numpy(), dm.X, family=sm.families.Binomial()).fit(
                    cov_type="cluster", cov_kwds={"groups": groups})
            se_c = rc.bse.to_numpy()
        # a separated term has no finite MLE: its sandwich SE is as meaningless as its naive one (a tiny clustered SE
        # on a coefficient of -25 would otherwise read as p ~ 1e-240)
        se_c = np.where(t["separated"].to_numpy(), np.nan, se_c)
        t["se_cluster"] = se_c
        t["z_cluster"] = t["coef"] / se_c
        # a term's t reference has the clusters its level rests on (a level held by 4 of 37 templates: t(3))
        held = np.array([n_g if f == "Intercept" else min(n_g, contrast_clusters((df[f] == lv).to_numpy(), groups))
                         for f, lv in zip(t["factor"], t["level"])])
        dfree = np.maximum(held - 1, 1)
        t["p_cluster"] = 2 * stats.t.sf(np.abs(t["z_cluster"]), dfree)
        t["p_method"] = [f"Wald t({d}) on the CR1 SE ({cluster})" for d in dfree]
        if 2 <= n_g < FEW_CLUSTERS and n_obs > k_par:
            wild = [np.nan if sep else wild_score_p(y.to_numpy(), dm.X.to_numpy(), j, groups)
                    for j, sep in enumerate(t["separated"])]
            t["p_cluster"] = wild
            t["p_method"] = f"wild cluster score bootstrap (Kline-Santos, restricted, Webb), G = {n_g} {cluster}"
        tq = stats.t.ppf(1 - alpha / 2, dfree)
        with np.errstate(over="ignore"):
            t["ci_low_cluster"] = np.exp(t["coef"] - tq * se_c)
            t["ci_high_cluster"] = np.exp(t["coef"] + tq * se_c)
        t["design_effect"] = (se_c / t["se"]) ** 2
        flat = _no_variance(se_c, t["se"].to_numpy())     # score totals that cancel in every cluster
        if flat.any():
            t.loc[flat, ["z_cluster", "p_cluster", "ci_low_cluster", "ci_high_cluster"]] = np.nan
            t.loc[flat, "p_method"] = no_variation(n_obs, clusters=n_g)
        t["n_clusters"] = held
        t["ci_method"] = [f"Wald, naive (normal) and cluster-robust ({cluster}, CR1 sandwich, t({d}))" for d in dfree]
        notes.append(f"cluster-robust standard errors over {int(groups.max() + 1)} {clusters_label(cluster)} "
                     "(statsmodels cov_type='cluster'); read p_cluster, not p_value")
    if t["separated"].any():
        notes.append(f"{int(t['separated'].sum())} term(s) show separation (deviation rate 0 or 1 at that level, "
                     "or a standard error > 50): their coefficients and p-values are not meaningful")
    return LogitResult(t, res, dm, len(df), notes)


def _no_variance(se: np.ndarray, se_naive: np.ndarray) -> np.ndarray:
    """Per term: a standard error that is 0 up to round-off (its variance at most 1e-12 of the naive one, as
    :func:`biaslab.stats.clustered.exact_zero` reads a variance), i.e. no test and no interval."""
    se, se_naive = np.asarray(se, float), np.asarray(se_naive, float)
    with np.errstate(invalid="ignore"):
        return np.isfinite(se) & ((se == 0) | (se * se <= 1e-12 * se_naive * se_naive))


def wild_score_p(y: np.ndarray, X: np.ndarray, k: int, groups: np.ndarray, n_boot: int = N_WILD, seed: int = 0,
                 family: str = "binomial") -> float:
    """Wild cluster restricted score bootstrap p-value of H0: beta_k = 0 in the regression of ``y`` on ``X``
    (Kline & Santos 2012; module docstring), Webb weights (all 6^G vectors when G <= 5). ``family``: "binomial"
    (logistic; information weights p(1 - p)) or "gaussian" (OLS; weights 1, the error variance cancels in the
    statistic), the restricted fit being the same GLM without column k."""
    from .clustered import resampling_p, webb_weights
    rest = np.delete(X, k, axis=1)
    fam = {"binomial": sm.families.Binomial, "gaussian": sm.families.Gaussian}[family]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sm.GLM(y, rest, family=fam).fit()
    p = np.asarray(fit.fittedvalues, dtype=float)
    w = p * (1 - p) if family == "binomial" else np.ones_like(p)
    info = X.T @ (X * w[:, None])
    try:
        hk = np.linalg.solve(info, np.eye(X.shape[1])[k])
    except np.linalg.LinAlgError:
        return float("nan")
    c = np.bincount(groups, weights=(X @ hk) * (y - p))
    denom = math.sqrt(float(np.sum(c * c)))
    if denom == 0:
        return float("nan")
    t_obs = abs(c.sum()) / denom
    v = webb_weights(c.size, n_boot, seed)
    tb = np.abs(v @ c) / np.sqrt((v * v) @ (c * c))
    return float(resampling_p(tb, t_obs, 6 ** c.size))


def identifiable_subset(df: pd.DataFrame, factors: Sequence[str], references: dict) -> tuple[list[str], dict]:
    """Greedy choice of factors the regression can estimate together, in order of priority.

    Factors are added one at a time in the given order; a factor is left out when it is constant in ``df``, its
    reference level is absent, or adding it makes the set aliased or collinear (the paper: "we omitted factors
    which induce multicollinearity"). Returns (kept factors, {left-out factor: reason}).
    """
    kept: list[str] = []
    dropped: dict[str, str] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for f in factors:
            if df[f].nunique(dropna=False) < 2:
                dropped[f] = "constant in these data"
                continue
            try:
                check_aliasing(df, kept + [f], references)
            except AliasingError as exc:
                dropped[f] = str(exc)
                continue
            kept.append(f)
    return kept, dropped


def linear_regression(df: pd.DataFrame, factors: Sequence[str], references: dict, outcome: str,
                      cluster: str | None = None, alpha: float = 0.05, check: bool = True) -> pd.DataFrame:
    """Ordinary least squares of a continuous ``outcome`` on treatment-coded factors (the linear analogue of
    :func:`logistic_regression`, for outcomes such as a normalized entropy), with cluster-robust CR1 standard errors
    on ``cluster`` (statsmodels ``cov_type="cluster"``; Cameron & Miller 2015) and t(G - 1) references.

    One row per term: term, factor, level, coef (difference in the outcome's mean against the reference level), se,
    ci_low, ci_high, p_value, p_method, n_level, n_clusters, ci_method. With fewer than ``FEW_CLUSTERS`` clusters
    ``p_value`` is the wild cluster restricted score bootstrap (:func:`wild_score_p`, ``family="gaussian"``), the
    rule :func:`logistic_regression` follows (module docstring); the interval stays CR1 t(G - 1)."""
    with threadpool_limits(limits=1, user_api="blas"):
        dm = check_aliasing(df, factors, references) if check else treatment_design(df, factors, references)
        y = df[outcome].astype(float).to_numpy()
        model = sm.OLS(y, dm.X)
        groups = pd.factorize(df[cluster], sort=True)[0] if cluster is not None else None
        g = int(groups.max() + 1) if cluster is not None else len(df)
        if cluster is not None and (g < 2 or len(df) <= dm.X.shape[1]):   # CR1's G/(G-1) (N-1)/(N-K) undefined
            res = model.fit()
            res_bse = np.full(len(dm.terms), np.nan)
            dfree = 1
            how = f"OLS; no cluster-robust standard errors ({g} {cluster} cluster(s), {len(df)} rows)"
        elif cluster is not None:
            res = model.fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True,
                                                          "df_correction": True})
            res_bse = res.bse.to_numpy()
            dfree = max(g - 1, 1)
            how = f"OLS, cluster-robust CR1 ({cluster}, {g} clusters), t({dfree})"
        else:
            res = model.fit()
            res_bse = res.bse.to_numpy()
            dfree = int(res.df_resid)
            how = "OLS, classical standard errors"
    t = dm.terms.copy()
    t["coef"] = res.params.to_numpy()
    t["se"] = res_bse
    q = stats.t.ppf(1 - alpha / 2, dfree)
    t["ci_low"], t["ci_high"] = t["coef"] - q * t["se"], t["coef"] + q * t["se"]
    t["p_value"] = 2 * stats.t.sf(np.abs(t["coef"] / t["se"]), dfree)
    t["p_method"] = how
    if cluster is not None and 2 <= g < FEW_CLUSTERS and len(df) > dm.X.shape[1] and np.ptp(y) > 0:
        X = dm.X.to_numpy(float)
        t["p_value"] = [wild_score_p(y, X, j, groups, family="gaussian") for j in range(X.shape[1])]
        t["p_method"] = f"wild cluster score bootstrap (Kline-Santos, restricted, Webb), G = {g} {cluster}"
    flat = np.full(len(t), np.ptp(y) == 0) | _no_variance(t["se"].to_numpy(), model.fit().bse.to_numpy())
    if flat.any():                                    # a constant outcome, or residuals that cancel in every cluster
        t.loc[flat, ["ci_low", "ci_high", "p_value"]] = np.nan
        t.loc[flat, "p_method"] = no_variation(len(df), clusters=None if np.ptp(y) == 0 else g)
    t["n_level"] = [len(df) if f == "Intercept" else int((df[f] == lv).sum()) for f, lv in zip(t["factor"],
                                                                                             t["level"])]
    t["n_clusters"] = g
    t["ci_method"] = how
    return t
