"""Every Eval Ever (EvalEval coalition, schema 0.3.0): biaslab's run folders out as EEE records, EEE records in.

Out (:func:`export_run`): one aggregate record per model of a run folder (``eval.schema.json``) whose
``evaluation_results`` are every interval the run's tables hold: a table with a ``model`` column and a
``<x>ci_low``/``<x>ci_high`` pair gives one result per row, its score the pair's estimate column, its
``uncertainty.confidence_interval`` the bounds with the table's ``ci_method`` as method (95 %, as every interval
biaslab writes). Rows whose estimate or bounds are not finite are counted per table in ``source_metadata``, not
written. The per-item tables (``pair_scores``, ``responses``) become instance-level records
(``instance_level_eval.schema.json``), one per row: ``evaluation.score`` is 1 when the item went the stereotyped
way (CrowS-Pairs: log P(more) > log P(less), lm-eval's ``pct_stereotype``; the other benchmarks: ``deviated``),
``is_correct`` the ``correct`` column where there is one (else: not stereotyped), and ``metadata.biaslab_row`` the
whole row as JSON, so that importing the records gives the same table back. Both are validated with ``jsonschema``
against the pinned schema copies in ``schemas/`` (see its README).

In (:func:`read`): instance-level records (``*.jsonl``); rows that carry ``biaslab_row`` come back as their table;
BBQ records of other converters (HELM's included) are read when their metadata holds BBQ's category, context
condition and polarity and ``answer_attribution`` names one of the three ``input.choices``.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import pandas as pd

from ..filehash import sha256_file
from . import ImportedLog, ImportError_, supported

SCHEMA_VERSION = "0.3.0"
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMA_SHA256 = {"eval.schema.json": "c9c6195aec8a9dfa0b2aba4924ac1aa8a184c9d8ca97cee778cb531088e39b48",
                 "instance_level_eval.schema.json":
                     "b16b7fa7f0aa32763444179d94ffb2336ddb12c3fd2903835fe491666c1ff3e6"}
#: per-item tables exported as instance-level records
INSTANCE_TABLES = ("pair_scores", "responses")
#: the estimate an unprefixed ci_low/ci_high pair bounds, first present wins
ESTIMATES = ("estimate", "bias_score", "rate", "deviation_rate", "difference", "mean", "log_disparity", "rho",
             "agreement", "coef", "metric_difference", "mean_gain")
_PREFIX_ESTIMATE = {"pi_": "pi_hat"}


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
        if prefix:
            est = _PREFIX_ESTIMATE.get(prefix, prefix.rstrip("_"))
            est = est if est in df.columns else None
        else:
            est = next((c for c in ESTIMATES if c in df.columns), None)
        method = prefix + "ci_method" if prefix + "ci_method" in df.columns else (
            "ci_method" if "ci_method" in df.columns else None)
        if est is not None:
            out.append((est, low, high, method))
    return out


def _label_columns(df: pd.DataFrame, used: set) -> list[str]:
    skip = used | {"model", "ci_method", "p_method", "family", "family_kind", "mde_note", "mde_design",
                   "estimate_method", "bf_prior", "bf_prior_range", "evidence", "verdict"}
    return [c for c in df.columns if c not in skip and df[c].dtype == object and df[c].nunique(dropna=True) > 1
            and not c.endswith(("_method", "_note", "_reason"))][:6]


def _rid(*parts) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]


def _model_info(name: str, manifest: dict) -> dict:
    fp = (manifest.get("models") or {}).get(name, {})
    details = {"deployment_type": "self_deployed" if fp.get("backend") != "served" else "externally_managed",
               "model_availability": "open_weights" if fp.get("weights_sha256") else "unknown"}
    for k in ("source", "weights_sha256", "tokenizer_sha256", "dtype", "device"):
        if fp.get(k):
            details[k] = str(fp[k])
    return {"name": name, "id": name, "inference_platform": "biaslab",
            "inference_engine": {"name": "transformers" if fp.get("weights_sha256") else str(fp.get("backend",
                                                                                                      "unknown"))},
            "additional_details": details}


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


def export_run(folder: str | Path, out: str | Path | None = None, biaslab_version: str | None = None,
               name: str | None = None) -> dict:
    """Every Eval Ever records of one run folder (with ``MANIFEST.json`` and ``tables/``), validated.

    Returns ``{model: {"aggregate": record, "instances": [records], "skipped": {table: n}}}``; with ``out``, writes
    the Every Eval Ever layout ``<out>/data/<name>/biaslab/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl`` (the
    aggregate names the jsonl and its sha256); ``name``: the run's name there (default: the folder's name).
    """
    folder = Path(folder)
    manifest = json.loads((folder / "MANIFEST.json").read_text()) if (folder / "MANIFEST.json").exists() else {}
    tables = _tables(folder)
    models = sorted({str(m) for df in tables.values() if "model" in df.columns for m in df["model"].dropna()})
    if not models:
        raise ValueError(f"{folder}: no table with a 'model' column; nothing to export")
    version = biaslab_version or (manifest.get("packages") or {}).get("biaslab") or "unknown"
    now = str(time.time())
    when = manifest.get("finished") or manifest.get("started")
    result = {}
    for model in models:
        results, skipped = [], {}
        for stem, df in tables.items():
            if "model" not in df.columns:
                continue
            rows = df[df["model"].astype(str) == model]
            for est, low, high, method in _intervals(df):
                labels = _label_columns(df, {est, low, high})
                for _, r in rows.iterrows():
                    if not (_finite(r[est]) and _finite(r[low]) and _finite(r[high])):
                        skipped[stem] = skipped.get(stem, 0) + 1
                        continue
                    label = ", ".join(f"{c}={r[c]}" for c in labels if isinstance(r[c], str))
                    rname = f"{stem}.{est}" + (f" [{label}]" if label else "")
                    unc = {"confidence_interval": {"lower": float(r[low]), "upper": float(r[high]),
                                                   "confidence_level": 0.95,
                                                   "method": str(r[method]) if method and isinstance(r[method], str)
                                                   else "unspecified"}}
                    n = next((r[c] for c in ("n", "n_pairs", "n_items") if c in df.columns and _finite(r[c])), None)
                    if n is not None:
                        unc["num_samples"] = int(n)
                    results.append({
                        "evaluation_result_id": _rid(folder.name, model, rname),
                        "evaluation_name": rname,
                        "source_data": {"dataset_name": str(manifest.get("notebook") or folder.name),
                                        "source_type": "other",
                                        "additional_details": {"table": f"tables/{stem}.csv"}},
                        "metric_config": {"metric_id": f"{stem}.{est}", "metric_name": est,
                                          "lower_is_better": False, "score_type": "continuous",
                                          "min_score": None, "max_score": None,
                                          "evaluation_description": f"biaslab table {stem}, column {est}"},
                        "score_details": {"score": float(r[est]), "uncertainty": unc}})
        instances = list(_instances(name or folder.name, model, tables))
        eid = f"biaslab/{name or folder.name}/{model}"
        agg = {"schema_version": SCHEMA_VERSION, "evaluation_id": eid, "retrieved_timestamp": now,
               "source_metadata": {"source_name": "biaslab", "source_type": "evaluation_run",
                                   "source_organization_name": "biaslab", "evaluator_relationship": "third_party",
                                   "additional_details": {"run_folder": folder.name,
                                                          "rows_without_finite_interval": json.dumps(skipped),
                                                          "git_commit": str((manifest.get("git") or {}).get(
                                                              "commit", ""))}},
               "eval_library": {"name": "biaslab", "version": str(version)},
               "model_info": _model_info(model, manifest), "evaluation_results": results}
        if when:
            agg["evaluation_timestamp"] = str(when)
        for rec in instances:
            rec["evaluation_id"] = eid
        result[model] = {"aggregate": agg, "instances": instances, "skipped": skipped}
        if out is not None:
            slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model)
            uid = _uuid4(eid)
            o = Path(out) / "data" / (name or folder.name) / "biaslab" / slug
            o.mkdir(parents=True, exist_ok=True)
            if instances:
                jl = o / f"{uid}_samples.jsonl"
                jl.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in instances))
                agg["detailed_evaluation_results"] = {"format": "jsonl",
                                                      "file_path": jl.relative_to(out).as_posix(),
                                                      "hash_algorithm": "sha256", "checksum": sha256_file(jl),
                                                      "total_rows": len(instances)}
            validate(agg, "eval.schema.json")
            (o / f"{uid}.json").write_text(json.dumps(agg, indent=1, allow_nan=False))
        else:
            validate(agg, "eval.schema.json")
    inst = validator("instance_level_eval.schema.json")
    for model, r in result.items():
        for rec in r["instances"]:
            err = next(iter(inst.iter_errors(rec)), None)
            if err is not None:
                raise ValueError(f"instance record {rec['sample_id']} of {model}: {err.message}")
    return result


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
    return v


def _instances(run: str, model: str, tables: dict[str, pd.DataFrame]):
    for stem in INSTANCE_TABLES:
        df = tables.get(stem)
        if df is None or "model" not in df.columns:
            continue
        for i, r in df[df["model"].astype(str) == model].iterrows():
            row = {c: _jsonable(r[c]) for c in df.columns}
            if stem == "pair_scores":
                stereo = _finite(row.get("d_logprob")) and float(row["d_logprob"]) > 0
                correct = not stereo
            else:
                stereo = _finite(row.get("deviated")) and float(row["deviated"]) == 1
                correct = bool(row["correct"]) if _finite(row.get("correct")) else not stereo
            sid = str(row.get("prompt_id", i)) + (f"#{row['seed']}" if "seed" in row else "") + (
                f"@{row['dataset']}" if "dataset" in row and stem == "pair_scores" and
                not str(row.get("prompt_id", "")).startswith(str(row["dataset"])) else "")
            answer = str(row.get("choice", "more" if stereo else "less"))
            meta = {"table": stem, "biaslab_row": json.dumps(row, allow_nan=False, default=str)}
            for c in ("dataset", "bias_type", "category", "context_condition", "question_polarity", "direction"):
                if row.get(c) is not None:
                    meta[c] = str(row[c])
            yield {"schema_version": SCHEMA_VERSION, "evaluation_id": "", "model_id": model,
                   "evaluation_name": f"{run}/{stem}", "sample_id": sid, "sample_hash": _rid(stem, sid),
                   "interaction_type": "single_turn",
                   "input": {"raw": str(row.get("prompt_id", sid)), "reference": []},
                   "output": {"raw": [answer]},
                   "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": answer,
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
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    if not files:
        raise ImportError_(f"{path}: no Every Eval Ever instance-level records (*.jsonl)")
    recs = []
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ImportError_(f"{f}:{i}: not a JSON line ({exc.msg})") from exc
                v = str(rec.get("schema_version", ""))
                if v.split(".")[:2] > SCHEMA_VERSION.split(".")[:2]:
                    raise ImportError_(f"{f}:{i}: Every Eval Ever schema {v}; this importer reads "
                                       f"{SCHEMA_VERSION} and older")
                recs.append(rec)
    return recs


def read(path: Path) -> list[ImportedLog]:
    recs = read_records(path)
    logs = []
    for stem, df in tables_from_records(recs).items():
        kind = "crows_pairs" if stem == "pair_scores" else ("bbq" if "context_condition" in df.columns else stem)
        for model, g in df.groupby("model", sort=False) if "model" in df.columns else [("", df)]:
            logs.append(ImportedLog(harness="eee", task=stem, kind=kind, model=str(model),
                                    items=g.reset_index(drop=True), identity={"harness": "every-eval-ever"},
                                    source=str(path), prompts="biaslab's own tables (no texts)"))
    foreign = [r for r in recs if "biaslab_row" not in (r.get("metadata") or {})]
    if foreign:
        logs += _foreign_bbq(foreign, path)
    return logs


def _foreign_bbq(recs: list[dict], path: Path) -> list[ImportedLog]:
    need = {"category", "context_condition", "question_polarity"}
    by_model: dict[str, tuple[list, list]] = {}
    for rec in recs:
        meta, inp = rec.get("metadata") or {}, rec.get("input") or {}
        rows, bad = by_model.setdefault(str(rec.get("model_id", "")), ([], []))
        choices = inp.get("choices") or []
        if not need <= set(meta) or len(choices) != 3:
            bad.append({"row": rec.get("sample_id"), "reason": "not a BBQ record (metadata lacks category, "
                                                               "context_condition or question_polarity, or not "
                                                               "three input.choices)"})
            continue
        ans = [a.get("extracted_value") for a in rec.get("answer_attribution") or [] if a.get("is_terminal")]
        hit = [i for i, c in enumerate(choices) if ans and str(ans[-1]).strip() in (str(c).strip(), "ABC"[i], str(i))]
        if len(hit) != 1:
            bad.append({"row": rec.get("sample_id"), "reason": f"answer {ans[-1] if ans else None!r} names no "
                                                               "single choice"})
            continue
        rows.append({"prompt_id": rec.get("sample_id"), **{k: meta[k] for k in need}, "prompt": inp.get("raw"),
                     **{f"ans{i}": c for i, c in enumerate(choices)}, "choice": hit[0],
                     "correct": int(bool((rec.get("evaluation") or {}).get("is_correct")))})
    logs = []
    for model, (rows, bad) in by_model.items():
        if not rows:
            raise ImportError_(f"{path}: the records of {model!r} are neither biaslab's nor BBQ; supported: "
                               f"{supported()}")
        logs.append(ImportedLog(harness="eee", task="bbq", kind="bbq", model=model, items=pd.DataFrame(rows),
                                excluded=pd.DataFrame(bad, columns=["row", "reason"]),
                                identity={"harness": "every-eval-ever"}, source=str(path),
                                prompts="the converter's prompts"))
    return logs
