"""CALM (Gupta et al., 2024), its analyses (the items, their requests and the reading of answers are the benchmark's:
:mod:`biaslab.benchmarks.calm`, ``calm_prompts``, ``calm_answers``):

* :mod:`.bias`       bias scores (CALM eq. 1), the released code's variant and discard rules, intervals, nulls.
* :mod:`.perturb`    template perturbations of the robustness study.
* :mod:`.encoders`   text encoders of the diversity study (the measures are generic: :mod:`biaslab.stats.diversity`).
* :mod:`.published`  the paper's published values.
* :mod:`.plots`      CALM's figures.
"""
