"""After a change of the engine (see record.py): (1) a warm copy of the old cache gives 100 % hits (no position
computed, no row added, weights never loaded) and identical values; (2) a cold run computes values identical
(exactly) to the old ones and writes exactly the same cache keys into a file of the same name.

    .venv/bin/python perf/equivalence/check.py BASE     # BASE holds before.pkl(.keys) and cache_before/
Writes BASE/equivalence.json."""
import json, pickle, sys, sqlite3, time, shutil
from pathlib import Path
BASE = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/eng")
import torch
torch.set_num_threads(1)
import pandas as pd
sys.path.insert(0, str(Path(__file__).resolve().parent))
from biaslab import models, scoring
from inputs import run_all, run_tiny

before = pickle.load(open(BASE / "before.pkl", "rb"))
before_keys = pickle.load(open(BASE / "before.pkl.keys", "rb"))
warm = BASE / "cache_warm"; cold = BASE / "cache_after"
shutil.rmtree(warm, ignore_errors=True); shutil.rmtree(cold, ignore_errors=True)
shutil.copytree(BASE / "cache_before", warm)
report = []

def same(a, b):
    if isinstance(a, pd.DataFrame):
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True); return True
        except AssertionError as e:
            return str(e)[:300]
    return a == b

def rows(path):
    with sqlite3.connect(path) as c:
        return sorted(k for (k,) in c.execute("select key from scores"))

for name in ["smollm2-135m-instruct", "gemma-3-270m"]:
    lm = models.load(name, device="cpu", dtype="float32")
    # (1) warm
    sc = scoring.Scorer(lm, cache_dir=warm, progress=False)
    n0 = len(sc.cache)
    t = time.perf_counter(); r = run_all(sc, lm); dt = time.perf_counter() - t
    ref = before[(name, "disk")]
    checks = {k: same(r[k], ref[k]) for k in r}
    report.append({"model": name, "check": "warm cache", "positions_computed": sc.stats.get("positions", 0),
                   "rows_before": n0, "rows_after": len(sc.cache), "weights_loaded": lm.weights_loaded,
                   "seconds": round(dt, 1), "all_equal": all(v is True for v in checks.values()),
                   "diffs": {k: v for k, v in checks.items() if v is not True}})
    print(report[-1], flush=True)
    # (2) cold
    sc = scoring.Scorer(lm, cache_dir=cold, progress=False)
    t = time.perf_counter(); r = run_all(sc, lm); dt = time.perf_counter() - t
    checks = {k: same(r[k], ref[k]) for k in r}
    checks_mem = {k: same(r[k], before[(name, "mem")][k]) for k in r}
    fname = sc.cache.path.name
    report.append({"model": name, "check": "cold cache", "positions": sc.stats.get("positions"),
                   "positions_before": ref["stats"].get("positions"), "seconds": round(dt, 1),
                   "seconds_before": round(ref["secs"], 1), "cache_file": fname,
                   "same_cache_file_name": fname in before_keys,
                   "same_keys": rows(sc.cache.path) == before_keys.get(fname),
                   "n_keys": len(rows(sc.cache.path)),
                   "all_equal_disk": all(v is True for v in checks.values()),
                   "all_equal_mem": all(v is True for v in checks_mem.values()),
                   "diffs": {k: v for k, v in checks.items() if v is not True}})
    print(report[-1], flush=True)

from helpers import tiny_model
class F:
    def __init__(s): s.n = 0
    def mktemp(s, n):
        s.n += 1; d = BASE / f"tinyafter{s.n}"; d.mkdir(exist_ok=True); return d
f = F()
for kind, seed in (("seq2seq", 4), ("masked", 5)):
    lm = tiny_model(f, f"tiny-{kind}", kind, seed=seed)
    for label, cdir in (("warm cache", warm), ("cold cache", cold)):
        sc = scoring.Scorer(lm, cache_dir=cdir, progress=False)
        r = run_tiny(sc, kind)
        ref = before[(kind, "disk")]
        checks = {k: same(r[k], ref[k]) for k in r}
        fname = sc.cache.path.name
        report.append({"model": f"tiny-{kind}", "check": label, "positions": sc.stats.get("positions", 0),
                       "all_equal": all(v is True for v in checks.values()),
                       "same_keys": rows(sc.cache.path) == before_keys.get(fname), "diffs": {k: v for k, v in checks.items() if v is not True}})
        print(report[-1], flush=True)
json.dump(report, open(BASE / "equivalence.json", "w"), indent=1, default=str)
