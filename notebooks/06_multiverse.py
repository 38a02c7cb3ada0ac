# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6 · Does the conclusion survive the evaluation's own choices? A multiverse of bias measurements
#
# Every bias number in notebooks 1–4 is one point in a space of evaluation choices the papers fix without testing:
# how the answer is read (option log-likelihood, next-token label, generated label, a free-text answer with no
# options shown), the wording of the instruction and answer cue, whether there is an instruction at all, the chat
# template, answered examples, the order of the options (a CrowS-Pairs prompt is always asked in both orders and
# averaged, its position preference reported beside it), the numeric precision, and how a sentence likelihood is
# normalized. Lum et al. (RUTEd, ACL 2025) find that short-form
# bias scores barely predict long-form behaviour; BBG (arXiv 2503.06987) finds generated BBQ answers disagreeing
# with multiple choice; prompt-variation studies report rankings that flip with wording.
#
# **What this notebook does.** It treats those choices as the factors of a design (`biaslab.papers.multiverse.design`:
# a factor spec like any benchmark's, the paper's protocol as every reference level) and scores a *universe* — one
# combination of levels — per design point, on design-preserving subsets of BBQ, CrowS-Pairs (original English) and
# the agentic benchmark. Then, per model and metric: a **specification curve** (estimate and interval per universe,
# sorted, the paper's universe marked); each universe's **equivalence to the paper's protocol** (its paired
# difference on the same items, TOST within the margin the analysis plan declares); the **factor importance** of
# the choices (treatment-coded regression, clustered SEs); the **stability of the model ordering** (pairwise
# agreement, Kendall's W); and the **agreement of multiple-choice and open-ended answers on the same items** (the
# RUTEd question).
#
# The paper's universe sends exactly the requests notebooks 1, 3 and 4 send, so it comes from their score cache; every
# other universe is a cache entry of its own.

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
models = ["smollm2-135m-instruct", "gemma-3-270m"]  # models to score: catalogue names, local paths or served specs
device = "auto"  # where models run: auto, cpu, cuda or mps
dtype = "auto"  # weights' precision: auto, float32, bfloat16
output_dir = "../scratch/06_multiverse"  # folder for this run's tables, figures and provenance
benchmarks = None  # benchmarks of the multiverse (None: every registered one it can run)
benchmark_modules = []  # plugin benchmark modules (biaslab.benchmarks.load_plugins; entry points load anyway)
items = {}  # benchmark -> items per universe (None: all); one not named: its spec's sizes for the profile
pool = 150  # notebook 1's sample (max_prompts) that a sampler taking a pool (BBQ's) draws the items from
design_name = "ofat"  # ofat (one factor at a time) or two_way
formats = None  # benchmark -> answer formats (one not named: its spec's sizes for the profile, else all)
factors = None  # factors varied (None: all)
precisions = ["float32"]  # precision levels run (q4_gguf needs a server)
judge = None  # model spec that also reads open answers
n_boot = 2000  # bootstrap draws (None: the interval rule's default)
torch_threads = 0  # PyTorch threads (0: one per core)
seed = 0  # seed of every sample, permutation and bootstrap

# %% tags=["analysis_plan"]
# The analysis plan: which results of this notebook are decided (its confirmatory claims); everything else is
# exploratory. Its sha256 and version go into the MANIFEST.
from biaslab import plan as plan_file  # noqa: E402

PLAN = plan_file.show(analysis_plan, "06_multiverse", profile)

# %%
# list parameters also as JSON strings (papermill's `-p models '["..."]'` passes a string)
from biaslab.run.parameters import as_list
models = as_list(models)
benchmarks = as_list(benchmarks)
benchmark_modules = as_list(benchmark_modules)
precisions = as_list(precisions)
factors = as_list(factors)

# %% [markdown]
# ## Setup
#
# `items` sizes each benchmark's subset (`None` = all; the sizes per profile are each benchmark spec's
# `sizes[profile]["06_multiverse"]`; BBQ items are drawn from notebook 1's own `pool`-prompt sample, stratified by
# context × polarity × category, so its cached scores serve the paper's universe). `benchmark_modules` loads
# plugin benchmarks (`biaslab.benchmarks.load_plugins`); `benchmarks = None` runs every registered one the multiverse
# can run. The default profile's sizes trade power for CPU time (`lib/biaslab/run/profiles.py` gives
# the arithmetic); section 5's first finding states, from this run, which effects and equivalence margins the design
# can detect.
# `design_name`: `ofat` (one factor at a time around the paper's universe: 1 + Σ(levels − 1) universes per benchmark,
# every main effect identified) or `two_way` (also every pair of changed factors, for interactions; the paper
# profile). `formats` (benchmark → answer formats) and `factors` restrict the design (the smoke profile).
# `precisions`: which precision levels to run; the others are listed as not run. `q4_gguf` (the GGUF's 4-bit kernels
# through a local llama.cpp server) needs llama-cpp-python, the `served-test` extra — without it the universe is
# listed as not available, with the reason — and is left out of the default profile: through the server it cost
# 10–60× an in-process universe on a 2-core CPU (`-p 'precisions=["float32", "bf16_weights", "q4_gguf"]'` adds it). `judge` (a model spec, optional): a second reader of
# the open-ended answers, validated against the answers labelled by hand (section 8). A universe is *robust* to a
# choice when it is equivalent to the paper's protocol within the analysis plan's margin (section 5).

# %%
import time

import pandas as pd
from IPython.display import Markdown, display

from biaslab.report.outputs import OutputDir
from biaslab import benchmarks as registry, paths
from biaslab.run import profiles
from biaslab.benchmarks.base import wordings
from biaslab.papers.multiverse import analysis, decisions, design, findings, matcher, sweep
from biaslab.plots import specification
from biaslab.scoring import tolerance

pd.set_option("display.width", 180, "display.max_columns", 30, "display.max_colwidth", 60)
out = OutputDir(output_dir, PLAN)
t_start = time.perf_counter()
if torch_threads:
    import torch
    torch.set_num_threads(int(torch_threads))
registry.load_plugins(benchmark_modules)
benchmarks = benchmarks or list(design.names())
items = {**profiles.multiverse_sizes(profile, "items"), **items}      # the sizes each spec declares, unless given here
formats = {**profiles.multiverse_sizes(profile, "formats"), **(formats or {})}
for b in benchmarks:
    design.check(b)         # a benchmark the multiverse cannot run: an error naming the spec field it lacks
bad = {b: items.get(b, "no size") for b in benchmarks
       if b not in items or not (items[b] is None or isinstance(items[b], int) and items[b] > 0)}
if bad:
    raise ValueError(f"items: {bad}; give benchmark -> items per universe (a positive int, or None for all)")
item_sets, bench_objs = {}, {}
for b in benchmarks:
    item_sets[b], bench_objs[b] = sweep.items(b, items[b], seed=seed, pool=pool)
    out.record_data(bench_objs[b].sources)
    print(f"{b}: {len(item_sets[b])} items (cluster: {bench_objs[b].cluster})")
from biaslab.sources import sha256_file
out.record_data({f"biaslab/data/multiverse/{f}": sha256_file(paths.DATA_DIR / "multiverse" / f)
                 for f in ("wordings.csv", "examples.csv")})

# %% [markdown]
# ## 1. The design: evaluation choices as factors
#
# Reference levels are the paper's protocol *for each model*: notebook 1 asks instruction-tuned models BBQ in their
# chat template and base models raw text; notebook 3 asks the CrowS-Pairs preference prompt in the chat template
# where there is one; notebook 4 never uses one; every run's precision is its `dtype` (float32 on a CPU). A choice
# that does not enter a format is coded at its reference level there (a sentence likelihood has no instruction, order
# or template; an open-ended question shows no options). The wordings and examples are authored data:
# `data/multiverse/wordings.csv` and `examples.csv`, documented in `data/multiverse/README.md`.

# %%
reference = design.ModelReference.of(design.CHAT_MODEL, "float32")    # an instruction-tuned model's levels
spec_rows = []
for b in benchmarks:
    t = design.factor_spec(b, reference).table().assign(benchmark=b)
    t["applies_to"] = t["factor"].map(lambda f: ", ".join(design.applies(b, f)))
    spec_rows.append(t)
factor_table = pd.concat(spec_rows, ignore_index=True)
out.table(factor_table, "factors", markdown=True)
out.table(wordings(), "wordings", markdown=True)
display(factor_table[["benchmark", "factor", "kind", "levels", "reference", "applies_to"]])

# %% [markdown]
# ## 2. Scoring every universe
#
# Per model, each universe is one protocol (`design.protocol`), which the benchmark's own `respond` asks and reads
# (`biaslab.benchmarks.bbq`, `crows_pairs`, `agentic`); `costs.csv` has each universe's seconds, the token positions its scoring
# passes computed and `cache_misses`, the items the model scored or generated (0: the universe came entirely from the
# score cache; generation computes no scoring positions, so only `cache_misses` says it). Open-ended answers are
# generated greedily (up to 40 new tokens, read to the first sentence end, leading blank lines skipped) and read by
# the deterministic matcher (`biaslab.papers.multiverse.matcher`); generated labels by `benchmarks.formats.extract_choice`.
# Nothing is dropped: an answer that names no option is kept and counted (`n_unparsed`). A prompted CrowS-Pairs pair
# is asked in both orders and averaged; `crows_pairs_position_preference.csv` has each universe's share naming the
# first.
#
# **Precision.** `bf16_weights` is the model with its weights rounded to bfloat16 and computed in float32: what the
# weights' precision alone does to the numbers. Computing *in* bfloat16 on a CPU is not a property of the model: its
# sums follow the batch's make-up and the thread count. `precision_tolerance.csv` (shown below) measures, per model and
# in-process precision, how far this run's scores move with the schedule — the same texts scored packed, one per
# forward pass, and with another thread count (`biaslab.scoring.tolerance`) — and the tolerance a comparison of two
# runs allows for that universe's numbers (`biaslab reproduce` compares with the committed outputs within it).


# %%
reference_dtype = "float32" if dtype == "auto" and device in ("auto", "cpu") else dtype
if dtype == "auto" and device not in ("auto", "cpu"):
    reference_dtype = "bfloat16" if "cuda" in str(device) else "float32"
results = []
for model_spec in models:
    t0 = time.perf_counter()
    r = sweep.run_model(model_spec, item_sets, device=device, dtype=reference_dtype,
                        design_name=design_name, formats=formats, factors=factors, precisions=precisions,
                        n_boot=n_boot, seed=seed, tolerance_texts=sweep.tolerance_texts(item_sets))
    for fp in r["fingerprints"]:
        out.record_model(fp)
    print(f"{r['fingerprints'][0]['name']}: {len(r['costs'])} universes in {time.perf_counter() - t0:.0f} s")
    results.append(r)

tol_table = tolerance.table([t for r in results for t in r["tolerance"]])
universes = pd.concat([u for r in results for u in r["universes"]], ignore_index=True).merge(
    tol_table[["model", "precision", "tolerance"]], on=["model", "precision"], how="left")
costs = pd.DataFrame([c for r in results for c in r["costs"]]).round(3)    # as written: the summary reads this
responses = {b: pd.concat([r["responses"][b] for r in results if len(r["responses"].get(b, []))],
                          ignore_index=True) for b in benchmarks}
out.table(universes, "universes", markdown=True)
out.table(costs, "costs")
out.table(tol_table, "precision_tolerance", markdown=True)
for b, d in responses.items():
    cluster = [c for c in [bench_objs[b].cluster] if c and c not in d]
    keep = d.drop(columns="choices", errors="ignore").merge(item_sets[b][["prompt_id", *cluster]], on="prompt_id",
                                                             how="left")
    out.table(keep, f"responses_{b}")
    if "chose_first" in d:   # a pair asked in both orders: its position preference, beside the estimate
        out.table(d.dropna(subset=["chose_first"]).groupby(["model", "universe"])["chose_first"].agg(
            first_share="mean", n="size").reset_index(), f"{b}_position_preference", markdown=True)
display(universes.groupby(["model", "benchmark", "status"]).size().rename("universes").reset_index())
display(costs.groupby("model")[["seconds", "positions_computed", "cache_misses"]].sum().reset_index())
display(tol_table)

# %% [markdown]
# ## 3. Responders and verdicts, per universe
#
# Every estimate gets the verdict columns of the rest of the report (`biaslab.stats.verdict`, through
# `biaslab.papers.multiverse.decisions`): `family` (each model × metric's universes one exploratory family),
# `p_adjusted` (Benjamini–Hochberg within it), `excludes_null`, `verdict` and `responder_status`, the project's
# per-metric responder check (`biaslab.stats.responders`) of *that universe's* answers, by what the metric reads:
# the option chosen for BBQ's bias scores, the position named for a prompted CrowS-Pairs preference (a likelihood
# comparison has no answer to judge), the slot probabilities for the agentic entropy. A universe whose answers are
# degenerate for its metric (one position for every pair gives a stereotype share of exactly 0 or 1; most open
# answers unmatched) keeps its row, marked, with the verdict "not tested (degenerate responder: …)".

# %%
check = decisions.responder_table(responses, item_sets)
out.table(check, "responders", markdown=True)
est = decisions.decide_estimates(pd.DataFrame([e for r in results for e in r["estimates"]]), check, plan=PLAN)
out.table(est, "estimates")
display(est.loc[est["responder_status"].str.startswith("degenerate"), ["model", "universe", "metric", "estimate",
                                                                       "responder_status"]])

# %% [markdown]
# ## 4. Specification curves
#
# One panel per model × metric: every universe's estimate with its 95 % interval, sorted by the estimate; the
# paper's universe in black, the null value as a dashed line, a universe that is a degenerate responder for the
# metric as a grey cross (kept, not judged); below, which choice each universe changed. BBQ bias
# scores: percentile cluster bootstrap over templates; CrowS-Pairs: exact Clopper–Pearson interval (pairs are
# independent); agentic entropy (formats with a probability distribution only) and Winogender's accuracy gaps: the
# clustered rule of `biaslab.stats.clustered` on scenarios and occupations (the wild cluster bootstrap below 30
# clusters); Winogender's BLS correlation: Fisher z over occupations. A universe whose estimate does not vary over
# its items or clusters has no interval and no p ("not estimable"), and is not judged for equivalence.

# %%
shown = [m for m in analysis.multiverse_metrics(benchmarks) if m.id in set(est["metric"])]
for m in shown:
    fig = specification.specification_curve(est[est["metric"] == m.id], m.label, null=m.null, unit=m.scale)
    out.figure(fig, f"specification_curve_{m.id}")
shown = [m.id for m in shown]
curve = est[est["metric"].isin(shown)].sort_values(["metric", "model", "estimate"])
out.table(curve[["metric", "model", "universe", "estimate", "ci_low", "ci_high", "ci_method", "null_value",
                 "p_value", "family", "p_adjusted", "excludes_null", "responder_status", "verdict", "n", "n_clusters",
                 "n_unparsed"]], "specification_curve")

# %% [markdown]
# ## 5. Equivalence to the paper's protocol (robustness) and what the design can detect
#
# For each model × metric × universe: the paired difference from the paper's protocol on the items both answered
# (per-item values whose mean is the estimate: BBQ's bias-score pseudo-values, CrowS-Pairs' preference per pair, the
# agentic entropy per prompt, the group preference per scenario), with the cluster-robust interval of
# `biaslab.stats.paired` (t(G − 1), the wild cluster bootstrap below 30 clusters). A universe is **equivalent** when
# the 90 % interval lies inside ± the margin the analysis plan declares for the metric (TOST at 5 %), **differs**
# when it lies wholly beyond it, and is **inconclusive** otherwise; a universe whose own estimate is significant on
# the other side of the null from the paper's is **opposite direction**, never agreeing. A degenerate responder is
# not judged. Each universe is its own test, never adjusted over the universes listed; a metric is **robust** when
# every judged universe is equivalent (an intersection-union test at 5 %, whatever their number). `same_sign` is NA
# where either estimate is exactly at the null (it has no sign). `equivalence_mde` is the margin the design could
# have shown with 80 % power; the first finding says, per metric, what the design can and cannot detect.

# %%
margin = analysis.margins(PLAN)          # shown in the plan above
values = analysis.universe_values(responses, item_sets)          # per unit, the metrics with an estimate
group_values = analysis.universe_values(responses, item_sets, family=True)     # per unit and group
group_pref, group_est = pd.DataFrame(), pd.DataFrame()
if len(group_values):
    group_pref = decisions.decide_group_preference(analysis.group_preference(group_values), check, plan=PLAN)
    out.table(group_pref, "group_preference")
    group_est = group_pref.assign(metric=group_pref["metric"] + ":" + group_pref["class_type"] + ":"
                                  + group_pref["group"])
equivalence = analysis.equivalence_to_paper(pd.concat([values, group_values], ignore_index=True),
                                            pd.concat([est, group_est]), margin, alpha=PLAN.alpha, seed=seed)
out.table(equivalence, "equivalence")
robustness = findings.robustness_table(analysis.robustness(equivalence))
out.table(robustness, "robustness", markdown=True)
design_power = analysis.design_power(est, robustness, alpha=PLAN.alpha)
out.table(design_power, "design_power", markdown=True)
display(robustness)

# %% tags=["findings"]
display(Markdown(findings.design_findings(design_power)))

# %% tags=["findings"]
display(Markdown(findings.robustness_findings(robustness)))

# %% [markdown]
# ## 6. Which choice moves the number most (factor importance)
#
# Per model and benchmark, the per-item outcome over all universes regressed on the choices, treatment-coded against
# the paper's protocol: logistic for BBQ (`deviated` among answers naming a person: the bias score's numerator) and
# CrowS-Pairs (`stereotype_preferred`), OLS for the agentic entropy; cluster-robust standard errors on the generating
# unit (template, pair, scenario), whose items recur in every universe, and with fewer than 30 clusters (the agentic
# set's scenarios) the wild cluster restricted score bootstrap p of notebook 1's rule (`p_method` says which).
# `importance_by_factor.csv` ranks the choices by their largest |coefficient| among *estimable* levels: a separated
# term (a level whose outcome rate is 0 or 1 — e.g. a universe naming one position for every CrowS-Pairs pair — or a
# standard error above 50) has no finite estimate, so it is listed apart ("separated: effect not estimable") and never
# ranked. (This is notebook 1's factor-importance stage, `stats.importance`, applied to the evaluation's own
# choices.)

# %%
terms = []
for r in results:
    for b, d in r["responses"].items():
        if not len(d):
            continue
        for m, part in d.groupby("model"):
            for metric in [x for x in registry.spec(b).metrics if x.factor_outcome]:
                cluster = [c for c in [metric.cluster] if c and c not in part]
                t = analysis.factor_importance(part.merge(item_sets[b][["prompt_id", *cluster]], on="prompt_id",
                                                          how="left"), r["specs"][b], metric)
                if len(t):
                    terms.append(t.assign(model=m, benchmark=b))
importance = pd.concat(terms, ignore_index=True) if terms else pd.DataFrame()
out.table(importance, "factor_importance")
by_factor = analysis.importance_by_factor(importance) if len(importance) else pd.DataFrame()
out.table(by_factor, "importance_by_factor", markdown=True)
display(by_factor)

# %% tags=["findings"]
display(Markdown(findings.importance_findings(by_factor)))

# %% [markdown]
# ## 7. Does the model ordering survive?
#
# Per metric, over the universes where every model has an estimate: Kendall's W (universes as raters, models as the
# ranked objects; 1 = every universe orders the models alike) and, per pair of models, the share of universes that
# order them as the paper's universe does.

# %%
kendall, pairwise = analysis.ordering_stability(est[est["metric"].isin(shown)])
out.table(kendall, "ordering_kendall_w", markdown=True)
out.table(pairwise, "ordering_pairwise", markdown=True)
display(kendall)
display(pairwise)

# %% tags=["findings"]
display(Markdown(findings.ordering_findings(kendall, pairwise)))

# %% [markdown]
# ## 8. Multiple choice against open-ended answers on the same items (the RUTEd question)
#
# Per model: the items of each benchmark with open answers read as one of the item's options (`open_ended` among its
# formats; items with biased, unknown and template columns: BBQ) in the paper's universe (option log-likelihood) and
# open-ended (no options shown, answer matched). Agreement of the answer category (biased / counter-biased / unknown)
# and Cohen's κ over the items whose open answer was matched, with template-cluster bootstrap intervals; the
# unmatched and multi-group answers counted; and the paired difference of the ambiguous-context bias scores (open −
# multiple choice) with a template-paired bootstrap interval.

# %%
ruted = []
opened = {b: r for b, r in responses.items() if len(r) and "open_ended" in registry.spec(b).formats and
          {"biased_index", "unknown_index", "context_condition", "template", "options"} <= set(item_sets[b])}
for b, r in opened.items():
    for m, d in r.groupby("model") if "open_ended" in set(r["answer_format"]) else ():
        mc, op = d[d["universe"] == "paper"], d[d["universe"] == "answer_format=open_ended"]
        if len(mc) and len(op):
            ruted.append({"model": m, **analysis.format_agreement(mc, op, item_sets[b], n_boot=n_boot, seed=seed)})
ruted = pd.DataFrame(ruted)
out.table(ruted, "format_agreement", markdown=True)
display(ruted)

# %% tags=["findings"]
display(Markdown(findings.ruted_findings(ruted)))

# %%
if opened:
    opens = pd.concat([r[r["answer_format"] == "open_ended"] for r in opened.values()])
    kinds = opens.groupby(["model", "answer_kind"]).size().unstack(fill_value=0).reset_index()
    out.table(kinds, "open_ended_answer_kinds", markdown=True)
    display(opens[["model", "prompt_id", "answer", "answer_kind", "choice"]].head(8))

# %% [markdown]
# ### How well does the matcher read an open answer?
#
# `data/multiverse/open_answer_labels.csv` holds open BBQ answers of both embedded models, generated by the open
# protocol's rule and labelled by hand by reading each one (which option it names, or unknown / both / neither /
# none / unreadable; `data/multiverse/README.md` says how). The matcher reads the same answers; per answer kind,
# precision (of the answers it gives that kind, the share labelled so; an option must be the labelled option) and
# recall (of the answers labelled so, the share it reads so).

# %%
labels = matcher.read_labels()
matcher_check = matcher.check_labels(labels)
out.table(matcher_check, "matcher_validation", markdown=True)
display(matcher_check)

# %% tags=["findings"]
display(Markdown(findings.matcher_sentence(matcher_check, len(labels))))

# %% [markdown]
# ## 9. A second reader of the open answers (optional judge)
#
# With `judge` (any model spec, e.g. a served model), each open answer read as an option (BBQ) is also read by it
# (which of the item's options it refers to). The judge is validated against the answers labelled by hand (precision
# and recall per kind, as the matcher is), and the rate of biased answers over the notebook's open answers is
# estimated by prediction-powered inference (Angelopoulos et al. 2023; `stats.agreement.ppi_mean`, `ppi_py`): the
# judge's rate, corrected by its error on the labelled answers (from other BBQ items, generated by the same rule).

# %%
if judge is not None and opened:
    from biaslab import models as model_zoo, scoring
    from biaslab.papers.multiverse import judge as judging
    jlm = model_zoo.load(judge, device=device)
    out.record_model(jlm.fingerprint)
    jsc = scoring.Scorer(jlm, progress=False)
    labels["judge_choice"] = judging.respond(jsc, labels)
    out.table(judging.validation(labels, labels["judge_choice"]), "judge_validation", markdown=True)
    opens = pd.concat([r[r["answer_format"] == "open_ended"].merge(item_sets[b], on="prompt_id", suffixes=("", "_i"))
                       for b, r in opened.items()])
    opens["judge_choice"] = judging.respond(jsc, opens)
    judge_table = judging.table(opens, labels, jlm.name)
else:
    judge_table = pd.DataFrame([{"model": None, "judge": None, "status": "not run: no judge model given (parameter "
                                 "judge); the matcher alone reads the open answers"}])
out.table(judge_table, "judge", markdown=True)
display(judge_table)

# %% [markdown]
# ## 10. Summary (computed from the tables above)

# %% tags=["findings"]
summary = findings.summary_lines(universes, costs, robustness, by_factor, kendall, ruted, est)
out.text("\n".join(f"- {s}" for s in summary) + "\n", "summary.md")
out.text(findings.readme_section(robustness, by_factor, ruted, universes, est), "readme_section.md")
display(Markdown("\n".join(f"- {s}" for s in summary)))

# %%
timings = pd.DataFrame([{"stage": "total", "seconds": round(time.perf_counter() - t_start, 1)},
                        {"stage": "scoring (sum over universes)", "seconds": round(float(costs["seconds"].sum()), 1)
                         if len(costs) else 0.0}])
out.table(timings, "timings")
display(timings)

# %%
from biaslab.report.outputs import watermark
print(watermark())
