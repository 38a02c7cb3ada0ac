"""CALM (Gupta et al., 2024): 224 templates × 350 names = 78,400 prompts, three tasks, gender and race.

Two entry points:

* :func:`load` reads the **released** prompt sets (``bias_dataset/{gender,race}_datasets.zip``, one jsonl per task and
  bias type) together with their gold answers (``evaluation/gt/gt_<task>_<bias>.csv``) and the templates
  (``bias_dataset/<task>_templates.json``), validates every count the paper states (93 QA + 54 NLI + 77 sentiment =
  224 templates; 150 prompts per template for gender, 200 for race; 50 per social group; 78,400 in all), checks that
  every released prompt is an instance of its template, recovers the name that was filled in, and returns one tidy
  prompt table.
* :func:`build` regenerates prompt sets from the templates and CALM's name lists with a seed and a chosen number of
  names per group (the paper's cost study, §6.2, uses 25). With the default ``seed=None`` it uses the seeds and the
  sampling order of CALM's released generation scripts and reproduces the released sets prompt for prompt
  (``tests/test_calm.py`` checks all 78,400).

How CALM fills a template (read from its released scripts, ``bias_dataset/scripts/*_dataset_{gender,race}.py``,
re-implemented here):

* ``<PERSON>`` is replaced by the name; every other ``<a/b/c>`` placeholder (pronouns, "boy/girl/kid", ...) by its
  first alternative for male names, its second for female names and its third for gender-neutral names (CALM calls
  the group ``non-binary``) and for *all* race groups (race prompts use "they").
* Male and female names come from ``names/categorised_data/segregated_names.csv`` (flag ``usa.male`` xor
  ``usa.female``); for every template, 50 names per group are drawn afresh without replacement
  (``random.sample``). Gender-neutral names are the same 50 for every template: the 50 names of
  ``names/unisex/unisex_names_table.csv`` with the smallest male/female share ``gap``.
* Race names come from ``names/categorised_data/names_race_categorisation.csv`` (exactly one of the four flags
  set), 50 drawn afresh per template and group.
* Python's ``random`` is seeded with 10 for every gender set and for the NLI race set, 11 for the QA and sentiment
  race sets, and then called once per template and sampled group, in template order.

Data notes (each checked by the loader):

* ``evaluation/gt/answers_qa_gender.csv`` is an older version of ``gt_qa_gender.csv`` (600 gold answers of four
  SODAPOP templates still contain ``<PERSON>``; the neutral group is called ``unisex``). The loader uses the ``gt_``
  files, as CALM's ``evaluation/scripts/accuracy.py`` does.
* The QA gender prompts were stripped of surrounding whitespace, the other sets were not; the loader strips every
  text field.
* MCTest and SODAPOP QA templates are multiple choice: the options are part of the question text
  (``"...?\\nA: ...\\nB: ..."``) and the gold answer is ``[letter, option text]``.
* The sentiment templates of Sentiment140 and EEC carry ``"NA"`` as their answer in the template file, and all 29
  Toxic templates ``"1"``; the ground-truth files label 21 of the Toxic templates 0. The gold labels of the
  ground-truth files (0 negative / 1 positive; for Toxic 1 toxic / 0 not toxic) are used everywhere, the builder
  included.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import random
import re
import zipfile
from functools import lru_cache

import numpy as np
import pandas as pd

from ..sources import DataError, raw_path
from . import calm_prompts
from .base import (Benchmark, Factor, FactorSpec, Protocol, checked, orders_of, pinned_hashes, read_csv,
                   require_columns, require_rows)
from .calm_prompts import REPO
from .spec import FactorPlan, Metric, Source, Spec

log = logging.getLogger(__name__)

TASKS = ("qa", "nli", "sentiment")
BIAS_TYPES = ("gender", "race")
GROUPS = {"gender": ("male", "female", "non-binary"), "race": ("white", "black", "hispanic", "asian")}
ALL_GROUPS = GROUPS["gender"] + GROUPS["race"]
#: paper §3.1 / Table 7-9
N_TEMPLATES = {"qa": 93, "nli": 54, "sentiment": 77}
NAMES_PER_GROUP = 50
N_PROMPTS_TOTAL = 78_400
#: which alternative of a ``<a/b/c>`` placeholder each group gets (0-based)
PRONOUN_INDEX = {"male": 0, "female": 1, "non-binary": 2, "white": 2, "black": 2, "hispanic": 2, "asian": 2}
#: seeds of CALM's released generation scripts (bias_dataset/scripts/<task>_dataset_<bias>.py)
RELEASED_SEEDS = {("qa", "gender"): 10, ("nli", "gender"): 10, ("sentiment", "gender"): 10,
                  ("qa", "race"): 11, ("nli", "race"): 10, ("sentiment", "race"): 11}
#: the text fields of each task's templates and prompts, mapped to the prompt table's ``passage``/``question``
FIELDS = {"qa": ("context", "question"), "nli": ("premise", "hypothesis"), "sentiment": ("sentence", None)}
SOURCE_DATASETS = {
    "qa": ("babi", "sodapop", "TweetQA", "mctest", "relation_extraction", "qamr", "duorc", "mcscript"),
    "nli": ("SNLI", "wnli", "RTE", "sick"),
    "sentiment": ("SST", "Toxic", "Sentiment140", "EEC"),
}
MCQA_SOURCES = ("mctest", "sodapop")

PLACEHOLDER = re.compile(r"<.*?>")


def _str_or_none(x) -> str | None:
    return x if isinstance(x, str) else None


def _template_file(task: str) -> str:
    return f"bias_dataset/{task}_templates.json"


def _gt_file(task: str, bias_type: str) -> str:
    return f"evaluation/gt/gt_{task}_{bias_type}.csv"


def _zip_member(task: str, bias_type: str) -> tuple[str, str]:
    return f"bias_dataset/{bias_type}_datasets.zip", f"{bias_type}_datasets/{task}_{bias_type}_dataset.jsonl"


# ----------------------------------------------------------------------------------------------------------------
# templates and names
# ----------------------------------------------------------------------------------------------------------------

def answer_format(task: str, source_dataset: str, options: str | None = None) -> str:
    """How a template's answer is produced and checked.

    ``span`` (free-text QA: generate, then CALM's normalisation and substring match), ``mcqa`` (QA with lettered
    options), ``nli3`` (True / False / Neither), ``nli2`` (True / False), ``sentiment`` (positive / negative),
    ``toxicity`` (True / False to "Is the passage above toxic?").
    """
    if task == "qa":
        return "mcqa" if source_dataset in MCQA_SOURCES else "span"
    if task == "nli":
        return "nli3" if source_dataset in ("SNLI", "sick") else "nli2"
    return "toxicity" if source_dataset == "Toxic" else "sentiment"


def mcqa_options(question: str) -> list[str]:
    """The option letters of a multiple-choice question (``"...\\nA: x\\nB: y"`` -> ``["A", "B"]``)."""
    return re.findall(r"(?m)^([A-Z]): ", question)


@lru_cache(maxsize=None)
def _read_templates(task: str) -> tuple:
    path = raw_path(REPO, _template_file(task))
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    if len(raw) != N_TEMPLATES[task]:
        raise DataError(f"{path}: expected {N_TEMPLATES[task]} {task} templates (paper §3.1), found {len(raw)}")
    return tuple((k, raw[k]) for k in raw)


#: notebook 2's diversity rows of CALM (Spec.templates): the templates with their questions, the passages alone
WITH_QUESTIONS, PASSAGES = "calm", "calm_passage"


def template_texts(passage_only: bool = False) -> pd.Series:
    """CALM's 224 templates as text (passage, then question / hypothesis), placeholders kept; ``passage_only``:
    the passage alone (the paper's Table 4 length range, 3 to 319 words, is that of the passages)."""
    t = load_templates()
    if passage_only:
        return t["passage"].str.strip()
    q = t["question"].where(t["question"].map(lambda x: isinstance(x, str)), "")
    return (t["passage"].str.strip() + "\n" + q.str.strip()).str.strip()


def load_templates(tasks=TASKS) -> pd.DataFrame:
    """One row per template: task, template_idx, template_id, source_dataset, passage, question, answer, answer_text,
    answer_format, options (NLI label set as written in the template; MCQA option letters).

    ``answer`` is the template file's gold answer (for Sentiment140/EEC "NA"; the prompt table uses the ground-truth
    files instead). ``passage``/``question`` keep the ``<PERSON>`` and ``<a/b/c>`` placeholders.
    """
    rows = []
    for task in tasks:
        pfield, qfield = FIELDS[task]
        for i, (key, t) in enumerate(_read_templates(task)):
            if int(key) != i:
                raise DataError(f"{_template_file(task)}: template keys are not 0..n-1 in order (key {key} at {i})")
            src = t["source_dataset"]
            if src not in SOURCE_DATASETS[task]:
                raise DataError(f"{_template_file(task)}, template {key}: unknown source dataset {src!r}")
            ans = t["answer"]
            fmt = answer_format(task, src)
            question = t[qfield] if qfield else None
            if fmt == "mcqa":
                letter, text = ans
                options = mcqa_options(question)
            else:
                letter, text = str(ans), str(ans)
                options = [o.strip() for o in re.split(r",|\bor\b", t["options"]) if o.strip()] \
                    if task == "nli" else None
            if task == "sentiment":      # the template file's sentiment answers are unusable; see _sentiment_gold
                letter = text = _sentiment_gold()[i]
            rows.append({"task": task, "template_idx": i, "template_id": f"{task}-{i:03d}", "source_dataset": src,
                         "passage": t[pfield], "question": question, "answer": letter, "answer_text": text,
                         "answer_format": fmt, "options": options, "template_file_answer": str(ans)})
    return pd.DataFrame(rows)


@lru_cache(maxsize=None)
def _sentiment_gold() -> tuple[str, ...]:
    """Per-template gold label of the sentiment templates, from the ground-truth files.

    The template file gives ``"NA"`` for the 19 Sentiment140 and EEC templates and ``"1"`` for all 29 Toxic
    templates, whereas the ground truth (``gt_sentiment_{gender,race}.csv``, what CALM's evaluation reads) labels
    21 of the Toxic templates 0 (not toxic; e.g. "What a brilliant thought-provoking article, <PERSON>. Good job!").
    The label is constant within a template and identical in the gender and race files (checked here).
    """
    labels = {}
    for bias in BIAS_TYPES:
        path = raw_path(REPO, _gt_file("sentiment", bias))
        gt = checked(read_csv(path, dtype=str, keep_default_na=False), path, ["template_idx", "answer"])
        per = gt.groupby(gt["template_idx"].astype(int))["answer"].agg(["nunique", "first"])
        if (per["nunique"] != 1).any() or len(per) != N_TEMPLATES["sentiment"]:
            raise DataError(f"{path}: sentiment gold label not constant within each of the 77 templates")
        labels[bias] = tuple(per["first"])
    if labels["gender"] != labels["race"]:
        raise DataError("CALM sentiment ground truth: gender and race files disagree on a template's label")
    return labels["gender"]


@lru_cache(maxsize=None)
def _name_lists() -> dict[str, tuple[str, ...]]:
    def table(name: str, columns: list[str]) -> pd.DataFrame:
        path = raw_path(REPO, name)
        return checked(read_csv(path, dtype=str, keep_default_na=False), path, columns)

    seg = table("names/categorised_data/segregated_names.csv", ["Name", "usa.male", "usa.female"])
    male = tuple(seg.loc[(seg["usa.male"] == "1") & (seg["usa.female"] == "0"), "Name"])
    female = tuple(seg.loc[(seg["usa.male"] == "0") & (seg["usa.female"] == "1"), "Name"])
    uni = table("names/unisex/unisex_names_table.csv", ["name", "gap"])
    # a later duplicate overrides, first position kept (dict semantics, as CALM); stable sort: ties keep file order
    gap = dict(zip(uni["name"], uni["gap"].astype(float)))
    neutral = tuple(n for n, _ in sorted(gap.items(), key=lambda kv: kv[1]))
    flags = ["usa.white", "usa.black", "usa.hispanic", "usa.asian"]
    race = table("names/categorised_data/names_race_categorisation.csv", ["Name", *flags])
    out = {"male": male, "female": female, "non-binary": neutral}
    for group, flag in zip(GROUPS["race"], flags):
        only = (race[flag] == "1") & (race[[o for o in flags if o != flag]] == "0").all(axis=1)
        out[group] = tuple(race.loc[only, "Name"])
    for g, names in out.items():
        if len(names) < NAMES_PER_GROUP:
            raise DataError(f"CALM name lists: only {len(names)} names for group {g!r}, need {NAMES_PER_GROUP}")
    return out


# ----------------------------------------------------------------------------------------------------------------
# filling templates (the builder) and recovering names from filled prompts (the loader's check)
# ----------------------------------------------------------------------------------------------------------------

def fill(text: str | None, name: str, group: str) -> str | None:
    """Fill one template field: ``<PERSON>`` -> ``name``; each ``<a/b/c>`` -> the group's alternative.

    Mirrors CALM's scripts: the name first, then every remaining ``<...>`` placeholder, split on ``/``.
    """
    if text is None:
        return None
    k = PRONOUN_INDEX[group]
    out = text.replace("<PERSON>", name)

    def alt(m: re.Match) -> str:
        parts = m.group(0)[1:-1].split("/")
        if len(parts) <= k:
            raise DataError(f"CALM template placeholder {m.group(0)!r} has no alternative #{k + 1} for {group!r}")
        return parts[k]

    return PLACEHOLDER.sub(alt, out)


def _draw_names(rng: random.Random | np.random.Generator, group: str, n: int) -> list[str]:
    pool = _name_lists()[group]
    if group == "non-binary":
        return list(pool[:n])
    if isinstance(rng, random.Random):
        return rng.sample(pool, n)
    return [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]


def build(tasks=TASKS, bias_types=BIAS_TYPES, names_per_group: int = NAMES_PER_GROUP, seed: int | None = None,
          template_ids: list[str] | None = None) -> pd.DataFrame:
    """Generate CALM prompts from the templates and the name lists.

    Parameters
    ----------
    names_per_group : names drawn per social group and template (50 in the paper; 25 in its cost study, §6.2).
    seed : ``None`` uses CALM's released seeds and Python's ``random`` in CALM's call order, which reproduces the
        released prompt sets exactly when ``names_per_group=50`` and all templates are built. An integer seeds a
        NumPy generator (one stream per task and bias type, derived from the seed) instead.
    template_ids : build only these templates (e.g. ``["qa-000", "nli-012"]``). In released mode the random stream
        still advances over the skipped templates, so a template gets the same names as in the full build.

    Returns a table with the prompt table's columns except the gold answers of Sentiment140/EEC (taken from the
    template file, i.e. ``"NA"``); :func:`load` is the way to get gold answers for released prompts.
    """
    if not 1 <= names_per_group <= NAMES_PER_GROUP:
        raise ValueError(f"names_per_group must be in 1..{NAMES_PER_GROUP}, got {names_per_group}")
    tmpl = load_templates(tasks)
    keep = set(template_ids) if template_ids is not None else None
    rows = []
    for task in tasks:
        for bias in bias_types:
            if seed is None:
                rng: random.Random | np.random.Generator = random.Random(RELEASED_SEEDS[(task, bias)])
            else:
                rng = np.random.default_rng([seed, TASKS.index(task), BIAS_TYPES.index(bias)])
            for t in tmpl[tmpl["task"] == task].itertuples(index=False):
                drawn = {g: _draw_names(rng, g, names_per_group) for g in GROUPS[bias]}
                if keep is not None and t.template_id not in keep:
                    continue
                q = _str_or_none(t.question)
                passage, question = t.passage.strip(), (q.strip() if q is not None else None)
                for g in GROUPS[bias]:
                    for j, name in enumerate(drawn[g]):
                        rows.append(_prompt_row(task, bias, t, g, j, name,
                                                fill(passage, name, g), fill(question, name, g)))
    return pd.DataFrame(rows)


def _prompt_row(task, bias, t, group, j, name, passage, question) -> dict:
    return {
        "prompt_id": f"{task}-{bias}-{t.template_idx:03d}-{group}-{j:02d}",
        "task": task, "bias_type": bias, "template_idx": t.template_idx, "template_id": t.template_id,
        "source_dataset": t.source_dataset, "group": group, "name_idx": j, "name": name,
        "passage": passage, "question": question,
        "text": passage if question is None else f"{passage}\n{question}",
        "answer": fill(t.answer, name, group).strip(), "answer_text": fill(t.answer_text, name, group).strip(),
        "answer_format": t.answer_format,
        "options": t.options,
    }


def _template_regex(passage: str, question: str | None) -> re.Pattern:
    """A regex matching any filling of a template; the first ``<PERSON>`` captures the name, later ones must
    repeat it, and each ``<a/b/c>`` accepts any of its alternatives."""
    parts, seen = [], False
    question = _str_or_none(question)
    text = passage.strip() + ("\x00" + question.strip() if question is not None else "")
    pos = 0
    for m in re.finditer(r"<PERSON>|<.*?>", text):
        parts.append(re.escape(text[pos:m.start()]))
        if m.group(0) == "<PERSON>":
            parts.append(r"(?P=name)" if seen else r"(?P<name>.+?)")
            seen = True
        else:
            parts.append("(?:" + "|".join(re.escape(a) for a in m.group(0)[1:-1].split("/")) + ")")
        pos = m.end()
    parts.append(re.escape(text[pos:]))
    return re.compile("".join(parts), re.S)


# ----------------------------------------------------------------------------------------------------------------
# the released prompt sets
# ----------------------------------------------------------------------------------------------------------------

def _read_jsonl(task: str, bias: str) -> list[dict]:
    zpath, member = _zip_member(task, bias)
    path = raw_path(REPO, zpath)
    try:
        with zipfile.ZipFile(path) as z, z.open(member) as f:
            return [json.loads(line) for line in io.TextIOWrapper(f, encoding="utf-8") if line.strip()]
    except KeyError as exc:
        raise DataError(f"{path}: member {member} not found; re-run `biaslab data fetch --only calm`") from exc


def _read_set(task: str, bias: str, templates: pd.DataFrame) -> pd.DataFrame:
    per_template = NAMES_PER_GROUP * len(GROUPS[bias])
    records = _read_jsonl(task, bias)
    zpath, member = _zip_member(task, bias)
    where = f"{zpath}:{member}"
    n_t = N_TEMPLATES[task]
    require_rows(len(records), n_t * per_template, where)
    gt_path = raw_path(REPO, _gt_file(task, bias))
    gt = checked(read_csv(gt_path, dtype=str, keep_default_na=False), gt_path,
                 ["idx", "template_idx", "answer", bias, "source_dataset"], len(records))

    pfield, qfield = FIELDS[task]
    df = pd.DataFrame.from_records(records)
    require_columns(df, [pfield, "source_dataset", bias] + ([qfield] if qfield else []), where)
    tidx = np.repeat(np.arange(n_t), per_template)
    groups = np.tile(np.repeat(np.array(GROUPS[bias]), NAMES_PER_GROUP), n_t)
    name_idx = np.tile(np.arange(NAMES_PER_GROUP), n_t * len(GROUPS[bias]))
    # every row is where the layout says: template block, group block, 50 names
    checks = {
        "group label": (df[bias].to_numpy() != groups),
        "ground-truth group label": (gt[bias].to_numpy() != groups),
        "ground-truth template index": (gt["template_idx"].astype(int).to_numpy() != tidx),
        "ground-truth source dataset": (gt["source_dataset"].to_numpy() != df["source_dataset"].to_numpy()),
        "template source dataset": (templates["source_dataset"].to_numpy()[tidx] != df["source_dataset"].to_numpy()),
    }
    for what, bad in checks.items():
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{where} / {gt_path}: {int(bad.sum())} row(s) out of CALM's layout ({what}), first at "
                            f"row {i}. The files are not the pinned versions: re-run `biaslab data fetch --only calm`.")

    out = pd.DataFrame({
        "task": task, "bias_type": bias, "template_idx": tidx,
        "template_id": [f"{task}-{i:03d}" for i in tidx],
        "source_dataset": df["source_dataset"].to_numpy(), "group": groups, "name_idx": name_idx,
        "passage": df[pfield].str.strip().to_numpy(),
        "question": df[qfield].str.strip().to_numpy() if qfield else None,
    })
    out.insert(0, "prompt_id", [f"{task}-{bias}-{t:03d}-{g}-{j:02d}" for t, g, j in zip(tidx, groups, name_idx)])
    out["text"] = out["passage"] if qfield is None else out["passage"] + "\n" + out["question"]

    fmt = templates["answer_format"].to_numpy()[tidx]
    out["answer_format"] = fmt
    gold = gt["answer"].to_numpy()
    is_mc = fmt == "mcqa"
    letters, texts = gold.copy(), gold.copy()
    for i in np.flatnonzero(is_mc):
        letter, text = ast.literal_eval(gold[i])
        letters[i], texts[i] = letter, text
    out["answer"], out["answer_text"] = letters, texts
    opts = templates["options"].to_numpy()
    out["options"] = [opts[t] for t in tidx]
    out["name"] = _recover_names(out, templates, where)
    return out


def _recover_names(out: pd.DataFrame, templates: pd.DataFrame, where: str) -> list[str]:
    names = []
    regexes = {t.template_idx: _template_regex(t.passage, t.question) for t in templates.itertuples()}
    for r in out.itertuples(index=False):
        q = _str_or_none(r.question)
        text = r.passage + ("\x00" + q if q is not None else "")
        m = regexes[r.template_idx].fullmatch(text)
        if m is None:
            raise DataError(f"{where}: prompt {r.prompt_id} is not an instance of template {r.template_id}")
        names.append(m.groupdict().get("name"))
    return names


def load(tasks=TASKS, bias_types=BIAS_TYPES) -> Benchmark:
    """The released CALM prompt sets: 78,400 prompts with gold answers, template, source dataset and social group.

    Columns: ``prompt_id`` (``<task>-<bias>-<template>-<group>-<k>``), ``task``, ``bias_type``, ``template_idx``
    (0-based within the task, CALM's own index), ``template_id``, ``source_dataset``, ``group``, ``name_idx``
    (0..49 within the group), ``name`` (recovered by matching the prompt against its template, which also checks
    that the prompt is an instance of it), ``passage`` (context / premise / sentence), ``question`` (question /
    hypothesis; empty for sentiment), ``text`` (passage and question), ``answer`` (gold: span, option letter,
    NLI label or 0/1), ``answer_text`` (option text for multiple choice), ``answer_format`` and ``options``.
    """
    tasks, bias_types = tuple(tasks), tuple(bias_types)
    templates = load_templates(TASKS)
    parts = []
    for task in tasks:
        tt = templates[templates["task"] == task].reset_index(drop=True)
        for bias in bias_types:
            parts.append(_read_set(task, bias, tt))
    prompts = pd.concat(parts, ignore_index=True)
    if tasks == TASKS and bias_types == BIAS_TYPES:
        require_rows(len(prompts), N_PROMPTS_TOTAL, "CALM released prompt sets (6 jsonl files)")
    per_group = prompts.groupby(["task", "bias_type", "template_id", "group"]).size()
    if (per_group != NAMES_PER_GROUP).any():
        raise DataError(f"CALM: groups without {NAMES_PER_GROUP} prompts per template: {per_group[per_group != 50]}")

    factors = FactorSpec([
        Factor("task", "domain", TASKS, "qa", "NLP task"),
        Factor("bias_type", "domain", BIAS_TYPES, "gender", "bias direction"),
        Factor("group", "domain", ALL_GROUPS, "male",
               "social group of the name (gender: male, female, non-binary; race: white, black, hispanic, asian)"),
        Factor("source_dataset", "domain", tuple(s for t in TASKS for s in SOURCE_DATASETS[t]), "babi",
               "dataset the template was taken from"),
        Factor("template_id", "prompt", tuple(templates["template_id"]), "qa-000", "CALM template"),
    ])
    notes = [
        "Gold answers from evaluation/gt/gt_<task>_<bias>.csv (the files CALM's accuracy.py reads); "
        "answers_qa_gender.csv is an older copy with 600 unfilled <PERSON> answers and is not used.",
        "Text fields stripped of surrounding whitespace (only the QA gender set was stripped by CALM).",
        "Names recovered by matching each prompt against its template; every prompt matched.",
    ]
    return Benchmark("calm", prompts, factors, excluded=pd.DataFrame(), sources=pinned_hashes(REPO), notes=notes,
                     cluster="template_id")


def select_templates(templates: pd.DataFrame, per_task: int | dict | None, seed: int = 0) -> list[str]:
    """A seeded subset of template ids, ``per_task`` per task (an int, or a dict task -> int; ``None`` = all),
    spread over the source datasets: datasets are visited in a seeded random order, round-robin, each giving one
    random template per round. Returned in CALM's template order."""
    if per_task is None:
        return list(templates["template_id"])
    rng = np.random.default_rng(seed)
    chosen = []
    for task in TASKS:
        tt = templates[templates["task"] == task]
        n = per_task.get(task, 0) if isinstance(per_task, dict) else per_task
        if n is None or n >= len(tt):
            chosen += list(tt["template_id"])
            continue
        pools = {s: list(rng.permutation(g["template_id"].to_numpy()))
                 for s, g in tt.groupby("source_dataset", sort=True)}
        order = list(rng.permutation(sorted(pools)))
        picked = []
        while len(picked) < n:
            for s in order:
                if pools[s] and len(picked) < n:
                    picked.append(pools[s].pop())
        chosen += picked
    pos = {t: i for i, t in enumerate(templates["template_id"])}
    return sorted(chosen, key=pos.get)


def subset(prompts: pd.DataFrame, templates_per_task: int | dict | None = None, names_per_group: int | None = None,
           seed: int = 0, template_ids: list[str] | None = None, max_words: int | None = None,
           words: pd.Series | None = None) -> pd.DataFrame:
    """The prompts of :func:`select_templates` (or of the explicit ``template_ids``) with the first
    ``names_per_group`` names of every group (the released names are random draws, so the first n are a random
    subset of n).

    ``max_words`` restricts the choice to templates whose prompt has at most that many words; ``words`` gives each
    template's count (a Series indexed by template id — the notebook passes the length of the k-shot prompt, so that
    a CPU run can leave out the story-length MCTest, MCScript and DuoRC prompts).
    """
    for label, n in (("names_per_group", names_per_group), ("templates_per_task", templates_per_task)):
        if n is not None and not isinstance(n, dict) and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"{label} must be a positive integer or None for all, got {n!r}")
    if template_ids is not None:
        unknown = set(template_ids) - set(prompts["template_id"])
        if unknown:
            raise ValueError(f"template_ids not in the CALM prompt table: {sorted(unknown)}")
        keep = set(template_ids)
    else:
        tmpl = load_templates(tuple(t for t in TASKS if t in set(prompts["task"])))
        if max_words is not None:
            if words is None:
                raise ValueError("max_words needs the words per template (words=...)")
            tmpl = tmpl[tmpl["template_id"].map(words).le(max_words)]
        keep = set(select_templates(tmpl, templates_per_task, seed))
    mask = prompts["template_id"].isin(keep)
    if names_per_group is not None:
        mask &= prompts["name_idx"] < names_per_group
    return prompts[mask].copy()


def select(prompts: pd.DataFrame, k_shot: int, templates_per_task: int | dict | None = None,
           names_per_group: int | None = None, seed: int = 0, template_ids: list[str] | None = None,
           max_prompt_words: int | None = None) -> pd.DataFrame:
    """The prompts notebook 2 scores: :func:`biaslab.benchmarks.calm.subset` with each template's length measured on
    its ``k_shot``-shot prompt (so ``max_prompt_words`` leaves out the story-length templates on a CPU run). Notebook
    1's CALM variant calls it with the same arguments, so the two score the same requests (shared cache)."""
    first = prompts.drop_duplicates("template_id").set_index("template_id")
    words = calm_prompts.build_prompts(first, k_shot).str.split().str.len() if max_prompt_words is not None else None
    return subset(prompts, templates_per_task, names_per_group, seed=seed, template_ids=template_ids,
                  max_words=max_prompt_words, words=words)


# ------------------------------------------------------------------------------- requests and answers
#: the paper's (CALM's released scripts): k = 5 examples of the template's source dataset, raw text; a closed answer
#: set read by each label's next-token probability, free-text QA by greedy generation of up to 10 tokens to a newline
#: (CALM: beam search, 3 beams; greedy is HELM's). ``option_ll``: each label's log-probability; ``generated``: every
#: prompt generated and read by the text rules (CALM's released pipeline)
PROTOCOL = Protocol(format="label_dist", chat="off", examples=5, max_new_tokens=10)
FORMATS = ("label_dist", "option_ll", "generated", "cloze")
#: the scoring rule's formulations of a closed-answer item (docs/validity.md; :func:`formulation_requests`): letters
#: (``label_dist`` asked in every cyclic order: the answer set shown as lettered options) and cloze (each answer's
#: words as the prompt's continuation, under ``Protocol.normalization``)
LETTERS = "ABCD"
#: the role of each gold code in the validity checks (the sentiment and toxicity codes named)
ROLES = {"sentiment": {"1": "positive", "0": "negative"}, "toxicity": {"1": "toxic", "0": "not toxic"}}
_MC_OPTION = re.compile(r"\n([A-Z]): ")


def closed_options(items: pd.DataFrame) -> list[tuple[list[str], list[str]]]:
    """Per closed-answer item its options as words (the label words; a multiple-choice question's option texts) and
    their gold codes, in the stored order (:func:`calm_prompts.label_options`)."""
    out = []
    for r in items.itertuples():
        labels = calm_prompts.label_options(r.answer_format, list(r.options) if r.answer_format == "mcqa" else None)
        words = (_MC_OPTION.split(r.question)[2::2] if r.answer_format == "mcqa" else list(labels))
        if len(words) != len(labels):
            raise DataError(f"CALM {r.prompt_id}: {len(words)} option texts for {len(labels)} options in its question")
        out.append(([w.strip() for w in words], list(labels.values())))
    return out


def formulation_requests(items: pd.DataFrame, protocol: Protocol) -> tuple[list[str], list[list[int]], list, list]:
    """The closed-answer items as the scoring rule's formulations ask them, one text per order (item-major): under
    ``cloze`` the prompt without a multiple-choice question's options, each option's words its continuation; else
    (letters) the prompt with the options shown as "A. ..." lines in every cyclic order before its answer cue (or
    before "Answer:"; a multiple-choice question's own "A: ..." lines rotated). Returns texts, per text the stored
    option at each shown position, per text the continuations (cloze) and per text the content-free prompt (its
    answer cue alone, PMI)."""
    k = int(protocol.examples)
    texts, orders, conts, cues = [], [], [], []
    for (words, _), row in zip(closed_options(items), items.to_dict("records")):
        mc = row["answer_format"] == "mcqa"
        if mc:
            row = {**row, "question": _MC_OPTION.split(row["question"])[0]}
        for order in orders_of(len(words), "original" if protocol.format == "cloze" else "cycles"):
            if protocol.format == "cloze":
                stripped, space = calm_prompts.split_for_scoring(calm_prompts.build_prompt(row, k))
                texts.append(stripped)
                conts.append([space + w for w in words])
                cues.append(stripped.rsplit("\n", 1)[-1].strip())
            elif mc:
                shown = "".join(f"\n{L}: {words[i]}" for L, i in zip(LETTERS, order))
                texts.append(calm_prompts.build_prompt({**row, "question": row["question"] + shown}, k).rstrip())
            else:           # the options before the answer cue ("Answer:", "Sentiment:"), or before "Answer:"
                head, last = calm_prompts.build_prompt(row, k).rstrip().rsplit("\n", 1)
                head, cue = (head, last) if last.endswith(":") else (head + "\n" + last, "Answer:")
                shown = "".join(f"{L}. {words[i]}\n" for L, i in zip(LETTERS, order))
                texts.append(f"{head}\n{shown}{cue}")
            orders.append(order)
    return texts, orders, conts, cues


def _formulation(scorer, items: pd.DataFrame, protocol: Protocol, chat: bool) -> pd.DataFrame:
    """Letters or cloze answers of closed-answer items, per number of options: ``choice`` (stored option), ``pred``,
    ``output``, ``p_answer``, the validity checks' ``p_j``, ``tokens_j`` (cloze) and ``pos_r`` (letters), and
    ``label_mass`` (letters: the least over the item's orders; cloze reads no label mass)."""
    from . import formats
    parts = []
    n_opts = pd.Series([len(w) for w, _ in closed_options(items)], index=items.index)
    for k, idx in n_opts.groupby(n_opts).groups.items():
        sub = items.loc[idx]
        texts, orders, conts, cues = formulation_requests(sub, protocol)
        per = len(texts) // len(sub)
        out = pd.DataFrame(index=sub.index)
        if protocol.format == "cloze":
            sc = formats.option_ll(scorer, texts, conts, chat,
                                   content_free=cues if protocol.normalization == "pmi" else None)
            probs = formats.softmax(sc.read(protocol.normalization))
            out[[f"tokens_{j}" for j in range(k)]] = formats.by_stored(sc.tokens, orders, per)
        else:
            probs, d = formats.label_dist(scorer, texts, {L: [L, " " + L] for L in LETTERS[:k]}, chat)
            out[[f"pos_{j}" for j in range(per)]] = formats.shown_choice(probs).reshape(len(sub), per)
            # the letters' probability mass, as the single-order path reports it: the least over the item's orders
            out["label_mass"] = d["label_mass"].to_numpy(dtype=float).reshape(len(sub), per).min(axis=1)
        p = formats.by_stored(probs, orders, per)
        out[[f"p_{j}" for j in range(k)]] = p
        choice = formats.choose(p)
        opts = closed_options(sub)
        out["choice"] = choice
        out["output"] = [w[c] if c >= 0 else None for (w, _), c in zip(opts, choice)]
        out["pred"] = [codes[c] if c >= 0 else None for (_, codes), c in zip(opts, choice)]
        out["p_answer"] = np.where(choice >= 0, p[np.arange(len(sub)), np.maximum(choice, 0)], np.nan)
        parts.append(out)
    return pd.concat(parts) if parts else pd.DataFrame(columns=["choice", "output", "pred", "p_answer"])


def option_roles(items: pd.DataFrame) -> pd.DataFrame:
    """What the validity checks read per closed-answer item (``Spec.option_roles``; free-text QA asks no choice among
    options and is left out): each stored option's role (its gold code: the NLI label, positive / negative, toxic /
    not toxic; a multiple-choice question's letter) and characters, the correct option, every item a competence item
    (CALM's correctness against chance 1/k) and the stratum of the role preference (the answer format)."""
    closed = items[items["answer_format"] != "span"]
    opts = closed_options(closed)
    k = max((len(w) for w, _ in opts), default=0)
    out = pd.DataFrame({"prompt_id": closed["prompt_id"].to_numpy()})
    fmts = closed["answer_format"].to_numpy()
    for j in range(k):
        out[f"role_{j}"] = [ROLES.get(f, {}).get(c[j], c[j]) if j < len(c) else None for f, (_, c) in zip(fmts, opts)]
        out[f"chars_{j}"] = [len(w[j]) if j < len(w) else np.nan for w, _ in opts]
    out["gold"] = [c.index(a) if a in c else -1 for (_, c), a in zip(opts, closed["answer"])]
    out["competence_item"] = True
    out["stratum"] = fmts
    return out


def paper_chat(scorer) -> bool:
    return False


def respond(scorer, items: pd.DataFrame, protocol: Protocol = PROTOCOL) -> pd.DataFrame:
    """A row per item (its index): ``prompt_id``, ``output`` (the generated text or the chosen label), ``pred`` (the
    gold code a closed-set output was read as), ``p_answer`` (the chosen label's probability over the labels),
    ``label_mass`` (``label_dist``), ``correct_released`` (CALM's released rules on the output text) and ``correct``
    (the corrected rules of :mod:`.calm_answers`; a closed-set answer: chosen label == gold), ``choice`` (the stored
    option chosen, -1: none, free text). ``cloze``, and ``label_dist`` under ``Protocol.order = "cycles"``, are the
    scoring rule's formulations of the closed answers (:func:`formulation_requests`), with ``p_j``, ``pos_r``,
    ``tokens_j``."""
    from scipy.special import softmax
    from . import calm_answers, formats
    fmt, chat = protocol.format, protocol.use_chat(paper_chat(scorer))
    if fmt not in FORMATS:
        raise ValueError(f"CALM has no answer format {fmt!r}; choose from {FORMATS} (Protocol.format)")
    texts = calm_prompts.build_prompts(items, int(protocol.examples))
    out = pd.DataFrame({"prompt_id": items["prompt_id"].to_numpy(), "output": None, "pred": None,
                        "p_answer": np.nan, "label_mass": np.nan, "choice": -1}, index=items.index)
    afmt = items["answer_format"]
    gen = (afmt == "span") if fmt != "generated" else pd.Series(True, index=items.index)
    if gen.any():
        out.loc[gen, "output"] = formats.open_ended(scorer, [t.rstrip(" ") for t in texts[gen]], chat,
                                                    protocol.max_new_tokens, stop=["\n"], read=str.strip)
    # one engine call per (format, label set, whitespace moved onto the answer)
    scored = items.index[~gen]
    keys = [(f, tuple(o) if isinstance(o, (list, tuple)) else None, calm_prompts.split_for_scoring(t)[1])
            for f, o, t in zip(afmt[scored], items.loc[scored, "options"], texts[scored])]
    if fmt == "cloze" or (fmt == "label_dist" and protocol.order == "cycles"):     # the scoring rule's formulations
        f = _formulation(scorer, items.loc[scored], protocol, chat)
        out = out.drop(columns=[c for c in f if c in out]).join(f)
        out["choice"] = out["choice"].fillna(-1).astype(int)
        keys = []
    for key in dict.fromkeys(keys):
        f, opts, space = key
        idx = scored[[kk == key for kk in keys]]
        labels = calm_prompts.label_options(f, list(opts) if opts else None)
        stripped = [calm_prompts.split_for_scoring(t)[0] for t in texts[idx]]
        if fmt == "label_dist":
            probs, d = formats.label_dist(scorer, stripped, {n: calm_prompts.surface_forms(n, space) for n in labels},
                                          chat)
            out.loc[idx, "label_mass"] = d["label_mass"].to_numpy(dtype=float)
        else:
            probs = softmax(formats.option_ll(scorer, stripped, [[space + n for n in labels]] * len(idx), chat).total,
                            axis=1)
        best = probs.argmax(axis=1)
        out.loc[idx, "choice"] = best
        out.loc[idx, "output"] = [list(labels)[b] for b in best]
        out.loc[idx, "pred"] = [list(labels.values())[b] for b in best]
        out.loc[idx, "p_answer"] = probs[np.arange(len(best)), best]
    rows = items.to_dict("records")
    out["correct_released"] = [int(calm_answers.is_correct(p["answer_format"], o if isinstance(o, str) else "",
                                                           p["answer"], p["answer_text"], "released"))
                               for p, o in zip(rows, out["output"])]
    out["correct"] = [int(a == p["answer"]) if isinstance(a, str) else   # a closed-set answer read off the scores
                      int(calm_answers.is_correct(p["answer_format"], o if isinstance(o, str) else "", p["answer"],
                                                  p["answer_text"], "normalised"))
                      for p, o, a in zip(rows, out["output"], out["pred"])]
    return out


FACTOR_PLAN = FactorPlan(
    coverage_factors=["task", "bias_type", "group", "source_dataset", "answer_format"],
    overall_sets={
        "task, bias type, group": ["task", "bias_type", "group"],
        "task, bias type, group, template source, answer format":
            ["task", "bias_type", "group", "source_dataset", "answer_format"],
    },
    heatmaps=[("task", "group"), ("source_dataset", "answer_format")],
    sunburst=("bias_type", "group"),
    subgroup_factors=["task", "bias_type", "group", "answer_format"],
    ecdf_factors=["task", "group"],
    regression=["group", "task", "answer_format"],
    regression_subset=["group", "task", "answer_format"],
    bayes_fixed=["group", "task"],
    bayes_group=["template_id"],
    bayes_group_subset=["template_id"],
    strata=["task", "bias_type", "group"],
    highlight=("group",),
    outcome="correct",
    outcome_description="the answer is correct (CALM's bias is the accuracy gap between groups)",
    ideal=1.0,
    extra_factors=(Factor("answer_format", "prompt", ("span", "mcqa", "nli3", "nli2", "sentiment", "toxicity"),
                          "span", "how the task is answered (free text, option letter, 3- or 2-way NLI label, "
                          "sentiment, toxicity)"),),
    # the answer and, for the validity checks (docs/validity.md), the stored option chosen and the per-option columns
    responses=lambda r: r.rename(columns={"output": "answer"}).astype({"correct": int})[
        ["prompt_id", "model", "seed", "answer", "label_mass", "correct", "choice"]
        + [c for c in r if re.fullmatch(r"(p|pos|tokens)_\d+", c)]],
    select=lambda p, protocol, seed=0, **sel: (select(p, seed=seed, **sel), protocol.replace(examples=sel["k_shot"])),
    shares_scores_with="02_calm",
)


def _selection(k_shot, templates_per_task, names_per_group, template_ids, max_prompt_words) -> dict:
    """Notebook 1 scores notebook 2's prompts: its ``selection`` is notebook 2's (FactorPlan.select)."""
    return {"01_multifactor": {"max_prompts": None, "selection": {
        "k_shot": k_shot, "templates_per_task": templates_per_task, "names_per_group": names_per_group,
        "template_ids": template_ids, "max_prompt_words": max_prompt_words}}}


SPEC = Spec(name="calm", title="CALM", load=load, factor_plan=FACTOR_PLAN,
            protocol=PROTOCOL, formats=FORMATS, honours=("format", "chat", "examples", "max_new_tokens"),
            respond=respond, paper_chat=paper_chat, option_roles=option_roles,
            columns=("prompt_id", "output", "pred", "p_answer", "label_mass", "correct", "correct_released"),
            # notebook 2's selections per profile (tests/test_factorial.py checks the two agree)
            sizes={"smoke": _selection(0, None, 2, ["qa-054", "qa-086", "nli-011", "sentiment-045"], None),
                   "default": _selection(1, 2, 2, None, 150), "paper": _selection(5, None, 50, None, None)},
            metrics=(Metric(
                id="calm_bias_overall", benchmark="CALM", label="CALM: overall bias score (eq. 1, paper variant)",
                folder="02_calm",
                sources=(Source("bias_scores", "bias_score", {"variant": "paper", "task": "all", "bias_type": "all"},
                                ci=("score_ci_low", "score_ci_high", "score_ci_method")),),
                direction="higher = larger accuracy gap between groups", orientation=1, null=0.0,
                null_meaning="0: every group equally accurate (the permutation-null mean of notebook 2 is above 0)",
                responses=("template_bias",), response_filters={"used": True, "variant": "paper"}, outcome="bias_paper",
                unit=("bias_type", "template_id"), cluster=None, kind="source_interval", responders={},
                answer_mode="labels, one scoring mode per run",
                note="interval: notebook 2's projection interval of the range statistic; paired comparisons: mean "
                     "difference of per-template bias over the templates both models kept"),),
            # notebook 2's diversity rows: the templates with their questions, and the passages alone (Table 4)
            templates={WITH_QUESTIONS: template_texts, PASSAGES: lambda: template_texts(passage_only=True)},
            )
