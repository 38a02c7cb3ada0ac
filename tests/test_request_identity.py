"""Request identity at the paper's protocol: every request the old code paths sent (notebook 1's scorers, notebook 3's
preference loop, notebook 4's cell, notebook 6's respond module) is sent unchanged by the benchmarks' ``respond``, so
the score cache stays valid. Run once before the old paths were deleted (kept in the history of that change)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biaslab.benchmarks import agentic, bbq
from biaslab.benchmarks import crows_pairs as cp
from helpers import load_or_skip


class Lm:
    def __init__(self, name, template):
        self.name, self.kind, self.fingerprint = name, "causal", {}
        self.tokenizer = type("T", (), {"chat_template": template})()


class Recorder:
    """Records each request (method, texts, options / labels, chat) and answers with made-up numbers."""

    def __init__(self, name="smollm2-135m-instruct", template="x"):
        self.lm, self.calls, self.rng = Lm(name, template), [], np.random.default_rng(0)
        self.tokenizer = self.lm.tokenizer

    def instruction_tuned(self):
        from biaslab.papers.multifactor.responses import use_chat
        return use_chat(self.lm)

    def chat_available(self):
        return bool(self.lm.tokenizer.chat_template)

    def chat_logprobs(self):
        return self.chat_available()

    def token_strings(self, text):
        return ["Answer", ":", " ", "2"]

    def option_logprob(self, prompts, options, chat=False):
        self.calls.append(("options", list(prompts), [list(o) for o in options], chat))
        rows = [{"prompt_idx": i, "option_idx": j, "option": o, "sum_logprob": -float(len(o)) - i - j,
                 "n_tokens": 2, "mean_logprob": (-float(len(o)) - i - j) / 2}
                for i, os_ in enumerate(options) for j, o in enumerate(os_)]
        return pd.DataFrame(rows)

    def label_distribution(self, prompts, labels, chat=False):
        self.calls.append(("labels", list(prompts), labels, chat))
        names = list(labels)
        p = self.rng.dirichlet(np.ones(len(names)), len(prompts))
        d = pd.DataFrame({f"p_{n}": p[:, j] for j, n in enumerate(names)})
        for j, n in enumerate(names):
            d[f"logp_{n}"] = np.log(p[:, j] * 0.5)
        d["label_mass"] = 0.5
        return d

    def sequence_logprob(self, texts, per_token=False):
        self.calls.append(("sequences", list(texts)))
        return pd.DataFrame({"sum_logprob": [-float(len(t)) for t in texts], "n_tokens": [len(t.split()) for t in texts]})

    def generate(self, prompts, max_new_tokens=64, stop=None, chat=False, **kw):
        self.calls.append(("generate", list(prompts), max_new_tokens, chat))
        return ["0" for _ in prompts]


@pytest.fixture(autouse=True)
def old_wordings(monkeypatch):
    """The old respond module reads the wordings file as it was (one text column)."""
    import io
    import subprocess
    from biaslab.papers.multiverse import respond
    csv = subprocess.run(["git", "show", "main:data/multiverse/wordings.csv"], capture_output=True, text=True,
                         check=True).stdout
    monkeypatch.setattr(respond, "wordings", lambda: pd.read_csv(io.StringIO(csv), keep_default_na=False))


@pytest.fixture(scope="module")
def bbq_items():
    from biaslab.papers.multiverse import run
    return load_or_skip(lambda: run.items("bbq", 48, seed=0, bbq_pool=150)[0], "BBQ")


@pytest.mark.parametrize("name,template", [("smollm2-135m-instruct", "x"), ("gemma-3-270m", None)])
def test_bbq_requests_identical(bbq_items, name, template):
    from biaslab.papers.multifactor import responses as mf
    from biaslab.papers.multiverse import design, respond
    old, new, nb6 = Recorder(name, template), Recorder(name, template), Recorder(name, template)
    theirs = mf.score_bbq(old, bbq_items, name, mf.use_chat(old.lm))
    mine = bbq.respond(new, bbq_items)
    u = design.universes("bbq", design.Protocol(chat=("bbq",) if mf.use_chat(old.lm) else ()))[0].as_dict
    respond.bbq_respond(respond.Asker(nb6), bbq_items, u, name)
    assert old.calls == new.calls == nb6.calls and len(new.calls) == 1
    for c in ("choice", "choice_sum", "deviated", "correct", "chose_unknown", "logp_0", "logp_2"):
        assert (mine[c].to_numpy() == theirs[c].to_numpy()).all(), c
    # the other universes whose text the new wordings did not change: order, examples, format, chat
    for key, prot in [({"choice_order": "reversed"}, bbq.PROTOCOL.replace(order="reversed")),
                      ({"choice_order": "cyclic"}, bbq.PROTOCOL.replace(order="cyclic")),
                      ({"examples": "2"}, bbq.PROTOCOL.replace(examples=2)),
                      ({"answer_format": "label_dist"}, bbq.PROTOCOL.replace(format="label_dist")),
                      ({"chat_template": "off" if u["chat_template"] == "on" else "on"},
                       bbq.PROTOCOL.replace(chat="off" if u["chat_template"] == "on" else "on"))]:
        a, b = Recorder(name, template), Recorder(name, template)
        respond.bbq_respond(respond.Asker(a), bbq_items, {**u, **key}, name)
        bbq.respond(b, bbq_items, prot)
        assert a.calls == b.calls, key


def test_crows_requests_identical():
    from biaslab.papers.multifactor import factorial
    from biaslab.papers.multiverse import run
    load_or_skip(cp.load_original, "CrowS-Pairs")
    items, _ = run.items("crows_pairs", 90, seed=0)
    old, new = Recorder(), Recorder()
    theirs = factorial.score_crows(old, items, "m")
    mine = cp.respond(new, items)
    assert old.calls == new.calls
    np.testing.assert_array_equal(mine["stereotype_preferred"].to_numpy(), theirs["stereotype_preferred"].to_numpy())
    # notebook 3's preference loop: each order, label distribution, chat where a template exists (else "\nAnswer:")
    for template in ("x", None):
        for order, level in (("more_first", "original"), ("less_first", "reversed")):
            a, b = Recorder(template=template), Recorder(template=template)
            chat = a.chat_available()
            pr = cp.preference_prompts(items, order=order, suffix="" if chat else "\nAnswer:")
            a.label_distribution(list(pr.prompt), list(cp.LABELS), chat=chat)
            cp.respond(b, items, cp.PROTOCOL.replace(format="label_dist", order=level))
            assert a.calls == b.calls, (template, order)
        a, b = Recorder(template=template), Recorder(template=template)
        chat = a.chat_available()
        for order in cp.ORDERS:
            pr = cp.preference_prompts(items, order=order, suffix="" if chat else "\nAnswer:")
            a.generate(list(pr.prompt), max_new_tokens=8, chat=chat)
        cp.respond(b, items, cp.PROTOCOL.replace(format="generated"))
        assert a.calls == b.calls


def test_agentic_requests_identical():
    from biaslab.papers.multifactor import factorial
    from biaslab.papers.multiverse import design, respond, run
    items, _ = run.items("agentic", 30, seed=0)
    old, new, nb4, nb6 = Recorder(), Recorder(), Recorder(), Recorder()
    old.lm.tokenizer = old.token_strings        # the tokenizer's view of "Answer: 2", as the Scorer gives it
    theirs = factorial.score_agentic(old, old.lm, items, "m")
    suffix, labels = agentic.answer_format(nb4.token_strings, k=agentic.MAX_K, chat=False)   # notebook 4's cell
    nb4.label_distribution((items["text"] + suffix).tolist(), labels, chat=False)
    u = design.universes("agentic", design.Protocol())[0].as_dict
    respond.agentic_respond(respond.Asker(nb6), items, u, "m", tokenizer=nb6.token_strings)
    mine = agentic.respond(new, items)
    assert old.calls == new.calls == nb4.calls == nb6.calls
    assert list(mine["top_group"]) == list(theirs["top_group"])
    for key, prot in [({"choice_order": "reversed"}, agentic.PROTOCOL.replace(order="reversed")),
                      ({"examples": "0"}, agentic.PROTOCOL.replace(examples=0)),
                      ({"answer_format": "option_ll"}, agentic.PROTOCOL.replace(format="option_ll"))]:
        a, b = Recorder(), Recorder()
        respond.agentic_respond(respond.Asker(a), items, {**u, **key}, "m", tokenizer=a.token_strings)
        agentic.respond(b, items, prot)
        assert a.calls == b.calls, key
