"""``biaslab import``: another harness's log in, biaslab's tables out, through the same code path as a model.

The log is loaded as a model (``{"imported": PATH}``, :mod:`biaslab.models.imported`) and scored by a
:class:`~biaslab.scoring.Scorer` whose backend answers from the log (:mod:`biaslab.scoring.backends.imported`):
CrowS-Pairs gives notebook 3's ``pair_scores`` and ``likelihood_tests`` (eq. 2-4, t / Wilcoxon / JZS Bayes factor,
Holm across bias types) and ``harness_check`` (the harness's own ``pct_stereotype`` and ``likelihood_diff``
recomputed from the per-pair log-likelihoods); BBQ gives notebook 1's ``responses`` and
``accuracy_bias_score_intervals`` (template-clustered). Every row the log could not give is in ``excluded`` with its
reason. ``MANIFEST.json`` records the run's identity as the log states it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from . import models as bl_models
from . import scoring
from .benchmarks import crows_pairs
from .filehash import sha256_file
from .outputs import atomic_write_text
from .stats import hypothesis as hyp


def crows_tables(sc, lm, crows_logs) -> dict[str, pd.DataFrame]:
    frames, checks = [], []
    for lg in crows_logs:
        frames.append(df := crows_pairs.pair_scores(sc, lg.items, lg.task))      # notebook 3's table, eq. 2-4
        ours = crows_pairs.harness_metrics([a - b for a, b in zip(df.logp_more, df.logp_less)])
        for metric, value in ours.items():
            rep = lg.reported.get(f"{metric},none", lg.reported.get(metric))
            checks.append({"model": lm.name, "dataset": lg.task, "metric": metric, "n": len(df),
                           "harness": rep, "recomputed": value,
                           "abs_difference": abs(value - rep) if rep is not None else None})
    pairs = pd.concat(frames, ignore_index=True)
    lik = hyp.likelihood_tests(pairs, by=("model", "dataset"))
    return {"pair_scores": pairs, "likelihood_tests": lik, "harness_check": pd.DataFrame(checks)}


def bbq_tables(lm, bbq_logs) -> dict[str, pd.DataFrame]:
    from .papers.multifactor import bbq_scores
    items = pd.concat([lg.items.assign(dataset=lg.task) for lg in bbq_logs], ignore_index=True)
    items = items.assign(model=lm.name)
    return {"responses": items,
            "accuracy_bias_score_intervals": bbq_scores.score_intervals(items, ["model"], "template")}


def import_run(fmt: str, path: str | Path, out: str | Path, tokenizer: str | None = None,
               name: str | None = None) -> dict:
    """Import the log(s) at ``path`` and write biaslab's tables under ``out``; returns what was written."""
    spec = {"imported": str(path), "format": fmt, **({"tokenizer": tokenizer} if tokenizer else {}),
            **({"name": name} if name else {})}
    t0 = time.time()
    lm = bl_models.load(spec)
    sc = scoring.Scorer(lm, cache_dir=False, progress=False)
    tables: dict[str, pd.DataFrame] = {}
    crows = [lg for lg in lm.logs if lg.kind == "crows_pairs" and "sent_more" in lg.items.columns]
    bbq = [lg for lg in lm.logs if lg.kind == "bbq" and "choice" in lg.items.columns]
    if crows:
        tables.update(crows_tables(sc, lm, crows))
    if bbq:
        tables.update(bbq_tables(lm, bbq))
    rest = [lg for lg in lm.logs if lg not in crows + bbq]
    for lg in rest:                    # biaslab's own tables, back from Every Eval Ever records
        tables[lg.task] = pd.concat([tables.get(lg.task, pd.DataFrame()), lg.items], ignore_index=True)
    tables["excluded"] = pd.concat([lg.excluded.assign(task=lg.task) for lg in lm.logs]
                                   + [pd.DataFrame(columns=["row", "reason", "task"])], ignore_index=True)
    o = Path(out)
    (o / "tables").mkdir(parents=True, exist_ok=True)
    files = {}
    for stem, df in tables.items():
        p = o / "tables" / f"{stem}.csv"
        atomic_write_text(p, df.to_csv(index=False))
        files[f"tables/{stem}.csv"] = sha256_file(p)
    manifest = {"notebook": "import", "variant": fmt, "source": str(Path(path).resolve()),
                "models": {lm.name: lm.fingerprint}, "status": "ok", "wall_time_s": round(time.time() - t0, 1),
                "notes": [f"{lg.task}: {len(lg.excluded)} row(s) excluded: "
                          + "; ".join(f"{n} {r}" for r, n in lg.excluded.reason.value_counts().items())
                          for lg in lm.logs if len(lg.excluded)], "files": files}
    atomic_write_text(o / "MANIFEST.json", json.dumps(manifest, indent=2, default=str))
    return {"model": lm.name, "tables": {k: len(v) for k, v in tables.items()},
            "excluded": int(len(tables["excluded"])), "tasks": [(lg.task, lg.kind, len(lg.items)) for lg in lm.logs]}
