# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4 · Language models as agents: the entropy of their multiple-choice answers about social groups
#
# **The paper.** Fernando et al., *Quantifying Bias in Agentic Large Language Models: A Benchmarking Approach*, give a
# language model a role and a scenario ("You are a judge ...") and ask it a multiple-choice question whose answers are
# social groups (race, gender, age, socioeconomic status, American political affiliation). Over 1,020 such prompts
# they read the model's next-token probabilities of the answer numbers and summarize each prompt by the **normalized
# Shannon entropy** of that distribution: 1 when every group is equally likely (the paper's "unbiased"), 0 when one
# group takes all. They report mean entropies of 0.602 (Flan), 0.961 (Vicuna), 0.976 (Llama) and 0.965 (Llama 2).
#
# **What this notebook reproduces.** The benchmark's design (its prompts were never published, so biaslab authored
# 1,020 prompts from the paper's design: `data/agentic/`), the answer format with few-shot examples and a seeded random
# answer order per prompt (§II.C), the scoring of the answer digits, and the metric (§II.D): per model the mean, sd,
# median and distribution of the entropy (the paper's Figs. 3–6, as one comparative figure), with breakdowns by class
# type, question type, polarity and domain.
#
# **Beyond the paper.** Entropy is symmetric in the groups, so it cannot say *which* group a model picks: we report the
# mean probability of every group for positive vs negative questions. We measure the model's **position bias**
# (probability by answer slot whatever group sits there), the entropy after **averaging over all cyclic rotations** of
# the choices (which removes position effects), and **test the choices against uniform** (chi-square and a
# Dirichlet–multinomial Bayes factor on the counts of the model's top answer).

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
models = ["smollm2-135m-instruct", "gemma-3-270m"]  # models to score: catalogue names, local paths or served specs
device = "auto"  # where models run: auto, cpu, cuda or mps
dtype = "auto"  # weights' precision: auto, float32, bfloat16
output_dir = "../scratch/04_agentic_entropy"  # folder for this run's tables, figures and provenance
max_prompts = 100  # prompts scored, whole pairs per stratum (None: all 1,020)
cyclic_prompts = 20  # prompts also scored in every choice rotation
fewshot_prompts = 0  # prompts rescored with 0-3 examples (0: skip)
n_shots = 2  # answer-format examples before every prompt
chat = False  # wrap prompts in the model's chat template
seed = 0  # seed of every sample, permutation and bootstrap
calibration_replications = 2000  # null replications per claim instance (tables/calibration.csv)

# %% tags=["analysis_plan"]
# The analysis plan: which results of this notebook are decided (its confirmatory claims); everything else is
# exploratory. Its sha256 and version go into the MANIFEST.
from biaslab import plan as plan_file  # noqa: E402

PLAN = plan_file.show(analysis_plan, "04_agentic_entropy", profile)

# %%
# list parameters also as JSON strings (papermill's `-p models '["..."]'` passes a string)
from biaslab.run.parameters import as_list
models = as_list(models)

# %% [markdown]
# ## Setup
#
# `max_prompts` (None = all 1,020) takes a design-preserving subset: whole positive/negative pairs, spread evenly over
# the 15 question-type × class-type strata and, within them, over the 17 domains. `cyclic_prompts` is the size of the
# subset (drawn the same way from the scored prompts) whose every cyclic rotation of the choices is also scored; that
# costs k scorings per prompt. `n_shots` answer-format examples precede every prompt; `fewshot_prompts` (0 = skip)
# is the size of a subset scored again with 0, 1, 2 and 3 examples, to see how much the format moves the answers.

# %%
import time

import pandas as pd
from IPython.display import Markdown, display

from biaslab import scoring
from biaslab import models as model_zoo
from biaslab.benchmarks import agentic
from biaslab.report.outputs import OutputDir
from biaslab.papers.agentic import decisions, findings
from biaslab.plots import entropy as P
from biaslab.stats import entropy as E
from biaslab.stats import intervals, paired, power

pd.set_option("display.width", 160, "display.max_columns", 30)
out = OutputDir(output_dir, PLAN)
bench = agentic.load(n_shots=n_shots)
out.record_data(bench.sources)
FACTORS = bench.factors.names
prompts_all = bench.prompts
prompts = agentic.balanced_subset(prompts_all, max_prompts, seed=seed)
if cyclic_prompts == 0:
    cyc_prompts = prompts.iloc[:0]
else:
    cyc_prompts = agentic.balanced_subset(prompts, cyclic_prompts, seed=seed)
print(bench.summary())
for note in bench.notes:
    print(" -", note)
print(f"scoring {len(prompts):,} prompts per model; all k cyclic rotations of {len(cyc_prompts):,} of them "
      f"({int(cyc_prompts['k'].sum()):,} variants)")

# %% [markdown]
# ## The benchmark
#
# Each prompt is a role, a scenario that introduces three or five people who "differ only in their" race, gender,
# age group, socioeconomic status or political affiliation, a question, and the numbered answer choices of the
# paper's Table I in the prompt's own seeded random order. Questions are identity inference ("Which defendant is most
# likely to flee if released on bail?"), cause–effect ("One clerk leaked sealed documents. Which clerk most likely
# leaked them?") or value judgement ("Which passenger is most worth saving?"), each in a positive and a negative
# polarity. The design is fully crossed and balanced:
#
# $$1{,}020 = \underbrace{3}_{\text{question type}} \times \underbrace{5}_{\text{class type}} \times
# \underbrace{2}_{\text{polarity}} \times \underbrace{17}_{\text{domain}} \times \underbrace{2}_{\text{replicate}},$$
#
# 34 prompts in each question-type × class-type × polarity cell, two per domain; every question is asked once for each
# class type, so class types are compared on identical content. `data/agentic/README.md` documents the bank.

# %%
design = agentic.design_counts(prompts_all)
out.table(design, "prompts_design", markdown=True)
out.table(agentic.design_counts(prompts), "prompts_design_scored")
out.table(bench.factors.table(), "factors")
display(bench.factors.table()[["factor", "kind", "n_levels", "reference"]])
print()
display(design[["question_type", "class_type", "polarity", "total"]])
print("\nOne prompt as the model reads it:\n")
print(prompts_all.set_index("prompt_id").loc["jd-ii-1-neg-race", "text"])

# %% [markdown]
# ## Scoring
#
# For every prompt we read the model's next-token distribution after `Answer: ` and keep the log-probabilities of the
# label tokens "1" … "k" (§II.C.3; the paper searches the vocabulary for the digit tokens). Both embedded tokenizers
# write "Answer: 2" as `Answer`, `:`, ` `, `2`, so the prompt ends with the space and the next token is the bare digit,
# exactly as in the few-shot examples (`agentic.answer_format` checks this per tokenizer). With $\ell_j$ the
# log-probability of label $j$:
#
# $$p_j = \frac{e^{\ell_j}}{\sum_{i=1}^{k} e^{\ell_i}}, \qquad
# \text{label mass} = \sum_{i=1}^{k} e^{\ell_i},$$
#
# and $p_j$ belongs to the group listed at position $j$ of that prompt's stored order. The label mass is what the
# paper's renormalization hides: the probability the model gave to answering at all in the requested format.

# %%
per_list, long_list, cyc_list, fs_list, timings = [], [], [], [], []
for model_spec in models:   # a local name or folder, or a served model (labels then read from the server's top-k)
    t0 = time.perf_counter()
    lm = model_zoo.load(model_spec, device=device, dtype=dtype)
    name = lm.name
    out.record_model(lm.fingerprint)
    t1, c1 = time.perf_counter(), time.process_time()
    sc = scoring.Scorer(lm, progress=False)
    sc.require("chat_top_logprobs" if chat else "top_logprobs", why="reading the answer-label probabilities")
    protocol = agentic.PROTOCOL.replace(chat="on" if chat else "off")      # the paper's, as agentic.respond asks it
    per = agentic.respond(sc, prompts, protocol)
    per_list.append(per.drop(columns="choices"))
    long_list.append(agentic.long_table(per))
    t2, c2 = time.perf_counter(), time.process_time()
    if len(cyc_prompts):
        var = agentic.cyclic_variants(cyc_prompts)
        cyc_list.append(agentic.long_table(agentic.respond(sc, var, protocol).assign(shift=var["shift"].to_numpy())))
    t3, c3 = time.perf_counter(), time.process_time()
    if fewshot_prompts:
        fs_sub = agentic.balanced_subset(prompts, fewshot_prompts, seed=seed)
        for shots in range(len(agentic.read_bank()["fewshot"]) + 1):
            fs_per = agentic.respond(sc, fs_sub, protocol.replace(examples=shots))
            fs_list.append((name, shots, fs_per.drop(columns="choices"), agentic.long_table(fs_per)))
    t4 = time.perf_counter()
    timings.append({"model": name, "device": lm.fingerprint.get("device"), "dtype": lm.fingerprint.get("dtype"),
                    "load_s": t1 - t0, "prompts": len(prompts), "score_s": t2 - t1, "score_cpu_s": c2 - c1,
                    "cyclic_variants": int(cyc_prompts["k"].sum()), "cyclic_s": t3 - t2, "cyclic_cpu_s": c3 - c2,
                    "fewshot_s": t4 - t3, "positions_computed": sc.stats.get("positions", 0),
                    "answer_suffix": repr(agentic.answer_format(sc.token_strings, chat=chat)[0])})
    out.record_model(lm.fingerprint)        # again: a served model's probe and usage, known only now
    del sc, lm

per_prompt = pd.concat(per_list, ignore_index=True)
long = pd.concat(long_list, ignore_index=True)
meta = prompts[["prompt_id", "scenario_id", "question_id"] + FACTORS + ["k", "order"]]
responses = meta.merge(per_prompt, on=["prompt_id", "k"])
out.table(responses.round(6), "responses")
timings = pd.DataFrame(timings)
out.table(timings.round(2), "timings")
out.note(f"scored {len(prompts)} prompts x {len(models)} models; timings: {timings.round(1).to_dict('records')}")
display(timings)
print("(positions_computed = token positions run through the model; 0 means every score came from the cache)")

# %% [markdown]
# ## Responder check, per metric
#
# Before any test, each model is checked for a degenerate response pattern — *for each metric, by what that metric
# reads* (`biaslab.stats.responders`, thresholds stated there; `biaslab.papers.agentic.decisions`). The entropy, the
# mean probabilities, the cyclic gain, the group preference and the paired comparison read the renormalized label
# **probabilities**: judged on the label mass and on the spread of the model's mean distribution over the answer slots,
# per number of choices k. The top-answer counts by group read the **answer** (the group named), judged per model over
# all its prompts — the same check, on the same answers, as notebook 1's agentic variant, so the two notebooks give
# one verdict per model (a constant group *within* a class type is the departure the group test measures, not a
# failure to answer). The position counts and position probabilities are not judged: a constant position is the
# departure they test. A degenerate model keeps its rows in every table; the verdict columns say "not tested".

# %% [markdown]
# **Validity of the instrument** (docs/validity.md). The answer slots are read in one seeded random order per prompt,
# so a model that names a slot by its *position* concentrates its distribution, and its top answers, on whichever
# groups the order put there: its entropy and its group counts then measure position, not groups. The checks of
# the analysis plan's `scoring_rule` are applied to this one formulation (`validity.csv`): the shown *position*
# chosen against uniform (judged: one order is asked; fails more than `position_excess_max` above its uniform share),
# the *length* of the group named (reported: a class type's groups keep their texts, so length and group coincide
# and the excess is 0 by construction), the unanswered share; *competence* is not judged (no option is correct) and
# neither is a constant group (the departure the group test measures). A model that fails is **not measurable**:
# its entropy and group rows are shown, never decided, ranked or compared; the position tables are not judged.

# %% tags=["findings"]
from biaslab.benchmarks import instrument  # noqa: E402
from biaslab.stats import validity  # noqa: E402

rule = instrument.one_formulation(PLAN, agentic.SPEC, prompts)     # the paper's protocol alone: no fallback
keys = instrument.keys(rule)                                          # per model
validity_rows, selection = instrument.validity(
    agentic.SPEC, prompts, agentic.validity_answers(per_prompt).assign(formulation="paper", normalization=""),
    bench.cluster, rule)
out.table(validity_rows, "validity")               # every check's numbers; the panel below is its summary
panel = validity.panel(validity_rows, instrument.LABELS, by=keys)
out.table(panel, "validity_panel", markdown=True)
display(panel)
display(Markdown(validity.render(validity_rows, selection, "the agentic benchmark", instrument.LABELS, by=keys)))

# %%
# the responder check per metric, with the validity rule's status on what the probabilities and the top group read
resp = decisions.responder_table(per_prompt, validity=validity.responder_rows(selection, validity_rows, by=keys))
out.table(resp, "responders", markdown=True)
display(resp[["metric", "model", "k", "n", "label_mass", "distribution_entropy", "modal_answer", "modal_share",
              "degenerate", "reasons"]])

# %% [markdown]
# ## The metric (§II.D): normalized Shannon entropy
#
# $$H = -\sum_{j=1}^{k} p_j \log p_j, \qquad \tilde H = \frac{H}{\log k} \in [0, 1]$$
#
# computed with `scipy.stats.entropy`. The paper writes this as a change of the logarithm's base to $k$ ("the base
# was 3 ... and five for the race and age questions"); $\log_k x = \ln x / \ln k$, so it is the same number. A uniform
# answer gives 1, all mass on one group gives 0.
#
# Two cautions the paper does not raise. First, $\tilde H$ of a *random* distribution depends on $k$ (a distribution
# drawn uniformly from the simplex has expected $\tilde H = (\sum_{i=2}^{k} 1/i) / \ln k \approx 0.76$ for $k = 3$ and $0.80$ for $k = 5$), so class
# types with three and five choices are not on quite the same scale. Second, a low entropy says the model is confident,
# not that it prefers a group: a model that always answers "1" has low entropy on every prompt while, the orders being
# random, it favours no group at all. The sections after the breakdowns separate the two.

# %%
by_model = decisions.decide("entropy_by_model", E.entropy_by_model(responses, cluster=bench.cluster, seed=seed),
                            resp, plan=PLAN)
out.table(by_model, "entropy_by_model", markdown=True)
paper = pd.DataFrame({"model": list(E.PAPER_MEANS), "source": "paper (Table/Figs. 3-6)",
                      "n": 1020, "mean_entropy": list(E.PAPER_MEANS.values())})
ours = by_model[["model", "n", "mean_entropy"]].assign(source="biaslab")
comparison = pd.concat([paper, ours], ignore_index=True)[["source", "model", "n", "mean_entropy"]]
out.table(comparison, "paper_comparison", markdown=True)
fig = P.entropy_distributions(per_prompt, paper_means=E.PAPER_MEANS)
out.figure(fig, "entropy_distribution")
by_model.round(3)

# %% tags=["findings"]
display(Markdown(findings.entropy_findings(by_model, E.PAPER_MEANS)))

# %% [markdown]
# **Reading it.** The paper's models sit between 0.60 (Flan) and 0.98 (Llama). Ours are different models on our own
# prompts, so only the kind of number is comparable, but it is computed identically; by the paper's reading an
# entropy near 1 is "unbiased". The label mass is the share of the next-token probability that falls on the answer
# digits: the renormalized distribution describes that share of what the model would say. The sections below ask
# what the remaining departure from uniform consists of.
#
# ## Breakdowns by class type, question type, polarity and domain
#
# Mean, sd, median and a 95 % interval of $\tilde H$ per level, clustered on the scenario like every interval here,
# and a test of whether the levels of a factor share one mean (per model; the paper reports overall means only): a
# Wald test with scenario-clustered standard errors (`wald_p`). Domain is constant within a scenario, so its
# 1,020 prompts hold only as many independent units as there are scenarios; the Kruskal–Wallis test over prompts
# (`kruskal_p`, in the table for comparison) treats every prompt as independent and overstates the evidence.

# %%
bd = E.entropy_breakdown(responses, {f.name: list(f.levels) for f in bench.factors.factors}, cluster=bench.cluster,
                        seed=seed)
bd = decisions.decide("entropy_breakdown", bd, resp, plan=PLAN)
out.table(bd, "entropy_breakdown")
fig = P.entropy_breakdown(bd, ["class_type", "question_type", "polarity", "domain"])
out.figure(fig, "entropy_breakdown")
tests = bd.drop_duplicates(["model", "factor"])[["model", "factor", "wald_f", "wald_df1", "wald_df2", "wald_p",
                                                 "kruskal_p"]]
display(tests)
bd[bd.factor != "domain"][["model", "factor", "level", "n", "mean_entropy", "sd", "median"]].round(3)

# %% tags=["findings"]
display(Markdown("Exploratory (estimates, intervals, unadjusted and BH p; not decided): entropy by factor level, `entropy_breakdown.csv`."))

# %% [markdown]
# Two cautions: class types with five choices are not on the same scale as those with three (see above), and a
# position preference, which is independent of the group, lowers the entropy more when it concentrates on one of few
# slots; so a class-type difference here is not by itself a difference in how the model treats the groups. The 17
# domains have few prompts each in the smaller profiles, hence wide intervals.
#
# ## Which group receives the probability (beyond the paper)
#
# For each group, the mean of its renormalized probability over positive and over negative questions, against the
# uniform $1/k$. The difference positive − negative is tested with a paired Wilcoxon signed-rank test over matched
# prompts (the same scenario and class type asked both ways), with Benjamini–Hochberg q-values within each model as
# an exploratory screen. A group that the model both favours for good outcomes and avoids for bad ones — or the reverse — shows here even when
# the entropy is high.

# %%
gp = decisions.decide("group_preference", E.group_preference(long, prompts, order=agentic.class_choices()), resp,
                        plan=PLAN)
out.table(gp, "group_preference")
fig = P.group_preference(gp)
out.figure(fig, "group_preference")
cols = ["model", "class_type", "group", "mean_p_positive", "mean_p_negative", "diff_pos_minus_neg", "n_pairs", "bh_q"]
gp.sort_values("bh_q")[cols].head(12).round(3)

# %% tags=["findings"]
display(Markdown("Exploratory (estimates, intervals, unadjusted and BH p; not decided): group probability, positive − negative question, `group_preference.csv`."))

# %% [markdown]
# A difference the screen does not flag here may still be there: the `paper` profile scores all 1,020
# prompts (every scenario in both framings for every class type).
#
# ## Position bias (beyond the paper)
#
# Every prompt lists the groups in its own random order, so across prompts the position of an answer is independent of
# its group. The mean probability at each position therefore measures a preference for a slot (or a digit), not for a
# group. The paper randomized the order "to ensure that each model was choosing answers with regard to answer
# categories rather than the answer numbers", but did not measure how much the models looked at the numbers.
# Intervals are clustered on the scenario.

# %%
pb = E.position_bias(long.merge(prompts[["prompt_id", bench.cluster]], on="prompt_id"), cluster=bench.cluster, seed=seed)
pb = decisions.decide("position_bias", pb, resp, plan=PLAN)
out.table(pb, "position_bias")
fig = P.position_bias(pb)
out.figure(fig, "position_bias")
pb.round(3)

# %% tags=["findings"]
display(Markdown("Exploratory (estimates, intervals, unadjusted and BH p; not decided): probability by answer position, `position_bias.csv`."))

# %% [markdown]
# ## Is the top answer uniformly spread? (beyond the paper)
#
# Per model, class type and question polarity, the counts of each prompt's most probable answer, tested against equal counts two ways:
# by **group** and by **position**. The prompts of a class type come in scenarios (a positive and a negative
# question on the same story), so they are not independent draws: Pearson's chi-square (df = k − 1) is corrected by
# the first-order **Rao–Scott** design effect (Rao & Scott 1981) estimated from the scenario clusters,
#
# $$X^2_{RS} = X^2 / \hat\delta, \qquad \hat\delta = \frac{n}{k-1} \sum_j \frac{\hat V(\hat p_j)}{\pi_j},$$
#
# with $\hat V$ the cluster-robust (CR1) variance of each category's share, referred to
# $F(k-1, (k-1)(G-1))$ (`biaslab.stats.clustered.rao_scott_gof`; the naive chi-square, prompts independent, is kept
# as `p_naive`). The Dirichlet–multinomial Bayes factor
#
# $$\mathrm{BF}_{10} = \frac{\int \mathrm{Mult}(n \mid \pi)\, \mathrm{Dir}(\pi \mid a\mathbf 1)\, d\pi}
# {\mathrm{Mult}(n \mid \tfrac1k, \dots, \tfrac1k)}$$
#
# is computed on the same effective counts $n_j / \hat\delta$ (the likelihood tempered by the design effect) at
# $a = 1$ (flat on the simplex) and over the stated set $a \in \{0.5, 1, 2, 10\}$ (Jeffreys; flat; two priors
# concentrated near uniform, the small departures a bias test looks for): `bf10_min`, `bf10_max`, and `evidence`,
# which names a Table 1 category only where the whole range agrees. The counts use only the argmax, not the full
# distributions; they answer "does the model pick some groups (or slots) more often than others?".

# %%
ut = decisions.decide("uniformity_tests", E.uniformity_tests(per_prompt, prompts, cluster=bench.cluster), resp,
                        plan=PLAN)
out.table(ut, "uniformity_tests")
ut[["model", "class_type", "polarity", "unit", "n", "counts", "cohens_w", "ci_low", "ci_high", "design_effect",
    "p_value", "family_kind", "p_adjusted", "bf_direction", "verdict"]].round(4)

# each group's share of the top answers with its scenario-clustered interval (exploratory: where a departure comes from)
shares = decisions.decide("top_group_shares", E.top_group_shares(per_prompt, prompts, cluster=bench.cluster), resp,
                            plan=PLAN)
out.table(shares, "top_group_shares")

# %% tags=["findings"]
display(Markdown(PLAN.method_text("04_agentic_entropy", ut)))
display(Markdown(findings.uniformity_findings(ut, PLAN)))
display(Markdown("Exploratory (estimates and intervals; not decided): each group's share of the top answers, `top_group_shares.csv`."))

# %% [markdown]
# *What is decided:* the counts **by group** are this notebook's confirmatory claim in `analysis_plan.yaml`
# (`group-choice`) — its headline test, the question the paper asks of an agent (does it favour a group?) — one instance
# per class type × question polarity (a negative and a positive question ask for opposite directions; pooled, a group
# named in both would read as a preference when it is only salient), its estimate Cohen's w against equal counts,
# $w = \sqrt{\sum_j (p_j - \pi_j)^2 / \pi_j}$ (median-unbiased; the plug-in is `cohens_w_plugin`), with the interval
# that inverts the same Rao–Scott test: $X^2_{RS}/(k-1)$ is noncentral $F(k-1, (k-1)(G-1), \lambda)$ with
# $\lambda = n w^2 / \hat\delta$, and the $\lambda$s that leave the observed statistic between their 5 % and 95 %
# quantiles (Steiger & Fouladi 1997) give `ci_low`, `ci_high` (a 90 % two-sided interval, each bound one-sided 95 %),
# whose lower bound is above 0 exactly when $p < 0.05$;
# decided as the plan states under the table (`claim`, `family`, `p_adjusted`, `verdict`). Every other
# test here is exploratory: the counts by position, the cyclic gain, the
# paired model comparison, the positive-vs-negative differences and the breakdown tests. The Dirichlet–multinomial BF10 is
# called evidence only where its whole prior range agrees (`bf_direction`).
#
# The contrast is the point: a model that picks by **position** is far from uniform by position and close to uniform
# by group, since the random orders spread the slots evenly over the groups; a group preference shows in the group
# counts. **Sensitivity analyses** of `group-choice` (pre-specified in the plan; `sensitivity.csv`, after the cyclic
# rotations below): the position handling (the top group with the model's mean probability per slot divided out, Zheng
# et al. 2024; the top group of the rotation average on the cyclic subset) and the degenerate-responder threshold
# (stricter, and none); each alternative's p replaces the primary's among the primaries it was decided with, at the
# same share of the error budget, and `verdict_survives` says whether the primary verdict holds.
#
# ## Entropy after averaging over all cyclic rotations (beyond the paper)
#
# For a subset of prompts we also score every cyclic rotation of the stored order (k variants; each group then sits
# once at every position) and average each group's probability over the rotations,
# $\bar p_g = \frac1k \sum_{s} p_g^{(s)}$. A model whose answers depend only on the slot gets $\tilde H(\bar p) = 1$; a
# model whose answers depend only on the group keeps its entropy. By Jensen's inequality $\tilde H(\bar p)$ is at least
# the mean of the per-rotation entropies.

# %% tags=["findings"]
if cyc_list:
    cyc = E.cyclic_summary(pd.concat(cyc_list, ignore_index=True)).merge(
        prompts[["prompt_id", bench.cluster]], on="prompt_id")
    out.table(cyc.round(6), "cyclic_entropy")
    # the gain's test and interval from one clustered rule (scenario clusters; the prompt-level Wilcoxon is kept)
    cyc_m = decisions.decide("cyclic_by_model", E.cyclic_by_model(cyc, cluster=bench.cluster, seed=seed), resp,
                               plan=PLAN)
    out.table(cyc_m, "cyclic_by_model", markdown=True)
    fig = P.cyclic_comparison(cyc)
    out.figure(fig, "cyclic_entropy")
    display(cyc_m.round(3))
    display(Markdown("Exploratory (estimates, intervals, unadjusted and BH p; not decided): entropy gain from the cyclic average, `cyclic_by_model.csv`."))
else:
    print("cyclic_prompts = 0: no cyclic rotations scored")

# %%
sens = decisions.sensitivity(ut, per_prompt, prompts, resp, bench.cluster, cyc if cyc_list else None,
                             plan=PLAN)
out.table(sens, "sensitivity", markdown=True)
sens[["family", "instance", "analysis", "estimate", "ci_low", "ci_high", "p_value", "verdict", "verdict_survives"]]

# %% [markdown]
# ## Intervals, responder check, paired comparison and power (beyond the paper)
#
# The agentic prompts are generated from scenarios: the 10 prompts of a scenario (5 class types × 2 polarities)
# share its role and story, so every interval below resamples *scenarios* (the benchmark's declared cluster,
# `bench.cluster`). The group-preference table and figure carry 95 % intervals clustered on the scenario.
#
# * **Responder check**: per metric, above (`responders.csv`); a model degenerate for the entropy keeps its rows here,
#   and its tests are marked "not tested" by the verdict columns.
# * **Mean entropy with a clustered interval** per model (`entropy_intervals.csv`), and the **paired model
#   comparison** of per-prompt entropy (both models answer the same prompts): mean difference with a
#   scenario-clustered (CR1) interval, tested by the Wald t(G − 1) on its standard error — the one rule of
#   `biaslab.stats.clustered`, with the wild cluster bootstrap below 30 scenarios (the Wilcoxon signed-rank
#   test over prompts, which treats the prompts of one scenario as independent, is kept as `p_naive`).
# * **Cyclic gain** (entropy after the cyclic average minus in the stored order): its interval and its test come from
#   the same clustered rule (`cyclic_by_model.csv`: CR1 t(G − 1), or the wild cluster bootstrap below 30 scenarios;
#   the Wilcoxon signed-rank test over prompts is kept as `wilcoxon_p`); `cyclic_gain_intervals.csv` repeats the
#   interval columns.
# * **Power** (`power.csv`): the smallest standardized paired effect (d_z) the group-preference Wilcoxon/t test can
#   detect per class type, the smallest cyclic gain per model (on the entropy scale, from its scenario-clustered SE
#   and t(G − 1): the measured design effect, not 1), and the smallest departure from a uniform top-group choice
#   (Cohen's w, chi-square goodness of fit on the effective n / δ̂ with the Rao–Scott design effect of that model ×
#   class type's group counts) per model and class type, at 80 % power and α = 0.05.

# %%
# every model keeps its rows: a degenerate responder is marked by the verdict columns, never dropped
pp = per_prompt.merge(prompts[["prompt_id", "scenario_id", "class_type"]], on="prompt_id")
ent_ci = intervals.mean_intervals(pp, "entropy", bench.cluster, by="model")
out.table(ent_ci, "entropy_intervals", markdown=True)
cmp_ent = (decisions.decide("paired_comparisons", paired.paired_differences(pp, "entropy", cluster=bench.cluster,
                                                                           binary=False), resp, plan=PLAN)
           if pp["model"].nunique() > 1 else pd.DataFrame())
out.table(cmp_ent, "paired_comparisons", markdown=True)
display(ent_ci.round(4))
if len(cmp_ent):
    display(cmp_ent.round(4))
display(Markdown("Exploratory (estimates, intervals, unadjusted and BH p; not decided): paired model comparison of entropy, `paired_comparisons.csv`."))
if cyc_list:
    gain_ci = cyc_m[["model", "n", "n_clusters", "df", "mean_gain", "se_naive", "se_cluster", "design_effect",
                     "ci_low", "ci_high", "ci_method"]].rename(columns={"mean_gain": "mean"})
    out.table(gain_ci, "cyclic_gain_intervals", markdown=True)
    display(gain_ci.round(4))

# %%
power_rows = []
n_pairs_ct = int(gp["n_pairs"].median()) if len(gp) else 0
power_rows.append(power.power_row(agentic.SPEC.name, profile, "group preference, positive - negative, per class type",
                                  n_pairs_ct, power.mde_paired_mean(n_pairs_ct), n_clusters=n_pairs_ct,
                                  scale="d_z", test="paired t / Wilcoxon",
                                  design=f"paired, {n_pairs_ct} scenarios (one pair each), t({max(n_pairs_ct - 1, 0)})"))
# the cyclic gain as analysed: the mean over prompts clustered on the scenario (cyclic_gain_intervals.csv), so its MDE
# comes from that clustered SE and t(G - 1), i.e. with the measured design effect, on the entropy scale
for r in (gain_ci.itertuples() if cyc_list else []):
    power_rows.append(power.power_row(
        agentic.SPEC.name, profile, f"cyclic gain in entropy, {r.model}", r.n,
        power.mde_from_se(r.se_cluster, r.df, se_naive=getattr(r, "se_naive", None)),
        n_clusters=r.n_clusters, deff=r.design_effect, scale="normalized entropy",
        test=f"cluster-robust t({r.df}) / wild cluster bootstrap (scenario)",
        design=power.mde_design("one-sample mean", r.n, r.n_clusters, r.design_effect, bench.cluster)))
# the uniformity test as analysed: Rao-Scott, so its MDE is on the effective n / deff of that model x class type
for r in ut[ut["unit"] == "group"].itertuples():
    power_rows.append(power.power_row(
        agentic.SPEC.name, profile, f"uniform top-group choice, {r.model}, {r.class_type}, {r.polarity} (k = {r.k})", r.n,
        power.mde_gof_w(r.n, r.k, r.design_effect), n_clusters=r.n_clusters, deff=r.design_effect,
        scale="Cohen's w", test="Rao-Scott chi-square goodness of fit (first order)",
        design=power.mde_design("goodness of fit", r.n, r.n_clusters, r.design_effect, bench.cluster)))
power_table = pd.DataFrame(power_rows)
out.table(power_table, "power", markdown=True)
display(power_table[["quantity", "n", "mde", "mde_scale", "test"]].round(3))
r0 = power_table.iloc[0]
print(f"With {int(r0.n)} matched pairs per class type, the design had 80 % power (alpha = 0.05) for "
      f"positive-vs-negative group differences of at least {r0.mde:.2f} SD of the per-pair differences.")
for r in power_table[power_table.quantity.str.startswith("cyclic gain")].itertuples():
    print(f"{r.quantity.split(', ')[-1]}: with {int(r.n)} prompts in all their rotations ({r.mde_design}), the design "
          f"had 80 % power for cyclic gains of at least {r.mde:.4f} (normalized entropy).")

# %% [markdown]
# ## How much does the answer format move the answers? (beyond the paper)
#
# The paper shows the models "a few examples of how to phrase answers" but does not print them or vary them. When
# `fewshot_prompts` > 0, a subset is scored again with 0, 1, 2 and 3 of our examples (whose answers are at positions
# 2, 4 and 1). If the preferred position follows the examples, part of what the entropy measures is the prompt format.

# %%
if fs_list:
    rows = []
    for model_name, shots, fs_per, fs_long in fs_list:
        pb_fs = E.position_bias(fs_long)
        row = {"model": model_name, "n_shots": shots, "n": len(fs_per), "mean_entropy": fs_per["entropy"].mean(),
               "mean_label_mass": fs_per["label_mass"].mean()}
        for k in (3, 5):
            row.update({f"k{k}_p_pos{j}": v for j, v in zip(pb_fs[pb_fs.k == k]["position"], pb_fs[pb_fs.k == k]["mean_p"])})
        rows.append(row)
    fewshot = pd.DataFrame(rows)
    out.table(fewshot, "fewshot_sensitivity")
    display(fewshot.round(3))
else:
    print("fewshot_prompts = 0: few-shot sensitivity not run in this profile")

# %% [markdown]
# ## What this means
#
# * **The metric is reproduced exactly as the paper defines it**: renormalized probabilities of the answer numbers,
#   Shannon entropy with logarithm base $k$. The benchmark is ours (the paper's prompts are unpublished), built to the
#   paper's design and balanced, so levels are comparable with the paper's only in kind.
#
# For the models of this run (computed from its tables):

# %% tags=["findings"]
display(Markdown(findings.summary_findings(by_model, cyc_m if cyc_list else None, ut)))

# %% [markdown]
# * **Entropy conflates three things** that the extra analyses pull apart: a model can have low entropy because it
#   prefers a slot (position bias; removed by the cyclic average), because it prefers a group (group preference, the
#   direction the paper's figure cannot show), or because it is simply confident on each prompt in a way that varies
#   from prompt to prompt. Only the second is social bias in the sense the paper intends.
# * **How much of the answer the metric sees**: the label mass says what share of the next-token probability went to
#   the answer digits. Small models put much of it elsewhere; the renormalized distribution is then a conditional
#   statement ("if it answers with a number ...").
# * The age class type crosses the paper's fixed age bands with every scenario; an "Adolescent (13-18)" surgeon is
#   implausible, so low probability on that band is not by itself evidence of bias.
#
# Every statement above about this run's models is computed from `tables/`; the committed outputs of the default
# profile are discussed in the repository README.

# %% [markdown]
# ## Calibration of the confirmatory tests
#
# Each tested claim instance's test, simulated under the null on this run's own raw data (which group sits in which
# answer slot re-randomized within each scenario; see docs/calibration.md), at alpha and at the level the instance was
# tested at, with `calibration_replications` replications at alpha and proportionally more at that level (the same
# relative Monte Carlo SE): the rejection rates, their ratio to the tested level and the coverage of the interval,
# with Monte Carlo standard errors (`tables/calibration.csv`). A test rejecting more than 1.5 times its tested level
# is flagged below.

# %%
from biaslab.plan import calibration  # noqa: E402

calib = calibration.run(out, "04_agentic_entropy", calibration_replications, seed=seed, plan=PLAN)
display(calib)
print(calibration.oversize_line(calib))

# %%
from biaslab.report.outputs import watermark
print(watermark())
