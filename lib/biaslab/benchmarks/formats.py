"""The answer formats of :class:`~biaslab.benchmarks.base.Protocol`, each asked of the scorer and read once (HELM's
adapter methods): a benchmark's ``respond`` builds its texts and options and hands them here.

``option_ll`` / ``cloze``: ``log P(option | prompt)`` per option (:func:`option_ll`), the options shown in the prompt
or not (OLMES's multiple-choice and cloze formulations differ only in the texts), read under one normalization
(:class:`OptionScores`: summed, per token, per character, or PMI against a content-free prompt); ``label_dist``: the
next-token probability of each label's surface forms, renormalised over the labels (``Scorer.label_distribution``);
``generated``: a short generation read as a label (:func:`extract_choice`); ``open_ended``: a free answer as the
benchmark's matcher or rules read it (:func:`first_sentence`; CALM: its rules). Options asked in several orders
(``Protocol.order``: ``both``, ``cycles``) are read per stored option, averaged over the orders (:func:`by_stored`),
the answer being the most probable stored option (:func:`choose`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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

    for start in [cue.end() for cue in _CUE.finditer(text)][::-1] + [0]:     # after the last cue first, then at 0
        s = text[start:].lstrip(" \t\n\"'*([{")
        if (c := next((c for c, p in pats if p.match(s)), None)) is not None:
            return c
    found, masked = [], text
    for c, p in pats:           # longest first; blank out what a longer choice matched
        if p.search(masked):
            found.append(c)
            masked = p.sub(lambda m: " " * len(m.group(0)), masked)
    return found[0] if len(found) == 1 else None


NORMALIZATIONS = ("sum", "mean", "char", "pmi")


@dataclass(frozen=True)
class OptionScores:
    """Per text x option as given (NaN past an item's last option): ``total``, the option's log-probability summed
    over its tokens, ``tokens``, ``chars`` (its characters without the leading delimiter, as lm-evaluation-harness
    counts a choice) and ``free``, its summed log-probability after the content-free prompt (asked for PMI only)."""
    total: np.ndarray
    tokens: np.ndarray
    chars: np.ndarray
    free: np.ndarray | None = None

    def read(self, normalization: str) -> np.ndarray:
        """The options' scores under ``Protocol.normalization``: ``sum`` (lm-evaluation-harness's ``acc``), ``mean``
        (per token), ``char`` (per character: ``acc_norm``, OLMES's default; Gu et al. 2025) or ``pmi`` (the total
        minus the total after the content-free prompt: domain-conditional PMI, Holtzman et al. 2021, eq. 2)."""
        if normalization == "sum":
            return self.total
        if normalization == "mean":
            return self.total / self.tokens
        if normalization == "char":
            return self.total / self.chars
        if normalization == "pmi":
            if self.free is None:
                raise ValueError("PMI reads the options after a content-free prompt: ask option_ll(..., "
                                 "content_free=...)")
            return self.total - self.free
        raise ValueError(f"normalization {normalization!r}: choose one of {NORMALIZATIONS} (Protocol.normalization)")


def _wide(d: pd.DataFrame, col: str) -> np.ndarray:
    return d.pivot(index="prompt_idx", columns="option_idx", values=col).sort_index().to_numpy(dtype=float)


def option_ll(scorer, texts: Sequence[str], options, chat: bool,
              content_free: str | Sequence[str] | None = None) -> OptionScores:
    """``log P(option | text)`` of each text's options (one list of lists; shown in the text or not), with their
    token and character counts; ``content_free`` (one prompt, or one per text) also asks each option after it (PMI;
    OLMES and Holtzman et al. use the answer cue alone, e.g. "Answer:")."""
    d = scorer.option_logprob(list(texts), options, chat=chat)
    total = _wide(d, "sum_logprob")
    tokens = _wide(d, "n_tokens") if "n_tokens" in d else total / _wide(d, "mean_logprob")
    chars = np.full(total.shape, np.nan)
    for i, opts in enumerate(options):
        chars[i, :len(opts)] = [max(len(str(o).lstrip()), 1) for o in opts]
    free = None
    if content_free is not None:
        cf = [content_free] * len(texts) if isinstance(content_free, str) else list(content_free)
        free = _wide(scorer.option_logprob(cf, options, chat=chat), "sum_logprob")
    return OptionScores(total, tokens, chars, free)


def softmax(scores: np.ndarray) -> np.ndarray:
    """Each row's scores as probabilities over its options (NaN options left out: an item with fewer)."""
    s = np.asarray(scores, dtype=float)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - np.nanmax(s, axis=1, keepdims=True))
    e = np.where(np.isnan(s), 0.0, e)
    return e / e.sum(axis=1, keepdims=True)


def by_stored(values: np.ndarray, orders: Sequence[Sequence[int]], per_item: int) -> np.ndarray:
    """Per item, each stored option's value averaged over the ``per_item`` orders it was asked in: ``values`` one
    row per request (item-major), a column per shown position; ``orders`` the stored option at each shown position,
    per request (Zheng et al. 2024's permutation debiasing; its cyclic form under ``Protocol.order = "cycles"``)."""
    v = np.asarray(values, dtype=float)
    k = v.shape[1] if v.ndim == 2 else 0
    out = np.full((len(orders), k), np.nan)
    for r, order in enumerate(orders):
        out[r, list(order)] = v[r, :len(order)]
    return out.reshape(-1, per_item, k).mean(axis=1)


def shown_choice(values: np.ndarray) -> np.ndarray:
    """Per request, the shown position of its highest value (-1 where none is defined)."""
    v = np.asarray(values, dtype=float)
    ok = ~np.isnan(v).all(axis=1)
    return np.where(ok, np.nanargmax(np.where(ok[:, None], v, 0.0), axis=1), -1)


def choose(values: np.ndarray) -> np.ndarray:
    """Per row, the column of the highest value; -1 where it is shared (an answer no order decides: a model that
    always names one position has every option's probability equal over the cyclic orders) or none is defined."""
    v = np.asarray(values, dtype=float)
    best = np.nanmax(np.where(np.isnan(v), -np.inf, v), axis=1)
    top = (v == best[:, None]).sum(axis=1)
    return np.where((top == 1) & np.isfinite(best), np.argmax(np.where(np.isnan(v), -np.inf, v), axis=1), -1)


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
