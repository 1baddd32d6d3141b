"""Query analysis: the bandit's context as one fixed-length vector (adaptive-strategy spec §5.2).

Layout (`FEATURE_NAMES`, length `DIMENSION`), every value roughly in [0, 1] (the projection in
[-1, 1]):

  0      bias                 1.0
  1      length               log(1 + characters) / log(1 + 4096)
  2      word_count           min(words, 64) / 64
  3      entity_count         min(entity-like tokens, 8) / 8 (capitalised inside the sentence,
                              acronyms, tokens with digits, identifiers with _ or camelCase)
  4      ambiguous_refs       1 if the query leans on references it does not resolve (it, this,
                              that, they, these, those, other, former, latter, above), else 0
  5–10   question_type        one-hot: factoid, procedural, comparison, definition, yes_no,
                              statement (no question form, e.g. a claim to check)
  11–18  embedding_projection the unit query embedding through a fixed seeded Gaussian
                              projection to 8 dimensions, scaled to unit expected norm
  19     graph_entities       min(corpus-graph entities the query mentions, 20) / 20
  20     similar_outcomes     mean best-arm reward of the most similar observed queries
                              (0.5 when there are none)
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np
from numpy.typing import ArrayLike

QUESTION_TYPES = ("factoid", "procedural", "comparison", "definition", "yes_no", "statement")
PROJECTION_DIMENSION = 8
PROJECTION_SEED = 20261122
FEATURE_NAMES = (
    "bias",
    "length",
    "word_count",
    "entity_count",
    "ambiguous_refs",
    *(f"question_type.{name}" for name in QUESTION_TYPES),
    *(f"embedding_projection.{i}" for i in range(PROJECTION_DIMENSION)),
    "graph_entities",
    "similar_outcomes",
)
DIMENSION = len(FEATURE_NAMES)
NO_HISTORY = 0.5

_WORD = re.compile(r"\w+(?:[.'-]\w+)*")
_AMBIGUOUS = {"it", "this", "that", "they", "these", "those", "other", "former", "latter", "above", "them"}
_YES_NO_OPENERS = {
    "is",
    "are",
    "was",
    "were",
    "does",
    "do",
    "did",
    "can",
    "could",
    "should",
    "will",
    "has",
    "have",
}
_FACTOID_OPENERS = {"who", "when", "where", "which", "whom", "whose"}


def question_type(query: str) -> str:
    text = query.strip().lower()
    words = _WORD.findall(text)
    first = words[0] if words else ""
    if re.search(r"\b(vs\.?|versus|compared? (to|with)|difference between|better than)\b", text):
        return "comparison"
    if re.match(r"(how (to|do|does|can|should|would)\b|steps? to\b)", text):
        return "procedural"
    if re.match(r"(what (is|are|does .* mean)\b|define\b|meaning of\b)", text):
        return "definition"
    if first in _FACTOID_OPENERS or re.match(r"(how (many|much|long|old)|what)\b", text):
        return "factoid"
    if first in _YES_NO_OPENERS or text.endswith("?"):
        return "yes_no"
    return "statement"


def entity_count(query: str) -> int:
    tokens = _WORD.findall(query)
    count = 0
    for position, token in enumerate(tokens):
        if (
            any(c.isdigit() for c in token)
            or (len(token) > 1 and token.isupper())
            or "_" in token
            or re.search(r"[a-z][A-Z]", token)
            or (position > 0 and token[0].isupper())
        ):
            count += 1
    return count


@functools.cache
def _projection(embedding_dimension: int) -> np.ndarray:
    rng = np.random.default_rng(PROJECTION_SEED)
    return rng.standard_normal((PROJECTION_DIMENSION, embedding_dimension)) / math.sqrt(PROJECTION_DIMENSION)


def query_features(
    query: str, embedding: ArrayLike, graph_entities: int = 0, similar_outcomes: float = NO_HISTORY
) -> np.ndarray:
    words = _WORD.findall(query.lower())
    vector = np.asarray(embedding, dtype=float)
    norm = np.linalg.norm(vector)
    unit = vector / norm if norm else vector
    projection = _projection(len(unit))
    kind = question_type(query)
    return np.concatenate(
        [
            [
                1.0,
                math.log1p(len(query)) / math.log1p(4096),
                min(len(words), 64) / 64,
                min(entity_count(query), 8) / 8,
                float(any(word in _AMBIGUOUS for word in words)),
            ],
            [float(kind == name) for name in QUESTION_TYPES],
            np.clip(projection @ unit, -1.0, 1.0),
            [min(graph_entities, 20) / 20, similar_outcomes],
        ]
    )
