"""What computes a :class:`biaslab.scoring.Scorer`'s numbers.

The in-process transformers engine lives in ``scoring.scorer`` / ``scoring.causal`` (exact, fast where the model fits
one device); :mod:`.served` computes the same four methods through an OpenAI-compatible server, with :mod:`.client`
(async, replicas, retries, rate limits). :func:`biaslab.models.load` decides which one a model spec gets.
"""
