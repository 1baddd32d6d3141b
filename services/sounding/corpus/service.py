"""CorpusManager: the logic behind CorpusService."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from sounding import errors
from sounding.core.chunking import chunk_words
from sounding.corpus.graph import GraphBuilder
from sounding.models.client import ModelsClient
from sounding.store import schema
from sounding.store.collections import CollectionInfo, CollectionStats, Store

MAX_DOCUMENTS_PER_BATCH = 2000
MAX_DOCUMENT_ID_CHARS = 512
DEFAULT_CHUNK_WORDS = 400
DEFAULT_CHUNK_OVERLAP_WORDS = 50
EMBED_CALL_TEXTS = 32
EMBED_CALLS_IN_FLIGHT = 4
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100


@dataclass(frozen=True)
class DocumentIn:
    id: str
    text: str
    title: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedBatch:
    table: pa.Table
    document_ids: list[str]


@dataclass(frozen=True)
class BatchWritten:
    documents: int
    chunks: int


def validate_batch(documents: Sequence[DocumentIn]) -> None:
    """Every problem names the document's index in the batch, e.g. `documents[3].text`."""
    if not documents:
        raise errors.InvalidArgument("a batch needs at least one document", field="documents")
    if len(documents) > MAX_DOCUMENTS_PER_BATCH:
        raise errors.InvalidArgument(
            f"at most {MAX_DOCUMENTS_PER_BATCH} documents per batch", field="documents"
        )
    seen: dict[str, int] = {}
    for index, document in enumerate(documents):
        where = f"documents[{index}]"
        if not document.id:
            raise errors.InvalidArgument(f"{where}.id must not be empty", field=f"{where}.id")
        if len(document.id) > MAX_DOCUMENT_ID_CHARS or "#" in document.id:
            raise errors.InvalidArgument(
                f"{where}.id must be at most {MAX_DOCUMENT_ID_CHARS} characters without '#'",
                field=f"{where}.id",
            )
        if document.id in seen:
            raise errors.InvalidArgument(
                f"{where}.id repeats documents[{seen[document.id]}].id {document.id!r}",
                field=f"{where}.id",
            )
        seen[document.id] = index
        if not document.text.strip():
            raise errors.InvalidArgument(f"{where}.text must not be empty", field=f"{where}.text")


def validate_collection_name(name: str, field_name: str = "name") -> None:
    if not schema.COLLECTION_NAME.match(name):
        raise errors.InvalidArgument(
            "collection names are 1-64 characters of a-z, 0-9, '-' and '_', starting with a "
            f"letter or digit; got {name!r}",
            field=field_name,
        )


class CorpusManager:
    """Collections and ingestion. After chunks change, the collection's graph is rebuilt by
    `graphs` (when given)."""

    def __init__(self, store: Store, models: ModelsClient, graphs: GraphBuilder | None = None):
        self._store = store
        self._models = models
        self._graphs = graphs

    async def create(self, name: str, description: str = "") -> CollectionInfo:
        validate_collection_name(name)
        embedding_model, embedding_dimension = await self._models.embedder_info()
        return await self._store.create_collection(
            name,
            description,
            embedding_model,
            embedding_dimension,
            DEFAULT_CHUNK_WORDS,
            DEFAULT_CHUNK_OVERLAP_WORDS,
        )

    async def get(self, name: str) -> tuple[CollectionInfo, CollectionStats]:
        validate_collection_name(name)
        info = await self._store.get_collection(name)
        return info, await self._stats(name)

    async def _stats(self, name: str) -> CollectionStats:
        stats = await self._store.stats(name)
        return await self._graphs.stats(name, stats) if self._graphs is not None else stats

    async def list(
        self, page_size: int, page_token: str
    ) -> tuple[list[tuple[CollectionInfo, CollectionStats]], str]:
        if not 0 <= page_size <= MAX_PAGE_SIZE:
            raise errors.InvalidArgument(f"page_size must be in [0, {MAX_PAGE_SIZE}]", field="page_size")
        size = page_size or DEFAULT_PAGE_SIZE
        infos = await self._store.list_collections(start_after=page_token, limit=size + 1)
        page, more = infos[:size], len(infos) > size
        stats = await asyncio.gather(*(self._stats(i.name) for i in page))
        return list(zip(page, stats, strict=True)), (page[-1].name if more else "")

    async def delete(self, name: str) -> None:
        validate_collection_name(name)
        await self._store.delete_collection(name)
        if self._graphs is not None:
            await self._graphs.drop(name)

    async def prepare_batch(
        self, name: str, documents: Sequence[DocumentIn], timeout_s: float | None = None
    ) -> PreparedBatch:
        """Validate, chunk and embed one batch; nothing is written yet."""
        validate_batch(documents)
        info = await self._store.get_collection(name)
        rows: list[dict] = []
        for document in documents:
            metadata_json = json.dumps(dict(document.metadata), sort_keys=True)
            for chunk in chunk_words(document.text, info.chunk_words, info.chunk_overlap_words):
                rows.append(
                    {
                        "chunk_id": schema.chunk_id(document.id, chunk.index),
                        "document_id": document.id,
                        "chunk_index": chunk.index,
                        "title": document.title,
                        "text": chunk.text,
                        "search_text": f"{document.title} {chunk.text}".strip(),
                        "metadata_json": metadata_json,
                    }
                )
        vectors = await self._embed([r["search_text"] for r in rows], timeout_s)
        chunks_schema = schema.chunks_schema(info.embedding_dimension)
        vector_field = chunks_schema.field("vector")
        table = pa.Table.from_pylist(
            rows, chunks_schema.remove(chunks_schema.get_field_index("vector"))
        ).append_column(
            vector_field,
            pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), info.embedding_dimension),
        )
        return PreparedBatch(table=table, document_ids=[d.id for d in documents])

    def ingestion_ended(self, name: str) -> None:
        """An ingest stream into `name` ended (however it ended): rebuild its graph, once the
        collection has been quiet for a moment, off the ingestion's critical path."""
        if self._graphs is not None:
            self._graphs.schedule(name)

    async def write_batch(self, name: str, batch: PreparedBatch) -> BatchWritten:
        """Write a prepared batch in one commit: it is visible entirely or not at all."""
        async with self._store.lock(name):
            await self._store.get_collection(name)  # not deleted meanwhile
            await self._store.write_documents(name, batch.table, batch.document_ids)
        return BatchWritten(documents=len(batch.document_ids), chunks=batch.table.num_rows)

    async def _embed(self, texts: list[str], timeout_s: float | None) -> np.ndarray:
        """Embeds in sidecar-sized calls, several in flight so the micro-batcher stays busy."""
        limit = asyncio.Semaphore(EMBED_CALLS_IN_FLIGHT)

        async def one(part: list[str]) -> np.ndarray:
            async with limit:
                return await self._models.embed(part, timeout=timeout_s)

        parts = [texts[i : i + EMBED_CALL_TEXTS] for i in range(0, len(texts), EMBED_CALL_TEXTS)]
        return np.concatenate(await asyncio.gather(*(one(p) for p in parts)))
