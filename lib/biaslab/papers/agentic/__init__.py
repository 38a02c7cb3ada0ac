"""The agentic multiple-choice benchmark scored by normalized entropy, notebook 4: its findings sentences
(:mod:`.findings`). Loader: :mod:`biaslab.benchmarks.agentic`; entropy statistics: :mod:`biaslab.stats.entropy`.
"""
