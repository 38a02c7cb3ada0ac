# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5 · One report across models and benchmarks
#
# Which models are more biased, on what, by how much — and which differences are real? Leaderboards rank models
# without saying which ranks can be told apart. This notebook reads the tables that notebooks 1–4 wrote (nothing is
# scored here) and builds:
#
# 1. a **model × metric table** of every benchmark's headline bias metric, each with its interval (clustered on the
#    benchmark's generating unit: template, scenario or pair), the direction that means *more biased*, and the value
#    an unbiased model would get;
# 2. **paired differences** between every two models on the prompts both answered — the analysis plan's comparison
#    claims decided as the plan states, every other metric's pairs exploratory — and, for the decided metrics only,
#    **tie groups** — models that no decided comparison separates — beside a forest plot per metric, ranking only
#    like with like (the same prompts, the same answer mode);
# 3. **agreement between benchmarks**: do models that look biased on one benchmark look biased on another?
# 4. a short summary computed from these tables.
#
# Each benchmark's spec declares its metrics (`Spec.metrics`, gathered by `biaslab.papers.compare.all_metrics`): for
# each, which notebook table holds it, which per-prompt response table gives its interval and paired comparisons, and
# which way is biased.

# %% tags=["parameters"]
profile = "default"  # run size: smoke, default or paper (biaslab.run.profiles)
analysis_plan = None  # the analysis plan (YAML) whose claims are decided; None: the repository's analysis_plan.yaml
outputs_root = None  # folder of notebooks 1-4 outputs (None: found)
output_dir = "../scratch/05_compare"  # folder for this run's tables, figures and provenance
models = None  # models compared (None: every model found)
metrics = None  # metrics compared (None: every registered metric)
benchmark_modules = []  # plugin benchmark modules (biaslab.benchmarks.load_plugins; entry points load anyway)
n_boot = None  # bootstrap draws (None: the interval rule's default)
min_models_agreement = 5  # models needed for a rank correlation
seed = 0  # seed of every sample, permutation and bootstrap
calibration_replications = 2000  # null replications per claim instance (tables/calibration.csv)

# %% tags=["analysis_plan"]
# The analysis plan: which results of this notebook are decided (its confirmatory claims); everything else is
# exploratory. Its sha256 and version go into the MANIFEST.
from biaslab import plan as plan_file  # noqa: E402

PLAN = plan_file.show(analysis_plan, "05_compare", profile)

# %% [markdown]
# ## Setup
#
# `outputs_root` is the folder holding the other notebooks' outputs (`None`: the folder that holds `output_dir` when
# notebooks 1-4 wrote there — a full `biaslab reproduce` into `scratch/`, `--out DIR` or `--publish` — else the
# published `outputs/`; any folder laid out the same way works).
# `models` restricts the rows
# (`None` = every model found), `metrics` the columns (`None` = every registered metric). `n_boot`: draws of the wild
# cluster bootstrap where the rule below uses it (fewer than 30 clusters; `None` = the rule's 9,999, as notebooks
# 1–4, so that an effect reported there and here has one interval); which pairs are decided is the analysis plan's
# (its claims of notebook 5; other metrics' pairs are exploratory); a rank correlation between
# benchmarks gets an interval from `min_models_agreement` models on.

# %%
import time

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from biaslab import benchmarks
from biaslab.files import integrity
from biaslab.papers.multiverse import findings as multiverse_findings
from biaslab.report.outputs import OutputDir
from biaslab.papers import compare
from biaslab.run.parameters import as_list
from biaslab.plots.compare import forest_plot

pd.set_option("display.width", 180, "display.max_columns", 20, "display.max_colwidth", 50)
t_start = time.perf_counter()
out = OutputDir(output_dir, PLAN)
benchmarks.load_plugins(as_list(benchmark_modules))
root = compare.outputs_root(outputs_root, output_dir)
chosen = compare.all_metrics() if metrics is None else tuple(compare.metric(m) for m in as_list(metrics))
found = {m.id: (root / m.folder / "tables").exists() for m in chosen}
print("outputs read from", root.resolve())
for m in chosen:
    print(f"  {m.id:42s} {'found' if found[m.id] else 'MISSING'}  {m.folder}")
if metrics is None and compare.unread_metrics():
    print("  not read here (no Metric.sources: notebook 6 only):", ", ".join(compare.unread_metrics()))
chosen = tuple(m for m in chosen if found[m.id])
if not chosen:
    raise FileNotFoundError(f"no output of notebooks 1-4 under {root.resolve()}: run them first, or set outputs_root")
# refuses tables edited since the run that wrote them; flags folders whose MANIFEST cannot vouch for them
for flag in integrity.check_inputs(root, [m.folder for m in chosen]):
    print("  unverified input:", flag)
    out.note(f"unverified input: {flag}")
fingerprints, hashes = compare.source_provenance(root, chosen)
for fp in fingerprints.values():
    out.record_model(fp)          # the weights behind every number, as the source notebooks recorded them
out.record_data(hashes)           # sha256 of every table read

# %% [markdown]
# ## 1. Model × metric
#
# `estimate` is the value *as the source notebook's table states it* (`source`); `estimate_from_responses` is the
# same metric recomputed here from that notebook's per-prompt responses, which must agree (checked below). Intervals
# (95 %) follow the one rule of `biaslab.stats.clustered`, on the source notebook's own design (the benchmark's
# generating unit; SSQA two-way on template × stigma, as notebook 1): for 0/1 outcomes the Korn–Graubard interval
# (Clopper–Pearson on the effective sample size with the CR1 design effect and the t(G − 1) adjustment); for means —
# the agentic entropy, and BBQ's bias scores through their linearization pseudo-values (ratios are means to first
# order) — the cluster-robust CR1 t(G − 1) interval, or the wild cluster bootstrap with fewer than 30 clusters; for
# CALM's range statistic, notebook 2's projection interval; CrowS-Pairs' shares, scored on a bias-type-stratified
# sample of each file, are estimated for every pair of the file (stratified mean weighted by N_h/n_h, its t interval
# on Satterthwaite's df; `biaslab.stats.stratified`), and so are their paired differences. `ci_method` names each,
# `n_clusters` gives G. A row whose
# source folder has no per-prompt responses has no interval and says so. `orientation` is +1 where a higher value is
# more biased and −1 where a lower one is (the agentic entropy); `null` is the value of a model without bias.
#
# **What each estimate rests on**: `answer_mode` says how the model's answers were obtained (label
# probabilities, generated text, sentence log-probabilities …) and `prompt_set` / `n_prompt_set` which prompts its
# estimate averages; models sharing both form a `comparison_group`, and only models of one group are ranked against
# each other. SSQA's embedded models answer a subset through label probabilities, the released 8B models all prompts
# through generated text: two groups. **Responders per metric**: `responder_status` comes from the rows of the source
# notebook's responder check that read what this metric reads (the answer for rates, the label probabilities for the
# agentic entropy; CrowS-Pairs' likelihood comparison has no answer to judge); where the plan declares a scoring rule
# (BBQ), notebook 1 reads the formulation the rule selects, and a model whose instrument fails the validity checks is
# "not measurable": shown with the reason, never compared or ranked (docs/validity.md). **Robustness**: where notebook 6
# (the multiverse of evaluation choices) ran under the same outputs root, `robustness` is its reading for the model
# and metric (every universe equivalent to the paper's protocol within the analysis plan's margin, or not), and a
# cell where some universe differs beyond the margin or goes the other way is marked † in the wide table.

# %%
t0 = time.perf_counter()
table = compare.model_metric_table(root, chosen, models=models, n_boot=n_boot, seed=seed)
resp_status = compare.responder_table(root, chosen)
out.table(resp_status, "responder_status", markdown=True)
table = table.merge(resp_status[["metric", "model", "responder_status"]], on=["metric", "model"], how="left")
# notebook 6's robustness verdict per model x metric (its multiverse of evaluation choices), when it ran here
robust = multiverse_findings.read_robustness(root)
if robust is not None:
    table = table.merge(robust[["model", "metric", "robustness", "n_equivalent", "n_universes"]].rename(
        columns={"n_equivalent": "multiverse_equivalent", "n_universes": "multiverse_universes"}),
        on=["metric", "model"], how="left")
cols = ["metric", "model", "estimate", "ci_low", "ci_high", "ci_method", "n_units", "n_clusters", "direction",
        "null", "estimate_from_responses", "comparison_group", "responder_status"] + (
    ["robustness", "multiverse_equivalent"] if "robustness" in table else [])
out.table(table, "model_metric")
display(table[cols].round(4))

# %%
gap = (table["estimate"] - table["estimate_from_responses"]).abs()
checked = gap.notna()
print(f"{int(checked.sum())} of {len(table)} estimates recomputed from per-prompt responses; "
      f"largest difference from the source table: {gap[checked].max() if checked.any() else float('nan'):.2e}")
# tolerance 1e-6: some per-prompt tables are written rounded to 6 decimals (notebook 4's responses)
if checked.any() and gap[checked].max() > 1e-6:
    bad = table.loc[gap > 1e-6, ["metric", "model", "estimate", "estimate_from_responses"]]
    raise AssertionError("a metric recomputed from the responses differs from its source table:\n" + bad.to_string())

# %%
# a metric that some of notebook 6's universes move beyond its margin (or the other way) is marked "†"
flips = (table["robustness"].astype(str).str.startswith("not robust") if "robustness" in table
         else pd.Series(False, index=table.index))
wide = table.assign(cell=[(f"{e:.3g} [{lo:.3g}, {hi:.3g}]" if np.isfinite(lo) else f"{e:.3g}") + (" †" if f else "")
                          for e, lo, hi, f in zip(table["estimate"], table["ci_low"], table["ci_high"], flips)])
wide = wide.pivot_table(index="model", columns="metric", values="cell", aggfunc="first")
wide = wide[[m.id for m in chosen if m.id in wide.columns]].fillna("—").reset_index()
wide.attrs["labels"] = compare.metric_headers(chosen)
out.table(wide, "model_metric_wide", markdown=True)
legend = pd.DataFrame([{"metric": m.id, "benchmark": m.benchmark, "label": m.label, "direction": m.direction,
                        "null": m.null, "null_meaning": m.null_meaning, "note": m.note} for m in chosen])
out.table(legend, "metrics", markdown=True)
display(wide)
if robust is None:
    print("notebook 6 (multiverse) has not run under", root, "- no robustness marks")
elif flips.any():
    print("† not robust in notebook 6's multiverse (tables/robustness.csv there): "
          + ", ".join(f"{r.metric} ({r.model})" for r in table[flips].itertuples()))

# %% [markdown]
# ## 2. Paired differences and tie groups
#
# Two models scored on the same prompts form a paired design: for each metric and each pair of models, the
# difference *a − b* over the prompts (units) both answered (`biaslab.stats.paired.paired_difference`, the function
# notebook 1 uses), with the same rule as the intervals above: the cluster-robust CR1 standard error of the per-prompt
# differences (two-way for SSQA) with a t(G − 1) interval and Wald t(G − 1) test, or the wild cluster bootstrap with
# fewer than 30 clusters; BBQ's scores are compared through their pseudo-values on the common prompts. Where every
# cluster is one unit (CALM's per-template bias scores) the exact test is the p-value. The exact McNemar (0/1
# outcomes) or Wilcoxon signed-rank p-value over clustered prompts is kept as `p_naive`: it treats prompts as
# independent and overstates the evidence when prompts of a template answer alike.
#
# **What is decided.** Only the analysis plan's comparison claims of this notebook (listed in the plan block at the
# top) are decided, as the plan states under the table below, and their verdict is "distinguishable" or "not
# distinguishable". A comparison another notebook shows (notebook 1's SSQA deviation rate, notebook 3's CrowS-Pairs
# preference) is decided here only, so one test has one verdict. Every other metric's pairs are exploratory:
# difference, interval and p, never called distinguishable. The verdict columns (`biaslab.stats.verdict`: `claim`,
# `family`, `p_adjusted`, `ci_adj_low`, `ci_adj_high`, `excludes_null`, `responder_status`, `comparable`, `verdict`)
# carry every decision.
#
# **Like with like.** A pair whose models answered differently (SSQA: label probabilities against generated text) is
# not comparable: its difference and interval are shown apart, its verdict is "not tested (not comparable: …)", and it
# is not decided. A pair with a model that is degenerate *for this metric* keeps its difference and interval;
# its verdict is "not tested (degenerate responder: …)".
#
# **Tie groups** (a compact letter display), only for the metrics the plan decides, per comparison group: models are
# sorted from most to least biased; a group is a maximal run of consecutive models no two of which are
# "distinguishable". Models sharing a letter are not told apart; a pair that was not tested never separates models.
# A metric the plan does not decide shows its estimates and intervals, and no groups.
# A model that is degenerate for the metric, or alone in its comparison
# group, is listed but not ranked (`ranked`, `note`); the forest plot draws one panel per comparison group.

# %%
pairs = compare.paired_table(root, chosen, models=models, n_boot=n_boot, seed=seed, plan=PLAN,
                             responders=resp_status)
out.table(pairs, "paired_differences")
if len(pairs):
    display(pairs[["metric", "model_a", "model_b", "n_pairs", "difference", "ci_low", "ci_high", "test",
                   "p_adjusted", "comparable", "verdict"]].round(4))
    display(Markdown(PLAN.method_text("05_compare", pairs)))
groups = compare.tie_group_table(table, pairs)
out.table(groups, "tie_groups", markdown=True)
display(groups)


# %%
for mid, rows in table.groupby("metric", sort=False):
    out.figure(forest_plot(rows, groups[groups["metric"] == mid]), f"forest_{mid}")

# %% [markdown]
# ## 3. Agreement between benchmarks
#
# For every two metrics, Spearman's rank correlation over the models that have both, on the oriented scale (+1 =
# the two metrics put the models in the same order of bias), with a Fisher-z interval (Bonett–Wright standard error)
# once there are at least `min_models_agreement` models. With fewer, no correlation can say whether benchmarks agree.

# %%
agreement = compare.agreement_table(table, min_models=min_models_agreement)
out.table(agreement, "agreement", markdown=True)
display(agreement[["metric_a", "metric_b", "n_models", "rho", "ci_low", "ci_high", "status"]])

# %% [markdown]
# ## 4. Summary (computed from the tables above)

# %% tags=["findings"]
summary = compare.summary_lines(table, pairs, groups, agreement, min_models=min_models_agreement, plan=PLAN)
out.text("\n".join(f"- {s}" for s in summary) + "\n", "summary.md")
display(Markdown("\n".join(f"- {s}" for s in summary)))

# %%
timings = pd.DataFrame([{"stage": "total", "seconds": round(time.perf_counter() - t_start, 1)}])
out.table(timings, "timings")
display(timings)

# %% [markdown]
# ## Calibration of the confirmatory tests
#
# Each tested claim instance's test, simulated under the null on this run's own raw data (the two models' answers
# swapped within random clusters and what each test reads (BBQ's score pseudo-values) recomputed; see
# docs/calibration.md), at alpha and at the level the instance was tested at, with `calibration_replications`
# replications at alpha and proportionally more at that level (the same relative Monte Carlo SE): the rejection rates,
# their ratio to the tested level and the coverage of the interval, with Monte Carlo standard errors
# (`tables/calibration.csv`). A test rejecting more than 1.5 times its tested level is flagged below.

# %%
from biaslab.plan import calibration  # noqa: E402

calib = calibration.run(out, "05_compare", calibration_replications, seed=seed, root=root, plan=PLAN)
display(calib)
print(calibration.oversize_line(calib))

# %% [markdown]
# ## Sensitivity analyses of the claims
#
# Each claim instance under the plan's pre-specified alternatives (invalid answers counted the other way, with the
# tipping point; the degenerate-responder threshold; CrowS-Pairs' sampling weights: unweighted, and with the
# finite-population correction), each alternative's p replacing the primary's among the primaries it was decided with, at
# the same share of the error budget (`tables/sensitivity.csv`, one row per claim instance and analysis).

# %%
from biaslab.plan.sensitivity import compare_sensitivity  # noqa: E402
from biaslab.stats import reanalysis  # noqa: E402

sensitivity = compare_sensitivity(root, pairs, seed=seed, plan=PLAN)
out.table(sensitivity, "sensitivity")
display(Markdown(reanalysis.render(sensitivity)))

# %%
from biaslab.report.outputs import watermark
print(watermark())
