"""CrowS-Pairs as hypothesis testing, notebook 3: its findings sentences (:mod:`.findings`). Loaders and prompt
formats: :mod:`biaslab.benchmarks.crows_pairs`; tests and Bayes factors: :mod:`biaslab.stats.hypothesis`.
"""
