"""Figures: matplotlib/seaborn functions that take result tables and return a Figure."""
