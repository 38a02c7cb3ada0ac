"""Runs inside lm-eval's own venv (called by perf/served.py): ``local-completions`` loglikelihood_rolling on
the given sentences against one llama-cpp-python server; writes the log-likelihoods and the wall time."""

import json
import sys
import time

from lm_eval.api.instance import Instance
from lm_eval.models.openai_completions import LocalCompletionsAPI

cfg = json.load(open(sys.argv[1]))
lm = LocalCompletionsAPI(base_url=cfg["url"], model=cfg["model"], tokenizer=cfg["tokenizer"],
                         tokenizer_backend="huggingface", num_concurrent=1, max_retries=3,
                         custom_prefix_token_id=1,   # SmolLM2 BOS <|im_start|>, as biaslab prefix
                         tokenized_requests=False)   # llama-cpp-python server takes string prompts only
reqs = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(t,), idx=i)
        for i, t in enumerate(cfg["texts"])]
t0 = time.perf_counter()
out = lm.loglikelihood_rolling(reqs, disable_tqdm=True)
json.dump({"logprobs": [float(x) for x in out], "wall_s": round(time.perf_counter() - t0, 2)},
          open(sys.argv[2], "w"))
