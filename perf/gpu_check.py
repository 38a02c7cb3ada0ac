"""The scoring engine on a CUDA GPU: agreement with float32 on the CPU, throughput, and one notebook at paper scale.

Run on a machine with a GPU and the project's data (data/raw) and embedded models available::

    python perf/gpu_check.py --out /tmp/gpu --pairs 300 --notebook 03_crows_pairs_bayes

1. **Agreement.** SmolLM2 scores ``--pairs`` CrowS-Pairs pairs (both sentences, ``sequence_logprob``) on the CPU in
   float32 (the reference) and on the GPU in float32 and bfloat16: max and median |Δ log P|, Pearson r and how many
   pairs change which sentence is more likely.
2. **Throughput.** The whole original English CrowS-Pairs (1,508 pairs) with the engine on the GPU in bfloat16 and
   float32, against a naive loop (one sentence per forward pass) on the same device, each timed after a warm-up, the
   median of ``--repeats`` runs (GPU time is synchronized before the clock is read).
3. **A notebook at paper scale** (``--notebook``): its code cells executed in order with the ``paper`` profile's
   parameters (plus ``-p`` overrides) injected after the parameters cell, as papermill would; outputs under
   ``--out/<notebook>/``.

Results: ``--out/gpu_check.json`` and a printed table. Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def _sync():
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def agreement(pairs: int, seed: int = 0) -> dict:
    import numpy as np
    from biaslab import benchmarks, models, scoring
    from biaslab.benchmarks import crows_pairs as cp

    b = cp.subsample(benchmarks.load("crows_pairs_en"), pairs, seed=seed)
    texts = list(b.prompts["sent_more"]) + list(b.prompts["sent_less"])
    runs = {}
    for device, dtype in (("cpu", "float32"), ("cuda", "float32"), ("cuda", "bfloat16")):
        lm = models.load("smollm2-135m-instruct", device=device, dtype=dtype)
        sc = scoring.Scorer(lm, cache_dir=False, progress=False)
        runs[f"{device}/{dtype}"] = sc.sequence_logprob(texts)["logprob"].to_numpy(dtype=float)
    ref = runs["cpu/float32"]
    n = len(texts) // 2
    out = {"pairs": n}
    for key, v in runs.items():
        if key == "cpu/float32":
            continue
        d = np.abs(v - ref)
        flips = int(np.sum(np.sign(v[:n] - v[n:]) != np.sign(ref[:n] - ref[n:])))
        out[key] = {"max_abs_diff": float(d.max()), "median_abs_diff": float(np.median(d)),
                    "pearson_r": float(np.corrcoef(v, ref)[0, 1]), "preference_flips": flips}
    return out


def throughput(repeats: int) -> dict:
    import torch
    from biaslab import benchmarks, models, scoring

    b = benchmarks.load("crows_pairs_en")
    texts = list(b.prompts["sent_more"]) + list(b.prompts["sent_less"])
    out = {"sentences": len(texts)}
    for dtype in ("bfloat16", "float32"):
        lm = models.load("smollm2-135m-instruct", device="cuda", dtype=dtype)
        scoring.Scorer(lm, cache_dir=False, progress=False).sequence_logprob(texts[:64])  # warm-up
        times = []
        for _ in range(repeats):   # a fresh Scorer each time: its in-memory cache would answer a repeat
            sc = scoring.Scorer(lm, cache_dir=False, progress=False)
            _sync(); t = time.perf_counter()
            sc.sequence_logprob(texts)
            _sync(); times.append(time.perf_counter() - t)
        out[f"engine/{dtype}"] = {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}
        # naive: one sentence per forward pass, BOS prefix, full log-softmax
        tok, model = lm.tokenizer, lm.model
        prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id

        def naive(ts):
            with torch.inference_mode():
                for t in ts:
                    ids = torch.tensor([[prefix] + tok(t, add_special_tokens=False)["input_ids"]], device="cuda")
                    lp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
                    lp.gather(1, ids[0, 1:, None]).sum().item()
        naive(texts[:16])
        _sync(); t = time.perf_counter()
        naive(texts)
        _sync()
        out[f"naive/{dtype}"] = {"median_s": time.perf_counter() - t}
        out[f"speedup/{dtype}"] = out[f"naive/{dtype}"]["median_s"] / out[f"engine/{dtype}"]["median_s"]
        del model, lm, sc
        torch.cuda.empty_cache()
    return out


def run_notebook(name: str, out_dir: Path, overrides: dict) -> dict:
    """Execute the notebook's code cells in order, the parameters injected after its parameters cell."""
    import matplotlib
    matplotlib.use("Agg")
    from biaslab import paths
    from biaslab.run import profiles

    nb = json.loads((paths.NOTEBOOKS_DIR / f"{name}.ipynb").read_text())
    params = profiles.params("paper", name)
    params.update(overrides)
    params["output_dir"] = str(out_dir)
    from IPython.display import display   # a builtin inside a Jupyter kernel
    ns: dict = {"__name__": "__main__", "display": display}
    t0 = time.perf_counter()
    os.chdir(paths.NOTEBOOKS_DIR)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        exec(compile("".join(cell["source"]), f"{name}[cell {i}]", "exec"), ns)
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            ns.update(params)
    return {"notebook": name, "parameters": params, "wall_s": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--notebook", default=None)
    ap.add_argument("-p", action="append", default=[], help="notebook parameter KEY=JSON")
    ap.add_argument("--skip", action="append", default=[], choices=["agreement", "throughput"])
    a = ap.parse_args(argv)
    import torch
    a.out.mkdir(parents=True, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    import transformers
    res["transformers"] = transformers.__version__
    if "agreement" not in a.skip:
        res["agreement"] = agreement(a.pairs)
        print(json.dumps(res["agreement"], indent=1), flush=True)
    if "throughput" not in a.skip:
        res["throughput"] = throughput(a.repeats)
        print(json.dumps(res["throughput"], indent=1), flush=True)
    if a.notebook:
        overrides = {k: json.loads(v) for k, v in (p.split("=", 1) for p in a.p)}
        res["notebook"] = run_notebook(a.notebook, a.out / a.notebook, overrides)
        print(json.dumps(res["notebook"], indent=1, default=str), flush=True)
    (a.out / "gpu_check.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
