"""Entropy of a model's answer distribution over social groups, and what the entropy cannot show.

Implements the metric of Fernando et al., "Quantifying Bias in Agentic Large Language Models" (§II.D, Eq. 1): for
one prompt with k answer choices and the model's probabilities p_1..p_k of answering "1".."k" (renormalized over the
k labels),

    H = -sum_j p_j log p_j,      normalized entropy  H / log k  in [0, 1],

computed with ``scipy.stats.entropy``. The paper changes the logarithm's base to k ("the base was 3 ... and five for
the race and age questions"), which is the same number: log_k x = ln x / ln k. 1 means a uniform answer (the paper's
"unbiased"), 0 means all probability on one answer.

Beyond the paper (each function says how): :func:`group_preference` (the direction the entropy, symmetric in the
groups, cannot show), :func:`position_bias`, :func:`cyclic_summary` (a pure position preference cancelled),
:func:`uniformity_tests` (Rao-Scott chi-square and Dirichlet-multinomial Bayes factors of the top answers against a
uniform choice) and :func:`position_calibrated_top`. Scores come from the engine's ``label_distribution`` as
``logp_<j>`` columns (log of the next-token probability of the label "j"), one row per prompt, in prompt order.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special, stats

MAX_K = 5


# --------------------------------------------------------------------------------------------- the metric
def normalized_entropy(p, k: int | None = None, axis: int = -1):
    """Shannon entropy of ``p`` divided by log k (paper §II.D, Eq. 1 with logarithm base k).

    ``p`` is a probability vector (or an array of them along ``axis``); scipy renormalizes it to sum to one, and
    zero entries contribute 0 (0 log 0 = 0). ``k`` defaults to the length of ``p`` along ``axis``; pass it when
    ``p`` is zero-padded. Uniform gives 1, one-hot gives 0.
    """
    p = np.asarray(p, dtype=float)
    k = p.shape[axis] if k is None else k
    if k < 2:
        raise ValueError("normalized entropy needs at least two choices")
    return stats.entropy(p, base=k, axis=axis)


def tidy_scores(prompts: pd.DataFrame, dist: pd.DataFrame, model: str,
                keep: tuple[str, ...] | list[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Turn the engine's label distribution into a per-prompt table and a long per-(prompt, position) table.

    ``prompts`` needs ``prompt_id``, ``k`` and ``choices`` (group labels in presented order, label "j" =
    ``choices[j-1]``); ``dist`` one row per prompt in the same order with ``logp_1`` .. ``logp_k`` (extra labels
    beyond a prompt's k are ignored). The distribution over a prompt's k labels is recomputed from the raw
    log-probabilities (softmax over the k labels), so one engine call with labels "1".."5" serves both k = 3 and
    k = 5 prompts. ``label_mass`` is the total next-token probability of the prompt's own k labels: what the model
    put outside them (other tokens, other numbers) is 1 - label_mass.

    Returns ``(per_prompt, long)``. per_prompt: prompt_id, model, k, label_mass, entropy, top_position, top_group,
    top_p, logp_1..logp_5, p_1..p_5 (positional; NaN beyond k). long: prompt_id, model, k, position, group, logp, p.
    Columns of ``prompts`` named in ``keep`` (e.g. ``shift`` of cyclic variants) are carried into both tables.
    """
    if len(prompts) != len(dist):
        raise ValueError(f"{len(prompts)} prompts but {len(dist)} score rows: score every prompt, in order")
    k = prompts["k"].to_numpy(int)
    kmax = int(k.max())
    missing = [f"logp_{j}" for j in range(1, kmax + 1) if f"logp_{j}" not in dist.columns]
    if missing:
        raise ValueError(f"label distribution lacks {missing}: score with labels '1'..'{kmax}'")
    L = np.full((len(k), MAX_K), -np.inf)
    L[:, :kmax] = dist[[f"logp_{j}" for j in range(1, kmax + 1)]].to_numpy(float)
    valid = np.arange(MAX_K)[None, :] < k[:, None]
    L = np.where(valid, L, -np.inf)
    label_mass = np.exp(special.logsumexp(L, axis=1))
    P = special.softmax(L, axis=1)                      # exp(-inf) = 0 outside the prompt's k labels
    H = stats.entropy(P, axis=1) / np.log(k)            # = normalized_entropy row by row
    top = P.argmax(axis=1)
    choices = prompts["choices"].tolist()
    per = pd.DataFrame({
        "prompt_id": prompts["prompt_id"].to_numpy(), "model": model, "k": k, "label_mass": label_mass,
        "entropy": H, "top_position": top + 1, "top_group": [c[t] for c, t in zip(choices, top)],
        "top_p": P.max(axis=1),
    })
    for c in keep:
        per.insert(1, c, prompts[c].to_numpy())
    for name, x in (("logp", L), ("p", P)):
        for j in range(MAX_K):
            per[f"{name}_{j + 1}"] = np.where(valid[:, j], x[:, j], np.nan)
    rows = np.nonzero(valid)
    long = pd.DataFrame({
        "prompt_id": per["prompt_id"].to_numpy()[rows[0]], "model": model, "k": k[rows[0]],
        "position": rows[1] + 1, "group": [choices[i][j] for i, j in zip(*rows)],
        "logp": L[rows], "p": P[rows],
    })
    for c in keep:
        long.insert(1, c, prompts[c].to_numpy()[rows[0]])
    return per, long


# --------------------------------------------------------------------------------------------- summaries
def _describe(x: pd.Series) -> dict:
    x = x.dropna().to_numpy(float)
    n = len(x)
    return {"n": n, "mean_entropy": x.mean() if n else np.nan, "sd": x.std(ddof=1) if n > 1 else np.nan,
            "median": np.median(x) if n else np.nan,
            "q25": np.quantile(x, 0.25) if n else np.nan, "q75": np.quantile(x, 0.75) if n else np.nan}


def _intervals(df: pd.DataFrame, value: str, by: list[str], cluster: str | None, seed: int) -> pd.DataFrame:
    """``ci95_low``/``ci95_high``/``design_effect``/``ci_method`` of the mean ``value`` per ``by`` cell (columns
    ``by`` + those four) from :func:`biaslab.stats.intervals.mean_intervals`: clustered on ``cluster`` (prompts of one
    scenario share their wording), or a t interval treating prompts as independent when it is None."""
    from .intervals import mean_intervals
    ci = mean_intervals(df, value, cluster, by=by, seed=seed)
    return ci[by + ["ci_low", "ci_high", "design_effect", "ci_method"]].rename(
        columns={"ci_low": "ci95_low", "ci_high": "ci95_high"})


def entropy_by_model(per_prompt: pd.DataFrame, cluster: str | None = None, seed: int = 0) -> pd.DataFrame:
    """Per model: n, mean normalized entropy, sd, median (the paper's §III numbers), quartiles, the share of prompts
    below 0.5, the mean probability mass on the answer labels, and a 95 % interval for the mean: clustered on
    ``cluster`` (a column of ``per_prompt``, e.g. ``scenario_id``) or, without one, a t interval that treats the
    prompts as independent (``ci_method`` says which)."""
    out = []
    for m, g in per_prompt.groupby("model", sort=False):
        d = {"model": m, **_describe(g["entropy"])}
        d["share_below_half"] = float((g["entropy"] < 0.5).mean())
        d["mean_label_mass"] = float(g["label_mass"].mean())
        out.append(d)
    return pd.DataFrame(out).merge(_intervals(per_prompt, "entropy", ["model"], cluster, seed), on="model",
                                   how="left")


def level_test(df: pd.DataFrame, factor: str, cluster: str | None) -> dict:
    """Do the levels of ``factor`` share one mean entropy? Wald F test of the level contrasts in an OLS of the
    entropy on the factor, with cluster-robust (CR1) covariance on ``cluster`` and t(G - 1)-based F(q, G - 1)
    reference (statsmodels ``cov_type="cluster"``; Cameron & Miller 2015 §VI); without a cluster, heteroskedasticity-
    robust (HC1). Returns ``wald_f``, ``wald_df1``, ``wald_df2``, ``wald_p`` (NaN when untestable: one level, a
    constant outcome, or fewer clusters than level contrasts + 1)."""
    import statsmodels.formula.api as smf
    d = df[["entropy", factor] + ([cluster] if cluster else [])].dropna()
    levels = d[factor].nunique()
    nan = {"wald_f": np.nan, "wald_df1": np.nan, "wald_df2": np.nan, "wald_p": np.nan}
    if levels < 2 or d["entropy"].nunique() < 2:
        return nan
    codes = pd.factorize(d[cluster])[0] if cluster else None
    if cluster and len(np.unique(codes)) < levels + 1:
        return nan
    model = smf.ols("entropy ~ C(_f)", data=d.assign(_f=d[factor].astype(str)))
    fit = (model.fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True) if cluster
           else model.fit(cov_type="HC1", use_t=True))
    names = [c for c in fit.params.index if c != "Intercept"]
    test = fit.f_test(np.eye(len(fit.params))[[list(fit.params.index).index(c) for c in names]])
    return {"wald_f": float(np.squeeze(test.fvalue)), "wald_df1": float(test.df_num),
            "wald_df2": float(test.df_denom), "wald_p": float(test.pvalue)}


def entropy_breakdown(per_prompt: pd.DataFrame, factors: list[str] | dict[str, list], cluster: str | None = None,
                      seed: int = 0) -> pd.DataFrame:
    """Mean / sd / median / 95 % CI of the normalized entropy per model x factor x level, and two tests of whether
    a factor's levels share one distribution (per model and factor; beyond the paper, which reports only overall
    means): :func:`level_test`, a cluster-robust Wald test on ``cluster`` (the one to read: prompts of one scenario
    are not independent, and a factor that is constant within a scenario has only as many independent units as
    scenarios), and the Kruskal-Wallis test over prompts (``kruskal_h``, ``kruskal_p``), kept for comparison with
    analyses that treat every prompt as independent. Intervals as in :func:`entropy_by_model`.
    ``per_prompt`` must carry the factor columns (and ``cluster``); ``factors``: names, or a dict name -> levels in
    the order the rows should follow (e.g. the factor spec's)."""
    order = factors if isinstance(factors, dict) else {f: None for f in factors}
    cis = {f: _intervals(per_prompt, "entropy", ["model", f], cluster, seed).set_index(["model", f])
           for f in order}
    out = []
    for m, g in per_prompt.groupby("model", sort=False):
        for f, levels in order.items():
            groups = [(lvl, gg["entropy"]) for lvl, gg in g.groupby(f, sort=False, observed=True)]
            if levels is not None:
                rank = {v: i for i, v in enumerate(levels)}
                groups.sort(key=lambda t: rank.get(t[0], len(rank)))
            vals = [x.dropna().to_numpy(float) for _, x in groups]
            testable = len(vals) > 1 and all(len(v) > 0 for v in vals) and np.ptp(np.concatenate(vals)) > 0
            kw = stats.kruskal(*vals) if testable else None
            h, p = (float(kw.statistic), float(kw.pvalue)) if kw else (np.nan, np.nan)
            wald = level_test(g, f, cluster)
            for lvl, x in groups:
                out.append({"model": m, "factor": f, "level": lvl, **_describe(x), **wald, "kruskal_h": h,
                            "kruskal_p": p, **cis[f].loc[(m, lvl)].to_dict()})
    return pd.DataFrame(out)


def group_preference(long: pd.DataFrame, prompts: pd.DataFrame,
                     order: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Mean probability per group for positive vs negative questions (beyond the paper).

    For each model, class type and group: the mean renormalized probability of that group over the positive and
    over the negative prompts, the uniform reference 1/k, their difference (positive - negative) and a paired
    Wilcoxon signed-rank test over matched prompts (the same scenario and class type asked in both polarities),
    with Benjamini-Hochberg q-values across all groups of a model. A group favoured for good outcomes and named
    for bad ones has a positive difference; entropy, symmetric in the groups, cannot show this direction.
    ``order`` (class type -> groups, e.g. Table I's order) orders the rows within each class type.

    Intervals (beyond the paper): each mean gets a 95 % interval from
    :func:`biaslab.stats.intervals.mean_intervals` clustered on the scenario (cluster-robust t(G - 1), or the wild
    cluster bootstrap with fewer than 30 scenarios): ``pos_ci_low/high``, ``neg_ci_low/high``, and ``diff_ci_low/high`` for the paired
    difference; the method is in ``ci_method``.
    """
    from .intervals import mean_intervals
    from .multiplicity import adjust
    d = long.merge(prompts[["prompt_id", "scenario_id", "class_type", "polarity"]], on="prompt_id")
    out = []
    for (m, ct, grp), g in d.groupby(["model", "class_type", "group"], sort=False):
        k = int(g["k"].iloc[0])
        pos = g[g.polarity == "positive"].set_index("scenario_id")["p"]
        neg = g[g.polarity == "negative"].set_index("scenario_id")["p"]
        both = pos.index.intersection(neg.index)
        diff = (pos[both] - neg[both]).to_numpy(float)
        wp = float(stats.wilcoxon(diff).pvalue) if len(diff) > 0 and np.any(np.abs(diff) > 1e-12) else np.nan
        ci = {}
        for tag, ser in (("pos", pos), ("neg", neg), ("diff", pd.Series(diff, index=both))):
            r = mean_intervals(pd.DataFrame({"v": ser.to_numpy(float), "scenario_id": ser.index}), "v",
                               "scenario_id", seed=0).iloc[0]
            ci[f"{tag}_ci_low"], ci[f"{tag}_ci_high"] = r["ci_low"], r["ci_high"]
            ci["ci_method"] = r["ci_method"]
        out.append({"model": m, "class_type": ct, "group": grp, "k": k, "uniform": 1 / k,
                    "n_positive": len(pos), "mean_p_positive": pos.mean(),
                    "n_negative": len(neg), "mean_p_negative": neg.mean(),
                    "mean_p_all": g["p"].mean(), "n_pairs": len(both),
                    "diff_pos_minus_neg": diff.mean() if len(diff) else np.nan, "wilcoxon_p": wp, **ci})
    res = pd.DataFrame(out)
    if order:
        rank = {(ct, g): 100 * c + i for c, (ct, gs) in enumerate(order.items()) for i, g in enumerate(gs)}
        res["_r"] = [rank.get((c, g), len(rank)) for c, g in zip(res["class_type"], res["group"])]
        res = res.sort_values(["model", "_r"], key=lambda s: s.map({m: i for i, m in enumerate(
            dict.fromkeys(res["model"]))}) if s.name == "model" else s, kind="stable").drop(columns="_r")
        res = res.reset_index(drop=True)
    res["bh_q"] = res.groupby("model")["wilcoxon_p"].transform(lambda p: adjust(p.to_numpy(float), "fdr_bh"))
    return res


def position_bias(long: pd.DataFrame, cluster: str | None = None, seed: int = 0) -> pd.DataFrame:
    """Mean probability by answer position, whatever group sits there (beyond the paper).

    Per model, number of choices k and position: n prompts, mean and sd of the renormalized probability, a 95 %
    interval (clustered on ``cluster``, a column of ``long`` such as ``scenario_id``, else a t interval over prompts;
    ``ci_method`` says which), the uniform reference 1/k and the ratio mean / (1/k). Because every prompt's answer
    order is an independent random permutation, position is independent of group by design, so a departure from 1/k
    here is a preference for a position (or a label digit), not for a group.
    """
    out = []
    for (m, k, pos), g in long.groupby(["model", "k", "position"], sort=False):
        d = _describe(g["p"])
        out.append({"model": m, "k": int(k), "position": int(pos), "n": d["n"], "mean_p": d["mean_entropy"],
                    "sd": d["sd"], "uniform": 1 / k, "ratio_to_uniform": d["mean_entropy"] * k})
    key = ["model", "k", "position"]
    ci = _intervals(long, "p", key, cluster, seed).astype({"k": int, "position": int}).drop(
        columns="design_effect")
    table = pd.DataFrame(out).merge(ci, on=key, how="left")
    # models in order of appearance, then k and position
    return table.sort_values(["k", "position"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------- tests against uniform
#: symmetric Dirichlet(a, ..., a) priors over which the uniformity Bayes factor's range is reported: a = 0.5
#: (Jeffreys), 1 (flat on the simplex: the reported prior) and 2, 10 (concentrated near uniform: the small departures
#: a bias test looks for; a = 10 over 5 choices puts most prior mass within 0.1 of 1/k)
DIRICHLET_PRIORS = (0.5, 1.0, 2.0, 10.0)


def dirichlet_multinomial_log10_bf(counts, alpha: float = 1.0, deff: float = 1.0) -> float:
    """log10 Bayes factor of H1: p ~ Dirichlet(alpha, ..., alpha) against H0: p uniform, for multinomial counts.

    ``log BF10 = log B(x + alpha) - log B(alpha) + n log k`` (B the multivariate Beta function; the multinomial
    coefficient cancels; = ``scipy.stats.dirichlet_multinomial.logpmf - multinomial.logpmf`` for integer counts,
    checked in the tests). With a design effect ``deff`` > 1 (prompts clustered in scenarios) the likelihood is
    tempered to the power 1/deff — a magnitude-calibrated composite likelihood (Pauli, Racugno & Ventura 2011,
    "Bayesian composite marginal likelihoods", Statistica Sinica 21) — i.e. the counts enter as x/deff (the
    effective counts of the Rao-Scott test, Rao & Scott 1981), which scipy's integer pmf does not take. alpha = 1
    puts a flat prior on the simplex. Positive values favour a non-uniform choice.
    """
    x = np.asarray(counts, dtype=float) / max(float(deff), 1.0)
    n, k = float(x.sum()), len(x)
    if n == 0:
        return np.nan
    a = np.full(k, float(alpha))
    log_b = lambda v: float(special.gammaln(v).sum() - special.gammaln(v.sum()))  # noqa: E731
    return float((log_b(x + a) - log_b(a) + n * np.log(k)) / np.log(10))


def dirichlet_prior_range(counts, alpha: float = 1.0, deff: float = 1.0, priors=DIRICHLET_PRIORS) -> dict:
    """BF10 of :func:`dirichlet_multinomial_log10_bf` at the reported ``alpha`` and its range over ``priors``
    (``alpha`` included): log10_bf10, bf10, bf_prior, bf10_min, bf10_max, bf_prior_range, evidence (over the range,
    :func:`biaslab.stats.hypothesis.evidence_over_range`)."""
    from .hypothesis import evidence_over_range
    grid = sorted(set(float(a) for a in priors) | {float(alpha)})
    l10 = [dirichlet_multinomial_log10_bf(counts, a, deff) for a in grid]
    lo, hi = (10 ** min(l10), 10 ** max(l10)) if np.all(np.isfinite(l10)) else (np.nan, np.nan)
    at = dirichlet_multinomial_log10_bf(counts, alpha, deff)
    return {"log10_bf10": at, "bf10": 10 ** at, "bf_prior": f"Dirichlet({alpha:g}, ..., {alpha:g}) on counts / deff",
            "bf10_min": lo, "bf10_max": hi,
            "bf_prior_range": "Dirichlet(a, ..., a), a in {" + ", ".join(f"{a:g}" for a in grid) + "}",
            "evidence": evidence_over_range(lo, hi)}


def uniformity_tests(per_prompt: pd.DataFrame, prompts: pd.DataFrame, alpha: float = 1.0,
                     cluster: str | None = None, by: Sequence[str] = ("class_type", "polarity"),
                     units: Mapping[str, str] | None = None, level: float = 0.05) -> pd.DataFrame:
    """Is the model's most probable answer uniformly spread? (beyond the paper)

    Per model and cell of ``by`` (columns of ``prompts``; default class type x question polarity, since a negative
    and a positive question ask for opposite directions and pooled they measure salience, not a preference), the
    counts of the argmax answer are tested two ways (``units``, name -> column of ``per_prompt``): by **group**
    (which group the model picks; the content preference) and by **position** (which numbered slot it picks). Each
    with Pearson's chi-square goodness of fit against equal expected counts (df = k - 1) with the first-order
    Rao-Scott correction for the prompts' clustering in ``cluster`` (a column of ``prompts``; prompts of a scenario
    share its story: :func:`biaslab.stats.clustered.rao_scott_gof`, which decides; the naive chi-square is kept as
    ``p_naive``). Its effect size is Cohen's w against uniform (``cohens_w``, median-unbiased) with the noncentral-F
    interval that inverts the same test (``ci_low``/``ci_high``, 1 - 2 ``level``: the lower bound is > 0 exactly when
    ``p_value`` < ``level``), so the estimate is the tested quantity; ``cohens_w_plugin`` = sqrt(X2 / n). The
    Dirichlet-multinomial Bayes factor is on the same effective counts (counts / design effect) with its range over
    :data:`DIRICHLET_PRIORS` (:func:`dirichlet_prior_range`). A model that always answers "1" has a strongly
    non-uniform position count but, the orders being random, a near-uniform group count. ``counts`` lists every
    group's count (descriptive); ``min_expected`` < 5 flags where the chi-square approximation is rough.
    """
    from .clustered import rao_scott_gof
    units = dict(units or {"group": "top_group", "position": "top_position"})
    by = [c for c in by if c in prompts.columns or c in per_prompt.columns]       # a design without polarity
    keep = list(dict.fromkeys(["prompt_id"] + [c for c in ["choices"] + by + ([cluster] if cluster else [])
                                               if c not in per_prompt.columns]))
    d = per_prompt.merge(prompts[keep], on="prompt_id")
    out = []
    for key, g in d.groupby(["model"] + by, sort=False):
        key = dict(zip(["model"] + by, key))
        k = int(g["k"].iloc[0])
        groups = sorted(g["choices"].iloc[0])
        for unit, col in units.items():
            cats = list(range(1, k + 1)) if unit == "position" else groups
            counts = g[col].value_counts().reindex(cats, fill_value=0)
            n = int(counts.sum())
            rs = rao_scott_gof(g[col].to_numpy(), g[cluster].to_numpy() if cluster else None, cats, alpha=level)
            deff = rs["design_effect"] if np.isfinite(rs["design_effect"]) else 1.0
            out.append({**key, "unit": unit, "k": k, "n": n,
                        "counts": "; ".join(f"{c}: {v}" for c, v in counts.items()), "top": counts.idxmax(),
                        "cohens_w": rs["cohens_w"], "ci_low": rs["w_ci_low"], "ci_high": rs["w_ci_high"],
                        "ci_method": rs["w_ci_method"], "cohens_w_plugin": rs["cohens_w_plugin"], "null_value": 0.0,
                        "n_clusters": rs["n_clusters"], "chi2": rs["chi2"], "df": k - 1, "p_naive": rs["p_naive"],
                        "design_effect": rs["design_effect"], "chi2_rao_scott": rs["chi2_rao_scott"],
                        "df2": rs["df2"], "p_value": rs["p_value"], "p_method": rs["p_method"],
                        "min_expected": n / k, **dirichlet_prior_range(counts.to_numpy(), alpha, deff)})
    return pd.DataFrame(out)


def top_group_shares(per_prompt: pd.DataFrame, prompts: pd.DataFrame, cluster: str | None = None,
                     by: Sequence[str] = ("class_type", "polarity")) -> pd.DataFrame:
    """Each group's share of the model's top answers per model x ``by`` cell, with the cluster-robust
    (Korn-Graubard) interval of :func:`biaslab.stats.intervals.rate_intervals` on ``cluster`` and ``null_value`` 1/k
    (exploratory: which group a departure of :func:`uniformity_tests` comes from)."""
    from .intervals import rate_intervals
    by = [c for c in by if c in prompts.columns]
    cols = list(dict.fromkeys(["prompt_id", "choices"] + by + ([cluster] if cluster else [])))
    d = per_prompt[["model", "prompt_id", "k", "top_group"]].merge(prompts[cols], on="prompt_id")
    long = d.explode("choices").rename(columns={"choices": "group"})
    long["chosen"] = (long["top_group"] == long["group"]).astype(float)
    t = rate_intervals(long, "chosen", cluster, by=["model"] + by + ["group"])
    k = d.groupby(["model"] + by)["k"].first().rename("n_options").reset_index()
    t = t.merge(k, on=["model"] + by, how="left")
    return t.assign(null_value=1.0 / t["n_options"]).rename(columns={"rate": "share"})


def position_calibrated_top(per_prompt: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    """``per_prompt`` with ``top_group_calibrated``: each prompt's top group after dividing the model's position
    prior out of its label probabilities (the debiasing of Zheng et al. 2024, "Large language models are not robust
    multiple choice selectors", ICLR, eq. 6-7: the prior per slot estimated as the model's mean probability at that
    slot over its prompts with the same k, since the random orders make slot and group independent). A sensitivity
    analysis for the position handling of the group counts: a pure slot preference then no longer picks the
    group."""
    probs = [f"p_{j}" for j in range(1, 6) if f"p_{j}" in per_prompt.columns]
    d = per_prompt.merge(prompts[["prompt_id", "choices"]], on="prompt_id", how="left") if "choices" not in per_prompt else \
        per_prompt.copy()
    top = pd.Series(index=d.index, dtype=object)
    for (_, k), g in d.groupby(["model", "k"], sort=False):
        k = int(k)
        p = g[probs[:k]].to_numpy(float)
        prior = p.mean(axis=0)
        j = np.argmax(p / np.where(prior > 0, prior, np.nan), axis=1)
        top.loc[g.index] = [ch[i] for ch, i in zip(g["choices"], j)]
    return per_prompt.assign(top_group_calibrated=top.to_numpy())


# --------------------------------------------------------------------------------------------- cyclic permutations
def cyclic_summary(long_cyc: pd.DataFrame) -> pd.DataFrame:
    """Per prompt and model: entropy in the stored order vs after averaging over all k cyclic rotations.

    ``long_cyc`` is the long table of :func:`tidy_scores` over the rotated variants with an added ``shift``
    column (0 = the stored order). Over the k rotations each group sits once at each position, so the mean group
    distribution  p̄_g = (1/k) Σ_s p_g^(s)  is free of pure position preferences. Columns: entropy_stored (shift
    0), entropy_mean_over_shifts (mean of the k per-rotation entropies), entropy_cyclic_avg (entropy of p̄) and
    entropy_position_avg (entropy of the position distribution averaged over rotations: low when the model
    prefers a slot whatever sits in it). Jensen: entropy_cyclic_avg >= entropy_mean_over_shifts.
    """
    out = []
    for (m, pid), g in long_cyc.groupby(["model", "prompt_id"], sort=False):
        k = int(g["k"].iloc[0])
        shifts = g["shift"].nunique()
        if shifts != k:
            raise ValueError(f"{pid}: {shifts} rotations scored, expected all {k}")
        per_shift = g.groupby("shift")["p"].apply(lambda s: float(normalized_entropy(s.to_numpy(), k)))
        pbar_group = g.groupby("group")["p"].mean()
        pbar_pos = g.groupby("position")["p"].mean()
        out.append({"model": m, "prompt_id": pid, "k": k,
                    "entropy_stored": per_shift.loc[0], "entropy_mean_over_shifts": per_shift.mean(),
                    "entropy_cyclic_avg": float(normalized_entropy(pbar_group.to_numpy(), k)),
                    "entropy_position_avg": float(normalized_entropy(pbar_pos.to_numpy(), k)),
                    "top_group_cyclic": pbar_group.idxmax(), "top_p_cyclic": float(pbar_group.max())})
    return pd.DataFrame(out)


def cyclic_by_model(cyc: pd.DataFrame, cluster: str | None = None, seed: int = 0) -> pd.DataFrame:
    """Mean of each cyclic_summary entropy per model, and the gain (cyclic-averaged minus stored entropy) with the
    clustered rule of :mod:`biaslab.stats.clustered` on ``cluster`` (a column of ``cyc``, e.g. ``scenario_id``):
    CR1 standard error with t(G - 1), or the wild cluster bootstrap below 30 clusters — its interval (``ci_low``,
    ``ci_high``) and its test (``p_value``, the one the verdict reads) come from the same rule. The paired Wilcoxon
    test over prompts, which treats the prompts of a scenario as independent, is kept as ``wilcoxon_p``."""
    from .clustered import cluster_labels, cluster_name, mean_inference
    out = []
    for i, (m, g) in enumerate(cyc.groupby("model", sort=False)):
        diff = (g["entropy_cyclic_avg"] - g["entropy_stored"]).to_numpy(float)
        p = float(stats.wilcoxon(diff).pvalue) if len(diff) > 0 and np.any(np.abs(diff) > 1e-12) else np.nan
        inf = mean_inference(diff, cluster_labels(g, cluster), null=0.0, seed=seed + i,
                             name=cluster_name(cluster) if cluster else "")
        out.append({"model": m, "n": len(g), "mean_entropy_stored": g["entropy_stored"].mean(),
                    "mean_entropy_mean_over_shifts": g["entropy_mean_over_shifts"].mean(),
                    "mean_entropy_cyclic_avg": g["entropy_cyclic_avg"].mean(),
                    "mean_entropy_position_avg": g["entropy_position_avg"].mean(),
                    "mean_gain": diff.mean(), "n_clusters": inf["n_clusters"], "df": inf["df"],
                    "se_naive": inf["se_naive"], "se_cluster": inf["se"], "design_effect": inf["design_effect"],
                    "ci_low": inf["ci_low"], "ci_high": inf["ci_high"], "ci_method": inf["ci_method"],
                    "null_value": 0.0, "p_value": inf["p_value"], "p_method": inf["p_method"], "wilcoxon_p": p})
    return pd.DataFrame(out)


#: Mean normalized entropies reported in the paper (§III, Figs. 3-6) over its 1,020 prompts.
PAPER_MEANS = {"Flan": 0.602, "Vicuna": 0.961, "Llama": 0.976, "Llama 2": 0.965}
