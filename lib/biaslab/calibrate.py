"""Calibration of a run's confirmatory tests and the familywise error of the headline table (docs/calibration.md).

Every tested instance of a plan claim (a row of a run's table whose ``claim`` is set and whose verdict is
"distinguishable" or "not distinguishable") becomes a :class:`biaslab.stats.calibration.Design`: the per-unit values
the claim's test reads, rebuilt from the run's own item-level tables and checked against the committed estimate (a
builder that recomputes another quantity fails loudly). Then

* :func:`run` (one call per notebook) simulates each instance under the null and writes ``tables/calibration.csv``;
* :func:`fwer` simulates every instance of every notebook under the global null at once, applies the error budget
  (alpha split over notebooks by the plan's ``budget.shares``, equally over a notebook's families, Holm within each
  family at ``alpha * share / n_families``) and counts the replications with at least one false "distinguishable".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import plan as P
from .stats import calibration as C

TESTED = ("distinguishable", "not distinguishable")
#: replications of the familywise-error simulation that ``biaslab reproduce --publish`` runs
FWER_REPLICATIONS = 2000
#: notebook 1's clusters per benchmark (the Benchmark specs' ``clusters``: SSQA crossed template x stigma)
MULTIFACTOR_CLUSTERS = {"ssqa": ["template", "stigma"], "bbq": ["template"], "calm": ["template_id"],
                        "crows_pairs": ["pair_id"], "agentic": ["scenario_id"]}
#: the notebooks with confirmatory claims, in the order of the headline table
NOTEBOOKS = ("01_multifactor", "02_calm", "03_crows_pairs_bayes", "04_agentic_entropy", "05_compare")
#: claims with no calibration entry yet, and why (reported in calibration.csv's ``test`` column, never simulated)
NOT_CALIBRATED = {"calm-eq1": "not calibrated here: a template-level permutation test is exact by construction "
                              "under exchangeable group labels; its redefined interval is calibrated when it lands"}


@dataclass
class Instance:
    """One tested claim instance: where it is decided and the design its test reads."""
    notebook: str
    claim: str
    family: str
    instance: str
    design: C.Design | None


def _read(path: Path) -> pd.DataFrame:
    """A run's table, or an empty frame where the run wrote none or an empty one (no pair, no claim row)."""
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _read_header(path: Path) -> list[str]:
    try:
        return list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        return []


def _tested(t: pd.DataFrame) -> pd.DataFrame:
    if "claim" not in t or "verdict" not in t:
        return t.iloc[0:0]
    return t[t["claim"].fillna("").ne("") & t["verdict"].isin(TESTED)]


def _check(where: str, what: str, value: float, committed: float, tol: float = 1e-7) -> None:
    if not (np.isfinite(committed) and math.isclose(value, committed, rel_tol=tol, abs_tol=tol)):
        raise ValueError(f"{where}: the rebuilt design's {what} is {value!r}, the committed table says {committed!r}; "
                         "the calibration would simulate another quantity (rerun the notebook, or fix the builder)")


def _labels(df: pd.DataFrame, cols) -> list[np.ndarray]:
    return [df[c].astype(str).to_numpy() for c in cols]


# ------------------------------------------------------------------------------------------------ per notebook
def multifactor_instances(tables: Path, benchmark: str, data: pd.DataFrame | None = None) -> list[Instance]:
    """Notebook 1's ``dm-difference``: the two models' linearized pseudo-values of the deviation-metric difference
    (:func:`biaslab.stats.paired.paired_metric_pseudo_values`) on the benchmark's clusters. ``data``: the notebook's
    no-CoT responses with their factors (read from ``responses*.csv`` when None, SSQA's missing factors joined from
    its prompt table)."""
    from .papers.multifactor.responses import PLANS
    from .stats.paired import paired_metric_pseudo_values
    tables = Path(tables)
    rows = _tested(_read(tables / "paired_subgroup_tests.csv"))
    if rows.empty:
        return []
    plan = PLANS[benchmark]
    if data is None:
        data = pd.concat([pd.read_csv(p) for p in sorted(tables.glob("responses*.csv"))], ignore_index=True)
        data = data[data["cot"].astype(str) == "no"] if "cot" in data else data
        lacking = [f for f in plan.ecdf_factors if f not in data or data[f].isna().any()]
        if lacking:
            from .benchmarks import load
            prompts = load(benchmark).prompts.set_index("prompt_id")
            for f in lacking:
                data[f] = data[f].fillna(data["prompt_id"].map(prompts[f])) if f in data else \
                    data["prompt_id"].map(prompts[f])
        data = data[data[plan.outcome].notna()].assign(**{plan.outcome: lambda d: d[plan.outcome].astype(int)})
    out = []
    for r in rows.itertuples():
        where = f"{tables}/paired_subgroup_tests.csv ({r.model_a} - {r.model_b})"
        lin = paired_metric_pseudo_values(data, plan.outcome, plan.ecdf_factors, r.model_a, r.model_b,
                                          ideal=plan.ideal)
        values, stacked = lin[0], lin[1]
        _check(where, "metric difference", float(values.mean()), float(r.metric_difference))
        cl = MULTIFACTOR_CLUSTERS[benchmark]
        d = C.Design(values, _labels(stacked, cl), label=f"{benchmark}: {r.model_a} - {r.model_b}, {values.size} "
                     f"responses, clusters {' x '.join(cl)}")
        _check(where, "number of clusters", d.n_clusters, float(r.n_clusters))
        out.append(Instance("01_multifactor", r.claim, r.family, f"{benchmark} · {r.model_a} - {r.model_b}", d))
    return out


def crows_instances(tables: Path) -> list[Instance]:
    """Notebook 3's ``lpbs-mean`` (per-pair normalized log-probability differences, pairs independent) and
    ``stereotype-share`` (1 when log P(more) > log P(less), ties left out) from ``pair_scores.csv``."""
    tables = Path(tables)
    pairs = _read(tables / "pair_scores.csv")
    out = []
    for stem, col, claim_col in (("likelihood_tests", "d_norm_logprob", "mean_d"), ("preference_tests", None, "pi_hat")):
        for r in _tested(_read(tables / f"{stem}.csv")).itertuples():
            g = pairs[(pairs["model"] == r.model) & (pairs["dataset"] == r.dataset)]
            where = f"{tables}/{stem}.csv ({r.model}, {r.dataset})"
            if col:
                y, null, binary = g[col].to_numpy(float), 0.0, False
            else:
                dl = g["d_logprob"].to_numpy(float)
                y, null, binary = (dl[dl != 0] > 0).astype(float), 0.5, True
            _check(where, claim_col, float(y.mean()), float(getattr(r, claim_col)))
            d = C.Design(y, None, null=null, binary=binary, label=f"{r.dataset}, {r.model}: {y.size} pairs (independent)")
            out.append(Instance("03_crows_pairs_bayes", r.claim, r.family, f"{r.model} · {r.dataset}", d))
    return out


def agentic_instances(tables: Path) -> list[Instance]:
    """Notebook 4's ``group-choice``: each prompt's top group (a category code) clustered by scenario."""
    tables = Path(tables)
    resp = _read(tables / "responses.csv")
    out = []
    for r in _tested(_read(tables / "uniformity_tests.csv")).itertuples():
        cats = [c.rsplit(": ", 1)[0] for c in r.counts.split("; ")]
        g = resp[(resp["model"] == r.model) & (resp["class_type"] == r.class_type)]
        where = f"{tables}/uniformity_tests.csv ({r.model}, {r.class_type})"
        unknown = set(g["top_group"].astype(str)) - set(cats)
        if unknown:
            raise ValueError(f"{where}: top groups {sorted(unknown)} are not among the row's groups {cats}")
        y = g["top_group"].astype(str).map({c: i for i, c in enumerate(cats)}).to_numpy(float)
        _check(where, "number of prompts", float(y.size), float(r.n))
        d = C.Design(y, _labels(g, ["scenario_id"]), categories=len(cats),
                     label=f"{r.class_type}, {r.model}: {y.size} prompts, {len(cats)} groups, clusters scenario_id")
        out.append(Instance("04_agentic_entropy", r.claim, r.family, f"{r.model} · {r.class_type}", d))
    return out


def compare_instances(root: Path, tables: Path) -> list[Instance]:
    """Notebook 5's paired-difference claims: per-unit differences of the two models on the metric's design,
    rebuilt from the source notebooks' responses under ``root`` as :func:`biaslab.papers.compare.tables.paired_table`
    does."""
    from .papers.compare import tables as T
    rows = _tested(_read(Path(tables) / "paired_differences.csv"))
    out = []
    for r in rows.itertuples():
        m = T.metric(r.metric)
        resp = T.unit_responses(m, Path(root))
        both = resp[resp["model"].isin([r.model_a, r.model_b])]
        common = set(both.loc[both["model"] == r.model_a, "unit"]) & set(both.loc[both["model"] == r.model_b, "unit"])
        both = both[both["unit"].isin(common)]
        if m.kind == "bbq":
            both = T._derive(m, both)
        both = both[both[m.outcome].notna()]
        wide = both.pivot_table(index="unit", columns="model", values=m.outcome, aggfunc="mean").dropna()
        first = both.drop_duplicates("unit").set_index("unit").reindex(wide.index)
        cl, _ = T.design(m, both)
        cols = [cl] if isinstance(cl, str) else list(cl or [])
        y = (wide[r.model_a] - wide[r.model_b]).to_numpy(float)
        where = f"{tables}/paired_differences.csv ({r.metric}, {r.model_a} - {r.model_b})"
        _check(where, "difference", float(y.mean()), float(r.difference))
        d = C.Design(y, _labels(first, cols) if cols else None, binary=m.kind == "binary",
                     label=f"{r.metric}: {r.model_a} - {r.model_b}, {y.size} units, clusters "
                           f"{' x '.join(cols) or 'none'}")
        out.append(Instance("05_compare", r.claim, r.family, f"{r.metric} · {r.model_a} - {r.model_b}", d))
    return out


def calm_instances(tables: Path) -> list[Instance]:
    """Notebook 2's claim instances, listed without a design (:data:`NOT_CALIBRATED`)."""
    rows = _tested(_read(Path(tables) / "bias_scores.csv"))
    return [Instance("02_calm", r.claim, r.family, str(r.model), None) for r in rows.itertuples()]


def instances(notebook: str, tables: Path, root: Path | None = None, data: pd.DataFrame | None = None,
              benchmark: str | None = None) -> list[Instance]:
    """The tested claim instances of one run (``tables``: its tables folder; ``root``: the outputs folder notebook
    5 reads; ``benchmark`` and ``data``: notebook 1's)."""
    if notebook == "01_multifactor":
        return multifactor_instances(tables, benchmark, data)
    if notebook == "02_calm":
        return calm_instances(tables)
    if notebook == "03_crows_pairs_bayes":
        return crows_instances(tables)
    if notebook == "04_agentic_entropy":
        return agentic_instances(tables)
    if notebook == "05_compare":
        return compare_instances(root, tables)
    raise ValueError(f"notebook {notebook!r} has no confirmatory claims to calibrate; one of {NOTEBOOKS}")


# ------------------------------------------------------------------------------------------------ calibration
def calibration_table(insts: list[Instance], replications: int, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """One row per instance in the agreed ``calibration.csv`` schema (:data:`biaslab.stats.calibration.
    CALIBRATION_COLUMNS`); an instance without a design says why in ``test`` and has no rates."""
    if replications < 1:
        raise ValueError(f"calibration replications must be >= 1, got {replications}")
    rows = []
    for i, inst in enumerate(insts):
        if inst.design is None:
            rows.append({"claim": inst.claim, "test": NOT_CALIBRATED.get(inst.claim, "no design"),
                         "design": inst.instance, "replications": 0, "alpha": alpha, "seed": seed + i})
            continue
        rows.append(C.calibration_row(inst.claim, inst.design, replications, seed + i, alpha))
    return pd.DataFrame(rows, columns=C.CALIBRATION_COLUMNS)


def run(out, notebook: str, replications: int, seed: int = 0, root: Path | None = None,
        data: pd.DataFrame | None = None, benchmark: str | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """The one call per notebook: calibrate the run's tested claim instances (read from ``out.tables``) and write
    ``tables/calibration.csv``. Returns the table."""
    table = calibration_table(instances(notebook, out.tables, root, data, benchmark), replications, seed, alpha)
    out.table(table, "calibration")
    return table


# ------------------------------------------------------------------------------------------------ familywise error
def budget_shares(plan_path: str | Path | None = None) -> tuple[dict[str, float], str]:
    """The plan's ``budget.shares`` (notebook -> share of alpha), or equal shares over :data:`NOTEBOOKS` where the
    plan has no budget block yet (said in the second value)."""
    raw = yaml.safe_load(Path(plan_path or P.DEFAULT).read_text())
    shares = (raw.get("budget") or {}).get("shares")
    if shares:
        total = sum(shares.values())
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"{plan_path or P.DEFAULT}: budget.shares sum to {total}, not 1; fix the shares")
        return {k: float(v) for k, v in shares.items()}, "the plan's budget.shares"
    return {nb: 1 / len(NOTEBOOKS) for nb in NOTEBOOKS}, "equal shares (the plan has no budget block)"


def family_sizes(root: Path) -> dict[str, set]:
    """notebook -> the families of its claims in the committed tables (tested or not: the run's families)."""
    fams: dict[str, set] = {}
    for nb in NOTEBOOKS:
        for p in sorted((Path(root) / nb).rglob("tables/*.csv")):
            cols = ["claim", "family", "family_kind"]
            if set(cols) <= set(_read_header(p)):
                t = pd.read_csv(p, usecols=cols)
                t = t[t["claim"].fillna("").ne("") & (t["family_kind"] == "confirmatory")]
                fams.setdefault(nb, set()).update(t["family"])
    return fams


def all_instances(root: Path) -> list[Instance]:
    """Every tested claim instance of the committed outputs under ``root``."""
    root = Path(root)
    insts = []
    for nb in NOTEBOOKS:
        if nb == "01_multifactor":
            for bench in MULTIFACTOR_CLUSTERS:
                if (root / nb / bench / "tables").exists():
                    insts += instances(nb, root / nb / bench / "tables", benchmark=bench)
        elif (root / nb / "tables").exists():
            insts += instances(nb, root / nb / "tables", root=root)
    return insts


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values of every row of (R x m) p-values at once (Holm 1979: the i-th smallest times
    ``m - i + 1``, running maximum, capped at 1): :func:`biaslab.stats.multiplicity.adjust` row by row, vectorised
    for the simulation (a test checks they agree)."""
    m = p.shape[1]
    order = np.argsort(p, axis=1)
    adj = np.minimum(np.maximum.accumulate(np.take_along_axis(p, order, 1) * (m - np.arange(m)), axis=1), 1.0)
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, 1)
    return out


def budget_rejections(p: np.ndarray, insts: list[Instance], shares: dict, n_families: dict,
                      alpha: float = 0.05) -> np.ndarray:
    """(R x I) rejections under the budget: Holm within each family at ``alpha * share / n_families`` (equivalently
    ``p_holm * n_families / share < alpha``, the plan's project-scale adjusted p)."""
    rej = np.zeros(p.shape, dtype=bool)
    fam = pd.Series([i.family for i in insts])
    for f, idx in fam.groupby(fam).groups.items():
        nb = insts[idx[0]].notebook
        scale = n_families[nb] / shares[nb]
        cols = list(idx)
        adj = holm_rows(p[:, cols])
        rej[:, cols] = np.minimum(adj * scale, 1.0) < alpha
    return rej


def fwer(root: Path, replications: int, seed: int = 0, alpha: float = 0.05,
         plan_path: str | Path | None = None, insts: list[Instance] | None = None) -> pd.DataFrame:
    """Familywise error of the headline table under the global null: every instance's data swapped / relabelled
    within clusters (independently across instances), each claim's test, the budget applied, the share of
    replications with at least one false "distinguishable", with its Monte Carlo SE. Also the same count under
    Holm at alpha within each family and no split (the rule the budget replaces), for comparison."""
    insts = all_instances(root) if insts is None else insts
    sim = [i for i in insts if i.design is not None]
    shares, source = budget_shares(plan_path)
    fams = family_sizes(root)
    for i in sim:
        fams.setdefault(i.notebook, set()).add(i.family)
    n_fam = {nb: len(f) for nb, f in fams.items()}
    p = np.column_stack([C.simulate(i.claim, i.design, replications, seed + k, alpha)["p"] for k, i in enumerate(sim)]
                        ) if sim else np.ones((replications, 0))          # no tested claim: no false rejection
    rows = []
    for rule, rej in (("budget", budget_rejections(p, sim, shares, n_fam, alpha)),
                      ("holm within families, no split", budget_rejections(
                          p, sim, {nb: 1.0 for nb in n_fam}, {nb: 1 for nb in n_fam}, alpha))):
        f = float(np.mean(rej.any(axis=1)))
        rows.append({"rule": rule, "instances": len(sim), "not_simulated": len(insts) - len(sim),
                     "families": sum(n_fam.values()), "replications": replications, "alpha": alpha, "fwer": f,
                     "fwer_mc_se": math.sqrt(f * (1 - f) / replications), "shares": source, "seed": seed})
    return pd.DataFrame(rows)


def write_fwer(root: Path, replications: int = FWER_REPLICATIONS, seed: int = 0,
               plan_path: str | Path | None = None) -> tuple[pd.DataFrame, Path]:
    """:func:`fwer` over the outputs under ``root``, written to ``root/fwer.csv``."""
    if replications < 1:
        raise ValueError(f"--replications must be >= 1, got {replications}")
    table = fwer(Path(root), replications, seed, plan_path=plan_path)
    path = Path(root) / "fwer.csv"
    table.to_csv(path, index=False)
    return table, path
