"""lm-eval's side of the served comparison, a long-lived worker inside lm-eval's own venv (perf/served.py starts it).

``python perf/served_lmeval.py CONFIG.json``: builds lm-evaluation-harness's ``local-completions`` model
(``LocalCompletionsAPI``) against one server, then, per line ``{"limit": k, "batch_size": b}`` on stdin, times
``loglikelihood`` of ("", sentence) for the first k sentences (all when k is null) and answers one JSON line
``{"seconds", "scores", "requests"}`` (the same protocol as worker.py). lm-eval keeps no cache between runs.

What lm-eval sends is what its own ``crows_pairs_english`` task sends (``output_type: multiple_choice``,
``doc_to_text: ""``): ``loglikelihood`` with an empty context, which lm-eval replaces by its prefix token (SmolLM2's
BOS, as biaslab's ``prefix``). ``loglikelihood_rolling`` is not used: in lm-eval 0.4.13 it calls
``_loglikelihood_tokens`` once per sentence, so it never has more than one request in flight whatever
``num_concurrent`` and ``batch_size`` say. ``loglikelihood`` sorts all requests by length and, with
``num_concurrent`` > 1, sends them as ``batch_size``-prompt POSTs with at most ``num_concurrent`` in flight
(api_models.py, ``get_batched_requests``).

Settings from the config: ``num_concurrent`` (the same number of requests in flight as biaslab's
``max_concurrency``), ``batch_size`` per run (1, lm-eval's default, or a list per POST where the server takes
lists), ``tokenized_requests`` (lm-eval's default True sends token ids, which vLLM takes; the llama-cpp-python server
rejects them, so False there), ``timeout`` and ``max_retries``.
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
                             tokenizer_backend="huggingface", num_concurrent=cfg["num_concurrent"],
                             max_retries=cfg.get("max_retries", 3), timeout=cfg.get("timeout", 300),
                             custom_prefix_token_id=cfg["prefix_token_id"],
                             tokenized_requests=cfg.get("tokenized_requests", False))
    posts = {"n": 0}
    if hasattr(lm, "amodel_call"):                   # count POSTs (every attempt) without changing what is sent
        inner = lm.amodel_call

        async def counted(*a, **kw):
            posts["n"] += 1
            return await inner(*a, **kw)
        lm.amodel_call = counted
    texts = cfg["texts"]
    from importlib import metadata
    proto.write(json.dumps({"ready": True, "versions": {"lm_eval": metadata.version("lm_eval")}}) + "\n")
    for line in sys.stdin:
        msg = json.loads(line)
        limit = msg.get("limit")
        lm._batch_size = int(msg.get("batch_size") or 1)
        sel = texts[:limit] if limit else texts
        reqs = [Instance(request_type="loglikelihood", doc={}, arguments=("", t), idx=i) for i, t in enumerate(sel)]
        posts["n"] = 0
        t0 = time.perf_counter()
        out = [float(ll) for ll, _ in lm.loglikelihood(reqs, disable_tqdm=True)]
        proto.write(json.dumps({"seconds": time.perf_counter() - t0, "scores": out,
                                "requests": posts["n"] if lm._concurrent > 1 else None}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
