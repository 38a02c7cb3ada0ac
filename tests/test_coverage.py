"""Coverage metrics (multi-factor paper §3.2, eqs. 1-2) against hand-worked examples."""

import itertools

import numpy as np
import pandas as pd
import pytest

from biaslab.stats.coverage import (count_tensor, coverage_by_factor, coverage_overall, coverage_percentage,
                                    functional_dependencies, gini, pairwise_counts)


def mean_difference_gini(x):
    """Independent Gini: sum_ij |x_i - x_j| / (2 n^2 mean)."""
    x = np.asarray(x, float)
    return np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size ** 2 * x.mean())


def test_gini_equal_counts_is_zero():
    assert gini([1, 1, 1, 1]) == pytest.approx(0.0)
    assert gini([280] * 37) == pytest.approx(0.0)


def test_gini_hand_examples():
    # [0,0,0,1]: only the largest has weight (N - N + 1/2)/N = 1/8 -> 1 - 2/8
    assert gini([0, 0, 0, 1]) == pytest.approx(0.75)
    # [1,3]: 1/4 * 3/4 + 3/4 * 1/4 = 3/8 -> 1 - 3/4
    assert gini([3, 1]) == pytest.approx(0.25)
    # [1,2,3]: (1*2.5 + 2*1.5 + 3*0.5) / (6*3) = 7/18 -> 1 - 14/18
    assert gini([2, 3, 1]) == pytest.approx(4 / 18)


def test_gini_equals_mean_difference_form():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.integers(0, 50, size=rng.integers(2, 30))
        if x.sum() == 0:
            continue
        assert gini(x) == pytest.approx(mean_difference_gini(x))


def test_gini_table1_values_from_counts():
    # prompt style: base 37, original/positive/doubt 3,441 each; biased answer: yes 3,920, no 6,440
    assert round(gini([37, 3441, 3441, 3441]), 3) == 0.246
    assert round(gini([3920, 6440]), 3) == 0.122
    assert round(gini([37] + [111] * 93), 3) == 0.007


def test_gini_rejects_bad_input():
    with pytest.raises(ValueError):
        gini([0, 0])
    with pytest.raises(ValueError):
        gini([1, -1])


def test_coverage_percentage():
    assert coverage_percentage([0, 2, 0, 5]) == 0.5
    assert coverage_percentage([1, 1]) == 1.0


def test_count_tensor_includes_declared_unobserved_levels():
    df = pd.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "p"]})
    t = count_tensor(df, ["a", "b"], levels={"a": ["x", "y", "z"], "b": ["p", "q"]})
    assert t.size == 6
    assert t[("x", "p")] == 1 and t[("y", "q")] == 0 and t[("z", "p")] == 0
    o = coverage_overall(df, ["a", "b"], levels={"a": ["x", "y", "z"], "b": ["p", "q"]}).iloc[0]
    assert o.n_combinations == 6 and o.n_covered == 3 and o.coverage_percentage == 0.5
    # counts [0,0,0,1,1,1] -> GI = 1 - CP for 0/1 counts
    assert o.gini == pytest.approx(0.5)
    with pytest.raises(ValueError, match="not declared"):
        count_tensor(df, ["a"], levels={"a": ["x"]})


def test_full_factorial_is_perfectly_covered():
    df = pd.DataFrame(list(itertools.product("ab", "xyz", [0, 1])) * 2, columns=["f", "g", "h"])
    o = coverage_overall(df, ["f", "g", "h"]).iloc[0]
    assert o.coverage_percentage == 1.0 and o.gini == pytest.approx(0.0)
    byf = coverage_by_factor(df, ["f", "g"])
    assert list(byf.n_levels) == [2, 3] and np.allclose(byf.gini, 0)


def test_pairwise_counts_shape():
    df = pd.DataFrame({"a": ["x", "x", "y"], "b": ["p", "q", "p"]})
    pc = pairwise_counts(df, "a", "b")
    assert pc.loc["x", "q"] == 1 and pc.loc["y", "q"] == 0


def test_functional_dependencies():
    df = pd.DataFrame({"template": [1, 1, 2, 2, 3, 3], "answer": ["y", "y", "n", "n", "n", "n"],
                       "style": ["a", "b", "a", "b", "a", "b"]})
    deps = functional_dependencies(df, ["template", "answer", "style"])
    pairs = {(d.determinant, d.dependent) for d in deps}
    assert (("template",), "answer") in pairs
    assert (("answer",), "template") not in pairs
    assert not any(d.dependent == "style" for d in deps)
    assert "function of 'template'" in deps[0].message()


def test_near_functional_dependency_purity():
    df = pd.DataFrame({"t": [1, 1, 1, 1, 2, 2, 2, 2], "g": ["m", "m", "m", "x", "f", "f", "f", "f"]})
    # g -> t holds exactly (each g level sits in one t); t -> g only almost
    assert [d.dependent for d in functional_dependencies(df, ["t", "g"])] == ["t"]
    deps = [d for d in functional_dependencies(df, ["t", "g"], min_purity=0.8) if d.dependent == "g"]
    assert deps[0].purity == pytest.approx(7 / 8) and "almost" in deps[0].message()


def test_sparse_gini_equals_dense():
    rng = np.random.default_rng(2)
    x = rng.integers(1, 9, size=17)
    assert gini(x, n_zeros=40) == pytest.approx(gini(np.r_[x, np.zeros(40)]))
    df = pd.DataFrame({f"f{i}": rng.choice(list("abc"), 50) for i in range(4)})
    dense = count_tensor(df, list(df.columns))
    o = coverage_overall(df, list(df.columns)).iloc[0]
    assert o.gini == pytest.approx(gini(dense)) and o.coverage_percentage == pytest.approx(coverage_percentage(dense))


def test_huge_tensor_is_not_materialised():
    df = pd.DataFrame({f"f{i}": [0, 1] for i in range(12)})
    levels = {f"f{i}": list(range(30)) for i in range(12)}
    o = coverage_overall(df, list(df.columns), levels).iloc[0]
    assert o.n_covered == 2 and o.n_combinations == 30 ** 12
    assert o.gini == pytest.approx(1 - 2 / 30 ** 12)
    with pytest.raises(ValueError, match="too many"):
        count_tensor(df, list(df.columns), levels)
