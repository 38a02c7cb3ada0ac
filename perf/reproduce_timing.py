"""Whole-run wall time of ``make reproduce``: cold (an empty score cache) or cached (every score already there).

Runs ``biaslab reproduce --profile P --jobs J --publish`` (what ``make reproduce`` runs once data and models are in
place) and records its wall time, the machine's load (``os.getloadavg`` before, every 30 s during, after) and each
run's ``wall_time_s`` from the MANIFESTs it published, in ``perf/results/reproduce/<profile>_<label>.json``; the
README's timing line is rendered from those files by ``biaslab summary``. ``--fresh-cache`` points ``BIASLAB_CACHE``
at a new folder whose ``models/`` is the shared cache's (converted weights reused, every score computed); ``--cache
DIR`` reuses a folder (the cold run's, for the cached rerun). Not a timed test: measure on an otherwise idle machine.

    .venv/bin/python perf/reproduce_timing.py --label cold --fresh-cache --keep-cache /tmp/cold-cache
    .venv/bin/python perf/reproduce_timing.py --label cached --cache /tmp/cold-cache"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "perf"))
import harness  # noqa: E402
OUT = ROOT / "perf" / "results" / "reproduce"


def manifests(profile: str) -> dict[str, float]:
    """Per published run of ``make reproduce`` (not the served ones): its MANIFEST's ``wall_time_s``."""
    out = {}
    for m in sorted((ROOT / "outputs").rglob("MANIFEST.json")):
        folder = m.parent.relative_to(ROOT / "outputs").as_posix()
        d = json.loads(m.read_text())
        if not folder.startswith("served/") and d.get("profile") == profile:
            out[folder] = d.get("wall_time_s")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, choices=("cold", "cached"))
    ap.add_argument("--profile", default="default")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fresh-cache", action="store_true", help="an empty score cache (models reused)")
    ap.add_argument("--cache", help="BIASLAB_CACHE for the run (default: the environment's)")
    ap.add_argument("--keep-cache", help="with --fresh-cache: create the fresh cache here (kept for a cached rerun)")
    a = ap.parse_args()
    res = {"label": a.label, "profile": a.profile, "jobs": a.jobs, "cpu_count": os.cpu_count(),
           "command": f"biaslab reproduce --profile {a.profile} --publish --jobs {a.jobs}"}
    env = dict(os.environ)
    if a.fresh_cache:
        env["BIASLAB_CACHE"] = str(harness.fresh_cache(Path(a.keep_cache) if a.keep_cache else None))
    elif a.cache:
        env["BIASLAB_CACHE"] = a.cache
    cmd = [sys.executable, "-m", "biaslab.cli", "reproduce", "--profile", a.profile, "--publish", "--jobs",
           str(a.jobs)]
    run = harness.timed_subprocess(cmd, ROOT, env)
    res.update(rc=run["rc"], wall_s=run["wall_s"], measured_by="perf/reproduce_timing.py",
               **{k: run[k] for k in ("load_before_1_5_15", "load_after_1_5_15", "load_1min_during")})
    res["runs_wall_time_s"] = manifests(a.profile)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{a.profile}_{a.label}.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return int(res["rc"])


if __name__ == "__main__":
    sys.exit(main())
