"""The retrieval strategies ("arms"). Each turns a query into a ranked list of documents
(adaptive-strategy spec §4).

- `dense`: the query's embedding, nearest chunks by cosine similarity (§4.1).
- `lexical`: LanceDB full-text search, BM25.
- `hyde`: the generator writes a passage that answers the query; its embedding searches (§4.2).
- `query2doc`: the generator elaborates the query in a few sentences; the query followed by
  that expansion is embedded and searched (§4.3).
- `multi_query`: the generator rephrases the query N ways; the query and each phrasing are
  searched densely and the rankings fused by reciprocal rank fusion (§4.5).
- `grounded`: the query's entities are looked up in the collection's knowledge graph, with
  their strongest co-occurring neighbours; the generator expands the query from those alone,
  and the expansion keeps only graph entities, so nothing is invented (§4.4). The query plus
  those entities is embedded and searched. Without a graph (or a match in it) this is `dense`.

The generating arms decode greedily, so the same query yields the same text (and the sidecar
batches the arms' concurrent generations). When the sidecar serves a generation from its cache,
the arm reports the time decoding it took, so its cost stays what a new query would cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from sounding.core.entities import extract_entities
from sounding.core.fusion import weighted_rrf
from sounding.models.client import ModelsClient
from sounding.retrieval.protocol import ArmRequest, ExpansionRequest
from sounding.store.reader import ChunkHit, ChunkReader


@dataclass(frozen=True)
class Found:
    """What an arm found: hits (one per document, best first), any text it generated to search
    with, and the decode time of its generations that the sidecar served from its cache."""

    hits: list[ChunkHit]
    generated_text: str = ""
    cached_decode_ms: float = 0.0


@dataclass(frozen=True)
class Generated:
    """A generation's text and, when the sidecar served it from its cache, its decode time."""

    text: str
    cached_decode_ms: float = 0.0


class Strategy(Protocol):
    name: str
    # Whether the arm searches with the query's embedding (which the orchestrator computes and
    # passes along); arms that do not can start before it is ready.
    uses_query_vector: bool
    # Whether the arm decodes with the generator (seconds a query on CPU): the selector counts it
    # as costly until its cost is measured.
    generates: bool

    async def search(self, request: ArmRequest, models: ModelsClient, reader: ChunkReader) -> Found: ...


async def _nearest(reader: ChunkReader, request: ArmRequest, vector) -> list[ChunkHit]:
    """The chunks nearest `vector`, best per document, at the version the request names."""
    return await reader.vector_search(request.collection, vector, request.limit, request.collection_version)


class Dense:
    """The query's embedding (from the sidecar unless the request carries it), then the nearest
    chunks by cosine similarity."""

    name = "dense"
    uses_query_vector = True
    generates = False

    async def search(self, request, models, reader):
        vector = request.query_vector
        if vector is None:
            vector = (await models.embed([request.query], timeout=request.timeout_s))[0]
        return Found(await _nearest(reader, request, vector))


class Lexical:
    """LanceDB full-text search (BM25 over stemmed, stop-word-filtered tokens)."""

    name = "lexical"
    uses_query_vector = False
    generates = False

    async def search(self, request, models, reader):
        return Found(
            await reader.text_search(
                request.collection, request.query, request.limit, request.collection_version
            )
        )


async def generate_text(
    models: ModelsClient, system: str, user: str, max_new_tokens: int, request: ArmRequest | ExpansionRequest
) -> Generated:
    """A greedy generation for `request`: in its Retrieve's flow, cached within the tenant that
    owns its collection."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    generated = models.generate(
        messages,
        max_new_tokens=max_new_tokens,
        timeout=request.timeout_s,
        flow=request.flow,
        cache_scope=request.collection.tenant,
    )
    pieces = [p async for p in generated]
    return Generated("".join(p.text for p in pieces).strip(), sum(p.cached_decode_ms for p in pieces))


class HyDE:
    name = "hyde"
    uses_query_vector = False
    generates = True
    system = (
        "You are an expert. Write one short, factual paragraph that directly answers the question "
        "or discusses the claim, in the style of a scientific abstract."
    )
    max_new_tokens = 64

    async def search(self, request, models, reader):
        passage = await generate_text(models, self.system, request.query, self.max_new_tokens, request)
        vector = (await models.embed([passage.text or request.query], timeout=request.timeout_s))[0]
        hits = await _nearest(reader, request, vector)
        return Found(hits, passage.text, passage.cached_decode_ms)


class Query2Doc:
    name = "query2doc"
    uses_query_vector = False
    generates = True
    system = (
        "Expand the user's query with relevant context and terminology. Write two or three "
        "sentences that elaborate on what is asked."
    )
    max_new_tokens = 48

    async def search(self, request, models, reader):
        expansion = await generate_text(models, self.system, request.query, self.max_new_tokens, request)
        vector = (
            await models.embed([f"{request.query} {expansion.text}".strip()], timeout=request.timeout_s)
        )[0]
        hits = await _nearest(reader, request, vector)
        return Found(hits, expansion.text, expansion.cached_decode_ms)


_LIST_MARKER = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")


def parse_variations(text: str, query: str, limit: int) -> list[str]:
    """One variation per non-empty line, list markers and quotes stripped, the query itself and
    repeats dropped, at most `limit`."""
    variations: list[str] = []
    for line in text.splitlines():
        variation = _LIST_MARKER.sub("", line).strip().strip('"').strip()
        if variation and variation.lower() != query.lower() and variation not in variations:
            variations.append(variation)
    return variations[:limit]


class MultiQuery:
    name = "multi_query"
    uses_query_vector = True
    generates = True
    variations = 3
    system = (
        "Rewrite the user's query in 3 different ways, each capturing a different aspect or "
        "phrasing. Answer with one rewrite per line and nothing else."
    )
    max_new_tokens = 72

    async def search(self, request, models, reader):
        generated = await generate_text(models, self.system, request.query, self.max_new_tokens, request)
        queries = [request.query, *parse_variations(generated.text, request.query, self.variations)]
        if request.query_vector is None:
            vectors = await models.embed(queries, timeout=request.timeout_s)
        else:
            vectors = [
                request.query_vector,
                *(await models.embed(queries[1:], timeout=request.timeout_s) if queries[1:] else []),
            ]
        rankings = {}
        best: dict[str, ChunkHit] = {}
        for index, vector in enumerate(vectors):
            hits = await _nearest(reader, request, vector)
            rankings[str(index)] = [(h.document_id, h.score) for h in hits]
            for hit in hits:
                if hit.document_id not in best or hit.score > best[hit.document_id].score:
                    best[hit.document_id] = hit
        fused = weighted_rrf(rankings, limit=request.limit)
        hits = [ChunkHit(item.key, best[item.key].chunk_id, item.score) for item in fused]
        return Found(hits, "\n".join(queries[1:]), generated.cached_decode_ms)


class Grounded:
    name = "grounded"
    uses_query_vector = True
    generates = True
    system = (
        "Expand the user's query using ONLY the known and related entities listed. Do not invent "
        "entities. Answer with one or two sentences."
    )
    max_new_tokens = 48
    known_limit = 5
    related_limit = 10

    async def search(self, request, models, reader):
        vector = request.query_vector
        if vector is None:
            vector = (await models.embed([request.query], timeout=request.timeout_s))[0]
        graph = await reader.graph(request.collection)
        known = graph.match(extract_entities(request.query), vector, self.known_limit) if graph else []
        related = graph.related(known, self.related_limit) if known else []
        if not related:
            reason = "no knowledge graph yet" if graph is None else "no graph entity matches the query"
            return Found(await _nearest(reader, request, vector), f"[{reason}]")
        prompt = (
            f"Query: {request.query}\nKnown entities: {', '.join(known)}\n"
            f"Related entities: {', '.join(related)}"
        )
        generated = await generate_text(models, self.system, prompt, self.max_new_tokens, request)
        text = generated.text
        mentioned = [e for e in related if e in text.lower()] or related[: self.known_limit]
        expanded = f"{request.query} {'; '.join(mentioned)}"
        expanded_vector = (await models.embed([expanded], timeout=request.timeout_s))[0]
        hits = await _nearest(reader, request, expanded_vector)
        trace = f"{text}\n[graph: known {known}; related {related}; searched with {mentioned}]"
        return Found(hits, trace, generated.cached_decode_ms)


STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (Dense(), Lexical(), HyDE(), Query2Doc(), MultiQuery(), Grounded())
}
