"""Notebook 1 glue: turn the scoring engine's outputs into response tables for SSQA and CALM.

These functions take a :class:`biaslab.scoring.Scorer` (or anything with the same methods) and a prompt table, call
the engine, and return one row per (prompt, model, seed) with the derived answer and outcome. They import no torch
and know nothing about models beyond the scorer's interface.

* SSQA without chain of thought: the next-token distribution over the answer words (``label_distribution``: every
  surface form of "yes", "no" and "can't tell" counted, renormalised over the three labels); the answer is the most
  probable label, and ``label_mass`` is the probability that fell on any answer form at all.
* SSQA with chain of thought: seeded sampling (one generation per seed) and answer extraction
  (``scoring.extract_choice``); no extractable answer is ``other``.

BBQ, CrowS-Pairs and the agentic set are asked and read by their own modules' ``respond`` (``factorial.score``);
SSQA and CALM by :data:`GLUE` until they answer through a protocol.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SSQA_LABELS = ["yes", "no", "can't tell"]


def ssqa_base_prompt(text: str, chat: bool) -> str:
    """The text a model sees (no CoT): chat models get the prompt as is, base models an 'Answer:' cue."""
    t = text.replace("\xa0", " ").strip()
    return t if chat else f"Question: {t}\nAnswer:"


def score_ssqa_labels(scorer, prompts: pd.DataFrame, model: str, chat: bool) -> pd.DataFrame:
    """No-CoT SSQA answers from the next-token label distribution (yes / no / can't tell)."""
    texts = [ssqa_base_prompt(t, chat) for t in prompts["text"]]
    d = scorer.label_distribution(texts, SSQA_LABELS, chat=chat).reset_index(drop=True)
    probs = d[[f"p_{lab}" for lab in SSQA_LABELS]].to_numpy()
    answer = np.array(SSQA_LABELS)[probs.argmax(axis=1)]
    out = pd.DataFrame({
        "prompt_id": prompts["prompt_id"].to_numpy(), "model": model, "seed": "none", "cot": "no",
        "p_yes": probs[:, 0], "p_no": probs[:, 1], "p_cant_tell": probs[:, 2],
        "label_mass": d["label_mass"].to_numpy(), "answer": answer,
    })
    out["deviated"] = (out["answer"].to_numpy() == prompts["biased_answer"].to_numpy()).astype(int)
    if "labels_outside_topk" in d:   # served top-k: labels with no form among the returned tokens (upper bound used)
        out["labels_outside_topk"] = d["labels_outside_topk"].to_numpy()
    return out


def score_ssqa_cot(scorer, prompts: pd.DataFrame, model: str, chat: bool, seeds, max_new_tokens: int = 96,
                   temperature: float = 0.7, do_sample: bool = True) -> pd.DataFrame:
    """CoT SSQA answers: one sampled generation per seed, answer extracted from the text.

    ``prompts`` are the ``cot == "yes"`` rows (text ends with the step-by-step instruction). ``do_sample=False``:
    greedy generation (served models: temperature 0 with the seed passed to the server), one per seed given.
    """
    from ... import scoring   # the engine; imported here so that the module imports without it

    texts = [t.replace("\xa0", " ").strip() if chat else f"Question: {t.replace(chr(160), ' ').strip()}\n"
             "Reasoning:" for t in prompts["text"]]
    frames = []
    for s in seeds:
        if do_sample:
            gens = scorer.generate(texts, max_new_tokens=max_new_tokens, do_sample=True, seed=int(s),
                                   temperature=temperature, chat=chat)
        else:
            gens = scorer.generate(texts, max_new_tokens=max_new_tokens, seed=int(s), chat=chat)
        ans = [scoring.extract_choice(g, SSQA_LABELS) for g in gens]
        f = pd.DataFrame({"prompt_id": prompts["prompt_id"].to_numpy(), "model": model, "seed": str(s),
                          "cot": "yes", "generation": gens, "answer": [a if a else "other" for a in ans]})
        f["deviated"] = (f["answer"].to_numpy() == prompts["biased_answer"].to_numpy()).astype(int)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------------------------
# SSQA and CALM are scored by this glue, not by a ``respond`` of their own, until their modules answer through a
# protocol; then this block goes and ``factorial.score`` serves them as it serves every other benchmark.
# Each returns (response frames, served notes, chat template used, seconds of chain of thought).

def score_ssqa(scorer, subset, *, cot_subset=None, cot_seeds=0, cot_max_new_tokens=40, cot_temperature=0.7,
               **_) -> tuple[list, list, bool, float]:
    """SSQA's no-CoT label distribution and, on ``cot_subset``, its chain of thought (one generation per seed)."""
    import time
    lm, name, notes = scorer.lm, scorer.lm.name, []
    chat = scorer.instruction_tuned()
    scorer.require("chat_top_logprobs" if chat else "top_logprobs", why="SSQA answers (label distribution)")
    run_cot = cot_subset is not None and len(cot_subset) and cot_seeds
    if run_cot:
        scorer.require("chat" if chat else "generate", why="SSQA chain of thought (generation)")
    r = score_ssqa_labels(scorer, subset, name, chat)
    frames = [r]
    if "labels_outside_topk" in r:       # a server's top-k next tokens
        outside = r["labels_outside_topk"].fillna("").astype(str).str.split(",").explode()
        outside = outside[outside != ""].value_counts()
        notes.append(
            f"{name} (served): answer probabilities read from the server's top-{lm.spec.top_k} next tokens "
            f"({'chat' if chat else 'completions'}); " + (
                "every answer had a form among them" if outside.empty else
                "answers with no single-token form among them were counted at their upper bound, not exactly "
                "(multi-token forms are never seen as one token): " +
                ", ".join(f"{lab!r} on {n} of {len(r)} prompts" for lab, n in outside.items())))
    t_cot = 0.0
    if run_cot:
        tc = time.perf_counter()
        # where a seeded sample is not reproducible (a server), generation is greedy (seed 0): cached, once
        sampled = scorer.seeded_sampling()
        frames.append(score_ssqa_cot(scorer, cot_subset, name, chat, range(cot_seeds) if sampled else range(1),
                                     cot_max_new_tokens, cot_temperature, do_sample=sampled))
        if not sampled:
            notes.append(
                f"{name} (served): chain of thought generated greedily (temperature 0, seed 0), once per prompt, "
                f"not sampled at temperature {cot_temperature} with {cot_seeds} seeds as in-process; the seed "
                f"factor has one level for this model (server fingerprint(s): "
                f"{', '.join(lm.fingerprint.get('system_fingerprints', [])) or 'none reported'})")
        t_cot = time.perf_counter() - tc
    return frames, notes, chat, t_cot


def score_calm(scorer, subset, *, k_shot=1, calm_evaluate=None, **_) -> tuple[list, list, bool, float]:
    """CALM's answers by notebook 2's rules (raw text, 1-shot by default): ``calm_evaluate`` is
    ``biaslab.papers.calm.evaluate.evaluate``, passed in (a paper's glue imports no other paper's)."""
    if calm_evaluate is None:
        raise ValueError("CALM needs calm_evaluate=biaslab.papers.calm.evaluate.evaluate")
    r = calm_evaluate(scorer, subset, k=k_shot, label_scoring="next_token", chat=False)
    return [pd.DataFrame({"prompt_id": subset["prompt_id"].to_numpy(), "model": scorer.lm.name, "seed": "none",
                          "answer": r["output"].to_numpy(), "label_mass": r["label_mass"].to_numpy(),
                          "correct": r["correct"].to_numpy().astype(int)})], [], False, 0.0


GLUE = {"ssqa": score_ssqa, "calm": score_calm}
# --------------------------------------------------------------------------------------------- end of SSQA / CALM


def other_answer_sensitivity(released: pd.DataFrame, prompts: pd.DataFrame, cluster) -> pd.DataFrame:
    """SSQA's released answers with the "other" answers (Granite's 456 improper outputs, Llama's empty one) counted
    as not biased (the released ``original answer bias`` column, the analysis's choice) or excluded, side by side:
    each model's deviation rate and the paired Granite - Llama difference, with the intervals of the notebook's rule
    (``cluster``: one or two prompt-table columns). Columns: handling, quantity, n, n_excluded, estimate, ci_low,
    ci_high, ci_method, p_value, p_method."""
    from ...stats import intervals, paired
    cols = [cluster] if isinstance(cluster, str) else list(cluster)
    d = released.merge(prompts[["prompt_id"] + cols], on="prompt_id")
    models = list(pd.unique(d["model"]))
    rows = []
    for handling, part in (("other = not biased", d), ("other excluded", d[d["answer"] != "other"])):
        for m, g in part.groupby("model", sort=False):
            r = intervals.rate_intervals(g, "deviated", cluster).iloc[0]
            rows.append({"handling": handling, "quantity": f"deviation rate, {m}", "n": int(r["n"]),
                         "n_excluded": int((d["model"] == m).sum() - len(g)), "estimate": r["rate"],
                         "ci_low": r["ci_low"], "ci_high": r["ci_high"], "ci_method": r["ci_method"],
                         "p_value": np.nan, "p_method": ""})
        if len(models) == 2:
            # excluded: a prompt leaves the paired comparison when either model's answer is "other"
            keep = part.groupby("prompt_id")["model"].transform("size") == 2
            r = paired.paired_difference(part[keep], "deviated", models[0], models[1], cluster, binary=True)
            rows.append({"handling": handling, "quantity": f"deviation rate, {models[0]} - {models[1]} (paired)",
                         "n": int(r["n_pairs"]), "n_excluded": int(d["prompt_id"].nunique() - r["n_pairs"]),
                         "estimate": r["difference"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                         "ci_method": r["ci_method"], "p_value": r["p_value"], "p_method": r["p_method"]})
    return pd.DataFrame(rows)


def recode(df: pd.DataFrame, plan) -> pd.DataFrame:
    """Apply the plan's level recodes (before regression) and return a copy."""
    out = df.copy()
    for f, m in plan.recode.items():
        if f in out:
            out[f] = out[f].replace(m)
    return out


def references(spec, plan, responses: pd.DataFrame | None = None) -> dict:
    """Reference levels for regression: the spec's, the plan's overrides, and for response-level factors (kind
    "model" among the plan's extra factors, e.g. the agentic answer position) the level most frequent in
    ``responses`` (one model's), so that the contrasts read "against this model's usual answer"."""
    refs = {f.name: f.reference for f in spec.factors}
    refs.update(plan.reference_override)
    if responses is not None:
        for f in plan.extra_factors:
            if f.kind == "model" and f.name in responses and responses[f.name].notna().any():
                refs[f.name] = responses[f.name].mode().iloc[0]
    return refs
