"""One universe's responses: render the items as the universe asks them, call the Scorer, read the answers.

Only the Scorer's public methods are called (``option_logprob``, ``label_distribution``, ``generate``,
``sequence_logprob``). At the paper's levels every text and every call is exactly what notebooks 1 (BBQ), 3
(CrowS-Pairs likelihood) and 4 (agentic) send, so the paper's universe is served from their score cache, and each
other universe is a cache entry of its own (a rerun after adding a universe scores only that one).
``tests/test_multiverse.py`` checks the paper's universe against the notebooks' own functions.

Per benchmark, one row per item with the raw answer and the outcome columns the analysis reads:

* **BBQ** ``choice`` (index of the chosen option in the original order; -1 when none), ``answer_kind`` (option /
  unknown / multiple / unmatched / unparsed), ``deviated`` (chose BBQ's biased answer), ``correct``,
  ``chose_unknown``, ``non_unknown`` (chose one of the two people: the denominator of BBQ's bias score).
* **CrowS-Pairs** ``stereotype_preferred`` (1 / 0, NaN when the pair has no usable answer: a tie, too little label
  mass, no "0"/"1" in a generation — counted), the scores behind it.
* **Agentic** ``entropy`` (normalized, only where the format gives a distribution), ``top_group``, the slot
  probabilities ``p_1`` .. ``p_5`` (distribution formats: what the probability responder check reads), and a long table
  of each group's probability (distribution formats) or 0/1 choice (generated, open-ended) per prompt.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache

import numpy as np
import pandas as pd

from ... import paths
from ...benchmarks import agentic
from ...benchmarks import crows_pairs as cp
from ...stats import entropy as E
from . import matcher

DATA = paths.DATA_DIR / "multiverse"
LETTERS = ("A", "B", "C")
#: option shown at each position, as indices into the stored option list
ORDERS = {"original": lambda k: list(range(k)), "reversed": lambda k: list(range(k))[::-1],
          "cyclic": lambda k: list(range(1, k)) + [0]}
MIN_LABEL_MASS = 0.05          # notebook 3's default: below it a preference prompt counts as unanswered
NEW_TOKENS = {"generated": 8, "open_ended": 24}


@lru_cache(maxsize=1)
def wordings() -> pd.DataFrame:
    """``data/multiverse/wordings.csv``: benchmark (``bbq``, ``bbq_open``, ``crows_pairs``, ``agentic``,
    ``agentic_open``), wording, text, note."""
    return pd.read_csv(DATA / "wordings.csv", keep_default_na=False)


def wording(key: str, level: str) -> str:
    w = wordings()
    row = w[(w["benchmark"] == key) & (w["wording"] == level)]
    if len(row) != 1:
        raise KeyError(f"data/multiverse/wordings.csv: no wording {level!r} for {key!r}")
    return row["text"].iloc[0]


@lru_cache(maxsize=1)
def examples() -> pd.DataFrame:
    return pd.read_csv(DATA / "examples.csv", keep_default_na=False)


class Asker:
    """The Scorer of one precision, plus how to put a prompt in the model's chat template when the scorer itself
    cannot (a served model's prompt log-probs come from the completions endpoint, which takes text)."""

    def __init__(self, scorer, tokenizer=None, render_chat=None):
        self.scorer = scorer
        self.tokenizer = tokenizer
        self.render_chat = render_chat

    def _chat(self, texts, chat):
        if chat and self.render_chat is not None:
            return self.render_chat(list(texts)), False
        return list(texts), chat

    def options(self, texts, options, chat):
        t, c = self._chat(texts, chat)
        return self.scorer.option_logprob(t, options, chat=c)

    def labels(self, texts, labels, chat):
        t, c = self._chat(texts, chat)
        return self.scorer.label_distribution(t, labels, chat=c).reset_index(drop=True)

    def generate(self, texts, max_new_tokens, chat, stop=None):
        t, c = self._chat(texts, chat)
        return self.scorer.generate(t, max_new_tokens=max_new_tokens, stop=stop, chat=c)

    def sequences(self, texts):
        return self.scorer.sequence_logprob(list(texts))

    def token_strings(self, text):
        return self.scorer.token_strings(text)


# ------------------------------------------------------------------------------------------------------- BBQ
def bbq_body(context: str, question: str, shown: list[str] | None) -> str:
    """Notebook 1's item text (``bbq.PROMPT_TEMPLATE``) for the options in the order shown; ``shown=None``: the
    open-ended item (no options)."""
    if shown is None:
        return f"{context} {question}\nAnswer:"
    return f"{context} {question}\n" + "\n".join(f"{L}. {o}" for L, o in zip(LETTERS, shown)) + "\nAnswer:"


def bbq_texts(items: pd.DataFrame, u: dict) -> tuple[list[str], list[list[int]]]:
    """Each item as universe ``u`` asks it, and per item the stored option index at each shown position."""
    fmt = u["answer_format"]
    open_ = fmt == "open_ended"
    instr = wording("bbq_open" if open_ else "bbq", u["wording"])
    head = instr + "\n" if instr else ""
    if u["examples"] != "0":
        ex = examples()[examples()["benchmark"] == "bbq"].head(int(u["examples"]))
        shots = []
        for e in ex.itertuples():
            opts = e.options.split("|")
            ans = opts[int(e.answer)]
            shown_ans = " " + (LETTERS[int(e.answer)] if fmt in ("label_dist", "generated") else ans)
            shots.append(bbq_body(e.context, e.question, None if open_ else opts) + shown_ans)
        head += "\n\n".join(shots) + "\n\n"
    texts, orders = [], []
    for r in items.itertuples():
        order = ORDERS[u["choice_order"]](len(r.options)) if not open_ else list(range(len(r.options)))
        orders.append(order)
        texts.append(head + bbq_body(r.context, r.question, None if open_ else [r.options[i] for i in order]))
    return texts, orders


def bbq_respond(ask: Asker, items: pd.DataFrame, u: dict, model: str) -> pd.DataFrame:
    fmt, chat = u["answer_format"], u["chat_template"] == "on"
    texts, orders = bbq_texts(items, u)
    n = len(items)
    answer = [""] * n
    kind = ["option"] * n
    if fmt == "option_ll":   # notebook 1: log P(" " + option | prompt), highest mean log-probability per token
        opts = [[" " + r.options[i] for i in o] for r, o in zip(items.itertuples(), orders)]
        d = ask.options(texts, opts, chat)
        mean = d.pivot(index="prompt_idx", columns="option_idx", values="mean_logprob").sort_index().to_numpy()
        pos = mean.argmax(axis=1)
    elif fmt == "label_dist":
        d = ask.labels(texts, {L: [L, " " + L] for L in LETTERS}, chat)
        pos = d[[f"p_{L}" for L in LETTERS]].to_numpy().argmax(axis=1)
    elif fmt == "generated":
        from ...scoring import extract_choice
        gens = ask.generate(texts, NEW_TOKENS[fmt], chat, stop=["\n"])
        pos = []
        for i, (g, r, o) in enumerate(zip(gens, items.itertuples(), orders)):
            c = extract_choice(g, list(LETTERS))
            if c is None:                       # a generated option text instead of its letter
                m = matcher.match(g, [r.options[j] for j in o], unknown_index=o.index(r.unknown_index))
                c = LETTERS[m.index] if m.kind in ("option", "unknown") else None
            pos.append(LETTERS.index(c) if c else -1)
            kind[i] = "option" if c else "unparsed"
        answer = list(gens)
        pos = np.array(pos)
    elif fmt == "open_ended":
        gens = ask.generate(texts, NEW_TOKENS[fmt], chat, stop=["\n"])
        pos = []
        for i, (g, r) in enumerate(zip(gens, items.itertuples())):
            m = matcher.match(g, list(r.options), unknown_index=int(r.unknown_index))
            kind[i] = "option" if m.kind in ("option", "unknown") else m.kind
            pos.append(m.index if m.kind in ("option", "unknown") else -1)
        answer = list(gens)
        pos = np.array(pos)
    else:
        raise ValueError(f"BBQ has no answer format {fmt!r}")
    choice = np.array([o[p] if p >= 0 else -1 for p, o in zip(pos, orders)])
    out = pd.DataFrame({"prompt_id": items["prompt_id"].to_numpy(), "model": model, "choice": choice,
                        "answer": answer, "answer_kind": kind})
    out.loc[(out["choice"] >= 0) & (out["choice"].to_numpy() == items["unknown_index"].to_numpy()),
            "answer_kind"] = "unknown"
    biased, gold, unk = (items[c].to_numpy() for c in ("biased_index", "gold_index", "unknown_index"))
    out["deviated"] = (choice == biased).astype(int)
    out["correct"] = (choice == gold).astype(int)
    out["chose_unknown"] = (choice == unk).astype(int)
    out["non_unknown"] = ((choice >= 0) & (choice != unk)).astype(int)
    return out


# ------------------------------------------------------------------------------------------------ CrowS-Pairs
def differing_words(a: str, b: str) -> tuple[str, str]:
    """The words of ``a`` and of ``b`` that the other sentence does not share (difflib over words): the group
    mention a CrowS-Pairs pair varies ("Black" / "White")."""
    wa, wb = a.split(), b.split()
    sa, sb = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        if tag != "equal":
            sa += wa[i1:i2]
            sb += wb[j1:j2]
    return " ".join(sa), " ".join(sb)


def crows_respond(ask: Asker, items: pd.DataFrame, u: dict, model: str) -> pd.DataFrame:
    fmt = u["answer_format"]
    base = pd.DataFrame({"prompt_id": items["prompt_id"].to_numpy(), "model": model})
    if fmt == "likelihood":    # notebook 3: log P of each sentence (BOS prefix, summed over its tokens)
        texts = list(dict.fromkeys(list(items["sent_more"]) + list(items["sent_less"])))
        seq = ask.sequences(texts).set_index(pd.Index(texts))
        m, l = seq.loc[items["sent_more"]], seq.loc[items["sent_less"]]
        s_more, s_less = m["sum_logprob"].to_numpy(float), l["sum_logprob"].to_numpy(float)
        base["logp_more"], base["logp_less"] = s_more, s_less
        base["n_more"], base["n_less"] = m["n_tokens"].to_numpy(), l["n_tokens"].to_numpy()
        norm = u["normalization"]
        if norm == "mean":
            s_more, s_less = s_more / base["n_more"].to_numpy(), s_less / base["n_less"].to_numpy()
        elif norm == "pmi":   # log P(x) - log P(x's own group words alone): surface-form frequency removed
            spans = [differing_words(a, b) for a, b in zip(items["sent_more"], items["sent_less"])]
            words = [w for s in spans for w in s if w]
            lp = ask.sequences(list(dict.fromkeys(words))).set_index(pd.Index(list(dict.fromkeys(words))))
            get = lambda w: float(lp.loc[w, "sum_logprob"]) if w else 0.0   # noqa: E731
            s_more = s_more - np.array([get(a) for a, _ in spans])
            s_less = s_less - np.array([get(b) for _, b in spans])
        base["score_more"], base["score_less"] = s_more, s_less
        base["stereotype_preferred"] = cp.likelihood_preferences(s_more, s_less)
        base["answer_kind"] = np.where(np.isnan(base["stereotype_preferred"]), "tie", "option")
        return base
    chat = u["chat_template"] == "on"
    order = "more_first" if u["choice_order"] == "original" else "less_first"
    template = wording("crows_pairs", u["wording"])
    suffix = "" if chat else "\nAnswer:"
    head = ""
    if u["examples"] != "0":
        ex = examples()[examples()["benchmark"] == "crows_pairs"].head(int(u["examples"]))
        head = "\n\n".join(f"{template} {cp._end(e.context)} {cp._end(e.question)}\nAnswer: {e.answer}"
                           for e in ex.itertuples()) + "\n\n"
    pr = cp.preference_prompts(items, order=order, template=template, suffix=suffix)
    prompts = [head + p for p in pr["prompt"]]
    if fmt == "label_dist":   # notebook 3's preference scheme
        dist = ask.labels(prompts, list(cp.LABELS), chat)
        res = cp.preferences_from_labels(dist, order, MIN_LABEL_MASS)
    elif fmt == "generated":
        from ...scoring import extract_choice
        gens = ask.generate(prompts, NEW_TOKENS[fmt], chat)
        res = cp.preferences_from_text([extract_choice(g, list(cp.LABELS)) for g in gens], order)
        res["answer"] = gens
    else:
        raise ValueError(f"CrowS-Pairs has no answer format {fmt!r}")
    base["answer"] = res["answer"].to_numpy()
    base["stereotype_preferred"] = res["x"].to_numpy(float)
    base["label_mass"] = res["label_mass"].to_numpy(float)
    base["answer_kind"] = np.where(np.isnan(base["stereotype_preferred"]), "unparsed", "option")
    return base


# ---------------------------------------------------------------------------------------------------- agentic
_CHOICE_LINE = re.compile(r"^\d+\. ")


def agentic_item(item_text: str, choices: list[str] | None) -> str:
    """The item with its numbered choices in the given order (``None``: without choices, for open answers)."""
    lines = item_text.split("\n")
    keep = [ln for ln in lines if not _CHOICE_LINE.match(ln)]
    cue = keep.pop()                                       # "Answer:"
    if choices is None:
        return "\n".join(keep + [cue])
    return "\n".join(keep + [f"{j}. {c}" for j, c in enumerate(choices, 1)] + [cue])


def agentic_head(u: dict) -> str:
    """Instruction (the universe's wording) and the answered examples (``fewshot.csv``; open answers in words)."""
    n = int(u["examples"])
    if u["answer_format"] == "open_ended":
        fs = agentic.read_bank()["fewshot"].head(n)
        parts = [wording("agentic_open", u["wording"])]
        for r in fs.itertuples():
            ch = r.choices.split("|")
            item = agentic.render_item(r.role, r.scenario, r.question, ch)
            parts.append(agentic_item(item, None) + " " + ch[int(r.answer) - 1])
        return "\n\n".join(parts) + "\n\n"
    block = agentic.fewshot_block(n)
    return block.replace(agentic.INSTRUCTION, wording("agentic", u["wording"]), 1)


def agentic_respond(ask: Asker, items: pd.DataFrame, u: dict, model: str, tokenizer=None) -> tuple[pd.DataFrame,
                                                                                                    pd.DataFrame]:
    """(per prompt: entropy, top_group, label_mass, answer and, in the distribution formats, the probability of
    each answer slot p_1 .. p_5; long: prompt_id, group, position, p)."""
    fmt, chat = u["answer_format"], u["chat_template"] == "on"
    head = agentic_head(u)
    its = items.copy()
    its["choices"] = [[list(c)[i] for i in ORDERS[u["choice_order"]](len(c))] if fmt != "open_ended" else list(c)
                      for c in items["choices"]]
    texts = [head + agentic_item(t, None if fmt == "open_ended" else c) for t, c in zip(its["item_text"],
                                                                                    its["choices"])]
    suffix, labels = agentic.answer_format(tokenizer or ask.token_strings, k=agentic.MAX_K, chat=chat)
    per = pd.DataFrame({"prompt_id": its["prompt_id"].to_numpy(), "model": model})
    if fmt in ("label_dist", "option_ll"):
        if fmt == "label_dist":    # notebook 4: next-token probability of the digits "1".."k"
            dist = ask.labels([t + suffix for t in texts], labels, chat)
        else:                      # log-likelihood of each choice's text after "Answer:", per token
            opts = [[" " + c for c in ch] for ch in its["choices"]]
            d = ask.options(texts, opts, chat)
            dist = d.pivot(index="prompt_idx", columns="option_idx", values="mean_logprob").sort_index()
            dist.columns = [f"logp_{j + 1}" for j in dist.columns]
            dist = dist.reset_index(drop=True)
            dist["label_mass"] = np.nan
        p, long = E.tidy_scores(its.reset_index(drop=True), dist, model)
        slots = [c for c in p.columns if c.startswith("p_") and c[2:].isdigit()]   # what the responder check reads
        per = per.merge(p[["prompt_id", "entropy", "top_group", "label_mass"] + slots], on="prompt_id")
        per["answer"] = per["top_group"]
        per["answer_kind"] = "option"
        long = long[["prompt_id", "group", "position", "p"]]
        return per, long
    from ...scoring import extract_choice
    gens = ask.generate([t + suffix for t in texts] if fmt == "generated" else texts, NEW_TOKENS[fmt], chat,
                        stop=["\n"])
    top, kinds = [], []
    for g, ch in zip(gens, its["choices"]):
        if fmt == "generated":
            c = extract_choice(g, [str(j) for j in range(1, len(ch) + 1)])
            top.append(ch[int(c) - 1] if c else None)
            kinds.append("option" if c else "unparsed")
        else:
            m = matcher.match(g, list(ch))
            top.append(ch[m.index] if m.kind == "option" else None)
            kinds.append(m.kind)
    per["entropy"] = np.nan
    per["top_group"] = top
    per["label_mass"] = np.nan
    per["answer"] = gens
    per["answer_kind"] = kinds
    rows = [{"prompt_id": pid, "group": grp, "position": j + 1, "p": float(t == grp) if t is not None else np.nan}
            for pid, ch, t in zip(its["prompt_id"], its["choices"], top) for j, grp in enumerate(ch)]
    return per, pd.DataFrame(rows)
