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
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from sounding import errors
from sounding.corpus.documents import DocumentIn, chunk_rows, validate_batch, validate_collection_name
from sounding.corpus.graph import GraphBuilder
from sounding.limits import CorpusLimits
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
class PreparedBatch:
    table: pa.Table  # the chunks (store.schema.chunk_table)
    document_ids: list[str]


@dataclass(frozen=True)
class BatchWritten:
    documents: int
    chunks: int


@dataclass(frozen=True)
class IngestProgress:
    """A written batch of an ingest stream, and the stream's totals so far."""

    batch_index: int
    batch_documents: int
    batch_chunks: int
    total_documents: int
    total_chunks: int
    elapsed_seconds: float


def _key(tenant: str, name: str) -> str:
    validate_collection_name(name)
    return schema.scoped(tenant, name)


def _public(info: CollectionInfo) -> CollectionInfo:
    return replace(info, name=schema.public_name(info.name))


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
        key = _key(tenant, name)
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

    async def ingest(
        self,
        tenant: str,
        batches: AsyncIterator[tuple[str, Sequence[DocumentIn]]],
        time_remaining: Callable[[], float | None] = lambda: None,
    ) -> AsyncGenerator[IngestProgress, None]:
        """One stream of (collection, documents) batches into one collection (a batch may leave
        the collection empty after the first). Each batch is prepared (validated, chunked,
        embedded) while the previous one is written, and acknowledged in order once written. A
        batch that is invalid, or fails to read, ends the stream after the earlier ones were
        acknowledged, with nothing of it written."""
        started = time.perf_counter()
        collection = ""
        totals = [0, 0]
        writing: asyncio.Task[BatchWritten] | None = None
        batch_index = 0

        async def acknowledge(task: asyncio.Task[BatchWritten], index: int) -> IngestProgress:
            written = await task
            totals[0] += written.documents
            totals[1] += written.chunks
            elapsed = time.perf_counter() - started
            return IngestProgress(
                batch_index=index,
                batch_documents=written.documents,
                batch_chunks=written.chunks,
                total_documents=totals[0],
                total_chunks=totals[1],
                elapsed_seconds=elapsed,
            )

        try:
            while True:
                try:
                    named, documents = await anext(batches)
                    if not collection:
                        collection = named
                        validate_collection_name(collection, "collection")
                    elif named not in ("", collection):
                        raise errors.InvalidArgument(
                            f"one stream ingests into one collection ({collection!r}); this batch "
                            f"names {named!r}",
                            field="collection",
                        )
                    prepared = await self.prepare_batch(tenant, collection, documents, time_remaining())
                except StopAsyncIteration:
                    break
                except errors.InvalidArgument as error:
                    if writing is not None:
                        yield await acknowledge(writing, batch_index - 1)
                        writing = None
                    raise type(error)(
                        f"batch {batch_index}: {error.message}; nothing of this batch was written",
                        reason=error.reason,
                        field=error.field,
                    ) from None
                if writing is not None:
                    yield await acknowledge(writing, batch_index - 1)
                writing = asyncio.ensure_future(self.write_batch(tenant, collection, prepared))
                batch_index += 1
            if writing is not None:
                yield await acknowledge(writing, batch_index - 1)
                writing = None
        finally:
            if writing is not None:  # the stream failed or was cancelled: let the commit settle
                await asyncio.gather(writing, return_exceptions=True)
            if batch_index:
                self.ingestion_ended(tenant, collection)

    async def prepare_batch(
        self, tenant: str, name: str, documents: Sequence[DocumentIn], timeout_s: float | None = None
    ) -> PreparedBatch:
        """Validate, chunk and embed one batch; nothing is written yet."""
        validate_batch(documents, self._limits)
        info = await self._store.get_collection(_key(tenant, name))
        rows = await asyncio.to_thread(chunk_rows, documents, info, self._limits)
        vectors = await self._embed([r["search_text"] for r in rows], timeout_s)
        table = await asyncio.to_thread(schema.chunk_table, rows, vectors, info.embedding_dimension)
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
