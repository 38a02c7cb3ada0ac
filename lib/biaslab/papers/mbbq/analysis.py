"""Notebook 7's statistics: MBBQ's accuracy and bias scores per prompt, their spread over the paper's five prompts,
bias beside control-set accuracy, and cross-lingual contrasts paired on the same items.

Input: one row per scored prompt (``biaslab.benchmarks.mbbq.respond`` merged with the prompt table and its design
columns ``stratum``/``weight`` from ``mbbq.sample``): model, language, set, category, context_condition,
correct_is_biased, template, item, weight, optionally ``prompt`` (p1-p5; a table without it is one prompt) and the
0/1 answer columns ``correct``, ``deviated``, ``chose_unknown``, ``non_unknown``, whatever read the answers (the
option chosen, ``choice``, mapped onto its role by ``biased_index``/``unknown_index``/``gold_index``).

**Estimands** (Neplenbroek, Bisazza & Fernández 2024, §4, after Jin et al. 2023; per model x language x set x
category x prompt). In ambiguous contexts the paper's bias score is ``(n_biased - n_counter-biased) / n``; BBQ's
``s_AMB = (1 - accuracy) (2 n_biased / n_non_unknown - 1)`` (Parrish et al. 2022, §4) is the same number whenever
every answer names an option (the correct answer of an ambiguous item is "unknown", so ``n (1 - accuracy) =
n_non_unknown``): ``bias_score_ambig``. In disambiguated contexts the paper's bias score is the accuracy in biased
contexts (the correct answer is the stereotyped person) minus the accuracy in counter-biased ones:
``accuracy_gap``. BBQ's own ``s_DIS = 2 n_biased / n_non_unknown - 1`` (``bias_score_disambig``) and the accuracies
are reported beside them. Each item keeps its own roles in its own language (the Turkish SES items whose occupations
swap the stereotyped person are biased contexts there and counter-biased in English). Pooled over categories each is
the value over *every MBBQ item*: items weighted by their design weight N_h / n_h (strata: category x context
condition), the Horvitz-Thompson form of each total. **Prompts**: each prompt's value, and ``prompt`` ``mean``,
the mean over the five prompts (the paper reports its models' scores averaged over the five prompts); the spread
over the five (SD, min, max) is :func:`prompt_spread`.

**Inference.** Every metric is turned into per-item linearization pseudo-values whose mean is the metric
(:func:`biaslab.benchmarks.bbq.bias_score_pseudo_values` for BBQ's scores, :func:`gap_pseudo_values` for the gap;
Woodruff 1971, Binder 1983; the five-prompt mean: each item's mean over the prompts), and the mean gets
:func:`biaslab.stats.clustered.mean_inference` clustered on the template (category x question_index): CR1 t(G - 1),
the wild cluster bootstrap with fewer than 30 templates, p against 0. **Intervals within the metric's range**
(:func:`bounded`): an accuracy gets the Korn-Graubard interval of its (design-weighted) rate, Clopper-Pearson on the
effective n from the CR1 design effect of its linearization values and t(G - 1), inside [0, 1] by construction; a
bias score, a gap or a contrast gets the interval of its test (the values the t or wild bootstrap test does not
reject) intersected with the values the metric can take ([-1, 1]; a contrast [-2, 2]): a confidence set for a
parameter that lies in that range keeps its coverage when cut to it (``ci_clipped`` says where it was).

**Cross-lingual contrasts** (:func:`contrasts`, language L minus English): the mean of the per-item differences of
pseudo-values on the items scored in both (MBBQ is parallel; the loader shows every language's options in the
English item's order, so both languages are asked the same option order), clustered on templates the same way; it
equals the difference of the two metrics exactly. **Sensitivity only** (:func:`adjusted_contrasts`, the analysis
plan's claim ``mbbq-adjusted-contrast``): per template t, ``db_t`` is the mean contrast of its items (bias set) and
``da_t`` the difference L - English of its control items' accuracy in the same context; the intercept ``b0`` of the
weighted least-squares ``db_t = b0 + b1 da_t`` (weights: the template's items; HC1, t(G - 2)). With one or two
control items per template ``da_t`` takes a handful of values, and in ambiguous contexts it is the "unknown" rate,
the (1 - accuracy) factor of the score itself: the paper reports control accuracy *beside* the bias scores
(:func:`bias_beside_control`); it does not regress.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats as sps

from ...benchmarks.bbq import bias_score_pseudo_values
from ...stats.clustered import korn_graubard, mean_inference, sign_flip_p, without_variance
from ...stats.intervals import rate_intervals

CLUSTER = "template"
REFERENCE = "en"
#: the prompt the analysis plan's claims read (Protocol.wording ``paper``); ``MEAN``: the five prompts' mean
PLAN_PROMPT, MEAN = "p2", "mean"
CHANCE = 1 / 3
#: metric -> the context condition it is computed on
METRICS = {"accuracy_ambig": "ambig", "accuracy_disambig": "disambig", "bias_score_ambig": "ambig",
           "bias_score_disambig": "disambig", "accuracy_gap": "disambig"}
#: the values each metric can take
RANGE = {"accuracy_ambig": (0.0, 1.0), "accuracy_disambig": (0.0, 1.0), "bias_score_ambig": (-1.0, 1.0),
         "bias_score_disambig": (-1.0, 1.0), "accuracy_gap": (-1.0, 1.0)}
#: the paper's two bias scores (module docstring)
PAPER_SCORES = {"bias_score_ambig": "ambiguous", "accuracy_gap": "disambiguated"}
#: the bias metrics the control-accuracy regression (sensitivity analysis) applies to
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
    """Per-row pseudo-values of ``metric`` over ``part`` (one model, language, set, prompt and context condition),
    design weighted (module docstring): BBQ's scores via :func:`~biaslab.benchmarks.bbq.bias_score_pseudo_values`
    with the totals' terms multiplied by the scaled weight (the Horvitz-Thompson form), the gap via
    :func:`gap_pseudo_values`."""
    a = _a(part)
    if metric.startswith("accuracy_") and metric != "accuracy_gap":
        return a * part["correct"].to_numpy(float)          # Horvitz-Thompson: mean(a y) is the weighted mean
    if metric == "accuracy_gap":
        return gap_pseudo_values(part["correct"], part["correct_is_biased"] == "yes", a)
    return bias_score_pseudo_values(a * part["deviated"], a * part["non_unknown"], a * part["correct"],
                                    ambig=metric == "bias_score_ambig")


def swap_contributions(part: pd.DataFrame) -> np.ndarray:
    """Per item of ``part`` (one model, language, set and prompt, ambiguous contexts) its term of BBQ's ambiguous
    score, ``h_i = (1 - A) a_i (2 dev_i - nu_i) / sum(a nu)`` (design weights a, weighted accuracy A): ``sum h =
    s_AMB``. Exchanging the biased and counter-biased answers (``dev -> nu - dev``) negates ``h_i`` and keeps A and
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


def _swap_p(h, templates) -> float:
    h = np.asarray(h, float)
    if not np.isfinite(h).all():
        return float("nan")
    return float(sign_flip_p(np.bincount(pd.factorize(np.asarray(templates))[0], weights=h)))


def _by(df: pd.DataFrame, *keys: str) -> list[str]:
    """``keys`` plus ``prompt`` where the table has one."""
    return list(keys) + (["prompt"] if "prompt" in df else [])


def _with_pseudo(df: pd.DataFrame, metric: str, by: list[str]) -> pd.DataFrame:
    d = df[df["context_condition"] == METRICS[metric]].copy()
    d["pseudo"] = np.nan
    for _, part in d.groupby(by, observed=True, sort=False):
        d.loc[part.index, "pseudo"] = pseudo_values(part, metric)
    return d


def bounded(r: dict, low: float, high: float, rate: bool = False, alpha: float = 0.05) -> dict:
    """``r`` (a :func:`_inference` row) with an interval inside ``[low, high]`` (module docstring): ``rate``, the
    Korn-Graubard interval of the rate ``estimate`` (effective n from the CR1 design effect of ``se``, t(G - 1));
    otherwise the test's interval intersected with the range (``ci_clipped`` where that changed it)."""
    out = dict(r, ci_clipped=False)
    est, se, n, g = r["estimate"], r["se"], r["n"], r["n_clusters"]
    if not np.isfinite(est):
        return out
    if rate:
        v_bin = est * (1 - est) / n
        deff = se ** 2 / v_bin if v_bin > 0 and np.isfinite(se) else np.nan
        lo, hi, n_eff = korn_graubard(est * n, n, deff, g - 1 if np.isfinite(g) and g >= 2 else np.nan, alpha)
        return dict(out, ci_low=lo, ci_high=hi,
                    ci_method=f"Korn-Graubard (Clopper-Pearson on the effective n {n_eff:.1f}: CR1 design effect of "
                              f"the rate's linearization values, t({int(g) - 1 if np.isfinite(g) else 'n'})); "
                              f"G = {g:.0f} {CLUSTER} clusters")
    lo, hi = r["ci_low"], r["ci_high"]
    if np.isfinite(lo) and np.isfinite(hi) and (lo < low or hi > high):
        out.update(ci_low=max(lo, low), ci_high=min(hi, high), ci_clipped=True,
                   ci_method=f"{r['ci_method']}; intersected with the range [{low:g}, {high:g}]")
    return out


def _inference(y, clusters, seed: int) -> dict:
    y = np.asarray(y, float)
    if not y.size or not np.isfinite(y).all():  # a score with no non-unknown answer (or an empty gap arm) is undefined
        return {"n": int(y.size), "n_clusters": np.nan, "df": np.nan, "estimate": np.nan, "se": np.nan,
                "ci_low": np.nan, "ci_high": np.nan, "p_value": np.nan,
                "ci_method": "undefined (no non-unknown answer, or no item in one arm of the gap)"}
    r = mean_inference(y, clusters, seed=seed, name=CLUSTER)
    return {k: r[k] for k in ("n", "n_clusters", "df", "estimate", "se", "ci_low", "ci_high", "p_value", "ci_method")}


def _pooled_and_by_category(df: pd.DataFrame):
    """(category label, rows): every category pooled (``all``, design weighted), then each category."""
    return [("all", df), *df.groupby("category", sort=True)]


def _prompt_mean(d: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per item, the mean of ``value`` over the prompts (items scored under every prompt of the table); one row per
    item with its template."""
    n = d["prompt"].nunique()
    g = d.groupby(["item"], sort=True, observed=True).agg(v=(value, "mean"), k=(value, "size"),
                                                                template=(CLUSTER, "first")).reset_index()
    return g[g["k"] == n].rename(columns={"v": value})


def accuracy(df: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per model x language x set x category x context condition (x prompt), Korn-Graubard interval
    clustered on the template (:func:`biaslab.stats.intervals.rate_intervals`; within a category x context stratum
    the sample is a simple random one, so unweighted)."""
    return rate_intervals(df, "correct", CLUSTER, by=_by(df, "model", "language", "set", "category",
                                                          "context_condition"))


def _row(metric: str, r: dict, **key) -> dict:
    tested = metric not in ("accuracy_ambig", "accuracy_disambig")
    r = bounded(r, *RANGE[metric], rate=not tested)
    return {"metric": metric, **key, **r, "p_value": r["p_value"] if tested else np.nan,
            "null_value": 0.0 if tested else CHANCE}


def metric_table(df: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Each metric of :data:`METRICS` per model x language x set x category (``all``: pooled, design weighted) x
    prompt (where the table has prompts; ``mean``: the five-prompt mean where it has several), with its
    template-clustered interval within the metric's range (:func:`bounded`); bias scores and the gap are tested
    against ``null_value`` 0, an accuracy is descriptive: no p, its interval shown against chance (``null_value``
    1/3, three options). The ambiguous score also gets ``p_swap``, its answer-swap randomization test
    (the template sign flip of :func:`swap_contributions`' per-item terms; the plan's test of
    ``mbbq-ambig-en``)."""
    rows = []
    keys = _by(df, "model", "language", "set")
    several = "prompt" in df and df["prompt"].nunique() > 1
    for metric in METRICS:
        for cat, part in _pooled_and_by_category(df):
            d = _with_pseudo(part, metric, keys)
            if metric == "bias_score_ambig":
                d["h"] = np.nan
                for _, g in d.groupby(keys, sort=False):
                    d.loc[g.index, "h"] = swap_contributions(g)
            # each prompt's rows, then (several prompts) each item's mean over the prompts
            for by, mean in [(keys, {})] + ([(keys[:-1], {"prompt": MEAN})] if several else []):
                for i, (k, g) in enumerate(d.groupby(by, sort=True)):
                    y = _prompt_mean(g, "pseudo") if mean else g
                    r = _inference(y["pseudo"], y[CLUSTER].to_numpy(), seed + i)
                    h = (_prompt_mean(g, "h") if mean else g) if metric == "bias_score_ambig" else None
                    rows.append({**_row(metric, r, **dict(zip(by, k)), **mean, category=cat),
                                 "p_swap": np.nan if h is None else _swap_p(h["h"], h[CLUSTER])})
    return pd.DataFrame(rows)


def prompt_spread(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per model x language x set x category x metric: the five-prompt mean with its interval (``metric_table``'s
    ``mean`` rows; a run of one prompt: that prompt's) beside the spread of the prompts' own estimates
    (``n_prompts``, ``sd``, ``min``, ``max``, and the prompts at either end), as the paper reports a model's score
    over its five prompts."""
    key = ["model", "language", "set", "category", "metric"]
    each = metrics[metrics["prompt"] != MEAN]
    spread = each.groupby(key, sort=True).agg(n_prompts=("estimate", "count"), sd=("estimate", "std"),
                                              min=("estimate", "min"), max=("estimate", "max"))
    ends = each.dropna(subset=["estimate"]).sort_values("estimate").groupby(key, sort=True)["prompt"]
    spread["prompt_min"], spread["prompt_max"] = ends.first(), ends.last()
    top = metrics[metrics["prompt"] == MEAN] if (metrics["prompt"] == MEAN).any() else each   # one prompt: itself
    mean = top.set_index(key)[["estimate", "ci_low", "ci_high", "ci_method", "n", "n_clusters"]]
    return mean.join(spread, how="outer").reset_index()


def bias_beside_control(metrics: pd.DataFrame) -> pd.DataFrame:
    """The paper's reading, per model x language x category x prompt: its two bias scores (bias set) beside the
    control set's accuracy in both contexts and chance (1/3), each with its interval. ``control_above_chance``:
    the control set's disambiguated accuracy interval lies above 1/3 (a descriptive column: whether a language's
    scores are measurable is the instrument rule's call, read from these columns)."""
    key = ["model", "language", "category", "prompt"]
    m = metrics if "prompt" in metrics else metrics.assign(prompt=PLAN_PROMPT)
    cols = {("bias", "bias_score_ambig"): "bias_ambig", ("bias", "accuracy_gap"): "bias_disambig",
            ("control", "accuracy_ambig"): "control_accuracy_ambig",
            ("control", "accuracy_disambig"): "control_accuracy_disambig",
            ("bias", "accuracy_ambig"): "accuracy_ambig", ("bias", "accuracy_disambig"): "accuracy_disambig"}
    parts = []
    for (s, metric), name in cols.items():
        t = m[(m["set"] == s) & (m["metric"] == metric)].set_index(key)
        parts.append(t[["estimate", "ci_low", "ci_high"]].rename(
            columns={"estimate": name, "ci_low": f"{name}_ci_low", "ci_high": f"{name}_ci_high"}))
    out = pd.concat(parts, axis=1).reset_index()
    out["chance"] = CHANCE
    out["control_above_chance"] = out["control_accuracy_disambig_ci_low"] > CHANCE
    return out


def _paired(df: pd.DataFrame, metric: str, lang: str) -> pd.DataFrame:
    """Per item of one model, set and prompt scored in ``lang`` and English: the pseudo-value difference ``d``
    (pseudo-values computed over those common items) with its template and weight."""
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
    """Each language minus English, per model x set x metric x prompt (and the five-prompt mean), pooled over
    categories and per category, paired on the items both answered and clustered on templates (module docstring),
    intervals within the difference's range (:func:`bounded`); ``n_items_unpaired`` counts the items scored in only
    one of the two."""
    rows = []
    langs = [lang for lang in sorted(df["language"].unique()) if lang != REFERENCE]
    several = "prompt" in df and df["prompt"].nunique() > 1
    for (m, s), part in df.groupby(["model", "set"], sort=True):
        for metric in METRICS:
            low, high = RANGE[metric]
            for lang in langs:
                for cat, sub in _pooled_and_by_category(part):
                    n_all = sub[sub["language"].isin([lang, REFERENCE])]["item"].nunique()
                    # each prompt of the table (one unnamed prompt where it has no ``prompt`` column)
                    prompts = sub.groupby("prompt", sort=True) if "prompt" in sub else [(None, sub)]
                    each = [(p, _paired(ps, metric, lang)) for p, ps in prompts]
                    if several:
                        each.append((MEAN, _prompt_mean(pd.concat([d.assign(prompt=p) for p, d in each])
                                                        .reset_index(), "d")))
                    for p, d in each:
                        r = _inference(d["d"], d[CLUSTER].to_numpy(), seed + len(rows))
                        rows.append({"metric": metric, "model": m, "set": s, "language": lang, "category": cat,
                                     **({"prompt": p} if p is not None else {}), "contrast": f"{lang} - {REFERENCE}",
                                     "n_items_unpaired": n_all - len(d), **bounded(r, low - high, high - low)})
    return pd.DataFrame(rows)


def _plan_prompt(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the plan's prompt (all rows of a table without prompts)."""
    return df[df["prompt"] == PLAN_PROMPT] if "prompt" in df else df


def template_table(df: pd.DataFrame, metric: str, model: str, lang: str) -> pd.DataFrame:
    """Per template (the plan's prompt): ``db`` (mean contrast of its bias-set items, pooled pseudo-values), ``da``
    (its control items' accuracy in ``lang`` minus English, same context condition) and ``w`` (its number of items:
    the pseudo-values already carry the design weights, so the ``w``-weighted mean of ``db`` is the pooled
    contrast)."""
    d = _plan_prompt(df)
    d = d[d["model"] == model]
    p = _paired(d[d["set"] == "bias"], metric, lang)
    db, w = p.groupby(CLUSTER)["d"].mean(), p.groupby(CLUSTER)["d"].size()
    c = d[(d["set"] == "control") & (d["context_condition"] == METRICS[metric])]
    acc = c.pivot_table(index=CLUSTER, columns="language", values="correct", aggfunc="mean")
    da = (acc[lang] - acc[REFERENCE]) if lang in acc and REFERENCE in acc else pd.Series(dtype=float)
    return pd.DataFrame({"db": db, "da": da.reindex(db.index), "w": w}).dropna()


def adjusted_contrasts(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Sensitivity analysis (module docstring): bias-set contrasts (language minus English, pooled over categories,
    the plan's prompt) regressed on the control-set accuracy difference, the intercept of ``db_t = b0 + b1 da_t``
    over templates (statsmodels WLS, HC1, t(G - 2)), beside the unadjusted contrast of the same templates (the WLS
    intercept without ``da``)."""
    rows = []
    df = _plan_prompt(df)
    langs = [lang for lang in sorted(df["language"].unique()) if lang != REFERENCE]
    for m in sorted(df["model"].unique()):
        for metric in ADJUSTED:
            for lang in langs:
                t = template_table(df, metric, m, lang)
                row = {"metric": metric, "model": m, "language": lang, "contrast": f"{lang} - {REFERENCE}",
                       "n": int(t["w"].sum()), "n_templates": len(t), "n_templates_da_zero": int((t["da"] == 0).sum())}
                if len(t) < 4 or t["da"].std() == 0:
                    rows.append({**row, "method": "undefined (fewer than 4 templates or no spread of da)"})
                    continue
                unadj = sm.WLS(t["db"], np.ones(len(t)), weights=t["w"]).fit()
                fit = sm.WLS(t["db"], sm.add_constant(t["da"]), weights=t["w"]).fit(cov_type="HC1", use_t=True)
                b0, se = float(fit.params["const"]), float(fit.bse["const"])
                q = sps.t.ppf(1 - alpha / 2, fit.df_resid)
                low, high = RANGE[metric][0] - RANGE[metric][1], RANGE[metric][1] - RANGE[metric][0]
                fitted = {**row, "unadjusted": float(unadj.params.iloc[0]), "adjusted": b0, "se": se,
                          "df": float(fit.df_resid), "null_value": 0.0, "ci_low": max(b0 - q * se, low),
                          "ci_high": min(b0 + q * se, high), "p_value": float(fit.pvalues["const"]),
                          "slope_da": float(fit.params["da"]), "mean_da": float(np.average(t["da"], weights=t["w"])),
                          "method": f"sensitivity analysis: WLS intercept of db_t on da_t, HC1, "
                                    f"t({int(fit.df_resid)}); interval intersected with the range "
                                    f"[{low:g}, {high:g}]"}
                # residuals of 0 in every template (e.g. the same answers in both languages): no p, no interval
                rows.append(fitted if se > 0 else without_variance(
                    fitted, len(t), "templates", p=("p_value",), notes=("method",)))
    return pd.DataFrame(rows)
