"""The scoring engine: texts in, numbers out. It knows nothing about benchmarks. The :class:`Scorer` (``scorer``)
owns the prefix convention, the cache, batching and capability checks; ``backends`` compute (``for_model`` picks one).

>>> sc = Scorer(models.load("smollm2-135m-instruct"))                 # doctest: +SKIP
>>> sc.option_logprob(["Q: Is water wet?\\nA:"], [" yes", " no"])    # doctest: +SKIP
"""

from .generation import truncate_at_stop
from .labels import surface_forms
from .causal import group_by_prefix
from .scorer import Scorer

__all__ = ["Scorer", "surface_forms", "truncate_at_stop", "group_by_prefix"]
