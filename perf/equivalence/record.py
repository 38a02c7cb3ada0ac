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
import json, pickle, sys, random, sqlite3, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import torch
torch.set_num_threads(1)
from biaslab import models, scoring
from biaslab.benchmarks import crows_pairs as cp, agentic
from biaslab import sources

out, cache = sys.argv[1], Path(sys.argv[2])
res = {}
p = cp.subsample(cp.load_original(), 150, seed=1).prompts
texts = list(p.sent_more) + list(p.sent_less)            # 300 sentences
rng = random.Random(0)
files = sorted(sources.raw_path("nyu-mll/BBQ", "data/Age.jsonl").parent.glob("*.jsonl"))
items = [json.loads(l) for f in files for l in f.read_text().splitlines() if l.strip()]
items = rng.sample(items, 100)
bbq_prompts = [f"{it['context']}\nQuestion: {it['question']}\nAnswer:" for it in items]
bbq_opts = [[" " + it[k] for k in ("ans0", "ans1", "ans2")] for it in items]
bench = agentic.load()
ap = agentic.balanced_subset(bench.prompts, 100, seed=0)
gen_prompts = bbq_prompts[:12]
for name in ["smollm2-135m-instruct", "gemma-3-270m"]:
    lm = models.load(name, device="cpu", dtype="float32")
    for cd in (False, cache):
        t = time.perf_counter()
        sc = scoring.Scorer(lm, cache_dir=cd, progress=False)
        suffix, labels = agentic.answer_format(lm.tokenizer, k=agentic.MAX_K)
        r = {}
        r["seq"] = sc.sequence_logprob(texts, per_token=True)
        r["opt"] = sc.option_logprob(bbq_prompts, bbq_opts)
        r["opt_shared"] = sc.option_logprob(bbq_prompts[:30], [" yes", " no", " maybe"])
        r["opt_chat"] = sc.option_logprob(bbq_prompts[:20], [" A", " B"], chat="auto")
        r["lab"] = sc.label_distribution((ap["text"] + suffix).tolist(), labels)
        r["lab_list"] = sc.label_distribution(bbq_prompts[:30], ["yes", "no"], chat="auto")
        r["gen"] = sc.generate(gen_prompts, max_new_tokens=12)
        r["gen_stop"] = sc.generate(gen_prompts[:6], max_new_tokens=12, stop=["\n", "."], chat="auto")
        r["gen_sample"] = sc.generate(gen_prompts[:6], max_new_tokens=8, do_sample=True, seed=3, temperature=0.7)
        r["tokstr"] = sc.token_strings("The nurse was tired.")
        r["chat_available"] = sc.chat_available()
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
    r = {}
    if kind == "seq2seq":
        r["opt"] = sc.option_logprob(["Is the sky blue?", "Who was late?"], ["yes", "no", "cannot tell"])
        r["lab"] = sc.label_distribution(["Is the sky blue?", "Who was late?"], ["yes", "no"])
        r["gen"] = sc.generate(["Is the sky blue?"], max_new_tokens=5)
    else:
        r["pll"] = sc.pseudo_loglikelihood(texts[:10], per_token=True)
        r["cp"] = sc.crows_pairs_pll(texts[:5], texts[150:155])
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
