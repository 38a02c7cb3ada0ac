"""Notebook 7's statistics: MBBQ accuracy, BBQ's bias scores and their cross-lingual contrasts, paired on the same
items and adjusted for control-set accuracy.

Input: one row per scored prompt (``biaslab.benchmarks.mbbq.respond`` merged with the prompt table and its design
columns ``stratum``/``weight`` from ``mbbq.sample``): model, language, set, category, context_condition,
correct_is_biased, template, item, weight and the 0/1 answer columns ``correct``, ``deviated``, ``chose_unknown``,
``non_unknown``.

**Estimands.** Per model x language x set (x category): accuracy; BBQ's bias scores (Parrish et al. 2022, §4)
``s_DIS = 2 n_biased / n_non_unknown - 1`` and ``s_AMB = (1 - accuracy) s_DIS``; the disambiguated accuracy gap
``acc(stereotype-consistent) - acc(inconsistent)`` (MBBQ §4: the correct answer is / is not the biased one). Pooled
over categories each is the value over *every MBBQ item*: items weighted by their design weight N_h / n_h (strata:
category x context condition), the Horvitz-Thompson form of each total.

**Inference.** Every metric is turned into per-item linearization pseudo-values whose mean is the metric
(:func:`biaslab.benchmarks.bbq.bias_score_pseudo_values` for the bias scores, :func:`gap_pseudo_values` for the gap;
Woodruff 1971, Binder 1983), and the mean gets :func:`biaslab.stats.clustered.mean_inference` clustered on the
template (category x question_index): CR1 t(G - 1), the wild cluster bootstrap with fewer than 30 templates.
A **cross-lingual contrast** (language L minus English) is the mean of the per-item differences of pseudo-values on
the items scored in both (the same items: MBBQ is parallel), clustered on templates the same way; it equals the
difference of the two metrics exactly.

**Adjusted for control-set accuracy** (:func:`adjusted_contrasts`). Per template t, ``db_t`` is the mean contrast of
its items (bias set) and ``da_t`` the difference L - English of its control items' accuracy in the same context
condition (ambiguous for the ambiguous score, disambiguated for the gap). The adjusted contrast is the intercept
``b0`` of the weighted least-squares regression ``db_t = b0 + b1 da_t`` (weights: the template's items, whose
pseudo-values carry the design weights, so that without ``da`` the intercept is the pooled contrast; HC1 standard
errors, t(G - 2)): the cross-lingual bias difference expected in a template where the model
answers the control questions equally well in both languages. It assumes the bias difference is linear in the
control-accuracy difference; without the regressor the intercept is the unadjusted contrast.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats as sps

from ...benchmarks.bbq import bias_score_pseudo_values
from ...stats.clustered import mean_inference, sign_flip_p
from ...stats.intervals import rate_intervals

CLUSTER = "template"
REFERENCE = "en"
#: metric -> the context condition it is computed on
METRICS = {"accuracy_ambig": "ambig", "accuracy_disambig": "disambig", "bias_score_ambig": "ambig",
           "bias_score_disambig": "disambig", "accuracy_gap": "disambig"}
#: the bias metrics the control-accuracy adjustment applies to
ADJUSTED = ("bias_score_ambig", "accuracy_gap")


def _a(part: pd.DataFrame) -> np.ndarray:
    """Design weights scaled to mean 1 within ``part`` (1 where the table has no weights)."""
    w = part["weight"].to_numpy(float) if "weight" in part else np.ones(len(part))
    return w / w.mean()


def gap_pseudo_values(correct, consistent, a=None) -> np.ndarray:
    """Pseudo-values of the accuracy gap ``g = m1 - m0`` (m1, m0 the weighted accuracies of the stereotype-consistent
    and -inconsistent items): ``g + n [1{c} a_i (y_i - m1) / sum_c a - 1{not c} a_i (y_i - m0) / sum_nc a]``, the
    influence value of a difference of two ratio means (Binder 1983); their mean is ``g``. NaN where an arm is empty.
    ``correct`` may carry leading axes (a calibration's replications); the items are along the last."""
    y, c = np.asarray(correct, float), np.asarray(consistent, bool)
    a = np.ones(y.shape[-1]) if a is None else np.asarray(a, float)
    n = y.shape[-1]
    if not c.any() or c.all():
        return np.full(y.shape, np.nan)
    s1, s0 = a[c].sum(), a[~c].sum()
    m1 = (a * y * c).sum(axis=-1, keepdims=True) / s1
    m0 = (a * y * ~c).sum(axis=-1, keepdims=True) / s0
    return (m1 - m0) + n * np.where(c, a * (y - m1) / s1, -a * (y - m0) / s0)


def pseudo_values(part: pd.DataFrame, metric: str) -> np.ndarray:
    """Per-row pseudo-values of ``metric`` over ``part`` (one model, language, set and context condition), design
    weighted (module docstring): BBQ's scores via :func:`~biaslab.benchmarks.bbq.bias_score_pseudo_values` with the
    totals' terms multiplied by the scaled weight (the Horvitz-Thompson form), the gap via :func:`gap_pseudo_values`."""
    a = _a(part)
    if metric.startswith("accuracy_") and metric != "accuracy_gap":
        return a * part["correct"].to_numpy(float)          # Horvitz-Thompson: mean(a y) is the weighted mean
    if metric == "accuracy_gap":
        return gap_pseudo_values(part["correct"], part["correct_is_biased"] == "yes", a)
    return bias_score_pseudo_values(a * part["deviated"], a * part["non_unknown"], a * part["correct"],
                                    ambig=metric == "bias_score_ambig")


def swap_contributions(part: pd.DataFrame) -> np.ndarray:
    """Per item of ``part`` (one model, language and set, ambiguous contexts) its term of BBQ's ambiguous score,
    ``h_i = (1 - A) a_i (2 dev_i - nu_i) / sum(a nu)`` (design weights a, weighted accuracy A): ``sum h = s_AMB``.
    Exchanging the biased and counter-biased answers (``dev -> nu - dev``) negates ``h_i`` and keeps A and
    ``sum(a nu)``, so under the null that the two are exchangeable within each template (the model cannot know the
    answer, and prefers neither group) every template's total is symmetric about 0: the exact randomization test of
    that null is the cluster sign-flip test on template totals (:func:`biaslab.stats.clustered.sign_flip_p`)."""
    return ambiguous_terms(*(part[k].to_numpy(float) for k in ("deviated", "non_unknown", "correct")), _a(part))


def ambiguous_terms(dev, nu, c, a) -> np.ndarray:
    """:func:`swap_contributions` from arrays (items along the last axis; leading axes: a calibration's
    replications of the answers): ``(1 - mean(a c)) a (2 dev - nu) / sum(a nu)``, NaN where ``sum(a nu)`` is 0."""
    dev, nu, c = (np.asarray(x, dtype=float) for x in (dev, nu, c))
    total_nu = np.sum(a * nu, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total_nu > 0, (1 - np.mean(a * c, axis=-1, keepdims=True)) * a * (2 * dev - nu) / total_nu,
                        np.nan)


def swap_test(part: pd.DataFrame) -> float:
    """p of the answer-swap randomization test of BBQ's ambiguous score over ``part`` (:func:`swap_contributions`)."""
    h = swap_contributions(part)
    if not np.isfinite(h).all():
        return float("nan")
    return float(sign_flip_p(np.bincount(pd.factorize(part[CLUSTER])[0], weights=h)))


def _with_pseudo(df: pd.DataFrame, metric: str, by: list[str]) -> pd.DataFrame:
    d = df[df["context_condition"] == METRICS[metric]].copy()
    d["pseudo"] = np.nan
    for _, part in d.groupby(by, observed=True, sort=False):
        d.loc[part.index, "pseudo"] = pseudo_values(part, metric)
    return d


def _inference(y, clusters, seed: int) -> dict:
    y = np.asarray(y, float)
    if not np.isfinite(y).all():            # a score with no non-unknown answer (or an empty gap arm) is undefined
        return {"n": int(y.size), "n_clusters": np.nan, "df": np.nan, "estimate": np.nan, "se": np.nan,
                "ci_low": np.nan, "ci_high": np.nan, "p_value": np.nan,
                "ci_method": "undefined (no non-unknown answer, or no item in one arm of the gap)"}
    r = mean_inference(y, clusters, seed=seed, name=CLUSTER)
    return {k: r[k] for k in ("n", "n_clusters", "df", "estimate", "se", "ci_low", "ci_high", "p_value", "ci_method")}


def _pooled_and_by_category(df: pd.DataFrame):
    """(category label, rows): every category pooled (``all``, design weighted), then each category."""
    yield "all", df
    for cat, part in df.groupby("category", sort=True):
        yield cat, part


def accuracy(df: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per model x language x set x category x context condition, Korn-Graubard interval clustered on the
    template (:func:`biaslab.stats.intervals.rate_intervals`; within a category x context stratum the sample is a
    simple random one, so unweighted)."""
    return rate_intervals(df, "correct", CLUSTER, by=["model", "language", "set", "category", "context_condition"])


def metric_table(df: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Each metric of :data:`METRICS` per model x language x set x category (``all``: pooled, design weighted), with
    its template-clustered interval; bias scores and the gap are tested against ``null_value`` 0, an accuracy is
    descriptive: no p, its interval shown against chance (``null_value`` 1/3, three options), as notebook 4 shows
    its position shares against 1/k. The ambiguous score also gets ``p_swap``, its answer-swap randomization test
    (:func:`swap_test`; the plan's test of ``mbbq-ambig-en``)."""
    rows = []
    for metric in METRICS:
        for cat, part in _pooled_and_by_category(df):
            d = _with_pseudo(part, metric, ["model", "language", "set"])
            for i, ((m, lang, s), g) in enumerate(d.groupby(["model", "language", "set"], sort=True)):
                r = _inference(g["pseudo"], g[CLUSTER].to_numpy(), seed + i)
                tested = metric not in ("accuracy_ambig", "accuracy_disambig")
                rows.append({"metric": metric, "model": m, "language": lang, "set": s, "category": cat, **r,
                             "p_value": r["p_value"] if tested else np.nan, "null_value": 0.0 if tested else 1 / 3,
                             "p_swap": swap_test(g) if metric == "bias_score_ambig" else np.nan})
    return pd.DataFrame(rows)


def _paired(df: pd.DataFrame, metric: str, lang: str) -> pd.DataFrame:
    """Per item of one model and set scored in ``lang`` and English: the pseudo-value difference ``d`` (pseudo-values
    computed over those common items) with its template and weight."""
    sub = df[df["language"].isin([lang, REFERENCE])]
    both = sub.groupby("item")["language"].nunique()
    sub = sub[sub["item"].isin(both[both == 2].index)]
    d = _with_pseudo(sub, metric, ["language"])
    wide = d.pivot_table(index="item", columns="language", values="pseudo", aggfunc="first", dropna=False) \
        .reindex(columns=[lang, REFERENCE])
    meta = d.drop_duplicates("item").set_index("item")[[CLUSTER, "category"]
                                                       + (["weight"] if "weight" in d else [])]
    return meta.assign(d=(wide[lang] - wide[REFERENCE]).reindex(meta.index))


def contrasts(df: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Each language minus English, per model x set x metric (pooled over categories and per category), paired on
    the items both answered and clustered on templates (module docstring); ``n_items_unpaired`` counts the items
    scored in only one of the two."""
    rows = []
    langs = [lang for lang in sorted(df["language"].unique()) if lang != REFERENCE]
    for (m, s), part in df.groupby(["model", "set"], sort=True):
        for metric in METRICS:
            for lang in langs:
                for cat, sub in _pooled_and_by_category(part):
                    p = _paired(sub, metric, lang)
                    n_un = sub[sub["language"].isin([lang, REFERENCE])]["item"].nunique() - len(p)
                    rows.append({"metric": metric, "model": m, "set": s, "language": lang, "category": cat,
                                 "contrast": f"{lang} - {REFERENCE}", "n_items_unpaired": n_un,
                                 **_inference(p["d"], p[CLUSTER].to_numpy(), seed + len(rows))})
    return pd.DataFrame(rows)


def template_table(df: pd.DataFrame, metric: str, model: str, lang: str) -> pd.DataFrame:
    """Per template: ``db`` (mean contrast of its bias-set items, pooled pseudo-values), ``da`` (its control items'
    accuracy in ``lang`` minus English, same context condition) and ``w`` (its number of items: the pseudo-values
    already carry the design weights, so the ``w``-weighted mean of ``db`` is the pooled contrast)."""
    d = df[df["model"] == model]
    p = _paired(d[d["set"] == "bias"], metric, lang)
    db, w = p.groupby(CLUSTER)["d"].mean(), p.groupby(CLUSTER)["d"].size()
    c = d[(d["set"] == "control") & (d["context_condition"] == METRICS[metric])]
    acc = c.pivot_table(index=CLUSTER, columns="language", values="correct", aggfunc="mean")
    da = (acc[lang] - acc[REFERENCE]) if lang in acc and REFERENCE in acc else pd.Series(dtype=float)
    return pd.DataFrame({"db": db, "da": da.reindex(db.index), "w": w}).dropna()


def adjusted_contrasts(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Bias-set contrasts (language minus English, pooled over categories) adjusted for control-set accuracy: the
    intercept of ``db_t = b0 + b1 da_t`` over templates (module docstring; statsmodels WLS, HC1, t(G - 2)), beside
    the unadjusted contrast of the same templates (the WLS intercept without ``da``)."""
    rows = []
    langs = [lang for lang in sorted(df["language"].unique()) if lang != REFERENCE]
    for m in sorted(df["model"].unique()):
        for metric in ADJUSTED:
            for lang in langs:
                t = template_table(df, metric, m, lang)
                row = {"metric": metric, "model": m, "language": lang, "contrast": f"{lang} - {REFERENCE}",
                       "n": int(t["w"].sum()), "n_templates": len(t)}
                if len(t) < 4 or t["da"].std() == 0:
                    rows.append({**row, "method": "undefined (fewer than 4 templates or no spread of da)"})
                    continue
                unadj = sm.WLS(t["db"], np.ones(len(t)), weights=t["w"]).fit()
                fit = sm.WLS(t["db"], sm.add_constant(t["da"]), weights=t["w"]).fit(cov_type="HC1", use_t=True)
                b0, se = float(fit.params["const"]), float(fit.bse["const"])
                q = sps.t.ppf(1 - alpha / 2, fit.df_resid)
                rows.append({**row, "unadjusted": float(unadj.params.iloc[0]), "adjusted": b0, "se": se,
                             "df": float(fit.df_resid), "null_value": 0.0,
                             "ci_low": b0 - q * se, "ci_high": b0 + q * se, "p_value": float(fit.pvalues["const"]),
                             "slope_da": float(fit.params["da"]), "mean_da": float(np.average(t["da"], weights=t["w"])),
                             "method": f"WLS intercept of db_t on da_t, HC1, t({int(fit.df_resid)})"})
    return pd.DataFrame(rows)
