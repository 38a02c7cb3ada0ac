"""Served backend speed (not a test): biaslab against lm-eval's ``local-completions`` on the same llama.cpp server,
and one replica against two. ``make bench BENCH_PROFILE=served`` (or ``python perf/run_all.py --profile served``).

Two llama-cpp-python servers on 127.0.0.1 serve the embedded SmolLM2 GGUF file, each pinned to one core with
``taskset`` and one thread. On the same CrowS-Pairs sentences (both of ``--pairs`` random pairs, seed 0), three
methods run interleaved, round after round (harness.py), after one untimed warm-up each:

- ``biaslab``: ``Scorer.sequence_logprob`` against replica 1 (``max_concurrency`` requests in flight), a fresh
  in-memory score cache every run (every sentence is sent); the capability probe and the one-off first-token request
  are made before the clock starts;
- ``lmeval``: lm-evaluation-harness 0.4.13 ``LocalCompletionsAPI.loglikelihood_rolling`` against replica 1, in its
  own venv (served_lmeval.py), with the same number of requests in flight (``num_concurrent``);
- ``biaslab_2rep``: biaslab against both replicas.

Ratios are taken within a round (lm-eval seconds / biaslab seconds; one replica / two) and reported as min / median /
max over the rounds, with the 1-minute load average before and after every run. Scores: preference agreement per
pair and mean |difference| of the sentence log-probs, as each reports them (lm-eval on this server lacks each
sentence's first token: llama.cpp gives it no log-prob and lm-eval skips it) and on the same tokens (biaslab's sum
without its first token). Writes ``served.json``, ``served_runs.csv`` and ``results.md`` into the output folder.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "lib"), str(HERE), str(ROOT / "tests")]

import harness  # noqa: E402
from served_helpers import ALIAS, PREFIX, LlamaServer  # noqa: E402


class PinnedServer(LlamaServer):
    """The test server, pinned to one core (``taskset``), one thread."""

    def __init__(self, core: int):
        super().__init__(threads=1)
        self.core = core

    def command(self) -> list[str]:
        return ["taskset", "-c", str(self.core)] + super().command()

    def start(self, timeout: float = 180):
        return super().start(timeout)

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
        return float("nan")


class BiaslabRunner:
    """biaslab's served backend on ``urls``: a fresh in-memory cache per run, probe and first-token request untimed."""

    def __init__(self, urls: list[str], texts: list[str], concurrency: int):
        from biaslab import models, scoring
        self.spec = {"base_url": urls, "model": ALIAS, "prefix": PREFIX, "max_concurrency": concurrency,
                     "name": "bench"}
        self.texts = texts
        self._models, self._scoring = models, scoring
        sc = scoring.Scorer(models.load(self.spec), cache_dir=False, progress=False)
        sc.require("prompt_logprobs")
        self.probe = dict(sc.backend.probe())
        self.ready = {}

    def __call__(self, limit: int | None = None) -> dict:
        lm = self._models.load(self.spec)
        sc = self._scoring.Scorer(lm, cache_dir=False, progress=False)
        sc.backend._probe = dict(self.probe)
        sc.backend._opening(sc)                      # the one-off request for the first token, outside the clock
        sent = sc.stats["requests"]
        texts = self.texts[:limit] if limit else self.texts
        t0 = time.perf_counter()
        df = sc.sequence_logprob(texts, per_token=True)
        seconds = time.perf_counter() - t0
        first_less = [float(s - (lp[0] or 0.0)) if lp else 0.0 for s, lp in zip(df.sum_logprob, df.token_logprobs)]
        return {"seconds": seconds, "scores": df.sum_logprob.tolist(), "scores_without_first": first_less,
                "requests": sc.stats["requests"] - sent, "prompt_tokens": lm.fingerprint["usage"]["prompt_tokens"]}

    def close(self):
        pass


def start_lmeval(python: str, url: str, texts: list[str], concurrency: int, work: Path) -> harness.LineWorker:
    from biaslab import models
    cfg = work / "lmeval_served.json"
    cfg.write_text(json.dumps({"url": url + "/completions", "model": ALIAS, "texts": texts,
                               "tokenizer": str(models.cache_folder("smollm2-135m-instruct")),
                               "prefix_token_id": 1, "num_concurrent": concurrency}))
    env = os.environ | {"TOKENIZERS_PARALLELISM": "false"}
    return harness.LineWorker([python, str(HERE / "served_lmeval.py"), str(cfg)], "lmeval", work / "lmeval.log",
                              env)


def sentences(pairs: int, seed: int = 0) -> tuple[list[str], int]:
    """Both sentences of ``pairs`` random CrowS-Pairs pairs (sent_more first, then sent_less); a sentence that occurs
    twice is kept once only when the whole list has no duplicates (checked: pairs are then compared by position)."""
    from biaslab.benchmarks import crows_pairs as cp
    p = cp.subsample(cp.load_original(), pairs, seed=seed).prompts
    texts = list(p.sent_more) + list(p.sent_less)
    if len(set(texts)) != len(texts):
        raise SystemExit(f"{pairs} pairs (seed {seed}) repeat a sentence; choose another --pairs or --seed")
    return texts, len(p)


def compare(a: list[float], b: list[float], n_pairs: int) -> dict:
    a, b = np.asarray(a), np.asarray(b)
    pa = a[:n_pairs] > a[n_pairs:2 * n_pairs]
    pb = b[:n_pairs] > b[n_pairs:2 * n_pairs]
    return {"preference_agreement": float((pa == pb).mean()), "mean_abs_diff": float(np.abs(a - b).mean()),
            "max_abs_diff": float(np.abs(a - b).max()), "pearson_r": float(np.corrcoef(a, b)[0, 1])}


def markdown(res: dict) -> str:
    r = res["ratios"]

    def f(x):
        return f"{x['median']:.2f} ({x['min']:.2f}-{x['max']:.2f})"
    lines = [f"Served comparison: {res['texts']} CrowS-Pairs sentences ({res['pairs']} pairs, seed {res['seed']}), "
             f"{res['rounds']} interleaved rounds, {res['concurrency']} requests in flight per replica, "
             f"llama-cpp-python {res['versions'].get('llama_cpp_python')} servers pinned to one core each; "
             f"load average {res['load']['median']:.1f} ({res['load']['min']:.1f}-{res['load']['max']:.1f}) "
             f"on {res['cores']} cores.", "",
             "| method | seconds median (min-max) | sentences/s (median) |", "|---|---|---|"]
    for m, s in res["seconds"].items():
        lines.append(f"| {m} | {s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f}) | "
                     f"{res['texts'] / s['median']:.2f} |")
    lines += ["", "| ratio (per round) | median (min-max) |", "|---|---|",
              f"| biaslab vs lm-eval local-completions, one replica | {f(r['biaslab_vs_lmeval'])} |",
              f"| biaslab two replicas vs one | {f(r['two_vs_one'])} |",
              f"| biaslab two replicas vs lm-eval one replica | {f(r['two_vs_lmeval'])} |", "",
              "| scores compared | preference agreement | mean abs diff | max abs diff | Pearson r |", "|---|---|---|---|---|"]
    for k, v in res["agreement"].items():
        lines.append(f"| {k} | {v['preference_agreement']:.3f} | {v['mean_abs_diff']:.4f} | {v['max_abs_diff']:.4f} "
                     f"| {v['pearson_r']:.5f} |")
    return "\n".join(lines) + "\n"


def run(pairs: int, rounds: int, concurrency: int, lmeval_python: str, out: Path, warmup: int = 2,
        seed: int = 0) -> dict:
    from importlib import metadata
    texts, n_pairs = sentences(pairs, seed)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="served-bench-"))
    if not Path(lmeval_python).exists():
        raise SystemExit(f"no lm-eval environment at {lmeval_python}: `make bench` creates it")
    servers = [PinnedServer(0).start(), PinnedServer(1).start()]
    runners: dict = {}
    try:
        runners["biaslab"] = BiaslabRunner([servers[0].url], texts, concurrency)
        runners["lmeval"] = start_lmeval(lmeval_python, servers[0].url, texts, concurrency, work)
        runners["biaslab_2rep"] = BiaslabRunner([s.url for s in servers], texts, concurrency)
        records = harness.run_interleaved(runners, rounds, warmup=warmup, log=lambda s: print(s, flush=True))
        rss = [round(s.peak_rss_mb(), 1) for s in servers]
        lmeval_version = runners["lmeval"].ready.get("versions", {}).get("lm_eval")
    finally:
        for r in runners.values():
            r.close()
        for s in servers:
            s.stop()
    first = {}
    for rec in sorted(records, key=lambda x: x["round"]):
        first.setdefault(rec["method"], rec)
    res = {"pairs": n_pairs, "texts": len(texts), "seed": seed, "rounds": rounds, "concurrency": concurrency,
           "cores": os.cpu_count(), "load": harness.load_spread(records), "server_peak_rss_mb": rss,
           "versions": {"llama_cpp_python": metadata.version("llama_cpp_python"), "lm_eval": lmeval_version},
           "seconds": {m: harness.spread(v) for m, v in harness.seconds_by_method(records).items()},
           "ratios": {"biaslab_vs_lmeval": harness.spread(harness.paired_ratios(records, "biaslab", "lmeval")),
                      "two_vs_one": harness.spread(harness.paired_ratios(records, "biaslab_2rep", "biaslab")),
                      "two_vs_lmeval": harness.spread(harness.paired_ratios(records, "biaslab_2rep", "lmeval"))},
           "requests_per_run": {m: first[m].get("requests") for m in ("biaslab", "biaslab_2rep")},
           "agreement": {
               "biaslab vs lm-eval, as reported": compare(first["biaslab"]["scores"], first["lmeval"]["scores"],
                                                          n_pairs),
               "biaslab vs lm-eval, same tokens (biaslab without the first token)":
                   compare(first["biaslab"]["scores_without_first"], first["lmeval"]["scores"], n_pairs),
               "biaslab one replica vs two": compare(first["biaslab"]["scores"], first["biaslab_2rep"]["scores"],
                                                     n_pairs)}}
    (out / "served.json").write_text(json.dumps(res, indent=2) + "\n")
    import pandas as pd
    pd.DataFrame([{k: v for k, v in rec.items() if not k.startswith("scores")} for rec in records]).to_csv(
        out / "served_runs.csv", index=False)
    (out / "results.md").write_text(markdown(res))
    print(markdown(res))
    return res


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2, help="requests in flight per replica, both clients")
    ap.add_argument("--lmeval-python", default=str(HERE / ".venv-lmeval" / "bin" / "python"))
    ap.add_argument("--out", default=str(HERE / "results" / "_scratch" / "served"))
    args = ap.parse_args(argv)
    run(args.pairs, args.rounds, args.concurrency, args.lmeval_python, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
