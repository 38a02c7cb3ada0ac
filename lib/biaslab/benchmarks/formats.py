"""The answer formats of :class:`~biaslab.benchmarks.base.Protocol`, each requested from the scorer and read once
(HELM's adapter methods: multiple-choice joint / separate, generation): every benchmark's ``respond`` builds its
texts and options and hands them here; the scorer is passed in, never imported.

* ``option_ll``: ``log P(option | prompt)`` of each shown option, summed and per token (lm-evaluation-harness's
  ``acc`` and ``acc_norm``); the answer is the most likely option.
* ``label_dist``: the next-token probability of each label's surface forms, renormalised over the labels, with the
  mass that fell on any of them (``Scorer.label_distribution``).
* ``generated``: a short generation read as one of the labels (:func:`biaslab.answers.extract_choice`).
* ``open_ended``: a free answer read up to its first sentence end; the benchmark's matcher reads it (CALM's
  free-text QA: the first line, read by CALM's own rules).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..answers import extract_choice, first_sentence

#: new tokens of a generated label (a letter or a number and what follows it)
LABEL_TOKENS = 8


def option_ll(scorer, texts: Sequence[str], options, chat: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(sum, mean)`` log-probabilities, one row per text, one column per option as given (NaN where an item has
    fewer options than the widest)."""
    d = scorer.option_logprob(list(texts), options, chat=chat)
    return tuple(d.pivot(index="prompt_idx", columns="option_idx", values=v).sort_index().to_numpy(dtype=float)
                 for v in ("sum_logprob", "mean_logprob"))


def label_dist(scorer, texts: Sequence[str], labels: Sequence[str] | Mapping[str, Sequence[str]],
               chat: bool) -> tuple[np.ndarray, pd.DataFrame]:
    """``(probs, frame)``: each label's probability renormalised over the labels (one column per label, in order)
    and the scorer's table (``label_mass``; a server's ``labels_outside_topk``), one row per text."""
    d = scorer.label_distribution(list(texts), labels, chat=chat).reset_index(drop=True)
    return d[[f"p_{lab}" for lab in labels]].to_numpy(dtype=float), d


def generated(scorer, texts: Sequence[str], labels, chat: bool, max_new_tokens: int = LABEL_TOKENS,
              first: bool = True, **sampling) -> tuple[list[str], list[str | None]]:
    """``(answers, labels read)``: each text's generation (cut at its first sentence when ``first``) and the label
    it commits to (None: none or several). ``labels``: one list for every text, or one list per text;
    ``sampling``: ``do_sample``, ``seed``, ``temperature`` of ``Scorer.generate``."""
    gens = scorer.generate(list(texts), max_new_tokens=max_new_tokens, chat=chat, **sampling)
    gens = [first_sentence(g) for g in gens] if first else list(gens)
    per = labels if len(labels) and not isinstance(labels[0], str) else [labels] * len(gens)
    return gens, [extract_choice(g, list(lab)) for g, lab in zip(gens, per)]


def open_ended(scorer, texts: Sequence[str], chat: bool, max_new_tokens: int, stop=None,
               read: Callable[[str], str] = first_sentence) -> list[str]:
    """Each text's free answer (greedy, ended at a ``stop`` string), as ``read`` keeps it (up to its first sentence
    end; CALM: the stripped line): the benchmark's matcher or rules read it."""
    return [read(g) for g in scorer.generate(list(texts), max_new_tokens=max_new_tokens, stop=stop, chat=chat)]
