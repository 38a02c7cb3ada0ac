"""biaslab: multi-factor, statistically careful measurement of social bias in language models.

Data flows one way (docs/layout.md):
sources -> benchmarks (prompt tables) -> scoring (response tables) -> outcomes -> stats -> plots/tables.
"""

__version__ = "0.1.0"
