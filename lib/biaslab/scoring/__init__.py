"""The scoring engine: texts in, numbers out. It knows nothing about benchmarks.

>>> from biaslab import models, scoring
>>> lm = models.load("smollm2-135m-instruct")                       # doctest: +SKIP
>>> sc = scoring.Scorer(lm)                                          # doctest: +SKIP
>>> sc.sequence_logprob(["The nurse was tired."])                    # doctest: +SKIP
>>> sc.option_logprob(["Q: Is water wet?\\nA:"], [" yes", " no"])    # doctest: +SKIP
>>> sc.label_distribution(["Rate 1-5:"], ["1", "2", "3", "4", "5"])  # doctest: +SKIP
>>> sc.generate(["Tell me a joke."], max_new_tokens=32, chat=True)   # doctest: +SKIP

Modules: ``scorer`` (the :class:`Scorer`: the prefix convention, the cache, batching and capability checks shared
by every backend), ``backends`` (what computes: ``local`` in-process causal LMs, ``seq2seq``, ``masked``
(pseudo-log-likelihood, CrowS-Pairs), ``served`` OpenAI-compatible servers; ``for_model`` picks one), ``causal``
(shared-prefix forward passes and the chunked output layer), ``batching``, ``cache`` (persistent, resumable),
``labels`` (surface forms), ``generation``.
"""

from .generation import truncate_at_stop
from .labels import surface_forms
from .causal import group_by_prefix
from .scorer import Scorer

__all__ = ["Scorer", "surface_forms", "truncate_at_stop", "group_by_prefix"]
