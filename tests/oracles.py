"""Reference implementations the tests compare the library with: the slow or written-out forms of what the library
computes another way (a cluster bootstrap by resampling data frames, PPI's closed form, BERTScore pair by pair), and
the textbook formulas an MDE or power statement is checked against. Test code, not library code: nothing in lib/ uses
them."""

from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from biaslab.report import html
from biaslab.stats import diversity, power


# the plan's planning designs, re-derived: each scale's SD of one unit and CrowS-Pairs' stratified design effect
#: Standard error of one unit on each planning scale, from the scale alone (no data): a share tested against 0.5 has
#: variance p(1 - p) <= 0.25; a paired difference of two shares at most 0.25 + 0.25 (a positive correlation between
#: the two models' answers, the usual case, only lowers it); a mean in SD units has SD 1 (a standardized MDE).
PLANNING_SD = {"share": 0.5, "share_difference": math.sqrt(0.5), "standardized": 1.0}


def kish_deff(population: "pd.Series | np.ndarray", sample: "pd.Series | np.ndarray") -> float:
    """Kish's (1965) design effect of unequal weights, ``n sum(w_h^2 n_h) / (sum w_h n_h)^2`` with stratum weight
    ``w_h = N_h / n_h`` (``population`` N_h and ``sample`` n_h per stratum): the variance inflation a stratified
    sample weighted back to its population pays for unequal sampling fractions (1 for proportional allocation)."""
    N, n = np.asarray(population, dtype=float), np.asarray(sample, dtype=float)
    keep = n > 0
    w, n = N[keep] / n[keep], n[keep]
    return float(n.sum() * (w ** 2 * n).sum() / (w * n).sum() ** 2)


# was lib/biaslab/stats/intervals.py (the tests' design effect and "the old effective-n interval")
def design_effect(y, clusters) -> float:
    """Kish's design effect of the mean of ``y``: cluster-robust variance over naive variance.

    ``V_naive = sum (y_i - ybar)^2 / n^2``; ``V_cluster = sum_g (sum_{i in g} (y_i - ybar))^2 / n^2`` (the
    Liang-Zeger sandwich for an intercept-only model, without small-sample factor). Returns NaN when ``y`` is
    constant (both variances 0). Cameron & Miller 2015, eq. (6); Miller 2024 §2.2.
    """
    y = np.asarray(y, dtype=float)
    codes = pd.factorize(np.asarray(clusters))[0]
    e = y - y.mean()
    v_naive = np.sum(e ** 2)
    v_cl = np.sum(np.bincount(codes, weights=e) ** 2)
    return float(v_cl / v_naive) if v_naive > 0 else float("nan")


# was lib/biaslab/stats/intervals.py
def cluster_bootstrap(df: pd.DataFrame, statistic: Callable[[pd.DataFrame], float], cluster: str,
                      n_boot: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Percentile cluster bootstrap of any scalar ``statistic(df)`` (e.g. a deviation metric, a difference of two
    models' metrics on the same resampled templates: resampling clusters once for both models keeps the pairing).

    Returns estimate, se (bootstrap SD), ci_low, ci_high, n_clusters, n_boot (finite replicates), ci_method.
    """
    rng = np.random.default_rng(seed)
    est = float(statistic(df))
    reps = np.array([statistic(resample_clusters(df, cluster, rng)) for _ in range(n_boot)], dtype=float)
    reps = reps[np.isfinite(reps)]
    lo, hi = (np.quantile(reps, [alpha / 2, 1 - alpha / 2]) if reps.size else (np.nan, np.nan))
    return {"estimate": est, "se": float(reps.std(ddof=1)) if reps.size > 1 else np.nan, "ci_low": float(lo),
            "ci_high": float(hi), "n_clusters": int(df[cluster].nunique()), "n_boot": int(reps.size),
            "ci_method": f"cluster bootstrap percentile ({cluster}, {n_boot} resamples)"}


# was lib/biaslab/stats/intervals.py
def bootstrap_rate(y, clusters, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Cluster-bootstrap replicates of the mean of ``y`` (ratio of resampled cluster sums to cluster sizes)."""
    y = np.asarray(y, dtype=float)
    codes = pd.factorize(np.asarray(clusters))[0]
    s = np.bincount(codes, weights=y)
    m = np.bincount(codes).astype(float)
    g = len(s)                          # (n_boot x G) draws of each cluster in a resample of G with replacement
    w = np.random.default_rng(seed).multinomial(g, np.full(g, 1.0 / g), size=n_boot).astype(float)
    return (w @ s) / (w @ m)


# was lib/biaslab/stats/power.py
def power_proportion(n: float, p1: float, p0: float = 0.5, alpha: float = power.ALPHA, deff: float = 1.0) -> float:
    """Power of the one-sample test of p0 at true p1 (normal approximation on Cohen's h)."""
    return float(NormalIndPower().power(effect_size=proportion_effectsize(p1, p0), nobs1=n / max(deff, 1.0),
                                        alpha=alpha, ratio=0))


# was lib/biaslab/stats/power.py
def mde_two_proportions(n1: float, n2: float, p: float, alpha: float = power.ALPHA, power_: float = power.POWER,
                        deff: float = 1.0) -> float:
    """Minimum detectable increase of a rate above a base rate ``p`` when comparing n1 and n2 units (two-sided
    two-sample test on Cohen's h, effective sizes ``n / deff``)."""
    n1e, n2e = n1 / max(deff, 1.0), n2 / max(deff, 1.0)
    if min(n1e, n2e) < 2:
        return float("nan")
    h = power._scalar(NormalIndPower().solve_power(effect_size=None, nobs1=n1e, alpha=alpha, power=power_,
                                             ratio=n2e / n1e))
    return power._p_from_h(p, h) - p


# was lib/biaslab/stats/agreement.py
def ppi_mean_closed_form(y: Sequence[float], yhat: Sequence[float], yhat_unlabeled: Sequence[float],
                         alpha: float = 0.05) -> dict:
    """Classic PPI for a mean written out (Angelopoulos et al. 2023): estimate, se, ci_low, ci_high."""
    y, yhat, yu = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_unlabeled))
    rect = yhat - y
    est = float(yu.mean() - rect.mean())
    se = float(np.sqrt(yu.var() / len(yu) + rect.var() / len(y)))      # population variances, as ppi_py uses
    z = stats.norm.ppf(1 - alpha / 2)
    return {"estimate": est, "se": se, "ci_low": float(est - z * se), "ci_high": float(est + z * se)}


# was lib/biaslab/stats/diversity.py
def bertscore_f1(a: np.ndarray, b: np.ndarray) -> float:
    """BERTScore F1 of two texts from their token embeddings (rows = tokens; special tokens already removed):
    precision = mean over ``a``'s tokens of the best cosine with a token of ``b``, recall the reverse,
    F1 = 2PR / (P + R) (Zhang et al., 2020, eq. 1-3, without idf weights)."""
    a, b = diversity._unit(a), diversity._unit(b)
    if len(a) == 0 or len(b) == 0:
        return np.nan
    sim = a @ b.T
    p = sim.max(axis=1).mean()
    r = sim.max(axis=0).mean()
    return float(2 * p * r / (p + r)) if (p + r) != 0 else 0.0


#: TeX math in a notebook's text (was lib/biaslab/report/html.py)
MATH = re.compile(r"\$[^$\s][^$]*\$|\\\(|\\\[|\\begin\{")


# was lib/biaslab/report/html.py
def has_math(nb) -> bool:
    """Whether any markdown cell or markdown output holds TeX math."""
    texts = [html._text(c.source) for c in nb.cells if c.cell_type == "markdown"]
    texts += [html._text(o["data"]["text/markdown"]) for c in nb.cells for o in c.get("outputs", [])
              if "text/markdown" in o.get("data", {})]
    return any(MATH.search(t) for t in texts)


# was lib/biaslab/stats/intervals.py
def resample_clusters(df: pd.DataFrame, cluster: str, rng: np.random.Generator) -> pd.DataFrame:
    """One cluster-bootstrap resample of ``df``: G clusters drawn with replacement, all their rows kept. A cluster
    drawn twice appears twice, with the copy's cluster id suffixed (``#1``) so downstream groupings stay apart."""
    groups = df.groupby(cluster, sort=True, observed=True).indices
    keys = list(groups)
    pick = rng.integers(0, len(keys), size=len(keys))
    seen: dict[int, int] = {}
    pieces = []
    for j in pick:
        c = seen.get(j, 0)
        seen[j] = c + 1
        piece = df.iloc[groups[keys[j]]]
        if c:
            piece = piece.assign(**{cluster: piece[cluster].astype(str) + f"#{c}"})
        pieces.append(piece)
    return pd.concat(pieces, ignore_index=True)


# MBBQ, written from the paper's repository (Veranep/MBBQ ``mbbq.py``: the stereotyped groups' words, the target
# answer) and BBQ's polarity rule (Parrish et al. 2022), reading the released jsonl files directly
MBBQ_F = ("girl", "woman", "vrouw", "meisje", "kız", "kadın", "chica", "mujer", "maestra", "F")
MBBQ_M = ("boy", "man", "jongen", "erkek çocuk", "adam", "chico", "hombre", "maestro", "M")


def mbbq_file(raw_dir, category: str, language: str, control: bool) -> dict:
    """``example_id`` -> row of one released MBBQ file."""
    import json
    from pathlib import Path
    path = Path(raw_dir) / "Veranep" / "MBBQ" / "data" / f"{category}{'_control' if control else ''}_{language}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {int(r["example_id"]): r for r in rows}


def mbbq_role_of_text(row: dict, text: str) -> str:
    """The role of the option whose text is ``text`` in a released row: ``unknown``; ``biased`` (in a negative
    question the person of a stereotyped group, in a non-negative one the other person); ``counter``."""
    groups = set(row["additional_metadata"]["stereotyped_groups"])
    groups = (groups | set(MBBQ_F) if "F" in groups else groups) | (set(MBBQ_M) if "M" in groups else set())
    groups |= {"lowSES"} if "low SES" in groups else set()
    (k,) = [k for k in ("ans0", "ans1", "ans2") if row[k] == text]
    tag = row["answer_info"][k][1]
    if tag == "unknown":
        return "unknown"
    target = tag in groups
    return "biased" if target == (row["question_polarity"] == "neg") else "counter"


def mbbq_scores(roles: list[str], correct: list[bool], consistent: list[bool], weights: list[float],
                ambiguous: bool) -> float:
    """MBBQ's bias score written out: ambiguous ``sum w (1{biased} - 1{counter}) / sum w``; disambiguated the
    weighted accuracy where the correct answer is the biased one minus where it is not."""
    w = np.asarray(weights, float)
    if ambiguous:
        s = np.array([1.0 if r == "biased" else (-1.0 if r == "counter" else 0.0) for r in roles])
        return float(np.sum(w * s) / np.sum(w))
    c, k = np.asarray(correct, float), np.asarray(consistent, bool)
    return float(np.sum((w * c)[k]) / np.sum(w[k]) - np.sum((w * c)[~k]) / np.sum(w[~k]))


def template_swap_p(df: pd.DataFrame, outcome: str, factors, a: str, b: str, template: str,
                    ideal: float = 0.0) -> float:
    """The template-swap randomization p of ``DM_a - DM_b`` written out: for every subset of the G templates (all
    2^G), the model labels ``a`` and ``b`` exchanged on that subset's rows, each model's subgroup rates recomputed
    (groupby over ``factors``) and the deviation metric (eq. 4) taken as mean |rate - ideal|; p = the share of
    subsets whose |difference| is at least the observed one."""
    import itertools

    def diff(d):
        rates = d.groupby(["model"] + list(factors))[outcome].mean()
        return float(np.mean(np.abs(rates[a] - ideal)) - np.mean(np.abs(rates[b] - ideal)))

    templates = sorted(df[template].unique())
    observed = abs(diff(df))
    hits = 0
    for k in range(len(templates) + 1):
        for chosen in itertools.combinations(templates, k):
            inside = df[template].isin(chosen)
            swapped = df.assign(model=np.where(inside, df["model"].map({a: b, b: a}), df["model"]))
            hits += abs(diff(swapped)) >= observed - 1e-12
    return hits / 2 ** len(templates)
