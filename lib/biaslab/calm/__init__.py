"""CALM (Gupta et al., 2024) beyond loading: prompt formats and k-shot examples (:mod:`.prompting`), CALM's answer
normalisation and matching (:mod:`.answers`), the evaluation driver over the scoring engine (:mod:`.evaluate`),
the template perturbations of the robustness study (:mod:`.perturb`) and the text encoders of the diversity study
(:mod:`.encoders`). The loader and builder live in :mod:`biaslab.benchmarks.calm`; bias scores in
:mod:`biaslab.stats.calm_bias`; diversity measures in :mod:`biaslab.stats.diversity`.
"""
