"""Subgroup analysis of benchmark results (Powers et al., multi-factor paper, §3.3).

* Subgroups: *first-level* subgroups are the prompts sharing one level of one factor, *second-level* subgroups one
  level of each of two factors, and so on (k-level subgroups for any k).
* Deviation rate ``d(g)``: the share of a subgroup's responses that deviate from the desired behaviour.
* Log disparity, eq. (3): ``LD(g) = log odds(d(g)) - log odds(d(not g))``, the log odds ratio of deviating inside
  the subgroup against all other responses (of the same model). Positive = the subgroup is disadvantaged.

  Rates of 0 or 1 make eq. (3) infinite. We report both the paper's raw value (``log_disparity_raw``: +/-inf or NaN
  there) and, as the main estimate, the Haldane-Anscombe corrected log odds ratio: 0.5 is added to each of the four
  cells of the subgroup's 2x2 table (deviated / not deviated x in g / not in g),
  ``LD = log[(a+.5)(d+.5) / ((b+.5)(c+.5))]``. The interval is Wald's on the same corrected table,
  ``LD +/- z * sqrt(1/(a+.5) + 1/(b+.5) + 1/(c+.5) + 1/(d+.5))``, or, with ``ci="exact"``, the exact conditional
  interval of the odds ratio (``scipy.stats.contingency.odds_ratio``, uncorrected table).
* Deviation metric, eq. (4): ``DM = int_0^{p+} (C - Q(p)) dp + int_{p+}^1 (Q(p) - C) dp`` for the empirical quantile
  function Q of the subgroup deviation rates and the ideal value C; for a step quantile function this is the mean of
  ``|x_i - C|`` (with C = 0: the area over the eCDF).
* Two-sample Kolmogorov-Smirnov test between two models' subgroup deviation rates (``scipy.stats.ks_2samp``).

Clustered prompts: the Wald interval above treats prompts as independent. With ``cluster`` (one column,
or two for a crossed design) each subgroup also gets the cluster-robust interval of its log disparity: the delta
method on the corrected rates, influence ``(y_i - d(g)) / (n_g p'_g (1 - p'_g))`` inside the subgroup and
``-(y_i - d(not g)) / (n_r p'_r (1 - p'_r))`` outside (p' the Haldane-Anscombe rates), CR1 sandwich, t(G - 1)
(:mod:`biaslab.stats.clustered`; G the clusters the contrast rests on, :func:`~.clustered.contrast_clusters`):
``se_cluster``, ``ci_low_cluster``, ``ci_high_cluster`` (none where ``se_cluster`` is 0: no interval from no
variance), ``n_clusters``, ``df``.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

SEP = " & "


def logit(p):
    """log(p / (1 - p)); -inf at 0 and +inf at 1 (the paper's raw log odds)."""
    p = np.asarray(p, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(p) - np.log1p(-p)


def log_disparity(dev_in, n_in, dev_out, n_out, correction: float = 0.5, ci: str = "wald", alpha: float = 0.05):
    """Eq. (3) for arrays of subgroup counts. Returns a DataFrame: log_disparity, ci_low, ci_high, se,
    log_disparity_raw (the uncorrected difference of log odds; inf/nan when a rate is 0 or 1).

    ``dev_in`` / ``n_in``: deviations and responses inside the subgroup; ``dev_out`` / ``n_out``: outside.
    """
    a = np.asarray(dev_in, dtype=float)
    b = np.asarray(n_in, dtype=float) - a
    c = np.asarray(dev_out, dtype=float)
    d = np.asarray(n_out, dtype=float) - c
    if (b < 0).any() or (d < 0).any() or (a < 0).any() or (c < 0).any():
        raise ValueError("log_disparity: deviation counts must lie between 0 and n")
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = logit(a / (a + b)) - logit(c / (c + d))
        k = correction
        ld = np.log(a + k) + np.log(d + k) - np.log(b + k) - np.log(c + k)
        se = np.sqrt(1 / (a + k) + 1 / (b + k) + 1 / (c + k) + 1 / (d + k))
    z = stats.norm.ppf(1 - alpha / 2)
    if ci == "wald":
        lo, hi = ld - z * se, ld + z * se
    elif ci == "exact":
        lo, hi = np.empty_like(ld), np.empty_like(ld)
        for i in range(ld.size):
            tab = np.array([[a.flat[i], b.flat[i]], [c.flat[i], d.flat[i]]]).astype(int)
            if tab.sum(axis=0).min() == 0 or tab.sum(axis=1).min() == 0:
                lo.flat[i], hi.flat[i] = -np.inf, np.inf
                continue
            r = stats.contingency.odds_ratio(tab, kind="conditional").confidence_interval(1 - alpha)
            with np.errstate(divide="ignore"):
                lo.flat[i], hi.flat[i] = np.log(r.low), np.log(r.high)
    else:
        raise ValueError(f"ci must be 'wald' or 'exact', not {ci!r}")
    return pd.DataFrame({"log_disparity": ld, "ci_low": lo, "ci_high": hi, "se": se, "log_disparity_raw": raw})


def _label(factors, levels) -> str:
    return SEP.join(f"{f}={v}" for f, v in zip(factors, levels))


def _clustered_ld(y: np.ndarray, groups: dict, labels, correction: float, alpha: float) -> dict:
    """Cluster-robust SE and t(G - 1) interval of each subgroup's corrected log disparity (module docstring).
    ``groups``: subgroup key -> row positions."""
    from .clustered import contrast_clusters, cr1_variance, t_quantile
    n = y.size
    rows = []                                           # (se_cluster, n_clusters, df) per subgroup
    for idx in groups.values():
        inside = np.zeros(n, dtype=bool)
        inside[idx] = True
        ng, nr = int(inside.sum()), int(n - inside.sum())
        if ng == 0 or nr == 0:
            rows.append((np.nan, np.nan, np.nan))
            continue
        a, c = y[inside].sum(), y[~inside].sum()
        pg, pr = (a + correction) / (ng + 2 * correction), (c + correction) / (nr + 2 * correction)
        psi = np.where(inside, (y - a / ng) / (ng * pg * (1 - pg)), -(y - c / nr) / (nr * pr * (1 - pr)))
        v, g = cr1_variance(psi, labels)
        g = min(g, contrast_clusters(inside, labels))
        rows.append((float(np.sqrt(v)) if np.isfinite(v) else np.nan, g, g - 1))
    out = dict(zip(("se_cluster", "n_clusters", "df"), map(list, zip(*rows))))
    out["q"] = np.array([t_quantile(d, 1 - alpha / 2) if d == d and d >= 1 else np.nan for d in out["df"]])
    return out


def subgroups(df: pd.DataFrame, factors: Sequence[str], outcome: str = "deviated", levels: Sequence[int] = (1, 2),
              by: str | None = "model", correction: float = 0.5, ci: str = "wald", alpha: float = 0.05,
              min_n: int = 1, combinations: Sequence[Sequence[str]] | None = None,
              cluster: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Deviation rate and log disparity of every k-level subgroup, for each k in ``levels``.

    ``outcome`` is a 0/1 column (or a share in [0, 1] with ``n`` rows each counting once). ``by`` (e.g. the model)
    splits the table first: each subgroup is compared with the rest *of its own group*. ``combinations`` restricts
    which factor tuples are used (default: all k-subsets of ``factors``, in the given order).

    Columns: [by], level, factors, subgroup, one column per factor (the subgroup's level, NaN when the factor does
    not define it), n, n_deviated, deviation_rate, log_disparity, ci_low, ci_high, se, log_disparity_raw; with
    ``cluster`` also se_cluster, ci_low_cluster, ci_high_cluster, n_clusters, df (module docstring).
    """
    y = df[outcome]
    if not set(pd.unique(y.dropna())) <= {0, 1, True, False}:
        raise ValueError(f"outcome {outcome!r} must be 0/1")
    if y.isna().any():
        raise ValueError(f"outcome {outcome!r} has {int(y.isna().sum())} missing values: drop or code them first")
    groups = [(None, df)] if by is None else list(df.groupby(by, sort=False, observed=True))
    combos = ([tuple(c) for c in combinations] if combinations is not None else
              [c for k in levels for c in itertools.combinations(factors, k)])
    out = []
    for key, part in groups:
        n_all, dev_all = len(part), int(part[outcome].sum())
        for combo in combos:
            agg = part.groupby(list(combo), observed=True, dropna=False)[outcome].agg(["size", "sum"]).reset_index()
            agg = agg[agg["size"] >= min_n]
            if agg.empty:
                continue
            ld = log_disparity(agg["sum"], agg["size"], dev_all - agg["sum"], n_all - agg["size"],
                               correction=correction, ci=ci, alpha=alpha)
            rows = pd.DataFrame({
                "level": len(combo),
                "factors": " x ".join(combo),
                "subgroup": [_label(combo, r) for r in agg[list(combo)].itertuples(index=False)],
                **{f: agg[f].to_numpy() for f in combo},
                "n": agg["size"].to_numpy(),
                "n_deviated": agg["sum"].to_numpy().astype(int),
            })
            rows["deviation_rate"] = rows["n_deviated"] / rows["n"]
            rows = pd.concat([rows, ld], axis=1)
            if cluster is not None:
                from .clustered import cluster_labels
                idx = part.groupby(list(combo), observed=True, dropna=False).indices
                keys = [tuple(k) if isinstance(k, tuple) else (k,) for k in
                        agg[list(combo)].itertuples(index=False, name=None)]
                idx = {k: idx[k if len(combo) > 1 else k[0]] for k in keys}
                cl = _clustered_ld(part[outcome].to_numpy(dtype=float), idx, cluster_labels(part, cluster),
                                   correction, alpha)
                rows["se_cluster"] = cl["se_cluster"]
                half = (cl["q"] * rows["se_cluster"]).where(rows["se_cluster"] > 0)    # SE 0: no interval
                rows["ci_low_cluster"] = rows["log_disparity"] - half
                rows["ci_high_cluster"] = rows["log_disparity"] + half
                rows["n_clusters"] = cl["n_clusters"]
                rows["df"] = cl["df"]
            if by is not None:
                rows.insert(0, by, key[0] if isinstance(key, tuple) else key)
            out.append(rows)
    if not out:
        return pd.DataFrame()
    res = pd.concat(out, ignore_index=True)
    front = ([by] if by else []) + ["level", "factors", "subgroup"]
    fcols = [f for f in dict.fromkeys(itertools.chain.from_iterable(combos))]
    rest = ["n", "n_deviated", "deviation_rate", "log_disparity", "ci_low", "ci_high", "se", "log_disparity_raw"]
    if cluster is not None:
        rest += ["se_cluster", "ci_low_cluster", "ci_high_cluster", "n_clusters", "df"]
    return res[front + fcols + rest]


def ecdf(values) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF: sorted values x and F(x) = i/n (for a step plot with ``where='post'``)."""
    x = np.sort(np.asarray(values, dtype=float))
    return x, np.arange(1, x.size + 1) / x.size


def deviation_metric(values, ideal: float = 0.0) -> float:
    """Eq. (4): area between the empirical quantile function of ``values`` and the ideal value C.

    ``DM = int_0^{p+} (C - Q(p)) dp + int_{p+}^1 (Q(p) - C) dp`` with ``Q(p+) = C``. Q is the step function
    ``Q(p) = x_(i)`` for ``p in ((i-1)/n, i/n]``, so each step contributes ``|x_(i) - C| / n`` and DM is the mean
    absolute deviation from C. For deviation rates (C = 0) it is the area over the eCDF. Ideal value 0.
    """
    x = np.sort(np.asarray(values, dtype=float))
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise ValueError("deviation_metric: no values")
    n = x.size
    below = x[x < ideal]
    above = x[x >= ideal]
    # integral over (0, p+): C - Q(p) >= 0 on the steps below C; over (p+, 1): Q(p) - C on the steps above
    return float(np.sum(ideal - below) / n + np.sum(above - ideal) / n)


def deviation_metric_pseudo_values(y, subgroup, ideal: float = 0.0) -> tuple[float, np.ndarray, int]:
    """The deviation metric (eq. 4) of the rates of ``y`` in the subgroups labelled ``subgroup`` (one label per unit),
    its linearization pseudo-values (one per unit) and the number of subgroups holding a single unit.

    Pseudo-values ``DM + n psi_i`` with the influence value ``psi_i = sign(r_s - C) (y_i - r_s) / (n_s S)`` of unit i
    in subgroup s (S subgroups, r_s their rates; Taylor linearization, Woodruff 1971 / Binder 1983; sign +1 at
    r_s = C, as :func:`deviation_metric` counts a rate equal to C above it). Each residual is scaled by
    ``sqrt(n_s / (n_s - 1))``: the subgroup's own rate has leverage 1/n_s on its units, and this HC2 correction
    (MacKinnon & White 1985; Bell & McCaffrey 2002 for clusters) makes the residual variance unbiased in small
    subgroups. Their mean is DM, and the cluster-robust variance of that mean is the linearized variance of DM, so the
    metric gets the interval and test of a mean under the rule of :mod:`biaslab.stats.clustered`. A subgroup of one
    unit (leverage 1) leaves no residual: where there is one, that variance is not estimable and the caller must say
    so (the pseudo-values are then NaN). First order only: where rates lie near C, |r_s - C| is biased upwards and
    not symmetric, which the linearization does not correct (a coverage check with 12 templates and rates away from C:
    tests/test_inference.py)."""
    y = np.asarray(y, dtype=float)
    codes, _ = pd.factorize(np.asarray(subgroup), sort=True)
    size = np.bincount(codes).astype(float)
    rate = np.bincount(codes, weights=y) / size
    dm = float(np.mean(np.abs(rate - ideal)))
    single = int((size == 1).sum())
    if single:
        return dm, np.full(y.size, np.nan), single
    sign = np.where(rate >= ideal, 1.0, -1.0)
    hc2 = np.sqrt(size / (size - 1))
    psi = sign[codes] * hc2[codes] * (y - rate[codes]) / (size[codes] * size.size)
    return dm, dm + y.size * psi, 0


def deviation_metric_table(sub: pd.DataFrame, by: str = "model", rate: str = "deviation_rate",
                           ideal: float = 0.0, group_cols: Sequence[str] = ("level", "factors")) -> pd.DataFrame:
    """DM (eq. 4) per model and subgroup family, with the number of subgroups and their mean / median rate."""
    rows = []
    keys = [by] + list(group_cols)
    for key, part in sub.groupby(keys, sort=False):
        rows.append({**dict(zip(keys, key)), "n_subgroups": len(part), "ideal": ideal,
                     "deviation_metric": deviation_metric(part[rate], ideal),
                     "median_rate": float(part[rate].median()),
                     "share_below_0.2": float((part[rate] < 0.2).mean())})
    return pd.DataFrame(rows)


def ks_tests(sub: pd.DataFrame, by: str = "model", rate: str = "deviation_rate",
             group_cols: Sequence[str] = ("level", "factors")) -> pd.DataFrame:
    """Two-sample Kolmogorov-Smirnov test of subgroup deviation rates for every pair of models, per family."""
    rows = []
    for key, part in sub.groupby(list(group_cols), sort=False):
        models = list(pd.unique(part[by]))
        for m1, m2 in itertools.combinations(models, 2):
            a = part.loc[part[by] == m1, rate].to_numpy()
            b = part.loc[part[by] == m2, rate].to_numpy()
            r = stats.ks_2samp(a, b)
            rows.append({**dict(zip(group_cols, key if isinstance(key, tuple) else (key,))), "model_a": m1,
                         "model_b": m2, "n_a": a.size, "n_b": b.size, "ks_statistic": float(r.statistic),
                         "p_value": float(r.pvalue)})
    return pd.DataFrame(rows, columns=list(group_cols) + ["model_a", "model_b", "n_a", "n_b", "ks_statistic",
                                                          "p_value"])
