"""Score fixed inputs with the Scorer and save the values and the score-cache keys, to compare two versions of the
engine (check.py). Run it with the *old* library first:

    cp -r lib /tmp/eng/lib_before            # (at the old commit)
    PYTHONPATH=/tmp/eng/lib_before BIASLAB_ROOT=$PWD .venv/bin/python perf/equivalence/record.py \
        /tmp/eng/before.pkl /tmp/eng/cache_before
    .venv/bin/python perf/equivalence/check.py /tmp/eng             # with the new library

Inputs: 300 CrowS-Pairs sentences (150 pairs, seed 1), 100 BBQ prompts x 3 options, 30 prompts x 3 shared options,
20 chat-rendered prompts, 100 agentic label distributions, 30 chat yes/no labels, greedy, stopped and seeded-sampled
generation, token strings; both embedded models, each in memory and with a disk cache; a tiny seq2seq and a tiny
masked model. Not part of the test suite (about 40 min on a loaded 2-core machine)."""
import pickle, sys, sqlite3, time
from pathlib import Path
import torch
torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from biaslab import models, scoring
from inputs import run_all, run_tiny

out, cache = sys.argv[1], Path(sys.argv[2])
res = {}
for name in ["smollm2-135m-instruct", "gemma-3-270m"]:
    lm = models.load(name, device="cpu", dtype="float32")
    for cd in (False, cache):
        t = time.perf_counter()
        sc = scoring.Scorer(lm, cache_dir=cd, progress=False)
        r = run_all(sc, lm)
        r["stats"] = dict(sc.stats)
        r["secs"] = time.perf_counter() - t
        res[(name, "mem" if cd is False else "disk")] = r
        print(name, cd, r["stats"], round(r["secs"], 1), flush=True)
# seq2seq and masked tiny models
from helpers import tiny_model
class F:
    def __init__(s): s.n = 0
    def mktemp(s, n):
        s.n += 1; d = cache.parent / f"tiny{s.n}"; d.mkdir(exist_ok=True); return d
f = F()
for kind, seed in (("seq2seq", 4), ("masked", 5)):
    lm = tiny_model(f, f"tiny-{kind}", kind, seed=seed)
    sc = scoring.Scorer(lm, cache_dir=cache, progress=False)
    r = run_tiny(sc, kind)
    r["stats"] = dict(sc.stats)
    res[(kind, "disk")] = r
    print(kind, r["stats"])
pickle.dump(res, open(out, "wb"))
# cache keys
keys = {}
for fpath in sorted(cache.glob("*.sqlite")):
    with sqlite3.connect(fpath) as c:
        keys[fpath.name] = sorted(k for (k,) in c.execute("select key from scores"))
pickle.dump(keys, open(out + ".keys", "wb"))
print({k: len(v) for k, v in keys.items()})
