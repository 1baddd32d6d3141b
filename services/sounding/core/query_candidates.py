"""Candidate retrieval queries for verifying a claim over a corpus (active-learning spec §4.2),
from the claim's text alone: deterministic, model-free, pure.

Strategies, each a spec strategy read for claims:
- `confirmation` (confirmation seeking): the claim itself;
- `decomposition` (uncertainty targeting by parts): the claim cut into sub-claims at clause
  boundaries (commas, semicolons, "and", "but", "whereas", relative pronouns);
- `refutation` (contradiction seeking): the claim with its polarity turned (a direction word
  swapped for its opposite, e.g. increases -> decreases, or a negation added or removed);
- `entity_probe` (hypothesis testing through the corpus graph): one of the claim's entities
  with an entity the corpus links it to;
- `aspect` (uncertainty targeted): the aspect (key phrase) the evidence seen so far covers least,
  with the claim's head entity;
- `llm` (the spec's model-written queries): search queries a language model wrote for the claim
  (`llm_prompt`, read back by `llm_queries`);
- `keywords`: one key phrase a query (the naive baseline's second half).

Each candidate names the aspect it targets, so coverage can be counted per aspect (§3.3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sounding.core.entities import STOP_WORDS, extract_entities

STRATEGIES = ("confirmation", "decomposition", "refutation", "entity_probe", "aspect", "llm", "keywords")
MIN_CONTENT_WORDS = 2

_CLAUSE = re.compile(r"\s*(?:[,;:]|\b(?:and|but|whereas|while|which|who|that|because)\b)\s*", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")
# Direction words and their opposites (both ways).
_OPPOSITES = {
    "increase": "decrease",
    "increases": "decreases",
    "increased": "decreased",
    "increasing": "decreasing",
    "higher": "lower",
    "more": "less",
    "promotes": "inhibits",
    "promote": "inhibit",
    "activates": "suppresses",
    "activate": "suppress",
    "improves": "worsens",
    "improve": "worsen",
    "reduces": "raises",
    "reduce": "raise",
    "positive": "negative",
    "positively": "negatively",
    "upregulates": "downregulates",
    "upregulated": "downregulated",
    "enhances": "impairs",
    "enhance": "impair",
    "protects": "harms",
    "beneficial": "harmful",
}
_OPPOSITES.update({v: k for k, v in list(_OPPOSITES.items())})
_NEGATIONS = frozenset({"not", "no", "never"})
_AUXILIARIES = frozenset({"is", "are", "was", "were", "can", "may", "does", "do", "has", "have", "will"})


@dataclass(frozen=True)
class Candidate:
    text: str
    strategy: str
    aspect: str


def content_words(text: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOP_WORDS]


def decompose(claim: str) -> list[str]:
    """The claim's clauses that carry at least two content words, longest first (none when the
    claim is a single clause)."""
    parts = [p.strip(" .") for p in _CLAUSE.split(claim) if p and p.strip(" .")]
    parts = [p for p in parts if len(content_words(p)) >= MIN_CONTENT_WORDS]
    if len(parts) < 2:
        return []
    return sorted(dict.fromkeys(parts), key=lambda p: (-len(content_words(p)), p))


def refute(claim: str) -> str | None:
    """The claim with its polarity turned: its first direction word swapped for the opposite,
    else its negations removed, else "not" added after its first auxiliary verb (None when
    none applies)."""
    words = claim.split()
    bare = [w.strip(".,;:()").lower() for w in words]
    for i, word in enumerate(bare):
        if word in _OPPOSITES:
            opposite = _OPPOSITES[word]
            words[i] = words[i].replace(
                words[i].strip(".,;:()"), opposite.capitalize() if words[i][0].isupper() else opposite
            )
            return " ".join(words)
    if _NEGATIONS & set(bare):
        return " ".join(w for w, b in zip(words, bare, strict=True) if b not in _NEGATIONS)
    for i, word in enumerate(bare):
        if word in _AUXILIARIES:
            return " ".join([*words[: i + 1], "not", *words[i + 1 :]])
    return None


def aspects(claim: str, limit: int = 6) -> list[str]:
    """The claim's key phrases (RAKE, `core.entities`), best first."""
    return extract_entities(claim, limit)


def entity_probes(
    claim_entities: Sequence[str], neighbours: Mapping[str, Sequence[str]], limit: int
) -> list[Candidate]:
    """An entity of the claim with each entity the corpus graph links it to (strongest first),
    taking the entities in turn; at most `limit`."""
    probes = []
    queues = {
        e: [n for n in neighbours.get(e, ()) if n != e and n not in claim_entities] for e in claim_entities
    }
    while len(probes) < limit and any(queues.values()):
        for entity in claim_entities:
            if queues[entity] and len(probes) < limit:
                probes.append(Candidate(f"{entity} {queues[entity].pop(0)}", "entity_probe", entity))
    return probes


def coverage(aspect: str, sentences: Iterable[str]) -> float:
    """The share of the aspect's words found among the given sentences' words."""
    words = set(content_words(aspect))
    if not words:
        return 1.0
    seen = {w for s in sentences for w in content_words(s)}
    return len(words & seen) / len(words)


def least_covered(claim: str, sentences: Sequence[str], limit: int) -> list[Candidate]:
    """Queries for the claim's aspects that the evidence seen so far covers least (§4.2
    uncertainty targeting): each aspect with the claim's head aspect, least covered first."""
    found = aspects(claim)
    if len(found) < 2:
        return []
    head = found[0]
    scored = sorted(found[1:], key=lambda a: (coverage(a, sentences), found.index(a)))
    return [Candidate(f"{head} {a}", "aspect", a) for a in scored[:limit]]


def candidates(
    claim: str,
    neighbours: Mapping[str, Sequence[str]] | None = None,
    seen_sentences: Sequence[str] = (),
    per_strategy: int = 3,
    written: Sequence[str] = (),
) -> list[Candidate]:
    """Every strategy's candidates in the order they are generated (the naive baseline runs
    them in this order), exact repeats removed; `written`: a language model's queries."""
    found = aspects(claim)
    head = found[0] if found else claim
    made = [Candidate(claim, "confirmation", head)]
    made += [Candidate(p, "decomposition", (aspects(p) or [p])[0]) for p in decompose(claim)[:per_strategy]]
    refuted = refute(claim)
    if refuted:
        made.append(Candidate(refuted, "refutation", head))
    made += entity_probes(found[:3], neighbours or {}, per_strategy)
    made += least_covered(claim, seen_sentences, per_strategy)
    made += [Candidate(q, "llm", (aspects(q) or [q])[0]) for q in written]
    unique: dict[str, Candidate] = {}
    for candidate in made:
        unique.setdefault(" ".join(candidate.text.lower().split()), candidate)
    return list(unique.values())


_NUMBERING = re.compile(r"^\s*(?:[-*•]|\d+[.)]|query\s*\d*:)\s*", re.IGNORECASE)


def llm_prompt(claim: str, count: int) -> list[dict[str, str]]:
    """Chat messages asking a language model for `count` search queries, one per line."""
    return [
        {
            "role": "user",
            "content": f"Write {count} short search queries, one per line, that would find scientific "
            f"evidence for or against this claim. Write only the queries.\nClaim: {claim}",
        }
    ]


def llm_queries(text: str, count: int) -> list[str]:
    """The queries in a model's answer: its lines without numbering or quotes, those of 2 to 16
    words that do not introduce a list (end with a colon), at most `count`, repeats removed."""
    found: list[str] = []
    for line in text.splitlines():
        query = _NUMBERING.sub("", line).strip().strip('"').strip()
        if (
            2 <= len(query.split()) <= 16
            and not query.endswith(":")
            and query.lower() not in {f.lower() for f in found}
        ):
            found.append(query)
    return found[:count]


def keyword_queries(claim: str, limit: int = 6) -> list[Candidate]:
    """The second naive baseline: the claim, then its key phrases one per query."""
    return [Candidate(claim, "confirmation", claim)] + [
        Candidate(a, "keywords", a) for a in aspects(claim, limit)
    ]
