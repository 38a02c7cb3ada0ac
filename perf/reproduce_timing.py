"""Whole-run wall time of ``make reproduce``: cold (an empty score cache) or cached (every score already there).

Runs ``biaslab reproduce --profile P --jobs J --publish`` (what ``make reproduce`` runs once data and models are in
place) and records its wall time, the machine's load (``os.getloadavg`` before, every 30 s during, after) and each
run's ``wall_time_s`` from the MANIFESTs it published, in ``perf/results/reproduce/<profile>_<label>.json``; the
README's timing line is rendered from those files by ``biaslab summary``. ``--fresh-cache`` points ``BIASLAB_CACHE``
at a new folder whose ``models/`` is the shared cache's (converted weights reused, every score computed); ``--cache
DIR`` reuses a folder (the cold run's, for the cached rerun). Not a timed test: measure on an otherwise idle machine.

    .venv/bin/python perf/reproduce_timing.py --label cold --fresh-cache --keep-cache /tmp/cold-cache
    .venv/bin/python perf/reproduce_timing.py --label cached --cache /tmp/cold-cache

``--from-time-log LOG`` records a run that was started by hand under ``/usr/bin/time -v`` instead (its wall, user
and system seconds), with the MANIFESTs it published.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def time_log(path: Path) -> dict:
    """Wall, user and system seconds of a GNU ``/usr/bin/time -v`` report."""
    text = path.read_text()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text).group(1)
    parts = [float(x) for x in wall.split(":")]
    secs = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    num = lambda key: float(re.search(rf"{key}: ([\d.]+)", text).group(1))          # noqa: E731
    return {"wall_s": round(secs, 1), "user_s": num(r"User time \(seconds\)"),
            "system_s": num(r"System time \(seconds\)"), "rc": int(num("Exit status"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, choices=("cold", "cached"))
    ap.add_argument("--profile", default="default")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fresh-cache", action="store_true", help="an empty score cache (models reused)")
    ap.add_argument("--cache", help="BIASLAB_CACHE for the run (default: the environment's)")
    ap.add_argument("--keep-cache", help="with --fresh-cache: create the fresh cache here (kept for a cached rerun)")
    ap.add_argument("--from-time-log", help="record a finished run from its /usr/bin/time -v report instead")
    a = ap.parse_args()
    res = {"label": a.label, "profile": a.profile, "jobs": a.jobs, "cpu_count": os.cpu_count(),
           "command": f"biaslab reproduce --profile {a.profile} --publish --jobs {a.jobs}"}
    if a.from_time_log:
        res.update(time_log(Path(a.from_time_log)), measured_by="/usr/bin/time -v (run started by hand)")
    else:
        env = dict(os.environ)
        if a.fresh_cache:
            shared = Path(os.environ.get("BIASLAB_CACHE", Path.home() / ".cache" / "biaslab"))
            cache = Path(a.keep_cache or tempfile.mkdtemp(prefix="biaslab-cold-"))
            cache.mkdir(parents=True, exist_ok=True)
            if any(p.name != "models" for p in cache.iterdir()):
                raise SystemExit(f"{cache} is not empty: a cold run needs an empty cache (remove it or pick another)")
            if not (cache / "models").exists():
                (cache / "models").symlink_to(shared / "models")
            env["BIASLAB_CACHE"] = str(cache)
        elif a.cache:
            env["BIASLAB_CACHE"] = a.cache
        load, stop = [], threading.Event()

        def sample():
            while not stop.is_set():
                load.append(os.getloadavg()[0])
                stop.wait(30)

        threading.Thread(target=sample, daemon=True).start()
        before, t0 = os.getloadavg(), time.perf_counter()
        cmd = [sys.executable, "-m", "biaslab.cli", "reproduce", "--profile", a.profile, "--publish", "--jobs",
               str(a.jobs)]
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        stop.set()
        res.update(rc=rc, wall_s=round(time.perf_counter() - t0, 1), measured_by="perf/reproduce_timing.py",
                   load_before_1_5_15=before, load_after_1_5_15=os.getloadavg(),
                   load_1min_during={"min": min(load), "median": sorted(load)[len(load) // 2], "max": max(load)})
    res["runs_wall_time_s"] = manifests(a.profile)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{a.profile}_{a.label}.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return int(res.get("rc", 0))


if __name__ == "__main__":
    sys.exit(main())
