"""lm-eval's side of the served comparison, a long-lived worker inside lm-eval's own venv (perf/served.py starts it).

``python perf/served_lmeval.py CONFIG.json``: builds lm-evaluation-harness's ``local-completions`` model
(``LocalCompletionsAPI``) against one llama-cpp-python server, then, per line ``{"limit": k}`` on stdin, times
``loglikelihood_rolling`` on the first k sentences (all when k is null) and answers one JSON line
``{"seconds", "scores"}`` (the same protocol as worker.py). lm-eval keeps no cache between runs.

Settings: ``tokenized_requests=False`` (the llama-cpp-python server rejects token-id prompts), SmolLM2's BOS as the
prefix token (as biaslab's ``prefix``), ``num_concurrent`` from the config (the same number of requests in flight
as biaslab's ``max_concurrency``), ``batch_size`` 1 (the server answers a list of prompts with HTTP 500).
"""

import json
import os
import sys
import time


def main(config: str) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                                   # lm-eval's own output goes to stderr
    from lm_eval.api.instance import Instance
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    cfg = json.load(open(config))
    lm = LocalCompletionsAPI(base_url=cfg["url"], model=cfg["model"], tokenizer=cfg["tokenizer"],
                             tokenizer_backend="huggingface", num_concurrent=cfg["num_concurrent"], max_retries=3,
                             custom_prefix_token_id=cfg["prefix_token_id"], tokenized_requests=False)
    texts = cfg["texts"]
    from importlib import metadata
    proto.write(json.dumps({"ready": True, "versions": {"lm_eval": metadata.version("lm_eval")}}) + "\n")
    for line in sys.stdin:
        limit = json.loads(line).get("limit")
        sel = texts[:limit] if limit else texts
        reqs = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(t,), idx=i)
                for i, t in enumerate(sel)]
        t0 = time.perf_counter()
        out = lm.loglikelihood_rolling(reqs, disable_tqdm=True)
        proto.write(json.dumps({"seconds": time.perf_counter() - t0, "scores": [float(x) for x in out]}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
