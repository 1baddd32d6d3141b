"""The retrieval strategies ("arms"). Each turns a query into a ranked list of documents."""

from __future__ import annotations

from typing import Protocol

from sounding.models.client import ModelsClient
from sounding.retrieval.protocol import ArmRequest
from sounding.store.reader import ChunkHit, ChunkReader


class Strategy(Protocol):
    name: str

    async def search(
        self, request: ArmRequest, models: ModelsClient, reader: ChunkReader
    ) -> tuple[list[ChunkHit], str]:
        """Hits (one per document, best first) and any text the strategy generated."""
        ...


class Dense:
    """The query's embedding (from the sidecar unless the request carries it), then the nearest
    chunks by cosine similarity."""

    name = "dense"

    async def search(self, request, models, reader):
        vector = request.query_vector
        if vector is None:
            vector = (await models.embed([request.query], timeout=request.timeout_s))[0]
        return await reader.vector_search(request.collection, vector, request.limit), ""


class Lexical:
    """LanceDB full-text search (BM25 over stemmed, stop-word-filtered tokens)."""

    name = "lexical"

    async def search(self, request, models, reader):
        return await reader.text_search(request.collection, request.query, request.limit), ""


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Dense(), Lexical())}
