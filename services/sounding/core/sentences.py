"""Splitting a passage into sentences for sentence-level inference (corpus inquiry).

A sentence ends at `.`, `!` or `?` followed by white space and an upper-case letter, a digit or
an opening bracket. Common abbreviations ("e.g.", "et al.", "Fig.", single initials) do not end
a sentence. Scientific abstracts, whose sentences are joined by single spaces, split back into
their sentences this way.
"""

from __future__ import annotations

import re

_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
_ABBREVIATION = re.compile(
    r"(?:\b(?:e\.g|i\.e|et al|vs|Fig|Figs|Dr|Mr|Mrs|Ms|No|approx|ca|cf|resp)\.|\b[A-Z]\.)$"
)


def split_sentences(text: str) -> list[str]:
    """The passage's sentences, stripped, in order (empty pieces dropped)."""
    pieces = _BOUNDARY.split(text.strip())
    sentences: list[str] = []
    for piece in pieces:
        if sentences and _ABBREVIATION.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return [s.strip() for s in sentences if s.strip()]
