"""CorpusManager: the logic behind CorpusService.

Every document field has a limit (`CorpusLimits`), checked before anything of the batch is
chunked or embedded; chunking and building the batch's table run on a worker thread. Deleting a
collection also drops its graph and the strategy workers' cached copies of it; creating one
makes sure no leftovers of an earlier collection of the same name remain, so a re-created
collection is never served its predecessor's graph or vectors.

Every method acts on a tenant's collection, named by the `ResourceRef` the gateway made of the
request (README, "Security").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sounding.corpus.documents import DocumentIn, chunk_rows, validate_batch
from sounding.corpus.graph import GraphBuilder
from sounding.models.client import ModelsClient
from sounding.runtime import errors
from sounding.settings.limits import CorpusLimits
from sounding.store import schema
from sounding.store.collections import CollectionInfo, CollectionStats, Store
from sounding.store.tenancy import ResourceRef

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


class CorpusManager:
    """Collections and ingestion. After chunks change, the collection's graph is rebuilt by
    `graphs` (when given); `forget(name)` drops the strategy workers' cached copies of a
    collection."""

    def __init__(
        self,
        store: Store,
        models: ModelsClient,
        graphs: GraphBuilder | None = None,
        forget: Callable[[ResourceRef], Awaitable[None]] | None = None,
        limits: CorpusLimits = CorpusLimits(),
    ):
        self._store = store
        self._models = models
        self._graphs = graphs
        self._forget = forget
        self._limits = limits

    async def create(self, collection: ResourceRef, description: str = "") -> CollectionInfo:
        if len(description) > self._limits.max_description_chars:
            raise errors.InvalidArgument(
                f"description is longer than {self._limits.max_description_chars} characters",
                field="description",
            )
        held = await self._store.list_collections(collection.tenant, limit=self._limits.max_collections)
        if len(held) >= self._limits.max_collections:
            raise errors.ResourceExhausted(
                f"the tenant holds {self._limits.max_collections} collections, the limit",
                reason="TOO_MANY_COLLECTIONS",
            )
        embedding_model, embedding_dimension = await self._models.embedder_info()
        # Leftovers of an earlier collection of the name go, under the collection's lock and only
        # once it is known not to exist (one that exists keeps its graph and the workers' copies).
        return await self._store.create_collection(
            collection,
            description,
            embedding_model,
            embedding_dimension,
            DEFAULT_CHUNK_WORDS,
            DEFAULT_CHUNK_OVERLAP_WORDS,
            prepare=lambda: self._clear(collection),
        )

    async def get(self, collection: ResourceRef) -> tuple[CollectionInfo, CollectionStats]:
        info = await self._store.get_collection(collection)
        return info, await self._stats(collection)

    async def _stats(self, collection: ResourceRef) -> CollectionStats:
        stats = await self._store.stats(collection)
        return await self._graphs.stats(collection, stats) if self._graphs is not None else stats

    async def list(
        self, tenant: str, page_size: int, page_token: str
    ) -> tuple[list[tuple[CollectionInfo, CollectionStats]], str]:
        """A page of the tenant's collections, those named after `page_token` (a collection
        name, checked by the caller)."""
        if not 0 <= page_size <= self._limits.max_page_size:
            raise errors.InvalidArgument(
                f"page_size must be in [0, {self._limits.max_page_size}]", field="page_size"
            )
        size = page_size or DEFAULT_PAGE_SIZE
        infos = await self._store.list_collections(tenant, page_token, size + 1)
        page, more = infos[:size], len(infos) > size

        async def with_stats(info: CollectionInfo) -> tuple[CollectionInfo, CollectionStats] | None:
            try:
                return info, await self._stats(info.ref)
            except errors.NotFound:  # deleted since the registry was read
                return None

        listed = [entry for entry in await asyncio.gather(*(with_stats(i) for i in page)) if entry]
        return listed, (page[-1].name if more else "")

    async def delete(self, collection: ResourceRef) -> None:
        """Unregister the collection, then drop its graph and the workers' copies (a cancel
        cannot stop it halfway)."""
        await asyncio.shield(self._delete(collection))

    async def _delete(self, collection: ResourceRef) -> None:
        await self._store.delete_collection(collection)
        try:
            await self._clear(collection)
        except errors.SoundingError as error:  # recreating the name clears again, or fails
            log.warning("%s deleted, but its cached copies were not all dropped: %s", collection, error)

    async def _clear(self, collection: ResourceRef) -> None:
        """Drop what may remain of a collection of this name: its graph, the workers' copies."""
        if self._graphs is not None:
            await self._graphs.drop(collection)
        if self._forget is not None:
            await self._forget(collection)

    async def ingest(
        self,
        batches: AsyncIterator[tuple[ResourceRef | None, Sequence[DocumentIn]]],
        time_remaining: Callable[[], float | None] = lambda: None,
    ) -> AsyncGenerator[IngestProgress, None]:
        """One stream of (collection, documents) batches into one collection (a batch after the
        first may name none). Each batch is prepared (validated, chunked,
        embedded) while the previous one is written, and acknowledged in order once written (the
        last once the collection's full-text index holds every chunk). A
        batch that is invalid, or fails to read, ends the stream after the earlier ones were
        acknowledged, with nothing of it written."""
        started = time.perf_counter()
        collection: ResourceRef | None = None
        totals = [0, 0]
        writing: asyncio.Task[BatchWritten] | None = None
        batch_index = 0

        async def acknowledge(
            task: asyncio.Task[BatchWritten], index: int, last: bool = False
        ) -> IngestProgress:
            written = await task
            if last and collection is not None:  # the stream's last batch: everything indexed
                async with self._store.lock(collection):
                    await self._store.index(collection)
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
                    if collection is None:
                        if named is None:
                            raise errors.InvalidArgument(
                                "the first batch names the collection", field="collection"
                            )
                        collection = named
                    elif named not in (None, collection):
                        raise errors.InvalidArgument(
                            f"one stream ingests into one collection ({collection.name!r}); this batch "
                            f"names {named.name!r}",
                            field="collection",
                        )
                    prepared = await self.prepare_batch(collection, documents, time_remaining())
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
                writing = asyncio.ensure_future(self.write_batch(collection, prepared))
                batch_index += 1
            if writing is not None:
                yield await acknowledge(writing, batch_index - 1, last=True)
                writing = None
        finally:
            if writing is not None:  # the stream failed or was cancelled: let the commit settle
                await asyncio.gather(writing, return_exceptions=True)
            if batch_index and collection is not None:
                self.ingestion_ended(collection)

    async def prepare_batch(
        self, collection: ResourceRef, documents: Sequence[DocumentIn], timeout_s: float | None = None
    ) -> PreparedBatch:
        """Validate, chunk and embed one batch; nothing is written yet."""
        validate_batch(documents, self._limits)
        info = await self._store.get_collection(collection)
        rows = await asyncio.to_thread(chunk_rows, documents, info, self._limits)
        vectors = await self._embed([r["search_text"] for r in rows], timeout_s)
        table = await asyncio.to_thread(schema.chunk_table, rows, vectors, info.embedding_dimension)
        return PreparedBatch(table=table, document_ids=[d.id for d in documents])

    def ingestion_ended(self, collection: ResourceRef) -> None:
        """An ingest stream into the collection ended (however it ended): rebuild its graph, once
        the collection has been quiet for a moment, off the ingestion's critical path."""
        if self._graphs is not None:
            self._graphs.schedule(collection)

    async def write_batch(self, collection: ResourceRef, batch: PreparedBatch) -> BatchWritten:
        """Write a prepared batch in one commit: it is visible entirely or not at all."""
        async with self._store.lock(collection):
            await self._store.get_collection(collection)  # not deleted meanwhile
            await self._store.write_documents(collection, batch.table, batch.document_ids)
        return BatchWritten(documents=len(batch.document_ids), chunks=batch.table.num_rows)

    async def _embed(self, texts: list[str], timeout_s: float | None) -> np.ndarray:
        """Embeds in sidecar-sized calls, several in flight so the micro-batcher stays busy."""
        limit = asyncio.Semaphore(EMBED_CALLS_IN_FLIGHT)

        async def one(part: list[str]) -> np.ndarray:
            async with limit:
                return await self._models.embed(part, timeout=timeout_s)

        parts = [texts[i : i + EMBED_CALL_TEXTS] for i in range(0, len(texts), EMBED_CALL_TEXTS)]
        return np.concatenate(await asyncio.gather(*(one(p) for p in parts)))
