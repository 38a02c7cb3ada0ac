"""Reports a reader can open anywhere: executed notebooks as self-contained HTML (:mod:`.html`), checked and
photographed in a real browser (:mod:`.browser`)."""

from .html import render

__all__ = ["render"]
