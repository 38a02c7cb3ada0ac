"""Agreement between two ways of reading the same answers, and a rate corrected by prediction-powered inference.

* :func:`cohen_kappa` Cohen's kappa (Cohen 1960): ``(p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed share of
  agreement and ``p_e = sum_c p_a(c) p_b(c)`` the agreement expected from the two marginals.
* :func:`agreement_intervals` observed agreement and kappa with percentile cluster-bootstrap intervals (items of
  one template are resampled together; Miller 2024, §2.2).
* :func:`ppi_mean` the prediction-powered estimate of a mean (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
  "Prediction-powered inference", Science 382, eq. 1 and Theorem 1 for the mean): with gold labels ``Y`` and
  predictions ``Yhat`` on n labelled items and predictions ``Yhat_u`` on N unlabelled ones,
  ``theta_PP = mean(Yhat_u) - mean(Yhat - Y)`` (the *rectifier* removes the predictor's bias), and its
  (1 - alpha) interval ``theta_PP +- z_{1-alpha/2} sqrt(var(Yhat_u) / N + var(Yhat - Y) / n)``. Computed by
  ``ppi_py`` (``ppi-python``, the authors' package) with ``lam=1`` (classic PPI, not the power-tuned PPI++);
  the tests compare it with the formula written out (``tests/oracles.py``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def cohen_kappa(a: Sequence, b: Sequence, labels: Sequence | None = None) -> float:
    """Cohen's kappa of two raters' labels on the same items (NaN when the expected agreement is 1)."""
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    if len(a) != len(b):
        raise ValueError(f"two raters must label the same items ({len(a)} vs {len(b)} labels)")
    if len(a) == 0:
        return float("nan")
    cats = list(labels) if labels is not None else sorted(set(a) | set(b), key=str)
    po = float(np.mean(a == b))
    pe = float(sum(np.mean(a == c) * np.mean(b == c) for c in cats))
    return float("nan") if pe >= 1 else (po - pe) / (1 - pe)


def agreement_intervals(df: pd.DataFrame, a: str, b: str, cluster: str | None = None, n_boot: int = 2000,
                        seed: int = 0, alpha: float = 0.05) -> dict:
    """Agreement (share of items with equal labels in columns ``a`` and ``b``) and Cohen's kappa, each with a
    percentile bootstrap interval resampling ``cluster`` (items when None)."""
    d = df[[a, b] + ([cluster] if cluster else [])].dropna(subset=[a, b]).reset_index(drop=True)
    codes = pd.factorize(d[cluster] if cluster else pd.Series(np.arange(len(d))), sort=True)[0]
    g = int(codes.max() + 1) if len(d) else 0
    x, y = d[a].to_numpy(object), d[b].to_numpy(object)
    est_agree = float(np.mean(x == y)) if len(d) else np.nan
    est_kappa = cohen_kappa(x, y)
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(codes == c) for c in range(g)]
    reps = []
    for _ in range(n_boot if g > 1 else 0):
        idx = np.concatenate([members[c] for c in rng.integers(0, g, size=g)])
        reps.append((np.mean(x[idx] == y[idx]), cohen_kappa(x[idx], y[idx])))
    reps = np.array(reps, dtype=float).reshape(-1, 2)
    def q(col):                   # resamples of one value (e.g. agreement on every item): no interval
        ok = reps[:, col][np.isfinite(reps[:, col])] if len(reps) else reps[:0, 0]
        return np.quantile(ok, [alpha / 2, 1 - alpha / 2]) if len(ok) and np.ptp(ok) > 0 else (np.nan, np.nan)
    (alo, ahi), (klo, khi) = q(0), q(1)
    flat = len(reps) and not np.isfinite([alo, klo]).all()
    how = f"percentile bootstrap over {cluster or 'items'} ({n_boot} resamples)"
    return {"n_items": len(d), "n_clusters": g, "agreement": est_agree, "agreement_ci_low": float(alo),
            "agreement_ci_high": float(ahi), "kappa": est_kappa, "kappa_ci_low": float(klo),
            "kappa_ci_high": float(khi),
            "ci_method": how + ("; no interval where every resample gives one value" if flat else "")}


def ppi_mean(y: Sequence[float], yhat: Sequence[float], yhat_unlabeled: Sequence[float],
             alpha: float = 0.05) -> dict:
    """Prediction-powered mean and interval through ``ppi_py`` (classic PPI, ``lam=1``), beside the naive mean of
    the gold labels alone and the (biased) mean of the predictions on every item."""
    import ppi_py

    y, yhat, yu = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_unlabeled))
    if len(y) < 2 or len(yu) < 2:
        raise ValueError(f"PPI needs at least 2 labelled and 2 unlabelled items (got {len(y)} and {len(yu)})")
    est = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, yu, lam=1))[0])
    lo, hi = (float(np.ravel(v)[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yu, alpha=alpha, lam=1))
    return {"estimate": est, "ci_low": lo, "ci_high": hi, "n_labeled": len(y), "n_unlabeled": len(yu),
            "gold_mean": float(y.mean()), "prediction_mean": float(np.concatenate([yhat, yu]).mean()),
            "ci_method": "prediction-powered inference, classic (lam = 1), normal interval (ppi_py)"}
