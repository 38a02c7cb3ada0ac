"""The adjustments: the graphical procedure that decides the plan's confirmatory claims, and statsmodels'
``multipletests`` for one family; which family a test belongs to, and at which level, is the analysis plan's
(:mod:`biaslab.plan`, applied by :mod:`biaslab.stats.verdict`).

* **Graphical multiple testing** (Bretz, Maurer, Brannath & Posch 2009, "A graphical approach to sequentially
  rejective multiple test procedures", Stat Med 28:586-604): :func:`graphical` runs their sequentially rejective
  weighted-Bonferroni procedure (Algorithm 1) and computes adjusted p-values (the algorithm of the gMCP package);
  family-wise error rate under any dependence between the tests. :func:`expand_graph` turns a plan's claim-level
  graph into the graph over a family's claim instances; :func:`holm_graph` is Holm (1979) as a graph (equal weights,
  complete graph with equal transitions).
* **Benjamini-Hochberg** (1995; ``method="fdr_bh"``) controls the false discovery rate (independent or positively
  dependent tests): shown beside exploratory rows as a screen, never as a decision. ``method="holm"`` is Holm within
  one family.

NaN p-values (tests that could not be run) stay NaN and do not count towards the family size.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from statsmodels.stats.multitest import multipletests

METHODS = {"holm": "Holm (FWER)", "fdr_bh": "Benjamini-Hochberg (FDR)"}
#: relative tolerance of a comparison of a p-value or a required level with a level (weights are sums of products)
_TOL = 1e-12


def adjust(p: Sequence[float], method: str = "holm") -> np.ndarray:
    """Adjusted p-values for one family; NaN entries are left out of the family and returned as NaN."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, not {method!r}")
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=method)[1]
    return out


def remove(w: np.ndarray, g: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
    """The graph after hypothesis ``j`` leaves it (Bretz et al. 2009, Algorithm 1, step 2): its weight is passed on
    along its edges, ``w_l + w_j g_jl``, and the edges are rewired around it, ``g_lk = (g_lk + g_lj g_jk) /
    (1 - g_lj g_jl)`` (0 where the denominator is 0, and on the diagonal). ``j``'s own weight and edges become 0.
    The same update removes a rejected hypothesis and one that is not in the graph at all."""
    w, g = np.asarray(w, dtype=float).copy(), np.asarray(g, dtype=float)
    w = w + w[j] * g[j]
    denom = 1.0 - g[:, j] * g[j, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        new = np.where(denom[:, None] > _TOL, (g + np.outer(g[:, j], g[j, :])) / denom[:, None], 0.0)
    np.fill_diagonal(new, 0.0)
    new[j, :], new[:, j], w[j] = 0.0, 0.0, 0.0
    return w, new


def graphical(p: Sequence[float], weights: Sequence[float], transitions, alpha: float,
              min_level: Sequence[float] | None = None) -> dict[str, np.ndarray]:
    """The sequentially rejective graphical procedure of Bretz et al. (2009) at family-wise level ``alpha``.

    ``p``: one p-value per hypothesis (finite: a hypothesis without a test is not in the graph, see :func:`remove`);
    ``weights``: the initial weights (>= 0, summing to at most 1; hypothesis j is first tested at ``w_j alpha``);
    ``transitions``: the matrix G (``g_jk`` the share of j's level that goes to k once j is rejected; >= 0, rows
    summing to at most 1, zero diagonal). While some hypothesis has ``p_j <= w_j alpha``, one is rejected and
    removed (:func:`remove`); the final set does not depend on which is taken first.

    ``min_level`` (optional, per hypothesis): a hypothesis may be rejected only while its level ``w_j alpha`` is at
    least this (the plan's rule that a test is decided only where it has 80 % power for its smallest effect of
    interest); one below it is not rejected, so its level is not passed on. Not rejecting is always allowed, so the
    procedure stays a shortcut of the closed weighted-Bonferroni test and controls the family-wise error rate.

    Returns ``rejected``; ``level``, the level each hypothesis was tested at (at its rejection, else when the
    procedure stopped; 0: never reached); and ``p_adjusted``, the smallest ``alpha`` at which it would be rejected
    (the gMCP algorithm: repeatedly take the smallest ``p_j / w_j``, keep the running maximum, remove it; with
    ``min_level`` a hypothesis qualifies only while ``w_j >= min_level_j / alpha``), capped at 1, so that
    ``p_adjusted <= alpha`` exactly when rejected."""
    p = np.asarray(p, dtype=float)
    w0 = np.asarray(weights, dtype=float)
    g0 = np.asarray(transitions, dtype=float).reshape(len(p), len(p))
    if not np.all(np.isfinite(p)):
        raise ValueError("graphical: every p must be finite (a hypothesis without a test is not in the graph)")
    if (w0 < -_TOL).any() or w0.sum() > 1 + 1e-9 or (g0 < -_TOL).any() or (g0.sum(axis=1) > 1 + 1e-9).any() \
            or np.abs(np.diag(g0)).max(initial=0) > _TOL:
        raise ValueError("graphical: weights must be >= 0 summing to <= 1, transitions >= 0 with rows summing to "
                         "<= 1 and a zero diagonal")
    need = np.zeros(len(p)) if min_level is None else np.nan_to_num(np.asarray(min_level, float), nan=0.0)
    share = need / alpha                                    # a level below min_level is a weight below this share
    if len(p) == 1:                                         # one hypothesis: tested at w alpha, nothing to pass on
        ok1 = bool(w0[0] > 0 and w0[0] >= share[0] * (1 - _TOL))
        return {"rejected": np.array([ok1 and p[0] <= w0[0] * alpha * (1 + _TOL)]), "level": w0 * alpha,
                "p_adjusted": np.array([min(1.0, p[0] / w0[0]) if ok1 else 1.0])}

    def ok(w):
        return w >= share * (1 - _TOL)

    # the procedure at alpha
    w, g = w0.copy(), g0.copy()
    live = np.ones(len(p), dtype=bool)
    rejected = np.zeros(len(p), dtype=bool)
    level = np.zeros(len(p))
    while True:
        can = live & (p <= w * alpha * (1 + _TOL)) & ok(w) & (w > 0)
        if not can.any():
            break
        j = int(np.flatnonzero(can)[np.argmin((p / np.where(w > 0, w, np.inf))[can])])
        level[j], rejected[j], live[j] = w[j] * alpha, True, False
        w, g = remove(w, g, j)
    level[live] = w[live] * alpha
    # adjusted p-values: the smallest alpha at which each hypothesis is rejected
    w, g = w0.copy(), g0.copy()
    live = np.ones(len(p), dtype=bool)
    adj = np.ones(len(p))
    running = 0.0
    while live.any():
        with np.errstate(divide="ignore"):
            ratio = np.where(live & ok(w) & (w > 0), p / np.where(w > 0, w, 1.0), np.inf)
        j = int(np.argmin(ratio))
        if not np.isfinite(ratio[j]):
            break                                          # the rest can never be rejected: adjusted p 1
        running = max(running, min(ratio[j], 1.0))
        adj[j], live[j] = running, False
        w, g = remove(w, g, j)
    return {"rejected": rejected, "level": level, "p_adjusted": adj}


def holm_graph(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Holm's (1979) procedure as a graph (Bretz et al. 2009, section 2): weights ``1/m``, every edge ``1/(m-1)``."""
    w = np.full(m, 1.0 / m) if m else np.zeros(0)
    g = np.full((m, m), 1.0 / (m - 1)) if m > 1 else np.zeros((m, m))
    np.fill_diagonal(g, 0.0)
    return w, g


def expand_graph(claims: Sequence[str], weight: Mapping[str, float],
                 then: Mapping[str, Mapping[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """The graph over one family's claim instances from the plan's claim-level graph (a pure function).

    ``claims``: the claim of each instance in the graph (the instances the family decides: descriptive and
    untested ones are not passed); ``weight``: each claim's initial share of the family's level; ``then``: per
    claim, ``{other claim: fraction}`` of a rejected instance's level that goes to that claim.

    1. A claim without an instance here leaves the claim graph by Bretz et al.'s update (:func:`remove`): its
       weight and its edges pass on to the claims it points to.
    2. A claim's weight is split equally over its instances: ``w_i = W_c / k_c``.
    3. A rejected instance of claim c passes ``then[c][d] / k_d`` of its level to each instance of claim d, and
       what ``then`` does not send elsewhere, ``1 - sum_d then[c][d]``, to c's other instances, equally.

    One claim with k instances and no ``then`` is Holm over the k (:func:`holm_graph`)."""
    order = list(dict.fromkeys(weight))                    # every claim of the notebook, plan order
    for c in claims:
        if c not in weight:
            raise KeyError(f"expand_graph: claim {c!r} has no weight in the graph")
    idx = {c: i for i, c in enumerate(order)}
    W = np.array([float(weight[c]) for c in order])
    T = np.zeros((len(order), len(order)))
    for c, targets in then.items():
        for d, f in (targets or {}).items():
            T[idx[c], idx[d]] = float(f)
    counts = {c: sum(x == c for x in claims) for c in order}
    for c in order:                                        # step 1: claims without an instance leave the graph
        if not counts[c]:
            W, T = remove(W, T, idx[c])
    n = len(claims)
    w = np.array([W[idx[c]] / counts[c] for c in claims])
    g = np.zeros((n, n))
    for a, ca in enumerate(claims):
        rest = max(0.0, 1.0 - T[idx[ca]].sum())
        for b, cb in enumerate(claims):
            if a != b:
                g[a, b] = rest / (counts[ca] - 1) if cb == ca else T[idx[ca], idx[cb]] / counts[cb]
    return w, g
