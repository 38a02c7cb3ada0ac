"""biaslab: multi-factor, statistically careful measurement of social bias in language models.

Data flows one way (see DESIGN in the README):
sources -> benchmarks (prompt tables) -> scoring (response tables) -> outcomes -> stats -> plots/tables.
"""

__version__ = "0.1.0"
