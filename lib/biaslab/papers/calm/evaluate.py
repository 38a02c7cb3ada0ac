"""Score CALM prompts with the scoring engine and judge each answer (issue item 3).

* Closed-answer formats (NLI, sentiment, toxicity, multiple-choice QA) are answered by **scoring the label
  options**: the next-token distribution over each label's surface forms (``Scorer.label_distribution``; default)
  or the full log-probability of each label (``Scorer.option_logprob``, ``label_scoring="sequence"``); the
  answer is the most probable label.
* Free-text QA is answered by **greedy generation** (``max_new_tokens=10`` as in CALM's scripts, stopped at a
  newline) and judged with CALM's normalisation and matching (:mod:`biaslab.papers.calm.answers`). CALM's own scripts
  used beam search with 3 beams; the engine offers greedy decoding, which HELM uses.
* ``label_scoring="generate"`` generates for every format instead (CALM's released pipeline) and applies the text
  rules everywhere.

Each prompt gets two verdicts: ``correct_released`` (CALM's released matching rules applied to the output text —
for scored prompts the chosen label's surface form) and ``correct`` (the corrected rules of
:mod:`biaslab.papers.calm.answers`; for scored prompts simply chosen label == gold). The module knows nothing of torch: it
calls the ``Scorer`` it is given.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import answers, prompting

LABEL_SCORING = ("next_token", "sequence", "generate")


def surface_forms(label: str, space: str = " ") -> list[str]:
    """Surface forms of a label as the next words of the prompt: in its own case, capitalised and lower-cased; after
    a prompt whose trailing space was moved to the answer (``space=" "``, e.g. ``"...Answer:"``) with and without
    the leading space; otherwise prefixed by the whitespace moved off the prompt (``" \n"`` in the toxicity
    format, whose prompt ends in a space and a newline)."""
    forms = []
    for v in dict.fromkeys([label, label.capitalize(), label.lower()]):
        forms += [" " + v, v] if space == " " else [space + v]
    return forms


def evaluate(scorer, prompts: pd.DataFrame, k: int = 5, label_scoring: str = "next_token",
             max_new_tokens: int = 10, chat: bool = False) -> pd.DataFrame:
    """One row per prompt of ``prompts`` (same order): ``prompt_id``, ``output`` (generated text or chosen label),
    ``pred`` (the gold code the output was read as, where the format has a closed set), ``p_answer`` (probability
    of the chosen label, renormalised over the labels; NaN for generation), ``label_mass`` (probability mass on all
    label surface forms, next-token scoring only), ``correct`` and ``correct_released`` (0/1).
    """
    if label_scoring not in LABEL_SCORING:
        raise ValueError(f"label_scoring must be one of {LABEL_SCORING}, got {label_scoring!r}")
    texts = prompting.build_prompts(prompts, k)
    out = pd.DataFrame({"prompt_id": prompts["prompt_id"].to_numpy(), "output": None, "pred": None,
                        "p_answer": np.nan, "label_mass": np.nan}, index=prompts.index)
    fmt = prompts["answer_format"]
    gen_mask = (fmt == "span") if label_scoring != "generate" else pd.Series(True, index=prompts.index)

    if gen_mask.any():
        idx = prompts.index[gen_mask]
        stripped = [t.rstrip(" ") for t in texts[idx]]          # a trailing newline stays: it ends the prompt
        gens = scorer.generate(stripped, max_new_tokens=max_new_tokens, stop=["\n"], do_sample=False, chat=chat)
        out.loc[idx, "output"] = [g.strip() for g in gens]

    scored = prompts.index[~gen_mask]
    # one engine call per (format, label set): prompts sharing a label set are scored together
    keys = [(f, tuple(o) if isinstance(o, (list, tuple)) else None)
            for f, o in zip(fmt[scored], prompts.loc[scored, "options"])]
    for key in dict.fromkeys(keys):
        f, opts = key
        idx = scored[[kk == key for kk in keys]]
        labels = prompting.label_options(f, list(opts) if opts else None)
        names = list(labels)
        pairs = [prompting.split_for_scoring(t) for t in texts[idx]]
        stripped = [p for p, _ in pairs]
        if label_scoring == "next_token":
            probs = np.empty((len(idx), len(names)))
            mass = np.empty(len(idx))
            for space in dict.fromkeys(sp for _, sp in pairs):       # one call per surface-form set
                rows = np.array([sp == space for _, sp in pairs])
                dist = scorer.label_distribution([p for p, r in zip(stripped, rows) if r],
                                                 {n: surface_forms(n, space) for n in names}, chat=chat)
                probs[rows] = dist[[f"p_{n}" for n in names]].to_numpy(dtype=float)
                mass[rows] = dist["label_mass"].to_numpy(dtype=float)
            out.loc[idx, "label_mass"] = mass
        else:
            options = [[space + n for n in names] for _, space in pairs]
            lp = scorer.option_logprob(stripped, options, chat=chat)
            mat = lp.pivot(index="prompt_idx", columns="option_idx", values="sum_logprob").sort_index()
            logits = np.array(mat.to_numpy(dtype=float))
            logits = logits - logits.max(axis=1, keepdims=True)
            probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        best = probs.argmax(axis=1)
        out.loc[idx, "output"] = [names[b] for b in best]
        out.loc[idx, "pred"] = [labels[names[b]] for b in best]
        out.loc[idx, "p_answer"] = probs[np.arange(len(best)), best]

    return judge(prompts, out)


def judge(prompts: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """Add ``correct`` and ``correct_released`` to a response table (aligned with ``prompts`` by index)."""
    r = responses.copy()
    rel, fixed = [], []
    for p, o, a in zip(prompts.to_dict("records"), r["output"], r["pred"]):
        o = o if isinstance(o, str) else ""
        rel.append(answers.is_correct(p["answer_format"], o, p["answer"], p["answer_text"], "released"))
        if isinstance(a, str):                       # a closed-set answer read off the scores
            fixed.append(a == p["answer"])
        else:
            fixed.append(answers.is_correct(p["answer_format"], o, p["answer"], p["answer_text"], "normalised"))
    r["correct_released"] = np.asarray(rel, dtype=int)
    r["correct"] = np.asarray(fixed, dtype=int)
    return r
