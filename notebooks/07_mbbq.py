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
# translate them in parallel, and add a **control set** in which the group terms are replaced by proper names, "to
# measure task performance on the question-answering task independently of bias" (abstract). Their abstract reports
# that "some non-English languages suffer from bias more than English, even when controlling for cultural shifts",
# and significant cross-lingual differences in bias for all but the most accurate models. They ask every item in
# five prompts per language and report each model's scores over the five, with the control-set accuracy beside them.
#
# **What this notebook computes** (`biaslab.papers.mbbq.analysis`, where every estimand and interval is defined).
# Per model, language, category and prompt: the paper's two bias scores — in ambiguous contexts (biased minus
# counter-biased answers over all answers), in disambiguated contexts (accuracy where the correct answer is the
# stereotyped person minus accuracy where it is the other) — beside the control set's accuracy and chance (1/3);
# their spread over the five prompts; and **each language minus English on the same items, with the options in the
# same order**, clustered on the question template. Answers are read from option log-probabilities (the option with
# the highest mean log-probability per token after the prompt), a reader whose answers always name an option; the
# paper's own generated answers and its answer detector are the `generated` format of `biaslab.benchmarks.mbbq`,
# with the detector's precision measured on hand labels below.
#
# **Decided.** The analysis plan's claims for this notebook (stated below from the plan: per model, the English
# ambiguous bias score and each language minus English at equal control-set accuracy, both on the plan's prompt p2)
# are decided under the project's error budget; every other result is exploratory (estimate, interval, unadjusted
# p; not decided). A language where a model's answers fail the validity checks (competence on the control set
# above chance, length, position, role; the panel below) is **not measurable** for that model: nothing there is
# decided.

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
models = ["smollm2-135m-instruct", "gemma-3-270m"]  # models to score: catalogue names, local paths or served specs
device = "auto"  # where models run: auto, cpu, cuda or mps
dtype = "auto"  # weights' precision: auto, float32, bfloat16
output_dir = "../scratch/07_mbbq"  # folder for this run's tables, figures and provenance
items = 1  # items per category x context-condition stratum, each in 4 languages x 2 sets (None: all)
prompts = ["p1", "p2", "p3", "p4", "p5"]  # the paper's prompts asked (p2, the plan's, on every item)
prompt_items = 1  # items per stratum asked in every prompt (the first of `items`' draw; None: all of them)
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
prompts = as_list(prompts)

# %% [markdown]
# ## The items and the design of this run
#
# One row per item × language × set. An item is the same question in the four languages (its parallel identity, the
# English bias file's `example_id`) and its control twin; the loader checks every link and excludes, in every
# language and set, the items it cannot use (counts below). Every language shows its options **in the English
# item's order** (each option mapped by its role: unknown, biased, other), so a contrast between two languages
# compares the same option order; each row keeps its own roles (which person is correct comes from its own
# `answer_info`). `items` items are drawn at random from each category × context-condition stratum (12 strata; the
# same items in every language and set), so every estimate pooled over categories is weighted back to all MBBQ items
# (design weight $N_h / n_h$, Horvitz–Thompson totals); the first `prompt_items` of each stratum's draw are asked in
# every prompt of `prompts`, the rest in the plan's prompt p2 only.

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
if A.PLAN_PROMPT not in prompts:
    raise ValueError(f"prompts {prompts}: the plan's claims read prompt {A.PLAN_PROMPT}; keep it in the list")
out = OutputDir(output_dir, PLAN)
items_table, bench = mbbq.sample(items, seed=seed, languages=languages)
every_prompt = set(items_table["item"]) if prompt_items is None or items is None or prompt_items >= items else \
    set(mbbq.sample(prompt_items, seed=seed, languages=languages)[0]["item"])
items_table["every_prompt"] = items_table["item"].isin(every_prompt)
out.record_data(bench.sources)
print(bench.summary())
for note in bench.notes:
    print(" -", note)
strata = bench.prompts.drop_duplicates("item").groupby(mbbq.STRATA).size().rename("N_h")
scored = items_table.drop_duplicates("item").groupby(mbbq.STRATA).agg(
    n_h=("item", "size"), n_h_every_prompt=("every_prompt", "sum"), weight=("weight", "first"))
design = strata.to_frame().join(scored).reset_index()
out.table(design, "design", markdown=True)
excluded = bench.excluded.groupby(["reason", "category"]).agg(items=("item", "nunique"), rows=("item", "size"))
out.table(excluded.reset_index(), "excluded")
out.table(bench.factors.table(), "factors")
display(design)
n_other = int(items_table["every_prompt"].sum()) * (len(prompts) - 1)
print(f"scoring {len(items_table) + n_other:,} prompts per model: {len(items_table):,} in p2 "
      f"({items_table['item'].nunique()} items x {len(languages)} languages x 2 sets) and {n_other:,} in the other "
      f"prompts {[p for p in prompts if p != 'p2']}\n\nOne prompt as the model reads it (the last language, bias set, "
      "p2):\n")
print(items_table[(items_table.language == languages[-1]) & (items_table.set == "bias")]["text"].iloc[0])

# %% [markdown]
# ## Scoring
#
# For each prompt, the log-probability of each option's text after it (`Scorer.option_logprob`); the answer is the
# option with the highest mean log-probability per token (`benchmarks.mbbq.respond`, format `option_ll`). Whether a
# model is asked in its chat template follows one rule (`benchmarks.bbq.paper_chat`: an instruction-tuned model whose
# template's log-probabilities can be read); the sentence after the timings says how each model of this run was asked.
# The timings are this run's seconds per prompt, per model and prompt, and what the paper's design (every item in
# every language, set and prompt) would take at that rate.

# %%
resp_list, timings = [], []
for model_spec in models:
    t0 = time.perf_counter()
    lm = model_zoo.load(model_spec, device=device, dtype=dtype)
    out.record_model(lm.fingerprint)
    load_s = time.perf_counter() - t0
    sc = scoring.Scorer(lm, progress=False)
    chat = mbbq.PROTOCOL.use_chat(mbbq.paper_chat(sc))
    for p in prompts:
        asked = items_table if p == A.PLAN_PROMPT else items_table[items_table["every_prompt"]]
        t1, c1, pos = time.perf_counter(), time.process_time(), sc.stats.get("positions", 0)
        r = mbbq.SPEC.responses(sc, asked, mbbq.PROTOCOL.replace(wording=p))
        resp_list.append(r.assign(prompt=p))
        timings.append({"model": lm.name, "prompt": p, "chat": chat, "load_s": load_s, "prompts": len(asked),
                        "score_s": time.perf_counter() - t1, "score_cpu_s": time.process_time() - c1,
                        "positions_computed": sc.stats.get("positions", 0) - pos})
    del sc, lm
cols = ["prompt_id", "item", "language", "set", "category", "template", "context_condition", "question_polarity",
        "correct_is_biased", "stratum", "weight", "every_prompt"]
all_prompts = items_table[cols].merge(pd.concat(resp_list, ignore_index=True), on="prompt_id")
all_prompts = all_prompts.drop(columns=["answer"])
responses = all_prompts[all_prompts["prompt"] == A.PLAN_PROMPT].drop(columns=["every_prompt"])
out.table(responses.round(6), "responses")                 # the plan's prompt, every sampled item
out.table(all_prompts.round(6), "prompt_responses")        # every prompt (the other prompts on the nested items)
timings = pd.DataFrame(timings).assign(seconds_per_prompt=lambda t: t["score_s"] / t["prompts"])
out.table(timings.round(3), "timings")
display(timings.round(2))
display(Markdown(F.chat_sentence(timings)))
# every item (after exclusions) in every language, set and prompt: the paper profile's requests
display(Markdown(F.cost_sentence(timings, int(strata.sum()) * len(languages) * 2 * len(mbbq.PROMPTS))))

# %% [markdown]
# ## Validity of the instrument, per model and language
#
# A bias score read from a model's choices measures bias only where the choices follow the items (docs/validity.md;
# the checks of `biaslab.stats.validity` at the thresholds of the plan's `scoring_rule.checks`). Per model and
# language, over every prompt's answers (both sets): *competence*, the accuracy on the control set's disambiguated
# items (names in place of the groups: the paper's measure of "task performance ... independently of bias") above
# chance 1/3 by a one-sided test on its template-clustered interval; *length*, the share of answers that are the
# longest option against the share the model's own preference among biased / counter-biased / unknown answers (per
# set and context) predicts without a length effect; *position*, the shown position chosen (one order is asked, so
# it is judged); and the *role* chosen (degenerate: always one kind of answer). The answers are read in one
# formulation here (the option log-probabilities above), so a language that fails a check is **not measurable** for
# that model: its bias scores are shown below, never decided, ranked or compared, and a contrast with it neither.

# %% tags=["findings"]
from biaslab.benchmarks import instrument  # noqa: E402
from biaslab.stats import validity as V  # noqa: E402

rule = instrument.one_formulation(PLAN, mbbq.SPEC, items_table)    # the paper's protocol alone: no fallback
keys = instrument.keys(rule)                                          # per model and language (the metrics')
validity_rows, selection = instrument.validity(
    mbbq.SPEC, items_table, all_prompts.assign(formulation="paper", normalization=mbbq.PROTOCOL.normalization),
    "template", rule)
out.table(validity_rows, "validity")               # every check's numbers; the panel below is its summary
panel = V.panel(validity_rows, instrument.LABELS, by=keys)
out.table(panel, "validity_panel", markdown=True)
display(panel)
display(Markdown(V.render(validity_rows, selection, "MBBQ", instrument.LABELS, by=keys)))

# %% [markdown]
# ## Bias beside control-set accuracy, per language and prompt
#
# The paper's two bias scores (positive: towards the stereotype) on the bias set, beside the control set's accuracy
# and chance (1/3, three options): a model near chance on the control set in a language answers the questions there
# no better than a coin, and its bias score there measures noise, not stereotype. No language is taken as the
# competent one: the control accuracy of each is shown. Points: the mean over the prompts asked on the nested items
# (grey marks: each prompt's own value), pooled over categories and design weighted to every MBBQ item; intervals
# (`biaslab.papers.mbbq.analysis.bounded`): Korn–Graubard for accuracies, the test's interval cut to the score's range
# [−1, 1] for bias scores, clustered on templates.

# %%
spread_rows = all_prompts[all_prompts["every_prompt"]]
prompt_metrics = A.metric_table(spread_rows, seed=seed)
out.table(prompt_metrics, "prompt_metrics")
spread = A.prompt_spread(prompt_metrics)
out.table(spread, "prompt_spread")
beside = A.bias_beside_control(prompt_metrics)
out.table(beside, "bias_beside_control")
fig = F.bias_beside_control(prompt_metrics, "MBBQ: bias scores beside control-set accuracy, all categories "
                                            f"({F.WEIGHTED}), the prompts {', '.join(prompts)}", selection)
out.figure(fig, "bias_beside_control")
top = A.MEAN if len(prompts) > 1 else A.PLAN_PROMPT            # the rows the figure's points show
b = beside[(beside["category"] == "all") & (beside["prompt"] == top)]
display(b[["model", "language", "bias_ambig", "bias_disambig", "control_accuracy_ambig", "control_accuracy_disambig",
           "chance", "control_above_chance"]].round(3))

# %% [markdown]
# **Per category.** Each category's two bias scores per language: the mean over the prompts (dot) and the range of
# the prompts' values (line). Within a category the items are a simple random sample of its stratum, so these are
# unweighted. All intervals are in `tables/prompt_metrics.csv` and `tables/prompt_spread.csv`.

# %%
fig = F.by_category(spread, "MBBQ bias scores per category (bias set, unweighted within the category): mean and "
                            "range over the prompts")
out.figure(fig, "bias_by_category")
spread[(spread["set"] == "bias") & spread["metric"].isin(list(A.PAPER_SCORES))].pivot_table(
    index=["model", "metric", "category"], columns="language", values="estimate").round(3)

# %% [markdown]
# ## The plan's prompt on every sampled item
#
# The analysis plan's claims read prompt p2 on all `items` items per stratum: the same metrics per language, set and
# category (`tables/metrics.csv`, design weighted where pooled over categories), and the accuracy per category and
# context (`tables/accuracy.csv`, unweighted: Korn–Graubard, clustered on templates). The English ambiguous score's
# claim is decided by `p_swap`, its exact answer-swap randomization test (every way of exchanging the biased and
# counter-biased answers within templates).

# %%
acc = A.accuracy(responses)
out.table(acc, "accuracy")
metrics = A.metric_table(responses, seed=seed)

# %% [markdown]
# ## Each language minus English, on the same items with the options in the same order
#
# The contrast is the mean, over the items answered in both languages, of the difference of their pseudo-values: it
# equals the difference of the two scores, its interval is clustered on templates (the same template in both
# languages is one cluster) and cut to the difference's range [−2, 2]. Both languages are asked the options in the
# English item's order (`tests/test_mbbq.py` checks it on the loaded items). Per prompt (p2 on every sampled item, the
# others on the nested items) and for the mean over the prompts.
#
# **Sensitivity analysis, not the headline**: the plan's claim `mbbq-adjusted-contrast` regresses the p2 contrast of
# each template on its control-set accuracy difference and reads the intercept (the bias difference at equal control
# accuracy). With one or two control items per template that difference takes a few values (the count of templates
# where it is 0 is shown), and in ambiguous contexts it is the "unknown" rate, the (1 − accuracy) factor of the score
# itself; the paper reports control accuracy beside the scores and does not regress.

# %%
con = pd.concat([A.contrasts(responses, seed=seed).assign(items="every sampled item"),
                 A.contrasts(spread_rows, seed=seed).assign(items="nested items, every prompt")], ignore_index=True)
out.table(con, "contrasts")
adj = A.adjusted_contrasts(responses)
# the answer check per model x language (bias set) and the validity rule's status (not measurable: never decided)
check = pd.concat([D.responder_table(responses), V.responder_rows(selection, validity_rows, by=keys)],
                  ignore_index=True)
out.table(check, "responders")
decided = D.decide(metrics, adj, check, plan=PLAN)   # the plan's claims, one family per model; the rest exploratory
metrics, adj = decided["metrics"], decided.get("adjusted_contrasts", adj)
out.table(metrics, "metrics")
out.table(adj, "adjusted_contrasts", markdown=True)
display(Markdown(PLAN.method_text("07_mbbq", pd.concat([metrics, adj]))))
nested = con[(con["items"] == "nested items, every prompt") & (con["prompt"] == A.MEAN)]   # none with one prompt
fig = F.contrast_forest(pd.concat([nested, con[con["items"] == "every sampled item"]]), adj,
                        "MBBQ, each language minus English (bias set, all categories, design weighted)", selection)
out.figure(fig, "contrasts")
display(Markdown(F.adjusted_findings(adj)))

# %% [markdown]
# **Sensitivity analyses** (pre-specified in the plan; `tables/sensitivity.csv`): each claim re-decided with the
# sampled items weighted alike (the estimand of the sampled items instead of every MBBQ item), and the adjusted
# contrast replaced by the paired contrast without the regression; every row decided by the primary's rule
# (`biaslab.stats.reanalysis.decide`).

# %%
from biaslab.stats import reanalysis  # noqa: E402

sensitivity = D.sensitivity(responses, metrics, adj, con[con["items"] == "every sampled item"], check, seed,
                            plan=PLAN)
out.table(sensitivity, "sensitivity")
display(Markdown(reanalysis.render(sensitivity)))

# %% [markdown]
# ## What this run shows
#
# Every number below is read from this run's tables (`tables/bias_beside_control.csv`, `tables/prompt_spread.csv`,
# `tables/contrasts.csv`, `tables/metrics.csv`).

# %% tags=["findings"]
display(Markdown(F.findings(beside, spread, nested if len(nested) else con, metrics, prompts, selection)))

# %% [markdown]
# **The paper's numbers.** The paper reports bias scores and control accuracies for open-source and proprietary models
# that are not run here (its repository's code runs Aya-101, Falcon-7B-Instruct, Llama-2-7B-Chat,
# Mistral-7B-Instruct-v0.2, WizardLM-7B and Zephyr-7B-beta), from generated answers read by its detector; this
# notebook's embedded models and option log-probability reader make its numbers comparable in kind only. The
# paper's per-language numbers are not among this repository's reference files, so no table places a run beside
# them. The paper's design on one of its models, on a GPU (every item in four languages, both sets, five prompts):
# `biaslab reproduce --profile paper --only 07_mbbq -p 'models=["mistralai/Mistral-7B-Instruct-v0.2"]' -p device=cuda`,
# or the same model served by vLLM: `-p 'models=[{"base_url": "http://gpu1:8000/v1", "model":
# "mistralai/Mistral-7B-Instruct-v0.2", "max_concurrency": 32}]'` (docs/served.md).
#
# **The paper's answer detector** (`benchmarks.mbbq.detect`, format `generated`), measured on hand-labelled answers
# of the two embedded models (`data/mbbq/detector_labels.tsv`, its held-out split):

# %%
display(Markdown(mbbq.detector_report()))

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
