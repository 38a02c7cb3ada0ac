"""Benchmark workloads: each builds the same (context, continuation) requests for every method.

A workload is a name, the model it scores with, and ``build(n, seed)`` returning a :class:`Requests`. A new workload
is one :func:`register` call (e.g. a served-backend comparison); the harness and the report need nothing else.
All use one prefix convention: the BOS token before every text. Runs in the project's environment (reads data/raw).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lib"))

SMOLLM, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"


@dataclass
class Requests:
    requests: list[tuple[str, str]]      # (context, continuation); context "" = the text alone after BOS
    groups: list[list[int]]              # request indices of one item (a pair's two sentences, an item's options)
    item: str                            # what one group is ("pair", "item")
    strata: list[str] = field(default_factory=list)   # per item: its template / category, for the record
    stratum: str = "strata"              # what the strata are ("templates", "categories")

    @property
    def n_items(self) -> int:
        return len(self.groups)


@dataclass(frozen=True)
class Workload:
    name: str
    model: str
    build: Callable[[int, int], Requests]   # (n items, 0 = all; seed) -> Requests
    about: str


WORKLOADS: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    WORKLOADS[w.name] = w
    return w


def raw(repo: str, path: str) -> Path:
    from biaslab import sources
    return sources.raw_path(repo, path)


def crows(n: int, seed: int = 0) -> Requests:
    """Both sentences of n random CrowS-Pairs (English) pairs, log P(sentence | BOS); n = 0: all 1,508."""
    import pandas as pd
    df = pd.read_csv(raw("nyu-mll/crows-pairs", "data/crows_pairs_anonymized.csv"))
    if n and n < len(df):
        df = df.sample(n=n, random_state=seed).sort_index()
    reqs = [("", s) for r in df.itertuples() for s in (r.sent_more, r.sent_less)]
    return Requests(reqs, [[2 * i, 2 * i + 1] for i in range(len(df))], "pair", list(df["bias_type"]), "bias types")


def bbq(n: int, seed: int = 0) -> Requests:
    """n random BBQ items over the 11 category files: ``context\\nQuestion: q\\nAnswer:`` + three answer options."""
    rng = random.Random(seed)
    files = sorted(raw("nyu-mll/BBQ", "data/Age.jsonl").parent.glob("*.jsonl"))
    items = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
    items = rng.sample(items, n) if n and n < len(items) else items
    reqs, groups = [], []
    for it in items:
        prompt = f"{it['context']}\nQuestion: {it['question']}\nAnswer:"
        groups.append(list(range(len(reqs), len(reqs) + 3)))
        reqs += [(prompt, " " + it[k]) for k in ("ans0", "ans1", "ans2")]
    return Requests(reqs, groups, "item", [it["category"] for it in items], "categories")


#: CALM's gender NLI file: 54 templates x 150 prompts, in template order (see biaslab.benchmarks.calm)
CALM_PER_TEMPLATE = 150


def calm(n: int, seed: int = 0, per_template: int = 5) -> Requests:
    """n CALM NLI (gender) items, ``per_template`` from each of n / per_template random templates, behind a fixed
    5-shot prompt from CALM's SNLI in-context examples; one-token options `` A`` / `` B`` / `` C``."""
    import zipfile

    import pandas as pd
    letters = {"entailment": "A", "neutral": "B", "not-entailment": "C"}

    def block(premise, hypothesis):
        return (f"Premise: {premise}\nHypothesis: {hypothesis}\nDoes the premise entail the hypothesis? "
                "A) entailment B) neutral C) not-entailment\nAnswer:")

    shots = pd.read_csv(raw("vipulgupta1011/CALM", "evaluation/benchmark/incontext_examples/SNLI_examples.csv"),
                        skipinitialspace=True)
    shots.columns = [c.strip() for c in shots.columns]
    fewshot = "".join(block(s.premise, s.hypothesis) + f" {letters[s.answer.strip()]}\n\n"
                      for s in shots.head(5).itertuples())
    with zipfile.ZipFile(raw("vipulgupta1011/CALM", "bias_dataset/gender_datasets.zip")) as z:
        lines = [x for x in z.read("gender_datasets/nli_gender_dataset.jsonl").decode().splitlines() if x.strip()]
    n_templates = len(lines) // CALM_PER_TEMPLATE
    assert n_templates * CALM_PER_TEMPLATE == len(lines), "CALM NLI gender file is not 54 x 150 prompts"
    rng = random.Random(seed)
    if n:
        k = min(n_templates, -(-n // per_template))
        picked = []
        for t in sorted(rng.sample(range(n_templates), k)):
            picked += [t * CALM_PER_TEMPLATE + j for j in sorted(rng.sample(range(CALM_PER_TEMPLATE), per_template))]
        picked = picked[:n]
    else:
        picked = list(range(len(lines)))
    reqs, groups, strata = [], [], []
    for i in picked:
        it = json.loads(lines[i])
        prompt = fewshot + block(it["premise"], it["hypothesis"])
        groups.append(list(range(len(reqs), len(reqs) + 3)))
        reqs += [(prompt, opt) for opt in (" A", " B", " C")]
        strata.append(f"nli-{i // CALM_PER_TEMPLATE:03d}")
    return Requests(reqs, groups, "item", strata, "templates")


register(Workload("crows", SMOLLM, crows, "CrowS-Pairs sequence scoring, log P(sentence | BOS)"))
register(Workload("crows_gemma", GEMMA, crows, "CrowS-Pairs sequence scoring with Gemma's 262k vocabulary"))
register(Workload("bbq", SMOLLM, bbq, "BBQ multiple choice, three multi-token options per prompt"))
register(Workload("calm", GEMMA, calm, "CALM NLI 5-shot, one-token options, Gemma"))
