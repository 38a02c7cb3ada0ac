"""Does a precision's numbers depend on how the run was scheduled? The embedded models on a handful of CrowS-Pairs
sentences, per precision: float32, bf16_weights (weights rounded to bfloat16, computed in float32: notebook 6's
level) and bfloat16 computed as such (the level it replaced).

For each: max |Δ log P| across the schedules of :func:`biaslab.scoring.tolerance.schedule_tolerance` (packed, one
text per forward pass, another thread count), the tolerance :func:`~biaslab.scoring.tolerance.tolerance` derives
from it, and how far the level moves the scores from float32 (the universe's own effect, which a tolerance must stay
well below). Writes ``perf/results/precision/schedule.json`` with ``--publish``, else prints it.

    .venv/bin/python perf/precision_schedule.py --pairs 8 [--publish]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

WHAT = "max |Δ log P| of each precision level across run schedules, and its shift from float32"
LEVELS = {"float32": {"dtype": "float32"},
          "bf16_weights": {"dtype": "float32", "weights_rounded_to": "bfloat16"},
          "bfloat16_compute": {"dtype": "bfloat16"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=WHAT)
    ap.add_argument("--pairs", type=int, default=8, help="CrowS-Pairs items (two sentences each)")
    ap.add_argument("--publish", action="store_true", help="write perf/results/precision/schedule.json")
    args = ap.parse_args()
    import torch

    from biaslab import models
    from biaslab.papers.multiverse import sweep
    from biaslab.scoring import Scorer, tolerance
    its, _ = sweep.items("crows_pairs", args.pairs)
    texts = sweep.tolerance_texts({"crows_pairs": its}, n=args.pairs)
    rows = []
    for m in models.EMBEDDED:
        ref = None
        for level, kw in LEVELS.items():
            t0 = time.perf_counter()
            lm = models.load(m, device="cpu", **kw)
            r = tolerance.schedule_tolerance(lm, texts)
            lp = Scorer(lm, cache_dir=False, progress=False).sequence_logprob(texts)["sum_logprob"].to_numpy(float)
            ref = lp if ref is None else ref
            rows.append({"model": m, "level": level, **r, "tolerance": tolerance.tolerance(r["max_abs_delta_logprob"]),
                         "max_abs_shift_from_float32": float(np.max(np.abs(lp - ref))),
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(json.dumps(rows[-1]), flush=True)
            del lm
    record = {"what": WHAT, "pairs": args.pairs, "torch_threads": torch.get_num_threads(),
              "torch": torch.__version__, "platform": platform.platform(), "load_average": os.getloadavg(),
              "rows": rows}
    if args.publish:
        out = Path(__file__).parent / "results" / "precision" / "schedule.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
