"""Deterministic template perturbations for CALM's robustness study (paper §4.1, Table 2, after Selvam et al., 2023).

The paper builds "four alternative constructions of CALM" by synonym substitution, added clauses and added
adjectives, but publishes neither the perturbed templates nor the procedure. This module is an authored,
documented, deterministic stand-in. Each perturbation edits only the template's **passage** (QA context, NLI
premise, sentiment sentence); the question / hypothesis and the multiple-choice options stay as they are, so the
gold answer is unchanged. Spans that must not change are protected: every ``<...>`` placeholder, and every
occurrence (case-insensitive) of the gold answer and, for multiple-choice templates, of each option's text.

* ``synonym`` — the first ``MAX_SYNONYMS`` words of the passage found in :data:`SYNONYMS` (a small authored table of
  single-word, same-inflection synonyms chosen to keep meaning and sentiment) are replaced, keeping capitalisation.
* ``clause`` — one of :data:`CLAUSES` (chosen by a CRC32 hash of the template id) is inserted before the
  punctuation that ends the passage's first sentence (or appended when there is none). The clauses add no
  content a task depends on.
* ``adjective`` — before the first noun of :data:`ADJECTIVES` that follows "the", "a" or "an", its adjective is
  inserted ("the kitchen" -> "the small kitchen"; "a" / "an" agree with the adjective).
* ``combined`` — the three in that order.

A template with nothing to edit stays as it is; :func:`perturb_templates` reports ``n_edits`` for every template so
the notebook can say how much of CALM each perturbation touched. The perturbed templates are filled with the same
name as each original prompt (:func:`perturb_prompts`), so original and perturbed scores are paired.
"""

from __future__ import annotations

import re
import zlib

import pandas as pd

from ...benchmarks.calm import fill

KINDS = ("synonym", "clause", "adjective", "combined")
MAX_SYNONYMS = 3

#: word -> synonym (lower case; same part of speech and inflection)
SYNONYMS = {
    "big": "large", "large": "big", "small": "little", "little": "small", "happy": "glad", "sad": "unhappy",
    "angry": "mad", "quickly": "rapidly", "slowly": "gradually", "began": "started", "begin": "start",
    "started": "began", "start": "begin", "movie": "film", "film": "movie", "movies": "films", "films": "movies",
    "children": "kids", "kids": "children", "child": "kid", "journeyed": "travelled", "travelled": "journeyed",
    "went": "headed", "moved": "went", "grabbed": "took", "picked": "collected", "dropped": "released",
    "discarded": "dropped", "very": "really", "really": "truly", "good": "fine", "great": "excellent",
    "bad": "poor", "terrible": "awful", "awful": "terrible", "love": "adore", "loves": "adores", "loved": "adored",
    "hate": "detest", "hates": "detests", "wanted": "wished", "decided": "chose", "looked": "appeared",
    "said": "stated", "told": "informed", "asked": "inquired", "shouted": "yelled", "yelled": "shouted",
    "afraid": "scared", "scared": "afraid", "funny": "amusing", "beautiful": "lovely", "lovely": "beautiful",
    "smart": "clever", "clever": "smart", "tired": "weary", "rich": "wealthy", "wealthy": "rich",
    "job": "occupation", "shop": "store", "store": "shop", "road": "street", "street": "road", "home": "house",
    "nice": "pleasant", "often": "frequently", "always": "constantly", "maybe": "perhaps", "perhaps": "maybe",
    "also": "too", "buy": "purchase", "bought": "purchased", "help": "assist", "helped": "assisted",
    "finished": "completed", "finish": "complete", "walked": "strolled", "ran": "sprinted", "closed": "shut",
    "house": "home", "fast": "quick", "quick": "fast", "huge": "enormous", "tiny": "minute", "gift": "present",
    "enjoy": "like", "enjoyed": "liked", "enjoys": "likes", "performance": "portrayal", "story": "tale",
}

CLAUSES = (", as it happened", ", on that occasion", ", as it turned out", ", in the end")

#: noun -> adjective inserted before it
ADJECTIVES = {
    "man": "tall", "woman": "tall", "boy": "young", "girl": "young", "kid": "young", "house": "old",
    "home": "quiet", "car": "red", "dog": "friendly", "cat": "grey", "room": "quiet", "kitchen": "small",
    "garden": "small", "office": "busy", "bedroom": "small", "bathroom": "small", "hallway": "long",
    "school": "local", "park": "local", "movie": "new", "film": "new", "book": "old", "game": "long",
    "city": "big", "town": "small", "team": "local", "store": "local", "shop": "local", "restaurant": "busy",
    "beach": "sunny", "street": "quiet", "road": "long", "table": "wooden", "door": "front", "window": "open",
    "phone": "new", "party": "big", "family": "whole", "story": "short", "song": "new", "show": "new",
    "meeting": "long", "day": "whole", "night": "cold", "morning": "early", "trip": "long", "class": "next",
    "ball": "red", "bike": "blue", "truck": "big", "box": "small", "bag": "heavy", "letter": "short",
    "picture": "old", "world": "whole", "country": "whole", "friend": "old", "friends": "old", "people": "other",
    "article": "recent", "comment": "recent", "comments": "recent", "writer": "same", "character": "main",
    "performance": "fine", "situation": "current", "conversation": "short", "events": "recent",
}

_WORD = re.compile(r"[A-Za-z]+")
_ABBREV = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "mt", "no", "u.s", "e.g", "i.e"}


def _protected(passage: str, protect: list[str]) -> list[tuple[int, int]]:
    spans = [m.span() for m in re.finditer(r"<.*?>", passage)]
    for p in protect:
        p = (p or "").strip()
        if "<" in p:            # an answer with a placeholder: protect its literal parts of three or more characters
            parts = [x.strip() for x in re.split(r"<.*?>", p) if len(x.strip()) >= 3]
        else:
            parts = [p] if p else []
        spans += [m.span() for part in parts for m in re.finditer(re.escape(part), passage, re.I)]
    return spans


def _inside(pos: int, spans, strict: bool = True) -> bool:
    return any((s < pos < e) if strict else (s <= pos < e) for s, e in spans)


def _overlaps(a: int, b: int, spans) -> bool:
    return any(a < e and s < b for s, e in spans)


def _case_like(src: str, word: str) -> str:
    if src.isupper() and len(src) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if src[:1].isupper() else word


def synonym(passage: str, protect: list[str], key: str = "") -> tuple[str, int]:
    spans = _protected(passage, protect)
    out, last, n = [], 0, 0
    for m in _WORD.finditer(passage):
        if n >= MAX_SYNONYMS:
            break
        w = m.group(0)
        syn = SYNONYMS.get(w.lower())
        if syn is None or _overlaps(m.start(), m.end(), spans):
            continue
        out += [passage[last:m.start()], _case_like(w, syn)]
        last, n = m.end(), n + 1
    out.append(passage[last:])
    return "".join(out), n


def clause(passage: str, protect: list[str], key: str = "") -> tuple[str, int]:
    spans = _protected(passage, protect)
    text = CLAUSES[zlib.crc32(key.encode()) % len(CLAUSES)]
    for m in re.finditer(r"[.!?](?=\s|$)", passage):
        prev = re.search(r"([A-Za-z.]+)$", passage[:m.start()])
        abbreviation = prev and prev.group(1).lower() in _ABBREV
        if not abbreviation and m.start() > 0 and passage[m.start() - 1].isalnum() and not _inside(m.start(), spans):
            return passage[:m.start()] + text + passage[m.start():], 1
    stripped = passage.rstrip()
    return stripped + text + passage[len(stripped):], 1


def adjective(passage: str, protect: list[str], key: str = "") -> tuple[str, int]:
    spans = _protected(passage, protect)
    for m in re.finditer(r"\b(the|a|an|The|A|An) ([a-z]+)\b", passage):
        noun = m.group(2)
        adj = ADJECTIVES.get(noun)
        if adj is None or _inside(m.start(2), spans, strict=False) or _inside(m.start(2) - 1, spans):
            continue
        art = m.group(1)
        if art.lower() in ("a", "an"):
            art = _case_like(art, "an" if adj[0] in "aeiou" else "a")
        return passage[:m.start()] + f"{art} {adj} {noun}" + passage[m.end():], 1
    return passage, 0


FUNCS = {"synonym": synonym, "clause": clause, "adjective": adjective}


def perturb_text(passage: str, kind: str, protect: list[str] | None = None, key: str = "") -> tuple[str, int]:
    """Apply one perturbation to a template passage; returns (new passage, number of edits)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    protect = protect or []
    if kind == "combined":
        total = 0
        for k in ("synonym", "clause", "adjective"):
            passage, n = FUNCS[k](passage, protect, key)
            total += n
        return passage, total
    return FUNCS[kind](passage, protect, key)


def _protect_list(t) -> list[str]:
    items = [t.answer_text if isinstance(t.answer_text, str) else ""]
    if t.answer_format == "span":
        items.append(t.answer if isinstance(t.answer, str) else "")
    if t.answer_format == "mcqa" and isinstance(t.question, str):
        items += re.findall(r"(?m)^[A-Z]: (.+)$", t.question)
    return [i for i in items if i]


def perturb_templates(templates: pd.DataFrame, kind: str) -> pd.DataFrame:
    """A copy of the template table (:func:`biaslab.benchmarks.calm.load_templates`) with perturbed passages and
    two more columns: ``perturbation`` and ``n_edits``."""
    rows = []
    for t in templates.itertuples(index=False):
        new, n = perturb_text(t.passage.strip(), kind, _protect_list(t), t.template_id)
        rows.append({**t._asdict(), "passage": new, "perturbation": kind, "n_edits": n})
    return pd.DataFrame(rows)


def perturb_prompts(prompts: pd.DataFrame, templates: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The prompts rebuilt from perturbed templates, each with its original name and group (paired design).
    ``prompt_id`` gets the suffix ``~<kind>``; ``orig_prompt_id`` keeps the original."""
    pt = perturb_templates(templates[templates["template_id"].isin(prompts["template_id"].unique())], kind)
    passage = dict(zip(pt["template_id"], pt["passage"]))
    edits = dict(zip(pt["template_id"], pt["n_edits"]))
    out = prompts.copy()
    out["orig_prompt_id"] = out["prompt_id"]
    out["prompt_id"] = out["prompt_id"] + "~" + kind
    out["passage"] = [fill(passage[t], n, g).strip() for t, n, g in zip(out["template_id"], out["name"], out["group"])]
    q = out["question"].where(out["question"].map(lambda x: isinstance(x, str)), None)
    out["text"] = [p if not isinstance(qq, str) else f"{p}\n{qq}" for p, qq in zip(out["passage"], q)]
    out["perturbation"] = kind
    out["n_edits"] = out["template_id"].map(edits)
    return out
