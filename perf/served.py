"""Served backend benchmark (not a test): one replica vs two, and biaslab vs lm-eval's ``local-completions``.

Against real llama-cpp-python servers serving the embedded SmolLM2 GGUF, each pinned to one core with ``taskset``:

1. biaslab's served backend, one replica (max_concurrency 1) on the CrowS-Pairs sentences of ``--pairs`` pairs;
2. the same with two replicas (cores 0 and 1): throughput ratio, goal >= 1.8x;
3. lm-evaluation-harness 0.4.13 ``local-completions`` (``loglikelihood_rolling``, token requests with SmolLM2's BOS as
   prefix token) on the same sentences against the one replica, run in its own venv (``--lmeval-python``): scores
   compared and throughput ratio.

Records requests/s, tokens/s (prompt tokens the server reports), peak RSS of the servers and of the client, and the
machine's load average (the machine is shared). Writes perf/results/served.json and served.md.

    .venv/bin/python perf/served.py --pairs 20 --lmeval-python perf/.venv-lmeval/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from served_helpers import ALIAS, PREFIX, LlamaServer  # noqa: E402


class PinnedServer(LlamaServer):
    def __init__(self, core: int):
        super().__init__(threads=1)
        self.core = core

    def start(self, timeout: float = 180):
        import tempfile
        import httpx
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.log = tempfile.NamedTemporaryFile("w+", prefix="llama-server-", suffix=".log", delete=False)
        cmd = ["taskset", "-c", str(self.core), sys.executable,
               "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", ALIAS, "--logits_all", "true",
               "--host", "127.0.0.1", "--port", str(self.port), "--n_threads", "1", "--n_threads_batch", "1",
               "--n_ctx", "2048", "--verbose", "false"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.5)
        raise RuntimeError("server not ready")

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
        return float("nan")


def biaslab_run(urls, texts, tmp):
    from biaslab import models, scoring
    lm = models.load({"base_url": urls, "model": ALIAS, "prefix": PREFIX, "max_concurrency": 1, "name": "bench"})
    sc = scoring.Scorer(lm, cache_dir=tmp, progress=False)
    sc.require("prompt_logprobs")
    sc.served._opening()           # the one-off requests are not part of the timing
    t0 = time.perf_counter()
    df = sc.sequence_logprob(texts)
    dt = time.perf_counter() - t0
    u = lm.fingerprint["usage"]
    return df, {"wall_s": round(dt, 2), "requests": u["requests"] - 1, "req_per_s": round((u["requests"] - 1) / dt, 3),
                "prompt_tokens_per_s": round(u["prompt_tokens"] / dt, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--lmeval-python", default=str(HERE / ".venv-lmeval" / "bin" / "python"))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--skip-replicas", action="store_true", help="one server only: biaslab vs lm-eval")
    args = ap.parse_args()
    import tempfile
    from biaslab import models, paths
    from biaslab.benchmarks import crows_pairs as cp
    p = cp.subsample(cp.load_original(), args.pairs, seed=0).prompts
    texts = list(dict.fromkeys(list(p.sent_more) + list(p.sent_less)))
    res = {"pairs": args.pairs, "texts": len(texts), "load_avg_before": os.getloadavg(), "cpus": os.cpu_count()}
    servers = [PinnedServer(0).start()] + ([] if args.skip_replicas else [PinnedServer(1).start()])
    try:
        one, res["one_replica"] = biaslab_run([servers[0].url], texts, tempfile.mkdtemp())
        if not args.skip_replicas:
            two, res["two_replicas"] = biaslab_run([s.url for s in servers], texts, tempfile.mkdtemp())
            res["two_vs_one"] = round(res["one_replica"]["wall_s"] / res["two_replicas"]["wall_s"], 2)
            res["max_abs_diff_one_vs_two"] = float(np.abs(one.sum_logprob - two.sum_logprob).max())
        if Path(args.lmeval_python).exists():
            inp = Path(tempfile.mkdtemp()) / "in.json"
            inp.write_text(json.dumps({"url": servers[0].url + "/completions", "model": ALIAS, "texts": texts,
                                       "tokenizer": str(models.cache_folder("smollm2-135m-instruct"))}))
            outp = inp.with_name("out.json")
            r = subprocess.run([args.lmeval_python, str(HERE / "served_lmeval.py"), str(inp), str(outp)],
                               capture_output=True, text=True)
            if r.returncode:
                res["lmeval_error"] = r.stderr[-2000:]
            else:
                le = json.loads(outp.read_text())
                lp = np.array(le["logprobs"])
                ours = one.sum_logprob.to_numpy()
                # lm-eval on llama.cpp: the server drops the BOS and nulls the first token's log-prob, and
                # lm-eval's parse skips ctxlen=1 positions, so its sum lacks each sentence's first token
                res["lmeval"] = {"wall_s": le["wall_s"], "req_per_s": round(len(texts) / le["wall_s"], 3),
                                 "biaslab_speedup": round(le["wall_s"] / res["one_replica"]["wall_s"], 2),
                                 "pearson_r": float(np.corrcoef(lp, ours)[0, 1]),
                                 "mean_diff_biaslab_minus_lmeval": float((ours - lp).mean()),
                                 "pref_agreement": float(((lp[:args.pairs] > lp[args.pairs:2 * args.pairs]) ==
                                                          (ours[:args.pairs] > ours[args.pairs:2 * args.pairs])).mean())
                                 if len(texts) == 2 * args.pairs else None}
        else:
            res["lmeval"] = f"not run: {args.lmeval_python} missing (make bench builds perf/.venv-lmeval)"
        res["server_peak_rss_mb"] = [round(s.peak_rss_mb(), 1) for s in servers]
        res["client_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        res["load_avg_after"] = os.getloadavg()
    finally:
        for s in servers:
            s.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("served_lmeval.json" if args.skip_replicas else "served.json")).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
