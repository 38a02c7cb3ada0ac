"""Run profiles and the notebook registry: the one place that says how big each run is.

* ``smoke``   every notebook on a handful of prompts, in seconds per notebook (the test suite runs it).
* ``default`` every notebook with both embedded models on a 2-core CPU: the whole agentic set, SSQA / BBQ / CALM /
  CrowS-Pairs subsets whose detectable effects ``tables/power.csv`` states, and notebook 6's design sized by its power
  and cost. Its cold and cached wall times are measured by ``make reproduce`` (docs/performance.md renders them from
  the MANIFESTs).
* ``paper``   the papers' full scale; meant for a GPU.

``params(profile, notebook, variant)`` returns the papermill parameters. Values here override the defaults in the
notebook's ``parameters`` cell, a benchmark's own sizes (``Spec.sizes``) override those of its notebook, and
``-p KEY=VALUE`` on the command line overrides all.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from ..benchmarks import SPECS
from ..benchmarks import crows_pairs as cp

EMBEDDED_MODELS = ["smollm2-135m-instruct", "gemma-3-270m"]


class _Planned(Mapping):
    """Notebook 1's variants: one per registered benchmark with a factor plan, a plugin loaded later included."""
    def __getitem__(self, name):
        if name in SPECS and SPECS[name].factor_plan is not None:
            return {"benchmark": name}
        raise KeyError(name)

    def __iter__(self):
        return iter([n for n, s in SPECS.items() if s.factor_plan is not None])

    def __len__(self):
        return len(list(iter(self)))


#: notebook -> variants (each variant runs the notebook once, into outputs/<notebook>/<variant>/; "" = no sub-folder)
NOTEBOOKS: dict[str, Mapping[str, dict]] = {
    "01_multifactor": _Planned(),
    "02_calm": {"": {}},
    "03_crows_pairs_bayes": {"": {}},
    "04_agentic_entropy": {"": {}},
    "06_multiverse": {"": {}},
    "05_compare": {"": {}},
    "07_mbbq": {"": {}},
}

#: notebooks that score nothing (they read the other notebooks' tables): no model, device or dtype parameters;
#: ``biaslab reproduce`` runs them after all the others
READS_OUTPUTS_ONLY = {"05_compare"}

#: lanes to start first with ``--jobs``, longest first (cold, 2 cores: perf/results/reproduce/default_cold.json),
#: notebook 7 before notebook 6, whose MBBQ universes ask notebook 7's requests on a subset of its items;
#: the others follow, in the notebooks' order (a lane is a notebook with the notebook-1 variant sharing its scores).
#: Notebook 6's paper universes send notebook 3's and 4's requests: whichever lane asks first computes them, the
#: other reads them from the cache (two lanes asking at once may both compute one).
LANE_ORDER = ("03_crows_pairs_bayes", "07_mbbq", "06_multiverse", "02_calm", "04_agentic_entropy")

PROFILE_NAMES = ("smoke", "default", "paper")

# Per profile, per notebook parameters. Keep derived values out: notebooks derive them.
PROFILES: dict[str, dict[str, dict]] = {
    "smoke": {
        # calibration_replications (notebooks 1-5, 7): 50 null replications, so that the smoke run stays fast
        "*": {"models": ["smollm2-135m-instruct"], "device": "cpu", "dtype": "float32"},
        "01_multifactor": {"max_prompts": 12, "cot_prompts": 1, "cot_seeds": 1, "cot_max_new_tokens": 8,
                           "bayes_draws": 0, "torch_threads": 1, "calibration_replications": 50},
        "02_calm": {"k_shot": 0, "template_ids": ["qa-054", "qa-086", "nli-011", "sentiment-045"],
                    "max_prompt_words": None, "names_per_group": 2, "perturbations": ["combined"],
                    "n_permutations": 100, "subset_runs": 2, "diversity_max_templates": 20,
                    "calibration_replications": 50},
        # 2 pairs per bias type (10 types): every type sampled, so the weighted pooled rows have a variance
        "03_crows_pairs_bayes": {"max_pairs": 20, "max_preference_pairs": 3,
                                 "datasets": ["crows_pairs_en_revised", "crows_pairs_fr"],
                                 "preference_datasets": ["crows_pairs_en_revised"], "calibration_replications": 50},
        "04_agentic_entropy": {"max_prompts": 12, "cyclic_prompts": 2, "fewshot_prompts": 0,
                               "calibration_replications": 50},
        # a handful of items and answer formats per benchmark (each spec's sizes["smoke"]["06_multiverse"]), two factors
        "06_multiverse": {"factors": ["answer_format", "normalization"], "precisions": ["float32"], "n_boot": 200},
        # notebook 5 reads the other notebooks' tables: every model found there; the wild cluster bootstrap (where
        # the rule uses it) with the rule's own draws, as notebooks 1-4, so an effect gets one interval
        "05_compare": {"models": None, "n_boot": None, "calibration_replications": 50},
        # MBBQ: 2 items per category x context stratum (the fewest with a stratum variance), English and Turkish x
        # 2 sets: 96 prompts
        "07_mbbq": {"items": 2, "languages": ["en", "tr"], "calibration_replications": 50},
    },
    "default": {
        "*": {"models": EMBEDDED_MODELS, "device": "auto", "dtype": "auto"},
        # 150 prompts cover every template x prompt-style stratum of SSQA (148) and every category x context x
        # polarity stratum of BBQ (44), and give BBQ's competence check about 40 items (88 items gave it 16: too few
        # to tell a model above chance, plan v6); CoT and the Bayesian model: see below;
        # torch's own thread count (one per core): on an idle 2-core CPU two threads are 1.7-1.8x one (CrowS-Pairs
        # sentences, both models); on a machine shared with other jobs pass -p torch_threads=1. Chain of thought on
        # 2 prompts x 2 seeds (75-80 % of CoT answers were unparseable at 5 seeds: both models are flagged
        # degenerate there; plan v7, 4 prompts until v6). No Bayesian model: at 300 draws x 2 chains no fit converged (R-hat > 1.01), so it cost
        # 1-2 min per run for a table the findings may not use; the paper profile fits it with 2,000 x 4.
        "01_multifactor": {"max_prompts": 150, "cot_prompts": 2, "cot_seeds": 2, "cot_max_new_tokens": 40,
                           "bayes_draws": 0, "bayes_tune": 300, "bayes_chains": 2, "torch_threads": 0},
        # 2 templates per task (prompts of <= 150 words), 2 names per group, 1 shot: 84 prompts + 84 perturbed per
        # model (plan v6; 4 templates and 3 names until v5, 5 names until v3): calm-eq1 is powered by no default
        # design (the plan's cold_budget), so notebook 2 is exploratory here and gets what the decided claims leave
        "02_calm": {"k_shot": 1, "templates_per_task": 2, "max_prompt_words": 150, "names_per_group": 2,
                    "perturbations": ["combined"], "n_permutations": 1000, "subset_runs": 6,
                    "diversity_max_templates": 150},
        # 700 pairs of each English file and 450 of the French (crows_pairs.DEFAULT_PAIRS; proportional to the bias
        # types, permanent random numbers of seed 0; the paper profile scores all 4,861): the plan's pooled claims
        # have 80 % power at their tested levels (lpbs-mean 0.99, the models' difference of shares 0.80, the French
        # file's 0.87 and 0.84; analysis_plan.yaml designs); the two English samples share their unchanged pairs.
        # The preference prompt (SmolLM2 only, 2 orders; exploratory) on 30 pairs per dataset (45 until plan v6)
        "03_crows_pairs_bayes": {"max_pairs": cp.DEFAULT_PAIRS, "max_preference_pairs": 30},
        # 100 of the 1,020 agentic prompts (plan v7: whole positive/negative pairs, 10 per class type x polarity;
        # 150 in v6, 510 in v4-v5, all 1,020 until v3): no claim of notebook 4 is powered by a default design (the
        # plan's cold_budget), so it gets what the decided claims leave; every cyclic rotation of a stratified
        # 20-prompt subset (exploratory)
        "04_agentic_entropy": {"max_prompts": 100, "cyclic_prompts": 20, "fewshot_prompts": 0},
        # one factor at a time around the paper's protocol, on what the 30-minute cold budget leaves once the
        # decided claims are paid (plan v7): items per universe from each spec's sizes (multiverse_sizes: BBQ 5,
        # CrowS-Pairs 4, the agentic benchmark 2, Winogender 4, MBBQ 1 per stratum in its ambiguous contexts, the
        # only ones its metrics read), float32 only (bf16_weights in the paper profile); 80 % power at a BBQ bias
        # score of 0.1 would need ~660 ambiguous items per universe, so no equivalence can be shown here (the
        # notebook's first finding states what this design can detect). q4_gguf is not run here: through the
        # llama.cpp server it cost 10-60x an in-process universe on this CPU (pass -p 'precisions=["float32", "bf16_weights", "q4_gguf"]' with the served-test extra)
        "06_multiverse": {"pool": 150, "design_name": "ofat", "precisions": ["float32"], "n_boot": 2000},
        "05_compare": {"models": None, "n_boot": None},
        # MBBQ: 1 item per category x context stratum (12 items, random within the 12 strata), each in 4 languages
        # x 2 sets x the paper's 5 prompts = 480 prompts per model, design weighted back to all 9,436 items
        # (benchmarks/mbbq.py sample); no default design decides its claims (the plan's cold_budget), so it is
        # descriptive here (2 items per stratum until plan v6). Cold, one torch thread: about 0.85 s per prompt
        # (SmolLM2, chat template) and 0.57 s (Gemma, raw prompt). Notebook 1 scores the same items (the cache)
        "07_mbbq": {"items": 1},
    },
    "paper": {
        "*": {"models": EMBEDDED_MODELS, "device": "auto", "dtype": "auto"},
        "01_multifactor": {"max_prompts": None, "cot_prompts": None, "cot_seeds": 5, "cot_max_new_tokens": 256,
                           "bayes_draws": 2000, "bayes_tune": 1000, "bayes_chains": 4, "bayes_all_models": True},
        "02_calm": {"k_shot": 5, "templates_per_task": None, "max_prompt_words": None, "names_per_group": 50,
                    "perturbations": ["synonym", "clause", "adjective", "combined"],
                    "n_permutations": 1000, "subset_runs": 6, "diversity_max_templates": None},
        "03_crows_pairs_bayes": {"max_pairs": None, "max_preference_pairs": None},
        "04_agentic_entropy": {"max_prompts": None, "cyclic_prompts": None, "fewshot_prompts": 120},
        # the full sets (BBQ: every prompt of notebook 1's paper-profile run), every pair of changed choices
        "06_multiverse": {"pool": None, "design_name": "two_way", "precisions": ["float32", "bf16_weights"],
                          "n_boot": 2000},
        "05_compare": {"models": None, "n_boot": None},
        "07_mbbq": {"items": None},
    },
}


# Notebook 6's items of a sampler that takes a pool (BBQ's) come from notebook 1's sample (its ``pool``). Notebook 1
# on CrowS-Pairs, the agentic benchmark and CALM scores exactly what notebooks 3, 4 and 2 score in the same profile
# (their ``Spec.sizes``).
for _prof in PROFILES.values():
    _prof["06_multiverse"]["pool"] = _prof["01_multifactor"].get("max_prompts")


#: ``biaslab reproduce --served`` (``make reproduce-served``): the notebooks it runs on the embedded SmolLM2 GGUF served
#: by llama.cpp (:mod:`biaslab.models.local_server`), into ``<outputs>/served/``, and their sizes per profile. The
#: server's echo path costs 1-5 s per sentence on a 2-core CPU, so the default profile runs a documented subset:
#: notebook 3 on 40 pairs per dataset (20 preference pairs, both orders), notebook 4 on 120 prompts (10 in every
#: rotation). The smoke profile (the test suite) proves the path on notebook 3's two datasets with one pair per bias
#: type and 2 preference pairs in both orders: half the echoed sentences of its in-process smoke run.
SERVED_NOTEBOOKS = ("03_crows_pairs_bayes", "04_agentic_entropy")
SERVED_SIZES: dict[str, dict[str, dict]] = {
    "smoke": {"03_crows_pairs_bayes": {"max_pairs": 10, "max_preference_pairs": 2}},
    "default": {"03_crows_pairs_bayes": {"max_pairs": 40, "max_preference_pairs": 20},
                "04_agentic_entropy": {"max_prompts": 120, "cyclic_prompts": 10, "fewshot_prompts": 0}},
    "paper": {},
}


def multiverse_sizes(profile: str, parameter: str) -> dict:
    """Notebook 6's per-benchmark ``parameter`` (``items``: items per universe, None: all; ``formats``: the answer
    formats run): the ``sizes[profile]["06_multiverse"][parameter]`` each registered benchmark spec declares."""
    from .. import benchmarks
    return {n: s.sizes[profile]["06_multiverse"][parameter] for n, s in benchmarks.SPECS.items()
            if parameter in s.sizes.get(profile, {}).get("06_multiverse", {})}


def params(profile: str, notebook: str, variant: str = "", served: bool = False) -> dict:
    if profile not in PROFILES:
        raise KeyError(f"unknown profile {profile!r}; choose one of {PROFILE_NAMES}")
    if notebook not in NOTEBOOKS:
        raise KeyError(f"unknown notebook {notebook!r}; choose one of {sorted(NOTEBOOKS)}")
    # the "*" settings (models, device, dtype) are for notebooks that run models; notebook 5 only reads tables
    p = copy.deepcopy(PROFILES[profile].get("*", {})) if notebook not in READS_OUTPUTS_ONLY else {}
    p.update(copy.deepcopy(PROFILES[profile].get(notebook, {})))
    bench = NOTEBOOKS[notebook][variant].get("benchmark")
    if bench in SPECS:                 # a benchmark's own sizes (Spec.sizes[profile][notebook])
        p.update(copy.deepcopy(dict(SPECS[bench].sizes.get(profile, {}).get(notebook, {}))))
    p.update(copy.deepcopy(NOTEBOOKS[notebook][variant]))
    if served:
        p.update(copy.deepcopy(SERVED_SIZES[profile].get(notebook, {})))
    p["profile"] = profile
    return p
