"""What a benchmark *is*, in one place: its :class:`Spec`.

Each benchmark module ends with one ``SPEC = Spec(...)``; ``benchmarks/__init__.py`` lists the modules (one line per
benchmark) and every notebook, ``compare``, ``multiverse``, ``profiles`` and the importers loop over
:data:`biaslab.benchmarks.SPECS` instead of keeping their own name-keyed tables. A notebook never branches on a
benchmark's name: what differs between benchmarks is a field here.

Adding a benchmark is one module (its loader, ``respond`` and ``SPEC``), one data file, and one registry line, or
the module outside the library as a plugin (``--benchmark-module``, an entry point; ``docs/adding_a_benchmark.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, Mapping

import pandas as pd

from ..sources import DataError
from .base import Benchmark, Protocol


@dataclass(frozen=True)
class Source:
    """Where notebook 5 reads a metric's headline value: a table of the metric's notebook folder."""
    table: str                       # file stem under <notebook folder>/tables/
    column: str
    filters: dict = field(default_factory=dict)
    answer_mode: str = ""            # how the answers of this source were obtained (defaults to the metric's)
    ci: tuple = ("ci_low", "ci_high", "ci_method")   # the source's interval of ``column`` (low, high, method)


@dataclass(frozen=True)
class Metric:
    """One headline bias metric of a benchmark, declared once: notebook 5 reads it from its notebook's tables
    (``folder``, ``sources``) and intervals it from the per-unit ``responses``; notebook 6 computes it per universe
    (``estimate``) and pairs universes on its per-unit values (``item_values``: a metric without them is not in the
    multiverse). ``null`` is the value of a model without bias, ``orientation`` +1 when higher is more biased."""
    id: str
    benchmark: str                   # the benchmark's title (``Spec.title``)
    label: str
    folder: str = ""                 # notebook 5: the output folder holding it, relative to the outputs root
    sources: tuple = ()              # Source rows holding the headline value per model (first match wins; (): none)
    direction: str = ""
    orientation: int = 1             # +1: higher = more stereotyped / biased; -1: lower = more biased
    null: float = 0.0
    null_meaning: str = ""
    responses: tuple = ()            # per-unit response tables (stems)
    response_filters: dict = field(default_factory=dict)
    outcome: str = ""                # response column (or derived by ``derive``)
    unit: tuple = ("prompt_id",)     # pairing unit (columns joined)
    cluster: str | tuple | None = None   # generating unit(s) for intervals: one column, or two crossed ones
    kind: str = "binary"             # binary | continuous | ratio_linearized (a ratio score) | source_interval
    derive: Callable | None = None   # responses -> responses with ``outcome`` added
    note: str = ""
    responders: dict | None = None   # rows of the source's responders.csv that judge this metric (None: none do)
    reads: str = "answer"            # what the metric reads: "answer" | "probabilities" (the responder rule)
    not_judged: str = ""             # why no responder rule applies (with responders None)
    answer_mode: str = ""            # how every model's answers were obtained (a source may say otherwise)
    stratified: bool = False         # responses are a stratified sample (stratum, weight): estimate for the population
    # --- notebook 6 (the multiverse)
    scale: str = ""                  # what the number is on, for an axis ("bias score (−1 to 1)")
    #: (responses, items) -> model, universe, metric, unit, cluster (NA: units independent), value: one value per
    #: unit whose mean is the estimate (the paired differences between universes); None: not in the multiverse
    item_values: Callable | None = None
    #: (responses, items, n_boot, seed) -> estimate, ci_low, ci_high, ci_method, p_value, p_method, n, n_clusters,
    #: n_unparsed (answers not read; and extra columns) of one model x universe; None: the metric is a family of
    #: per-group values (their mean with a t interval over units, ``multiverse.analysis.group_preference``)
    estimate: Callable | None = None
    #: the per-item response column notebook 6's factor importance regresses on the choices, the regression
    #: (``logistic`` | ``linear``) and optionally a 0/1 column selecting the rows (BBQ: answers naming a person)
    factor_outcome: tuple = ()
    #: the rows of its spec's ``responder_check`` (their ``metric`` label) that judge it in a universe (a family of
    #: per-group values: the check per class type, then the one per universe)
    responder_reads: tuple = ()


def universe_estimate(estimate=float("nan"), ci_low=float("nan"), ci_high=float("nan"), ci_method: str = "",
                      p_value=float("nan"), p_method: str = "", n: int = 0, n_clusters: int = 0, n_unparsed: int = 0,
                      **extra) -> dict:
    """What a :attr:`Metric.estimate` returns for one model x universe (notebook 6), every column named once: a part
    not given is undefined (NaN, "", 0: a universe with no answer to read); ``extra`` columns follow."""
    return {"estimate": float(estimate), "ci_low": float(ci_low), "ci_high": float(ci_high), "ci_method": ci_method,
            "p_value": float(p_value), "p_method": p_method, "n": int(n), "n_clusters": int(n_clusters),
            "n_unparsed": int(n_unparsed), **extra}


#: the fields a benchmark that answers requests must fill (with ``protocol`` set)
RESPONDING_FIELDS = ("formats", "respond", "paper_chat", "columns")


@dataclass
class FactorPlan:
    """What notebook 1 (Powers et al.) analyses on one benchmark: the factors of each analysis (coverage eqs. 1-2,
    subgroups eq. 3, deviation metric eq. 4 with ideal rate ``ideal``, regression §3.4) and the 0/1 ``outcome``. The
    fields after ``extra_factors`` are what differs between benchmarks in the notebook (default: nothing of that
    kind). Its rules are checked here (:meth:`check`: those that need the benchmark)."""
    coverage_factors: list[str]                  # factors of the coverage tensor (per-factor GI, pairwise CP)
    overall_sets: dict[str, list[str]]           # named factor sets for the overall CP / GI
    heatmaps: list[tuple[str, str]]              # pairwise count heatmaps
    sunburst: tuple[str, str]                    # (inner ring, outer ring): two of ``subgroup_factors``
    subgroup_factors: list[str]                  # factors for 1st/2nd-level subgroup tables
    ecdf_factors: list[str]                      # second-level subgroups shown in the eCDF
    regression: list[str]                        # LR factors on the full (released) responses; not the cluster
    regression_subset: list[str]                 # LR factors on a scored subset (fewer levels)
    bayes_fixed: list[str]
    bayes_group: list[str]                       # group-level factors on the full responses
    bayes_group_subset: list[str]                # ... and on a scored subset (few prompts per template)
    strata: list[str]                            # strata of the scored subset
    recode: dict = field(default_factory=dict)   # factor -> {old level: new level} before regression
    reference_override: dict = field(default_factory=dict)
    highlight: tuple = ()
    outcome: str = "deviated"                    # the 0/1 response column every analysis models
    outcome_description: str = "the answer is the benchmark's biased answer"
    ideal: float = 0.0                           # ideal subgroup rate C of the deviation metric (eq. 4)
    extra_factors: tuple = ()                    # factors beyond the loader's spec (response-level: kind "model")
    # --- what differs between benchmarks in notebook 1 (None / empty: nothing of that kind)
    prepare: Callable[[], Benchmark] | None = None    # the items when not ``Spec.load()`` (CrowS-Pairs: its 3 files)
    sample: Callable[..., pd.DataFrame] | None = None  # (prompts, n, strata, seed) -> subset; None: by ``strata``
    responses: Callable[[pd.DataFrame], pd.DataFrame] | None = None   # respond's table -> with ``outcome`` derived
    answer: str = "answer"                       # the column the responder check reads
    n_options: int | None = None                 # answers a responder chooses from (None: not a fixed set)
    invalid_answers: tuple = ()                  # answers that are no answer (the responder check leaves them out)
    chance_factor: str | None = None             # power: a typical level of this factor's accuracy vs 1/n_options
    checks: Mapping[str, Callable[[Benchmark], pd.DataFrame]] = field(default_factory=dict)   # table -> check(bench)
    #: sensitivity id -> responses -> [(analysis, description, responses with ``outcome`` redefined)] (agentic)
    outcome_variants: Mapping[str, Callable[[pd.DataFrame], list]] = field(default_factory=dict)
    reads: str = "answer"                        # what ``outcome`` reads: answer | probabilities (no degenerate rows)
    #: (prompts, protocol, seed, **selection) -> (subset, protocol): the notebook's ``selection`` (CALM: notebook 2's)
    select: Callable[..., tuple] | None = None
    shares_scores_with: str = ""                 # the notebook that scores exactly these requests (runner lanes)
    summaries: Callable[..., list] | None = None  # (scored, subset, cluster) -> [(table, DataFrame, markdown?)]
    released: Callable[[Benchmark], pd.DataFrame] | None = None   # other models' released answers (SSQA)
    cot: Callable[[Benchmark], Benchmark] | None = None   # the benchmark with its chain-of-thought prompts (SSQA)
    cot_sample: Callable[..., pd.DataFrame] | None = None   # (bench, subset, n, seed) -> CoT prompts of the subset
    paper_gini: Mapping[str, float] | None = None        # the paper's per-factor Gini indices (Table 1)
    paper_overall: Mapping[str, float] | None = None     # the paper's overall coverage numbers (§3.2.1)
    paper_recode: tuple | None = None            # (factor, label, recode(prompts)): the paper's reading of a factor
    unit_factors: tuple = ()                     # factors read off the generating unit (coverage_units findings)
    expected_dependencies: tuple = ()            # factors aliased by construction: no warning

    def __post_init__(self):
        def bad(name, why):
            return ValueError(f"FactorPlan.{name}: {why} (biaslab.benchmarks.spec.FactorPlan)")
        for name in ("coverage_factors", "subgroup_factors", "ecdf_factors", "regression", "regression_subset",
                     "strata"):
            v = getattr(self, name)
            if isinstance(v, str) or not len(v):
                raise bad(name, f"give a non-empty list of factor names, not {v!r}")
            if len(set(v)) != len(v):
                raise bad(name, f"{list(v)} names a factor twice")
        if not self.overall_sets:
            raise bad("overall_sets", "give at least one named factor set")
        if len(self.sunburst) != 2 or not set(self.sunburst) <= set(self.subgroup_factors):
            raise bad("sunburst", f"{tuple(self.sunburst)} must be two of subgroup_factors "
                      f"{list(self.subgroup_factors)} (its rings are read from the subgroup table)")
        if not 0 <= self.ideal <= 1:
            raise bad("ideal", f"{self.ideal} is not a rate in [0, 1]")
        if self.chance_factor and not self.n_options:
            raise bad("chance_factor", "needs n_options (chance is 1 / n_options)")
        if (self.cot is None) != (self.cot_sample is None):
            raise bad("cot", "cot and cot_sample go together")

    def check(self, bench: Benchmark) -> None:
        """The rules that need the benchmark: every factor the plan names is a factor of the prompt table (or of
        ``extra_factors``), and no regression holds the generating unit (the notebook adds it itself to test for
        aliasing; as a factor it has one coefficient per cluster, and statsmodels fails on the duplicated column)."""
        known = set(bench.factors.names) | {f.name for f in self.extra_factors}
        named = {f for k in ("coverage_factors", "subgroup_factors", "ecdf_factors", "regression",
                             "regression_subset", "bayes_fixed", "bayes_group", "bayes_group_subset", "strata")
                 for f in getattr(self, k)} | {f for s in self.overall_sets.values() for f in s} | \
            {f for h in self.heatmaps for f in h}
        unknown = sorted(named - known - set(bench.prompts.columns))
        if unknown:
            raise ValueError(f"FactorPlan of {bench.name!r}: {unknown} are not factors of its prompt table (factors: "
                             f"{sorted(known)}); add them to the loader's FactorSpec or to extra_factors")
        for k in ("regression", "regression_subset"):
            clash = [f for f in getattr(self, k) if f == bench.cluster]
            if clash:
                raise ValueError(f"FactorPlan.{k} of {bench.name!r}: {clash} is the cluster (generating unit) of "
                                 "every interval; leave it out (the notebook tests it as a factor separately)")


@dataclass(frozen=True)
class Spec:
    """One benchmark: its items, how they are asked and read, what is measured, and how big a run is."""
    name: str                                   # registry key and outputs folder name (``bbq``)
    title: str                                  # what a reader sees (``BBQ``)
    load: Callable[..., Benchmark]              # the items: a prompt table plus its factor spec
    #: further files of the same benchmark, each its own :class:`Benchmark` (CrowS-Pairs: en, en_revised, fr)
    datasets: Mapping[str, Callable[[], Benchmark]] = field(default_factory=dict)
    # --- how items are asked and answers read (benchmarks.base.Protocol); None: the benchmark answers nothing itself
    protocol: Protocol | None = None            # the paper's protocol
    formats: tuple[str, ...] = ()               # the answer formats ``respond`` reads (the paper's first)
    #: Protocol field -> the formats it enters; a field absent here enters every format; a Protocol field absent
    #: from ``honours`` is not a choice for this benchmark (the multiverse drops it)
    applies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    honours: tuple[str, ...] = ()               # the Protocol fields ``respond`` reads
    #: notebook 6's wording levels (the reference first) where they are not the shared ``paper``, ``w1``-``w3``
    #: (MBBQ: the paper's own five prompts)
    wordings: tuple[str, ...] = ()
    respond: Callable[..., pd.DataFrame] | None = None   # respond(scorer, items, protocol) -> one row per item
    paper_chat: Callable[[object], bool] | None = None   # the paper's rule: is this model asked in its chat template?
    #: sample(n, seed) -> (items, benchmark): a design-preserving subset (notebook 6 needs it)
    sample: Callable[..., tuple[pd.DataFrame, Benchmark]] | None = None
    columns: tuple[str, ...] = ()               # the columns ``respond`` returns (validated: :meth:`responses`)
    # --- what is measured
    metrics: tuple[Metric, ...] = ()            # the headline metrics (notebooks 5 and 6)
    factor_plan: FactorPlan | None = None       # notebook 1's multi-factor plan
    #: default sizes: profile -> notebook -> parameter -> value (``profiles.params`` merges them)
    sizes: Mapping[str, Mapping[str, Mapping[str, object]]] = field(default_factory=dict)
    # --- appended (notebook 6): responder_check(responses, items) -> the responder check's rows per model x universe,
    # each labelled (``metric``) by what it reads (``Metric.responder_reads``)
    responder_check: Callable[..., pd.DataFrame] | None = None
    # --- appended (notebook 2's template diversity, CALM's Table 4): row name -> one text per template of the
    # benchmark (or of one of its datasets), e.g. ``base.template_texts(load().prompts, "template_text", "template")``
    templates: Mapping[str, Callable[[], pd.Series]] = field(default_factory=dict)
    # --- appended (docs/validity.md): items -> prompt_id and per stored option j ``role_j`` and ``chars_j``, ``gold``
    # (the correct option, -1 none), ``competence_item`` (its correct answer is neither the biased nor the unknown
    # option) and ``stratum`` (where a model's role preference is estimated): what the validity checks of a
    # multiple-choice benchmark read (biaslab.benchmarks.instrument); None: not checked
    option_roles: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    #: a plugin's own sources table (``data/sources.tsv``'s columns), read with it by ``biaslab data fetch``
    sources_table: str = ""

    def __post_init__(self):
        if self.protocol is not None:
            missing = [f for f in RESPONDING_FIELDS if not getattr(self, f)]
            if missing:
                raise TypeError(f"benchmark spec {self.name!r}: it declares a protocol, so it must also declare "
                                f"{', '.join(missing)} (biaslab.benchmarks.spec.Spec)")
            unknown = set(self.honours) - {f.name for f in fields(Protocol)}
            if unknown:
                raise TypeError(f"benchmark spec {self.name!r}: honours {sorted(unknown)}, which are not fields of "
                                "benchmarks.base.Protocol")

    def dataset(self, name: str) -> Benchmark:
        """One of ``datasets``, loaded (``name`` the benchmark's own name: ``load``)."""
        if name == self.name:
            return self.load()
        if name not in self.datasets:
            raise KeyError(f"benchmark {self.name!r} has no dataset {name!r}; choose one of "
                           f"{[self.name] + sorted(self.datasets)} (Spec.datasets)")
        return self.datasets[name]()

    def need(self, name: str, why: str):
        """The field ``name``, or an error naming it when the benchmark does not declare it."""
        value = getattr(self, name)
        if value is None or (not isinstance(value, (int, float)) and not value):
            raise TypeError(f"benchmark {self.name!r} declares no Spec.{name}, which {why} needs; set it in the "
                            "module's SPEC (docs/adding_a_benchmark.md)")
        return value

    def responses(self, scorer, items: pd.DataFrame, protocol: Protocol | None = None, **kwargs) -> pd.DataFrame:
        """``respond`` with the declared columns checked: a benchmark's answers are the table its spec says."""
        if self.respond is None:
            raise TypeError(f"benchmark {self.name!r} declares no respond (it is not asked through a protocol)")
        try:
            out = self.respond(scorer, items, protocol or self.protocol, **kwargs)
        except ValueError as exc:      # the scorer refused a missing text: name the items' empty cells
            if not getattr(exc, "missing_text", False):
                raise
            cells = [f"{c} in prompt_id {', '.join(map(str, items.loc[items[c].isna(), 'prompt_id'][:5]))}"
                     for c in items.columns if not pd.api.types.is_numeric_dtype(items[c]) and items[c].isna().any()]
            raise DataError(f"benchmark {self.name!r}: empty item cells ({'; '.join(cells) or 'none found'}): "
                            f"{exc}") from exc
        missing = [c for c in self.columns if c not in out.columns]
        if missing:
            raise ValueError(f"benchmark {self.name!r}: respond returned no column(s) {missing}; its spec declares "
                             f"{list(self.columns)}")
        return out
