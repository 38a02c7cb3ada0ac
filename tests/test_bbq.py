"""BBQ loader: row counts, the biased-answer definition, outcomes and BBQ's bias score."""

import pandas as pd
import pytest

from helpers import load_or_skip

bbq = pytest.importorskip("biaslab.benchmarks.bbq")


@pytest.fixture(scope="module")
def bench():
    return load_or_skip(bbq.load, "BBQ")


def test_rows_and_exclusions(bench):
    assert len(bench.prompts) + len(bench.excluded) == 58_492
    assert len(bench.excluded) == 16 and (bench.excluded.category == "Gender_identity").all()
    assert bench.prompts.prompt_id.is_unique
    assert bench.prompts.category.nunique() == 11 and bench.prompts.template.nunique() == 343


def test_biased_answer_definition(bench):
    p = bench.prompts
    assert (p.biased_index != p.unknown_index).all()
    amb = p[p.context_condition == "ambig"]
    assert (amb.gold_index == amb.unknown_index).all() and (amb.correct_is_biased == "no").all()
    # first Age example: negative question, grandfather (old, stereotyped) is the biased answer;
    # its non-negative twin: the grandson
    neg = p[(p.category == "Age") & (p.example_id == 0)].iloc[0]
    non = p[(p.category == "Age") & (p.example_id == 2)].iloc[0]
    assert neg.options[neg.biased_index] == "The grandfather"
    assert non.options[non.biased_index] == "The grandson"


def test_target_loc_agrees_with_answer_info(bench):
    c = bbq.check_biased_answer(bench).set_index("category")
    for cat in ["Age", "Disability_status", "Gender_identity", "Physical_appearance", "Race_ethnicity",
                "Religion", "SES", "Sexual_orientation"]:
        assert c.loc[cat, "disagree"] == 0 and c.loc[cat, "checked"] > 0


def test_outcomes_and_bias_score():
    prompts = pd.DataFrame({"prompt_id": ["a", "b", "c", "d"], "gold_index": [2, 2, 0, 1],
                            "biased_index": [0, 1, 0, 0], "unknown_index": [2, 2, 1, 2],
                            "context_condition": ["ambig", "ambig", "disambig", "disambig"]})
    want = [0, 2, 0, 0]                                    # the option each answer should read as chosen

    class Options:                                          # the wanted option gets the highest mean log-probability
        lm = type("Lm", (), {"name": "m"})()
        instruction_tuned = chat_logprobs = staticmethod(lambda: False)

        def option_logprob(self, texts, options, chat=False):
            return pd.DataFrame([{"prompt_idx": i, "option_idx": j, "sum_logprob": -1.0 - (j != want[i]),
                                  "mean_logprob": -1.0 - (j != want[i])} for i in range(4) for j in range(3)])
    items = prompts.assign(context="C.", question="Q?", options=[["x", "y", "z"]] * 4)
    o = bbq.respond(Options(), items).merge(prompts[["prompt_id", "context_condition"]], on="prompt_id")
    assert o.choice.tolist() == want and o.non_unknown.tolist() == [1, 0, 1, 1]
    assert o.deviated.tolist() == [1, 0, 1, 1] and o.correct.tolist() == [0, 1, 1, 0]
    s = bbq.bias_scores(o, ["model"]).set_index("context_condition")
    # ambiguous: 1 biased of 1 non-unknown -> s_DIS = 1; accuracy 1/2 -> s_AMB = 0.5
    assert s.loc["ambig", "bias_score"] == pytest.approx(0.5)
    # disambiguated: 2 biased of 2 non-unknown -> 1
    assert s.loc["disambig", "bias_score"] == pytest.approx(1.0)
