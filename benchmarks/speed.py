"""Speed of biaslab's scoring engine against a naive transformers loop and lm-evaluation-harness's HF backend.

Three workloads (issue 3), each scored three ways in one run, every method in its own child process (so each peak
memory is its own), with the model loaded before the clock starts:

1. crows:  CrowS-Pairs English sentences (both sentences of each pair), log P(sentence | BOS), smollm2-135m-instruct.
2. bbq:    BBQ items (context + question, three multi-token answer options), smollm2-135m-instruct.
3. calm:   CALM NLI items with a 5-shot prompt (SNLI in-context examples) and one-token options " A" / " B" / " C",
           gemma-3-270m.

Methods: ``engine`` (biaslab.scoring.Scorer, no cache), ``naive`` (one full forward pass per scored text, batch 1,
full logits), ``lmeval`` (lm_eval.models.huggingface.HFLM.loglikelihood on the same (context, continuation) requests,
batch 16, the already-loaded model passed as ``pretrained``). All use the same prefix convention: the BOS token before
every text (lm-eval adds Gemma's ``<bos>`` itself; for SmolLM2, whose tokenizer adds none, its contexts start with the
BOS string ``<|im_start|>``, and empty contexts use its prefix token, which is that BOS).

Needs lm_eval (``pip install -c requirements.lock 'lm_eval[hf]==0.4.13'``, the ``bench`` extra; see README.md here).
Usage: ``python benchmarks/speed.py [--workloads crows bbq calm] [--n-crows 200] [--n-bbq 60] [--n-calm 30]``.
Writes ``benchmarks/results/<workload>.csv``, ``benchmarks/results/results.md`` and ``benchmarks/results/env.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "lib"))

MODELS = {"crows": "smollm2-135m-instruct", "bbq": "smollm2-135m-instruct", "calm": "gemma-3-270m"}
METHODS = ("engine", "naive", "lmeval")


# ------------------------------------------------------------------------------------------------ workloads ---

def raw(repo: str, path: str) -> Path:
    from biaslab import sources
    return sources.raw_path(repo, path)


def crows_requests(n: int, seed: int = 0):
    """(context, continuation) = ("", sentence) for both sentences of n random CrowS-Pairs pairs, pair-adjacent."""
    import pandas as pd
    df = pd.read_csv(raw("nyu-mll/crows-pairs", "data/crows_pairs_anonymized.csv"))
    if n and n < len(df):
        df = df.sample(n=n, random_state=seed).sort_index()
    reqs = []
    for r in df.itertuples():
        reqs.append(("", r.sent_more))
        reqs.append(("", r.sent_less))
    return {"requests": reqs, "groups": [[2 * i, 2 * i + 1] for i in range(len(df))], "n_items": len(df),
            "item": "pair"}


def bbq_requests(n: int, seed: int = 0):
    """n random BBQ items (stratified over the 11 category files): prompt + three answer options."""
    import random
    rng = random.Random(seed)
    folder = raw("nyu-mll/BBQ", "data/Age.jsonl").parent
    files = sorted(folder.glob("*.jsonl"))
    per = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
    items = rng.sample(per, n) if n and n < len(per) else per
    reqs, groups = [], []
    for it in items:
        prompt = f"{it['context']}\nQuestion: {it['question']}\nAnswer:"
        g = []
        for k in ("ans0", "ans1", "ans2"):
            g.append(len(reqs))
            reqs.append((prompt, " " + it[k]))
        groups.append(g)
    return {"requests": reqs, "groups": groups, "n_items": len(items), "item": "item"}


def calm_requests(n: int, seed: int = 0):
    """n random CALM NLI (gender) items with a fixed 5-shot prompt from CALM's SNLI in-context examples."""
    import random
    import zipfile

    import pandas as pd
    rng = random.Random(seed)
    letters = {"entailment": "A", "neutral": "B", "not-entailment": "C"}

    def block(premise, hypothesis):
        return (f"Premise: {premise}\nHypothesis: {hypothesis}\nDoes the premise entail the hypothesis? "
                "A) entailment B) neutral C) not-entailment\nAnswer:")

    shots = pd.read_csv(raw("vipulgupta1011/CALM", "evaluation/benchmark/incontext_examples/SNLI_examples.csv"),
                        skipinitialspace=True)
    shots.columns = [c.strip() for c in shots.columns]
    fewshot = "".join(block(s.premise, s.hypothesis) + f" {letters[s.answer.strip()]}\n\n"
                      for s in shots.head(5).itertuples())
    with zipfile.ZipFile(raw("vipulgupta1011/CALM", "bias_dataset/gender_datasets.zip")) as z:
        lines = z.read("gender_datasets/nli_gender_dataset.jsonl").decode().splitlines()
    items = [json.loads(x) for x in lines if x.strip()]
    items = rng.sample(items, n) if n and n < len(items) else items
    reqs, groups = [], []
    for it in items:
        prompt = fewshot + block(it["premise"], it["hypothesis"])
        g = []
        for opt in (" A", " B", " C"):
            g.append(len(reqs))
            reqs.append((prompt, opt))
        groups.append(g)
    return {"requests": reqs, "groups": groups, "n_items": len(items), "item": "item"}


WORKLOADS = {"crows": crows_requests, "bbq": bbq_requests, "calm": calm_requests}


# ---------------------------------------------------------------------------------------------- the methods ---

def run_engine(lm, requests):
    from biaslab import scoring
    sc = scoring.Scorer(lm, cache_dir=False, progress=False)
    t0 = time.perf_counter()
    if all(ctx == "" for ctx, _ in requests):
        scores = sc.sequence_logprob([c for _, c in requests]).sum_logprob.tolist()
    else:
        prompts, opts, index = [], [], []
        for ctx, cont in requests:
            if not prompts or prompts[-1] != ctx:
                prompts.append(ctx)
                opts.append([])
            opts[-1].append(cont)
            index.append((len(prompts) - 1, len(opts[-1]) - 1))
        df = sc.option_logprob(prompts, opts)
        lookup = {(r.prompt_idx, r.option_idx): r.sum_logprob for r in df.itertuples()}
        scores = [lookup[k] for k in index]
    return scores, time.perf_counter() - t0, sc.stats.get("positions", 0)


def _bos_ids(lm, text):
    tok = lm.tokenizer
    return [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]


def run_naive(lm, requests):
    """One forward pass per (context, continuation), batch 1, full logits; continuation = the tokens of the joint
    tokenization after the context's own tokens (the engine's boundary rule)."""
    import torch
    t0 = time.perf_counter()
    scores, positions = [], 0
    with torch.inference_mode():
        for ctx, cont in requests:
            full = _bos_ids(lm, ctx + cont)
            n_ctx = len(_bos_ids(lm, ctx))
            logits = lm.model(torch.tensor([full])).logits[0].float()
            lp = torch.log_softmax(logits, -1)
            idx = torch.arange(n_ctx - 1, len(full) - 1)
            scores.append(float(lp[idx, torch.tensor(full[n_ctx:])].sum()))
            positions += len(full)
    return scores, time.perf_counter() - t0, positions


def run_lmeval(lm, requests, batch_size=16):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    tok = lm.tokenizer
    hf = HFLM(pretrained=lm.model, tokenizer=tok, batch_size=batch_size, backend="causal")
    prefix = ""
    probe = tok("x")["input_ids"]
    if probe[0] != tok.bos_token_id:            # the tokenizer adds no BOS itself (SmolLM2): give contexts one
        prefix = tok.bos_token
    insts = [Instance(request_type="loglikelihood", doc={}, arguments=((prefix + ctx) if ctx else "", cont), idx=i)
             for i, (ctx, cont) in enumerate(requests)]
    t0 = time.perf_counter()
    out = hf.loglikelihood(insts, disable_tqdm=True)
    elapsed = time.perf_counter() - t0
    return [float(s) for s, _ in out], elapsed, lmeval_positions(hf, insts, batch_size)


def lmeval_positions(hf, insts, batch_size):
    """Token positions lm-eval's HF backend runs: its requests sorted by length, de-duplicated where a one-token
    continuation shares its context (logits cache), batches of ``batch_size`` padded to the longest input."""
    seen, lens = set(), []
    for inst in insts:
        ctx, cont = inst.args
        if ctx == "":
            c = hf.tok_encode(cont, add_special_tokens=False)
            ctx_enc, cont_enc = [hf.prefix_token_id], c
        else:
            ctx_enc, cont_enc = hf._encode_pair(ctx, cont)
        key = tuple(ctx_enc + cont_enc[:-1])
        if key in seen:
            continue
        seen.add(key)
        lens.append(len(ctx_enc) + len(cont_enc) - 1)
    lens.sort(reverse=True)
    return sum(max(lens[i:i + batch_size]) * len(lens[i:i + batch_size]) for i in range(0, len(lens), batch_size))


def child(method: str, workload: str, n: int, out: Path) -> None:
    import torch
    from biaslab import models
    torch.manual_seed(0)
    spec = WORKLOADS[workload](n)
    lm = models.load(MODELS[workload], device="cpu", dtype="float32")
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    fn = {"engine": run_engine, "naive": run_naive, "lmeval": run_lmeval}[method]
    scores, elapsed, positions = fn(lm, spec["requests"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tokens = sum(len(_bos_ids(lm, c + x)) for c, x in spec["requests"])
    out.write_text(json.dumps({"method": method, "workload": workload, "scores": scores, "seconds": elapsed,
                               "positions": positions, "tokens": tokens, "peak_rss_mb": peak,
                               "rss_after_load_mb": base_rss, "n_items": spec["n_items"], "item": spec["item"],
                               "groups": spec["groups"], "n_requests": len(spec["requests"]),
                               "threads": torch.get_num_threads()}))


# ------------------------------------------------------------------------------------------------- reporting ---

def compare(results: dict) -> list[dict]:
    import numpy as np
    ref = np.array(results["lmeval"]["scores"])
    groups = results["lmeval"]["groups"]
    rows = []
    for m in METHODS:
        r = results[m]
        s = np.array(r["scores"])
        pref = [int(np.argmax(s[g])) for g in groups]
        pref_ref = [int(np.argmax(ref[g])) for g in groups]
        rows.append({
            "workload": r["workload"], "model": MODELS[r["workload"]], "method": m, "items": r["n_items"],
            "item": r["item"], "requests": r["n_requests"], "seconds": round(r["seconds"], 2),
            "items_per_s": round(r["n_items"] / r["seconds"], 3),
            "speedup_vs_lmeval": round(results["lmeval"]["seconds"] / r["seconds"], 2),
            "positions": r["positions"], "tokens": r["tokens"],
            "positions_per_token": round(r["positions"] / r["tokens"], 3),
            "peak_rss_mb": round(r["peak_rss_mb"]), "rss_after_load_mb": round(r["rss_after_load_mb"]),
            "max_abs_diff_vs_lmeval": float(np.abs(s - ref).max()),
            "preferred_answer_changes_vs_lmeval": int(sum(a != b for a, b in zip(pref, pref_ref))),
        })
    return rows


def write_markdown(all_rows: list[dict], path: Path) -> None:
    cols = ["workload", "model", "method", "items", "seconds", "items_per_s", "speedup_vs_lmeval",
            "positions_per_token", "peak_rss_mb", "max_abs_diff_vs_lmeval", "preferred_answer_changes_vs_lmeval"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in all_rows:
        vals = []
        for c in cols:
            v = r[c]
            vals.append(f"{v:.2e}" if c == "max_abs_diff_vs_lmeval" else str(v))
        lines.append("| " + " | ".join(vals) + " |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--n-crows", type=int, default=300, help="CrowS-Pairs pairs (0: all 1,508)")
    ap.add_argument("--n-bbq", type=int, default=60, help="BBQ items (0: all 58,492)")
    ap.add_argument("--n-calm", type=int, default=12, help="CALM NLI items (0: all)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per method (1: on a shared 2-core machine, 2 threads under contention ran "
                         "5-10x slower than 1)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--child", nargs=5, metavar=("METHOD", "WORKLOAD", "N", "OUT", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        m, w, n, out, threads = args.child
        import torch
        torch.set_num_threads(int(threads))
        child(m, w, int(n), Path(out))
        return 0
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    sizes = {"crows": args.n_crows, "bbq": args.n_bbq, "calm": args.n_calm}
    all_rows = []
    for w in args.workloads:
        results = {}
        for m in args.methods:
            tmp = outdir / f".{w}-{m}.json"
            t0 = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--child", m, w, str(sizes[w]), str(tmp), str(args.threads)],
                           check=True,
                           env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})
            results[m] = json.loads(tmp.read_text())
            tmp.unlink()
            print(f"{w:6s} {m:7s} {results[m]['seconds']:8.1f} s scoring ({time.perf_counter() - t0:.0f} s with "
                  f"start-up)", flush=True)
        if set(METHODS) <= set(results):
            rows = compare(results)
            import pandas as pd
            pd.DataFrame(rows).to_csv(outdir / f"{w}.csv", index=False)
            all_rows += rows
            for r in rows:
                print(f"  {r['method']:7s} {r['items_per_s']:8.2f} {r['item']}/s  x{r['speedup_vs_lmeval']:.2f} vs "
                      f"lm-eval  max|d|={r['max_abs_diff_vs_lmeval']:.1e}  changes={r['preferred_answer_changes_vs_lmeval']}",
                      flush=True)
    if all_rows:
        import torch
        import transformers
        write_markdown(all_rows, outdir / "results.md")
        env = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "load_average_at_end": os.getloadavg(), "torch": torch.__version__,
               "transformers": transformers.__version__, "sizes": sizes, "torch_threads": args.threads,
               "lm_eval": __import__("importlib.metadata").metadata.version("lm_eval")}
        (outdir / "env.json").write_text(json.dumps(env, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
