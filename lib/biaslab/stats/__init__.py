"""Statistics over prompt and response tables: pure functions over pandas/numpy (never torch), each citing the
paper and equation it implements.

* :mod:`.coverage`     coverage percentage and Gini index of the factor tensor (multi-factor paper §3.2, eqs. 1-2),
  pairwise counts, aliasing (functional dependency) detection.
* :mod:`.subgroups`    k-level subgroups, deviation rates, log disparity (eq. 3), eCDF and deviation metric (eq. 4),
  two-sample KS tests (§3.3).
* :mod:`.importance`   logistic regression with treatment coding at reference levels, refusing aliased factor sets
  (§3.4).
* :mod:`.bayesian`     hierarchical Bayesian logistic regression with bambi (beyond the paper); imported lazily since
  it pulls in pymc.
* :mod:`.diversity`    template length and pairwise semantic similarity (CALM §4.3).
* :mod:`.hypothesis`   likelihood and preference schemes with t, Wilcoxon, binomial tests and Bayes factors
  (Bayesian CrowS-Pairs paper, eqs. 2-9).
* :mod:`.entropy`      normalized Shannon entropy of answer distributions (agentic paper §II.D).

Inference for clustered, paired benchmark data (Miller 2024, "Adding Error Bars to Evals"):

* :mod:`.clustered`    the one rule for clustered means, rates and contrasts: CR1 one- or two-way
  (crossed) standard errors, t(G - 1) references, Korn-Graubard rate intervals, the wild cluster restricted bootstrap
  (Webb weights, test inversion) below 30 clusters.
* :mod:`.intervals`    Clopper-Pearson, design effect, rate and mean intervals by that rule, cluster bootstrap
  (percentile) of statistics that are not means.
* :mod:`.paired`       paired model differences by that rule, exact McNemar, Wilcoxon, the paired alternative to
  the KS test.
* :mod:`.stratified`   design-based estimation from a stratified sample (Cochran 1977, ch. 5): stratified mean,
  variance, Satterthwaite df, Kish's effective n; a sampled profile's estimate of the whole file.
* :mod:`.multiplicity` Holm (FWER) and Benjamini-Hochberg (FDR) adjustment within families.
* :mod:`.responders`   responder check: degenerate model x benchmark pairs, with stated thresholds.
* :mod:`.power`        power, the minimum detectable effect of the analysed design (paired SE, a contrast's own
  design effect, absolute values) and the sample-size planner.

Decisions:

* :mod:`.verdict`      the verdict layer: the error budget (confirmatory Holm per family at its share of alpha,
  with intervals at each claim's tested level; exploratory BH), excludes-null, Bayes-factor
  direction over a prior range, responder status per metric, comparability, and the categorical verdict that every
  sentence keys on.
"""

from . import (clustered, coverage, importance, intervals, multiplicity, paired, power, responders, stratified,
               subgroups, verdict)

__all__ = ["clustered", "coverage", "subgroups", "importance", "intervals", "paired", "multiplicity", "responders",
           "power", "stratified", "verdict"]
