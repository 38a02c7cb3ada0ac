"""One method's long-lived worker: loads the model once, then times a run per request from the harness.

``python perf/worker.py METHOD MODEL REQUESTS.json THREADS``. Protocol: one JSON line per message on the
original stdout (library output goes to stderr): first ``{"ready": ...}``, then per command line ``{"limit": k}`` (k
requests, null = all) one result ``{"seconds", "scores", "positions", "peak_rss_mb", ...}``; EOF ends the worker.
Model loading and the method's setup happen before the first command, outside every timed run.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "lib"), str(HERE)]


def main(method: str, model: str, requests_file: str, threads: str) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                                   # anything printed by libraries goes to stderr
    import torch

    from biaslab import models
    from methods import METHODS, bos_ids
    torch.set_num_threads(int(threads))
    torch.manual_seed(0)
    requests = [tuple(r) for r in json.loads(Path(requests_file).read_text())]
    t0 = time.perf_counter()
    lm = models.load(model, device="cpu", dtype="float32")
    m = METHODS[method]
    state = m.setup(lm)
    tokens = sum(len(bos_ids(lm, c + x)) for c, x in requests)
    versions = {}
    for pkg in ("torch", "transformers", "lm_eval"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    proto.write(json.dumps({"ready": True, "load_seconds": time.perf_counter() - t0, "tokens": tokens,
                            "versions": versions, "python": sys.executable, "threads": torch.get_num_threads(), "weights_sha256": lm.fingerprint.get("weights_sha256"),
                            "rss_after_load_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}) + "\n")
    for line in sys.stdin:
        cmd = json.loads(line)
        reqs = requests[:cmd["limit"]] if cmd.get("limit") else requests
        t0 = time.perf_counter()
        scores, positions = m.run(state, reqs)
        seconds = time.perf_counter() - t0
        proto.write(json.dumps({"seconds": seconds, "scores": scores, "positions": positions,
                                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
