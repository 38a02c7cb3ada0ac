"""Multi-factor analysis (Powers et al.), notebook 1: response tables for SSQA and BBQ from the scoring engine
(:mod:`.responses`). The paper's statistics (coverage, subgroups, factor importance) are generic and live in
:mod:`biaslab.stats`.
"""
