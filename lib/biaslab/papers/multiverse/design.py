"""The multiverse as a factorial design: evaluation choices are factors, a universe is one combination of levels
(docs/multiverse.md).

Each benchmark gets a :class:`biaslab.benchmarks.base.FactorSpec` of the evaluation's choices: one factor per
:class:`biaslab.benchmarks.base.Protocol` field its spec ``honours`` (:data:`FIELD`; a choice ``respond`` ignores
would only repeat the paper's universe), plus the ``precision`` (:data:`LOAD`). The reference level is the paper's
protocol for the model (:class:`ModelReference`). Each universe is one Protocol (:func:`protocol`) that the
benchmark's own ``respond`` asks and reads, so the paper's universe sends exactly the requests of notebooks 1, 3, 4.

**Applicability.** A choice that does not enter a format (the spec's ``applies``) is coded at its reference level
there, so a treatment-coded regression reads its coefficient as the effect within the formats it applies to.
**Designs.** ``"ofat"`` (default profile): one factor at a time around an *anchor* (the paper's universe, or, for a
factor that does not apply to the paper's format, the paper's universe with the first format it applies to): 1 +
Σ(levels − 1) universes, every main effect identified. ``"two_way"`` (paper profile) adds every pair of
non-reference levels of two factors around the same anchor (two-factor interactions). A universe that cannot run
here is kept with ``status = "not available: <why>"``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pandas as pd

from ... import benchmarks
from ...benchmarks.base import Factor, FactorSpec

WORDINGS = ("paper", "w1", "w2", "w3")
PRECISIONS = ("float32", "bf16_weights", "q4_gguf")
#: how an in-process precision level is loaded (``models.load`` arguments; any other level: ``dtype=<level>``).
#: ``bf16_weights`` is what the weights' bfloat16 rounding alone does to the numbers: computing *in* bfloat16 on a CPU
#: sums in an order that follows the batch's make-up and the thread count (two cold runs differed by up to 0.59 nats
#: and in one verdict), so a universe computed that way describes the run's schedule, not the model
LOAD = {"bf16_weights": {"dtype": "float32", "weights_rounded_to": "bfloat16"}}
NORMALIZATIONS = ("sum", "mean", "pmi")
#: factor -> the :class:`biaslab.benchmarks.base.Protocol` field it sets (``precision`` is the model's, not the
#: protocol's); a benchmark whose spec does not honour a field has no such factor
FIELD = {"answer_format": "format", "wording": "wording", "instruction": "instruction", "chat_template": "chat",
         "examples": "examples", "choice_order": "order", "normalization": "normalization"}
#: the two-level factors' levels (the reference first, whichever it is)
TWO = {"instruction": ("none", "present"), "chat_template": ("off", "on"), "examples": ("0", "2")}
FIXED = {"wording": WORDINGS, "choice_order": ("original", "reversed", "cyclic"), "normalization": NORMALIZATIONS}

DESCRIPTIONS = {
    "answer_format": "how the answer is read: option log-likelihood, the options' texts as the item's continuation "
                     "without options shown (cloze), next-token label distribution, generated label parsed, free-text "
                     "answer without options (matched), or (CrowS-Pairs) sentence likelihood",
    "wording": "the instruction's and the answer cue's words: the paper's and three rewordings of the same task "
               "(data/multiverse/wordings.csv), or a benchmark's own prompts (MBBQ: the paper's five, "
               "data/mbbq/prompts.tsv)",
    "instruction": "an instruction line before the item (none or present)",
    "chat_template": "prompt wrapped in the model's chat template (on) or given as raw text (off)",
    "examples": "answered examples before the item (0 or 2)",
    "choice_order": "order of the answer options: as stored, reversed, or rotated by one position",
    "precision": "numeric precision: the run's dtype, the weights rounded to bfloat16 (computed in float32), or the "
                 "GGUF's 4-bit kernels",
    "normalization": "an option's or sentence's log-probability: summed, per-token mean, or PMI (an option against "
                     "the answer cue alone; a CrowS-Pairs sentence against its own group words scored alone)",
}


def names() -> tuple[str, ...]:
    """The registered benchmarks the multiverse can run: asked through a protocol, with a metric it pairs."""
    return tuple(n for n, s in benchmarks.SPECS.items()
                 if s.protocol is not None and any(m.item_values for m in s.metrics))


def check(benchmark: str):
    """The spec of a benchmark the multiverse can run, or an error naming the field it lacks (``Spec.protocol``; a
    ``Metric`` with ``item_values``)."""
    s = benchmarks.spec(benchmark)
    s.need("protocol", "notebook 6 (06_multiverse)")
    s.need("sample", "notebook 6 (06_multiverse)")
    if not any(m.item_values for m in s.need("metrics", "notebook 6 (06_multiverse)")):
        raise TypeError(f"benchmark {benchmark!r}: none of its metrics {[m.id for m in s.metrics]} declares "
                        "Metric.item_values (the per-unit values notebook 6 (06_multiverse) pairs universes on; with "
                        "Metric.estimate, its estimate per universe); set them in the module's SPEC "
                        "(docs/adding_a_benchmark.md)")
    return s


def applies(benchmark: str, factor: str) -> tuple[str, ...]:
    """The answer formats a factor enters (its spec's ``applies``; every format when it says nothing)."""
    s = benchmarks.spec(benchmark)
    return tuple(s.applies.get(FIELD.get(factor, factor), s.formats))


class CHAT_MODEL:
    """An instruction-tuned model with a readable chat template: the reference levels of notebook 6's factor table."""
    instruction_tuned = chat_available = chat_logprobs = staticmethod(lambda: True)


@dataclass(frozen=True)
class ModelReference:
    """The paper's protocol for one model: the reference levels that depend on the model or the run."""
    chat: tuple = ()                # benchmarks whose ``paper_chat`` rule asks this model in its chat template
    precision: str = "float32"      # the run's dtype ("auto" resolved: float32 on CPU, bfloat16 on CUDA)

    def reference(self, benchmark: str) -> dict:
        """Each factor's reference level; a Protocol field the benchmark's spec does not honour is no factor."""
        s = benchmarks.spec(benchmark)
        p = s.protocol
        ref = {"answer_format": p.format, "wording": p.wording, "instruction": p.instruction,
               "chat_template": "on" if benchmark in self.chat else "off", "examples": str(p.examples),
               "choice_order": p.order, "precision": self.precision, "normalization": p.normalization}
        return {k: v for k, v in ref.items() if k in ("answer_format", "precision") or FIELD[k] in s.honours}

    @classmethod
    def of(cls, scorer, precision: str) -> "ModelReference":
        """The reference levels for the model behind ``scorer``: each benchmark's ``paper_chat`` rule."""
        return cls(chat=tuple(b for b in names() if benchmarks.spec(b).paper_chat(scorer)), precision=precision)


def protocol(u: "Universe") -> object:
    """The benchmark protocol (:class:`biaslab.benchmarks.base.Protocol`) a universe asks and reads."""
    change = {FIELD[f]: (int(v) if f == "examples" else v) for f, v in u.settings if f in FIELD}
    return benchmarks.spec(u.benchmark).protocol.replace(**change)


def factor_spec(benchmark: str, reference: ModelReference) -> FactorSpec:
    """The evaluation choices of ``benchmark`` as a factor spec (reference = the paper's protocol for this model);
    levels are built only for the factors its spec honours."""
    ref = reference.reference(benchmark)

    def levels(f):
        if f == "answer_format":
            return benchmarks.spec(benchmark).formats
        if f == "precision":
            return (ref[f],) + tuple(p for p in PRECISIONS if p != ref[f])
        if f == "wording" and benchmarks.spec(benchmark).wordings:
            return benchmarks.spec(benchmark).wordings
        return (ref[f],) + tuple(x for x in TWO[f] if x != ref[f]) if f in TWO else FIXED[f]

    kind = {"precision": "model"}
    return FactorSpec([Factor(f, kind.get(f, "prompt"), tuple(levels(f)), ref[f], DESCRIPTIONS[f]) for f in ref])


@dataclass(frozen=True)
class Universe:
    benchmark: str
    settings: tuple                 # ((factor, level), ...) in the spec's factor order
    changed: tuple = ()             # factors set away from their anchor (the paper's universe: none)
    #: ``paper`` for the paper's universe, else ``factor=level+factor=level`` of the non-reference settings
    id: str = field(default="", compare=False)

    def __getitem__(self, factor: str):
        return dict(self.settings)[factor]

    @property
    def as_dict(self) -> dict:
        return dict(self.settings)


def _universe(benchmark: str, spec: FactorSpec, settings: dict, changed=()) -> Universe:
    diff = [f"{f.name}={settings[f.name]}" for f in spec.factors if settings[f.name] != f.reference]
    return Universe(benchmark, tuple((f.name, settings[f.name]) for f in spec.factors), tuple(changed),
                    "+".join(diff) or "paper")


def anchor_for(benchmark: str, spec: FactorSpec, factor: str) -> dict:
    """The universe a factor is varied around: the paper's, or the paper's with the first format the factor enters."""
    ref = {f.name: f.reference for f in spec.factors}
    enters = applies(benchmark, factor)
    if ref["answer_format"] not in enters:
        ref["answer_format"] = enters[0]
    return ref


def universes(benchmark: str, reference: ModelReference, design: str = "ofat", formats=None,
              factors=None) -> list[Universe]:
    """The universes of ``benchmark`` (see the module docstring). ``formats`` / ``factors`` restrict the design to
    those answer formats / factors (the smoke profile); the paper's universe is always first."""
    if design not in ("ofat", "two_way"):
        raise ValueError(f"design must be 'ofat' or 'two_way', got {design!r}")
    spec = factor_spec(benchmark, reference)
    ref = {f.name: f.reference for f in spec.factors}
    wanted = [f for f in spec.names if factors is None or f in factors or f == "answer_format"]
    fmt_ok = lambda s: formats is None or s["answer_format"] in formats   # noqa: E731
    found: dict[str, Universe] = {}

    def add(settings, changed):
        if not fmt_ok(settings):
            return
        for f, lv in settings.items():          # a choice outside the formats it enters: not a universe
            if lv != ref[f] and f != "answer_format" and settings["answer_format"] not in applies(benchmark, f):
                return
        u = _universe(benchmark, spec, settings, changed)
        found.setdefault(u.id, u)

    add(ref, ())
    for f in wanted:
        anchor = anchor_for(benchmark, spec, f)
        if anchor != ref:
            add(anchor, ("answer_format",))
        for lv in spec[f].levels:
            if lv != spec[f].reference:
                add({**anchor, f: lv}, (f,))
    if design == "two_way":
        for f, g in itertools.combinations([f for f in wanted if f != "answer_format"], 2):
            anchor = anchor_for(benchmark, spec, f)
            if anchor != anchor_for(benchmark, spec, g):
                continue
            for a in spec[f].levels[1:]:
                for b in spec[g].levels[1:]:
                    add({**anchor, f: a, g: b}, (f, g))
    return list(found.values())


def universe_table(us: list[Universe], spec: FactorSpec, status: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per universe: id, benchmark, the factor levels, how many differ from the paper's, status."""
    rows = []
    for u in us:
        d = u.as_dict
        rows.append({"universe": u.id, "benchmark": u.benchmark, **d,
                     "n_changed": sum(d[f.name] != f.reference for f in spec.factors),
                     "is_paper": u.id == "paper", "status": (status or {}).get(u.id, "run")})
    return pd.DataFrame(rows)
