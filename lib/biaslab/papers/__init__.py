"""One package per paper: the glue that only one paper needs.

A paper's package holds its loader glue, prompt formats, answer parsing, the paper's own score variants, its
published reference values, its figures and the findings sentences of its notebook. Everything generic stays in the
stages of the flow (``sources → benchmarks → scoring → stats → plots``): a paper package may import any of them,
none of them imports a paper package (``tests/test_import_graph.py`` checks this).

* :mod:`.calm`         CALM (Gupta et al., 2024), notebook 2.
* :mod:`.multifactor`  multi-factor analysis (Powers et al.), notebook 1.
* :mod:`.mbbq`         MBBQ (Neplenbroek et al., 2024), notebook 7.
"""
