"""``biaslab import``: another harness's log in, biaslab's tables out, through the same code path as a model.

The log is loaded as a model (``{"imported": PATH}``, :mod:`biaslab.models.imported`) and scored by a
:class:`~biaslab.scoring.Scorer` whose backend answers from the log (:mod:`biaslab.scoring.backends.imported`):
CrowS-Pairs gives notebook 3's ``pair_scores`` and ``likelihood_tests`` (eq. 2-4, t / Wilcoxon / JZS Bayes factor)
and ``harness_check`` (the harness's own ``pct_stereotype`` and ``likelihood_diff``
recomputed from the per-pair log-likelihoods); BBQ gives notebook 1's ``responses`` and
``accuracy_bias_score_intervals`` (template-clustered); MBBQ the same per language and set, prefixed ``mbbq_``, with
the loader's item, language and set (notebook 7's keys). Every row the log could not give is in ``excluded`` with its
reason. ``MANIFEST.json`` records the run's identity as the log states it.
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from .. import models as bl_models, scoring
from ..benchmarks import crows_pairs
from ..files.hashing import sha256_file
from ..files.storage import atomic_write_text
from ..importers.eee import confined, path_component
from ..report.outputs import package_versions
from ..stats import hypothesis as hyp


def _gap(lg) -> dict:
    """Beside a harness's own value: how many of the task's rows the import excluded, and that they explain a
    difference (the harness aggregated every row; biaslab's value is over the rows it kept)."""
    k = len(lg.excluded)
    return {"n_excluded": k, "note": (f"{k} row(s) of {lg.task} excluded (tables/excluded.csv): the harness's value "
                                      "includes them, biaslab's does not, which explains a difference") if k else ""}


def crows_tables(sc, lm, crows_logs) -> dict[str, pd.DataFrame]:
    frames, checks = [], []
    for lg in crows_logs:
        frames.append(df := crows_pairs.pair_scores(sc, lg.items, lg.task))      # notebook 3's table, eq. 2-4
        ours = crows_pairs.harness_metrics([a - b for a, b in zip(df.logp_more, df.logp_less)])
        for metric, value in ours.items():
            rep = lg.reported.get(f"{metric},none", lg.reported.get(metric))
            checks.append({"model": lm.name, "dataset": lg.task, "metric": metric, "n": len(df),
                           "harness": rep, "recomputed": value,
                           "abs_difference": abs(value - rep) if rep is not None else None, **_gap(lg)})
    pairs = pd.concat(frames, ignore_index=True)
    lik = hyp.likelihood_tests(pairs, by=("model", "dataset"))
    return {"pair_scores": pairs, "likelihood_tests": lik, "harness_check": pd.DataFrame(checks)}


def bbq_harness_check(lm, lg) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The harness's own BBQ aggregates beside biaslab's on the same rows, overall and per category: accuracy and
    bias score from BBQ's ``target_loc`` (:func:`biaslab.benchmarks.bbq.bias_scores`), and the bias score
    recomputed with the harness's own biased answers and aggregation (:func:`.importers.lm_eval.harness_bias_score`),
    which must equal the harness's (``explained``). Second table: every row whose harness mapping differs from
    ``target_loc``, with why."""
    from ..benchmarks import bbq
    from ..importers import lm_eval
    items, rows = lg.items, []
    if "harness_biased" not in items.columns or items["harness_biased"].isna().all():
        return pd.DataFrame(), pd.DataFrame()
    differs = items["harness_biased"].astype(str) != items["biased_index"].astype(int).astype(str)
    scopes = [("all", items)] + list(items.groupby("category", sort=True))
    for scope, part in scopes:
        ours = bbq.bias_scores(part.assign(scope=scope), ["scope"]).set_index("context_condition")
        for cond, short in (("ambig", "amb"), ("disambig", "disamb")):
            sub = part[part["context_condition"] == cond]
            if sub.empty:
                continue
            suffix = "" if scope == "all" else f"_{scope}"
            for metric, key, mine, theirs_mapping in (
                    ("accuracy", f"accuracy_{short}", ours.loc[cond, "accuracy"], ours.loc[cond, "accuracy"]),
                    ("bias_score", f"{short}_bias_score{suffix}", ours.loc[cond, "bias_score"],
                     lm_eval.harness_bias_score(sub, cond == "ambig"))):
                if metric == "accuracy" and scope != "all":
                    continue                                   # lm-eval reports accuracy overall only
                rep = lg.reported.get(f"{key},none")
                rows.append({"model": lm.name, "dataset": lg.task, "scope": scope, "context_condition": cond,
                             "metric": metric, "n": len(sub), "n_mapping_differs": int(differs[sub.index].sum()),
                             "harness": rep, "biaslab_target_loc": float(mine),
                             "abs_difference": abs(float(mine) - rep) if rep is not None else None,
                             "recomputed_with_harness_mapping": float(theirs_mapping),
                             "explained": bool(rep is not None and abs(float(theirs_mapping) - rep) < 1e-9),
                             **_gap(lg)})
    diff = items[differs]
    listed = pd.DataFrame({"model": lm.name, "dataset": lg.task, "prompt_id": diff["prompt_id"],
                           "category": diff["category"], "example_id": diff["example_id"],
                           "context_condition": diff["context_condition"],
                           "question_polarity": diff["question_polarity"], "target_loc": diff["biased_index"],
                           "harness_biased": diff["harness_biased"], "choice": diff["choice"],
                           "why": [lm_eval.mapping_difference(r) for _, r in diff.iterrows()]})
    return pd.DataFrame(rows), listed


def bbq_tables(lm, bbq_logs) -> dict[str, pd.DataFrame]:
    from ..benchmarks.bbq import score_intervals
    items = pd.concat([lg.items.assign(dataset=lg.task) for lg in bbq_logs], ignore_index=True)
    items = items.assign(model=lm.name)
    checks = [bbq_harness_check(lm, lg) for lg in bbq_logs if lg.harness == "lm-eval"]
    out = {"responses": items,
           "accuracy_bias_score_intervals": score_intervals(items, ["model"], "template")}
    if any(len(c) for c, _ in checks):
        out["bbq_harness_check"] = pd.concat([c for c, _ in checks], ignore_index=True)
        out["bbq_mapping_differences"] = pd.concat([d for _, d in checks], ignore_index=True)
    return out


def mbbq_tables(lm, logs) -> dict[str, pd.DataFrame]:
    """MBBQ's responses (keyed as notebook 7's: ``prompt_id``, ``item``, ``language``, ``set``), accuracy and bias
    scores per language x set with template-clustered intervals (``dataset``: the task(s) that hold that language
    and set), and the harness's own accuracy per task beside the share of correct answers imported
    (``harness_check``)."""
    from ..benchmarks.bbq import score_intervals
    items = pd.concat([lg.items.assign(dataset=lg.task) for lg in logs], ignore_index=True).assign(model=lm.name)
    check = [{"model": lm.name, "dataset": lg.task, "metric": "acc", "n": len(lg.items),
              "harness": lg.reported.get("acc,none"), "recomputed": float(lg.items["correct"].mean()), **_gap(lg)}
             for lg in logs]
    scores = score_intervals(items, ["model", "language", "set"], "template")
    tasks = items.groupby(["language", "set"])["dataset"].agg(lambda d: "+".join(sorted(set(d))))
    scores.insert(1, "dataset", [tasks[key] for key in zip(scores["language"], scores["set"])])   # each its own
    return {"mbbq_responses": items, "mbbq_accuracy_bias_score_intervals": scores,
            "mbbq_harness_check": pd.DataFrame(check)}


def import_run(fmt: str, path: str | Path, out: str | Path, tokenizer: str | None = None,
               name: str | None = None, benchmark: str | None = None) -> list[dict]:
    """Import the log(s) at ``path`` and write biaslab's tables under ``out``; returns what was written, per model.

    One model per run folder: logs of several models become ``out/<model>/`` each (``name`` then is refused: it
    names one model). ``benchmark`` names what a BBQ-shaped lm-eval task is where its texts cannot tell (``bbq`` or
    ``mbbq``). The lock of notebook runs (:class:`biaslab.run.publish.RunLock`) on ``out`` (and on each
    ``out/<model>``) is held from the first read to the atomic publish, so a second import into that folder while
    this one runs is refused; a folder this call created for the lock file and did not fill is removed again."""
    from .. import importers
    from . import publish
    out = Path(out)
    created = [p for p in (out, *out.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        held.callback(lambda: [p.rmdir() for p in created if p.is_dir() and not any(p.iterdir())])
        run_id = held.enter_context(publish.RunLock(out, publish.new_run_id())).run_id
        logs = importers.read(fmt, path, benchmark)
        models = sorted({lg.model for lg in logs})
        if len(models) > 1 and name:
            raise importers.ImportError_(f"{path} holds runs of {len(models)} models ({', '.join(models)}); --name "
                                         "names one model: point at one model's run folder, or leave --name out "
                                         f"(each model is then written to {out}/<model>/)")
        targets = {models[0]: out} if len(models) == 1 else {
            m: confined(out, path_component(m, "model name")) for m in models}
        for final in targets.values():
            if final != out:
                out.mkdir(exist_ok=True)
                held.enter_context(publish.RunLock(final, run_id))
        return [_import_one(fmt, path, final, m, tokenizer, name, benchmark, run_id) for m, final in targets.items()]


def _import_one(fmt, path, final: Path, model: str, tokenizer, name, benchmark, run_id: str) -> dict:
    """One model's run folder, written to staging and swapped in (the caller holds the folder's lock)."""
    from .. import importers
    from . import publish
    if final.is_dir() and any(final.iterdir()) and not (final / "MANIFEST.json").exists():
        raise importers.ImportError_(f"{final} exists and is not a run folder (no MANIFEST.json): an import replaces "
                                     "its folder, so name a new or empty folder with --out")
    spec = {"imported": str(path), "format": fmt, "model": model, **({"tokenizer": tokenizer} if tokenizer else {}),
            **({"name": name} if name else {}), **({"benchmark": benchmark} if benchmark else {})}
    t0 = time.time()
    lm = bl_models.load(spec)
    sc = scoring.Scorer(lm, cache_dir=False, progress=False)
    tables: dict[str, pd.DataFrame] = {}
    crows = [lg for lg in lm.logs if lg.kind == importers.CROWS and "sent_more" in lg.items.columns]
    bbq = [lg for lg in lm.logs if lg.kind == importers.BBQ and "choice" in lg.items.columns]
    if crows:
        tables.update(crows_tables(sc, lm, crows))
    if bbq:
        tables.update(bbq_tables(lm, bbq))
    mbbq = [lg for lg in lm.logs if lg.kind == importers.MBBQ and "choice" in lg.items.columns]
    if mbbq:
        tables.update(mbbq_tables(lm, mbbq))
    rest = [lg for lg in lm.logs if lg.harness == "eee" and lg not in crows + bbq + mbbq]
    for lg in rest:                    # biaslab's own tables, back from Every Eval Ever records
        tables[lg.task] = pd.concat([tables.get(lg.task, pd.DataFrame()), lg.items], ignore_index=True)
    tables["excluded"] = pd.concat([lg.excluded.assign(task=lg.task) for lg in lm.logs]
                                   + [pd.DataFrame(columns=["row", "reason", "task"])], ignore_index=True)
    staging = publish.staging_folder(final, run_id)
    try:
        (staging / "tables").mkdir(parents=True)
        files = {}
        for stem, df in tables.items():
            p = confined(staging / "tables", f"{stem}.csv")
            atomic_write_text(p, df.to_csv(index=False))
            files[f"tables/{stem}.csv"] = sha256_file(p)
        notes = [f"{lg.task}: {len(lg.excluded)} row(s) excluded: "
                 + "; ".join(f"{n} {r}" for r, n in lg.excluded.reason.value_counts().items())
                 for lg in lm.logs if len(lg.excluded)]
        notes += [f"{lg.task}: biased answer of {n} row(s) from {src}" for lg in bbq
                  for src, n in lg.items.get("biased_source", pd.Series(dtype=str)).value_counts().items()]
        manifest = {"notebook": "import", "variant": fmt, "source": str(Path(path).resolve()),
                    "models": {lm.name: lm.fingerprint}, "packages": package_versions(("biaslab",)),
                    "status": "ok", "wall_time_s": round(time.time() - t0, 1),
                    "notes": notes, "files": files}
        atomic_write_text(staging / "MANIFEST.json", json.dumps(manifest, indent=2, default=str))
        publish.swap_in(staging, final, run_id)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"model": lm.name, "out": final, "tables": {k: len(v) for k, v in tables.items()},
            "excluded": int(len(tables["excluded"])), "tasks": [(lg.task, lg.kind, len(lg.items)) for lg in lm.logs],
            "not_imported": {lg.task: lg.excluded.reason.iloc[0].removeprefix("task not imported: ")
                             for lg in lm.logs if lg.kind == importers.UNSUPPORTED and len(lg.excluded)}}
