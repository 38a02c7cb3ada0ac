"""Responder check: is a model's behaviour on a benchmark informative at all? (beyond the four papers)

Run per model x benchmark before any test. A model that gives the same answer to every prompt, puts almost no
probability on the answer labels, or whose generations cannot be parsed has no variation for a test to explain: a
test that includes it measures the benchmark's answer key, not the model.

Measures, per model (and any extra grouping), over the parsed answers: ``answer_entropy`` (Shannon 1948 entropy of
the answers divided by ``log K``, K = ``n_options``; the agentic paper's normalisation), ``modal_share``,
``unparseable_share`` and, when the caller has it, ``label_mass`` (mean probability on the answer labels). A responder
is degenerate *for a metric*, by what the metric reads (``THRESHOLDS``, stated once here; ``reasons`` names which):

* an **answer-rate** metric reads the answer: :func:`responder_check` (modal share >= 0.95, answer entropy <= 0.20 or
  unparseable share > 0.50; ``reads = "answer"``; the label mass is reported beside it, not judged);
* a **probability** metric reads the renormalized probabilities: :func:`probability_check` (label mass < 0.10, or
  entropy of the model's *mean* distribution over answer slots <= 0.20: the metric then reads the slot; ``reads =
  "probabilities"``). A model whose top choice is always slot 3 with nearly uniform probabilities (SmolLM2 on
  five-choice agentic prompts) is degenerate for the first kind and informative for the second;
* a test whose alternative *is* a constant answer (is the top position uniformly spread?) is not judged
  (:func:`not_judged`).

With fewer than ``min_n`` = 20 responses a pair is not judged (``degenerate`` False, ``reasons`` says so). Degenerate
pairs are listed in the notebooks' ``responders.csv`` and excluded from tests (their descriptive tables kept and
marked); :func:`biaslab.stats.verdict.responder_status` turns these rows into each effect's ``responder_status``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

THRESHOLDS = {"modal_share_max": 0.95, "answer_entropy_min": 0.20, "unparseable_share_max": 0.50,
              "label_mass_min": 0.10, "distribution_entropy_min": 0.20, "min_n": 20}
ANSWER, PROBABILITIES = "answer", "probabilities"
#: the thresholds that judge each kind of metric (the rest are reported, not applied)
APPLIES = {ANSWER: ("modal_share_max", "answer_entropy_min", "unparseable_share_max", "min_n"),
           PROBABILITIES: ("label_mass_min", "distribution_entropy_min", "min_n")}


def _thresholds_text(th: dict, reads: str) -> str:
    return ", ".join(f"{k}={th[k]}" for k in APPLIES[reads])


def _judged(reasons: list[str], n: int, th: dict) -> tuple[bool, str]:
    """``degenerate`` and ``reasons`` of a group: not judged below ``min_n`` responses (saying what it would be)."""
    if reasons and n < th["min_n"]:
        return False, f"not judged: n = {n} < {th['min_n']} (would be: " + "; ".join(reasons) + ")"
    return bool(reasons), "; ".join(reasons)


def responder_check(df: pd.DataFrame, answer: str = "answer", by: Sequence[str] | str = "model",
                    n_options: int | None = None, label_mass: str | None = None,
                    thresholds: dict | None = None) -> pd.DataFrame:
    """The check for an **answer-rate** metric: one row per group of ``by``: n, n_parsed, modal_answer,
    modal_share, answer_entropy, unparseable_share, label_mass (reported, not judged: the metric reads the answer),
    degenerate (bool), reasons (``; ``-joined), reads ("answer") and the thresholds applied."""
    th = {**THRESHOLDS, **(thresholds or {})}
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, part in df.groupby(by, sort=False, observed=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        a = part[answer]
        parsed = a.dropna().astype(str)
        n, n_ok = len(a), len(parsed)
        counts = parsed.value_counts()
        k_opt = n_options or max(int(counts.size), 2)
        if n_ok:
            p = counts.to_numpy(dtype=float) / n_ok
            ent = max(0.0, float(-(p * np.log(p)).sum() / np.log(k_opt))) if k_opt > 1 else 0.0
            modal, modal_share = counts.index[0], float(p[0])
        else:
            ent, modal, modal_share = np.nan, None, np.nan
        unparse = 1 - n_ok / n if n else np.nan
        mass = float(part[label_mass].mean()) if label_mass and label_mass in part else np.nan
        reasons = []
        if n_ok and modal_share >= th["modal_share_max"]:
            reasons.append(f"modal answer {modal!r} in {modal_share:.0%} of answers (>= {th['modal_share_max']:.0%})")
        if n_ok and ent <= th["answer_entropy_min"]:
            reasons.append(f"answer entropy {ent:.2f} <= {th['answer_entropy_min']:.2f}")
        if unparse > th["unparseable_share_max"]:
            reasons.append(f"{unparse:.0%} unparseable (> {th['unparseable_share_max']:.0%})")
        judged, why = _judged(reasons, n, th)
        rows.append({**dict(zip(by, key)), "n": n, "n_parsed": n_ok, "modal_answer": modal,
                     "modal_share": modal_share, "answer_entropy": ent, "unparseable_share": unparse,
                     "label_mass": mass, "degenerate": judged, "reasons": why, "reads": ANSWER,
                     "thresholds": _thresholds_text(th, ANSWER)})
    return pd.DataFrame(rows)


def probability_check(df: pd.DataFrame, probs: Sequence[str], label_mass: str = "label_mass",
                      by: Sequence[str] | str = "model", thresholds: dict | None = None) -> pd.DataFrame:
    """The check for a **probability** metric: one row per group of ``by``: n, label_mass (mean), the mean
    renormalized distribution over the answer slots ``probs`` (columns of per-prompt probabilities; a slot that is
    NaN in every row of the group is not offered and left out), its normalized entropy ``distribution_entropy``
    (Shannon entropy / log k), the top slot and its mean probability, degenerate, reasons, reads
    ("probabilities") and the thresholds applied. Not judged below ``min_n`` rows."""
    th = {**THRESHOLDS, **(thresholds or {})}
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, part in df.groupby(by, sort=False, observed=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        P = part[list(probs)].to_numpy(float)
        offered = ~np.isnan(P).all(axis=0)
        mean_p = np.nanmean(P[:, offered], axis=0) if offered.any() and len(part) else np.array([])
        k = int(offered.sum())
        if k > 1 and mean_p.sum() > 0:
            q = mean_p / mean_p.sum()
            q = q[q > 0]
            ent = float(-(q * np.log(q)).sum() / np.log(k))
        else:
            ent = np.nan
        mass = float(part[label_mass].mean()) if label_mass in part else np.nan
        reasons = []
        if np.isfinite(mass) and mass < th["label_mass_min"]:
            reasons.append(f"label mass {mass:.2f} < {th['label_mass_min']:.2f}")
        if np.isfinite(ent) and ent <= th["distribution_entropy_min"]:
            reasons.append(f"entropy of the mean distribution over slots {ent:.2f} <= "
                           f"{th['distribution_entropy_min']:.2f}")
        n = len(part)
        judged, why = _judged(reasons, n, th)
        names = [c for c, o in zip(probs, offered) if o]
        top = int(np.argmax(mean_p)) if len(mean_p) else None
        rows.append({**dict(zip(by, key)), "n": n, "label_mass": mass,
                     "mean_distribution": "; ".join(f"{c}: {v:.3f}" for c, v in zip(names, mean_p)),
                     "distribution_entropy": ent, "top_slot": names[top] if top is not None else None,
                     "top_slot_mean_p": float(mean_p[top]) if top is not None else np.nan,
                     "degenerate": judged, "reasons": why, "reads": PROBABILITIES,
                     "thresholds": _thresholds_text(th, PROBABILITIES)})
    return pd.DataFrame(rows)


def not_judged(keys: pd.DataFrame, reason: str) -> pd.DataFrame:
    """Rows for a metric no responder rule applies to (its alternative is the constant answer a check would flag):
    the key columns of ``keys`` (deduplicated), degenerate False, reasons "not judged: <reason>"."""
    out = keys.drop_duplicates().reset_index(drop=True).copy()
    return out.assign(degenerate=False, reasons=f"not judged: {reason}", reads="none")


def mask_tests(table: pd.DataFrame, check: pd.DataFrame, by: Sequence[str] | str = "model",
               test_cols: Sequence[str] = ("p_value",), where: pd.Series | None = None) -> pd.DataFrame:
    """A copy of a test table with the tests of degenerate responders blanked (NaN) and a ``responder`` column
    saying why: the rows stay in the table (listed, not dropped). ``where`` restricts which rows may be blanked
    (e.g. only the prompted sources of a preference table)."""
    by = [by] if isinstance(by, str) else list(by)
    out = table.copy()
    # .astype(bool): an empty check (no model was prompted) has an object column, which pandas reads as column names
    bad = check[check["degenerate"].astype(bool)].set_index(by)["reasons"]
    key = pd.MultiIndex.from_frame(out[by]) if len(by) > 1 else pd.Index(out[by[0]])
    why = pd.Series(key.map(lambda k: bad.get(k, "")), index=out.index).fillna("")
    if where is not None:
        why = why.where(where.to_numpy(), "")
    hit = why != ""
    for c in test_cols:
        if c in out:
            out.loc[hit, c] = np.nan
    out["responder"] = np.where(hit, "degenerate responder, excluded from tests: " + why, "informative")
    return out
