"""Entity extraction for the corpus graph: deterministic, model-free, pure.

An "entity" is a key phrase of a text, found RAKE-style (Rose et al., 2010): the text is split
into candidate phrases at stop words and punctuation (a longer run is cut into pieces of at most
three words); each word scores degree / frequency over the text's candidates; a phrase scores
the sum of its words' scores. The best phrases are kept, plus every acronym or alphanumeric
identifier (e.g. "BRCA1", "IL-6"). Entities are lower-cased and whitespace-normalised, so the
same phrase in two chunks is the same node.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from itertools import combinations

MAX_WORDS = 3
MIN_CHARS = 3
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each either few for
    from further had has have having he her here hers herself him himself his how however i if in
    into is it its itself just may me might more most much must my myself no nor not now of off on
    once only or other our ours ourselves out over own per same shall she should so some such than
    that the their theirs them themselves then there these they this those through thus to too
    under until up upon us very via was we were what when where whether which while who whom why
    will with within without would yet you your yours yourself yourselves using used use based
    show shows shown showed found find finds study studies result results suggest suggests
    suggested associated among including include includes increase increased decrease decreased
    high higher low lower new one two three first second however therefore although whereas""".split()
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9'-]*[A-Za-z0-9]|[A-Za-z]|\d+(?:\.\d+)?|[.,;:!?()\[\]{}\"]")
_IDENTIFIER = re.compile(r"^(?=.*[A-Za-z])(?=.*(?:\d|[A-Z].*[A-Z]))[A-Za-z0-9-]{2,}$")


def _phrases(text: str) -> list[list[str]]:
    phrases, current = [], []
    for token in _TOKEN.findall(text):
        word = token.lower()
        if not word[0].isalpha() or word in STOP_WORDS:
            if current:
                phrases.append(current)
            current = []
        else:
            current.append(word)
    if current:
        phrases.append(current)
    return phrases


def extract_entities(text: str, limit: int = 8) -> list[str]:
    """The text's best key phrases (at most `limit`), then its identifiers, without repeats."""
    pieces = [p[i : i + MAX_WORDS] for p in _phrases(text) for i in range(0, len(p), MAX_WORDS)]
    candidates = [p for p in pieces if len(" ".join(p)) >= MIN_CHARS]
    frequency: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    for phrase in candidates:
        for word in phrase:
            frequency[word] += 1
            degree[word] += len(phrase)
    scores: dict[str, float] = {}
    for phrase in candidates:
        joined = " ".join(phrase)
        scores[joined] = sum(degree[w] / frequency[w] for w in phrase)
    ranked = sorted(scores, key=lambda p: (-scores[p], p))[:limit]
    identifiers = [t.lower() for t in _TOKEN.findall(text) if _IDENTIFIER.match(t)]
    return list(dict.fromkeys([*ranked, *identifiers]))


def co_occurrences(entity_lists: list[list[str]]) -> dict[tuple[str, str], int]:
    """How many lists hold each unordered pair of entities (keys sorted within the pair)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for entities in entity_lists:
        for a, b in combinations(sorted(set(entities)), 2):
            counts[(a, b)] += 1
    return dict(counts)
