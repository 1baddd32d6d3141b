"""The orchestrator's store: collections, their chunk tables and inquiry sessions. The only
writer.

Write rules that keep every acknowledged batch whole:
- a chunk table is created before its collection is registered, and a collection is
  unregistered before its table is dropped; tables nobody registered are dropped on open;
- a batch of documents becomes one merge-insert commit that also deletes the stale chunks of
  re-ingested documents, so a batch is visible entirely or not at all;
- the table is optimised (compacted, new chunks added to the full-text index) when the chunks
  not yet indexed reach a share of the indexed ones, and at the end of an ingest stream: an
  optimisation rewrites the table, so one per batch would make ingesting quadratic in the
  collection's size. Chunks not yet indexed are still found: full-text search scans them.

A chunk table written by an earlier version is rewritten into the current schema on open
(`store.upgrade`), and its full-text index rebuilt.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS

from sounding.runtime import errors
from sounding.store import lease, schema
from sounding.store.compaction import compact
from sounding.store.connection import table_names
from sounding.store.database import Database
from sounding.store.durability import Durability
from sounding.store.lease import Leases
from sounding.store.sessions import SessionTables
from sounding.store.tenancy import ResourceRef
from sounding.store.tenant_keys import qualify_default_tenant
from sounding.store.upgrade import upgrade

log = logging.getLogger(__name__)
# A batch optimises the table when the chunks not yet full-text indexed reach this share of the
# indexed ones (and of REINDEX_MIN_ROWS): optimisations then cost time linear in the table's size.
REINDEX_SHARE = 0.25
REINDEX_MIN_ROWS = 1024


@dataclass(frozen=True)
class CollectionInfo:
    ref: ResourceRef
    description: str
    create_time_us: int
    embedding_model: str
    embedding_dimension: int
    chunk_words: int
    chunk_overlap_words: int

    @property
    def name(self) -> str:
        """The name its tenant knows it by."""
        return self.ref.name

    @classmethod
    def of_row(cls, row: dict) -> CollectionInfo:
        return cls(ref=ResourceRef.from_key(row.pop("name")), **row)

    def row(self) -> dict:
        return {"name": self.ref.key, **{k: v for k, v in self.__dict__.items() if k != "ref"}}


@dataclass(frozen=True)
class CollectionStats:
    document_count: int
    chunk_count: int
    fts_indexed_chunk_count: int
    graph_entity_count: int = 0
    graph_edge_count: int = 0
    graph_current: bool = False
    # The chunks table's version these counts are of.
    version: int | None = None


class Store(SessionTables):
    """The writer. Every method that commits something a client is acknowledged for returns only
    once `durability.sync()` says the commit is on disk. Collections are named by `ResourceRef`
    only. Opened before anything else of the store: it moves an older store's bare keys of the
    default tenant to their qualified names first (`store.tenant_keys`)."""

    def __init__(self, connection: lancedb.AsyncConnection, durability: Durability, leases: Leases):
        self._db = connection
        self._durability = durability
        self._leases = leases
        self._locks: weakref.WeakValueDictionary[ResourceRef, asyncio.Lock] = weakref.WeakValueDictionary()
        self._tables: dict[ResourceRef, lancedb.AsyncTable] = {}
        self._stats: dict[ResourceRef, tuple[int, CollectionStats]] = {}
        self._infos: dict[ResourceRef, CollectionInfo] = {}
        self._infos_version = 0

    @classmethod
    async def open(cls, db: Database) -> Store:
        """The collections' store: an older store's keys moved to their tenants, the registry and
        sessions' tables created if missing, tables of no registered collection dropped, chunk
        tables upgraded."""
        store = cls(db.connection, db.durability, db.leases)
        async with db.leases.held(lease.SCHEMA):
            await qualify_default_tenant(db.connection, db.durability.sync)
            await store._ensure_registry()
            await store._ensure_sessions(await table_names(db.connection))
            async with db.leases.held(lease.COLLECTIONS):
                await store._drop_unregistered_tables()
            await store._upgrade_chunk_tables()
        return store

    def lock(self, collection: ResourceRef) -> asyncio.Lock:
        """The collection's write lock (kept only while someone holds or waits for it)."""
        lock = self._locks.get(collection)
        if lock is None:
            lock = self._locks[collection] = asyncio.Lock()
        return lock

    async def _ensure_registry(self) -> None:
        if schema.COLLECTIONS_TABLE not in await table_names(self._db):
            await self._db.create_table(
                schema.COLLECTIONS_TABLE, schema=schema.COLLECTIONS_SCHEMA, exist_ok=True
            )
        self._registry = await self._db.open_table(schema.COLLECTIONS_TABLE)

    async def _drop_unregistered_tables(self) -> None:
        registered = {schema.chunks_table(c.ref) for c in await self.list_collections()}
        for name in await table_names(self._db):
            if name.startswith(schema.CHUNKS_PREFIX) and name not in registered:
                await self._db.drop_table(name)

    async def _upgrade_chunk_tables(self) -> None:
        """Every registered collection's chunk table in the current schema, with its full-text
        index (an upgrade's rewrite drops it; a crash after the rewrite leaves it to build here)."""
        for info in await self.list_collections():
            name = schema.chunks_table(info.ref)
            if await upgrade(self._db, name, schema.chunks_schema(info.embedding_dimension)):
                log.info("upgraded the chunk table of %s to the current schema", info.ref)
            table = await self._db.open_table(name)
            if not any(index.name == schema.TEXT_INDEX for index in await table.list_indices()):
                await table.create_index(schema.TEXT_COLUMN, config=FTS(with_position=False), replace=True)
                await self._durability.sync()

    async def create_collection(
        self,
        collection: ResourceRef,
        description: str,
        embedding_model: str,
        embedding_dimension: int,
        chunk_words: int,
        chunk_overlap_words: int,
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> CollectionInfo:
        """Register a new collection (AlreadyExists if it is registered); `prepare` runs under the
        collection's lock and the store's COLLECTIONS lease once it is known not to exist, before
        anything is written."""
        async with self.lock(collection), self._leases.held(lease.COLLECTIONS):
            if await self._find(collection) is not None:
                raise errors.collection_exists(collection.name)
            if prepare is not None:
                await prepare()
            table = await self._db.create_table(
                schema.chunks_table(collection),
                schema=schema.chunks_schema(embedding_dimension),
                mode="overwrite",
            )
            await table.create_index(schema.TEXT_COLUMN, config=FTS(with_position=False), replace=True)
            info = CollectionInfo(
                ref=collection,
                description=description,
                create_time_us=int(time.time() * 1e6),
                embedding_model=embedding_model,
                embedding_dimension=embedding_dimension,
                chunk_words=chunk_words,
                chunk_overlap_words=chunk_overlap_words,
            )
            await self._registry.add(pa.Table.from_pylist([info.row()], schema.COLLECTIONS_SCHEMA))
            await self._durability.sync()
            return info

    async def _find(self, collection: ResourceRef) -> CollectionInfo | None:
        where = f"name = {schema.sql_string(collection.key)}"
        rows = (await self._registry.query().where(where).limit(1).to_arrow()).to_pylist()
        return CollectionInfo.of_row(rows[0]) if rows else None

    async def get_collection(self, collection: ResourceRef) -> CollectionInfo:
        # Cached while the registry's version stands (any process's create or delete moves it).
        version = await self._registry.version()
        if version != self._infos_version:
            self._infos.clear()
            self._infos_version = version
        info = self._infos.get(collection) or await self._find(collection)
        if info is None:
            raise errors.collection_not_found(collection.name)
        self._infos[collection] = info
        return info

    async def list_collections(
        self, tenant: str | None = None, start_after: str = "", limit: int | None = None
    ) -> list[CollectionInfo]:
        """Registered collections (a tenant's, or all) by name, those named after `start_after`."""
        query = self._registry.query()
        if tenant is not None:
            low = ResourceRef(tenant, start_after).key if start_after else f"{tenant}."
            # Keys of the tenant sort between "<tenant>." and "<tenant>/" ('/' follows '.').
            high = tenant + "/"
            query = query.where(f"name > {schema.sql_string(low)} AND name < {schema.sql_string(high)}")
        rows = (await query.to_arrow()).to_pylist()
        infos = sorted((CollectionInfo.of_row(r) for r in rows), key=lambda c: c.ref.key)
        return infos if limit is None else infos[:limit]

    async def delete_collection(self, collection: ResourceRef) -> None:
        async with self.lock(collection), self._leases.held(lease.COLLECTIONS):
            await self.get_collection(collection)
            await self._registry.delete(f"name = {schema.sql_string(collection.key)}")
            for cache in (self._tables, self._stats, self._infos):
                cache.pop(collection, None)
            await self._db.drop_table(schema.chunks_table(collection))
            await self._durability.sync()

    async def chunks(self, collection: ResourceRef) -> lancedb.AsyncTable:
        table = self._tables.get(collection)
        if table is None:
            table = self._tables[collection] = await self._db.open_table(schema.chunks_table(collection))
        return table

    async def write_documents(self, collection: ResourceRef, rows: pa.Table, document_ids: list[str]) -> None:
        """Replace the given documents by `rows` (their chunks) in one commit; optimise the table
        when the chunks not yet full-text indexed reach REINDEX_SHARE of the indexed ones."""
        table = await self.chunks(collection)
        stale = " OR ".join(
            f"document_id IN ({', '.join(schema.sql_string(d) for d in document_ids[i : i + 500])})"
            for i in range(0, len(document_ids), 500)
        )
        await (
            table.merge_insert("chunk_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(stale)
            .execute(rows)
        )
        index = await table.index_stats(schema.TEXT_INDEX)
        if index is None or index.num_unindexed_rows >= REINDEX_SHARE * max(
            index.num_indexed_rows, REINDEX_MIN_ROWS
        ):
            await compact(self._leases, table, wait=True)
        await self._durability.sync()

    async def index(self, collection: ResourceRef) -> None:
        """Optimise the collection's table if it holds chunks not yet full-text indexed (an
        ingest stream's end)."""
        async with self._gone_is_not_found(collection):
            table = await self.chunks(collection)
            index = await table.index_stats(schema.TEXT_INDEX)
            if index is None or index.num_unindexed_rows:
                await compact(self._leases, table, wait=True)
                await self._durability.sync()

    async def stats(self, collection: ResourceRef) -> CollectionStats:
        """Document, chunk and indexed-chunk counts of the table's current version (cached per
        version). A version read here includes every write, of any process,
        acknowledged before. NotFound if the collection is gone (deleted meanwhile)."""
        async with self._gone_is_not_found(collection):
            table = await self.chunks(collection)
            version = await table.version()
            cached = self._stats.get(collection)
            if cached is not None and cached[0] == version:
                return cached[1]
            chunk_count = await table.count_rows()
            document_count = await table.count_rows("chunk_index = 0")
            index = await table.index_stats(schema.TEXT_INDEX)
        indexed = chunk_count - (index.num_unindexed_rows if index else chunk_count)
        stats = CollectionStats(document_count, chunk_count, indexed, version=version)
        self._stats[collection] = (version, stats)
        return stats

    async def fetch_chunks(self, collection: ResourceRef, chunk_ids: list[str]) -> dict[str, dict]:
        """Title, text and metadata of the given chunks, keyed by chunk id."""
        if not chunk_ids:
            return {}
        ids = ", ".join(schema.sql_string(c) for c in chunk_ids)
        async with self._gone_is_not_found(collection):
            table = await self.chunks(collection)
            rows = (
                await table.query()
                .where(f"chunk_id IN ({ids})")
                .select(["chunk_id", "title", "text", "metadata"])
                .to_arrow()
            ).to_pylist()
        return {r["chunk_id"]: r for r in rows}

    async def chunk_vectors(self, collection: ResourceRef, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """The embeddings of those of the given chunks that exist, keyed by chunk id."""
        if not chunk_ids:
            return {}
        ids = ", ".join(schema.sql_string(c) for c in chunk_ids)
        async with self._gone_is_not_found(collection):
            table = await self.chunks(collection)
            data = await table.query().where(f"chunk_id IN ({ids})").select(["chunk_id", "vector"]).to_arrow()
        matrix = schema.vector_matrix(data.column("vector"))
        return dict(zip(data.column("chunk_id").to_pylist(), matrix, strict=True))

    async def vector_pool(
        self, collection: ResourceRef, document_ids: Collection[str], sample: int, seed: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """(document id of each row, the rows' embeddings) for every chunk of the given documents
        and, of the rest, every chunk when the collection holds at most `sample` chunks, else a
        uniform sample of `sample` chunks (seeded)."""
        async with self._gone_is_not_found(collection):
            table = await self.chunks(collection)
            count = await table.count_rows()
            columns = ["chunk_id", "document_id", "vector"]
            if count <= sample:
                parts = [await table.query().select(columns).to_arrow()]
            else:
                offsets = np.random.default_rng(seed).choice(count, sample, replace=False)
                parts = [await table.take_offsets(sorted(int(o) for o in offsets)).select(columns).to_arrow()]
                listed = sorted(document_ids)
                for start in range(0, len(listed), 500):
                    ids = ", ".join(schema.sql_string(d) for d in listed[start : start + 500])
                    parts.append(
                        await table.query().where(f"document_id IN ({ids})").select(columns).to_arrow()
                    )
        data = pa.concat_tables(parts)
        _, first = np.unique(np.asarray(data.column("chunk_id").to_pylist(), dtype=object), return_index=True)
        data = data.take(np.sort(first))
        documents = np.asarray(data.column("document_id").to_pylist(), dtype=object)
        return documents, schema.vector_matrix(data.column("vector"))

    @asynccontextmanager
    async def _gone_is_not_found(self, collection: ResourceRef):
        """A read of a collection's table that fails because the collection was deleted
        meanwhile is NotFound."""
        try:
            yield
        except errors.SoundingError:
            raise
        except Exception:
            if await self._find(collection) is None:
                raise errors.collection_not_found(collection.name) from None
            raise
