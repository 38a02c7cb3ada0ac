"""Notebook 6's glue: the multiverse of evaluation choices.

* :mod:`.design`   the choices as a factor spec per benchmark (paper's protocol = reference levels) and the universes
* :mod:`.matcher`  the deterministic reader of open-ended answers
* :mod:`.gguf`     the q4 GGUF precision level through a local llama.cpp server
* :mod:`.sweep`    the items and the loop over every universe of a model (through the Scorer's public methods)
* :mod:`.decisions` the verdict columns (``stats.verdict``) and the per-metric responder check of every universe
* :mod:`.analysis` estimates, agreement with the paper's universe, factor importance, ordering, RUTEd
* :mod:`.findings` sentences, the robustness table notebook 5 reads, the section of docs/multiverse.md
"""
