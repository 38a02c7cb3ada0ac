"""The agentic multiple-choice benchmark (Fernando et al., "Quantifying Bias in Agentic Large Language Models").

The paper's 1,020 prompts were never published. biaslab authors the benchmark from the paper's design (§II.A,
Table I) as data in ``data/agentic/``:

* ``domains.csv``      17 domains (healthcare, criminal justice, judicial, business, military, civil, education, ...)
* ``roles.csv``        the role the model is given ("You are a judge in a county criminal court.")
* ``scenarios.csv``    102 scenarios = 17 domains x 3 question types x 2 replicates; each names a role and
                       introduces ``{n}`` people ("{N} defendants ... are awaiting bail hearings today.")
* ``questions.csv``    204 questions = each scenario asked with a positive and a negative polarity
* ``class_types.csv``  Table I: the five class types and their exact answer choices (race 5, gender 3, age 5,
                       socioeconomic status 3, political affiliation 3)
* ``fewshot.csv``      the answer-format examples shown before every prompt (§II.C.1)
* ``prompts.csv``      the 1,020 prompts = 204 questions x 5 class types, each with its seeded answer order

A prompt reads: role, scenario, "They differ only in their <attribute>.", ``Question: ...``, the numbered choices
in the prompt's own random order (§II.C.1: "a random sequence generator"), and ``Answer:``. ``prompts.csv`` is
generated from the bank by :func:`build_prompts` (``python data/agentic/build_prompts.py``); the loader checks that
the committed file is exactly what the bank generates, so the two can never drift apart.

The design is balanced and fully crossed: question type (3) x class type (5) x polarity (2) x domain (17) x
replicate (2) = 1,020, i.e. every one of the 30 question-type x class-type x polarity cells holds 34 prompts, two
per domain, and every question is asked once for each class type.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .. import paths
from ..sources import DataError, sha256_file
from . import formats
from .base import (Benchmark, Factor, FactorSpec, Protocol, checked, exclude, options_in_order, read_csv,
                   template_texts, wording)
from .spec import FactorPlan, Metric, Source, Spec, universe_estimate

log = logging.getLogger(__name__)

BANK_DIR = paths.DATA_DIR / "agentic"
N_PROMPTS = 1020
#: Seed of the answer-order permutations stored in prompts.csv (documented in data/agentic/README.md).
PERMUTATION_SEED = 20240501
MAX_K = 5
ANSWER_CUE = "Answer:"
INSTRUCTION = "Answer each question with the number of one answer choice."

QUESTION_TYPES = ("identity_inference", "cause_effect", "value_judgement")
POLARITIES = ("positive", "negative")
CLASS_TYPES = ("race", "gender", "age", "socioeconomic_status", "political_affiliation")
NUMBER_WORDS = {3: "three", 5: "five"}

BANK_FILES = ("domains.csv", "roles.csv", "scenarios.csv", "questions.csv", "class_types.csv", "fewshot.csv",
              "prompts.csv")
PROMPT_COLUMNS = ["prompt_id", "question_id", "scenario_id", "role_id", "domain", "question_type", "polarity",
                  "class_type", "replicate", "k", "order", "item_text"]


# --------------------------------------------------------------------------------------------- the bank
def read_bank(bank_dir: str | Path | None = None) -> dict[str, pd.DataFrame]:
    """Read the bank CSVs (all columns as strings except ``k``, ``replicate``, ``answer``), validating columns."""
    d = Path(bank_dir or BANK_DIR)
    expected = {
        "domains.csv": ["domain", "code", "description"],
        "roles.csv": ["role_id", "domain", "role"],
        "scenarios.csv": ["scenario_id", "domain", "question_type", "replicate", "role_id", "scenario"],
        "questions.csv": ["question_id", "scenario_id", "polarity", "question"],
        "class_types.csv": ["class_type", "label", "k", "attribute", "choices"],
        "fewshot.csv": ["example_id", "role", "scenario", "question", "choices", "answer"],
    }
    bank = {}
    for name, cols in expected.items():
        p = d / name
        if not p.exists():
            raise DataError(f"{p} is missing: the agentic benchmark's bank lives in data/agentic/ of the repository.")
        bank[name.removesuffix(".csv")] = checked(read_csv(p, dtype=str, keep_default_na=False), p, cols)
    bank["class_types"]["k"] = bank["class_types"]["k"].astype(int)
    bank["scenarios"]["replicate"] = bank["scenarios"]["replicate"].astype(int)
    bank["fewshot"]["answer"] = bank["fewshot"]["answer"].astype(int)
    return bank


def class_choices(bank: dict[str, pd.DataFrame] | None = None) -> dict[str, list[str]]:
    """Table I: class type -> its answer choices in the paper's order."""
    ct = (bank or read_bank())["class_types"]
    return {r.class_type: r.choices.split("|") for r in ct.itertuples()}


def permutation(prompt_id: str, choices: list[str], seed: int = PERMUTATION_SEED) -> list[str]:
    """The prompt's answer order: ``choices`` sorted by sha256(seed|prompt_id|choice).

    A uniformly random permutation per prompt that depends only on the seed, the prompt id and the choice texts, so
    it is identical on every platform and every numpy version, and adding a prompt never reshuffles another.
    """
    key = lambda c: hashlib.sha256(f"{seed}|{prompt_id}|{c}".encode()).hexdigest()
    return sorted(choices, key=key)


def render_item(role: str, scenario: str, question: str, choices: list[str], attribute: str | None = None) -> str:
    """One multiple-choice item: role, scenario, the class sentence, ``Question:``, numbered choices, ``Answer:``.

    ``scenario`` must already have its ``{n}``/``{N}`` filled in. The text ends with ``Answer:`` (no space): the
    notebook appends the separator that suits the model's tokenizer (see :func:`answer_format`).
    """
    head = f"{role} {scenario}" + (f" They differ only in their {attribute}." if attribute else "")
    return "\n".join([head, f"Question: {question}", *(f"{i}. {c}" for i, c in enumerate(choices, 1)), ANSWER_CUE])


def fill_count(scenario: str, k: int) -> str:
    word = NUMBER_WORDS[k]
    return scenario.replace("{N}", word.capitalize()).replace("{n}", word)


def build_prompts(bank_dir: str | Path | None = None, seed: int = PERMUTATION_SEED) -> pd.DataFrame:
    """Generate the prompt table from the bank: every question x every class type, each with its answer order.

    Columns: see ``PROMPT_COLUMNS``; ``order`` is the presented order of the group labels joined by "|" (position 1
    first), ``item_text`` the item as the model reads it after the few-shot block.
    """
    bank = read_bank(bank_dir)
    roles = bank["roles"].set_index("role_id")["role"]
    scen = bank["scenarios"].set_index("scenario_id")
    rows = []
    for q in bank["questions"].itertuples():
        s = scen.loc[q.scenario_id]
        for ct in bank["class_types"].itertuples():
            pid = f"{q.question_id}-{ct.class_type}"
            order = permutation(pid, ct.choices.split("|"), seed)
            text = render_item(roles[s.role_id], fill_count(s.scenario, ct.k), q.question, order, ct.attribute)
            rows.append({"prompt_id": pid, "question_id": q.question_id, "scenario_id": q.scenario_id,
                         "role_id": s.role_id, "domain": s.domain, "question_type": s.question_type,
                         "polarity": q.polarity, "class_type": ct.class_type, "replicate": int(s.replicate),
                         "k": int(ct.k), "order": "|".join(order), "item_text": text})
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def fewshot_block(n_shots: int, bank_dir: str | Path | None = None) -> str:
    """The instruction and the first ``n_shots`` answer-format examples (§II.C.1), each answered with its number.

    The examples have one sensible answer and nothing to do with any social group; their answers sit at different
    positions (2, 4, 1) so that they do not teach one position.
    """
    fs = read_bank(bank_dir)["fewshot"]
    if not 0 <= n_shots <= len(fs):
        raise ValueError(f"n_shots={n_shots}: data/agentic/fewshot.csv has {len(fs)} examples; choose 0..{len(fs)}")
    shots = [f"{render_item(r.role, r.scenario, r.question, r.choices.split('|'))} {r.answer}"
             for r in fs.head(n_shots).itertuples()]
    return "\n\n".join([INSTRUCTION, *shots]) + "\n\n"


# --------------------------------------------------------------------------------------------- the loader
def factor_spec(bank: dict[str, pd.DataFrame] | None = None) -> FactorSpec:
    bank = bank or read_bank()
    domains = tuple(bank["domains"]["domain"])
    return FactorSpec([
        Factor("domain", "domain", domains, "business",
               "setting of the scenario (17 domains, two scenarios per question type each)"),
        Factor("class_type", "domain", CLASS_TYPES, "race",
               "social dimension the answer choices span (Table I): race 5, gender 3, age 5, SES 3, politics 3"),
        Factor("question_type", "prompt", QUESTION_TYPES, "identity_inference",
               "identity inference, cause-effect or value judgement (§II.A)"),
        Factor("polarity", "prompt", POLARITIES, "positive",
               "whether the question asks for a good or a bad attribution"),
    ])


def _validate_rows(df: pd.DataFrame, generated: pd.DataFrame, choices: dict[str, list[str]], file: Path):
    """Exclude rows whose answer order or text disagree with the bank (e.g. after a hand edit of prompts.csv)."""
    gen = generated.set_index("prompt_id")
    unknown = ~df["prompt_id"].isin(gen.index)
    bad_order = pd.Series([sorted(o.split("|")) != sorted(choices.get(c, [])) for o, c in
                           zip(df["order"], df["class_type"])], index=df.index) & ~unknown
    bad_text = ~unknown & ~bad_order & ((df["item_text"] != df["prompt_id"].map(gen["item_text"]))
                                        | (df["order"] != df["prompt_id"].map(gen["order"])))
    kept, ex1 = exclude(df, unknown, "prompt_id not generated by the bank", str(file))
    kept, ex2 = exclude(kept, bad_order.loc[kept.index], "answer order is not a permutation of the class's choices",
                        str(file))
    kept, ex3 = exclude(kept, bad_text.loc[kept.index], "text or order differs from what the bank generates "
                        "(re-run python data/agentic/build_prompts.py)", str(file))
    return kept, pd.concat([ex1, ex2, ex3])


def load(n_shots: int = 2, bank_dir: str | Path | None = None) -> Benchmark:
    """Load the 1,020 prompts with their factors, answer orders and the few-shot block.

    Returns a :class:`Benchmark` whose prompt table has, besides ``PROMPT_COLUMNS``: ``text`` (few-shot block +
    item, ending in ``Answer:``), ``choices`` (list of group labels in presented order; label "j" is
    ``choices[j-1]``) and ``n_shots``.
    """
    d = Path(bank_dir or BANK_DIR)
    bank = read_bank(d)
    f = d / "prompts.csv"
    if not f.exists():
        raise DataError(f"{f} is missing. Fix: run `python data/agentic/build_prompts.py`.")
    df = checked(read_csv(f, dtype=str, keep_default_na=False), f, PROMPT_COLUMNS, N_PROMPTS)
    df["k"] = df["k"].astype(int)
    df["replicate"] = df["replicate"].astype(int)
    choices = class_choices(bank)
    kept, excluded = _validate_rows(df, build_prompts(d), choices, f)
    block = fewshot_block(n_shots, d)
    kept["choices"] = kept["order"].str.split("|")
    kept["text"] = block + kept["item_text"]
    kept["n_shots"] = n_shots
    bench = Benchmark(
        name="agentic", prompts=kept.reset_index(drop=True), factors=factor_spec(bank), excluded=excluded,
        sources={f"biaslab/data/agentic/{n}": sha256_file(d / n) for n in BANK_FILES},
        notes=[
            "Authored by biaslab from the paper's design: the paper's own 1,020 prompts were never published.",
            "Design: 3 question types x 5 class types x 2 polarities x 17 domains x 2 replicates = 1,020, "
            "fully crossed (every question is asked once per class type).",
            f"Answer order: a seeded random permutation per prompt (seed {PERMUTATION_SEED}), stored in 'order'.",
            f"Few-shot block: the instruction and {n_shots} answer-format example(s) (paper §II.C.1).",
        ],
        cluster="scenario_id",
    )
    check_balance(bench.prompts)
    return bench


# --------------------------------------------------------------------------------------------- design tools
def design_counts(prompts: pd.DataFrame, wide: bool = True) -> pd.DataFrame:
    """Prompts per question type x class type x polarity (x domain). ``wide``: one column per domain + total."""
    keys = ["question_type", "class_type", "polarity"]
    long = prompts.groupby(keys + ["domain"], observed=True).size().rename("n").reset_index()
    if not wide:
        return long
    t = long.pivot_table(index=keys, columns="domain", values="n", fill_value=0, aggfunc="sum")
    t["total"] = t.sum(axis=1)
    t = t.reset_index()
    order = {f: {v: i for i, v in enumerate(levels)}
             for f, levels in [("question_type", QUESTION_TYPES), ("class_type", CLASS_TYPES),
                               ("polarity", POLARITIES)]}
    t = t.sort_values(keys, key=lambda s: s.map(order[s.name])).reset_index(drop=True)
    t.columns.name = None
    return t


def check_balance(prompts: pd.DataFrame, per_cell: int = 2) -> None:
    """Raise unless every question type x class type x polarity x domain cell holds ``per_cell`` prompts."""
    n_dom = prompts["domain"].nunique()
    long = design_counts(prompts, wide=False)
    n_cells = len(QUESTION_TYPES) * len(CLASS_TYPES) * len(POLARITIES) * n_dom
    if len(long) != n_cells or not (long["n"] == per_cell).all():
        off = long[long["n"] != per_cell].head(5).to_dict("records")
        raise DataError(f"agentic prompts are not balanced: expected {per_cell} per cell in {n_cells} cells, "
                        f"found {len(long)} cells; e.g. {off}")


def balanced_subset(prompts: pd.DataFrame, max_prompts: int | None, seed: int = 0) -> pd.DataFrame:
    """A design-preserving subset of about ``max_prompts`` prompts (all when None or larger than the table).

    Units are (scenario, class type) pairs, i.e. a question's positive and negative version together, so polarity
    stays balanced and paired. Units are spread evenly over the 15 question-type x class-type strata (counts differ
    by at most one), and within strata the domains are taken in a seeded rotation, so domain counts also differ by
    at most one unit per stratum. Returns rows in the input order.
    """
    if max_prompts is not None and (isinstance(max_prompts, bool) or not isinstance(max_prompts, int)
                                    or max_prompts < 2):
        raise ValueError(f"max_prompts must be an integer of at least 2 (one positive/negative pair) or None for "
                         f"all prompts, got {max_prompts!r}")
    if max_prompts is None or max_prompts >= len(prompts):
        return prompts.copy()
    n_units = max(1, int(max_prompts) // 2)
    rng = np.random.default_rng(seed)
    units = prompts[["scenario_id", "class_type", "question_type", "domain", "replicate"]].drop_duplicates(
        ["scenario_id", "class_type"])
    strata = [(q, c) for q in QUESTION_TYPES for c in CLASS_TYPES]
    per = np.full(len(strata), n_units // len(strata))
    per[rng.permutation(len(strata))[: n_units % len(strata)]] += 1
    domains = sorted(prompts["domain"].unique())
    dom_order = [domains[i] for i in rng.permutation(len(domains))]
    chosen, offset = [], 0
    for (q, c), m in zip(strata, per):
        u = units[(units.question_type == q) & (units.class_type == c)].sort_values("replicate")
        # per domain, its units in a random replicate order; domains taken in rotation, continuing where the
        # previous stratum stopped, skipping domains with nothing left (when ``prompts`` is itself a subset)
        avail = {}
        for dom, g in u.groupby("domain"):
            rows = list(g.itertuples())
            start = int(rng.integers(len(rows)))
            avail[dom] = rows[start:] + rows[:start]
        taken = j = 0
        while taken < m and any(avail.values()):
            dom = dom_order[(offset + j) % len(dom_order)]
            j += 1
            if avail.get(dom):
                r = avail[dom].pop(0)
                chosen.append((r.scenario_id, r.class_type))
                taken += 1
        offset += j
    key = pd.MultiIndex.from_frame(prompts[["scenario_id", "class_type"]])
    return prompts[key.isin(chosen)].copy()


def cyclic_variants(prompts: pd.DataFrame) -> pd.DataFrame:
    """Every cyclic shift of each prompt's answer order (k variants per prompt, shift 0 = the stored order): the
    prompt's row with ``shift`` and the rotated ``choices``, to ask with :func:`respond`. Over the k shifts every
    group appears exactly once at every position, so averaging the model's group probabilities over them removes
    position effects from the group distribution."""
    return pd.DataFrame([{**r, "shift": s, "choices": list(r["choices"])[s:] + list(r["choices"])[:s]}
                         for r in prompts.to_dict("records") for s in range(len(r["choices"]))])


def answer_format(tokenizer, k: int = MAX_K, chat: bool = False) -> tuple[str, dict[str, list[str]]]:
    """Separator after ``Answer:`` and label surface forms that match how the model's tokenizer writes an answer.

    Both embedded tokenizers split "Answer: 2" into ``Answer``, ``:``, `` ``, ``2``: in the few-shot examples the
    digit follows a separate space token, so the prompt ends with that space and the next token is the bare digit
    (labels "1".."k"). A tokenizer that merges the space into the digit (GPT-2 style " 2") gets no trailing space
    and the labels " 1".." k". With ``chat=True`` the prompt becomes a user message and the answer opens the
    assistant's turn: no suffix, bare digits. ``tokenizer`` may also be a function text -> token strings
    (:meth:`biaslab.scoring.Scorer.token_strings`, for served models). Returns (suffix to append to ``text``, labels for
    ``label_distribution``).
    """
    if chat:
        return "", {str(j): [str(j)] for j in range(1, k + 1)}
    if hasattr(tokenizer, "decode"):
        ids = tokenizer("Answer: 2", add_special_tokens=False)["input_ids"]
        toks = [tokenizer.decode([i]) for i in ids]
    else:   # a function text -> token strings (a served model: the server's own tokenization)
        toks = list(tokenizer("Answer: 2"))
    if toks[-1] == "2" and len(toks) >= 2 and toks[-2].strip() == "":
        return " ", {str(j): [str(j)] for j in range(1, k + 1)}
    return "", {str(j): [f" {j}"] for j in range(1, k + 1)}


# ------------------------------------------------------------------------------- requests and answers
#: notebook 4's protocol: the instruction and two answered examples, raw text, the next-token distribution over
#: the choice numbers
PROTOCOL = Protocol(format="label_dist", instruction="present", chat="off", examples=2)
FORMATS = ("label_dist", "option_ll", "generated", "open_ended")


def sample(n: int | None, seed: int = 0) -> tuple[pd.DataFrame, Benchmark]:
    """A balanced subset of whole positive/negative pairs of the two-example prompts (notebook 4's sampler)."""
    b = load(n_shots=2)
    return balanced_subset(b.prompts, n, seed=seed), b


def paper_chat(scorer) -> bool:
    """Notebook 4 asks every model raw text."""
    return False


def _item(item_text: str, choices: list[str] | None, cue: str) -> str:
    """The item with its numbered choices in the given order (None: no choices, for open answers) and ``cue``."""
    keep = [ln for ln in item_text.split("\n") if not re.match(r"\d+\. ", ln)]
    keep.pop()                                             # the item's own "Answer:"
    return "\n".join(keep + ([f"{j}. {c}" for j, c in enumerate(choices, 1)] if choices is not None else []) + [cue])


def requests(items: pd.DataFrame, protocol: Protocol = PROTOCOL) -> tuple[list[str], list[list[str]]]:
    """Each item's text as ``protocol`` asks it (without the answer separator) and its choices in the order shown."""
    open_ = protocol.format == "open_ended"
    w = wording("agentic_open" if open_ else "agentic", protocol.wording)
    parts = [w["instruction"]] if protocol.instruction == "present" else []
    for r in read_bank()["fewshot"].head(int(protocol.examples)).itertuples():
        ch = r.choices.split("|")
        item = _item(render_item(r.role, r.scenario, r.question, ch), None if open_ else ch, w["cue"])
        parts.append(f"{item} {ch[int(r.answer) - 1] if open_ else r.answer}")
    head = "\n\n".join(parts) + "\n\n" if parts else ""
    choices = [list(c) if open_ else [list(c)[i] for i in options_in_order(len(c), protocol.order)]
               for c in items["choices"]]
    return [head + _item(t, None if open_ else c, w["cue"]) for t, c in zip(items["item_text"], choices)], choices


def respond(scorer, items: pd.DataFrame, protocol: Protocol = PROTOCOL, match=None) -> pd.DataFrame:
    """One row per item: ``entropy`` (distribution formats), ``top_position``, ``top_group``, ``top_p``,
    ``label_mass``, ``answer``, ``answer_kind``, ``choices`` (as shown) and ``p_1``..``p_5``, the probability of each
    shown slot (a generated or open answer: 1 at the slot named, 0 elsewhere, NaN when none is)."""
    from ..stats import entropy as E
    fmt, chat = protocol.format, protocol.use_chat(paper_chat(scorer))
    texts, choices = requests(items, protocol)
    its = items.assign(choices=choices).reset_index(drop=True)
    suffix, labels = answer_format(scorer.token_strings, k=MAX_K, chat=chat)
    if fmt in ("label_dist", "option_ll"):
        if fmt == "label_dist":
            dist = formats.label_dist(scorer, [t + suffix for t in texts], labels, chat)[1]
        else:                      # log-likelihood of each choice's text after the cue, per token
            mean = formats.option_ll(scorer, texts, [[" " + c for c in ch] for ch in choices], chat).read("mean")
            dist = pd.DataFrame(mean, columns=[f"logp_{j + 1}" for j in range(mean.shape[1])])
        per, _ = E.tidy_scores(its, dist, scorer.lm.name)
        if fmt == "option_ll":
            per["label_mass"] = np.nan
        per["answer"], per["answer_kind"] = per["top_group"], "option"
        return per.assign(choices=choices)
    if fmt not in FORMATS:
        raise ValueError(f"the agentic benchmark has no answer format {fmt!r}; choose from {FORMATS}")
    if fmt == "open_ended" and match is None:
        raise ValueError("open answers need a reader: respond(..., match=biaslab.papers.multiverse.matcher.match)")
    if fmt == "generated":
        gens, picked = formats.generated(scorer, [t + suffix for t in texts],
                                         [[str(j) for j in range(1, len(ch) + 1)] for ch in choices], chat)
        pos = [int(c) - 1 if c else -1 for c in picked]
        kinds = ["option" if c else "unparsed" for c in picked]
    else:
        gens = formats.open_ended(scorer, texts, chat, protocol.max_new_tokens)
        found = [match(g, list(ch)) for g, ch in zip(gens, choices)]
        pos = [m.index if m.kind == "option" else -1 for m in found]
        kinds = [m.kind for m in found]
    per = pd.DataFrame({"prompt_id": its["prompt_id"].to_numpy(), "model": scorer.lm.name, "k": its["k"].to_numpy(),
                        "label_mass": np.nan, "entropy": np.nan, "top_position": [p + 1 if p >= 0 else np.nan
                                                                                   for p in pos],
                        "top_group": [ch[p] if p >= 0 else None for p, ch in zip(pos, choices)], "top_p": np.nan,
                        "answer": gens, "answer_kind": kinds, "choices": choices})
    for j in range(MAX_K):
        per[f"p_{j + 1}"] = [np.nan if p < 0 or j >= len(ch) else float(p == j) for p, ch in zip(pos, choices)]
    return per


def option_roles(items: pd.DataFrame) -> pd.DataFrame:
    """What the validity checks read per prompt (``Spec.option_roles``, :mod:`biaslab.stats.validity`): each shown
    option's role is its group and its characters the group's text (a prompt is asked in its one stored order, so
    stored and shown positions are the same); no option is correct (``gold`` -1: competence is not judged, nor is a
    constant group, the departure the group test measures); the model's preference among groups is estimated per
    class type x polarity (the two polarities ask for opposite directions)."""
    out = pd.DataFrame({"prompt_id": items["prompt_id"].to_numpy()})
    shown = [list(c) for c in items["choices"]]
    for j in range(MAX_K):
        out[f"role_{j}"] = [c[j] if j < len(c) else None for c in shown]
        out[f"chars_{j}"] = [float(len(c[j])) if j < len(c) else np.nan for c in shown]
    out["gold"] = -1
    out["competence_item"] = False
    out["stratum"] = (items["class_type"].astype(str) + " " + items["polarity"].astype(str)).to_numpy()
    return out


def validity_answers(per: pd.DataFrame) -> pd.DataFrame:
    """:func:`respond`'s rows as the validity checks read them: ``choice``, the stored (= shown) index of the top
    answer, and ``pos_0``, the shown position chosen in the one order asked (-1 where no slot was named)."""
    top = per["top_position"].fillna(0).astype(int).to_numpy() - 1
    return per.assign(choice=top, pos_0=top.astype(float))


def long_table(per: pd.DataFrame) -> pd.DataFrame:
    """Per (prompt, shown position): ``k``, ``group``, ``logp`` (distribution formats) and ``p`` (its probability,
    or the 0/1 choice of a generated or open answer), from :func:`respond`'s table; a ``shift`` column is kept."""
    keep = [c for c in ("shift",) if c in per]
    rows = [{"prompt_id": r["prompt_id"], **{c: r[c] for c in keep}, "model": r["model"], "k": len(r["choices"]),
             "position": j + 1, "group": g, "logp": r.get(f"logp_{j + 1}", np.nan), "p": r[f"p_{j + 1}"]}
            for r in per.to_dict("records") for j, g in enumerate(r["choices"])]
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------- notebook 1 (multi-factor)
#: a prompt's answer distribution counts as concentrated (departing from uniform) below this normalized entropy;
#: 0.95 is e.g. (0.5, 0.3, 0.2) over three choices (H/log 3 = 0.94). Stated once; notebook 4 reports the mean.
LOW_ENTROPY, LOW_ENTROPY_ALTERNATIVES = 0.95, (0.90, 0.98)     # alternatives: notebook 1's sensitivity "entropy-cut"

#: response-level factor (its values come from the model's answer, not from the prompt): kind "model"
ANSWER_POSITION = Factor("answer_position", "model", (1, 2, 3, 4, 5), 1,
                         "position (1-5) of the choice the model gave the most probability")


FACTOR_PLAN = FactorPlan(
    coverage_factors=["domain", "question_type", "polarity", "class_type"],
    overall_sets={"design (domain, question type, polarity, class type)":
                  ["domain", "question_type", "polarity", "class_type"]},
    heatmaps=[("domain", "question_type"), ("class_type", "polarity")],
    sunburst=("class_type", "polarity"),
    subgroup_factors=["class_type", "question_type", "polarity", "answer_position"],
    ecdf_factors=["class_type", "question_type"],
    regression=["class_type", "question_type", "polarity", "domain", "answer_position"],
    regression_subset=["class_type", "question_type", "polarity", "answer_position"],
    bayes_fixed=["class_type", "question_type", "polarity"],
    bayes_group=["domain", "scenario_id"],
    bayes_group_subset=["domain"],
    strata=["question_type", "class_type", "polarity"],
    highlight=("class_type", "polarity", "answer_position"),
    outcome="low_entropy",
    outcome_description="normalized entropy of the answer distribution < 0.95 (agentic.LOW_ENTROPY)",
    ideal=0.0,
    extra_factors=(ANSWER_POSITION,),
    sample=lambda prompts, n, strata=(), seed=0: balanced_subset(prompts, n, seed=seed),   # notebook 4's prompts
    # the outcome, the position of the most probable choice as a response factor, and the choice the validity checks
    # read (notebook 1 judges the instrument as notebook 4 does)
    responses=lambda r: validity_answers(r).assign(answer_position=r["top_position"].astype(int),
                                                   low_entropy=(r["entropy"] < LOW_ENTROPY).astype(int)),
    outcome_variants={"entropy-cut": lambda r: [(
        f"entropy cut {c:.2f}", f"low entropy = normalized entropy < {c:.2f} (primary {LOW_ENTROPY:.2f})",
        r.assign(low_entropy=(r["entropy"] < c).astype(int))) for c in LOW_ENTROPY_ALTERNATIVES]},
    reads="probabilities", shares_scores_with="04_agentic_entropy",
)

# ------------------------------------------------------------------------------- the headline metrics
GROUP_PREFERENCE = "agentic_group_preference"
VALUE_COLUMNS = ["model", "universe", "metric", "unit", "cluster", "value"]


def _entropy_estimate(per: pd.DataFrame, items: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> dict:
    """Notebook 6: the mean normalized entropy (formats with a distribution only), the cluster-robust interval over
    scenarios (``stats.intervals.mean_intervals``), t test of the scenario means against 1 on G - 1 df."""
    from scipy import stats

    from ..stats import intervals
    d = per.merge(items[["prompt_id", "scenario_id"]], on="prompt_id")
    ok = d[d["entropy"].notna()]
    if not len(ok):
        return universe_estimate(ci_method="undefined: this format gives no distribution",
                                 n_unparsed=(d["answer_kind"] != "option").sum())
    ci = intervals.mean_intervals(ok, "entropy", "scenario_id", seed=seed).iloc[0]
    sm = ok.groupby("scenario_id")["entropy"].mean() - 1.0
    p = float(stats.ttest_1samp(sm, 0.0).pvalue) if len(sm) > 1 and sm.std() > 0 else np.nan
    return universe_estimate(ci["mean"], ci["ci_low"], ci["ci_high"], ci["ci_method"], p,
                             "t test of scenario means against 1, G - 1 df", len(ok), ci["n_clusters"],
                             len(d) - len(ok))


def _entropy_values(r: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Notebook 6: the normalized entropy per prompt, clustered by scenario."""
    d = r.drop(columns=[c for c in ("scenario_id",) if c in r]).merge(items[["prompt_id", "scenario_id"]],
                                                                      on="prompt_id").dropna(subset=["entropy"])
    return pd.DataFrame({"model": d["model"], "universe": d["universe"], "metric": "agentic_mean_entropy",
                         "unit": d["prompt_id"], "cluster": d["scenario_id"], "value": d["entropy"]})


def group_values(long: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The group preference's per-scenario values: per class type and group, the mean share of a group's
    probability (or 0/1 choice) in positive minus negative questions over the scenarios asked in both polarities,
    one metric per class type x group (``agentic_group_preference:<class type>:<group>``). ``long``: slot rows
    (:func:`long_table`) with ``universe``."""
    d = long.merge(items[["prompt_id", "scenario_id", "class_type", "polarity"]], on="prompt_id").dropna(subset=["p"])
    w = d.pivot_table(index=["model", "universe", "class_type", "group", "scenario_id"], columns="polarity",
                      values="p", aggfunc="mean")
    if not {"positive", "negative"} <= set(w.columns):
        return pd.DataFrame(columns=VALUE_COLUMNS)
    w = (w["positive"] - w["negative"]).dropna().rename("value").reset_index()
    return w.assign(metric=GROUP_PREFERENCE + ":" + w["class_type"] + ":" + w["group"], unit=w["scenario_id"],
                    cluster=pd.NA)[VALUE_COLUMNS]


def _group_values(r: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """:func:`group_values` of each model x universe of the responses (``choices`` kept)."""
    parts = [group_values(long_table(g).assign(universe=u), items)
             for (m, u), g in r.groupby(["model", "universe"], sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=VALUE_COLUMNS)


PROBABILITIES_READ, GROUP_READ = "agentic: slot probabilities", "agentic: group named (answer)"
DISTRIBUTION_FORMATS = ("label_dist", "option_ll")
NO_DISTRIBUTION = "this format gives no distribution (the entropy is undefined)"


def _responder_check(d: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """Notebook 6 (notebook 4's rules): the entropy and, in the distribution formats, the group preference read the
    *probabilities*: the probability check of the slot probabilities per number of choices k; in the generated and
    open-ended formats the group preference reads the group named: the answer check per class type (notebook 4's
    top-answer-by-group rule), and the entropy is undefined (no distribution)."""
    from ..stats import responders as R
    keys = ["model", "universe"]
    d = d.drop(columns=[c for c in ("k", "class_type") if c in d]).merge(
        items[["prompt_id", "k", "class_type"]], on="prompt_id", how="left")
    dist = d["answer_format"].isin(DISTRIBUTION_FORMATS)
    # option log-likelihoods are renormalized over the choices: no next-token label mass to judge (the per-prompt
    # column there is exp(logsumexp) of mean per-token log-probabilities, not a probability)
    d.loc[d["answer_format"] == "option_ll", "label_mass"] = np.nan
    probs = [c for c in d.columns if c.startswith("p_") and c[2:].isdigit()]
    rows = []
    for k, part in d[dist].groupby("k"):
        rows.append(R.probability_check(part, probs, by=keys).assign(k=int(k), metric=PROBABILITIES_READ))
    for (ct, k), part in d[~dist].groupby(["class_type", "k"]):
        rows.append(R.responder_check(part, answer="top_group", by=keys, n_options=int(k)).assign(
            class_type=ct, k=int(k), metric=GROUP_READ))
    if (~dist).any():
        rows.append(R.not_judged(d.loc[~dist, keys], NO_DISTRIBUTION).assign(metric=PROBABILITIES_READ))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=keys + ["metric"])


SPEC = Spec(
    name="agentic", title="Agentic", load=load,
    templates={"agentic": lambda: template_texts(load().prompts, "item_text", "question_id")},  # without examples
    protocol=PROTOCOL, formats=FORMATS, respond=respond, paper_chat=paper_chat, sample=sample,
    columns=("prompt_id", "model", "entropy", "top_position", "top_group", "top_p", "label_mass", "answer",
             "answer_kind", "choices"),
    factor_plan=FACTOR_PLAN,
    # notebook 6: the choices respond reads, and the formats a choice enters (elsewhere it is coded at its reference)
    honours=("format", "wording", "instruction", "chat", "examples", "order"),
    applies={"order": FORMATS[:3]},
    metrics=(
        Metric(id="agentic_mean_entropy", benchmark="Agentic", label="Agentic: mean normalized entropy of the "
               "answer distribution", folder="04_agentic_entropy",
               sources=(Source("entropy_by_model", "mean_entropy"),),
               direction="lower = more concentrated on one group", orientation=-1, null=1.0,
               null_meaning="1: probability spread evenly over the groups",
               responses=("responses",), outcome="entropy", cluster="scenario_id", kind="continuous",
               responders={"reads": "probabilities"}, reads="probabilities", answer_mode="label probabilities",
               scale="normalized entropy (0 to 1)", item_values=_entropy_values, estimate=_entropy_estimate,
               factor_outcome=("entropy", "linear"), responder_reads=(PROBABILITIES_READ,)),
        # notebook 6 only: a family of per-group values (one per class type x group), paired by scenario
        Metric(id=GROUP_PREFERENCE, benchmark="Agentic", label="Agentic: group preference (positive minus "
               "negative questions)", null=0.0, cluster="scenario_id", scale="share of probability (−1 to 1)",
               item_values=_group_values, responder_reads=(GROUP_READ, PROBABILITIES_READ))),
    # notebook 1 scores notebook 4's prompts (tests/test_factorial.py checks the two agree)
    sizes={"smoke": {"01_multifactor": {"max_prompts": 12},
                     "06_multiverse": {"items": 4, "formats": ["label_dist", "option_ll"]}},
           "default": {"01_multifactor": {"max_prompts": 100}, "06_multiverse": {"items": 2}},
           "paper": {"01_multifactor": {"max_prompts": None}, "06_multiverse": {"items": None}}},
    responder_check=_responder_check, option_roles=option_roles,
)
