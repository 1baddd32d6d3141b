"""Query expansion strategies (retrieval-uncertainty spec, "Query Expansion Strategies"), run on
the strategy workers beside the arms. Each turns the query into at most `limit` expanded
queries, using only what the corpus holds (its knowledge graph: entity names, their embeddings
and co-occurrences) or, for `reformulation`, the generator:

- `synonym`: each query term's (key phrases, then their words) nearest corpus entity by
  embedding (cosine ≥ 0.7) that is not the term itself, a run of it, or a phrase containing it;
  the query with the term replaced.
- `hypernym`: a multi-word phrase replaced by its longest shorter run the corpus knows
  ("breast cancer cells" → "cancer cells").
- `hyponym`: the query followed by a corpus entity that specialises one of its terms
  ("cancer" → "breast cancer"), most mentioned first.
- `related_concept`: the query followed by one of the strongest graph co-occurrences of its
  entities.
- `code_pattern`: identifiers respelled (snake_case, camelCase, PascalCase, words apart) and in
  their definition and import forms.
- `negative_sampling`: contrastive: among the concepts co-occurring with the query's entities,
  the one least similar to the query is taken as the confuser, and the query's embedding moves
  away from it (q − 0.5·c, normalised); searched densely only.
- `reformulation`: the generator rewrites the query once.

An expanded query is searched with `dense` (its embedding) and `lexical` (its text); the
two rankings are fused (RRF) into the expanded query's ranking, which the orchestrator merges
into the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sounding.core import expansion as core
from sounding.core.entities import extract_entities
from sounding.core.fusion import weighted_rrf
from sounding.models.client import ModelsClient
from sounding.retrieval.protocol import ExpansionRequest
from sounding.retrieval.strategies import generate_text, parse_variations
from sounding.store.graph import GraphSnapshot
from sounding.store.reader import ChunkHit, ChunkReader

SYNONYM_MIN_SIMILARITY = 0.7
MIN_WORD_CHARS = 3
CONFUSER_WEIGHT = 0.5
REFORMULATION_SYSTEM = (
    "Rewrite the user's search query once, using different words for the same need. Answer with "
    "the rewritten query only."
)


@dataclass(frozen=True)
class ExpandedQuery:
    text: str
    # Set when the query searches with a vector of its own (negative sampling) instead of its
    # text's embedding; such a query is not searched lexically.
    vector: np.ndarray | None = None


def _phrases(query: str) -> list[str]:
    return extract_entities(query, limit=6)


def _terms(query: str) -> list[str]:
    """The query's key phrases, then the words of its multi-word phrases."""
    phrases = _phrases(query)
    words = [w for p in phrases if " " in p for w in p.split() if len(w) >= MIN_WORD_CHARS]
    return list(dict.fromkeys([*phrases, *words]))


def _replace(query: str, phrase: str, replacement: str) -> str:
    lowered = query.lower()
    at = lowered.find(phrase)
    if at < 0:
        return f"{query} {replacement}"
    return query[:at] + replacement + query[at + len(phrase) :]


async def synonym(request, graph, models) -> list[ExpandedQuery]:
    phrases = _terms(request.query)
    unknown = [p for p in phrases if graph.vector(p) is None]
    embedded = (
        dict(zip(unknown, await models.embed(unknown, timeout=request.timeout_s), strict=True))
        if unknown
        else {}
    )
    out: list[ExpandedQuery] = []
    for phrase in phrases:
        vector = graph.vector(phrase)
        vector = embedded[phrase] if vector is None else vector
        for candidate, _ in graph.nearest(vector, 5, SYNONYM_MIN_SIMILARITY, frozenset({phrase})):
            if candidate in phrase or phrase in candidate:
                continue
            out.append(ExpandedQuery(_replace(request.query, phrase, candidate)))
            break
    return out[: request.queries]


async def hypernym(request, graph, models) -> list[ExpandedQuery]:
    out = []
    for phrase in _phrases(request.query):
        broader = graph.broader(phrase) if " " in phrase else []
        if broader:
            out.append(ExpandedQuery(_replace(request.query, phrase, broader[0])))
    return out[: request.queries]


async def hyponym(request, graph, models) -> list[ExpandedQuery]:
    per_phrase = [graph.narrower(p, request.queries) for p in _terms(request.query)]
    out: list[ExpandedQuery] = []
    for round_ in range(request.queries):
        for narrower in per_phrase:
            if round_ < len(narrower):
                out.append(ExpandedQuery(f"{request.query} {narrower[round_]}"))
    return out[: request.queries]


async def related_concept(request, graph, models) -> list[ExpandedQuery]:
    known = graph.match(_phrases(request.query), request.query_vector)
    return [ExpandedQuery(f"{request.query} {c}") for c in graph.related(known, request.queries)]


async def code_pattern(request, graph, models) -> list[ExpandedQuery]:
    return [ExpandedQuery(q) for q in core.code_pattern_queries(request.query, request.queries)]


async def negative_sampling(request, graph, models) -> list[ExpandedQuery]:
    if request.query_vector is None:
        return []
    query = np.asarray(request.query_vector, dtype=np.float32)
    query = query / max(float(np.linalg.norm(query)), 1e-12)
    known = graph.match(_phrases(request.query), query)
    candidates = [(c, graph.vector(c)) for c in graph.related(known, 10)]
    candidates = [(c, v) for c, v in candidates if v is not None]
    if not candidates:
        return []
    confuser, vector = min(candidates, key=lambda item: float(item[1] @ query))
    moved = query - CONFUSER_WEIGHT * vector
    return [
        ExpandedQuery(f"{request.query} NOT {confuser}", moved / max(float(np.linalg.norm(moved)), 1e-12))
    ]


async def reformulation(request, graph, models) -> list[ExpandedQuery]:
    text = (await generate_text(models, REFORMULATION_SYSTEM, request.query, 48, request)).text
    return [ExpandedQuery(v) for v in parse_variations(text, request.query, 1)]


EXPANSIONS = {
    "synonym": synonym,
    "hypernym": hypernym,
    "hyponym": hyponym,
    "related_concept": related_concept,
    "code_pattern": code_pattern,
    "negative_sampling": negative_sampling,
    "reformulation": reformulation,
}
# Strategies that need the corpus graph (without one they expand nothing).
NEEDS_GRAPH = frozenset(EXPANSIONS) - {"code_pattern", "reformulation"}


async def expand(
    request: ExpansionRequest, models: ModelsClient, reader: ChunkReader
) -> tuple[list[str], list[list[ChunkHit]]]:
    """The expanded queries and each one's hits (dense, plus lexical unless it has a vector of
    its own), at most `request.limit` per query."""
    graph = await reader.graph(request.collection) if request.strategy in NEEDS_GRAPH else None
    if request.strategy in NEEDS_GRAPH and graph is None:
        return [], []
    expanded = await EXPANSIONS[request.strategy](request, graph or _EMPTY_GRAPH, models)
    if not expanded:
        return [], []
    to_embed = [q.text for q in expanded if q.vector is None]
    vectors = iter(await models.embed(to_embed, timeout=request.timeout_s)) if to_embed else iter(())
    results: list[list[ChunkHit]] = []
    for query in expanded:
        vector = query.vector if query.vector is not None else next(vectors)
        rankings = {"dense": await reader.vector_search(request.collection, vector, request.limit)}
        if query.vector is None:
            rankings["lexical"] = await reader.text_search(request.collection, query.text, request.limit)
        results.append(_fuse(rankings, request.limit))
    return [q.text for q in expanded], results


def _fuse(rankings: dict[str, list[ChunkHit]], limit: int) -> list[ChunkHit]:
    if len(rankings) == 1:
        return next(iter(rankings.values()))
    best: dict[str, ChunkHit] = {}
    for hits in rankings.values():
        for hit in hits:
            best.setdefault(hit.document_id, hit)
    fused = weighted_rrf(
        {arm: [(h.document_id, h.score) for h in hits] for arm, hits in rankings.items()}, limit=limit
    )
    return [ChunkHit(item.key, best[item.key].chunk_id, item.score) for item in fused]


_EMPTY_GRAPH = GraphSnapshot((0, 0), [], {}, np.zeros((0, 0), dtype=np.float32))
