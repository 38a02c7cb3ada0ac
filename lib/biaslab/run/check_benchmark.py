"""``biaslab check-benchmark MODULE``: a benchmark module's spec dry-run on a few items against a fake scorer, through
every hook notebooks 1, 5 and 6 call, each missing or ill-shaped piece named with its fix; exit 1 on a problem (the
idea of scikit-learn's ``check_estimator``: a contract checked by one call; the contracts: docs/adding_a_benchmark.md).

The fake scorer is the real :class:`~biaslab.scoring.Scorer` (its argument checks, a missing text refused) over
:class:`FakeBackend`, whose numbers are a hash of the text: instant, no model, instruction-tuned with a chat template.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from .. import benchmarks
from ..benchmarks import instrument
from ..benchmarks.base import Benchmark
from ..papers.compare import tables as compare
from ..papers.multifactor import factorial
from ..papers.multiverse import design, matcher, sweep
from ..scoring.backends.base import Backend
from ..scoring.backends.local import sequence_table
from ..scoring.labels import aggregate, label_forms
from ..scoring.scorer import MemoryCache, Scorer
from ..stats import responders
from . import parameters, profiles

ITEM_VALUE_COLUMNS = ["model", "universe", "metric", "unit", "cluster", "value"]


def _u(*parts) -> float:
    """A number in [0, 1) fixed by its inputs: the fake model's answers."""
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big") / 2 ** 64


class FakeBackend(Backend):
    """Token log-probabilities in [-5, -1] per word, a hash of the text; generations a word of the prompt."""
    name = "fake"

    def __init__(self, lm):
        super().__init__(lm)
        self.token_budget = 2048

    def _lp(self, text: str) -> list[float]:
        return [-1 - 4 * _u(text, i) for i in range(max(1, len(text.split())))]

    def sequence_logprob(self, sc, texts, per_token):
        df = sequence_table({t: self._lp(t) for t in texts}, texts)
        return df.assign(tokens=[t.split() for t in texts], token_logprobs=[self._lp(t) for t in texts]) \
            if per_token else df

    def option_values(self, sc, prompts, options, chat, eos: bool = True):
        return [[(sum(self._lp(p + o)[-len(o.split() or [o]):]), max(1, len(o.split()))) for o in opts]
                for p, opts in zip(self.render(prompts, chat), options)]

    def label_distribution(self, sc, prompts, labels, chat):
        forms = label_forms(labels)
        flat = [f for fs in forms.values() for f in fs]
        return aggregate([[s for s, _ in v] for v in self.option_values(sc, prompts, [flat] * len(prompts), chat)],
                         forms)

    def generate(self, sc, prompts, max_new_tokens, stop, do_sample, seed, temperature, chat):
        words = [re.findall(r"\w+", p) or ["yes"] for p in self.render(prompts, chat)]
        return [" ".join(w[int(_u(p, seed) * len(w))] for _ in range(2)) for p, w in zip(prompts, words)]

    def render(self, prompts, chat):
        return [f"<|user|>\n{p}\n<|assistant|>\n" if chat else str(p) for p in prompts]

    def chat_available(self) -> bool:
        return True

    def token_strings(self, sc, text: str) -> list[str]:
        return text.split()


class FakeScorer(Scorer):
    """:class:`~biaslab.scoring.Scorer` over :class:`FakeBackend` (scores kept in memory)."""

    def __init__(self, name: str = "fake-instruct"):
        self.lm = SimpleNamespace(name=name, kind="causal", tokenizer=None, fingerprint={"model": name})
        self.kind, self.progress, self.cache_folder, self._cache = "causal", False, None, MemoryCache()
        self.backend = FakeBackend(self.lm)
        self.stats = self.backend.stats


class Problem(Exception):
    """What is wrong, with its fix."""

    def __init__(self, why: str, fix: str):
        super().__init__(why)
        self.fix = fix


class Checks:
    """Each hook in a :meth:`step`: an exception there is a problem (named, with the step's fix), the rest go on."""

    def __init__(self, out=print):
        self.problems: list[str] = []
        self.out = out
        self.seen: set[str] = set()

    @contextlib.contextmanager
    def step(self, what: str, fix: str):
        try:
            yield
        except Exception as exc:        # the plugin's own code: anything it raises is its problem, named
            why = " ".join((str(exc) if isinstance(exc, Problem) else f"{type(exc).__name__}: {exc}").split())[:400]
            if why in self.seen:            # one problem, named once (every universe of notebook 6 asks respond)
                self.out(f"FAIL  {what}: as above")
                return
            self.seen.add(why)
            self.problems.append(f"{what}: {why}. Fix: {getattr(exc, 'fix', fix)}")
            self.out(f"FAIL  {self.problems[-1]}")
        else:
            self.out(f"ok    {what}")


def _need(ok: bool, why: str, fix: str) -> None:
    if not ok:
        raise Problem(why, fix)


def _columns(df, want, what: str, fix: str) -> None:
    _need(isinstance(df, pd.DataFrame), f"{what} is a {type(df).__name__}, not a DataFrame", fix)
    missing = [c for c in want if c not in df.columns]
    _need(not missing, f"{what} has no column(s) {missing} (it has {list(df.columns)[:12]})", fix)


def _takes(f, *names: str) -> bool:
    params = inspect.signature(f).parameters
    return any(p.kind == p.VAR_KEYWORD for p in params.values()) or all(n in params for n in names)


def check_spec(spec, n: int = 8, checks: Checks | None = None, seed: int = 0) -> list[str]:
    """Every hook of ``spec`` that notebooks 1, 5 and 6 call, on ``n`` items; returns the problems (also printed)."""
    c = checks or Checks()
    sc = FakeScorer()
    doc = "docs/adding_a_benchmark.md"
    with c.step(f"{spec.name}: metric ids and titles", f"give each Metric a unique id and benchmark={spec.title!r}"):
        bad = [f"metric {m.id!r} is also a metric of {others}" for m in spec.metrics if (others := [
            s.name for s in benchmarks.SPECS.values() if s is not spec and m.id in [x.id for x in s.metrics]])]
        bad += [f"metric {m.id!r} has benchmark={m.benchmark!r}, not the Spec.title {spec.title!r}"
                for m in spec.metrics if m.benchmark != spec.title]
        _need(not bad, "; ".join(bad), f"rename the metric; set Metric.benchmark={spec.title!r}")
    with c.step(f"{spec.name}: sizes", f"Spec.sizes[profile][notebook] = {{parameter: value}} ({doc})"):
        for prof, nbs in spec.sizes.items():
            _need(prof in profiles.PROFILE_NAMES, f"profile {prof!r} is none of {profiles.PROFILE_NAMES}",
                  f"name a profile of {profiles.PROFILE_NAMES}")
            for nb, ps in nbs.items():
                _need(nb in profiles.NOTEBOOKS, f"sizes[{prof!r}] names notebook {nb!r}",
                      f"name one of {sorted(profiles.NOTEBOOKS)}")
                unknown = sorted(set(ps) - set(parameters.defaults(nb)))
                _need(not unknown, f"sizes[{prof!r}][{nb!r}] sets {unknown}, not parameters of {nb}",
                      f"use parameters of notebooks/{nb}.py's parameters cell")
    bench = None
    with c.step(f"{spec.name}: load() -> Benchmark", f"return biaslab.benchmarks.Benchmark(name, prompts, factors, "
                "sources={file: sha256}, cluster=COLUMN) with prompt_id, text and the factor columns"):
        bench = spec.load()
        _need(isinstance(bench, Benchmark), f"load() returned a {type(bench).__name__}", "return a Benchmark")
        _columns(bench.prompts, ["prompt_id", "text"], "the prompt table", "add the column in load()")
        _need(bench.cluster is not None, "Benchmark.cluster is None: every interval clusters on the generating unit",
              "name the column of the items that share wording (template, occupation, ...)")
        _need(bool(bench.sources), "Benchmark.sources is empty: the run's MANIFEST would not name the data",
              "give {file: sha256} of every file read (sources.raw_path checks it)")
    if bench is not None and spec.factor_plan is not None:
        _notebook_1(spec, sc, n, seed, c)
    if spec.protocol is not None and any(m.item_values for m in spec.metrics):
        _notebook_6(spec, sc, n, seed, c)
    elif spec.metrics:
        c.out(f"note  {spec.name}: not in notebook 6 (no Spec.protocol, or no Metric.item_values)")
    return c.problems


def _notebook_1(spec, sc, n, seed, c: Checks) -> None:
    plan, label = spec.factor_plan, f"{spec.name}: notebook 1"
    bench = subset = scored = table = None
    with c.step(f"{label}: FactorPlan.prepare or load, and FactorPlan.check (its factors are the items')",
                "name factors of the loader's FactorSpec or FactorPlan.extra_factors"):
        bench = factorial.prepare(spec)
    if bench is None:
        return
    with c.step(f"{label}: FactorPlan.sample(prompts, n, strata, seed=) -> prompts", "sample(prompts, n, strata, "
                "seed=0) returns rows of prompts (n None: all)"):
        _need(plan.sample is None or _takes(plan.sample, "seed"), "FactorPlan.sample takes no seed=",
              "def sample(prompts, n, strata, seed=0)")
        subset = factorial.sample(plan, bench.prompts, n, seed=seed)
        _columns(subset, ["prompt_id"], "the sample", "return rows of the prompt table")
        _need(subset["prompt_id"].isin(bench.prompts["prompt_id"]).all() and len(subset) > 0,
              "the sample is empty or holds rows not in the prompt table", "return rows of the prompt table")
    if subset is None:
        return
    with c.step(f"{label}: respond(scorer, items, protocol) at the paper's protocol, with FactorPlan.outcome",
                f"respond returns one row per item with prompt_id, Spec.columns {list(spec.columns)} and the 0/1 "
                f"{plan.outcome!r} (or FactorPlan.responses derives it)"):
        scored = factorial.score(spec, sc, subset)
        _columns(scored, ["prompt_id", "model", "seed", plan.outcome, plan.answer], "the responses",
                 "return them from respond, or derive them in FactorPlan.responses (FactorPlan.answer: the column "
                 "the responder check reads)")
        _need(not scored.duplicated(["prompt_id", "model", "seed"]).any(), "respond returned an item twice",
              "one row per item (per seed)")
        bad = set(scored[plan.outcome].dropna().unique()) - {0, 1, True, False}
        _need(not bad, f"{plan.outcome!r} holds {sorted(map(str, bad))[:5]}, not 0/1", "make the outcome 0/1 (NaN: "
              "not answered)")
    if scored is None:
        return
    with c.step(f"{label}: responses.csv (what notebook 5's Metric.derive gets)", "give the cluster column in the "
                "prompt table"):
        table = factorial.response_table(scored, bench, plan)
        _columns(table, bench.cluster_columns, "responses.csv", "keep the cluster column(s) in the prompt table")
    with c.step(f"{label}: responder check on FactorPlan.answer", "FactorPlan.n_options: an int >= 2, or None"):
        _need(plan.n_options is None or (isinstance(plan.n_options, int) and plan.n_options >= 2),
              f"n_options={plan.n_options!r}", "an int >= 2 or None")
        responders.responder_check(scored.assign(a=scored[plan.answer].where(
            ~scored[plan.answer].isin(plan.invalid_answers))), answer="a", n_options=plan.n_options)
    if spec.option_roles is not None:
        with c.step(f"{label}: Spec.option_roles(items) -> each item's option roles", "return prompt_id, role_j and "
                    "chars_j per option, gold, competence_item and stratum for every item (docs/validity.md)"):
            instrument.answers(spec, subset, scored, bench.cluster)
    for name, check in plan.checks.items():
        with c.step(f"{label}: FactorPlan.checks[{name!r}](bench) -> DataFrame", "return a DataFrame"):
            _need(isinstance(check(bench), pd.DataFrame), "it returned no DataFrame", "return a DataFrame")
    if plan.summaries:
        with c.step(f"{label}: FactorPlan.summaries(scored, subset, cluster) -> [(table, DataFrame, markdown)]",
                    "return a list of (table name, DataFrame, markdown: bool) tuples"):
            for t in plan.summaries(scored, subset, bench.cluster):
                _need(isinstance(t, tuple) and len(t) == 3 and isinstance(t[0], str)
                      and isinstance(t[1], pd.DataFrame), f"an entry is {type(t).__name__} {str(t)[:80]}",
                      "(name, DataFrame, markdown) per table")
    for sid, variant in plan.outcome_variants.items():
        with c.step(f"{label}: FactorPlan.outcome_variants[{sid!r}](responses)", "return [(analysis, description, "
                    "responses with the outcome redefined)]"):
            for a, _, d in variant(scored):
                _columns(d, [plan.outcome], f"variant {a!r}", "redefine FactorPlan.outcome there")
    if plan.released:
        with c.step(f"{label}: FactorPlan.released(bench) -> DataFrame", "return other models' answers"):
            _need(isinstance(plan.released(bench), pd.DataFrame), "it returned no DataFrame", "return a DataFrame")
    if plan.cot:
        with c.step(f"{label}: FactorPlan.cot(bench), cot_sample(bench, subset, n, seed=)", "cot returns a "
                    "Benchmark, cot_sample rows of its prompts"):
            _need(isinstance(plan.cot(bench), Benchmark), "cot returned no Benchmark", "return a Benchmark")
            _columns(plan.cot_sample(bench, subset, 2, seed=seed), ["prompt_id"], "cot_sample", "return prompts")
    _notebook_5(spec, table, c)


def _notebook_5(spec, table, c: Checks) -> None:
    """Each metric notebook 5 reads: from notebook 1's responses.csv (written and read back as notebook 5 does)."""
    own = f"01_multifactor/{spec.name}"
    for m in (m for m in spec.metrics if m.sources):
        label = f"{spec.name}: notebook 5: metric {m.id}"
        with c.step(f"{label}: Metric.folder, kind, responders", "see docs/adding_a_benchmark.md, notebook 5"):
            _need(bool(m.folder), "Metric.folder is empty", f"folder={own!r}")
            _need(not m.folder.startswith("01_multifactor/") or m.folder == own, f"folder {m.folder!r} is another "
                  "benchmark's", f"folder={own!r}")
            _need(m.kind in ("binary", "continuous", "ratio_linearized", "source_interval"), f"kind {m.kind!r}",
                  "binary, continuous, ratio_linearized or source_interval")
            _need(m.responders is not None or bool(m.not_judged), "responders=None (no responder row judges it) "
                  "but no not_judged reason", "say why in Metric.not_judged, or give responders={} (every row of "
                  "the notebook's responders.csv judges it)")
        if m.folder != own or table is None or "responses" not in m.responses:
            continue
        with c.step(f"{label}: Metric.derive and its interval on responses.csv", f"derive(responses of one model) "
                    f"returns them with {m.outcome!r}; unit {list(m.unit)} and cluster {m.cluster!r} are columns"):
            with tempfile.TemporaryDirectory() as root:
                (Path(root) / m.folder / "tables").mkdir(parents=True)
                table.to_csv(Path(root) / m.folder / "tables" / "responses.csv", index=False)
                r = compare.unit_responses(m, Path(root))
            _columns(r, [m.outcome, "model"] + [x for x in ([m.cluster] if isinstance(m.cluster, str) else
                                                            m.cluster or ())], "the derived responses",
                     "derive the outcome (Metric.derive), or name responses.csv's columns")
            compare.interval(m, r[r["model"] == r["model"].iloc[0]], n_boot=99)


def _notebook_6(spec, sc, n, seed, c: Checks) -> None:
    label = f"{spec.name}: notebook 6"
    its = frames = None
    with c.step(f"{label}: Spec.sample(n, seed=) -> (items, Benchmark)", "def sample(n, seed=0) returning a "
                "design-preserving subset of load()'s prompts and the Benchmark"):
        its, b = sweep.items(spec.name, n, seed=seed)
        _columns(its, ["prompt_id"], "the items", "return (items, Benchmark)")
        _need(isinstance(b, Benchmark), f"the second value is a {type(b).__name__}", "return (items, Benchmark)")
    if its is None:
        return
    ref = design.ModelReference(chat=(spec.name,) if spec.paper_chat(sc) else ())
    frames, estimates = [], []
    for u in design.universes(spec.name, ref, "ofat"):
        if u["precision"] != ref.precision:
            continue
        with c.step(f"{label}: universe {u.id}: respond and Metric.estimate", "respond reads the Protocol it is "
                    "given (Spec.honours, Spec.applies); estimate returns spec.universe_estimate(...)"):
            prot = design.protocol(u)
            r = spec.responses(sc, its, prot, **({"match": matcher.match} if _takes(spec.respond, "match") else {}))
            r = r.assign(model=sc.lm.name)
            frames.append(r.assign(universe=u.id, benchmark=spec.name, **{"choice_order": prot.order, **u.as_dict}))
            estimates += [{**sweep.estimate_row(m, r, its, 99, seed), "universe": u.id}
                          for m in spec.metrics if m.item_values and m.estimate]
    if not frames:
        return
    long = pd.concat(frames, ignore_index=True)
    for m in (m for m in spec.metrics if m.item_values):
        with c.step(f"{label}: metric {m.id}: item_values(responses of every universe, items)",
                    f"return {ITEM_VALUE_COLUMNS}, one row per model x universe x unit, whose mean per universe is "
                    "the estimate"):
            v = m.item_values(long, its)
            _columns(v, ITEM_VALUE_COLUMNS, "item_values", f"return the columns {ITEM_VALUE_COLUMNS}")
            if m.estimate is not None:
                _need(set(v["metric"]) <= {m.id}, f"its rows name metric(s) {sorted(set(v['metric']) - {m.id})}",
                      f"label them {m.id!r}")
                for e in (e for e in estimates if e["metric"] == m.id and np.isfinite(e["estimate"])):
                    mean = v.loc[v["universe"] == e["universe"], "value"].mean()
                    _need(np.isclose(mean, e["estimate"]), f"universe {e['universe']}: the values' mean {mean:.4g} "
                          f"is not the estimate {e['estimate']:.4g}", "estimate and item_values read one outcome")
        with c.step(f"{label}: metric {m.id}: factor_outcome", "(response column, 'logistic' | 'linear'[, 0/1 column "
                    "selecting rows]), or () for no factor importance"):
            _need(not m.factor_outcome or len(m.factor_outcome) in (2, 3) and m.factor_outcome[1] in ("logistic", "linear"),
                  f"factor_outcome={m.factor_outcome!r}", "(column, 'logistic' or 'linear')")
            _columns(long, list(m.factor_outcome[:1]) + list(m.factor_outcome[2:]), "the responses", "name a column respond "
                     "returns")
    if spec.responder_check is not None:
        with c.step(f"{label}: responder_check(responses, items) labels Metric.responder_reads", "return rows per "
                    "model x universe with a metric column naming what each reads"):
            rc = spec.responder_check(long, its)
            _columns(rc, ["model", "universe", "metric"], "responder_check", "return model, universe, metric, "
                     "degenerate, reasons")
            reads = {x for m in spec.metrics for x in m.responder_reads}
            _need(reads <= set(rc["metric"]), f"Metric.responder_reads {sorted(reads - set(rc['metric']))} label no "
                  "row", "name the rows' metric labels")


def main(target: str, items: int = 8, out=print) -> int:
    """Load ``target`` (a .py file, a package folder or a module name) and check each benchmark it registers."""
    try:
        record = benchmarks.load_module(target, how="check-benchmark")
    except (ImportError, TypeError, ValueError) as exc:   # a Spec refused where it is made, or by register
        out(f"FAIL  {target}: {exc}")
        return 1
    if not record["benchmarks"]:
        out(f"FAIL  {target}: registers no benchmark. Fix: end it with SPEC = biaslab.benchmarks.spec.Spec(...)")
        return 1
    problems = [p for name in record["benchmarks"] for p in check_spec(benchmarks.spec(name), items, Checks(out))]
    out(f"{len(problems)} problem(s) in {record['path']}" if problems else f"{record['path']}: every hook holds")
    return 1 if problems else 0


__all__ = ["FakeScorer", "check_spec", "main"]
