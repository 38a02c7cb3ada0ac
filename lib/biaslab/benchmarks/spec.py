"""What a benchmark *is*, in one place: its :class:`Spec`.

Each benchmark module ends with one ``SPEC = Spec(...)``; ``benchmarks/__init__.py`` lists the modules (one line per
benchmark) and every notebook, ``compare``, ``multiverse``, ``profiles`` and the importers loop over
:data:`biaslab.benchmarks.SPECS` instead of keeping their own name-keyed tables. A notebook never branches on a
benchmark's name: what differs between benchmarks is a field here.

Adding a benchmark is one module (its loader, ``respond`` and ``SPEC``), one data file, and one registry line
(``docs/adding_a_benchmark.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, Mapping

import pandas as pd

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
    kind: str = "binary"             # binary | continuous | bbq (a ratio score, linearized) | source_interval
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


#: the fields a benchmark that answers requests must fill (with ``protocol`` set)
RESPONDING_FIELDS = ("formats", "respond", "paper_chat", "sample", "columns")


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
    respond: Callable[..., pd.DataFrame] | None = None   # respond(scorer, items, protocol) -> one row per item
    paper_chat: Callable[[object], bool] | None = None   # the paper's rule: is this model asked in its chat template?
    sample: Callable[..., tuple[pd.DataFrame, Benchmark]] | None = None   # sample(n, seed) -> (items, benchmark)
    columns: tuple[str, ...] = ()               # the columns ``respond`` returns (validated: :meth:`responses`)
    # --- what is measured
    metrics: tuple[Metric, ...] = ()            # the headline metrics (notebooks 5 and 6)
    factor_plan: object | None = None           # notebook 1's multi-factor plan
    #: default sizes: profile -> notebook -> parameter -> value (``profiles.params`` merges them)
    sizes: Mapping[str, Mapping[str, Mapping[str, object]]] = field(default_factory=dict)
    # --- appended (notebook 6): responder_check(responses, items) -> the responder check's rows per model x universe,
    # each labelled (``metric``) by what it reads (``Metric.responder_reads``)
    responder_check: Callable[..., pd.DataFrame] | None = None

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

    def responses(self, scorer, items: pd.DataFrame, protocol: Protocol | None = None, **kwargs) -> pd.DataFrame:
        """``respond`` with the declared columns checked: a benchmark's answers are the table its spec says."""
        if self.respond is None:
            raise TypeError(f"benchmark {self.name!r} declares no respond (it is not asked through a protocol)")
        out = self.respond(scorer, items, protocol or self.protocol, **kwargs)
        missing = [c for c in self.columns if c not in out.columns]
        if missing:
            raise ValueError(f"benchmark {self.name!r}: respond returned no column(s) {missing}; its spec declares "
                             f"{list(self.columns)}")
        return out
