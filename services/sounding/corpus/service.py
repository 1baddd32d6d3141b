"""CorpusManager: the logic behind CorpusService.

Every document field has a limit (`CorpusLimits`), checked before anything of the batch is
chunked or embedded; chunking and building the batch's table run on a worker thread. Deleting a
collection also drops its graph and the strategy workers' cached copies of it; creating one
makes sure no leftovers of an earlier collection of the same name remain, so a re-created
collection is never served its predecessor's graph or vectors.

Every method acts for a tenant on the collections it named (README, "Security"); below this
room a collection is known by its key (`schema.scoped`), and what goes back names it as the
tenant does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from sounding import errors
from sounding.config import CorpusLimits
from sounding.core.chunking import chunk_words
from sounding.corpus.graph import GraphBuilder
from sounding.models.client import ModelsClient
from sounding.store import schema
from sounding.store.collections import CollectionInfo, CollectionStats, Store

log = logging.getLogger(__name__)
DEFAULT_CHUNK_WORDS = 400
DEFAULT_CHUNK_OVERLAP_WORDS = 50
EMBED_CALL_TEXTS = 32
EMBED_CALLS_IN_FLIGHT = 4
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


def validate_batch(documents: Sequence[DocumentIn], limits: CorpusLimits = CorpusLimits()) -> None:
    """Every problem names the document's index in the batch, e.g. `documents[3].text`."""
    if not documents:
        raise errors.InvalidArgument("a batch needs at least one document", field="documents")
    if len(documents) > limits.max_documents_per_batch:
        raise errors.InvalidArgument(
            f"at most {limits.max_documents_per_batch} documents per batch", field="documents"
        )
    seen: dict[str, int] = {}
    for index, document in enumerate(documents):
        where = f"documents[{index}]"
        if not document.id:
            raise errors.InvalidArgument(f"{where}.id must not be empty", field=f"{where}.id")
        if len(document.id) > limits.max_document_id_chars or "#" in document.id:
            raise errors.InvalidArgument(
                f"{where}.id must be at most {limits.max_document_id_chars} characters without '#'",
                field=f"{where}.id",
            )
        if document.id in seen:
            raise errors.InvalidArgument(
                f"{where}.id repeats documents[{seen[document.id]}].id {document.id[:64]!r}",
                field=f"{where}.id",
            )
        seen[document.id] = index
        if len(document.title) > limits.max_title_chars:
            raise errors.InvalidArgument(
                f"{where}.title is {len(document.title)} characters; at most {limits.max_title_chars}",
                field=f"{where}.title",
            )
        if len(document.text) > limits.max_text_chars:
            raise errors.InvalidArgument(
                f"{where}.text is {len(document.text)} characters; at most {limits.max_text_chars}",
                field=f"{where}.text",
            )
        if not document.text.strip():
            raise errors.InvalidArgument(f"{where}.text must not be empty", field=f"{where}.text")
        if len(document.metadata) > limits.max_metadata_entries:
            raise errors.InvalidArgument(
                f"{where}.metadata has {len(document.metadata)} entries; "
                f"at most {limits.max_metadata_entries}",
                field=f"{where}.metadata",
            )
        for key, value in document.metadata.items():
            too_long = (
                len(key) > limits.max_metadata_key_chars or len(value) > limits.max_metadata_value_chars
            )
            if too_long:
                raise errors.InvalidArgument(
                    f"{where}.metadata keys are at most {limits.max_metadata_key_chars} characters, values "
                    f"at most {limits.max_metadata_value_chars}",
                    field=f"{where}.metadata",
                )


def validate_collection_name(name: str, field_name: str = "name") -> None:
    if not schema.COLLECTION_NAME.match(name):
        raise errors.InvalidArgument(
            "collection names are 1-64 characters of a-z, 0-9, '-' and '_', starting with a "
            f"letter or digit; got {name[:80]!r}",
            field=field_name,
        )


def _key(tenant: str, name: str) -> str:
    validate_collection_name(name)
    return schema.scoped(tenant, name)


def _public(info: CollectionInfo) -> CollectionInfo:
    return replace(info, name=schema.public_name(info.name))


def chunk_rows(documents: Sequence[DocumentIn], info: CollectionInfo, limits: CorpusLimits) -> list[dict]:
    """The chunk rows of a validated batch (without vectors), within the chunk limits."""
    rows: list[dict] = []
    for index, document in enumerate(documents):
        metadata_json = json.dumps(dict(document.metadata), sort_keys=True)
        chunks = chunk_words(document.text, info.chunk_words, info.chunk_overlap_words)
        if len(chunks) > limits.max_chunks_per_document:
            raise errors.InvalidArgument(
                f"documents[{index}].text makes {len(chunks)} chunks; "
                f"at most {limits.max_chunks_per_document}",
                field=f"documents[{index}].text",
            )
        for chunk in chunks:
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
        if len(rows) > limits.max_chunks_per_batch:
            raise errors.InvalidArgument(
                f"the batch makes more than {limits.max_chunks_per_batch} chunks (at documents[{index}]); "
                "send fewer documents per batch",
                field="documents",
            )
    return rows


def chunk_table(rows: list[dict], vectors: np.ndarray, dimension: int) -> pa.Table:
    chunks_schema = schema.chunks_schema(dimension)
    return pa.Table.from_pylist(
        rows, chunks_schema.remove(chunks_schema.get_field_index("vector"))
    ).append_column(
        chunks_schema.field("vector"), pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension)
    )


class CorpusManager:
    """Collections and ingestion. After chunks change, the collection's graph is rebuilt by
    `graphs` (when given); `forget(name)` drops the strategy workers' cached copies of a
    collection."""

    def __init__(
        self,
        store: Store,
        models: ModelsClient,
        graphs: GraphBuilder | None = None,
        forget: Callable[[str], Awaitable[None]] | None = None,
        limits: CorpusLimits = CorpusLimits(),
    ):
        self._store = store
        self._models = models
        self._graphs = graphs
        self._forget = forget
        self._limits = limits

    async def create(self, tenant: str, name: str, description: str = "") -> CollectionInfo:
        validate_collection_name(name)
        if len(description) > self._limits.max_description_chars:
            raise errors.InvalidArgument(
                f"description is longer than {self._limits.max_description_chars} characters",
                field="description",
            )
        held = await self._store.list_collections(tenant, limit=self._limits.max_collections)
        if len(held) >= self._limits.max_collections:
            raise errors.ResourceExhausted(
                f"the tenant holds {self._limits.max_collections} collections, the limit",
                reason="TOO_MANY_COLLECTIONS",
            )
        embedding_model, embedding_dimension = await self._models.embedder_info()
        key = schema.scoped(tenant, name)
        await self._clear(key)
        info = await self._store.create_collection(
            key,
            description,
            embedding_model,
            embedding_dimension,
            DEFAULT_CHUNK_WORDS,
            DEFAULT_CHUNK_OVERLAP_WORDS,
        )
        return _public(info)

    async def get(self, tenant: str, name: str) -> tuple[CollectionInfo, CollectionStats]:
        key = _key(tenant, name)
        info = await self._store.get_collection(key)
        return _public(info), await self._stats(key)

    async def _stats(self, name: str) -> CollectionStats:
        stats = await self._store.stats(name)
        return await self._graphs.stats(name, stats) if self._graphs is not None else stats

    async def list(
        self, tenant: str, page_size: int, page_token: str
    ) -> tuple[list[tuple[CollectionInfo, CollectionStats]], str]:
        if not 0 <= page_size <= self._limits.max_page_size:
            raise errors.InvalidArgument(
                f"page_size must be in [0, {self._limits.max_page_size}]", field="page_size"
            )
        if page_token:
            validate_collection_name(page_token, "page_token")
        size = page_size or DEFAULT_PAGE_SIZE
        infos = await self._store.list_collections(
            tenant, schema.scoped(tenant, page_token) if page_token else "", size + 1
        )
        page, more = infos[:size], len(infos) > size

        async def with_stats(info: CollectionInfo) -> tuple[CollectionInfo, CollectionStats] | None:
            try:
                return _public(info), await self._stats(info.name)
            except errors.NotFound:  # deleted since the registry was read
                return None

        listed = [entry for entry in await asyncio.gather(*(with_stats(i) for i in page)) if entry]
        return listed, (schema.public_name(page[-1].name) if more else "")

    async def delete(self, tenant: str, name: str) -> None:
        """Unregister the collection, then drop its graph and the workers' copies (a cancel
        cannot stop it halfway)."""
        await asyncio.shield(self._delete(_key(tenant, name)))

    async def _delete(self, key: str) -> None:
        await self._store.delete_collection(key)
        try:
            await self._clear(key)
        except errors.SoundingError as error:  # recreating the name clears again, or fails
            log.warning("collection %r deleted, but its cached copies were not all dropped: %s", key, error)

    async def _clear(self, key: str) -> None:
        """Drop what may remain of a collection of this key: its graph, the workers' copies."""
        if self._graphs is not None:
            await self._graphs.drop(key)
        if self._forget is not None:
            await self._forget(key)

    async def prepare_batch(
        self, tenant: str, name: str, documents: Sequence[DocumentIn], timeout_s: float | None = None
    ) -> PreparedBatch:
        """Validate, chunk and embed one batch; nothing is written yet."""
        validate_batch(documents, self._limits)
        info = await self._store.get_collection(_key(tenant, name))
        rows = await asyncio.to_thread(chunk_rows, documents, info, self._limits)
        vectors = await self._embed([r["search_text"] for r in rows], timeout_s)
        table = await asyncio.to_thread(chunk_table, rows, vectors, info.embedding_dimension)
        return PreparedBatch(table=table, document_ids=[d.id for d in documents])

    def ingestion_ended(self, tenant: str, name: str) -> None:
        """An ingest stream into the collection ended (however it ended): rebuild its graph, once
        the collection has been quiet for a moment, off the ingestion's critical path."""
        if self._graphs is not None:
            self._graphs.schedule(_key(tenant, name))

    async def write_batch(self, tenant: str, name: str, batch: PreparedBatch) -> BatchWritten:
        """Write a prepared batch in one commit: it is visible entirely or not at all."""
        key = _key(tenant, name)
        async with self._store.lock(key):
            await self._store.get_collection(key)  # not deleted meanwhile
            await self._store.write_documents(key, batch.table, batch.document_ids)
        return BatchWritten(documents=len(batch.document_ids), chunks=batch.table.num_rows)

    async def _embed(self, texts: list[str], timeout_s: float | None) -> np.ndarray:
        """Embeds in sidecar-sized calls, several in flight so the micro-batcher stays busy."""
        limit = asyncio.Semaphore(EMBED_CALLS_IN_FLIGHT)

        async def one(part: list[str]) -> np.ndarray:
            async with limit:
                return await self._models.embed(part, timeout=timeout_s)

        parts = [texts[i : i + EMBED_CALL_TEXTS] for i in range(0, len(texts), EMBED_CALL_TEXTS)]
        return np.concatenate(await asyncio.gather(*(one(p) for p in parts)))
