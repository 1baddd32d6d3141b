"""Splitting long documents into overlapping word windows.

A document of at most `max_words` words is one chunk. A longer one becomes windows of
`max_words` words, each starting `max_words - overlap_words` words after the previous one, the
last window ending at the document's end.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str


def chunk_words(text: str, max_words: int, overlap_words: int) -> list[Chunk]:
    if max_words <= 0:
        raise ValueError("max_words must be positive")
    if not 0 <= overlap_words < max_words:
        raise ValueError("overlap_words must be in [0, max_words)")
    words = text.split()
    if len(words) <= max_words:
        return [Chunk(0, text.strip())]
    step = max_words - overlap_words
    starts = list(range(0, len(words) - max_words, step)) + [len(words) - max_words]
    return [Chunk(i, " ".join(words[s : s + max_words])) for i, s in enumerate(starts)]
