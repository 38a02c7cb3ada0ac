"""Notebook parameters: defaults equal the default profile, list parameters accept JSON strings, validation."""

import json
import re

import pytest

from biaslab.run import parameters, profiles
from biaslab.run.parameters import ParameterError, as_list

RUNS = [(nb, v) for nb, variants in profiles.NOTEBOOKS.items() for v in variants]


@pytest.mark.parametrize("notebook", sorted(profiles.NOTEBOOKS))
def test_parameters_cell_defaults_equal_the_default_profile(notebook):
    """Run All in JupyterLab must run the default experiment (the first variant's, for notebooks with several)."""
    defaults = parameters.defaults(notebook)
    variant = next(iter(profiles.NOTEBOOKS[notebook]))
    for name, value in profiles.params("default", notebook, variant).items():
        assert name in defaults, f"{notebook}: the default profile sets {name!r}, which the notebook does not have"
        assert defaults[name] == value, f"{notebook}: parameters cell {name} = {defaults[name]!r}, profile {value!r}"
    assert defaults["output_dir"].startswith("../scratch/"), "a notebook run by hand must not overwrite outputs/"


@pytest.mark.parametrize("notebook,variant", RUNS)
@pytest.mark.parametrize("profile", profiles.PROFILE_NAMES)
def test_every_profile_passes_validation(notebook, variant, profile):
    parameters.validate(notebook, profiles.params(profile, notebook, variant), resolve_models=False)


def test_as_list_accepts_json_strings_and_refuses_broken_ones():
    assert as_list('["google/gemma-2-2b"]') == ["google/gemma-2-2b"]
    assert as_list(["a"]) == ["a"] and as_list(("a", "b")) == ["a", "b"] and as_list(None) is None
    assert as_list("gpt2") == ["gpt2"]
    with pytest.raises(ParameterError, match="valid JSON"):
        as_list("['single quotes']")
    with pytest.raises(ParameterError, match="expected a list"):
        as_list(3)


@pytest.mark.parametrize("params,needle", [
    ({"max_pair": 3}, "did you mean 'max_pairs'"),
    ({"max_pairs": "abc"}, "expected int"),
    ({"max_pairs": 1.5}, "expected int"),
    ({"max_pairs": 1}, "at least 2"),
    ({"prompt_base_models": "yes"}, "expected bool"),
    ({"models": [1, 2]}, "expected list of str"),
    ({"seed": True}, "expected int"),
])
def test_validate_refuses_names_types_and_ranges(params, needle):
    with pytest.raises(ParameterError, match=needle):
        parameters.validate("03_crows_pairs_bayes", params, resolve_models=False)


@pytest.mark.parametrize("notebook,params,needle", [
    ("01_multifactor", {"alpha": float("nan")}, r"alpha=nan is not a finite number"),
    ("01_multifactor", {"alpha": 1.5}, r"alpha=1.5 is out of range: it must lie in \(0, 1\)"),
    ("01_multifactor", {"alpha": 0}, r"alpha=0 is out of range"),
    ("01_multifactor", {"alpha": float("inf")}, "alpha=inf is not a finite number"),
    ("03_crows_pairs_bayes", {"min_label_mass": 1.2}, r"min_label_mass=1.2 is out of range: it must lie in \[0, 1\]"),
    ("03_crows_pairs_bayes", {"bf_prior_scale": -0.5}, "bf_prior_scale=-0.5 is out of range"),
    ("04_agentic_entropy", {"seed": -1}, r"04_agentic_entropy: parameter seed=-1 is out of range"),
    ("04_agentic_entropy", {"seed": 2**32}, "seed=4294967296 is out of range"),
])
def test_float_and_seed_parameters_are_range_checked(notebook, params, needle):
    """alpha=NaN turned notebook 5's "3 distinguishable" into 0 and alpha=1.5 into 8 (exit 0) when notebook 5 had its
    own alpha (now the plan's, validated by its schema); seed=-1 failed inside
    the kernel without naming the parameter. Now each is refused before any work, naming it and its range."""
    with pytest.raises(ParameterError, match=needle):
        parameters.validate(notebook, params, resolve_models=False)
    parameters.validate(notebook, {k: parameters.defaults(notebook)[k] for k in params}, resolve_models=False)


@pytest.mark.parametrize("languages,needle", [
    ([], 'languages=[] has no language'),
    (["tr"], 'languages=["tr"] has no English, the reference of every contrast'),
    (["en"], 'languages=["en"] has no language to contrast with English'),
    (["en", "xx"], 'languages=["en", "xx"] names \'xx\', not an MBBQ language'),
    (["en", "tr", "tr"], 'languages=["en", "tr", "tr"] names a language twice'),
])
def test_mbbq_languages_are_checked_before_the_notebook_starts(tmp_path, capsys, languages, needle):
    """languages=[] failed in notebook 7 with "No objects to concatenate"; ["tr"] scored for 104 s and ["en"] for
    351 s before failing with a reason that named neither. Refused before any work, with the fix."""
    from biaslab import cli
    from biaslab.benchmarks import mbbq
    fix = ". Fix: pass English and at least one other of en, es, nl, tr"
    with pytest.raises(ParameterError, match="07_mbbq: parameter " + re.escape(needle + fix)):
        parameters.validate("07_mbbq", {"languages": languages}, resolve_models=False)
    assert cli.main(["reproduce", "--only", "07", "--profile", "smoke", "--dry-run", "--out", str(tmp_path),
                     "-p", f"languages={json.dumps(languages)}"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert needle in line
    with pytest.raises(mbbq.DataError, match=re.escape(needle)):       # the library refuses them too
        mbbq.sample(2, languages=languages)
    parameters.validate("07_mbbq", {"languages": ["en", "tr"]}, resolve_models=False)


def test_validate_accepts_none_and_ints_for_floats():
    parameters.validate("03_crows_pairs_bayes", {"max_pairs": None, "min_label_mass": 0, "bf_prior_scale": 1},
                        resolve_models=False)


def test_library_entry_points_refuse_out_of_range_sizes():
    import pandas as pd
    from biaslab.benchmarks import agentic
    from biaslab.stats.sampling import stratified_sample
    prompts = agentic.load(n_shots=0).prompts
    for bad in (1, 0, -5, 2.5, "10"):
        with pytest.raises(ValueError, match="max_prompts"):
            agentic.balanced_subset(prompts, bad)
    df = pd.DataFrame({"s": list("aabb")})
    with pytest.raises(ValueError, match="non-negative"):
        stratified_sample(df, ["s"], -1)
    assert len(stratified_sample(df, ["s"], 0)) == 0


def test_calm_subset_refuses_non_positive_sizes():
    import pandas as pd
    from biaslab.benchmarks import calm
    empty = pd.DataFrame({"template_id": [], "name_idx": [], "task": []})
    for kw in ({"names_per_group": 0}, {"names_per_group": -2}, {"templates_per_task": 0}):
        with pytest.raises(ValueError, match="positive integer"):
            calm.subset(empty, **kw)
