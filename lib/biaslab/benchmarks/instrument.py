"""A multiple-choice benchmark's formulations and their validity (docs/validity.md): what a notebook asks so that the
analysis plan's scoring rule can choose, and the table the checks of :mod:`biaslab.stats.validity` read.

A benchmark takes part by declaring ``Spec.option_roles`` (items -> per stored option its role and characters, the
correct option, whether the item tests competence, the stratum of the role preference; an item it leaves out asks no
choice among options, e.g. CALM's free-text QA, and is read as the paper reads it) and by reading ``label_dist`` and
``cloze`` in its ``respond`` with the per-option columns (``p_j``, ``tokens_j``, ``pos_r``). The notebook asks every
formulation of :func:`formulations` through the benchmark's own ``respond`` (the scorer's cache shares the requests
the formulations have in common: the cloze normalizations are one set of requests, plus the content-free prompt for
PMI), then :func:`validity` gives the rows and the rule's choice, and :func:`selected` the answers read. A
benchmark with ``option_roles`` and no declared rule is checked in the one formulation it is asked in
(:func:`one_formulation`).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ..stats import validity as V
from .base import Protocol
from .formats import NORMALIZATIONS

#: a formulation's name in sentences ((formulation, normalization) -> words)
LABELS = {("paper", ""): "paper's protocol",
          ("letters", ""): "letters (every cyclic order)",
          **{("cloze", n): f"cloze ({w})" for n, w in zip(NORMALIZATIONS, ("summed log-probability", "per token",
                                                                          "per character", "PMI"))}}
#: the columns of a selection besides its keys (:func:`validity`)
SELECTION = ("selected", "selected_normalization", "rule_branch", "status", "reasons")


def keys(rule: Mapping) -> tuple:
    """What the rule is applied per: the model, and the columns the plan's rule names in ``by`` (CALM: the task)."""
    return ("model", *rule.get("by", ()))


def one_formulation(plan, spec, items: pd.DataFrame) -> dict:
    """The rule of a benchmark asked in one formulation, the paper's protocol (no ``scoring_rule`` declared for it,
    or a notebook that asks no other): its answers are read if they pass the plan's checks (``scoring_rule.checks``),
    else the model is not measurable; no fallback. Applied per model and per each item column that the benchmark's
    metrics filter their responder rows by (``Metric.responders``; MBBQ: the language), so that every metric reads
    the status of its own part of the items."""
    by = dict.fromkeys(c for m in spec.metrics for c in (m.responders or {}) if c in items.columns)
    return {"primary": "paper", "checks": dict(plan.scoring.get("checks") or {}), "by": list(by)}


def require(spec) -> None:
    """An error naming what a benchmark lacks to be scored by a rule (``Spec.option_roles``, the two formats)."""
    missing = [f for f in ("label_dist", "cloze") if f not in spec.formats]
    if spec.option_roles is None or missing:
        raise TypeError(f"benchmark {spec.name!r}: the analysis plan declares a scoring_rule for it, which needs "
                        "Spec.option_roles" + (f" and the formats {missing}" if missing else "")
                        + " (docs/validity.md: extending the checks to a benchmark)")


def formulations(protocol: Protocol, rule: Mapping) -> list[tuple[str, str, Protocol]]:
    """``(formulation, normalization, protocol)`` to ask: the paper's protocol, the letters in the rule's orders and
    the cloze formulation under every normalization (the declared one among them; the others cost no request but
    PMI's content-free prompt), each from the paper's protocol (its wording, chat and examples kept); the paper's
    protocol alone under :func:`one_formulation`'s rule."""
    paper_norm = protocol.normalization if protocol.format in ("option_ll", "cloze") else ""
    if rule["primary"] == "paper" and not rule.get("fallback"):      # :func:`one_formulation`
        return [("paper", paper_norm, protocol)]
    out = [("paper", paper_norm, protocol),
           ("letters", "", protocol.replace(format="label_dist", order=rule.get("orders", "cycles")))]
    out += [("cloze", n, protocol.replace(format="cloze", normalization=n, order="original")) for n in NORMALIZATIONS]
    named = {rule["primary"], rule["fallback"]}
    unknown = named - {"letters", "cloze"}
    if unknown:
        raise ValueError(f"scoring_rule names {sorted(unknown)}; formulations are letters and cloze")
    return out


def _with(df: pd.DataFrame, items: pd.DataFrame | None, cols) -> pd.DataFrame:
    """``df`` with the item columns ``cols`` it lacks (by ``prompt_id``)."""
    need = [c for c in cols if c not in df]
    if not need:
        return df
    if items is None or any(c not in items for c in need):
        raise ValueError(f"the responses have no column(s) {need} and the items do not give them (the rule is "
                         "applied per model and these columns: scoring_rule.benchmarks.<name>.by)")
    return df.merge(items[["prompt_id", *need]].drop_duplicates("prompt_id"), on="prompt_id", how="left")


def answers(spec, items: pd.DataFrame, responses: pd.DataFrame, cluster: str | None) -> pd.DataFrame:
    """One formulation's responses to the items that ask a choice among options, with their option roles
    (``Spec.option_roles``; an item it leaves out is not judged) and cluster: the input of
    :func:`biaslab.stats.validity.table`."""
    roles = spec.option_roles(items)
    if cluster and cluster not in roles:
        roles = roles.merge(items[["prompt_id", cluster]], on="prompt_id", how="left")
    mine = responses[responses["prompt_id"].isin(roles["prompt_id"])]
    n = len(mine)
    out = mine.drop(columns=[c for c in roles.columns if c != "prompt_id" and c in mine]).merge(
        roles, on="prompt_id", how="left", validate="many_to_one")
    if len(out) != n or out["role_0"].isna().any():
        raise ValueError(f"{spec.name}: {int(out['role_0'].isna().sum())} responses without their item's option "
                         "roles (Spec.option_roles must give every stored option of an item it returns a role)")
    return out


def validity(spec, items: pd.DataFrame, scored: pd.DataFrame, cluster: str | None, rule: Mapping,
             by: tuple | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rows, selection)``: the validity rows of every model x formulation in ``scored`` (one response table with
    ``formulation`` and ``normalization`` columns), marked with the rule's choice (``selected``, ``rule_branch``),
    and per model (and the rule's ``by``: :func:`keys`) the rule's selection
    (:func:`biaslab.stats.validity.apply_rule`). Only the items ``Spec.option_roles`` returns are judged."""
    by = tuple(by or keys(rule))
    a = _with(answers(spec, items, scored, cluster), items, by)
    a["normalization"] = a["normalization"].fillna("")
    rows = V.table(a, cluster, by=list(by) + ["formulation", "normalization"], checks=rule.get("checks"))
    selection = V.apply_rule(rows, rule, by=by)
    return V.mark(rows, selection, by=by), selection


def selected(scored: pd.DataFrame, selection: pd.DataFrame, items: pd.DataFrame | None = None,
             spec=None) -> pd.DataFrame:
    """The responses every result reads: per key of ``selection`` (the model, and the rule's ``by``) its selected
    formulation's; with ``spec`` and ``items``, an item ``Spec.option_roles`` leaves out (no choice among options)
    keeps the paper's protocol's answer, as does a key the rule did not judge (no judged item)."""
    by = [c for c in selection.columns if c not in SELECTION]
    d = _with(scored.assign(normalization=scored["normalization"].fillna("")), items, by)
    s = selection[by + ["selected", "selected_normalization"]].rename(
        columns={"selected": "formulation", "selected_normalization": "normalization"})
    judged = d["prompt_id"].isin(spec.option_roles(items)["prompt_id"]) if spec is not None else \
        pd.Series(True, index=d.index)
    judged &= pd.MultiIndex.from_frame(d[by]).isin(pd.MultiIndex.from_frame(s[by]))
    out = pd.concat([d[judged].merge(s, on=by + ["formulation", "normalization"]),
                     d[~judged & (d["formulation"] == "paper")]], ignore_index=True)
    return out.drop(columns=[c for c in by if c not in scored]).reset_index(drop=True)
