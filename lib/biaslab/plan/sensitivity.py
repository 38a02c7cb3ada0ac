"""The pre-specified sensitivity analyses of notebooks 1 and 5 (``tables/sensitivity.csv``; the machinery and the
decision rule are :mod:`biaslab.stats.reanalysis`).

Per claim instance, beside its primary analysis, the analyses its plan claim lists under ``sensitivity``
(:data:`ANALYSES`; only for tested instances):

* **invalid answers** (a FactorPlan's ``invalid_answers``, SSQA's "other"; counted as not deviating by the plan):
  all of them counted as deviating instead, and the tipping point — how many of the invalid answers of the model
  whose switch moves the estimate towards the null must be counted as deviating to change the verdict (switched in
  a seeded random order);
* **degenerate-responder threshold**: the modal-share threshold of :data:`biaslab.stats.responders.THRESHOLDS`
  (0.95) at 0.90 and 0.99 (``FactorPlan.reads`` the answer); a pair with a model degenerate then is not tested;
* **an outcome's alternative definitions** (notebook 1, ``FactorPlan.outcome_variants``: the agentic entropy cut).

* **sampling weights** (CrowS-Pairs, notebook 5's ``crows-en-share``): the balanced sample unweighted, and the
  stratified estimate with the finite-population correction (:mod:`biaslab.papers.crows_pairs.sensitivity`, which
  also gives notebook 3's rows).

Every row, whichever module computes it, is decided by :func:`biaslab.stats.reanalysis.decide` (the plan's graph
and power rule, as the primary rows were).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..stats import paired, responders
from ..stats import reanalysis as S

TESTED = S.TESTED
MODAL_SHARE_ALTERNATIVES = (0.90, 0.99)
INVALID = "other"      # SSQA's parsed answer that is none of the labels
#: the analysis ids a plan claim may list under ``sensitivity`` (each runs where its data exist in the run)
ANALYSES = ("invalid-as-deviating", "degenerate-threshold", "entropy-cut", "sampling-weights")


def _planned(plan, claim_id: str, notebook: str) -> set:
    """The sensitivity analyses ``plan`` lists for ``claim_id``; an unknown id is refused."""
    listed = {a for c in plan.of(notebook) if c.id == claim_id for a in c.sensitivity}
    bad = sorted(listed - set(ANALYSES))
    if bad:
        raise ValueError(f"analysis plan, notebook {notebook}, claim {claim_id!r}: unknown sensitivity analysis "
                         f"{bad}; known: {list(ANALYSES)}")
    return listed


def _row(claim, family, instance, analysis, event, description, r: dict, **budget) -> dict:
    """One undecided row; ``budget``: the instance's :data:`biaslab.stats.reanalysis.BUDGET` columns."""
    return {"claim": claim, "family": family, "instance": instance, "analysis": analysis,
            "intercurrent_event": event, "description": description, "estimate": r.get("estimate"),
            "ci_low": r.get("ci_low"), "ci_high": r.get("ci_high"), "p_value": r.get("p_value"),
            **{k: budget.get(k, np.nan) for k in S.BUDGET}}


def _base(r: dict, instance: str) -> dict:
    """A decided claim row's identity, its family's budget, the level its test needs and its verdict (the sensitivity
    rows are decided at them)."""
    return {"claim": r["claim"], "family": r["family"], "instance": instance, **S.budget(r)}


def _family_rule(primaries: list[dict], base: dict, plan) -> Callable[[float], str]:
    """p -> the verdict this instance would get with that p, by its primary's rule (the one
    :func:`biaslab.stats.reanalysis.decide`: the plan's graph over its family's primaries at the family's budget);
    ``primaries``: the primary rows of every instance of the family (this run's, and others' for a family that
    spans runs)."""
    return S.rule(pd.DataFrame(primaries, columns=S.COLUMNS[:10] + S.BUDGET), base, plan=plan)


def _primary(row, estimate: str) -> dict:
    """The decided row's estimate, interval and p (the p where the instance is in the graph)."""
    return {"estimate": row[estimate], "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
            "p_value": row["p_value"] if S.in_graph(row.get("verdict")) else np.nan}


def _claims(decided: pd.DataFrame, estimate: str, instance: Callable[[dict], str]) -> tuple[list[dict], list[dict]]:
    """The claim rows of a decided table and their undecided primary rows (``instance``: a row's instance label)."""
    claims = decided[decided["claim"].fillna("").ne("")].to_dict("records") if "claim" in decided else []
    return claims, [_row(**_base(r, instance(r)), analysis=S.PRIMARY, event="", description=r.get("verdict", ""),
                         r=_primary(r, estimate)) for r in claims]


def _degenerate_rows(base: dict, primary: dict, answers: pd.DataFrame, models: tuple, answer: str = "answer") -> list:
    """The primary's test under each alternative modal-share threshold: not tested where a model turns degenerate."""
    out = []
    for th in MODAL_SHARE_ALTERNATIVES:
        chk = responders.responder_check(answers[answers["model"].isin(models)], answer=answer,
                                         thresholds={"modal_share_max": th})
        deg = chk.loc[chk["degenerate"], "model"].tolist()
        r = dict(primary)
        if deg:
            r["p_value"] = np.nan
        desc = (f"modal-share threshold {th:.2f} (primary 0.95): " +
                (f"{', '.join(deg)} degenerate, pair not tested" if deg else "neither model degenerate"))
        out.append(_row(**base, analysis=f"degenerate threshold {th:.2f}", event="degenerate responder",
                        description=desc, r=r))
    return out


def _invalid_rows(base: dict, df: pd.DataFrame, a: str, b: str, test: Callable[[pd.DataFrame], dict],
                  rule: Callable[[float], str], outcome: str = "deviated", seed: int = 0, invalid=(INVALID,)) -> list:
    """Invalid answers counted as deviating, and the tipping point (see the module docstring). ``test`` maps a
    response frame to the instance's result (estimate, ci, p); ``rule`` a p to the verdict (:func:`_family_rule`)."""
    bad = df["answer"].astype(str).isin(invalid).to_numpy()
    if not bad.any():
        return []
    n_a, n_b = int((bad & (df["model"] == a).to_numpy()).sum()), int((bad & (df["model"] == b).to_numpy()).sum())
    all_biased = test(df.assign(**{outcome: np.where(bad, 1, df[outcome])}))
    rows = [_row(**base, analysis="invalid answers counted as deviating", event="invalid answer",
                 description=f"{n_a} ({a}) + {n_b} ({b}) answers that are none of the labels counted as deviating "
                             "(primary: not deviating)", r=all_biased)]
    primary = test(df)
    # switching model a's invalid answers raises a's rate: towards the null when the estimate is below it
    who = a if primary["estimate"] < 0 else b
    idx = np.flatnonzero(bad & (df["model"] == who).to_numpy())
    idx = np.random.default_rng(seed).permutation(idx)
    y0 = df[outcome].to_numpy().copy()

    def verdict(k: int) -> str:
        y = y0.copy()
        y[idx[:k]] = 1
        return rule(test(df.assign(**{outcome: y}))["p_value"])

    k = S.tipping_point(verdict, idx.size)
    what = (f"{k} of {idx.size} invalid answers of {who} counted as deviating change the verdict"
            if k else f"all {idx.size} invalid answers of {who} counted as deviating leave the verdict")
    rows.append(_row(**base, analysis="invalid answers: tipping point", event="invalid answer",
                     description=what + " (seeded random order)", r=all_biased if k is None else test(
                         df.assign(**{outcome: np.where(np.isin(np.arange(len(df)), idx[:k]), 1, y0)}))))
    return rows


# ------------------------------------------------------------------------------------------------ notebook 5
def compare_sensitivity(root: Path, pairs: pd.DataFrame, seed: int = 0, *, plan) -> pd.DataFrame:
    """Notebook 5's sensitivity table for its SSQA and BBQ claims (``pairs``: the decided paired_differences),
    decided under ``plan``."""
    from ..papers.compare import tables as T
    claims, primaries = _claims(pairs, "difference", lambda r: f"{r['metric']} · {r['model_a']} - {r['model_b']}")
    rows = []
    for r, prim in zip(claims, primaries):
        base = _base(r, prim["instance"])
        rows.append(prim)
        if r.get("verdict") not in TESTED:
            continue
        want = _planned(plan, r["claim"], "05_compare")
        m = T.metric(r["metric"])
        resp = T.unit_responses(m, Path(root))
        if m.stratified:                                   # CrowS-Pairs English: the sampling weights
            if "sampling-weights" in want:
                from ..papers.crows_pairs.sensitivity import paired_rows
                rows += paired_rows(resp, pd.DataFrame([r]), r["metric"])
            continue
        both = resp[resp["model"].isin([r["model_a"], r["model_b"]])]
        common = set(both.loc[both["model"] == r["model_a"], "unit"]) & set(
            both.loc[both["model"] == r["model_b"], "unit"])
        both = both[both["unit"].isin(common)]
        ans = "answer" if "answer" in both else "choice" if "choice" in both else None     # BBQ: the option chosen
        if ans and "degenerate-threshold" in want:
            rows += _degenerate_rows(base, prim, both, (r["model_a"], r["model_b"]), ans)
        if m.kind == "binary" and "answer" in both and "invalid-as-deviating" in want:
            cl, _ = T.design(m, both)

            def test(df, m=m, cl=cl, a=r["model_a"], b=r["model_b"]):
                x = paired.paired_difference(df, m.outcome, a, b, cl, unit="unit", binary=True, seed=seed)
                return {"estimate": x["difference"], "ci_low": x["ci_low"], "ci_high": x["ci_high"],
                        "p_value": x["p_value"]}
            rows += _invalid_rows(base, both.reset_index(drop=True), r["model_a"], r["model_b"], test,
                                  _family_rule(primaries, base, plan), m.outcome, seed)
    return S.decide(pd.DataFrame(rows, columns=S.COLUMNS[:10] + S.BUDGET), plan=plan) if rows else \
        pd.DataFrame(columns=S.COLUMNS)


# ------------------------------------------------------------------------------------------------ notebook 1
def multifactor_sensitivity(pst: pd.DataFrame, nocot: pd.DataFrame, benchmark: str, fplan, clusters,
                            seed: int = 0, *, plan, context: pd.DataFrame | None = None) -> pd.DataFrame:
    """Notebook 1's sensitivity table for its claims (``pst``: the decided paired_subgroup_tests; ``nocot``: the
    analysed responses with their factors; ``fplan``: the benchmark's FactorPlan), decided under ``plan``;
    ``context``: the primary rows (:func:`primary_rows`, its second part) of the other benchmarks' instances of the
    same families, where the plan's families span notebook 1's benchmark runs (their verdicts and the tipping point
    then follow the joint rule)."""
    factors, outcome, ideal = fplan.ecdf_factors, fplan.outcome, fplan.ideal
    claims, primaries = primary_rows(pst, benchmark)
    every = primaries + ([] if context is None else context.to_dict("records"))
    rows = []
    for r, prim_row in zip(claims, primaries):
        a, b = r["model_a"], r["model_b"]
        base = _base(r, prim_row["instance"])
        prim = _primary(r, "metric_difference")
        rows.append(prim_row)
        if r.get("verdict") not in TESTED:
            continue
        df = nocot[nocot["model"].isin([a, b])].reset_index(drop=True)
        want = _planned(plan, r["claim"], "01_multifactor")

        def test(d, y=outcome, a=a, b=b):
            x = paired.paired_subgroup_test(d, y, factors, a, b, clusters, ideal=ideal, seed=seed)
            return {"estimate": x["metric_difference"], "ci_low": x["ci_low"], "ci_high": x["ci_high"],
                    "p_value": x["p_value"]}
        if fplan.reads == "answer" and fplan.answer in df and "degenerate-threshold" in want:     # the plan's answer
            rows += _degenerate_rows(base, prim, df, (a, b), fplan.answer)
        if fplan.invalid_answers and "answer" in df and "invalid-as-deviating" in want:
            rows += _invalid_rows(base, df, a, b, test, _family_rule(every, base, plan), outcome, seed,
                                  fplan.invalid_answers)
        rows += [_row(**base, analysis=name, event="outcome definition", description=desc, r=test(d))
                 for sid, variants in fplan.outcome_variants.items() if sid in want for name, desc, d in variants(df)]
    others = context if context is not None and len(context) else None
    return S.decide(pd.DataFrame(rows, columns=S.COLUMNS[:10] + S.BUDGET), plan=plan, context=others) if rows else \
        pd.DataFrame(columns=S.COLUMNS)


def primary_rows(pst: pd.DataFrame, benchmark: str) -> tuple[list[dict], list[dict]]:
    """The claim rows of one benchmark run's decided ``paired_subgroup_tests`` and their undecided primary rows
    (``instance`` "<benchmark> · <model a> - <model b>")."""
    return _claims(pst, "metric_difference", lambda r: f"{benchmark} · {r['model_a']} - {r['model_b']}")
