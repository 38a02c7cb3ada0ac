"""What computes a :class:`biaslab.scoring.Scorer`'s numbers: peers behind one interface (:class:`.base.Backend`):
:mod:`.local` (transformers in-process; :mod:`.seq2seq`, :mod:`.masked`), :mod:`.served` (an OpenAI-compatible
server, through :mod:`.client`) and :mod:`.imported` (another harness's per-sample log). :func:`for_model` is the one
place that picks a backend; a new backend is one class and one entry there.
"""

from __future__ import annotations

from .base import CAPABILITIES, Backend


def for_model(lm, probe_dir=None, token_budget: int | None = None, **engine_options) -> Backend:
    """The backend that computes ``lm``'s scores. ``engine_options`` go to the in-process causal engine
    (:class:`.local.CausalBackend`: ``padding_side``, ``share_prefixes``, ``prefix``, ``packing``)."""
    if getattr(lm, "backend", "local") == "imported":
        from .imported import ImportedBackend
        return ImportedBackend(lm)
    if getattr(lm, "backend", "local") == "served":
        from .served import ServedBackend
        return ServedBackend(lm, probe_dir=probe_dir, token_budget=token_budget)
    if lm.kind == "causal":
        from .local import CausalBackend
        return CausalBackend(lm, token_budget=token_budget, **engine_options)
    if lm.kind == "seq2seq":
        from .seq2seq import Seq2SeqBackend
        return Seq2SeqBackend(lm, token_budget=token_budget)
    if lm.kind == "masked":
        from .masked import MaskedBackend
        return MaskedBackend(lm, token_budget=token_budget)
    raise ValueError(f"model {lm.name!r} is of kind {lm.kind!r}; the backends score causal, seq2seq and masked LMs")


__all__ = ["Backend", "CAPABILITIES", "for_model"]
