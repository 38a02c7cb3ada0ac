"""Run profiles and the notebook registry: the one place that says how big each run is.

* ``smoke``   every notebook on a handful of prompts, in seconds per notebook (the test suite runs it).
* ``default`` every notebook with both embedded models on a 2-core CPU, all together within 30 minutes.
* ``paper``   the papers' full scale; meant for a GPU.

``params(profile, notebook, variant)`` returns the papermill parameters. Values here override the defaults in the
notebook's ``parameters`` cell; ``-p KEY=VALUE`` on the command line overrides both.
"""

from __future__ import annotations

import copy

EMBEDDED_MODELS = ["smollm2-135m-instruct", "gemma-3-270m"]

#: notebook -> variants (each variant runs the notebook once, into outputs/<notebook>/<variant>/; "" = no sub-folder)
NOTEBOOKS: dict[str, dict[str, dict]] = {
    "01_multifactor": {"ssqa": {"benchmark": "ssqa"}, "bbq": {"benchmark": "bbq"}},
    "02_calm": {"": {}},
    "03_crows_pairs_bayes": {"": {}},
    "04_agentic_entropy": {"": {}},
}

PROFILE_NAMES = ("smoke", "default", "paper")

# Per profile, per notebook parameters. Keep derived values out: notebooks derive them.
PROFILES: dict[str, dict[str, dict]] = {
    "smoke": {
        "*": {"models": ["smollm2-135m-instruct"], "device": "cpu", "dtype": "float32"},
        "01_multifactor": {"max_prompts": 24},
        "02_calm": {"max_prompts": 24},
        "03_crows_pairs_bayes": {"max_pairs": 10, "max_preference_pairs": 4,
                                 "datasets": ["crows_pairs_en_revised", "crows_pairs_fr"],
                                 "preference_datasets": ["crows_pairs_en_revised"]},
        "04_agentic_entropy": {"max_prompts": 12, "cyclic_prompts": 2, "fewshot_prompts": 0},
    },
    "default": {
        "*": {"models": EMBEDDED_MODELS, "device": "auto", "dtype": "auto"},
        "01_multifactor": {"max_prompts": 400},
        "02_calm": {"max_prompts": 400},
        "03_crows_pairs_bayes": {"max_pairs": 100, "max_preference_pairs": 60},
        "04_agentic_entropy": {"max_prompts": 150, "cyclic_prompts": 12, "fewshot_prompts": 0},
    },
    "paper": {
        "*": {"models": EMBEDDED_MODELS, "device": "auto", "dtype": "auto"},
        "01_multifactor": {"max_prompts": None},
        "02_calm": {"max_prompts": None},
        "03_crows_pairs_bayes": {"max_pairs": None, "max_preference_pairs": None},
        "04_agentic_entropy": {"max_prompts": None, "cyclic_prompts": None, "fewshot_prompts": 120},
    },
}


def params(profile: str, notebook: str, variant: str = "") -> dict:
    if profile not in PROFILES:
        raise KeyError(f"unknown profile {profile!r}; choose one of {PROFILE_NAMES}")
    if notebook not in NOTEBOOKS:
        raise KeyError(f"unknown notebook {notebook!r}; choose one of {sorted(NOTEBOOKS)}")
    p = copy.deepcopy(PROFILES[profile].get("*", {}))
    p.update(copy.deepcopy(PROFILES[profile].get(notebook, {})))
    p.update(copy.deepcopy(NOTEBOOKS[notebook][variant]))
    p["profile"] = profile
    return p
