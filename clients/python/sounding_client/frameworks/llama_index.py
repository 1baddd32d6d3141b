"""A LlamaIndex retriever over a Sounding collection (extra `llamaindex`):

retriever = SoundingLlamaRetriever(Client("localhost:50051"), "docs")
nodes = retriever.retrieve("what causes tides?")
retriever.report_outcome(nodes[:2], success=True)   # Observe: what the agent used
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from sounding_client import types as t
from sounding_client.client import AsyncClient, Client
from sounding_client.frameworks._hits import ReportsOutcomes, hit_metadata


class SoundingLlamaRetriever(ReportsOutcomes[NodeWithScore], BaseRetriever):
    """Retrieve on `collection` (a `Client`'s; an `AsyncClient` serves `aretrieve` when given,
    the `Client` otherwise): one node per hit, best first, scored with Sounding's score, its ids
    and the retrieval's stated uncertainty in the node's metadata. `retrieve_options` go to
    `retrieve_final` (arms, expansion, learned_ranking, ...)."""

    def __init__(
        self,
        client: Client,
        collection: str,
        top_k: int = 10,
        async_client: AsyncClient | None = None,
        **retrieve_options: Any,
    ) -> None:
        super().__init__()
        self.client, self.async_client = client, async_client
        self.collection, self.top_k, self.retrieve_options = collection, top_k, retrieve_options

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        final = self.client.retrieve_final(
            self.collection, query_bundle.query_str, top_k=self.top_k, **self.retrieve_options
        )
        return _nodes(final)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.async_client is None:
            return await asyncio.to_thread(self._retrieve, query_bundle)
        final = await self.async_client.retrieve_final(
            self.collection, query_bundle.query_str, top_k=self.top_k, **self.retrieve_options
        )
        return _nodes(final)

    def _sounding_client(self) -> Client:
        return self.client

    def _metadata_of(self, item: NodeWithScore) -> Mapping[str, Any]:
        return item.node.metadata


def _nodes(final: t.Final) -> list[NodeWithScore]:
    nodes = []
    for hit in final.hits:
        metadata = hit_metadata(final, hit)
        # A model and an embedder read a node's text, title and own metadata, not Sounding's ids and figures.
        hidden = [key for key in metadata if key.startswith("sounding_") and key != "sounding_title"]
        node = TextNode(
            id_=hit.chunk_id or hit.document_id,
            text=hit.text,
            metadata=metadata,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
        )
        nodes.append(NodeWithScore(node=node, score=hit.score))
    return nodes
