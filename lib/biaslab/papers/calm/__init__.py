"""CALM (Gupta et al., 2024), everything specific to it in one package:

* :mod:`.data`       loader, validator and builder of the 78,400 prompts from templates and name lists.
* :mod:`.prompting`  prompt formats and k-shot examples.
* :mod:`.answers`    CALM's answer normalisation and matching.
* :mod:`.evaluate`   the evaluation driver over the scoring engine.
* :mod:`.bias`       bias scores (CALM eq. 1), the released code's variant and discard rules, intervals, nulls.
* :mod:`.perturb`    template perturbations of the robustness study.
* :mod:`.encoders`   text encoders of the diversity study (the measures are generic: :mod:`biaslab.stats.diversity`).
* :mod:`.published`  the paper's published values.
* :mod:`.plots`      CALM's figures.
"""
