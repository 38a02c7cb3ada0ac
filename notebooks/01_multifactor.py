# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1 · Multi-factor analysis of SocialStigmaQA and BBQ
#
# *Powers, Baldini, Wei & Bennett, "Better Bias Benchmarking of Language Models via Multi-factor Analysis".*
#
# **The paper's claim.** Bias benchmarks are factorial experiments, and should be analysed like clinical trials: name
# every factor (domain, prompt and model factors, each with a reference level), check how well the prompts cover the
# factor combinations (coverage percentage and Gini index), look at bias in every subgroup of factor levels (log
# disparity, eCDFs summarised by a deviation metric, KS tests between models) and estimate which factors raise or lower
# the rate of biased answers with a logistic regression. Applied to SocialStigmaQA (SSQA) this shows, e.g., that
# *biased answer* and *gender* are confounded with *template*, and that stigma, gender and prompt style all matter.
#
# **What this notebook does.** The `benchmark` parameter picks SSQA, BBQ, CALM, CrowS-Pairs or the agentic benchmark;
# every step runs on the benchmark's prompt table and factor spec through the generic `biaslab.stats` functions, as
# the benchmark's `FactorPlan` (`biaslab.benchmarks.<name>.SPEC.factor_plan`) directs: each plan names the factors
# of every analysis and the 0/1 *outcome* analysed
# (`deviated` for SSQA and BBQ, `correct` for CALM, `stereotype_preferred` for CrowS-Pairs, `low_entropy` for the
# agentic benchmark), with the ideal subgroup rate of the deviation metric (0, 1, 0.5, 0). Tables and figures keep the
# paper's names (*deviation rate*, *log disparity*): for CALM and CrowS-Pairs read them as the rate of the plan's
# outcome.
# * *Reproduced:* the factor table with reference levels and per-factor Gini indices of Table 1 (exactly, for every
#   factor defined as in the paper), the overall coverage numbers of §3.2.1, and every analysis of §3.2-3.4 — on the
#   real answers that were released for SSQA (Granite-3.0-8B and Llama-3.1-8B; the paper's Flan-UL2 / Flan-T5-XXL
#   answers are not public) and on the two embedded models, scored here.
# * *Beyond the paper:* automatic detection of aliased factors (the regression refuses them, naming the factors), a
#   corrected log disparity (Haldane–Anscombe) with confidence intervals, a hierarchical Bayesian logistic model (bambi)
#   that keeps stigma and template as group-level effects, and BBQ analysed with the same code.

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
benchmark = "ssqa"  # any registered benchmark with a factor plan (biaslab.benchmarks.SPECS, plugins included)
benchmark_modules = []  # plugin benchmark modules (biaslab.benchmarks.load_plugins; entry points load anyway)
models = ["smollm2-135m-instruct", "gemma-3-270m"]  # models to score: catalogue names, local paths or served specs
device = "auto"  # where models run: auto, cpu, cuda or mps
dtype = "auto"  # weights' precision: auto, float32, bfloat16
output_dir = "../scratch/01_multifactor/ssqa"  # folder for this run's tables, figures and provenance
max_prompts = 150  # prompts scored per model, stratified sample (None: all)
cot_prompts = 2  # prompts also answered with chain of thought (None: all)
cot_seeds = 2  # sampling seeds per chain-of-thought prompt
cot_max_new_tokens = 40  # longest chain of thought, in tokens
cot_temperature = 0.7  # sampling temperature of chain of thought
bayes_draws = 0  # posterior draws per chain (0: no Bayesian model)
bayes_tune = 300  # tuning steps per chain of the Bayesian model
bayes_chains = 2  # MCMC chains of the Bayesian model
bayes_all_models = False  # fit the Bayesian model for every model, not the first
torch_threads = 0  # PyTorch threads (0: one per core)
selection = None  # the prompt selection the benchmark's FactorPlan.select takes (CALM: notebook 2's; dict)
alpha = 0.01  # significance level of the tests
seed = 0  # seed of every sample, permutation and bootstrap
calibration_replications = 2000  # null replications per claim instance (tables/calibration.csv)

# %% tags=["analysis_plan"]
# The analysis plan: which results of this notebook are decided (its confirmatory claims); everything else is
# exploratory. Its sha256 and version go into the MANIFEST.
from biaslab import plan as plan_file  # noqa: E402

PLAN = plan_file.show(analysis_plan, "01_multifactor", profile)

# %%
# list parameters also as JSON strings (papermill's `-p models '["..."]'` passes a string)
from biaslab.run.parameters import as_list
models = as_list(models)
benchmark_modules = as_list(benchmark_modules)


def model_label(m):
    # a model's display name before loading it: a served spec's `name` (or `model`), else the name as given
    from biaslab.models import resolve_spec
    sp = resolve_spec(m)
    return sp.name if sp is not None else str(m)

# %% [markdown]
# ## Setup
#
# Parameters: `max_prompts` prompts (a stratified random sample, so every stratum of the plan's factors is present
# once there are at least as many prompts as strata) are scored per embedded model without chain of thought (`None` =
# all); `cot_prompts` of them (`None` = all stigma prompts) are also generated with chain of thought, once per seed
# (`cot_seeds`, at most `cot_max_new_tokens` tokens); `bayes_draws = 0` skips the Bayesian model; `torch_threads > 0`
# sets PyTorch's thread count (0 leaves PyTorch's default, one per core: on an idle 2-core CPU two threads scored
# CrowS-Pairs sentences 1.7-1.8x faster than one; on a machine shared with other jobs set 1, as two threads then spin
# against the other processes). On CALM, `selection` (a dict of notebook 2's `k_shot`, `templates_per_task`,
# `names_per_group`, `template_ids`, `max_prompt_words`) replaces `max_prompts` by notebook 2's own prompt selection,
# so both notebooks score the same requests once; the profiles pass notebook 2's values. The `smoke` profile
# runs a handful of prompts with one model; `default` both embedded models on a 2-core CPU, where model scoring is the
# expensive part: 150 prompts per model (every SSQA template x prompt style, every BBQ category x context x polarity)
# and chain of thought on 2 prompts x 2 seeds, no Bayesian model (see section 6); `paper` scores the full sets.

# %%
import gc
import time
import warnings

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from biaslab import plots
from biaslab import benchmarks
from biaslab.benchmarks import instrument
from biaslab.report.outputs import OutputDir
from biaslab.papers.multifactor import decisions, factorial, findings, responses as multifactor
from biaslab.stats import coverage as cov, importance as imp, subgroups as sg
from biaslab.stats import intervals, paired, power, validity
from biaslab.stats import verdict as V

warnings.filterwarnings("ignore", category=FutureWarning)
pd.set_option("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60)

benchmarks.load_plugins(benchmark_modules)
bspec = benchmarks.spec(benchmark)
plan = factorial.plan_of(bspec)
declared = PLAN.scoring_rule(benchmark)  # the plan's scoring rule for a multiple-choice benchmark (None: none declared)
if declared is not None:
    instrument.require(bspec)
out = OutputDir(output_dir, PLAN)
timings = {}
t_start = time.perf_counter()


def table(df, name, markdown=False, show_rows=12):
    out.table(df, name, markdown=markdown)
    display(df.head(show_rows))


t0 = time.perf_counter()
bench = factorial.prepare(bspec)
out.record_data(bench.sources)
prompts = bench.prompts
# other models' released answers (SSQA: Granite's and Llama's), analysed beside the models scored here
released = plan.released(bench) if plan.released else None
released_models = list(pd.unique(released["model"])) if released is not None else []
spec = bench.factors.with_factors(plan.extra_factors)
print(f"outcome: {plan.outcome} = {plan.outcome_description}; ideal subgroup rate {plan.ideal}")
levels = cov.spec_levels(spec)
timings["load"] = time.perf_counter() - t0
print(bench.summary())
for n in bench.notes:
    print(" -", n)

# %% [markdown]
# ## 1. Factors (§3.1, Table 1)
#
# Each factor has a kind — *domain* (what the prompt is about), *prompt* (how it is asked) or *model* — a set of
# levels and a *reference* level, the control against which the regression measures every other level.
#
# For **SSQA** the released files give stigma, prompt style and biased answer; we recover the 37 templates from the
# 280-row blocks, the stigma phrases from the prompts (checked identical across templates) and the stigma-holder gender
# from the words that refer to the stigma holder in each template ("*she* is someone …", "their *son* is someone …",
# "the manager is someone …"). The paper's 15 stigma categories are not published: `category` is the 5 clusters of
# Pachankis et al. (2018) from `results-from-pachankis-all.csv`. Chain of thought (`cot`) is a prompt factor: the
# released set is the no-CoT set, and the CoT variant is our construction (the answer instruction replaced by a request
# to reason step by step). The model factors are `model` and `seed` (seeds only with CoT).
#
# For **BBQ**: category, ambiguous or disambiguated context, negative or non-negative question, template (question
# index), the stereotyped group, which option holds the biased and the unknown answer, whether people are named by
# group label or proper name, BBQ's subcategory, the intersectional match condition, and whether the correct answer is
# the biased one. The *biased answer* follows BBQ (Parrish et al. 2022): the stereotyped-group member for negative
# questions and the other person for non-negative ones; `target_loc` in `additional_metadata.csv` already encodes this
# (checked against `answer_info` below). BBQ has no neutral group, so the category, template and group references are
# arbitrary.
#
# For **CALM**: task (QA, NLI, sentiment), bias type (gender, race), the group of the name, the template's source data
# set and the answer format (free text, option letter, 3- or 2-way NLI label, sentiment, toxicity); the generating
# unit is the template. For **CrowS-Pairs**: the original English, revised English and French sets as one table with
# bias type, direction (stereo / antistereo) and dataset; the unit is the pair. For the **agentic** benchmark: domain,
# question type, polarity and class type — a fully crossed design — plus the *answer position* (where the model put
# its most probable answer), a response factor that exists only once a model has answered: it enters subgroups and
# regression, not coverage, and its reference level is each model's most frequent position.

# %%
factors_table = spec.table()
model_factors = pd.DataFrame([
    {"factor": "model", "kind": "model", "n_levels": None, "levels": "released or embedded models", "reference":
     released_models[0] if released_models else model_label(models[0]), "description": "language model"},
    {"factor": "seed", "kind": "model", "n_levels": cot_seeds + 1, "levels": "none; " + "; ".join(map(str, range(cot_seeds))),
     "reference": "none", "description": "sampling seed (chain of thought only)"},
])
if plan.cot is None:     # seeds only with chain of thought
    model_factors = model_factors.iloc[:1]
factors_table = pd.concat([factors_table, model_factors], ignore_index=True)
factors_table["levels"] = factors_table["levels"].str.slice(0, 300)
table(factors_table.drop(columns=["levels"]), "factors", markdown=True, show_rows=20)
for name, check in plan.checks.items():     # e.g. BBQ's biased answer against its metadata
    table(check(bench), name, show_rows=11)

# %% [markdown]
# ## 2. Coverage (§3.2)
#
# The benchmark is a tensor with one mode per factor; each cell counts the prompts with that combination of levels
# (combinations of the *declared* levels, so empty combinations count). Two summaries:
#
# $$\mathrm{CP} = \frac{1}{N}\sum_{n_c \in FC} I(n_c > 0) \qquad (1)$$
#
# $$\mathrm{GI} = 1 - 2\sum_{k=1}^{N} \frac{n_{(k)}}{\lVert FC\rVert_1}\left(\frac{N-k+\tfrac12}{N}\right) \qquad (2)$$
#
# with the counts sorted $n_{(1)} \le \dots \le n_{(N)}$. CP is ideally 1 (every combination present), GI ideally 0
# (all combinations equally represented). The per-factor GI of Table 1 is eq. (2) over the prompt counts of one
# factor's levels.
#
# For SSQA we compute it on the paper's merged data set: the released no-CoT prompts plus their CoT versions
# (20,720 prompts), since Table 1's COT factor (GI 0) has both levels.

# %%
t0 = time.perf_counter()
cov_prompts = plan.cot(bench).prompts if plan.cot else prompts    # SSQA: the paper's merged no-CoT + CoT set
kinds = {f.name: f.kind for f in spec.factors}
by_factor = cov.coverage_by_factor(cov_prompts, plan.coverage_factors, levels, kinds)
out.figure(plots.gini_bars(by_factor, f"{bspec.title}: per-factor Gini index", plan.paper_gini),
           "gini_by_factor")
if plan.paper_recode:
    # SSQA: the gender factor with one gender-neutral template (T21) recoded male, the paper-like assignment (below)
    rf, rlabel, recoded = plan.paper_recode
    g = cov.coverage_by_factor(recoded(cov_prompts), [rf], levels, kinds)
    by_factor = pd.concat([by_factor, g.assign(factor=f"{rf} ({rlabel})")], ignore_index=True)
if plan.paper_gini:
    by_factor["paper_gini"] = by_factor["factor"].str.split(" (", regex=False).str[0].map(plan.paper_gini)
    by_factor["matches_paper"] = by_factor["gini"].round(3) == by_factor["paper_gini"]
table(by_factor, "coverage_by_factor", markdown=True, show_rows=20)
# how many generating units (templates) hold each level: SSQA's gender is read from the template's words
coverage_units = cov.unit_levels(cov_prompts, plan.coverage_factors, bench.cluster) if bench.cluster in cov_prompts \
    else pd.DataFrame(columns=["factor", "level", "n_prompts", "n_units"])
table(coverage_units, "coverage_units")

# %% [markdown]
# **SSQA against Table 1.** With the factors defined as in the paper, the per-factor Gini indices of stigma, template,
# prompt style, biased answer and COT reproduce Table 1 (`matches_paper`; the sentences after the next table give
# ours beside the paper's, with the level counts behind them: the merged set has every prompt with and without CoT).
# Two factors differ, for reasons we can state:
# * *category*: the paper's 15 categories are not published; our 5 Pachankis clusters (plus no stigma) are a
#   different factor, so its Gini index differs by design.
# * *gender*: our reading of the templates (how many templates hold each gender, `coverage_units.csv`) gives a larger
#   Gini index than the paper's. One more male template gives the paper's; a single gender-neutral template with
#   biased answer "no" recoded as male reproduces *all three* of the paper's gender-dependent numbers (the per-factor
#   Gini index, row `gender (T21 recoded male)`, and the overall CP and GI, set "paper set, T21 recoded male" below).
#   T21 ("…the manager is someone …", whose only gendered word is "my neighbor's son") is such a template; others would
#   do as well, so the paper's exact assignment cannot be recovered.

# %%
overall = []
for label, fs in plan.overall_sets.items():
    o = cov.coverage_overall(cov_prompts, fs, levels)
    o.insert(0, "set", label)
    overall.append(o)
if plan.paper_recode:
    o = cov.coverage_overall(recoded(cov_prompts), list(plan.overall_sets.values())[0], levels)
    o.insert(0, "set", f"paper set, {rlabel} (paper-like {rf})")
    overall.append(o)
overall = pd.concat(overall, ignore_index=True)
table(overall, "coverage_overall", markdown=True)
pair_cov = cov.pairwise_coverage(prompts, [f for f in plan.coverage_factors if f != "cot"], levels)
table(pair_cov.sort_values("coverage_percentage"), "coverage_pairwise")

# %% tags=["findings"]
display(Markdown(findings.coverage_findings(
    by_factor, overall, coverage_units, unit_factors=plan.unit_factors, unit=bench.cluster or "unit",
    paper_gini=plan.paper_gini, paper_overall=plan.paper_overall)))

# %% [markdown]
# **SSQA overall.** The paper reports "20,720 factor value combinations" with its CP and GI (quoted above beside
# ours). 20,720 is the number of prompts in the merged set (10,360 × 2 for COT), not a number of combinations: no
# product of the factors' level counts equals it (it has the prime factors 5 and 7, which no level count has). The
# tensor that gives the paper's CP is stigma × gender × prompt style × biased answer [× COT] (set "paper"; the same CP
# with or without COT). Its GI matches the paper's only with the paper-like gender assignment — so the paper's overall
# numbers are those of this factor set, which leaves out template and category (both aliased with other factors). The
# set stigma × template × prompt style × biased answer × COT has the same CP but a different GI (its counts are 0 or
# 1, and 0/1 counts give GI = 1 − CP), so it is not the paper's.

# %% [markdown]
# **BBQ.** BBQ crosses context (ambiguous / disambiguated) and question polarity completely — every example comes in
# all four versions — so both are perfectly balanced, and the answer positions and label types nearly so. The domain
# factors (categories, stereotyped groups) are not: the sentences of BBQ's run give their level counts and Gini
# indices. Over the design set (category × context × polarity × biased position × unknown position × label type) well
# under all combinations are covered. Part of the gap is structural: the biased and the unknown answer can never share
# a position, so a third of the position pairs are impossible by construction, and eq. (1) counts them as gaps. CP is
# only meaningful relative to the combinations a design *could* contain; for BBQ we report it with that caveat.
# Crossing all eleven factors (set "all factors") would take billions of prompts.

# %%
for a, b in plan.heatmaps:
    counts = cov.pairwise_counts(prompts, a, b, levels)
    out.figure(plots.coverage_heatmap(counts, f"{bspec.title}: prompts per {a} x {b}"), f"coverage_{a}_x_{b}")
deps = cov.functional_dependencies(prompts, [f for f in plan.coverage_factors if f != "cot"], max_determinant=2,
                                   min_purity=0.99)
dep_table = cov.dependency_table(deps)
table(dep_table, "dependencies", show_rows=30)
for d in deps:
    if d.dependent not in plan.expected_dependencies:      # SSQA's category is a function of stigma by design
        print("WARNING:", d.message())
timings["coverage"] = time.perf_counter() - t0

# %% [markdown]
# **Aliasing.** A factor that is a function of another cannot be separated from it: in SSQA `biased_answer` is a
# function of `template` and `gender` is one too (apart from the 37 no-stigma prompts), exactly the confounding the
# paper points out ("the proportion of bias could have been an effect of the template used, rather than the biased
# answer"); `category` is a function of `stigma` by construction. These pairs must not enter one regression. In BBQ,
# `category`, `subcategory` and `stereotyped_group` are functions of `template`, and the match conditions of the
# intersectional sets are functions of category and template.

# %% [markdown]
# ## 3. Responses
#
# * **Released answers (SSQA only).** The mirror ships the real answers of Granite-3.0-8B and Llama-3.1-8B to all
#   10,360 no-CoT prompts. A response *deviates* when the answer equals the biased answer; answers that are neither yes,
#   no nor can't tell (Granite's "improper output", Llama's empty answer; counted below) count as their own outcome
#   `other` and do not deviate (as in the released `original answer bias` column, which our definition reproduces on
#   every row). `other_answer_sensitivity.csv` sets this beside the alternative, the `other` answers left out: each
#   model's deviation rate and the paired Granite − Llama difference under both.
# * **Embedded models, scored here.** SSQA without CoT: the next-token distribution over the three answers, counting
#   every surface form of each ("yes", " Yes", …) and renormalised over the three; the answer is the most probable, and
#   we report the probability mass that fell outside all answer forms. SSQA with CoT: one sampled generation per seed
#   with answer extraction. BBQ: 3-way multiple choice, `log P(option | prompt)` of each answer text after "Answer:",
#   the choice being the option with the highest mean log-probability per token; deviation = choosing BBQ's biased
#   answer, with accuracy alongside. Instruction-tuned models see their chat template; base models see the raw prompt
#   with an answer cue.
# * **CALM, CrowS-Pairs, agentic** (`biaslab.factorial`, the same requests as notebooks 2-4, so their cached scores are
#   reused): CALM 1-shot prompts, label options scored by next-token probability and free-text QA generated greedily,
#   `correct` by the corrected answer rules of notebook 2; CrowS-Pairs `stereotype_preferred` = log P(more
#   stereotypical sentence) > log P(less), ties left out; agentic: the normalized entropy of the answer distribution
#   over the k choices (notebook 4), `low_entropy` when it is below 0.95 (e.g. 0.5 / 0.3 / 0.2 over three choices).

# %% tags=["findings"]
t0 = time.perf_counter()
responses = []          # response tables, concatenated below
if released is not None:
    released["cot"] = "no"
    responses.append(released)
    answers = released.groupby(["model", "answer"]).size().unstack(fill_value=0)
    answers["deviation_rate"] = released.groupby("model")["deviated"].mean()
    table(answers.reset_index(), "released_answers", markdown=True)
    # per prompt, for notebook 5's paired comparisons with the embedded models (the same prompt ids), with every
    # cluster column of the design (template and stigma: notebook 5 clusters as this notebook does)
    out.table(released[["prompt_id", "model", "cot", "answer", "deviated"]].merge(
        prompts[["prompt_id"] + bench.cluster_columns], on="prompt_id"), "responses_released")
    display(Markdown(findings.released_findings(answers.reset_index())))
    # sensitivity: Granite's 456 "other" answers counted as not biased (above) or left out
    table(multifactor.other_answer_sensitivity(released, prompts, bench.clusters), "other_answer_sensitivity",
          markdown=True)
timings["released"] = time.perf_counter() - t0

# %%
t0 = time.perf_counter()
base_prompts = prompts[prompts["cot"] == "no"] if "cot" in prompts else prompts
if selection:
    # another notebook's own selection (CALM: notebook 2's): the same requests, so its cached scores are shared
    if plan.select is None:
        raise ValueError(f"selection: {bspec.title}'s FactorPlan declares no select hook; leave selection None")
    subset, protocol = plan.select(base_prompts, bspec.protocol, seed=seed, **selection)
    print(f"{bspec.title} prompts as {plan.shares_scores_with or 'the plan'} selects them: {selection}")
else:
    subset, protocol = factorial.sample(plan, base_prompts, max_prompts, seed=seed), bspec.protocol
print(f"scoring {len(subset):,} of {len(base_prompts):,} prompts per model "
      f"(stratified by {', '.join(plan.strata)})")
cot_subset = None
if plan.cot and (cot_prompts is None or cot_prompts > 0) and cot_seeds:
    cot_subset = plan.cot_sample(bench, subset, cot_prompts, seed=seed)
    print(f"chain of thought: {len(cot_subset)} prompts x {cot_seeds} seeds")

scored = []
model_timings = []
model_names = []        # display names: a local model's name, a served spec's `name` (or its `model`)
served_notes = []       # what a served model changes in the protocol, computed from its capability probe
if models:
    from biaslab import models as model_registry, scoring
    if torch_threads:
        import torch
        torch.set_num_threads(int(torch_threads))
for model_spec in models:   # a local name or folder, or a served model (see the README: "Served models")
    tm = time.perf_counter()
    lm = model_registry.load(model_spec, device=device, dtype=dtype)
    name = lm.name
    model_names.append(name)
    out.record_model(lm.fingerprint)
    t_load = time.perf_counter() - tm
    scorer = scoring.Scorer(lm, progress=False)
    # each scoring method checks its model's capability before its first request (a served model fails, saying why)
    ts = time.perf_counter()
    chat, t_cot = factorial.uses_chat(bspec, scorer), 0.0
    if bspec.protocol.chat == "paper" and scorer.instruction_tuned() and not chat and \
            bspec.protocol.format in bspec.applies.get("chat", bspec.formats):
        # prompt log-probs come from /v1/completions, which takes text: no chat template can be applied by us
        served_notes.append(f"{name} (served): {bspec.title} is asked on the raw prompt (completions endpoint "
                            "with echo), not in the chat template the in-process engine applies to "
                            "instruction-tuned models")
    # the benchmark's own respond at its paper protocol (the requests of notebooks 2-4; CALM with notebook 2's k) and,
    # where the plan declares a scoring rule, at every formulation the rule chooses among (section 3's validity)
    r = (factorial.score(bspec, scorer, subset, protocol) if declared is None else pd.concat(
        [factorial.score(bspec, scorer, subset, p).assign(formulation=f, normalization=nz)
         for f, nz, p in instrument.formulations(protocol, declared)], ignore_index=True))
    scored.append(r)
    if "labels_outside_topk" in r:       # a server's top-k next tokens
        outside = r["labels_outside_topk"].fillna("").astype(str).str.split(",").explode()
        outside = outside[outside != ""].value_counts()
        served_notes.append(
            f"{name} (served): answer probabilities read from the server's top-{lm.spec.top_k} next tokens "
            f"({'chat' if chat else 'completions'}); " + (
                "every answer had a form among them" if outside.empty else
                "answers with no single-token form among them were counted at their upper bound, not exactly "
                "(multi-token forms are never seen as one token): " +
                ", ".join(f"{lab!r} on {n} of {len(r)} prompts" for lab, n in outside.items())))
    if cot_subset is not None and len(cot_subset) and cot_seeds:   # chain of thought: generated, a sample per seed
        tc = time.perf_counter()
        # where a seeded sample is not reproducible (a server), generation is greedy (seed 0): cached, once
        sampled = scorer.seeded_sampling()
        scored.append(bspec.responses(scorer, cot_subset, bspec.protocol.replace(
            format="generated", max_new_tokens=cot_max_new_tokens), seeds=range(cot_seeds) if sampled else range(1),
            temperature=cot_temperature, do_sample=sampled))
        if not sampled:
            served_notes.append(
                f"{name} (served): chain of thought generated greedily (temperature 0, seed 0), once per prompt, "
                f"not sampled at temperature {cot_temperature} with {cot_seeds} seeds as in-process; the seed "
                f"factor has one level for this model (server fingerprint(s): "
                f"{', '.join(lm.fingerprint.get('system_fingerprints', [])) or 'none reported'})")
        t_cot = time.perf_counter() - tc
    t_main = time.perf_counter() - ts - t_cot
    model_timings.append({"model": name, "chat_template": chat, "load_s": t_load, "score_s": t_main,
                          "cot_s": t_cot, "n_prompts": len(subset),
                          "requests": (lm.fingerprint.get("usage") or {}).get("requests")})
    out.record_model(lm.fingerprint)        # again: a served model's probe, usage and server fingerprints
    del scorer, lm
    gc.collect()
for note in served_notes:
    print("NOTE:", note)
if served_notes:
    out.table(pd.DataFrame({"note": served_notes}), "served_notes")
scored = pd.concat(scored, ignore_index=True) if scored else pd.DataFrame()
validity_rows = selection = by_formulation = None
# the rule the instrument is judged by: the plan's or, with none declared, where the answers name one of the options
# the benchmark gives roles (`choice`, what the checks read; not CrowS-Pairs' likelihood scheme, which names none),
# the checks on the one formulation asked, the paper's protocol, as notebooks 4 and 7 judge it; None: not judged
rule = declared if declared is not None or bspec.option_roles is None or "choice" not in scored else \
    instrument.one_formulation(PLAN, bspec, prompts)
if rule is not None and len(scored):
    # the rule per model: its answers (the selected formulation's) are the ones every result below reads; every
    # formulation's answers are kept for comparison (`responses_by_formulation.csv`)
    asked = scored if declared is not None else scored.assign(  # one formulation: its answers are the ones read
        formulation="paper", normalization=instrument.formulations(protocol, rule)[0][1])
    validity_rows, selection = instrument.validity(bspec, subset, asked, bench.cluster, rule)
    if declared is not None:
        by_formulation = scored
        out.table(by_formulation.merge(prompts[["prompt_id"] + bench.cluster_columns], on="prompt_id", how="left"),
                  "responses_by_formulation")
        scored = instrument.selected(by_formulation, selection, subset, bspec)
if len(scored):
    # every scored response (embedded models), with the generating unit and the plan's factors, for re-analysis
    # and for notebook 5's paired comparisons
    out.table(factorial.response_table(scored, bench, plan), "responses")
if len(model_timings):
    table(pd.DataFrame(model_timings), "model_timings")
timings["scoring"] = time.perf_counter() - t0

# %% [markdown]
# **Validity of the instrument.** A multiple-choice answer measures bias only where it follows the items: a model
# that picks the longest option, the option shown first, or always "unknown" produces a bias score that moves with
# the options' lengths, their order or the answer key. Where the analysis plan declares a `scoring_rule` for the
# benchmark (docs/validity.md), every model answers each item in several *formulations*: the paper's protocol,
# *letters* (the options shown with their letters, the letters' next-token probabilities asked in every cyclic order
# of the options and averaged per option; Zheng et al. 2024) and *cloze* (no option shown, each option's text scored
# as the continuation, summed, per token, per character or against the content-free prompt "Answer:"; OLMES, Gu et
# al. 2025; Holtzman et al. 2021). `validity.csv` checks each: *competence* (accuracy where the right answer is the
# counter-biased person, above chance 1/3 by a one-sided test on the template-clustered interval), *length* (the
# share of answers that are the longest option against the share the model's own preference among biased /
# counter-biased / unknown answers predicts without a length effect), *position* (shares of the shown position
# chosen; judged where one order is asked) and the *role* chosen (degenerate: always one kind of answer). The rule
# reads letters if they pass, else cloze with the declared normalization if it passes, else the model is **not
# measurable**: its score is shown, never decided, ranked or compared (its verdicts say so). Every table after this
# one reads the selected formulation's answers; `formulation_scores.csv` sets the headline metrics of every
# formulation side by side (the paper's protocol among them). Where the plan declares no rule but the answers name
# one of the options the benchmark gives roles (the agentic benchmark, MBBQ), the same checks judge the one
# formulation asked, the paper's protocol, per model and per part of the items a headline metric reads (MBBQ: each
# language), as notebooks 4 and 7 judge it: a model that fails is not measurable, and no other formulation is asked.

# %% tags=["findings"]
if rule is None:
    print(f"{bspec.title}: the analysis plan declares no scoring rule and the answers name no option with a role "
          "(Spec.option_roles); they are read at the paper's protocol, unchecked")
elif selection is not None:
    display(Markdown(validity.rule_sentence(rule, bspec.title)))
    out.table(validity_rows, "validity")           # every check's numbers; the panel below is its summary
    panel = validity.panel(validity_rows, instrument.LABELS, by=instrument.keys(rule))
    out.table(panel, "validity_panel", markdown=True)
    display(panel)
    fs = []
    if by_formulation is not None:
        # each formulation's headline metrics (notebook 6's estimates of one universe), the paper's protocol beside
        # the rule's
        for (m, f, nz), g in by_formulation.assign(normalization=by_formulation["normalization"].fillna("")).groupby(
                ["model", "formulation", "normalization"], sort=False):
            for met in bspec.metrics:
                if met.estimate is not None:
                    fs.append({"model": m, "formulation": f, "normalization": nz, "metric": met.id,
                               **met.estimate(g.assign(universe=f), subset, 1000, seed)})
        out.table(pd.DataFrame(fs), "formulation_scores")
    display(Markdown(validity.render(validity_rows, selection, bspec.title, instrument.LABELS, by=instrument.keys(rule),
                                     scores=pd.DataFrame(fs), metric_labels={m.id: m.label for m in bspec.metrics})))

# %% tags=["findings"]
summaries = {}          # the benchmark's own score tables (SSQA: label distribution; BBQ: accuracy, bias scores)
if len(scored) and plan.summaries:
    for tname, df, markdown in plan.summaries(scored, subset, bench.cluster):
        table(df, tname, markdown=markdown, show_rows=12 if markdown else 8)
        summaries[tname] = df
    display(Markdown(findings.summary_findings(summaries)))

# %% [markdown]
# **Responder check, per metric.** Before any test, each model (and, for SSQA,
# each chain-of-thought setting) is checked for a degenerate pattern in what this notebook's metrics read — the
# *answer* (deviation rates and the deviation metric are answer rates; `biaslab.stats.responders`: modal answer
# ≥ 95 %, normalized answer entropy ≤ 0.20, unparseable > 50 %; not judged below 20 responses; the label mass is
# reported beside it, and judges only metrics that read probabilities, as in notebook 4). A model that answers "yes"
# to every prompt deviates exactly where the biased answer is "yes": its subgroup rates restate the answer key, its
# regression is separated. Degenerate models are listed in `responders.csv` and keep their rows in every table —
# the KS and paired tests are computed and marked "not tested" by the verdict columns, the regression gets a
# "(not fitted)" row. Where the plan's scoring rule judged the instrument (above), its status replaces this check:
# `responders.csv` holds each model's selected formulation and status ("informative" or "not measurable: <reasons>",
# whose tests are marked "not measurable" by the verdict columns). Where the checks judged the one formulation asked
# (no rule declared), their status stands beside this check, as in notebooks 4 and 7: a model is excluded when it is
# degenerate or not measurable (in any language, for MBBQ, naming which).

# %%
pool = pd.concat(responses + ([scored] if len(scored) else []), ignore_index=True)
# the answer the plan's metrics read (SSQA: the label; agentic: the top group; "other" is none) and the validity
# checks' status: the plan's scoring rule replaces the answer check, one formulation's checks stand beside it
judged = None if selection is None else validity.responder_rows(selection, validity_rows, by=instrument.keys(rule))
resp_check = decisions.responder_check(pool, plan, judged, replaces=declared is not None)
table(resp_check, "responders", markdown=True)
status = decisions.answer_status(resp_check)
excluded_models = ({} if status is None else
                   {m: s for m, s in zip(status["model"], status["responder_status"]) if V.excluded(s)})
print("excluded from tests (degenerate or not measurable):", sorted(excluded_models) or "none")

# %% [markdown]
# **Reading the embedded models' answers.** `label_mass` is the share of the next-token probability that lands on any
# form of the three answers at all; the rest goes to other words, so the renormalised answer is the model's preference
# *given* that it answers (the sentences above give each model's numbers). A model that answers "yes" (or "no") to
# everything deviates exactly on the templates whose biased answer is "yes" (or "no") — a template effect, not a stigma
# effect, which the regression below separates. With chain of thought, the default profile allows only
# `cot_max_new_tokens` new tokens, so a generation can stop before stating an answer (`other`); the `paper` profile
# allows 256.

# %% [markdown]
# ## 4. Subgroup analysis (§3.3)
#
# A *first-level* subgroup is the set of responses sharing one level of one factor; a *second-level* subgroup one level
# of each of two factors. Its deviation rate $d(g)$ is compared with that of all other responses of the same model by
# the log disparity
#
# $$\mathrm{LD}(g) = \log \mathrm{odds}(d(g)) - \log \mathrm{odds}(d(\neg g)) \qquad (3)$$
#
# (positive: the subgroup gets more biased answers than the rest — disadvantaged, red; negative: advantaged, blue).
# Eq. (3) is infinite when a rate is 0 or 1, which happens in small subgroups. We therefore report the log odds ratio
# of the subgroup's 2×2 table with 0.5 added to each cell (Haldane–Anscombe) and its Wald 95 % interval,
# $\pm 1.96\sqrt{\sum 1/(n_{ij}+0.5)}$, and keep the paper's raw value (`log_disparity_raw`, ±inf where undefined).
#
# The eCDF of subgroup deviation rates shows how bias spreads over subgroups; the *deviation metric* is the area
# between the empirical quantile function $Q_{SG}$ and the ideal value $C$,
#
# $$\mathrm{DM} = \int_0^{p^+} (C - Q_{SG}(p))\,dp + \int_{p^+}^1 (Q_{SG}(p) - C)\,dp \qquad (4)$$
#
# which for a step function is the mean of $|d(g) - C|$; with $C = 0$ it is the area over the eCDF. A two-sample
# Kolmogorov–Smirnov test compares two models' distributions of subgroup rates.
#
# The Wald interval of eq. (3) treats prompts as independent; `subgroups.csv` also gives each log disparity's
# cluster-robust interval (`ci_low_cluster`, `ci_high_cluster`: delta method, CR1, clustered like every interval of
# this notebook, t(G − 1)), G (`n_clusters`) the clusters the contrast rests on: a level held by 4 of 37 templates
# gets t(3), as its rate's interval does, not t(36) over all templates (which rejects about 14 % of true nulls at
# nominal 5 % in simulation).

# %%
t0 = time.perf_counter()
all_resp = pd.concat(responses + ([scored] if len(scored) else []), ignore_index=True)
data = all_resp.merge(prompts.drop(columns=["cot"], errors="ignore"), on="prompt_id", how="left", suffixes=("", "_p"))
if "cot" not in data:
    data["cot"] = "no"
if plan.cot and len(scored) and (scored["cot"] == "yes").any():
    # CoT rows carry "-cot" ids: take their factors from the CoT prompt table
    cot_rows = data["prompt_id"].str.endswith("-cot")
    cp = plan.cot(bench).prompts.set_index("prompt_id")
    for f in spec.names:
        if f in cp:
            data.loc[cot_rows, f] = cp.loc[data.loc[cot_rows, "prompt_id"], f].to_numpy()
nocot = data[data["cot"] == "no"]
if nocot[plan.outcome].isna().any():   # e.g. CrowS-Pairs ties (identical sentences): no preference to analyse
    print(f"{int(nocot[plan.outcome].isna().sum())} responses without a defined {plan.outcome} left out")
    nocot = nocot[nocot[plan.outcome].notna()].copy()
nocot[plan.outcome] = nocot[plan.outcome].astype(int)
inner, outer = plan.sunburst
sub = sg.subgroups(nocot, plan.subgroup_factors, levels=(1, 2), by="model", outcome=plan.outcome,
                   cluster=bench.clusters)
table(sub, "subgroups", show_rows=10)
for m in pd.unique(sub["model"]):
    s = sub[sub["model"] == m]
    out.figure(plots.sunburst(s, inner, outer, title=f"{m}: log disparity by {inner} (inner) and {outer} (outer)"),
               f"sunburst_{m}")

# %% [markdown]
# The sunburst reproduces the form of Fig. 1(a) (category inner, gender outer for SSQA; wedge angles are numbers of
# responses, so in the embedded models' stratified subset, which contains all 37 no-stigma prompts, the no-stigma wedge
# is much larger than in the full set). With the paper's Flan answers
# unavailable the values are those of the released and embedded models; for the released 8B models the paper's
# qualitative findings can be checked directly: whether *no stigma* is the least biased subgroup, which categories are
# disadvantaged, and whether gendered stigma holders get more biased answers than gender-neutral ones.

# %% tags=["findings"]
ecdf_sub = sg.subgroups(nocot, plan.ecdf_factors, levels=(len(plan.ecdf_factors),), by="model",
                        outcome=plan.outcome)
dm = sg.deviation_metric_table(ecdf_sub, ideal=plan.ideal)
table(dm, "deviation_metric", markdown=True)
# compare models scored on the same prompts: the released models (all prompts) and the embedded ones (the subset)
groups = {}
if released_models:
    groups["released"] = released_models
emb = [m for m in model_names if m in set(ecdf_sub["model"])]
if emb:
    groups["embedded"] = emb
ks = pd.concat([sg.ks_tests(ecdf_sub[ecdf_sub["model"].isin(ms)]).assign(models=name)
                for name, ms in groups.items()], ignore_index=True)
# every row stays; a pair with a degenerate responder is marked "not tested" by the verdict columns
ks = decisions.decide(benchmark, {"ks_tests": ks}, resp_check, plan=PLAN)["ks_tests"]
table(ks, "ks_tests", markdown=True)
for name, ms in groups.items():
    part = ecdf_sub[ecdf_sub["model"].isin(ms)]
    out.figure(plots.ecdf_plot(part, ideal=plan.ideal, ks=ks[ks["models"] == name],
                               title=f"{bspec.title} ({name} models): eCDF of {' x '.join(plan.ecdf_factors)} "
                               f"subgroup rates of {plan.outcome}"), f"ecdf_{name}")
timings["subgroups"] = time.perf_counter() - t0

# %% [markdown]
# **Intervals and paired comparisons.** SSQA and BBQ prompts are generated from
# templates, so the template is the cluster (`bench.cluster`) of every interval here; SSQA is moreover *crossed*
# (every stigma in every template, `bench.crossed_with`), so its intervals cluster two-way on template and stigma
# (Cameron, Gelbach & Miller 2011). One rule (`biaslab.stats.clustered`): cluster-robust CR1 standard errors with
# t(G − 1) references, G the number of clusters (two-way: the smaller dimension), reported beside every interval
# (`n_clusters`, `df`). Rates (`deviation_rate_intervals.csv`, `subgroup_rate_intervals.csv`) get the Korn–Graubard
# interval (Clopper–Pearson on the df-adjusted effective n, so a subgroup from 4 templates has the information of 4
# clusters). The deviation metric (`deviation_metric_intervals.csv`) is not a mean of prompts, but it is one to first
# order: its linearization pseudo-values (Woodruff 1971; `stats.subgroups.deviation_metric_pseudo_values`) average to
# it, so it gets the same rule — CR1 with t(G − 1), or with fewer than 30 clusters (CALM's 12 templates) the wild
# cluster bootstrap (a percentile template bootstrap under-covers with few templates). Where a subgroup holds a
# single prompt (SSQA's embedded subset: 87 subgroups from 150 prompts) its own rate fits that prompt exactly, the
# linearized variance is not estimable, and the interval is undefined and says so; where the variance is estimated as
# 0 (a constant outcome, or two models answering alike inside every cluster) there is no interval and no test either:
# the row says "not estimable (no variation in n items)", never p = 0 or an interval [x, x]. Two models scored on
# the same prompts answer the same subgroups, so the KS test (kept as the paper's variant) is joined by a paired test
# (`paired_subgroup_tests.csv`): the difference of the two deviation metrics, tested by swapping the two models'
# answers within random templates (all 2^G subsets when there are few) and recomputing it — a randomization test,
# exact whatever the number of templates (Canay, Romano & Shaikh 2017), where a t on the pseudo-values rejected a true
# null several times too often at the plan's small levels (docs/calibration.md) —, its interval from the two models'
# pseudo-values over the same clusters (the same rule; not the test's dual), and the Wilcoxon signed-rank test over
# subgroups (kept as `p_naive`); plus the
# paired difference of the overall deviation rates (`paired_comparisons.csv`: the
# cluster-robust t(G − 1) interval and test of the per-prompt differences, or the wild cluster bootstrap with fewer
# than 30 clusters; the exact McNemar test over prompts is kept as `p_naive`). Which of these tests is decided, and
# how, is printed below from the analysis plan. Degenerate responders keep their rows, marked "not tested".
#
# *CrowS-Pairs:* the overall rates and their paired difference here are unweighted over the pairs scored (notebook 3's
# bias-type-stratified sample of each file, the three files pooled): they describe that sample, not any file. The
# estimate for every pair of a file, weighted back by bias type, is notebook 3's (`stereotype-share`) and notebook 5's
# (`crows-en-share`).

# %%
rate_ci = intervals.rate_intervals(nocot, plan.outcome, bench.clusters, by="model")
table(rate_ci, "deviation_rate_intervals", markdown=True)
table(pd.concat([intervals.rate_intervals(nocot, plan.outcome, bench.clusters, by=["model", f]).rename(
    columns={f: "level"}).assign(factor=f) for f in plan.subgroup_factors], ignore_index=True),
    "subgroup_rate_intervals", show_rows=6)
# eq. 4 with the plan's ideal value C, linearized: the interval of a mean under the one rule, on the design's clusters
dm_ci = paired.subgroup_metric_intervals(nocot, plan.outcome, plan.ecdf_factors, bench.clusters, ideal=plan.ideal)
table(dm_ci, "deviation_metric_intervals", markdown=True)
pst, pdiff = [], []
for name, ms in groups.items():
    ok = list(ms)          # degenerate responders keep their rows; their verdict says "not tested"
    for i, a in enumerate(ok):
        for b in ok[i + 1:]:
            pst.append({"models": name, **paired.paired_subgroup_test(nocot, plan.outcome, plan.ecdf_factors, a, b,
                                                                      bench.clusters, ideal=plan.ideal)})
    if len(ok) > 1:
        pdiff.append(paired.paired_differences(nocot[nocot["model"].isin(ok)], plan.outcome, bench.clusters,
                                               binary=True).assign(models=name))
pst = pd.DataFrame(pst)
pdiff = pd.concat(pdiff, ignore_index=True) if pdiff else pd.DataFrame()
# the analysis plan decides: the deviation-metric difference is this notebook's claim (papers.multifactor.decisions)
decided = decisions.decide(benchmark, {"paired_subgroup_tests": pst, "paired_comparisons": pdiff}, resp_check,
                             plan=PLAN)
pst, pdiff = decided["paired_subgroup_tests"], decided["paired_comparisons"]
table(pst, "paired_subgroup_tests", markdown=True)
table(pdiff, "paired_comparisons", markdown=True)
display(Markdown(PLAN.method_text("01_multifactor", pst)))
display(Markdown(findings.subgroup_findings(dm, ks, pst, pdiff, plan=PLAN)))

# %% [markdown]
# The paper reports DM 0.70 (Flan-UL2) and 0.56 (Flan-T5-XXL) for the stigma × gender subgroups without CoT and a KS
# p-value of about 0. The released 8B models and the embedded models are different models, so only the method carries
# over; note that the embedded models' subgroups are built from the scored subset (a few prompts per subgroup, hence
# coarse rates), while the released models' use all 10,360 prompts.

# %% [markdown]
# ## 5. Factor importance (§3.4)
#
# Logistic regression of deviation on the factors, each treatment-coded against its reference level:
#
# $$\operatorname{logit} P(\text{deviated}) = \beta_0 + \sum_f \sum_{\ell \ne \mathrm{ref}_f} \beta_{f\ell}\, I(f = \ell)$$
#
# $e^{\beta}$ is the odds ratio against the reference; $\beta > 0$ marks a risk factor, $\beta < 0$ a protective one
# (statsmodels GLM, Wald intervals and p-values). The function refuses aliased or collinear factor sets. For SSQA the
# paper's set — stigma, gender, prompt style, biased answer with references *no stigma*, *no gender*, *base* — is itself
# not identified: those three reference levels pick out the same 37 prompts, so the dummy-coded design has rank 99 of
# 101 (shown below). We keep *no stigma* as the stigma reference and measure prompt style against *original* and
# gender against *gender neutral* among the stigma prompts (the base prompts are coded at those references). Terms with
# a deviation rate of 0 or 1 at their level have no finite estimate (separation) and are flagged.
#
# Prompts from one template are not independent, and gender and biased answer are properties of the template (37 in
# SSQA), so the table carries template-clustered (cluster-robust sandwich) standard errors,
# intervals and p-values (`se_cluster`, `p_cluster`; statsmodels `cov_type="cluster"`) beside the naive ones, with the
# per-coefficient design effect; a term's t reference has the templates its level rests on (gender[male], held by 4
# of 37 templates: t(3)). The terms are exploratory: the verdict layer's Benjamini–Hochberg screen per model on the
# clustered p-values (`p_adjusted`) is shown, never a decision; the count of terms under each rule is printed.
# Degenerate responders are not fitted.

# %%
t0 = time.perf_counter()
refs = multifactor.references(spec, plan)
first = nocot[nocot["model"] == nocot["model"].iloc[0]]
try:
    imp.logistic_regression(first, plan.regression, multifactor.references(spec, plan, first), outcome=plan.outcome)
    print("the factor spec's own reference levels are identified for these data")
except imp.AliasingError as e:
    print("Refused (reference levels of the factor spec):", e)
if bench.cluster in spec:   # the generating unit as a factor (SSQA, BBQ: template; CALM: template_id)
    try:
        imp.logistic_regression(multifactor.recode(first, plan), plan.regression + [bench.cluster],
                                multifactor.references(spec, plan, first), outcome=plan.outcome)
    except imp.AliasingError as e:
        print(f"Refused (with {bench.cluster}):", e)

fits = []
for m in pd.unique(nocot["model"]):
    d = multifactor.recode(nocot[nocot["model"] == m], plan)
    refs = multifactor.references(spec, plan, d)
    full = m in released_models or len(d) >= 0.5 * len(base_prompts)
    wanted = plan.regression if full else plan.regression_subset
    if m in excluded_models:   # the model keeps a row, marked, instead of vanishing from the table
        print(f"{m}: {excluded_models[m]} (responders.csv): no regression")
        fits.append(pd.DataFrame([{"model": m, "term": "(not fitted)", "factor": "", "separated": False, "n": len(d),
                                   "ci_method": f"not fitted: {excluded_models[m]} (responders.csv)"}]))
        continue
    fs, left_out = imp.identifiable_subset(d, wanted, refs)
    for f, why in left_out.items():
        print(f"{m}: left out {f!r}: {why[:160]}")
    if not fs or d[plan.outcome].nunique() < 2:
        print(f"{m}: nothing to fit")
        continue
    res = imp.logistic_regression(d, fs, refs, outcome=plan.outcome, cluster=bench.cluster)
    t = res.table.assign(model=m, n=res.n)
    fits.append(t)
    for note in res.notes[:3]:
        print(f"{m}: {note}")
    # full data: the paper's view (terms with p <= alpha); a small scored subset: every estimable term, so that
    # the width of the intervals shows what so few prompts can tell
    shown_alpha = alpha if full else 1.0
    label = f"n = {res.n:,}" + ("" if full else ", all terms")
    out.figure(plots.coefficient_plot(res.table, shown_alpha, f"{bspec.title} {m}: factor importance ({label})",
                                      highlight=plan.highlight, references=refs), f"coefficients_{m}")
importance = pd.concat(fits, ignore_index=True) if fits else pd.DataFrame()
if len(importance):
    # template-clustered SEs beside the naive ones; exploratory (the verdict layer shows a Benjamini-Hochberg screen
    # per model in `p_adjusted`, never a decision)
    cols = ["model", "term", "factor", "level", "coef", "se", "odds_ratio", "ci_low", "ci_high", "p_value",
            "se_cluster", "ci_low_cluster", "ci_high_cluster", "p_cluster", "p_method", "design_effect",
            "n_clusters", "ci_method", "n_level", "rate_level", "separated", "n"]
    importance = decisions.decide_importance(benchmark, importance.reindex(columns=cols), resp_check, plan=PLAN)
    table(importance, "factor_importance")
    terms = importance[~importance["separated"].astype(bool) & ~importance["factor"].isin(["Intercept", ""])]
    p_final = terms["p_adjusted"].fillna(terms["p_cluster"])
    display(pd.DataFrame({f"naive p <= {alpha}": (terms["p_value"] <= alpha).groupby(terms["model"]).sum(),
                        f"clustered p <= {alpha}": (terms["p_cluster"] <= alpha).groupby(terms["model"]).sum(),
                        f"clustered, BH per model <= {alpha}": (p_final <= alpha).groupby(terms["model"]).sum()}).reset_index())
    sig = terms[p_final <= alpha]
    display(importance[importance["factor"].isin(plan.highlight)][["model", "term", "odds_ratio", "ci_low", "ci_high",
                                                                    "p_value", "p_cluster", "design_effect"]])
timings["regression"] = time.perf_counter() - t0

# %% [markdown]
# The paper (Fig. 1c, Flan-UL2 with CoT) finds most stigmas to be risk factors, *doubt* and *original* prompt styles
# to be risk factors, female and gender-neutral holders protective, and *biased answer = yes* protective. Our coding
# measures styles against *original* and gender against *gender neutral*, so the same questions read: is *doubt* a risk
# and *positive* protective relative to *original*, are female / male holders at higher risk than gender-neutral ones,
# and is *biased answer = yes* protective. Remember that *biased answer* and *gender* are properties of the template
# (§2): their coefficients are template contrasts as much as answer or gender effects.

# %% [markdown]
# ## 6. Beyond the paper: hierarchical Bayesian logistic model (bambi)
#
# $$\operatorname{logit} P(\text{deviated}) = \beta_0 + \sum_f \beta_{f,\ell(f)} + u_{\text{group}_1} + u_{\text{group}_2}, \qquad u \sim \mathcal N(0, \sigma^2)$$
#
# For SSQA the groups are stigma and template, so the template-level factors (gender, biased answer) stay in the model
# next to template: partial pooling identifies them through the prior, and the posterior intervals show how little the
# data say about them once template variation is allowed for. For BBQ the groups are stereotyped group and template on
# full data, and category and stereotyped group on the small scored subset of the default profile (about one prompt per
# template). bambi's default priors; NUTS (PyMC, numba backend), centred parameterisation where the groups have many
# responses per level and non-centred where they have few. We report R-hat (≤ 1.01 wanted), bulk and tail effective
# sample sizes (≥ 400 wanted) and divergences. The `paper` profile fits every model (Granite's and Llama's released
# SSQA answers, all 10,360, and each embedded model's scored responses) with 2,000 draws x 4 chains. The `default`
# profile skips the model (`bayes_draws = 0`): with the 300 draws x 2 chains a 2-core CPU run can afford, no fit
# reached R-hat ≤ 1.01 and ESS ≥ 400, so it produced no estimate the findings could use, at 1-2 minutes per run.

# %% tags=["findings"]
t0 = time.perf_counter()
bayes_rows, bayes_diag = [], []
if bayes_draws:
    from biaslab.stats import bayesian
    # the first released model's answers (all prompts) or, with none released, the scored models; or every model
    targets = (released_models if bayes_all_models else released_models[:1]) + (
        [m for m in model_names if m in set(nocot["model"])] if bayes_all_models or not released_models else [])
    for m in targets:
        d = multifactor.recode(nocot[nocot["model"] == m], plan)
        fixed = [f for f in plan.bayes_fixed if d[f].nunique() > 1]
        full = m in released_models or len(d) >= 0.5 * len(base_prompts)
        grp = plan.bayes_group if full else plan.bayes_group_subset
        if d[plan.outcome].nunique() < 2:
            print(f"{m}: {plan.outcome} is constant, nothing for the Bayesian model to explain")
            continue
        refs = multifactor.references(spec, plan, d)
        res = bayesian.hierarchical_logistic(d, fixed, grp, refs, outcome=plan.outcome, draws=bayes_draws,
                                             tune=bayes_tune,
                                             chains=bayes_chains, seed=seed, numba=True,
                                             target_accept=0.95 if len(d) < 2000 else None)
        conv = bool(res.diagnostics["converged"])
        bayes_rows.append(res.summary.assign(model=m, converged=conv, use_in_findings=conv))
        if not conv:
            print(f"{m}: NOT CONVERGED (max R-hat {res.diagnostics['max_r_hat']:.3f}, min bulk ESS "
                  f"{res.diagnostics['min_ess_bulk']:.0f}, {res.diagnostics['divergences']} divergences; wanted R-hat "
                  "<= 1.01, ESS >= 400, no divergences): tabulated for inspection, kept out of the findings")
        bayes_diag.append({"model": m, **res.diagnostics})
        out.figure(plots.posterior_plot(res.summary, f"{bspec.title} {m}: {res.formula}", references=refs),
                   f"bayes_{m}")
    if bayes_rows:
        table(pd.concat(bayes_rows, ignore_index=True), "bayes_summary", markdown=True, show_rows=20)
        table(pd.DataFrame(bayes_diag), "bayes_diagnostics", markdown=True)
        display(Markdown(findings.bayes_findings(pd.concat(bayes_rows, ignore_index=True), pd.DataFrame(bayes_diag),
                                                 plan=PLAN)))
else:
    print("bayes_draws = 0: Bayesian model skipped in this profile")
timings["bayes"] = time.perf_counter() - t0

# %% [markdown]
# A fit counts only when it converged (max R-hat ≤ 1.01, every bulk ESS ≥ 400, no
# divergences); `bayes_summary.csv` says so in `converged` / `use_in_findings`, and a non-converged fit is tabulated
# for inspection only.
#
# Read the diagnostics before the estimates (the sentences above say, per model, whether they meet R-hat ≤ 1.01 and
# ESS ≥ 400): with modest draws the intercept and the group-level standard deviations mix slowly (the global intercept
# trades off against the mean of the stigma and template intercepts). Effects that are properties of the template
# (gender, biased answer) are expected to come with wide intervals once template variation is allowed for — the
# honest version of the confounding that the maximum-likelihood model can only refuse.

# %% [markdown]
# ## What this sample can detect
#
# `power.csv`: at 80 % power and α = 0.05 (two-sided), the smallest effect each analysis above can detect, computed
# from *that analysis's* standard error and reference distribution (`biaslab.stats.power.mde_from_se`; the design in
# words in `mde_design`): the paired difference in deviation rate between two models scored on the same prompts
# (the paired, clustered SE of `paired_comparisons.csv`, t(G − 1)), and a first-level subgroup against the rest of
# the same model's prompts (each contrast's own cluster-robust SE: a prompt style present in every template has a
# small design effect, a template-level gender a large one; the row gives the median over the factor's levels and
# the range of their design effects). For BBQ also the smallest departure of a category's accuracy from chance (1/3).
# Planner rows give the prompts per model two *independent* samples would need for a 5-point difference. Where the
# analysed SE is 0 (a constant answer) or not estimable (one cluster) the MDE is undefined: `mde` is empty and
# `mde_note` says why (an SE of 0 means the data carry no estimate of the noise, not that every effect is detectable).

# %%
power_rows = []
for r in (pdiff.itertuples() if len(pdiff) else []):
    power_rows.append(power.power_row(
        benchmark, profile, f"deviation rate difference, {r.model_a} - {r.model_b} (paired)", r.n_pairs, r.mde,
        n_clusters=r.n_clusters, deff=r.design_effect, scale="rate difference", test=r.p_method,
        design=r.mde_design))
for r in rate_ci.itertuples():
    part = nocot[nocot["model"] == r.model]
    for f in plan.subgroup_factors:
        # a level whose contrast has a clustered SE of 0 (a constant answer) has no MDE: NaN with mde_note
        c = power.summarize_contrast_mdes(power.subgroup_contrast_mdes(part, plan.outcome, f, bench.clusters))
        if not c["n_levels"]:
            continue
        # no clusters when the factor has one level in this model's prompts (nothing to contrast it with)
        g_cl = int(c["n_clusters"]) if np.isfinite(c["n_clusters"]) else None
        power_rows.append(power.power_row(
            benchmark, profile, f"deviation rate, typical {f} subgroup vs rest, {r.model}", int(c["n_group"]),
            c["mde"], n_clusters=g_cl, deff=c["design_effect"], scale="rate difference", note=c["note"],
            test=f"Wald t({g_cl - 1}), cluster-robust contrast" if g_cl else "Wald t, cluster-robust contrast",
            design=f"subgroup vs rest of the same model, {c['n_defined']} of {c['n_levels']} levels of {f} with an "
                   "MDE" + (f", median MDE; contrast deff {c['deff_range']} over levels" if c["n_defined"] else "")
                   + (f"; {g_cl} clusters" if g_cl else "; no rest to contrast with")))
    deff = float(r.design_effect) if np.isfinite(r.design_effect) else 1.0
    base = min(max(r.rate, 0.05), 0.95)
    power_rows.append(power.power_row(benchmark, profile, f"prompts per model for a 5-point difference, {r.model}",
                                      r.n, 0.05, n_clusters=r.n_clusters, deff=deff, scale="rate difference",
                                      test="two independent proportions (arcsine), deff", target=0.05,
                                      required_n=power.required_n_two_proportions(base + 0.05, base, deff=deff),
                                      design=f"planner: two independent samples, deff {deff:.1f} of the rate"))
    if plan.chance_factor:     # BBQ: a category's accuracy against chance (1 / number of options)
        nc = int(part[plan.chance_factor].value_counts().median())
        power_rows.append(power.power_row(benchmark, profile,
                                          f"accuracy of a typical {plan.chance_factor} vs chance, {r.model}", nc,
                                          power.mde_proportion(nc, p0=1 / plan.n_options, deff=deff),
                                          n_clusters=r.n_clusters, deff=deff, scale=f"accuracy - 1/{plan.n_options}",
                                          test="one proportion (arcsine), deff",
                                          design=f"one sample, {nc} prompts, deff {deff:.1f} of the model's rate"))
power_table = pd.DataFrame(power_rows)
table(power_table, "power", markdown=True, show_rows=20)
display(Markdown(findings.power_findings(power_table)))

# %%
timings["total"] = time.perf_counter() - t_start
tt = pd.DataFrame([{"stage": k, "seconds": round(v, 1)} for k, v in timings.items()])
table(tt, "timings", show_rows=20)

# %% [markdown]
# ## Calibration of the confirmatory tests
#
# Each tested claim instance's test, simulated under the null on this run's own raw data (the two models' answers
# swapped within random templates and the deviation-metric difference recomputed from them; see docs/calibration.md),
# at alpha and at the level the instance was tested at, with `calibration_replications` replications at alpha and
# proportionally more at that level (the same relative Monte Carlo SE): the rejection rates, their ratio to the tested
# level and the coverage of the interval, with Monte Carlo standard errors (`tables/calibration.csv`). A test
# rejecting more than 1.5 times its tested level is flagged below.

# %%
from biaslab.plan import calibration  # noqa: E402

calib = calibration.run(out, "01_multifactor", calibration_replications, seed=seed, data=nocot, plan=PLAN,
                        benchmark=benchmark)
display(calib)
print(calibration.oversize_line(calib))

# %% [markdown]
# ## Sensitivity analyses of the claims
#
# Each claim instance under the plan's pre-specified alternatives (invalid answers counted the other way, with the
# tipping point; the degenerate-responder threshold; notebook 1's agentic entropy cut), each alternative's p replacing
# the primary's among the primaries it was decided with, at the same share of the error budget
# (`tables/sensitivity.csv`).

# %%
from biaslab.plan.sensitivity import multifactor_sensitivity  # noqa: E402
from biaslab.stats import reanalysis  # noqa: E402

sensitivity = multifactor_sensitivity(pst, nocot, benchmark, plan, bench.clusters, seed, plan=PLAN)
out.table(sensitivity, "sensitivity")
display(Markdown(reanalysis.render(sensitivity)))

# %%
from biaslab.report.outputs import watermark
print(watermark())
