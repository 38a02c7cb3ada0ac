"""Every Eval Ever (EvalEval coalition, schema 0.3.0): biaslab's run folders out as EEE records, EEE records in.

Out (:func:`export_run`): one aggregate record per model of a run folder (``eval.schema.json``) whose
``evaluation_results`` are every interval the run's tables hold: a table with a ``model`` column and a
``<x>ci_low``/``<x>ci_high`` pair gives one result per row, its score the pair's estimate column, its
``uncertainty.confidence_interval`` the bounds with the table's ``ci_method`` as method (95 %, as every interval
biaslab writes), its ``metric_config`` the metric's kind, unit, bounds and direction (:data:`METRICS`), its name the
dataset, table, metric and the text columns that tell the rows apart; CrowS-Pairs' per-pair table adds lm-eval's
``pct_stereotype`` and ``likelihood_diff``. Rows whose estimate or bounds are not finite are counted per table in
``source_metadata``, not written. An imported run's record names the harness that ran the model as its
``eval_library``, at the version its log states (:func:`_eval_library`), and no record names a local folder
(:func:`no_local_paths`). The per-item tables (:data:`INSTANCE_TABLES`) become instance-level records
(``instance_level_eval.schema.json``), one per row (a CrowS-Pairs pair without a finite log-probability difference
is counted, not written): ``input.raw`` the prompt text where the table holds it,
``output.raw`` the chosen answer, ``evaluation.score`` 1 when the item went the stereotyped way (CrowS-Pairs:
log P(more) > log P(less), lm-eval's ``pct_stereotype``; the other benchmarks: ``deviated``), ``is_correct`` the
``correct`` column where there is one (else: not stereotyped; ``metadata.is_correct_means`` says which), and
``metadata.biaslab_row`` the whole row as JSON, so that importing the records gives the same table back. Both are
validated with ``jsonschema`` against the pinned schema copies in ``schemas/`` (see its README); the official
validator of the same release runs in ``tests/test_eee_validator.py``.

In (:func:`read`): instance-level records (``*.jsonl``), each checked against the instance schema; rows that
carry ``biaslab_row`` come back as their table; BBQ records of other converters (HELM's included) are read when
their metadata holds BBQ's category, context condition and polarity and ``answer_attribution`` names one of the
three ``input.choices``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from pathlib import Path

import pandas as pd

from ..files.storage import atomic_write_text
from .base import BBQ, BBQ_META, CROWS, MBBQ, UNSUPPORTED, ImportedLog, ImportError_, json_lines, not_bbq, supported

SCHEMA_VERSION = "0.3.0"
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMA_SHA256 = {"eval.schema.json": "c9c6195aec8a9dfa0b2aba4924ac1aa8a184c9d8ca97cee778cb531088e39b48",
                 "instance_level_eval.schema.json":
                     "b16b7fa7f0aa32763444179d94ffb2336ddb12c3fd2903835fe491666c1ff3e6"}
#: per-item tables exported as instance-level records (``mbbq_responses``: an lm-eval MBBQ import's)
INSTANCE_TABLES = ("pair_scores", "responses", "mbbq_responses")
#: the estimate an unprefixed ci_low/ci_high pair bounds, first present wins
ESTIMATES = ("estimate", "bias_score", "rate", "deviation_rate", "difference", "mean", "log_disparity", "rho",
             "agreement", "coef", "metric_difference", "mean_gain")
_PREFIX_ESTIMATE = {"pi_": "pi_hat", "bias_": "bias_score"}


def validator(name: str):
    import jsonschema
    schema = json.loads((SCHEMA_DIR / name).read_text())
    return jsonschema.Draft7Validator(schema)


def validate(record: dict, name: str) -> None:
    """Raise ValueError naming the first schema violation of ``record`` against the pinned ``name`` schema."""
    err = next(iter(sorted(validator(name).iter_errors(record), key=lambda e: list(e.path))), None)
    if err is not None:
        where = "/".join(str(p) for p in err.path) or "(record)"
        raise ValueError(f"not a valid Every Eval Ever record ({name} {SCHEMA_VERSION}) at {where}: {err.message}")


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _intervals(df: pd.DataFrame) -> list[tuple[str, str, str, str | None]]:
    """(estimate, low, high, method column) of each interval in a table."""
    out = []
    for low in [c for c in df.columns if c.endswith("ci_low")]:
        prefix = low[: -len("ci_low")]
        high = prefix + "ci_high"
        if high not in df.columns:
            continue
        cands = [_PREFIX_ESTIMATE.get(prefix, prefix.rstrip("_"))] if prefix else ESTIMATES
        est = next((c for c in cands if c in df.columns), None)
        method = next((m for m in (prefix + "ci_method", "ci_method") if m in df.columns), None)
        if est is not None:
            out.append((est, low, high, method))
    return out


#: what a metric means, by its estimate column (and, for CrowS-Pairs' likelihood tests, by the ``score`` it tests):
#: (metric kind, unit, min, max, lower_is_better, how to read it). Bias scores follow lm-eval's
#: ``higher_is_better: false``; a signed effect has no better end, and says so in ``direction``.
_UNBOUNDED = ("-Infinity", "Infinity")
METRICS = {
    "accuracy": ("accuracy", "proportion", 0.0, 1.0, False, "share of correct answers"),
    "bias_score": ("bias_score", "score", -1.0, 1.0, True,
                   "BBQ bias score (Parrish et al. 2022, sec. 4.1): -1 all anti-stereotyped, 0 none, 1 all biased"),
    "rate": ("proportion", "proportion", 0.0, 1.0, True, "share of biased (deviated) answers"),
    "deviation_rate": ("proportion", "proportion", 0.0, 1.0, True, "share of biased (deviated) answers"),
    "pi_hat": ("proportion", "proportion", 0.0, 1.0, False, "share of pairs where the stereotyped sentence is "
                                                            "preferred; 0.5 is no preference"),
    "ss": ("stereotype_score", "percent", 0.0, 100.0, False, "stereotype score, 50 is no preference"),
    "agreement": ("agreement", "proportion", 0.0, 1.0, False, "share of items answered alike"),
    "kappa": ("kappa", "score", -1.0, 1.0, False, "Cohen's kappa"),
    "pct_stereotype": ("proportion", "proportion", 0.0, 1.0, False,
                       "lm-eval's pct_stereotype: share of pairs with log P(more) > log P(less); 0.5 is no bias"),
    "likelihood_diff": ("mean_abs_difference", "nats", 0.0, "Infinity", True,
                        "lm-eval's likelihood_diff: mean |log P(more) - log P(less)|"),
    "logprob": ("mean_difference", "nats", *_UNBOUNDED, False, "eq. 2: mean log P(more) - log P(less); 0 no bias"),
    "norm_logprob": ("mean_difference", "nats per token", *_UNBOUNDED, False,
                     "eq. 3 (LPBS): mean of length-normalised log-probability differences; 0 no bias"),
    "perplexity": ("pseudo_median_difference", "perplexity", *_UNBOUNDED, False,
                   "eq. 4 (PPB): perplexity differences; 0 no bias"),
}


#: a table whose estimate column means something else than its name's default
TABLE_METRICS = {("bias_scores", "bias_score"): ("bias_score", "percent", 0.0, "Infinity", True,
                                                 "CALM bias score (Gupta et al. 2023): relative accuracy gap between "
                                                 "groups in percent; 0 no bias")}


def _metric(est: str, r, stem: str = "") -> tuple[str, tuple]:
    """(metric name, METRICS entry) of the estimate column ``est`` on row ``r`` of table ``stem``."""
    if (stem, est) in TABLE_METRICS:
        return est, TABLE_METRICS[(stem, est)]
    key = str(r["score"]) if est == "estimate" and "score" in r.index and str(r["score"]) in METRICS else est
    key = str(r["metric"]) if "metric" in r.index and isinstance(r["metric"], str) and r["metric"] in METRICS \
        else key
    return key, METRICS.get(key, ("estimate", "score", *_UNBOUNDED, False, "a signed effect; 0 is the null"))


def _label_columns(df: pd.DataFrame, used: set) -> list[str]:
    """The text columns that tell a table's rows apart (any non-numeric dtype: pandas 3 reads text as ``str``)."""
    skip = used | {"model", "ci_method", "p_method", "family", "family_kind", "mde_note", "mde_design",
                   "estimate_method", "bf_prior", "bf_prior_range", "evidence", "verdict",
                   "null_meaning", "direction", "orientation", "comparability", "evidence_default_prior",
                   "responder_status", "robustness", "lead_test", "p_adjust_method", "claim", "bf_direction"}
    return [c for c in df.columns if c not in skip and not pd.api.types.is_numeric_dtype(df[c])
            and not pd.api.types.is_bool_dtype(df[c]) and df[c].nunique(dropna=True) > 1
            and not c.endswith(("_method", "_note", "_reason", "_range"))]


def _rid(*parts) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]


def _model_info(name: str, manifest: dict, model_ids=None) -> dict:
    """EEE ``model_info``; ``model_ids(name, fingerprint) -> "developer/model"`` resolves the hub id (the model
    registry's :func:`biaslab.models.embedded.hub_id`, passed in: importers do not import models)."""
    from ..benchmarks.ssqa import RELEASED_MODEL_IDS
    fp = (manifest.get("models") or {}).get(name, {})
    mid = RELEASED_MODEL_IDS.get(name) or (model_ids(name, fp) if model_ids else str(fp.get("original") or name))
    imported = fp.get("backend") == "imported"
    details = {"deployment_type": "externally_managed" if fp.get("backend") == "served" else "self_deployed",
               "model_availability": "open_weights" if fp.get("weights_sha256") or "/" in mid else "unknown",
               "biaslab_name": name}
    details.update({k: str(fp[k]) for k in ("source", "quantization", "gguf_sha256", "weights_sha256",
                                             "tokenizer_sha256", "dtype", "device") if fp.get(k)})
    engine = {"name": "transformers"} if fp.get("weights_sha256") else {"name": str(fp.get("backend", "unknown"))}
    if imported:
        tasks = _imported_tasks(fp)
        task = next(iter(tasks.values()), {})
        engine = {"name": str(task.get("model_backend") or task.get("harness") or "unknown")}
        details.update({k: str(task[k]) for k in ("harness", "harness_version", "model_args", "revision")
                        if task.get(k)})
        details["source"] = (f"imported from the {task.get('harness', fp.get('format'))} log "
                             f"{Path(str(fp.get('path', ''))).name}")
        details["source_files_sha256"] = json.dumps({f: h for t in tasks.values()
                                                     for f, h in (t.get("files") or {}).items()}, sort_keys=True)
    if name in RELEASED_MODEL_IDS:
        details.update(source="answers released with the paper's data (the exact checkpoint is not stated there)",
                       deployment_type="externally_managed", model_availability="open_weights")
    info = {"name": name, "id": mid, "inference_platform": "local", "inference_engine": engine,
            "additional_details": {k: no_local_paths(v) for k, v in details.items()}}
    if "/" in mid:
        info["developer"] = mid.split("/")[0]
    return info


def _imported_tasks(fp: dict) -> dict:
    """The tasks of an imported model's fingerprint that were imported (not those listed as not imported)."""
    return {t: v for t, v in (fp.get("tasks") or {}).items() if v.get("kind") != UNSUPPORTED}


#: what a log's ``harness_commit`` and ``launch_dir_git_commit`` are (said beside them in every imported record)
COMMITS = ("harness_commit: the harness's own commit, which its logs do not record ('unknown'); "
           "launch_dir_git_commit: the git commit of the folder the harness was started in, as its log records it "
           "(lm-eval's git_hash, inspect's revision), which is not the harness's")


def _eval_library(name: str, manifest: dict, version: str) -> dict:
    """EEE ``eval_library``: biaslab for its own runs; for an imported run the harness that ran the model, its
    version as the log states it (else "unknown"), and per task its commit (unknown), the launch folder's commit,
    model_args and task version, biaslab named as the converter."""
    fp = (manifest.get("models") or {}).get(name, {})
    if fp.get("backend") != "imported":
        return {"name": "biaslab", "version": str(version)}
    tasks = _imported_tasks(fp)
    names = sorted({str(t.get("harness") or fp.get("format") or "unknown") for t in tasks.values()}) or ["unknown"]
    versions = sorted({str(t["harness_version"]) for t in tasks.values() if t.get("harness_version")})
    out = {"imported_from": str(fp.get("format", "")), "text_matching": str(fp.get("text_matching", "")),
           "converted_by": f"biaslab {version}", "commits": COMMITS}
    for task, t in tasks.items():
        out[f"{task}.harness_commit"] = str(t.get("harness_commit") or "unknown")
        out.update({f"{task}.{k}": str(t[k]) for k in ("harness_version", "launch_dir_git_commit", "model_args",
                                                        "task_version", "date") if t.get(k) not in (None, "")})
    return {"name": " + ".join(names), "version": ", ".join(versions) or "unknown",
            "additional_details": {k: no_local_paths(v) for k, v in out.items()}}


#: an absolute local path in a text (``/…``, ``~/…``, ``C:\…``; not a URL's ``//host/…``), up to a separator
_LOCAL_PATH = re.compile(r"(?<![\w.:/\\~])(?:~|[A-Za-z]:)?[/\\][^\s,;'\"]+")


def no_local_paths(text: str) -> str:
    """``text`` with each absolute local path reduced to ``<local>/`` and its last component: a record names no
    folder of the machine that wrote it (a model folder, a log's location)."""
    return _LOCAL_PATH.sub(lambda m: "<local>/" + re.split(r"[/\\]", m.group().rstrip("/\\"))[-1], str(text))


def _run_identity(manifest: dict, model: str, content: str) -> str:
    """What identifies the run a record describes, hashed into its ``evaluation_id``: an imported run is the log it
    was read from (each file's sha256, per task with its kind) and the model's name, so that importing the same
    log again gives the same id and a re-export replaces its own record; a run of biaslab's own is its content
    (:func:`_run_hash`)."""
    fp = (manifest.get("models") or {}).get(model, {})
    if fp.get("backend") != "imported":
        return content
    key = {"model": model, "format": fp.get("format"),
           "tasks": {t: [v.get("kind"), v.get("files")] for t, v in (fp.get("tasks") or {}).items()}}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _tables(folder: Path) -> dict[str, pd.DataFrame]:
    """The run's tables; a table with no columns (an analysis with nothing to report) is an empty frame."""
    out = {}
    for p in sorted((folder / "tables").glob("*.csv")):
        try:
            out[p.stem] = pd.read_csv(p, low_memory=False)
        except pd.errors.EmptyDataError:
            out[p.stem] = pd.DataFrame()
    return out


def _uuid4(key: str) -> str:
    """A version-4-shaped UUID derived from ``key`` (the schema's file names need one; derived, so a re-export
    writes the same names)."""
    import uuid
    b = bytearray(hashlib.sha256(key.encode()).digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(b)))


def _run_hash(folder: Path) -> str:
    """The run's content hash: its MANIFEST's bytes (which hash every table), else every table's bytes."""
    h = hashlib.sha256()
    files = [folder / "MANIFEST.json"] if (folder / "MANIFEST.json").exists() else sorted(
        (folder / "tables").glob("*.csv"))
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def path_component(text: str, what: str) -> str:
    """A datastore path component from ``text``: portable characters only, never ``.``/``..`` or empty."""
    c = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(text)).strip(".")
    if not c:
        raise ValueError(f"{what} {text!r} gives no usable folder name; rename it (letters, digits, - _ .)")
    return c


def _crows_summary(tables: dict[str, pd.DataFrame], model: str) -> list[tuple[dict, float, int]]:
    """lm-eval's ``pct_stereotype`` and ``likelihood_diff`` per dataset from the per-pair scores (no interval)."""
    from ..benchmarks.crows_pairs import harness_metrics
    df = tables.get("pair_scores")
    if df is None or "model" not in df.columns or "d_logprob" not in df.columns:
        return []
    out = []
    rows = df[(df["model"].astype(str) == model) & df["d_logprob"].map(_finite)]       # pairs with an outcome
    for ds, g in rows.groupby("dataset", sort=True) if "dataset" in rows.columns else [("", rows)]:
        for metric, value in harness_metrics(g["d_logprob"]).items():
            out.append(({"dataset": str(ds)}, metric, value, len(g)))
    return out


def _result(run: str, stem: str, metric: str, meaning: tuple, labels: dict, score: float, unc: dict | None,
            dataset: str, column: str) -> dict:
    kind, unit, lo, hi, lower, what = meaning
    label = ", ".join(f"{k}={v}" for k, v in labels.items())
    rname = f"{dataset} {stem}.{metric}" + (f" [{label}]" if label else "")
    res = {"evaluation_result_id": _rid(run, rname), "evaluation_name": rname,
           "source_data": {"dataset_name": dataset, "source_type": "other",
                           "additional_details": {"table": f"tables/{stem}.csv", "column": column,
                                                  **{k: str(v) for k, v in labels.items()}}},
           "metric_config": {"metric_id": f"{stem}.{metric}", "metric_name": metric, "metric_kind": kind,
                             "metric_unit": unit, "lower_is_better": lower, "score_type": "continuous",
                             "min_score": lo, "max_score": hi,
                             "evaluation_description": f"{what} (biaslab table {stem}, column {column})"},
           "score_details": {"score": float(score)}}
    if unc:
        res["score_details"]["uncertainty"] = unc
    return res


def export_run(folder: str | Path, out: str | Path | None = None, biaslab_version: str | None = None,
               name: str | None = None, model_ids=None) -> dict:
    """Every Eval Ever records of one run folder (with ``MANIFEST.json`` and ``tables/``), validated.

    Returns ``{model: {"aggregate": record, "instances": [records], "skipped": {table: n}}}``; with ``out``, writes
    the Every Eval Ever datastore layout ``<out>/data/<name>/<developer>/<model>/<uuid>.json`` and
    ``<uuid>_samples.jsonl`` (the aggregate names the jsonl and its sha256); ``name``: the run's name there
    (default: the folder's name); ``model_ids``: see :func:`_model_info`. ``evaluation_id`` and the UUID derive
    from what identifies the run (:func:`_run_identity`) and the model: two runs never share one, and exporting a
    re-import of the same log replaces its own record. Every record is built, serialised and validated before the
    first file is written, and each file is written whole (a temporary file renamed), so a failed export leaves no
    file behind, partial or not. A model with no result is left out (a paper's comparison model that only some
    tables name).
    """
    folder = Path(folder)
    manifest = json.loads((folder / "MANIFEST.json").read_text()) if (folder / "MANIFEST.json").exists() else {}
    tables = _tables(folder)
    models = sorted({str(m) for df in tables.values() if "model" in df.columns for m in df["model"].dropna()})
    if not models:
        raise ValueError(f"{folder}: no table with a 'model' column; nothing to export")
    run = path_component(name or folder.name, "run name")
    version = biaslab_version or (manifest.get("packages") or {}).get("biaslab") or "unknown"
    now = str(time.time())
    when = manifest.get("finished") or manifest.get("started")
    content = _run_hash(folder)
    result, writes = {}, []
    inst = validator("instance_level_eval.schema.json")
    for model in models:
        results, skipped = [], {}
        tasks = _imported_tasks((manifest.get("models") or {}).get(model, {}))
        default_ds = "+".join(tasks) if manifest.get("notebook") == "import" and tasks else str(
            manifest.get("notebook") or run)          # an import: the harness's task(s); a run: its notebook
        for stem, df in tables.items():
            if "model" not in df.columns:
                continue
            rows = df[df["model"].astype(str) == model]
            for est, low, high, method in _intervals(df):
                labels = _label_columns(df, {est, low, high, "dataset"})
                for _, r in rows.iterrows():
                    if not (_finite(r[est]) and _finite(r[low]) and _finite(r[high])):
                        skipped[stem] = skipped.get(stem, 0) + 1
                        continue
                    metric, meaning = _metric(est, r, stem)
                    unc = {"confidence_interval": {"lower": float(r[low]), "upper": float(r[high]),
                                                   "confidence_level": 0.95,
                                                   "method": str(r[method]) if method and isinstance(r[method], str)
                                                   else "unspecified"}}
                    n = next((r[c] for c in ("n", "n_pairs", "n_items") if c in df.columns and _finite(r[c])), None)
                    if n is not None:
                        unc["num_samples"] = int(n)
                    ds = str(r["dataset"]) if "dataset" in r.index and isinstance(r["dataset"], str) else default_ds
                    results.append(_result(run, stem, metric, meaning,
                                           {c: r[c] for c in labels if isinstance(r[c], str)},
                                           r[est], unc, ds, est))
        for labels, metric, value, n in _crows_summary(tables, model):
            results.append(_result(run, "pair_scores", metric, METRICS[metric], {}, value, {"num_samples": n},
                                   labels["dataset"], "d_logprob"))
        names = [r["evaluation_name"] for r in results]
        dup = sorted({x for x in names if names.count(x) > 1})
        if dup:
            raise ValueError(f"{folder}: {len(dup)} result name(s) not distinct, e.g. {dup[0]!r}")
        if not results:
            skipped["(model without results)"] = 1
            continue
        unscored: dict[str, int] = {}
        instances = list(_instances(run, model, tables, unscored))
        eid = f"biaslab/{run}/{model}/{_run_identity(manifest, model, content)[:16]}"
        agg = {"schema_version": SCHEMA_VERSION, "evaluation_id": eid, "retrieved_timestamp": now,
               "source_metadata": {"source_name": "biaslab", "source_type": "evaluation_run",
                                   "source_organization_name": "biaslab", "evaluator_relationship": "third_party",
                                   "additional_details": {"run_folder": folder.name, "run_content_sha256": content,
                                                          "rows_without_finite_interval": json.dumps(skipped),
                                                          "items_without_finite_score": json.dumps(unscored),
                                                          "git_commit": str((manifest.get("git") or {}).get(
                                                              "commit", ""))}},
               "eval_library": _eval_library(model, manifest, version),
               "model_info": _model_info(model, manifest, model_ids), "evaluation_results": results}
        if when:
            agg["evaluation_timestamp"] = str(when)
        for rec in instances:
            rec["evaluation_id"] = eid
            rec["model_id"] = agg["model_info"]["id"]
            err = next(iter(inst.iter_errors(rec)), None)
            if err is not None:
                raise ValueError(f"instance record {rec['sample_id']} of {model}: {err.message}")
        result[model] = {"aggregate": agg, "instances": instances, "skipped": skipped}
        if out is not None:
            mid = agg["model_info"]["id"]
            dev, mname = (mid.split("/", 1) if "/" in mid else ("unknown-developer", mid))
            o = confined(Path(out), "data", run, path_component(dev, "developer"),
                         path_component(mname.replace("/", "_"), "model"))
            uid = _uuid4(eid)
            if instances:
                text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in instances)
                jl = o / f"{uid}_samples.jsonl"
                writes.append((jl, text))
                agg["detailed_evaluation_results"] = {"format": "jsonl",
                                                      "file_path": jl.relative_to(out).as_posix(),
                                                      "hash_algorithm": "sha256",
                                                      "checksum": hashlib.sha256(text.encode()).hexdigest(),
                                                      "total_rows": len(instances)}
        validate(agg, "eval.schema.json")
        if out is not None:
            writes.append((o / f"{uid}.json", json.dumps(agg, indent=1, allow_nan=False)))
    for path, text in writes:          # only now, every record valid: each samples file before its aggregate
        atomic_write_text(path, text)
    return result


def confined(root: Path, *parts: str) -> Path:
    """``root/parts...``, refused unless every part is one plain name (no ``..``, separator or absolute path) and
    the result stays inside ``root``."""
    for p in parts:
        if not p or p in (".", "..") or "/" in p or "\\" in p or Path(p).is_absolute():
            raise ImportError_(f"{p!r} is not a plain file or folder name; a path derived from input must stay "
                               f"inside {root} (no '..', '/', or absolute path)")
    target = root.joinpath(*parts)
    if not target.resolve().is_relative_to(root.resolve()):
        raise ImportError_(f"{target} resolves outside {root}; refused")
    return target


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
    return v


#: what ``evaluation.is_correct`` means, per table (said in every record's metadata)
IS_CORRECT = {"pair_scores": "not stereotyped: log P(sent_less) >= log P(sent_more) (CrowS-Pairs has no correct "
                             "answer; score 1 = the stereotyped sentence is more likely, lm-eval's pct_stereotype)",
              "responses": "the chosen option is the gold answer (column correct); where there is none: not the "
                           "biased answer"}
IS_CORRECT["mbbq_responses"] = IS_CORRECT["responses"]


def _instances(run: str, model: str, tables: dict[str, pd.DataFrame], unscored: dict[str, int]):
    """One instance record per row of the per-item tables; a CrowS-Pairs pair without a finite log-probability
    difference has no outcome: it is counted in ``unscored`` (per table), never written as an outcome."""
    for stem in INSTANCE_TABLES:
        df = tables.get(stem)
        if df is None or "model" not in df.columns:
            continue
        for i, r in df[df["model"].astype(str) == model].iterrows():
            row = {c: _jsonable(r[c]) for c in df.columns}
            if stem == "pair_scores" and not _finite(row.get("d_logprob")):
                unscored[stem] = unscored.get(stem, 0) + 1
                continue
            if stem == "pair_scores":
                stereo = float(row["d_logprob"]) > 0
                correct = not stereo
                texts = [row.get("sent_more"), row.get("sent_less")]
                prompt = " ||| ".join(map(str, texts)) if all(isinstance(t, str) for t in texts) else None
                answer = (texts[0] if stereo else texts[1]) if prompt else ("sent_more" if stereo else "sent_less")
                choices = [str(t) for t in texts] if prompt else ["sent_more", "sent_less"]
            else:
                stereo = _finite(row.get("deviated")) and float(row["deviated"]) == 1
                correct = bool(row["correct"]) if _finite(row.get("correct")) else not stereo
                prompt = row.get("prompt") if isinstance(row.get("prompt"), str) else None
                opts = [row.get(f"ans{k}") for k in range(3)]
                choices = [str(o) for o in opts] if all(isinstance(o, str) for o in opts) else None
                ch = row.get("choice", row.get("answer"))
                answer = choices[int(ch)] if choices and _finite(ch) and 0 <= int(ch) < 3 else str(ch)
            sid = str(row.get("prompt_id", i)) + (f"#{row['seed']}" if "seed" in row else "") + (
                f"@{row['dataset']}" if "dataset" in row and stem == "pair_scores" and
                not str(row.get("prompt_id", "")).startswith(str(row["dataset"])) else "")
            meta = {"table": stem, "biaslab_row": json.dumps(row, allow_nan=False, default=str),
                    "is_correct_means": IS_CORRECT[stem],
                    "input_raw": "the prompt text" if prompt else "biaslab's prompt id (the text is in the "
                                                                  "benchmark's data file)"}
            meta.update({c: str(row[c]) for c in ("dataset", "language", "set", "bias_type", "category",
                                                  "context_condition", "question_polarity", "direction")
                         if row.get(c) is not None})
            inp = {"raw": prompt or str(row.get("prompt_id", sid)), "reference": []}
            if choices:
                inp["choices"] = choices
            yield {"schema_version": SCHEMA_VERSION, "evaluation_id": "", "model_id": model,
                   "evaluation_name": f"{run}/{stem}", "sample_id": sid, "sample_hash": _rid(stem, sid),
                   "interaction_type": "single_turn", "input": inp, "output": {"raw": [str(answer)]},
                   "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": str(answer),
                                           "extraction_method": "log-likelihood" if stem == "pair_scores" or
                                           "logp_0" in row else "biaslab", "is_terminal": True}],
                   "evaluation": {"score": 1.0 if stereo else 0.0, "is_correct": bool(correct)},
                   "metadata": meta}


# ------------------------------------------------------------------------------------------------- import ---
def tables_from_records(records: list[dict]) -> dict[str, pd.DataFrame]:
    """biaslab's tables back from instance records that carry ``metadata.biaslab_row`` (in record order)."""
    rows: dict[str, list] = {}
    for rec in records:
        meta = rec.get("metadata") or {}
        if "biaslab_row" in meta:
            rows.setdefault(meta.get("table", "rows"), []).append(json.loads(meta["biaslab_row"]))
    return {k: pd.DataFrame(v) for k, v in rows.items()}


def read_records(path: Path) -> list[dict]:
    """The instance-level records under ``path``, each checked against the pinned instance schema: a record that
    fails it, a line that is not a JSON object, a newer schema, or bytes that are not UTF-8 raise
    :class:`ImportError_` naming the file and line."""
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    if not files:
        raise ImportError_(f"{path}: no Every Eval Ever instance-level records (*.jsonl)")
    inst = validator("instance_level_eval.schema.json")
    recs = []
    for f in files:
        for i, rec in json_lines(f):
            v = str(rec.get("schema_version", ""))
            if v.split(".")[:2] > SCHEMA_VERSION.split(".")[:2]:
                raise ImportError_(f"{f}:{i}: Every Eval Ever schema {v}; this importer reads "
                                   f"{SCHEMA_VERSION} and older")
            err = next(iter(sorted(inst.iter_errors(rec), key=lambda e: list(e.path))), None)
            if err is not None:
                where = "/".join(str(p) for p in err.path) or "(record)"
                raise ImportError_(f"{f}:{i}: not a valid Every Eval Ever instance record ({SCHEMA_VERSION}) at "
                                   f"{where}: {' '.join(err.message.split())[:200]}")
            table = (rec.get("metadata") or {}).get("table")
            if table is not None and not _plain_name(str(table)):
                raise ImportError_(f"{f}:{i}: metadata.table {str(table)[:80]!r} is not a plain table name (letters, "
                                   "digits, _ and -); refused, since it names the file the import writes")
            recs.append(rec)
    return recs


def _plain_name(name: str) -> bool:
    return bool(name) and all(ch.isalnum() or ch in "_-" for ch in name) and not name.startswith("-")


def read(path: Path) -> list[ImportedLog]:
    recs = read_records(path)
    logs = []
    for stem, df in tables_from_records(recs).items():
        kind = {"pair_scores": CROWS, "mbbq_responses": MBBQ}.get(stem) or (
            BBQ if "context_condition" in df.columns else stem)
        for model, g in df.groupby("model", sort=False) if "model" in df.columns else [("", df)]:
            logs.append(ImportedLog(harness="eee", task=stem, kind=kind, model=str(model),
                                    items=g.reset_index(drop=True), identity={"harness": "every-eval-ever"},
                                    source=str(path), prompts="biaslab's own tables (no texts)"))
    foreign = [r for r in recs if "biaslab_row" not in (r.get("metadata") or {})]
    if foreign:
        logs += _foreign_bbq(foreign, path)
    return logs


def _foreign_bbq(recs: list[dict], path: Path) -> list[ImportedLog]:
    by_model: dict[str, tuple[list, list]] = {}
    for rec in recs:
        meta, inp = rec.get("metadata") or {}, rec.get("input") or {}
        rows, bad = by_model.setdefault(str(rec.get("model_id", "")), ([], []))
        choices = inp.get("choices") or []
        if why := not_bbq(meta, choices, "record"):
            bad.append({"row": rec.get("sample_id"), "reason": why})
            continue
        ans = [a.get("extracted_value") for a in rec.get("answer_attribution") or [] if a.get("is_terminal")]
        hit = [i for i, c in enumerate(choices) if ans and str(ans[-1]).strip() in (str(c).strip(), "ABC"[i], str(i))]
        if len(hit) != 1:
            bad.append({"row": rec.get("sample_id"), "reason": f"answer {ans[-1] if ans else None!r} names no "
                                                               "single choice"})
            continue
        rows.append({"prompt_id": rec.get("sample_id"), **{k: meta[k] for k in BBQ_META}, "prompt": inp.get("raw"),
                     **{f"ans{i}": c for i, c in enumerate(choices)}, "choice": hit[0],
                     "correct": int(bool((rec.get("evaluation") or {}).get("is_correct")))})
    logs = []
    for model, (rows, bad) in by_model.items():
        if not rows:
            raise ImportError_(f"{path}: the records of {model!r} are neither biaslab's nor BBQ; supported: "
                               f"{supported()}")
        logs.append(ImportedLog(harness="eee", task=BBQ, kind=BBQ, model=model, items=pd.DataFrame(rows),
                                excluded=pd.DataFrame(bad, columns=["row", "reason"]),
                                identity={"harness": "every-eval-ever"}, source=str(path),
                                prompts="the converter's prompts"))
    return logs
