"""The contract every benchmark loader fulfils: a prompt table plus a factor spec (DESIGN.md).

A *prompt table* is a DataFrame with one row per prompt: ``prompt_id`` (unique), ``text`` (what the model is
shown, or the first sentence of a pair), one column per factor, and whatever the benchmark's outcome needs (gold
answer, biased answer, the paired sentence, the answer options, ...).

A *factor spec* names each factor, its kind (domain, prompt or model factor, as in the multi-factor paper §3.1),
its levels and its reference level (the control level used for treatment coding in logistic regression).

A *protocol* (:class:`Protocol`, HELM's adapter spec) is how the items are asked and the answers read; each benchmark
module holds the paper's as ``PROTOCOL`` and builds its requests and reads its answers from it in one function,
``respond(scorer, items, protocol)`` (``docs/adding_a_benchmark.md``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Literal

import pandas as pd

from .. import paths
from ..sources import DataError, load_manifest

log = logging.getLogger(__name__)

FactorKind = Literal["domain", "prompt", "model"]


@dataclass(frozen=True)
class Protocol:
    """How a benchmark's items become requests and how its answers are read; a benchmark's ``PROTOCOL`` is the
    paper's, and :meth:`replace` gives a variant (one universe of notebook 6).

    ``format`` the answer read: option log-likelihood with the options shown (``option_ll``), the options' texts
    scored as the continuation of the item with no option shown (``cloze``, OLMES's cloze formulation), next-token
    label distribution over the shown options' labels (``label_dist``), a generated label (``generated``), a free
    answer with no options shown (``open_ended``), a sentence likelihood (``likelihood``). ``wording``: ``paper`` or
    ``w1``-``w3``, the texts of ``data/multiverse/wordings.csv`` (the instruction and the answer cue, reworded; the
    task unchanged). ``instruction``: ``none`` or ``present`` (an instruction line before the item). ``chat``:
    ``paper`` (the benchmark's rule for the model, its ``paper_chat``), ``on`` or ``off``. ``examples``: answered
    examples before the item. ``order``: the options as stored (``original``), ``reversed``, ``cyclic`` (rotated by
    one), ``both`` (asked in the original and the reversed order, averaged) or ``cycles`` (asked in every cyclic
    order, each stored option's probability averaged over them: Zheng et al. 2024's permutation debiasing in its
    cyclic form; :func:`orders_of`). ``normalization`` of an option's log-likelihood: ``sum``, ``mean`` (per
    token), ``char`` (per character: lm-evaluation-harness's ``acc_norm``) or ``pmi`` (minus its log-likelihood
    after a content-free prompt; Holtzman et al. 2021); one home, :class:`biaslab.benchmarks.formats.OptionScores`.
    ``max_new_tokens``: the cap of a generated answer (an open answer is read up to its first sentence end)."""
    format: str
    wording: str = "paper"
    instruction: str = "none"
    chat: str = "paper"
    examples: int = 0
    order: str = "original"
    normalization: str = "sum"
    max_new_tokens: int = 40

    def replace(self, **changes) -> "Protocol":
        return dataclasses.replace(self, **changes)

    def use_chat(self, paper_rule: bool) -> bool:
        if self.chat not in ("paper", "on", "off"):
            raise ValueError(f"Protocol.chat must be 'paper', 'on' or 'off', not {self.chat!r}")
        return paper_rule if self.chat == "paper" else self.chat == "on"


@lru_cache(maxsize=1)
def wordings() -> pd.DataFrame:
    """``data/multiverse/wordings.csv``: per benchmark key and wording, the ``instruction`` and the answer ``cue``."""
    return pd.read_csv(paths.DATA_DIR / "multiverse" / "wordings.csv", keep_default_na=False)


def wording(key: str, level: str) -> dict:
    """The ``instruction`` and ``cue`` of wording ``level`` for ``key`` (``bbq``, ``bbq_open``, ``crows_pairs``,
    ``agentic``, ``agentic_open``)."""
    w = wordings()
    row = w[(w["benchmark"] == key) & (w["wording"] == level)]
    if len(row) != 1:
        raise KeyError(f"data/multiverse/wordings.csv: no wording {level!r} for {key!r} (Protocol.wording)")
    return row.iloc[0][["instruction", "cue"]].to_dict()


def examples(benchmark: str) -> pd.DataFrame:
    """The answered examples of ``data/multiverse/examples.csv`` for ``benchmark`` (``Protocol.examples``)."""
    e = pd.read_csv(paths.DATA_DIR / "multiverse" / "examples.csv", keep_default_na=False)
    return e[e["benchmark"] == benchmark]


def options_in_order(k: int, order: str) -> list[int]:
    """The stored option index shown at each position under ``Protocol.order`` (one order)."""
    if order == "original":
        return list(range(k))
    if order == "reversed":
        return list(range(k))[::-1]
    if order == "cyclic":
        return list(range(1, k)) + [0]
    raise ValueError(f"option order {order!r}: choose original, reversed or cyclic (or 'both' / 'cycles' where "
                     "averaged)")


def orders_of(k: int, order: str) -> list[list[int]]:
    """Every order ``Protocol.order`` asks k options in: one, the original and the reversed (``both``), or the k
    rotations (``cycles``: rotation r shows stored option (r + p) mod k at position p)."""
    if order == "cycles":
        return [[(r + p) % k for p in range(k)] for r in range(k)]
    if order == "both":
        return [options_in_order(k, "original"), options_in_order(k, "reversed")]
    return [options_in_order(k, order)]


@dataclass(frozen=True)
class Factor:
    name: str                 # column name in the prompt (or response) table
    kind: FactorKind
    levels: tuple             # every level the design intends (observed or not)
    reference: object         # control level for treatment coding
    description: str = ""

    def __post_init__(self):
        if self.reference not in self.levels:
            raise ValueError(f"factor {self.name!r}: reference {self.reference!r} is not one of its levels")


@dataclass
class FactorSpec:
    factors: list[Factor]

    def __getitem__(self, name: str) -> Factor:
        for f in self.factors:
            if f.name == name:
                return f
        raise KeyError(f"no factor named {name!r}; factors are {self.names}")

    def __contains__(self, name: str) -> bool:
        return any(f.name == name for f in self.factors)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.factors]

    def with_factors(self, extra: Iterable[Factor]) -> "FactorSpec":
        """A new spec with ``extra`` factors added (e.g. the model factors once responses exist)."""
        return FactorSpec(self.factors + [f for f in extra if f.name not in self])

    def table(self) -> pd.DataFrame:
        """One row per factor: name, kind, n_levels, levels, reference (``tables/factors.csv``)."""
        return pd.DataFrame([
            {"factor": f.name, "kind": f.kind, "n_levels": len(f.levels),
             "levels": "; ".join(map(str, f.levels)), "reference": f.reference, "description": f.description}
            for f in self.factors
        ])

    def validate(self, prompts: pd.DataFrame, source: str) -> None:
        """Every factor is a column and every value is a declared level."""
        for f in self.factors:
            if f.kind == "model":
                continue
            if f.name not in prompts.columns:
                raise DataError(f"{source}: factor column {f.name!r} missing from the prompt table")
            unknown = set(prompts[f.name].dropna().unique()) - set(f.levels)
            if unknown:
                raise DataError(f"{source}: factor {f.name!r} has undeclared levels {sorted(map(str, unknown))[:10]}")


@dataclass
class Benchmark:
    """What a loader returns."""
    name: str
    prompts: pd.DataFrame
    factors: FactorSpec
    excluded: pd.DataFrame = field(default_factory=pd.DataFrame)   # rows left out, with a ``reason`` column
    sources: dict[str, str] = field(default_factory=dict)          # file -> sha256, for result manifests
    notes: list[str] = field(default_factory=list)                 # decisions a reader should know about
    #: the generating unit: the prompt-table column whose rows share wording and so are not independent observations
    #: (template for SSQA/BBQ/CALM, scenario for agentic, pair for CrowS-Pairs). Every interval and robust standard
    #: error in :mod:`biaslab.stats` resamples or clusters on it (Miller 2024, "Adding Error Bars to Evals", §2.2).
    cluster: str | None = None
    #: a second generating unit crossed with ``cluster`` (SSQA: every stigma appears in every template), for two-way
    #: cluster-robust inference (Cameron, Gelbach & Miller 2011); None where the design is nested or one-way
    crossed_with: str | None = None

    @property
    def clusters(self) -> str | list[str] | None:
        """What the interval functions of :mod:`biaslab.stats` take as ``cluster``: the generating unit, or
        ``[cluster, crossed_with]`` for a crossed design."""
        return self.cluster if self.crossed_with is None else [self.cluster, self.crossed_with]

    @property
    def cluster_columns(self) -> list[str]:
        """The prompt-table columns of the design's clusters (none, one, or two for a crossed design): what a
        per-prompt table must carry for later notebooks to use the same clusters."""
        return [c for c in (self.cluster, self.crossed_with) if c is not None]

    def __post_init__(self):
        if "prompt_id" not in self.prompts.columns:
            raise DataError(f"{self.name}: prompt table has no prompt_id column")
        dup = self.prompts["prompt_id"].duplicated()
        if dup.any():
            raise DataError(f"{self.name}: {int(dup.sum())} duplicated prompt_id values, "
                            f"e.g. {self.prompts.loc[dup, 'prompt_id'].iloc[0]!r}")
        self.factors.validate(self.prompts, self.name)
        for col in (self.cluster, self.crossed_with):
            if col is not None and col not in self.prompts.columns:
                raise DataError(f"{self.name}: cluster column {col!r} is not in the prompt table")
            empty = self.prompts.loc[self.prompts[col].isna(), "prompt_id"] if col is not None else ()
            if len(empty):        # every interval clusters on it: a missing unit would be dropped or fail there
                raise DataError(f"{self.name}: cluster column {col!r} is empty in {len(empty)} row(s) (prompt_id "
                                f"{', '.join(map(str, empty[:5]))}{', ...' if len(empty) > 5 else ''}). Fix: fill it "
                                "in the items, or leave those rows out in the loader (base.exclude: counted)")

    def summary(self) -> str:
        return (f"{self.name}: {len(self.prompts):,} prompts, {len(self.excluded):,} excluded, "
                f"factors: {', '.join(self.factors.names)}; cluster: {self.cluster}"
                + (f" crossed with {self.crossed_with}" if self.crossed_with else ""))


def template_texts(prompts: pd.DataFrame, text: str | list[str], template_id: str) -> pd.Series:
    """One text per template of a prompt table: its ``text`` column (or columns joined by a space) in the template's
    first row (``Spec.templates``)."""
    cols = [text] if isinstance(text, str) else list(text)
    joined = prompts[cols].astype(str).agg(" ".join, axis=1) if len(cols) > 1 else prompts[cols[0]]
    return joined.groupby(prompts[template_id], sort=False).first().astype(str).reset_index(drop=True)


def read_csv(path: str | Path, **kwargs) -> pd.DataFrame:
    """``pandas.read_csv`` whose parse errors name the file and the line (a :class:`DataError`), for every loader."""
    try:
        return pd.read_csv(path, **kwargs)
    except pd.errors.ParserError as exc:
        m = re.search(r"(?:line|row) (\d+)", str(exc))
        where = f"line {m.group(1)}" if m else "a malformed row"
        raise DataError(f"{path}, {where}: malformed CSV ({' '.join(str(exc).split())}). Fix that row (quote fields "
                        "that contain commas) or, for a downloaded file, re-run `biaslab data fetch`.") from exc
    except (pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read as CSV ({exc}). For a downloaded file, re-run "
                        "`biaslab data fetch`.") from exc


def pinned_hashes(repo: str, path: str | None = None) -> dict[str, str]:
    """``file -> sha256`` of ``repo``'s files (or its one file ``path``) in the sources manifest: a loader's
    ``Benchmark.sources``."""
    return {s.key: s.sha256 for s in load_manifest() if s.repo == repo and path in (None, s.path)}


def read_jsonl(path: str | Path, fetch: str = "biaslab data fetch") -> pd.DataFrame:
    """One row per non-blank line of a JSON-lines file; a line that is not JSON is a :class:`DataError` naming it and
    the command (``fetch``) that restores the file."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}, line {i}: not valid JSON ({exc}); re-run `{fetch}`") from exc
    return pd.DataFrame(rows)


def require_columns(df: pd.DataFrame, expected: Iterable[str], file: str | Path) -> None:
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise DataError(f"{file}: missing column(s) {missing}; found {list(df.columns)}. "
                        "The file is not the pinned version: re-run `biaslab data fetch`.")


def require_rows(n: int, expected: int, file: str | Path) -> None:
    if n != expected:
        raise DataError(f"{file}: expected {expected:,} rows, found {n:,}. "
                        "The file is not the pinned version: re-run `biaslab data fetch`.")


def checked(df: pd.DataFrame, file: str | Path, columns: Iterable[str], rows: int | None = None) -> pd.DataFrame:
    """``df`` (read from ``file``) once it has the pinned version's ``columns`` and, given, its ``rows`` rows
    (:func:`require_columns`, :func:`require_rows`)."""
    require_columns(df, columns, file)
    if rows is not None:
        require_rows(len(df), rows, file)
    return df


def exclude(df: pd.DataFrame, mask: pd.Series, reason: str, source: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split ``df`` into (kept, excluded) by ``mask``, logging the count. Nothing is dropped silently."""
    mask = mask.fillna(False).astype(bool)
    dropped = df[mask].assign(reason=reason)
    if len(dropped):
        log.warning("%s: excluded %d row(s): %s", source, len(dropped), reason)
    return df[~mask].copy(), dropped
