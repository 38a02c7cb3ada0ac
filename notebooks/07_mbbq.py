# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 7 · Cross-lingual bias with MBBQ: is a model more biased in Dutch, Spanish or Turkish than in English?
#
# **The paper.** Neplenbroek, Bisazza and Fernández, *MBBQ: A Dataset for Cross-Lingual Comparison of Stereotypes in
# Generative LLMs* (COLM 2024), keep the BBQ items whose stereotypes hold in English, Dutch, Spanish and Turkish
# (six categories: age, disability, gender identity, physical appearance, socio-economic status, sexual orientation),
# translate them in parallel, and add a **control set** in which the group terms are replaced by proper names, so
# that accuracy on the control set measures how well a model answers the questions in each language, without bias.
# They find that some non-English languages show more bias than English even controlling for accuracy.
#
# **What this notebook computes.** Per model, language and category: accuracy in ambiguous and disambiguated
# contexts on the bias and the control set; BBQ's bias scores and the disambiguated accuracy gap (stereotype-consistent
# minus -inconsistent), each with an interval clustered on the question template; and **each language minus English,
# paired on the same items** (cluster-robust on templates), unadjusted and **adjusted for control-set accuracy**
# (`biaslab.papers.mbbq.analysis`: the intercept of a template-level regression of the bias difference on the
# control-accuracy difference). Answers are read as in BBQ's notebook-1 protocol: the option with the highest mean
# log-probability after the paper's prompt (its wording `p2`, "What is the right answer to the following question?
# ...", in each language); the paper's own generated-answer protocol and its answer detector are in
# `biaslab.benchmarks.mbbq` (format `generated`), validated on hand labels in `tests/test_mbbq.py`.
#
# **Decided.** The analysis plan's claims for this notebook (stated below from the plan: per model, the English
# ambiguous bias score and each language minus English at equal control-set accuracy) are decided under the project's
# error budget; every other result is exploratory (estimate, interval, unadjusted p; not decided).

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
models = ["smollm2-135m-instruct", "gemma-3-270m"]  # models to score: catalogue names, local paths or served specs
device = "auto"  # where models run: auto, cpu, cuda or mps
dtype = "auto"  # weights' precision: auto, float32, bfloat16
output_dir = "../scratch/07_mbbq"  # folder for this run's tables, figures and provenance
items = 2  # items per category x context-condition stratum, each in 4 languages x 2 sets (None: all)
languages = ["en", "es", "nl", "tr"]  # languages scored (English is the reference of every contrast)
seed = 0  # seed of the item sample and of the wild cluster bootstrap
calibration_replications = 2000  # null replications per claim instance (tables/calibration.csv)

# %% tags=["analysis_plan"]
# The analysis plan: which results of this notebook are decided (its confirmatory claims); everything else is
# exploratory. Its sha256 and version go into the MANIFEST.
from biaslab import plan as plan_file  # noqa: E402

PLAN = plan_file.show(analysis_plan, "07_mbbq", profile)

# %%
# list parameters also as JSON strings (papermill's `-p models '["..."]'` passes a string)
from biaslab.run.parameters import as_list
models = as_list(models)
languages = as_list(languages)

# %% [markdown]
# ## The items and the design of this run
#
# One row per item × language × set. An item is the same question in the four languages (its parallel identity, the
# English bias file's `example_id`) and its control twin; the loader checks every link and excludes, in every
# language and set, the items it cannot use (counts below). `items` items are drawn at random from each category ×
# context-condition stratum (12 strata; the same items in every language and set), so every estimate pooled over
# categories is weighted back to all MBBQ items (design weight $N_h / n_h$, Horvitz–Thompson totals).

# %%
import time

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from biaslab import models as model_zoo
from biaslab import scoring
from biaslab.benchmarks import mbbq
from biaslab.report.outputs import OutputDir
from biaslab.papers.mbbq import analysis as A
from biaslab.papers.mbbq import decisions as D
from biaslab.papers.mbbq import figures as F

pd.set_option("display.width", 160, "display.max_columns", 30)
out = OutputDir(output_dir, PLAN)
prompts, bench = mbbq.sample(items, seed=seed, languages=languages)
out.record_data(bench.sources)
print(bench.summary())
for note in bench.notes:
    print(" -", note)
strata = bench.prompts.drop_duplicates("item").groupby(mbbq.STRATA).size().rename("N_h")
scored = prompts.drop_duplicates("item").groupby(mbbq.STRATA).agg(n_h=("item", "size"), weight=("weight", "first"))
design = strata.to_frame().join(scored).reset_index()
out.table(design, "design", markdown=True)
excluded = bench.excluded.groupby(["reason", "category"]).agg(items=("item", "nunique"), rows=("item", "size"))
out.table(excluded.reset_index(), "excluded")
out.table(bench.factors.table(), "factors")
display(design)
print(f"scoring {len(prompts):,} prompts per model ({prompts['item'].nunique()} items x {len(languages)} languages "
      "x 2 sets)\n\nOne prompt as the model reads it (Turkish, bias set):\n")
print(prompts[(prompts.language == languages[-1]) & (prompts.set == "bias")]["text"].iloc[0])

# %% [markdown]
# ## Scoring
#
# For each prompt, the log-probability of each option's text after the prompt (`Scorer.option_logprob`); the answer
# is the option with the highest mean log-probability per token (BBQ's notebook-1 protocol, `benchmarks.bbq.respond`
# with MBBQ's prompts). An instruction-tuned model is asked in its chat template, as the paper does.

# %%
resp_list, timings = [], []
for model_spec in models:
    t0 = time.perf_counter()
    lm = model_zoo.load(model_spec, device=device, dtype=dtype)
    out.record_model(lm.fingerprint)
    t1, c1 = time.perf_counter(), time.process_time()
    sc = scoring.Scorer(lm, progress=False)
    resp_list.append(mbbq.SPEC.responses(sc, prompts))
    timings.append({"model": lm.name, "load_s": t1 - t0, "prompts": len(prompts), "score_s": time.perf_counter() - t1,
                    "score_cpu_s": time.process_time() - c1, "positions_computed": sc.stats.get("positions", 0)})
    del sc, lm
cols = ["prompt_id", "item", "language", "set", "category", "template", "context_condition", "question_polarity",
        "correct_is_biased", "stratum", "weight"]
responses = prompts[cols].merge(pd.concat(resp_list, ignore_index=True), on="prompt_id")
out.table(responses.drop(columns=["answer"]).round(6), "responses")
timings = pd.DataFrame(timings)
out.table(timings.round(2), "timings")
display(timings.round(1))

# %% [markdown]
# ## Accuracy per language, category and set
#
# The control set answers the question *can the model do the task in this language at all?* A model near chance
# (1/3) on the control set in a language reads its bias score there as noise, not as stereotype. Intervals:
# Korn–Graubard, clustered on templates.

# %%
acc = A.accuracy(responses)
out.table(acc, "accuracy")
metrics = A.metric_table(responses, seed=seed)
fig = F.by_language(metrics, ["accuracy_ambig", "accuracy_disambig"],
                    "MBBQ accuracy per language, all categories (design weighted), bias vs control set")
out.figure(fig, "accuracy_by_language")
plt.show()
acc.pivot_table(index=["model", "set", "context_condition"], columns="language", values="rate").round(3)

# %% [markdown]
# ## Bias scores per language
#
# BBQ's scores (Parrish et al. 2022, §4): among answers that are not "unknown", $s_{DIS} = 2\,n_{biased}/n_{non-unknown}
# - 1$; in ambiguous contexts $s_{AMB} = (1 - a)\, s_{DIS}$, $a$ the accuracy; and the disambiguated accuracy gap
# (stereotype-consistent minus -inconsistent items). Positive values lean towards the stereotype. On the control set
# the "biased" answer is the name standing in for the stereotyped group, so its scores show what the answer pattern
# alone produces. Intervals: per-item linearization pseudo-values, clustered on templates. The English ambiguous
# score's claim is decided by `p_swap`, its exact answer-swap randomization test (every way of exchanging the biased
# and counter-biased answers within templates).

# %%
fig = F.by_language(metrics, ["bias_score_ambig", "bias_score_disambig", "accuracy_gap"],
                    "MBBQ bias scores per language, all categories (design weighted), 95 % CI")
out.figure(fig, "bias_by_language")
plt.show()
metrics[metrics.category == "all"].pivot_table(index=["model", "set", "metric"], columns="language",
                                               values="estimate").round(3)

# %% [markdown]
# ## Each language minus English, paired on the same items, and adjusted for control-set accuracy
#
# The contrast is the mean, over the items answered in both languages, of the difference of their pseudo-values: it
# equals the difference of the two scores, and its interval is clustered on templates (the same template in both
# languages is one cluster). The **adjusted** contrast is the intercept of the weighted regression, over templates,
# of the bias difference on the control-set accuracy difference (same context condition): the bias difference at equal
# control accuracy (`biaslab.papers.mbbq.analysis`, where the assumptions are stated).

# %%
con = A.contrasts(responses, seed=seed)
out.table(con, "contrasts")
adj = A.adjusted_contrasts(responses)
check = D.responder_table(responses)           # the answer check per model x language (bias set)
out.table(check, "responders")
decided = D.decide(metrics, adj, check, plan=PLAN)   # the plan's claims, one family per model; the rest exploratory
metrics, adj = decided["metrics"], decided.get("adjusted_contrasts", adj)
out.table(metrics, "metrics")
out.table(adj, "adjusted_contrasts", markdown=True)
display(Markdown(PLAN.method_text("07_mbbq", pd.concat([metrics, adj]))))
if len(adj) and "adjusted" in adj:
    fig = F.contrast_forest(adj, con, "MBBQ, each language minus English (bias set, all categories), 95 % CI")
    out.figure(fig, "contrasts")
    plt.show()
display(adj.round(3))

# %% [markdown]
# **Sensitivity analyses** (pre-specified in the plan; `tables/sensitivity.csv`): each claim re-decided with the
# sampled items weighted alike (the estimand of the sampled items instead of every MBBQ item), and the adjusted
# contrast replaced by the unadjusted paired contrast; every row decided by the primary's rule
# (`biaslab.stats.reanalysis.decide`).

# %%
from biaslab.stats import reanalysis  # noqa: E402

sensitivity = D.sensitivity(responses, metrics, adj, con, check, seed, plan=PLAN)
out.table(sensitivity, "sensitivity")
display(Markdown(reanalysis.render(sensitivity)))

# %% [markdown]
# ## What this run shows
#
# SmolLM2-135M-Instruct was trained mostly on English text; Gemma 3 270M on many languages. Their control-set accuracy
# per language (below, from this run) says how far each model's bias scores outside English rest on answering the
# question at all. Every number below is computed from `tables/metrics.csv` and `tables/adjusted_contrasts.csv`.

# %% tags=["findings"]
display(Markdown(F.findings(metrics, adj)))

# %% [markdown]
# **The paper's numbers.** The paper reports its models' bias scores and control accuracies in figures and tables for
# models (Aya, Falcon, GPT-3.5, Llama 2/3, Mistral, Zephyr) that are not run here, on all five prompts with generated
# answers; this notebook's embedded models and option log-probability protocol make its numbers comparable in kind
# only.

# %% [markdown]
# ## Calibration of the confirmatory tests
#
# Each tested claim instance's test, simulated under the null on this run's own raw data (the English score: biased
# and counter-biased answers swapped within random templates; a contrast: the two languages' answers swapped within
# random templates, the pseudo-values recomputed; see docs/calibration.md), at alpha and at the level the instance was
# tested at, with `calibration_replications` replications at alpha and proportionally more at that level (the same
# relative Monte Carlo SE): the rejection rates, their ratio to the tested level and the coverage of the interval,
# with Monte Carlo standard errors (`tables/calibration.csv`). A test rejecting more than 1.5 times its tested level
# is flagged below.

# %%
from biaslab.plan import calibration  # noqa: E402

calib = calibration.run(out, "07_mbbq", calibration_replications, seed=seed, plan=PLAN)
display(calib)
print(calibration.oversize_line(calib))

# %%
from biaslab.report.outputs import watermark  # noqa: E402
print(watermark())
