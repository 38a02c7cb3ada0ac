"""The authored agentic benchmark: design counts, Table I choices, answer orders, loader validation."""

import re
import shutil

import numpy as np
import pandas as pd
import pytest

from biaslab.benchmarks import agentic, spec
from biaslab.stats.entropy import tidy_scores

TABLE_I = {
    "race": ["American Indian or Alaska Native", "Asian", "Black or African American",
             "Native Hawaiian or Other Pacific Islander", "White"],
    "gender": ["Male", "Female", "Non-binary"],
    "age": ["Adolescent (13-18)", "Young adult (18-25)", "Adult (25-40)", "Middle-Aged (40-65)", "Senior (65+)"],
    "socioeconomic_status": ["Low-income", "Middle-income", "High-income"],
    "political_affiliation": ["Democrat", "Republican", "Independent"],
}


@pytest.fixture(scope="module")
def bench():
    return spec("agentic").load()


@pytest.fixture(scope="module")
def prompts(bench):
    return bench.prompts


def test_row_count_and_nothing_excluded(bench):
    assert len(bench.prompts) == 1020
    assert len(bench.excluded) == 0
    assert bench.prompts["prompt_id"].is_unique


def test_table_i_choices_exactly():
    assert agentic.class_choices() == TABLE_I


def test_design_is_balanced_as_documented(prompts):
    # 3 question types x 5 class types x 2 polarities = 30 cells of 34 prompts; x 17 domains = 510 cells of 2
    cells = prompts.groupby(["question_type", "class_type", "polarity"]).size()
    assert len(cells) == 30 and (cells == 34).all() and cells.sum() == 1020
    fine = prompts.groupby(["question_type", "class_type", "polarity", "domain"]).size()
    assert len(fine) == 510 and (fine == 2).all()
    assert prompts["domain"].nunique() == 17
    # fully crossed: every question appears once with every class type
    per_q = prompts.groupby("question_id")["class_type"].agg(lambda s: tuple(sorted(s)))
    assert len(per_q) == 204 and (per_q == tuple(sorted(TABLE_I))).all()
    # every scenario is asked in both polarities
    assert (prompts.groupby("scenario_id")["polarity"].nunique() == 2).all()
    wide = agentic.design_counts(prompts)
    assert wide["total"].sum() == 1020 and (wide["total"] == 34).all()


def test_unbalanced_design_is_refused(prompts):
    with pytest.raises(Exception, match="not balanced"):
        agentic.check_balance(prompts.iloc[1:])


def test_factor_spec_declares_levels_and_references(bench):
    spec = bench.factors
    assert spec.names == ["domain", "class_type", "question_type", "polarity"]
    for f in spec.factors:
        assert set(bench.prompts[f.name]) == set(f.levels)
        assert f.reference in f.levels


def test_choices_in_text_follow_the_stored_order(prompts):
    for r in prompts.itertuples():
        listed = re.findall(r"^(\d)\. (.+)$", r.item_text, flags=re.M)
        assert [int(i) for i, _ in listed] == list(range(1, r.k + 1))
        assert [c for _, c in listed] == r.choices
        assert sorted(r.choices) == sorted(TABLE_I[r.class_type])
        assert r.text.endswith(r.item_text) and r.item_text.endswith("\nAnswer:")


def test_permutations_are_seeded_and_vary(prompts):
    again = [agentic.permutation(pid, TABLE_I[ct]) for pid, ct in zip(prompts.prompt_id, prompts.class_type)]
    assert again == prompts["choices"].tolist()
    assert agentic.permutation("x", TABLE_I["race"], seed=1) != agentic.permutation("x", TABLE_I["race"], seed=2) \
        or agentic.permutation("y", TABLE_I["race"], seed=1) != agentic.permutation("y", TABLE_I["race"], seed=2)
    # random orders: every group sits at every position, and position 1 is spread over the groups
    for ct, g in prompts.groupby("class_type"):
        first = g["choices"].str[0].value_counts()
        assert len(first) == len(TABLE_I[ct])
        assert first.max() < 0.6 * len(g)


def test_permutation_maps_answers_back_to_groups(prompts):
    """A synthetic model that always puts 90 % on 'Female', wherever it is listed, is read back as 'Female'."""
    g = prompts[prompts.class_type == "gender"].reset_index(drop=True)
    L = np.full((len(g), 5), np.log(0.05))
    for i, ch in enumerate(g["choices"]):
        L[i, ch.index("Female")] = np.log(0.9)
    dist = pd.DataFrame(L, columns=[f"logp_{j}" for j in range(1, 6)])
    per, long = tidy_scores(g, dist, "synthetic")
    assert (per["top_group"] == "Female").all()
    assert set(per["top_position"]) == {1, 2, 3}          # it sits at every position across prompts
    assert np.allclose(long[long.group == "Female"]["p"], 0.9)
    assert np.allclose(per["label_mass"], 1.0)


def test_committed_prompts_equal_the_bank(tmp_path):
    fresh = agentic.build_prompts()
    committed = pd.read_csv(agentic.BANK_DIR / "prompts.csv", dtype=str, keep_default_na=False)
    assert committed["item_text"].tolist() == fresh["item_text"].tolist()
    assert committed["order"].tolist() == fresh["order"].tolist()


def test_tampered_row_is_excluded_with_reason(tmp_path):
    d = tmp_path / "agentic"
    shutil.copytree(agentic.BANK_DIR, d)
    df = pd.read_csv(d / "prompts.csv", dtype=str, keep_default_na=False)
    df.loc[5, "item_text"] = df.loc[5, "item_text"].replace("Question:", "Question :")
    df.loc[7, "order"] = "Male|Male|Female"
    df.to_csv(d / "prompts.csv", index=False)
    with pytest.raises(Exception, match="not balanced"):     # two rows out -> the design check refuses
        agentic.load(bank_dir=d)
    kept, excluded = agentic._validate_rows(df.assign(k=df.k.astype(int)), agentic.build_prompts(d),
                                            agentic.class_choices(agentic.read_bank(d)), d / "prompts.csv")
    assert len(kept) == 1018 and len(excluded) == 2
    assert set(excluded["reason"].str[:20]) == {"answer order is not ", "text or order differ"}


def test_wrong_row_count_names_the_file(tmp_path):
    d = tmp_path / "agentic"
    shutil.copytree(agentic.BANK_DIR, d)
    df = pd.read_csv(d / "prompts.csv", dtype=str, keep_default_na=False)
    df.iloc[:-1].to_csv(d / "prompts.csv", index=False)
    with pytest.raises(Exception, match=r"prompts.csv: expected 1,020 rows, found 1,019"):
        agentic.load(bank_dir=d)


def test_fewshot_block(prompts):
    assert agentic.fewshot_block(0) == agentic.INSTRUCTION + "\n\n"
    b3 = agentic.fewshot_block(3)
    assert re.findall(r"Answer: (\d)", b3) == ["2", "4", "1"]
    assert prompts["text"].iloc[0].startswith(agentic.fewshot_block(2))
    with pytest.raises(ValueError):
        agentic.fewshot_block(4)


def test_balanced_subset(prompts):
    s = agentic.balanced_subset(prompts, 60, seed=3)
    assert len(s) == 60
    assert (s.groupby(["scenario_id", "class_type"])["polarity"].nunique() == 2).all()   # pairs intact
    assert (s.groupby(["question_type", "class_type"]).size() == 4).all()
    dom = s.drop_duplicates(["scenario_id", "class_type"])["domain"].value_counts()
    assert dom.max() - dom.min() <= 1 and len(dom) == 17
    assert agentic.balanced_subset(prompts, 60, seed=3)["prompt_id"].tolist() == s["prompt_id"].tolist()
    assert len(agentic.balanced_subset(prompts, None)) == 1020
    s24 = agentic.balanced_subset(prompts, 24, seed=0)
    assert len(s24) == 24 and s24.groupby(["question_type", "class_type"]).size().max() == 2   # 12 units, 15 strata


def test_cyclic_variants(prompts):
    p = prompts[prompts.k == 5].head(2)
    v = agentic.cyclic_variants(p)
    assert len(v) == 10
    v["text"] = agentic.requests(v)[0]                   # as respond asks them
    for pid, g in v.groupby("prompt_id"):
        orig = p.set_index("prompt_id").loc[pid]
        assert g.loc[g["shift"] == 0, "text"].iloc[0] == orig["text"]
        # every group at every position exactly once
        pos = np.array(g["choices"].tolist())
        assert all(len(set(pos[:, j])) == 5 for j in range(5))
        for r in g.itertuples():
            assert re.findall(r"^\d\. (.+)$", r.text.split("Question: ")[-1], flags=re.M) == r.choices


class _Tok:
    """Minimal tokenizer stand-in: splits the space from the digit (like the embedded GGUF tokenizers) or not."""
    def __init__(self, split):
        self.split = split

    def __call__(self, s, add_special_tokens=False):
        toks = ["Answer", ":", " ", "2"] if self.split else ["Answer", ":", " 2"]
        self._t = toks
        return {"input_ids": list(range(len(toks)))}

    def decode(self, ids):
        return "".join(self._t[i] for i in ids)


def test_answer_format_follows_the_tokenizer():
    suffix, labels = agentic.answer_format(_Tok(split=True), 3)
    assert suffix == " " and labels == {"1": ["1"], "2": ["2"], "3": ["3"]}
    suffix, labels = agentic.answer_format(_Tok(split=False), 3)
    assert suffix == "" and labels["2"] == [" 2"]


def test_subset_of_a_subset(prompts):
    s = agentic.balanced_subset(prompts, 300, seed=0)
    assert len(s) == 300 and (s.groupby(["question_type", "class_type", "polarity"]).size() == 10).all()
    c = agentic.balanced_subset(s, 30, seed=0)
    assert len(c) == 30 and set(c.prompt_id) <= set(s.prompt_id)
    assert (c.groupby(["question_type", "class_type"]).size() == 2).all()


@pytest.mark.model
def test_prompt_ends_where_the_embedded_tokenizer_expects_the_digit():
    """With SmolLM2's tokenizer the few-shot answers read ``:``, `` ``, digit, so the prompt ends with the space."""
    from biaslab import models
    tok = models.load("smollm2-135m-instruct", device="cpu", dtype="float32").tokenizer
    suffix, labels = agentic.answer_format(tok, 5)
    assert suffix == " " and labels["3"] == ["3"]
    text = agentic.fewshot_block(1) + "Question: x\n1. a\n2. b\nAnswer:"
    ids = tok(text + suffix + "2", add_special_tokens=False)["input_ids"]
    assert ids[:-1] == tok(text + suffix, add_special_tokens=False)["input_ids"]   # digit is its own next token
