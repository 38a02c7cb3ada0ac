"""The answer formats of :class:`~biaslab.benchmarks.base.Protocol`, each asked of the scorer and read once (HELM's
adapter methods): a benchmark's ``respond`` builds its texts and options and hands them here.

``option_ll``: ``log P(option | prompt)`` per shown option, summed and per token (lm-evaluation-harness's ``acc``,
``acc_norm``); ``label_dist``: the next-token probability of each label's surface forms, renormalised over the labels
(``Scorer.label_distribution``); ``generated``: a short generation read as a label (:func:`extract_choice`);
``open_ended``: a free answer as the benchmark's matcher or rules read it (:func:`first_sentence`; CALM: its rules).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

LABEL_TOKENS = 8        # new tokens of a generated label (a letter or a number and what follows it)
_CUE = re.compile(r"(?:answer|choice|option)\s*(?:is|would be|:|=)?\s*[:\-]?\s*", re.IGNORECASE)


def first_sentence(text: str) -> str:
    """An open answer as read: leading blank lines skipped, cut at the next line break and after the first
    sentence end."""
    t = (text or "").lstrip().split("\n", 1)[0]
    m = re.search(r"[.!?](?=\s|$)", t)
    return (t[:m.end()] if m else t).strip()


def _pattern(choice: str) -> re.Pattern:
    flags = 0 if len(choice.strip()) == 1 else re.IGNORECASE   # single letters: "A" is not the article "a"
    return re.compile(r"(?<![\w])" + re.escape(choice.strip()) + r"(?![\w])", flags)


def extract_choice(text: str | None, choices: Sequence[str]) -> str | None:
    """The choice a generated answer commits to, or None when it commits to none or is ambiguous.

    In order: (1) the choice right after the last answer cue ("answer is", "Answer:", "option", ...); (2) the choice
    the text starts with (after spaces, quotes, brackets and "*"); (3) the only choice mentioned anywhere, as a whole
    word. Matching ignores case except for one-character choices (so "A" is not the article "a"); longer choices
    win over choices they contain ("not known" over "not").
    """
    if not text:
        return None
    opts = sorted(dict.fromkeys(choices), key=lambda c: -len(c.strip()))
    pats = [(c, _pattern(c)) for c in opts]

    def match_at_start(s: str) -> str | None:
        s = s.lstrip(" \t\n\"'*([{")
        for c, p in pats:
            m = p.match(s)
            if m:
                return c
        return None

    cues = list(_CUE.finditer(text))
    for cue in reversed(cues):
        c = match_at_start(text[cue.end():])
        if c is not None:
            return c
    c = match_at_start(text)
    if c is not None:
        return c
    found, masked = [], text
    for c, p in pats:           # longest first; blank out what a longer choice matched
        if p.search(masked):
            found.append(c)
            masked = p.sub(lambda m: " " * len(m.group(0)), masked)
    return found[0] if len(found) == 1 else None


def option_ll(scorer, texts: Sequence[str], options, chat: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(sum, mean)`` log-probabilities: a row per text, a column per option as given (NaN past an item's last)."""
    d = scorer.option_logprob(list(texts), options, chat=chat)
    return tuple(d.pivot(index="prompt_idx", columns="option_idx", values=v).sort_index().to_numpy(dtype=float)
                 for v in ("sum_logprob", "mean_logprob"))


def label_dist(scorer, texts: Sequence[str], labels: Sequence[str] | Mapping[str, Sequence[str]],
               chat: bool) -> tuple[np.ndarray, pd.DataFrame]:
    """``(probs, frame)``: per text each label's renormalised probability (in order) and the scorer's table
    (``label_mass``; a server's ``labels_outside_topk``)."""
    d = scorer.label_distribution(list(texts), labels, chat=chat).reset_index(drop=True)
    return d[[f"p_{lab}" for lab in labels]].to_numpy(dtype=float), d


def generated(scorer, texts: Sequence[str], labels, chat: bool, max_new_tokens: int = LABEL_TOKENS,
              first: bool = True, **sampling) -> tuple[list[str], list[str | None]]:
    """``(answers, labels read)``: each generation (to its first sentence end when ``first``) and the label it
    commits to (None: none or several); ``labels`` one list, or one per text; ``sampling``: ``do_sample``, ``seed``,
    ``temperature``."""
    gens = scorer.generate(list(texts), max_new_tokens=max_new_tokens, chat=chat, **sampling)
    gens = [first_sentence(g) for g in gens] if first else list(gens)
    per = labels if len(labels) and not isinstance(labels[0], str) else [labels] * len(gens)
    return gens, [extract_choice(g, list(lab)) for g, lab in zip(gens, per)]


def open_ended(scorer, texts: Sequence[str], chat: bool, max_new_tokens: int, stop=None,
               read: Callable[[str], str] = first_sentence) -> list[str]:
    """Each greedy answer, ended at a ``stop`` string, as ``read`` keeps it (its first sentence; CALM: the line)."""
    return [read(g) for g in scorer.generate(list(texts), max_new_tokens=max_new_tokens, stop=stop, chat=chat)]
