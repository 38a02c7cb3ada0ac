"""Interleaved, repeated timing and its statistics (pure: no torch, no model; tested on stub runners).

Methods run in turn, round after round (engine, lmeval, naive, engine, lmeval, naive, ...), after one untimed
warm-up each, so a drift in the machine's speed (other jobs on a shared CPU) hits every method alike. A speed ratio is
taken within a round — adjacent runs on identical requests — and reported as the min / median / max over rounds; the
1-minute load average is sampled before and after every run and reported beside it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Callable, Sequence


def interleave(methods: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """The run order: every method once per round, in the given order."""
    return [(r, m) for r in range(rounds) for m in methods]


def run_interleaved(runners: dict[str, Callable[[int | None], dict]], rounds: int, warmup: int | None = None,
                    loadavg: Callable[[], tuple] = os.getloadavg, log: Callable[[str], None] = lambda s: None
                    ) -> list[dict]:
    """Call ``runners[m](limit)`` in :func:`interleave` order; return one record per timed run (the runner's dict
    plus ``round``, ``method``, ``load_before`` and ``load_after``). ``warmup``: each method first runs once on that
    many requests, untimed (0 / None: no warm-up)."""
    if warmup:
        for m, run in runners.items():
            run(warmup)
    records = []
    for r, m in interleave(list(runners), rounds):
        before = loadavg()[0]
        rec = dict(runners[m](None))
        rec.update(round=r, method=m, load_before=before, load_after=loadavg()[0])
        records.append(rec)
        log(f"  round {r + 1}/{rounds} {m:8s} {rec['seconds']:8.2f} s   load {before:.1f} -> {rec['load_after']:.1f}")
    return records


def spread(values: Sequence[float]) -> dict:
    v = list(values)
    return {"min": min(v), "median": statistics.median(v), "max": max(v), "n": len(v)}


def seconds_by_method(records: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for rec in sorted(records, key=lambda x: x["round"]):
        out.setdefault(rec["method"], []).append(rec["seconds"])
    return out


def paired_ratios(records: list[dict], method: str, baseline: str) -> list[float]:
    """Per round, baseline seconds / method seconds (> 1: ``method`` is faster), over the rounds that ran both."""
    t = {(rec["round"], rec["method"]): rec["seconds"] for rec in records}
    rounds = sorted({r for r, _ in t})
    return [t[r, baseline] / t[r, method] for r in rounds if (r, baseline) in t and (r, method) in t]


def load_spread(records: list[dict]) -> dict:
    return spread([x for rec in records for x in (rec["load_before"], rec["load_after"])])


def agreement(scores: Sequence[float], reference: Sequence[float], groups: Sequence[Sequence[int]]) -> dict:
    """Largest |score difference| and the number of groups (pairs, items) whose best-scored request differs."""
    if len(scores) != len(reference):
        raise ValueError(f"{len(scores)} scores against {len(reference)} reference scores")
    diff = max((abs(a - b) for a, b in zip(scores, reference)), default=0.0)

    def best(s, g):
        return max(g, key=lambda i: s[i])
    flips = sum(best(scores, g) != best(reference, g) for g in groups)
    return {"max_abs_diff": diff, "preference_flips": int(flips)}


def summarize(records: list[dict], groups, reference: str = "lmeval", baselines: Sequence[str] = ("lmeval", "naive"),
              ready: dict | None = None) -> list[dict]:
    """One row per method: seconds and every paired speed ratio (min / median / max), work done, memory, and
    agreement with ``reference``'s scores (from each method's first timed run)."""
    secs = seconds_by_method(records)
    first = {}
    for rec in sorted(records, key=lambda x: x["round"]):
        first.setdefault(rec["method"], rec)
    ref = first.get(reference)
    rows = []
    for m, s in secs.items():
        row = {"method": m, "rounds": len(s), **{f"seconds_{k}": v for k, v in spread(s).items() if k != "n"}}
        for b in baselines:
            if b != m and b in secs:
                r = spread(paired_ratios(records, m, b))
                row.update({f"vs_{b}_{k}": v for k, v in r.items() if k != "n"})
        tokens = (ready or {}).get(m, {}).get("tokens")
        row["positions"] = first[m].get("positions")
        row["positions_per_token"] = row["positions"] / tokens if tokens and row["positions"] else None
        row["peak_rss_mb"] = max(rec.get("peak_rss_mb", 0) for rec in records if rec["method"] == m)
        if ref is not None:
            a = agreement(first[m]["scores"], ref["scores"], groups)
            row[f"max_abs_diff_vs_{reference}"] = a["max_abs_diff"]
            row[f"preference_flips_vs_{reference}"] = a["preference_flips"]
        rows.append(row)
    return rows


class LineWorker:
    """A long-lived worker process speaking one JSON line per message: first ``{"ready": ...}``, then one result
    line per command line ``{"limit": k}``; EOF on its stdin ends it. Call it to time one run."""

    def __init__(self, argv: list[str], name: str, log_path: Path, env: dict | None = None):
        self.method, self.log_path = name, log_path
        self._log = open(log_path, "a")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, env=env)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            tail = "".join(self.log_path.read_text().splitlines(True)[-15:])
            raise RuntimeError(f"the {self.method} worker stopped (exit {code}); its log {self.log_path} ends:\n{tail}")
        return json.loads(line)

    def __call__(self, limit: int | None = None) -> dict:
        return self.send({"limit": limit})

    def send(self, message: dict) -> dict:
        """One command line (``{"limit": k, ...}``: a worker may take more settings per run); its result line."""
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


class Worker(LineWorker):
    """A method's long-lived worker process (perf/worker.py) under ``python``."""

    def __init__(self, python: str, method: str, model: str, requests_file: Path, threads: int, log_path: Path,
                 env: dict | None = None):
        here = Path(__file__).resolve().parent
        super().__init__([python, str(here / "worker.py"), method, model, str(requests_file), str(threads)],
                         method, log_path, env)


def fresh_cache(folder: Path | None = None) -> Path:
    """An empty ``BIASLAB_CACHE`` (``folder``, or a new temporary one) whose ``models/`` is the shared cache's:
    converted weights reused, every score computed. Refuses a folder that holds anything but ``models/``."""
    import tempfile
    shared = Path(os.environ.get("BIASLAB_CACHE", Path.home() / ".cache" / "biaslab"))
    cache = Path(folder or tempfile.mkdtemp(prefix="biaslab-cold-"))
    cache.mkdir(parents=True, exist_ok=True)
    if any(p.name != "models" for p in cache.iterdir()):
        raise SystemExit(f"{cache} is not empty: a cold run needs an empty cache (remove it or pick another)")
    if not (cache / "models").exists():
        (cache / "models").symlink_to(shared / "models")
    return cache


def timed_subprocess(cmd: Sequence[str], cwd: Path, env: dict, every_s: float = 30) -> dict:
    """Run ``cmd`` and return rc, wall_s and the machine's 1-minute load average before, after and (sampled every
    ``every_s`` seconds) during the run."""
    import threading
    import time
    load, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            load.append(os.getloadavg()[0])
            stop.wait(every_s)

    threading.Thread(target=sample, daemon=True).start()
    before, t0 = os.getloadavg(), time.perf_counter()
    rc = subprocess.run(list(cmd), cwd=cwd, env=env).returncode
    wall = time.perf_counter() - t0
    stop.set()
    return {"rc": rc, "wall_s": round(wall, 1), "load_before_1_5_15": before, "load_after_1_5_15": os.getloadavg(),
            "load_1min_during": {"min": min(load), "median": sorted(load)[len(load) // 2], "max": max(load)}
            if load else None}
