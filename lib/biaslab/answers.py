"""Reading a generated answer: pure text functions, shared by the engine's users and the benchmarks' ``respond``."""

from __future__ import annotations

import re
from typing import Sequence

def first_sentence(text: str) -> str:
    """An open answer as read: leading blank lines skipped, cut at the next line break and after the first
    sentence end."""
    t = (text or "").lstrip().split("\n", 1)[0]
    m = re.search(r"[.!?](?=\s|$)", t)
    return (t[:m.end()] if m else t).strip()


_CUE = re.compile(r"(?:answer|choice|option)\s*(?:is|would be|:|=)?\s*[:\-]?\s*", re.IGNORECASE)


def _pattern(choice: str) -> re.Pattern:
    flags = 0 if len(choice.strip()) == 1 else re.IGNORECASE   # single letters: "A" is not the article "a"
    return re.compile(r"(?<![\w])" + re.escape(choice.strip()) + r"(?![\w])", flags)


def extract_choice(text: str | None, choices: Sequence[str]) -> str | None:
    """The choice a generated answer commits to, or None when it commits to none or is ambiguous.

    In order: (1) the choice right after the last answer cue ("answer is", "Answer:", "option", ...); (2) the choice
    the text starts with (after spaces, quotes, brackets and "*"); (3) the only choice mentioned anywhere, as a whole
    word. Matching ignores case except for one-character choices (so "A" is not the article "a"); longer choices
    win over choices they contain ("not known" over "not").
    """
    if not text:
        return None
    opts = sorted(dict.fromkeys(choices), key=lambda c: -len(c.strip()))
    pats = [(c, _pattern(c)) for c in opts]

    def match_at_start(s: str) -> str | None:
        s = s.lstrip(" \t\n\"'*([{")
        for c, p in pats:
            m = p.match(s)
            if m:
                return c
        return None

    cues = list(_CUE.finditer(text))
    for cue in reversed(cues):
        c = match_at_start(text[cue.end():])
        if c is not None:
            return c
    c = match_at_start(text)
    if c is not None:
        return c
    found, masked = [], text
    for c, p in pats:           # longest first; blank out what a longer choice matched
        if p.search(masked):
            found.append(c)
            masked = p.sub(lambda m: " " * len(m.group(0)), masked)
    return found[0] if len(found) == 1 else None
