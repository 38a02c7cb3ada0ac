"""Label sets: the surface forms a label can take as the next words of an answer, and their aggregation."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd


def surface_forms(label: str) -> list[str]:
    """Forms of ``label`` counted as that answer: as given, lower-case, Capitalized and UPPER-case, each with and
    without a leading space (``"yes"`` -> ``yes, " yes", Yes, " Yes", YES, " YES"``). Order kept, duplicates dropped."""
    base = label.strip()
    if not base:
        raise ValueError("a label must not be empty or blank")
    cased = [base, base.lower(), base[:1].upper() + base[1:].lower(), base.upper()]
    return list(dict.fromkeys(f for c in cased for f in (c, " " + c)))


def label_forms(labels: Sequence[str] | Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Normalize ``labels`` (a list of labels, or a dict label -> its surface forms) to label -> forms.

    Raises when a form would count for two labels (e.g. labels ``"a"`` and ``"A"``): pass a dict to disambiguate.
    """
    if isinstance(labels, Mapping):
        forms = {str(k): [str(f) for f in v] for k, v in labels.items()}
    else:
        if len(set(labels)) != len(labels):
            raise ValueError(f"duplicate labels in {list(labels)}")
        forms = {str(lab): surface_forms(str(lab)) for lab in labels}
    owner: dict[str, str] = {}
    for lab, fs in forms.items():
        if not fs:
            raise ValueError(f"label {lab!r} has no surface forms")
        for f in fs:
            if f in owner and owner[f] != lab:
                raise ValueError(f"surface form {f!r} belongs to both {owner[f]!r} and {lab!r}; "
                                 "pass labels as a dict label -> forms")
            owner[f] = lab
    return forms


def aggregate(form_logprobs: Sequence[Sequence[float]], forms: dict[str, list[str]]) -> pd.DataFrame:
    """Per prompt: ``logp_<L>`` = log of the summed probability of L's forms, ``p_<L>`` renormalized over the labels,
    and ``label_mass`` = total probability on all forms. ``form_logprobs[i]`` follows the order of ``forms``."""
    from scipy.special import logsumexp
    arr = np.asarray(form_logprobs, dtype=float).reshape(len(form_logprobs), -1)
    cols: dict[str, np.ndarray] = {}
    k = 0
    for lab, fs in forms.items():
        cols[f"logp_{lab}"] = logsumexp(arr[:, k:k + len(fs)], axis=1)
        k += len(fs)
    stacked = np.stack(list(cols.values()), axis=1)
    total = logsumexp(stacked, axis=1)
    for j, lab in enumerate(forms):
        cols[f"p_{lab}"] = np.exp(stacked[:, j] - total)
    cols["label_mass"] = np.exp(total)
    return pd.DataFrame(cols)
