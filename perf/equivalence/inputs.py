"""The fixed inputs and the calls that record.py and check.py both make, so the two sides of the comparison score
exactly the same requests. Uses only the library's public API (record.py runs it against an older library)."""
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from biaslab import sources  # noqa: E402
from biaslab.benchmarks import agentic, crows_pairs as cp  # noqa: E402

p = cp.subsample(cp.load_original(), 150, seed=1).prompts
texts = list(p.sent_more) + list(p.sent_less)            # 300 sentences
rng = random.Random(0)
files = sorted(sources.raw_path("nyu-mll/BBQ", "data/Age.jsonl").parent.glob("*.jsonl"))
items = rng.sample([json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()], 100)
bbq_prompts = [f"{it['context']}\nQuestion: {it['question']}\nAnswer:" for it in items]
bbq_opts = [[" " + it[k] for k in ("ans0", "ans1", "ans2")] for it in items]
ap = agentic.balanced_subset(agentic.load().prompts, 100, seed=0)
gen_prompts = bbq_prompts[:12]


def run_all(sc, lm) -> dict:
    """Every Scorer method on the inputs above (a causal model)."""
    suffix, labels = agentic.answer_format(lm.tokenizer, k=agentic.MAX_K)
    return {
        "seq": sc.sequence_logprob(texts, per_token=True),
        "opt": sc.option_logprob(bbq_prompts, bbq_opts),
        "opt_shared": sc.option_logprob(bbq_prompts[:30], [" yes", " no", " maybe"]),
        "opt_chat": sc.option_logprob(bbq_prompts[:20], [" A", " B"], chat="auto"),
        "lab": sc.label_distribution((ap["text"] + suffix).tolist(), labels),
        "lab_list": sc.label_distribution(bbq_prompts[:30], ["yes", "no"], chat="auto"),
        "gen": sc.generate(gen_prompts, max_new_tokens=12),
        "gen_stop": sc.generate(gen_prompts[:6], max_new_tokens=12, stop=["\n", "."], chat="auto"),
        "gen_sample": sc.generate(gen_prompts[:6], max_new_tokens=8, do_sample=True, seed=3, temperature=0.7),
        "tokstr": sc.token_strings("The nurse was tired."),
        "chat_available": sc.chat_available(),
    }


def run_tiny(sc, kind: str) -> dict:
    """The methods of a tiny seq2seq or masked model."""
    if kind == "seq2seq":
        return {"opt": sc.option_logprob(["Is the sky blue?", "Who was late?"], ["yes", "no", "cannot tell"]),
                "lab": sc.label_distribution(["Is the sky blue?", "Who was late?"], ["yes", "no"]),
                "gen": sc.generate(["Is the sky blue?"], max_new_tokens=5)}
    return {"pll": sc.pseudo_loglikelihood(texts[:10], per_token=True),
            "cp": sc.crows_pairs_pll(texts[:5], texts[150:155])}
