"""A LangChain retriever over a Sounding collection (extra `langchain`):

retriever = SoundingRetriever(client=Client("localhost:50051"), collection="docs")
documents = retriever.invoke("what causes tides?")
retriever.report_outcome(documents[:2], success=True)   # Observe: what the agent used
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from sounding_client import types as t
from sounding_client.client import AsyncClient, Client
from sounding_client.frameworks._hits import ReportsOutcomes, hit_metadata


class SoundingRetriever(ReportsOutcomes[Document], BaseRetriever):
    """Retrieve on `collection` (a `Client`'s; an `AsyncClient` serves `ainvoke` when given, the
    `Client` otherwise): one document per hit, best first, Sounding's score, ids and the
    retrieval's stated uncertainty in its metadata. `retrieve_options` go to `retrieve_final`
    (arms, expansion, learned_ranking, ...)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client
    collection: str
    top_k: int = 10
    async_client: AsyncClient | None = None
    retrieve_options: dict[str, Any] = Field(default_factory=dict)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        final = self.client.retrieve_final(self.collection, query, top_k=self.top_k, **self.retrieve_options)
        return _documents(final)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        final = await self.async_client.retrieve_final(
            self.collection, query, top_k=self.top_k, **self.retrieve_options
        )
        return _documents(final)

    def _sounding_client(self) -> Client:
        return self.client

    def _metadata_of(self, item: Document) -> Mapping[str, Any]:
        return item.metadata


def _documents(final: t.Final) -> list[Document]:
    return [
        Document(page_content=hit.text, metadata=hit_metadata(final, hit), id=hit.chunk_id or hit.document_id)
        for hit in final.hits
    ]
