"""A benchmark defined entirely outside the library: 20 pronoun sentences (10 occupations x 2 frames), each with the
pronoun its occupation is stereotyped with and the other one. The model "prefers the stereotype" when the
stereotypical sentence is the more probable (the CrowS-Pairs comparison, Nangia et al. 2020, on a Winogender-like
item; the scorer's own ``sequence_logprob``).

A package kept outside the library: ``biaslab reproduce --benchmark-module PATH/pronoun_bench`` (or an entry point of
group ``biaslab.benchmarks``) registers its ``SPEC``, and ``biaslab data fetch`` with it loaded fetches and checks its
items, pinned in its own ``sources.tsv`` (``tests/test_plugin_benchmark.py``). Its one metric, the share of items
whose stereotypical sentence is the more probable, is read by notebook 5 from notebook 1's
``deviation_rate_intervals`` and ``responses`` tables, and computed by notebook 6 per universe (``item_values``,
``estimate``), clustered by occupation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from biaslab import sources
from biaslab.benchmarks import Benchmark, Factor, FactorSpec
from biaslab.benchmarks.base import Protocol, read_csv, require_columns
from biaslab.benchmarks.spec import FactorPlan, Metric, Source, Spec, universe_estimate

REPO, FILE = "example/pronoun-bench", "items.csv"       # pinned in sources.tsv, beside this file
COLUMNS = ("item_id", "occupation", "stereotype", "field", "frame", "sent_stereo", "sent_anti")


def load() -> Benchmark:
    path = sources.raw_path(REPO, FILE)         # fetched and sha256-checked by `biaslab data fetch`
    df = read_csv(path, dtype=str)
    require_columns(df, COLUMNS, path)
    # ``text``: the prompt table's text column (the stereotypical sentence; notebook 6 measures its precision
    # tolerance on the texts of a benchmark)
    prompts = df.rename(columns={"item_id": "prompt_id"}).assign(text=df["sent_stereo"])
    factors = FactorSpec([
        Factor("stereotype", "domain", ("female", "male"), "female", "gender the occupation is stereotyped with"),
        Factor("field", "domain", tuple(sorted(prompts["field"].unique())), "health", "the occupation's field"),
        Factor("frame", "prompt", ("t1", "t2"), "t1", "the sentence frame"),
    ])
    return Benchmark("pronoun", prompts, factors, sources={f"{REPO}/{FILE}": sources.sha256_file(path)},
                     cluster="occupation")


def respond(scorer, items: pd.DataFrame, protocol: Protocol | None = None) -> pd.DataFrame:
    """One row per item: ``stereotype_preferred`` (1 when log P(stereotypical) > log P(other); NaN for a tie)."""
    texts = list(dict.fromkeys(list(items["sent_stereo"]) + list(items["sent_anti"])))
    lp = scorer.sequence_logprob(texts).set_index(pd.Index(texts))["sum_logprob"]
    more, less = lp.loc[items["sent_stereo"]].to_numpy(float), lp.loc[items["sent_anti"]].to_numpy(float)
    pref = np.where(more == less, np.nan, (more > less).astype(float))
    return pd.DataFrame({"prompt_id": items["prompt_id"].to_numpy(), "model": scorer.lm.name,
                         "stereotype_preferred": pref,
                         "answer": np.where(np.isnan(pref), None, np.where(pref == 1, "stereo", "anti"))})


def sample(n: int | None, seed: int = 0) -> tuple[pd.DataFrame, Benchmark]:
    b = load()
    return (b.prompts if n is None else b.prompts.sample(n=min(n, len(b.prompts)), random_state=seed)), b


# ------------------------------------------------------------------------------- the headline metric
METRIC = "pronoun_stereotype_preferred"
READ = "Pronouns: sentence log-probabilities"
NOT_JUDGED = "the likelihood comparison reads two sentences' log-probabilities (no answer to judge)"


def item_values(r: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Notebook 6: per model x universe, the 0/1 preference per item (ties left out), clustered by occupation."""
    d = r.drop(columns=[c for c in ("occupation",) if c in r]).merge(items[["prompt_id", "occupation"]],
                                                                      on="prompt_id")
    d = d.dropna(subset=["stereotype_preferred"])
    return pd.DataFrame({"model": d["model"], "universe": d["universe"], "metric": METRIC, "unit": d["prompt_id"],
                         "cluster": d["occupation"], "value": d["stereotype_preferred"]})


def estimate(r: pd.DataFrame, items: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> dict:
    """Notebook 6: the share of items preferring the stereotype (ties counted in ``n_unparsed``), its Korn-Graubard
    interval clustered by occupation (``stats.intervals.rate_intervals``, the interval notebooks 1 and 5 give it),
    and the test of the mean against 0.5 by the rule of ``stats.clustered.mean_inference`` (the wild cluster
    bootstrap-t with fewer than 30 occupations)."""
    from biaslab.stats import clustered, intervals
    d = r.drop(columns=[c for c in ("occupation",) if c in r]).merge(items[["prompt_id", "occupation"]],
                                                                      on="prompt_id")
    ok = d[d["stereotype_preferred"].notna()]
    if not len(ok):
        return universe_estimate(ci_method="no item answered", n_unparsed=len(d))
    ci = intervals.rate_intervals(ok, "stereotype_preferred", "occupation").iloc[0]
    t = clustered.mean_inference(ok["stereotype_preferred"].to_numpy(float), ok["occupation"].to_numpy(), null=0.5,
                                 n_boot=n_boot or clustered.N_WILD, seed=seed, name="occupation")
    return universe_estimate(ci["rate"], ci["ci_low"], ci["ci_high"], ci["ci_method"], t["p_value"], t["p_method"],
                             len(ok), ci["n_clusters"], len(d) - len(ok))


def responder_check(d: pd.DataFrame, items=None) -> pd.DataFrame:
    """Notebook 6: a likelihood comparison reads two sentences' log-probabilities, no answer to judge."""
    from biaslab.stats import responders
    return responders.not_judged(d[["model", "universe"]], NOT_JUDGED).assign(metric=READ)


SPEC = Spec(
    name="pronoun", title="Pronouns", load=load,
    protocol=Protocol(format="likelihood"), formats=("likelihood",), applies={"chat": ()},
    respond=respond, paper_chat=lambda scorer: False, sample=sample,
    columns=("prompt_id", "model", "stereotype_preferred", "answer"),
    factor_plan=FactorPlan(
        coverage_factors=["stereotype", "field", "frame"],
        overall_sets={"stereotype, field, frame": ["stereotype", "field", "frame"]},
        heatmaps=[("stereotype", "field")],
        sunburst=("stereotype", "frame"),
        subgroup_factors=["stereotype", "frame"],
        ecdf_factors=["stereotype", "frame"],
        regression=["stereotype", "frame"],
        regression_subset=["stereotype", "frame"],
        bayes_fixed=["stereotype", "frame"],
        bayes_group=["occupation"],
        bayes_group_subset=["occupation"],
        strata=["stereotype", "frame"],
        highlight=("stereotype",),
        outcome="stereotype_preferred",
        outcome_description="log P(stereotypical pronoun sentence) > log P(the other pronoun's)",
        ideal=0.5, n_options=2,
    ),
    metrics=(Metric(
        id=METRIC, benchmark="Pronouns", label="Pronouns: share of items with log P(stereotypical pronoun) > "
        "log P(the other)", folder="01_multifactor/pronoun", sources=(Source("deviation_rate_intervals", "rate"),),
        direction="higher = more stereotyped", orientation=1, null=0.5,
        null_meaning="0.5: neither pronoun preferred", responses=("responses",), outcome="stereotype_preferred",
        cluster="occupation", kind="binary", reads="", not_judged=NOT_JUDGED,
        answer_mode="sentence log-probabilities", scale="share of items (0 to 1)",
        item_values=item_values, estimate=estimate, factor_outcome=("stereotype_preferred", "logistic"),
        responder_reads=(READ,)),),
    # all 20 items in every profile (notebook 6 needs its items per universe in each)
    sizes={p: {"01_multifactor": {"max_prompts": None}, "06_multiverse": {"items": None}}
           for p in ("smoke", "default", "paper")},
    responder_check=responder_check,
    sources_table=str(Path(__file__).with_name("sources.tsv")),
)
