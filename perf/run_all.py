"""Speed of biaslab's scoring engine against lm-evaluation-harness's HF backend and a naive loop (`make bench`).

Each workload (workloads.py) is built once; each method (methods.py) runs in its own long-lived worker process (the
engine and the naive loop under the project's .venv, lm-eval under perf/.venv-lmeval), loads the model once,
and is then timed round after round, interleaved (harness.py). Results go to perf/results/_scratch/ unless
``--publish`` (perf/results/).

    python perf/run_all.py --profile quick            # every workload on a few items (23 min at load 7)
    python perf/run_all.py                            # CrowS 300 pairs, BBQ 120, CALM 120 (24 templates)
    python perf/run_all.py --profile full             # all 1,508 CrowS-Pairs pairs, both models, vs lm-eval
    python perf/run_all.py --profile served           # served backend vs lm-eval local-completions (served.py)
    python perf/run_all.py --profile served_vllm      # the same on vLLM's CPU build (perf/.venv-vllm)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "lib"), str(HERE)]

import harness  # noqa: E402
from methods import METHODS  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

#: sizes (items; 0 = all) and rounds per profile; ``skip``: methods left out of a workload, with the reason in a comment
PROFILES = {
    "quick": {"rounds": 3, "sizes": {"crows": 30, "bbq": 12, "calm": 3}},
    # the naive loop recomputes CALM's five-shot prompt for every option of every item (110 s for 3 items at load 7):
    # about an hour a round at 120 items, so it is timed on the quick profile only; its ratio does not change with n
    "default": {"rounds": 3, "sizes": {"crows": 300, "bbq": 120, "calm": 120}, "skip": {"calm": ["naive"]}},
    # full CrowS-Pairs for both models against lm-eval (the naive loop would add 20-40 min a round)
    "full": {"rounds": 2, "sizes": {"crows": 0, "crows_gemma": 0},
             "skip": {"crows": ["naive"], "crows_gemma": ["naive"]}},
    # served.py: biaslab's served backend against lm-eval's local-completions on the same llama.cpp server, and one
    # replica against two; "served" is the number of CrowS-Pairs pairs (the server takes 1-3 s per sentence)
    "served": {"rounds": 3, "sizes": {"served": 16}},
    # the same against vLLM's CPU build (perf/.venv-vllm), which takes lists of prompts and batches them: 300 pairs
    # (600 sentences), so lists and requests in flight matter (about 75 s a round on two idle cores)
    "served_vllm": {"rounds": 5, "sizes": {"served": 300}, "server": "vllm"},
}
LMEVAL_PYTHON = HERE / ".venv-lmeval" / "bin" / "python"
PUBLISHED, SCRATCH = HERE / "results", HERE / "results" / "_scratch"


def python_for(method: str, lmeval_python: Path) -> str:
    env = METHODS[method].env
    if env == "lmeval":
        if not lmeval_python.exists():
            sys.exit(f"no lm-eval environment at {lmeval_python}: run `make bench` (it creates it) or pass "
                     "--lmeval-python")
        return str(lmeval_python)
    return sys.executable


def start_worker(method: str, model: str, req_file: Path, args, log_path: Path):
    env = os.environ | {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(args.threads),
                        "PYTHONPATH": str(ROOT / "lib")}
    return harness.Worker(python_for(method, Path(args.lmeval_python)), method, model, req_file, args.threads,
                          log_path, env)


def bench_workload(name: str, n: int, args, out: Path, log, start=start_worker) -> tuple[list[dict], dict]:
    """Build one workload, start a worker per method (``start``: a stub in tests), time them interleaved, write
    ``<name>.csv`` (one row per method) and ``<name>_runs.csv`` (one row per timed run); return (rows, meta)."""
    w = WORKLOADS[name]
    req = w.build(n, args.seed)
    work = (SCRATCH if out.resolve() == PUBLISHED.resolve() else out) / "_work"   # requests, worker logs
    work.mkdir(parents=True, exist_ok=True)
    req_file = work / f"{name}.requests.json"
    req_file.write_text(json.dumps(req.requests))
    methods = [m for m in args.methods if m not in args.skip.get(name, ())]
    log(f"{name}: {req.n_items} {req.item}s, {len(req.requests)} requests, {w.model}; methods {methods}")
    workers = {}
    try:
        for m in methods:
            workers[m] = start(m, w.model, req_file, args, work / f"{name}.{m}.log")
        records = harness.run_interleaved(workers, args.rounds, warmup=args.warmup, log=log)
    finally:
        for wk in workers.values():
            wk.close()
    ready = {m: wk.ready for m, wk in workers.items()}
    ref = "lmeval" if "lmeval" in methods else methods[0]
    rows = harness.summarize(records, req.groups, reference=ref, ready=ready)
    meta = {"workload": name, "model": w.model, "items": req.n_items, "item": req.item, "requests": len(req.requests),
            "strata": f"{len(set(req.strata))} {req.stratum}", "load": harness.load_spread(records),
            "weights_sha256": {m: r.get("weights_sha256") for m, r in ready.items()},
            "versions": {m: r.get("versions") for m, r in ready.items()}}
    for r in rows:
        r.update({k: meta[k] for k in ("workload", "model", "items", "item", "strata")})
        r.update({f"load_{k}": v for k, v in meta["load"].items() if k != "n"})
    import pandas as pd
    pd.DataFrame(rows).to_csv(out / f"{name}.csv", index=False)
    pd.DataFrame([{k: v for k, v in rec.items() if k != "scores"} for rec in records]).to_csv(
        out / f"{name}_runs.csv", index=False)
    return rows, meta


def fmt_ratio(row: dict, b: str) -> str:
    if f"vs_{b}_median" not in row:
        return ""
    return f"{row[f'vs_{b}_median']:.2f} ({row[f'vs_{b}_min']:.2f}-{row[f'vs_{b}_max']:.2f})"


def markdown(rows: list[dict], ref: str) -> str:
    head = ["workload", "model", "items", "method", "rounds", "seconds median (min-max)",
            f"x vs {ref}: median (min-max)", "x vs naive", "positions/token", "peak RSS MB",
            f"max abs dlogP vs {ref}", "preference flips", "load avg (min-max)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ppt = r.get("positions_per_token")
        lines.append("| " + " | ".join(str(x) for x in [
            r["workload"], r["model"], f"{r['items']} {r['item']}s ({r['strata']})", r["method"], r["rounds"],
            f"{r['seconds_median']:.1f} ({r['seconds_min']:.1f}-{r['seconds_max']:.1f})",
            fmt_ratio(r, ref), fmt_ratio(r, "naive"), f"{ppt:.3f}" if ppt else "", round(r["peak_rss_mb"]),
            f"{r.get(f'max_abs_diff_vs_{ref}', float('nan')):.1e}", r.get(f"preference_flips_vs_{ref}", ""),
            f"{r['load_median']:.1f} ({r['load_min']:.1f}-{r['load_max']:.1f})"]) + " |")
    return "\n".join(lines) + "\n"


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=list(PROFILES), default="default")
    ap.add_argument("--workloads", nargs="+", choices=list(WORKLOADS) + ["served"], help="default: the profile's")
    ap.add_argument("-n", "--n", action="append", default=[], metavar="WORKLOAD=N",
                    help="items of a workload (0: all), overriding the profile; repeatable")
    ap.add_argument("--rounds", type=int, help="timed runs of each method (default: the profile's)")
    ap.add_argument("--methods", nargs="+", default=["engine", "lmeval", "naive"], choices=list(METHODS))
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker (one runs at a time)")
    ap.add_argument("--warmup", type=int, default=6, help="requests of each method's untimed warm-up (0: none)")
    ap.add_argument("--concurrency", type=int, default=2,
                    help="served: requests in flight per replica, for biaslab and lm-eval alike")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lmeval-python", default=str(LMEVAL_PYTHON))
    ap.add_argument("--publish", action="store_true", help="write perf/results/ (default: results/_scratch/)")
    ap.add_argument("--out", help="results folder (overrides --publish)")
    args = ap.parse_args(argv)
    prof = PROFILES[args.profile]
    sizes = dict(prof["sizes"])
    for kv in args.n:
        k, _, v = kv.partition("=")
        if k not in list(WORKLOADS) + ["served"] or not v.isdigit():
            ap.error(f"-n {kv!r}: expected WORKLOAD=N with WORKLOAD one of {', '.join(WORKLOADS)} or served")
        sizes[k] = int(v)
    args.workloads = args.workloads or list(prof["sizes"])
    args.sizes = {w: sizes.get(w, 0) for w in args.workloads}
    args.rounds = args.rounds or prof["rounds"]
    args.skip = {w: [m for m in ms if m in args.methods] for w, ms in prof.get("skip", {}).items()}
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    args.out = Path(args.out) if args.out else (PUBLISHED if args.publish else SCRATCH)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)

    def log(s):
        print(s, flush=True)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    ref = "lmeval" if "lmeval" in args.methods else args.methods[0]
    all_rows, weights, versions = [], {}, {}
    if "served" in args.workloads:
        import served
        server = PROFILES[args.profile].get("server", "llamacpp")
        folder = out / ("served" if server == "llamacpp" else f"served_{server}")
        served.run(args.sizes["served"] or 16, args.rounds, args.concurrency, args.lmeval_python, folder,
                   warmup=min(args.warmup, 2), seed=args.seed, server=server)
        args.workloads = [w for w in args.workloads if w != "served"]
        if not args.workloads:
            log(f"results in {folder}")
            return 0
    for name in args.workloads:
        rows, meta = bench_workload(name, args.sizes[name], args, out, log)
        all_rows += rows
        weights[meta["model"]] = sorted({h for h in meta["weights_sha256"].values() if h})
        versions.update(meta["versions"])
        log(markdown(rows, ref))
    (out / "results.md").write_text(markdown(all_rows, ref))
    import torch
    import transformers
    env = {"started_utc": started.isoformat(timespec="seconds"), "wall_seconds": round(time.perf_counter() - t0),
           "profile": args.profile, "sizes": args.sizes, "rounds": args.rounds, "methods": args.methods,
           "skipped": args.skip,
           "torch_threads": args.threads, "warmup_requests": args.warmup, "seed": args.seed,
           "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
           "load_average_at_end": os.getloadavg(), "weights_sha256": weights,
           "torch": torch.__version__, "transformers": transformers.__version__,
           "versions_by_method": versions}
    (out / "env.json").write_text(json.dumps(env, indent=2) + "\n")
    log(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
