"""The scoring methods compared, each ``fn(state, requests) -> (scores, positions)`` timed by the worker.

``setup(lm)`` builds what a method keeps between runs (outside the clock); ``env`` names the Python that runs it:
``project`` (.venv) or ``lmeval`` (perf/.venv-lmeval, lm-evaluation-harness's own environment). A new method is
one :func:`register` call.

* ``engine``: biaslab.scoring.Scorer, no cache, a fresh Scorer per run.
* ``naive``: one full forward pass per (context, continuation), batch 1, full logits.
* ``lmeval``: lm_eval.models.huggingface.HFLM.loglikelihood (batch 16), the already loaded model as ``pretrained``.
  SmolLM2's tokenizer adds no BOS, so its contexts start with the BOS string and empty contexts use lm-eval's prefix
  token (that BOS); lm-eval adds Gemma's ``<bos>`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Method:
    name: str
    run: Callable                     # (state, requests) -> (scores, positions)
    setup: Callable = lambda lm: lm   # (loaded model) -> state
    env: str = "project"


METHODS: dict[str, Method] = {}


def register(m: Method) -> Method:
    METHODS[m.name] = m
    return m


def bos_ids(lm, text: str) -> list[int]:
    tok = lm.tokenizer
    return [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]


def run_engine(lm, requests):
    from biaslab import scoring
    sc = scoring.Scorer(lm, cache_dir=False, progress=False)
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
    return scores, sc.stats.get("positions", 0)


def run_naive(lm, requests):
    """Continuation = the tokens of the joint tokenization after the context's own tokens (the engine's rule)."""
    import torch
    scores, positions = [], 0
    with torch.inference_mode():
        for ctx, cont in requests:
            full = bos_ids(lm, ctx + cont)
            n_ctx = len(bos_ids(lm, ctx))
            lp = torch.log_softmax(lm.model(torch.tensor([full])).logits[0].float(), -1)
            idx = torch.arange(n_ctx - 1, len(full) - 1)
            scores.append(float(lp[idx, torch.tensor(full[n_ctx:])].sum()))
            positions += len(full)
    return scores, positions


LMEVAL_BATCH = 16


def setup_lmeval(lm):
    from lm_eval.models.huggingface import HFLM
    hf = HFLM(pretrained=lm.model, tokenizer=lm.tokenizer, batch_size=LMEVAL_BATCH, backend="causal")
    tok = lm.tokenizer
    prefix = tok.bos_token if tok("x")["input_ids"][0] != tok.bos_token_id else ""
    return hf, prefix


def run_lmeval(state, requests):
    from lm_eval.api.instance import Instance
    hf, prefix = state
    insts = [Instance(request_type="loglikelihood", doc={}, arguments=((prefix + ctx) if ctx else "", cont), idx=i)
             for i, (ctx, cont) in enumerate(requests)]
    out = hf.loglikelihood(insts, disable_tqdm=True)
    return [float(s) for s, _ in out], lmeval_positions(hf, insts)


def lmeval_positions(hf, insts, batch_size: int = LMEVAL_BATCH) -> int:
    """Token positions lm-eval's HF backend runs: requests sorted by length, one-token continuations sharing their
    context de-duplicated (its logits cache), batches padded to their longest input."""
    seen, lens = set(), []
    for inst in insts:
        ctx, cont = inst.args
        if ctx == "":
            ctx_enc, cont_enc = [hf.prefix_token_id], hf.tok_encode(cont, add_special_tokens=False)
        else:
            ctx_enc, cont_enc = hf._encode_pair(ctx, cont)
        key = tuple(ctx_enc + cont_enc[:-1])
        if key not in seen:
            seen.add(key)
            lens.append(len(ctx_enc) + len(cont_enc) - 1)
    lens.sort(reverse=True)
    return sum(max(lens[i:i + batch_size]) * len(lens[i:i + batch_size]) for i in range(0, len(lens), batch_size))


register(Method("engine", run_engine))
register(Method("naive", run_naive))
register(Method("lmeval", run_lmeval, setup_lmeval, env="lmeval"))
