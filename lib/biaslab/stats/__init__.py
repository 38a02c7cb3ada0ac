"""Statistics over prompt and response tables: pure functions over pandas/numpy (never torch), each module citing the
paper and equation it implements. Clustered, paired inference follows Miller (2024, "Adding Error Bars to Evals"):
:mod:`.clustered` is the one rule for clustered means, rates and contrasts that :mod:`.intervals`, :mod:`.paired`
and :mod:`.power` apply; :mod:`.verdict` derives the columns every decided sentence keys on. :mod:`.bayesian` (bambi,
pymc) is imported lazily.
"""

from . import (clustered, coverage, importance, intervals, multiplicity, paired, power, responders, stratified,
               subgroups, verdict)

__all__ = ["clustered", "coverage", "subgroups", "importance", "intervals", "paired", "multiplicity", "responders",
           "power", "stratified", "verdict"]
