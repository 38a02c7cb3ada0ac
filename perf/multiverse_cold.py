"""Notebook 6 (multiverse) cold: the whole notebook under a profile with an empty score cache, both embedded models.

The converted models are reused (``models/`` of the shared cache symlinked into a fresh ``BIASLAB_CACHE``), every
score is computed. Records the wall time of the run, the machine's load (``os.getloadavg`` before, every 30 s during,
after), the universe count, and each universe's cost from the notebook's own ``costs.csv`` (seconds, and
``cache_misses``: a cold run computes every universe, so none should come from the cache). Not a timed test. As
``run_all.py`` does, results go to the git-ignored ``perf/results/_scratch/multiverse/`` unless ``--publish``
(``perf/results/multiverse/``, the folder ``data/catalogue/06_multiverse.tsv`` cites) or ``--out``:

    .venv/bin/python perf/multiverse_cold.py --profile default --publish
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "perf"))
import harness  # noqa: E402
PUBLISHED = ROOT / "perf" / "results" / "multiverse"
SCRATCH = ROOT / "perf" / "results" / "_scratch" / "multiverse"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default")
    ap.add_argument("--publish", action="store_true", help=f"write {PUBLISHED.relative_to(ROOT)}/ (default: "
                    f"{SCRATCH.relative_to(ROOT)}/)")
    ap.add_argument("--out", help="results folder (overrides --publish)")
    ap.add_argument("-p", action="append", default=[], help="extra KEY=VALUE parameters for the notebook")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="biaslab-cold-"))
    cache = harness.fresh_cache(tmp / "cache")              # converted weights reused; scores start empty
    runs = tmp / "runs"
    cmd = [sys.executable, "-m", "biaslab.cli", "reproduce", "--profile", a.profile, "--only", "06", "--out",
           str(runs)] + [x for kv in a.p for x in ("-p", kv)]
    run = harness.timed_subprocess(cmd, ROOT, dict(os.environ, BIASLAB_CACHE=str(cache)))
    tables = runs / "06_multiverse" / "tables"
    out = Path(a.out) if a.out else (PUBLISHED if a.publish else SCRATCH)
    out.mkdir(parents=True, exist_ok=True)
    res = {"profile": a.profile, "rc": run["rc"], "wall_s": run["wall_s"], "cpu_count": os.cpu_count(),
           **{k: run[k] for k in ("load_before_1_5_15", "load_after_1_5_15", "load_1min_during")}, "parameters": a.p}
    if (tables / "costs.csv").exists():
        costs = pd.read_csv(tables / "costs.csv")
        uni = pd.read_csv(tables / "universes.csv")
        res.update(universes_run=int((uni["status"] == "run").sum()), universes_listed=len(uni),
                   scoring_s=round(float(costs["seconds"].sum()), 1),
                   per_universe_s_median=round(float(costs["seconds"].median()), 2),
                   scoring_cpu_s=round(float(costs["cpu_seconds"].sum()), 1),
                   universes_from_cache=int((costs["cache_misses"] == 0).sum()) if "cache_misses" in costs else None,
                   per_universe_s_by_format=costs.groupby(["model", "answer_format"])["seconds"].median().round(2)
                   .reset_index().to_dict("records"))
        costs.to_csv(out / f"costs_{a.profile}.csv", index=False)
        uni.to_csv(out / f"universes_{a.profile}.csv", index=False)
    (out / f"cold_{a.profile}.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(json.dumps(res, indent=2, default=str))
    shutil.rmtree(tmp, ignore_errors=True)
    return run["rc"]


if __name__ == "__main__":
    sys.exit(main())
