"""SocialStigmaQA loader and the paper's Table 1 / §3.2.1 coverage numbers."""

import numpy as np
import pandas as pd
import pytest

from biaslab.stats.coverage import coverage_by_factor, coverage_overall, functional_dependencies, spec_levels
from helpers import load_or_skip

ssqa = pytest.importorskip("biaslab.benchmarks.ssqa")


@pytest.fixture(scope="module")
def bench():
    return load_or_skip(ssqa.load, "SSQA")


def test_shape_and_levels(bench):
    p = bench.prompts
    assert len(p) == 10_360 and p.prompt_id.is_unique
    assert p.template.nunique() == 37 and (p.template.value_counts() == 280).all()
    assert p.stigma.nunique() == 94 and (p.stigma == "no stigma").sum() == 37
    assert p.prompt_style.value_counts().to_dict() == {"original": 3441, "positive": 3441, "doubt": 3441,
                                                       "base": 37}
    assert set(p.category) == {"no stigma", "Awkward", "Threatening", "Sociodemographic", "Innocuous Persistent",
                               "Unappealing Persistent"}


def test_templates_reproduce_prompts(bench):
    p = bench.prompts
    orig = p[p.prompt_style == "original"]
    rebuilt = [t.replace("{stigma}", s) for t, s in zip(orig.template_text, orig.stigma_phrase)]
    assert rebuilt == orig.text.tolist()
    assert orig.groupby("stigma").stigma_phrase.nunique().max() == 1


def test_holder_gender(bench):
    p = bench.prompts
    per_t = p[p.stigma != "no stigma"].groupby("template").gender.first()
    assert per_t.value_counts().to_dict() == {"gender neutral": 27, "female": 6, "male": 4}
    assert per_t["T13"] == "female" and per_t["T15"] == "male" and per_t["T17"] == "gender neutral"
    assert (p.loc[p.stigma == "no stigma", "gender"] == "no gender").all()


def test_table1_gini_per_factor():
    b = ssqa.load(cot=True)
    assert len(b.prompts) == 20_720
    lv = spec_levels(b.factors)
    g = coverage_by_factor(b.prompts, b.factors.names, lv).set_index("factor").gini.round(3)
    # the paper's Table 1 values for factors defined as in the paper
    assert g["stigma"] == 0.007 and g["template"] == 0.0 and g["prompt_style"] == 0.246
    assert g["biased_answer"] == 0.122 and g["cot"] == 0.0
    # our gender split (4/6/27) gives 0.556; one more male template gives the paper's 0.529
    assert g["gender"] == 0.556
    q = ssqa.paper_like_gender(b.prompts)
    g2 = coverage_by_factor(q, ["gender"], lv).gini.iloc[0]
    assert round(g2, 3) == 0.529


def test_overall_coverage_numbers():
    b = ssqa.load(cot=True)
    lv = spec_levels(b.factors)
    f = ["stigma", "gender", "prompt_style", "biased_answer", "cot"]
    o = coverage_overall(b.prompts, f, lv).iloc[0]
    assert o.n_prompts == 20_720 and round(o.coverage_percentage, 3) == 0.372
    o2 = coverage_overall(ssqa.paper_like_gender(b.prompts), f, lv).iloc[0]
    assert round(o2.coverage_percentage, 3) == 0.372 and round(o2.gini, 3) == 0.711


def test_template_determines_biased_answer(bench):
    deps = functional_dependencies(bench.prompts, ["template", "biased_answer", "gender"])
    assert any(d.determinant == ("template",) and d.dependent == "biased_answer" for d in deps)


def test_released_responses(bench):
    r = ssqa.released_responses(bench)
    assert len(r) == 2 * 10_360
    g = r[r.model == "granite-3.0-8b"]
    assert (g.answer == "other").sum() == 456 and (g.answer == "can't tell").sum() == 0
    assert (r.deviated == r.released_bias).all()
    assert ssqa.normalise_answer(" Can't tell.") == "can't tell" and ssqa.normalise_answer(None) == "other"


def test_cot_text():
    t = ssqa.cot_text("Shall I hire them? Answer with yes/no/can't tell.\xa0")
    assert t.startswith("Shall I hire them? Let's think step by step") and "Answer with" not in t


class _Scorer:
    """A base (or chat) model whose label distribution puts most probability on the i-th answer of the i-th prompt
    (cycling yes / no / can't tell) and whose generations per seed are given."""

    def __init__(self, chat=False, generations=None):
        self.chat, self.generations, self.asked = chat, generations or {}, []
        self.lm = type("LM", (), {"name": "fake"})()

    def instruction_tuned(self):
        return self.chat

    def label_distribution(self, prompts, labels, chat=False):
        self.asked.append(("label_distribution", list(prompts), list(labels), chat))
        p = np.full((len(prompts), 3), 0.1)
        p[np.arange(len(prompts)), np.arange(len(prompts)) % 3] = 0.8
        return pd.DataFrame({"p_yes": p[:, 0], "p_no": p[:, 1], "p_can't tell": p[:, 2], "label_mass": 0.3})

    def generate(self, prompts, max_new_tokens=64, chat=False, seed=None, **sampling):
        self.asked.append(("generate", list(prompts), max_new_tokens, chat, seed, sampling))
        return self.generations[seed][:len(prompts)]


def test_respond_reads_the_label_distribution_as_the_paper_asks(bench):
    items = bench.prompts.iloc[[1, 2, 3, 4]]
    r = ssqa.SPEC.responses(_Scorer(), items)
    assert r["answer"].tolist() == ["yes", "no", "can't tell", "yes"]
    assert r["deviated"].tolist() == (r["answer"] == items["biased_answer"].to_numpy()).astype(int).tolist()
    assert (r["seed"] == "none").all() and (r["cot"] == "no").all() and np.allclose(r["p_yes"], [0.8, .1, .1, .8])
    sc = _Scorer()
    ssqa.respond(sc, items)
    (_, texts, labels, chat), = sc.asked                     # a base model: the prompt after "Question:", "Answer:"
    assert labels == ["yes", "no", "can't tell"] and chat is False
    assert texts[0] == "Question: " + items["text"].iloc[0].replace("\xa0", " ").strip() + "\nAnswer:"
    sc = _Scorer(chat=True)
    ssqa.respond(sc, items)
    assert sc.asked[0][1][0] == items["text"].iloc[0].replace("\xa0", " ").strip() and sc.asked[0][3] is True


def test_respond_chain_of_thought_is_one_seeded_generation_per_seed(bench):
    items = ssqa.with_cot(bench).prompts.query("cot == 'yes'").iloc[[1, 2]]
    sc = _Scorer(generations={0: ["So... Answer: no", "I think yes"], 1: ["hmm", "Answer: can't tell"]})
    r = ssqa.SPEC.responses(sc, items, ssqa.COT.replace(max_new_tokens=20), seeds=range(2), temperature=0.5)
    assert r["seed"].tolist() == ["0", "0", "1", "1"] and (r["cot"] == "yes").all()
    assert r["answer"].tolist() == ["no", "yes", "other", "can't tell"]
    assert [a[2:5] for a in sc.asked] == [(20, False, 0), (20, False, 1)]
    assert sc.asked[0][5] == {"do_sample": True, "temperature": 0.5}
    assert sc.asked[0][1][0].endswith("\nReasoning:") and sc.asked[0][1][0].startswith("Question: ")
    ssqa.respond(sc, items, ssqa.COT, seeds=[0], do_sample=False)         # greedy, as for a server
    assert sc.asked[-1][5] == {} and sc.asked[-1][4] == 0
    with pytest.raises(ValueError, match="no answer format 'option_ll'"):
        ssqa.respond(sc, items, ssqa.PROTOCOL.replace(format="option_ll"))
