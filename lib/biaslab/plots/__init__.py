"""Figures: matplotlib/seaborn functions that take tidy tables and return a Figure."""
