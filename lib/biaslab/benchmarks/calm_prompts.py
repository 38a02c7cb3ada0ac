"""CALM's few-shot prompt formats (paper appendix A.6 and A.8; as implemented in CALM's released
``evaluation/benchmark/scenarios/{scenario_examples,scenario_input,prompt_creation}.py``, re-implemented here).

The paper (A.8) summarises the HELM-style formats as ``"Passage: context.\\n Question: question.\\n Answer:"`` (QA),
``"Passage: context\\n. Sentiment: "`` (sentiment) and ``"Passage:context\\n. Question: question\\n. True or
False?\\n Answer: "`` (NLI). The released code, which produced the paper's numbers, is more specific, and is what
:func:`build_prompt` writes:

======================  =============================================================================  ==========
format (source sets)    query (the k in-context examples use the same layout with the answer filled in)  answers
======================  =============================================================================  ==========
span (bAbI, TweetQA,    ``Passage: {context}\\nQuestion: {question}\\nAnswer: ``                        free text
RelationExt, QAMR*,
DuoRC, MCScript)
mcqa (MCTest, SODAPOP)  same; the options ``A: ...`` are part of the question (the examples list them    A, B, C, D
                        as ``\\nA: ...\\nB: ...\\n`` before ``Answer:``)
nli3 (SNLI, SICK)       ``Passage: {premise}\\nQuestion: {hypothesis}\\n True, False, or Neither?\\n``  True / False
                        ``Answer: ``                                                                     / Neither
nli2 (WNLI, RTE)        ``Passage: {premise}\\nQuestion: {hypothesis} True or False?\\nAnswer: ``       True / False
sentiment (SST,         ``Passage: {sentence} \\nSentiment: `` (examples: ``Passage: ..\\nSentiment:``  positive /
Sentiment140, EEC)      `` positive\\n``)                                                                negative
toxicity (Toxic)        ``Passage: {sentence} \\nQuestion: Is the passage above toxic? \\n``            True / False
======================  =============================================================================  ==========

\\* QAMR prompts start with ``"This is a question answering task.\\n"``. The k examples are the first k rows of the
source dataset's file in ``evaluation/benchmark/incontext_examples/`` (8 per file; Sentiment140 and EEC use the SST
examples, as CALM does), so every model sees the same examples (A.6). NLI gold labels map entailment -> True,
not-entailment -> False, neutral -> Neither; sentiment 1 -> positive, 0 -> negative; toxicity 1 -> True (toxic).

For option scoring, :func:`split_for_scoring` moves the prompt's trailing whitespace onto the answer
(``"...Answer:"`` + ``" True"``; the toxicity prompt ``"...toxic? \n"`` + ``"True"`` becomes ``"...toxic?"`` +
``" \nTrue"``), as HELM and lm-evaluation-harness do: BPE tokenizers merge a trailing space with the next word, so a
prompt ending in whitespace is not a token prefix of prompt + answer. For generation only trailing spaces are
removed (the toxicity prompt keeps its final newline).
"""

from __future__ import annotations

import csv
import logging
from functools import lru_cache

import pandas as pd

from ..sources import DataError, raw_path

log = logging.getLogger(__name__)

#: source dataset -> in-context example file stem (evaluation/benchmark/incontext_examples/<stem>_examples.csv)
EXAMPLE_FILE = {
    "babi": "babi", "duorc": "duorc", "mcscript": "mcscript", "qamr": "qamr",
    "relation_extraction": "relation_extraction", "TweetQA": "TweetQA", "mctest": "mctest", "sodapop": "sodapop",
    "SNLI": "SNLI", "sick": "sick", "wnli": "wnli", "RTE": "RTE",
    "SST": "sst", "Sentiment140": "sst", "EEC": "sst", "Toxic": "toxic",
}
NLI_LABEL = {"entailment": "True", "not-entailment": "False", "neutral": "Neither"}
QAMR_PREFIX = "This is a question answering task.\n"
TOXIC_QUESTION = "Is the passage above toxic?"

#: CALM's repository (its in-context examples; ``biaslab.benchmarks.calm`` reads the rest of it)
REPO = "vipulgupta1011/CALM"


@lru_cache(maxsize=None)
def incontext_examples(source_dataset: str) -> tuple[tuple[str, ...], ...]:
    """The rows (without header) of the source dataset's in-context example file, read as CALM reads them
    (``csv.reader(skipinitialspace=True)``)."""
    stem = EXAMPLE_FILE.get(source_dataset)
    if stem is None:
        raise KeyError(f"no CALM in-context examples for source dataset {source_dataset!r}; known: "
                       f"{sorted(EXAMPLE_FILE)}")
    path = raw_path(REPO, f"evaluation/benchmark/incontext_examples/{stem}_examples.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = [tuple(r) for r in csv.reader(f, skipinitialspace=True)]
    header, body = rows[0], [r for r in rows[1:] if r]          # qamr's file ends with an empty line
    if len(header) < 2 or not body:
        raise DataError(f"{path}: not a CALM in-context example file (header {header}, {len(body)} rows)")
    bad = [i for i, r in enumerate(body, start=1) if len(r) != len(header)]
    if bad:
        # Broken quoting in the released files (duorc row 8, mctest rows 3 and 7). CALM reads them as they come
        # (fields 0, 1, ... and -1), and so do we, to show every model the same examples CALM did.
        log.info("%s: rows %s have %s fields, the header %d; read positionally as CALM does", path.name, bad,
                 [len(body[i - 1]) for i in bad], len(header))
    return tuple(body)


def malformed_examples() -> pd.DataFrame:
    """The in-context example rows whose field count differs from their file's header (broken CSV quoting)."""
    rows = []
    for stem in sorted(set(EXAMPLE_FILE.values())):
        src = next(s for s, v in EXAMPLE_FILE.items() if v == stem)
        path = raw_path(REPO, f"evaluation/benchmark/incontext_examples/{stem}_examples.csv")
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f, skipinitialspace=True))
        for i, r in enumerate(incontext_examples(src), start=1):
            if len(r) != len(header):
                rows.append({"file": f"{stem}_examples.csv", "row": i, "fields": len(r), "expected": len(header)})
    return pd.DataFrame(rows, columns=["file", "row", "fields", "expected"])


def _example(fmt: str, row: tuple[str, ...]) -> str:
    """One answered example: the query's layout with the answer, but for mcqa (the options listed) and sentiment and
    toxicity (no space before a line break). CALM reads the row's fields by position (a malformed row keeps 3)."""
    if fmt in ("span", "nli3", "nli2"):
        return query(fmt, row[0], row[1]) + (row[2] if fmt == "span" else NLI_LABEL[row[2]]) + "\n"
    if fmt == "mcqa":
        p, q, *opts, a = row
        options = "".join(f"{chr(ord('A') + i)}: {o}\n" for i, o in enumerate(opts))
        return f"Passage: {p}\nQuestion: {q}\n{options}Answer: {a}\n"
    if fmt == "sentiment":
        p, a = row[0], row[1]
        return f"Passage: {p}\nSentiment: {a}\n"
    if fmt == "toxicity":
        p, a = row[0], row[1]
        return f"Passage: {p}\nQuestion: {TOXIC_QUESTION}\n{a}\n"
    raise ValueError(f"unknown CALM answer format {fmt!r}")


def query(fmt: str, passage: str, question: str | None) -> str:
    """The test item in CALM's format, ending where the model's answer starts."""
    if fmt in ("span", "mcqa"):
        return f"Passage: {passage}\nQuestion: {question}\nAnswer: "
    if fmt == "nli3":
        return f"Passage: {passage}\nQuestion: {question}\n True, False, or Neither?\nAnswer: "
    if fmt == "nli2":
        return f"Passage: {passage}\nQuestion: {question} True or False?\nAnswer: "
    if fmt == "sentiment":
        return f"Passage: {passage} \nSentiment: "
    if fmt == "toxicity":
        return f"Passage: {passage} \nQuestion: {TOXIC_QUESTION} \n"
    raise ValueError(f"unknown CALM answer format {fmt!r}")


@lru_cache(maxsize=None)
def shots(source_dataset: str, fmt: str, k: int) -> str:
    """The k-shot prefix of a source dataset (the first ``k`` examples of its file, CALM's fixed choice)."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    rows = incontext_examples(source_dataset)
    if k > len(rows):
        log.warning("CALM: %s has %d in-context examples, %d requested; using %d", source_dataset, len(rows), k,
                    len(rows))
    prefix = "".join(_example(fmt, r) for r in rows[:k])
    return (QAMR_PREFIX if source_dataset == "qamr" else "") + prefix


def build_prompt(row, k: int = 5) -> str:
    """The full k-shot prompt of one prompt-table row (needs ``source_dataset``, ``answer_format``, ``passage``,
    ``question``)."""
    q = row["question"] if isinstance(row["question"], str) else None
    return shots(row["source_dataset"], row["answer_format"], k) + query(row["answer_format"], row["passage"], q)


def build_prompts(prompts: pd.DataFrame, k: int = 5) -> pd.Series:
    """:func:`build_prompt` for every row, indexed like ``prompts``."""
    return pd.Series([build_prompt(r, k) for r in prompts.to_dict("records")], index=prompts.index, dtype=object)


def label_options(fmt: str, options=None) -> dict[str, str]:
    """Answer surface form -> gold code, for the formats answered from a closed set (all but ``span``)."""
    if fmt == "nli3":
        return {"True": "entailment", "False": "not-entailment", "Neither": "neutral"}
    if fmt == "nli2":
        return {"True": "entailment", "False": "not-entailment"}
    if fmt == "sentiment":
        return {"positive": "1", "negative": "0"}
    if fmt == "toxicity":
        return {"True": "1", "False": "0"}
    if fmt == "mcqa":
        if not options:
            raise ValueError("a multiple-choice prompt needs its option letters")
        return {o: o for o in options}
    raise ValueError(f"format {fmt!r} has no closed answer set")


def surface_forms(label: str, space: str = " ") -> list[str]:
    """A label as the next words of the prompt (its own case, capitalised, lower-cased), after the whitespace
    :func:`split_for_scoring` moved off the prompt (a space: with and without it; the toxicity format's ``" \\n"``)."""
    forms = []
    for v in dict.fromkeys([label, label.capitalize(), label.lower()]):
        forms += [" " + v, v] if space == " " else [space + v]
    return forms


def split_for_scoring(prompt: str) -> tuple[str, str]:
    """(prompt without its trailing whitespace, that whitespace: the answer's scored forms start with it)."""
    stripped = prompt.rstrip()
    return stripped, prompt[len(stripped):]
