"""Read-only access to chunk tables for the strategy workers.

Searches return one hit per document (its best chunk), best first. Dense search over a table of
at most `exact_scan_max_chunks` chunks is an exact cosine scan of the table's vectors held in
memory and reloaded whenever the table's version changes; the result is the same ranking as
LanceDB's flat vector search, without its per-query planning cost. Larger tables use LanceDB's
vector search, and so does a table whose vectors alone exceed `snapshot_bytes`. The vectors of
all collections together are held within `snapshot_bytes`, the graphs of at most `max_graphs`
collections; the least recently used give way.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections import OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NamedTuple

import lancedb
import numpy as np

from sounding.runtime import errors
from sounding.store import schema
from sounding.store.connection import connect
from sounding.store.graph import GraphSnapshot
from sounding.store.location import StoreLocation
from sounding.store.tenancy import ResourceRef

# Chunks fetched per wanted document: the table's chunks-per-document ratio times this margin.
# Whenever the fetched chunks hold too few distinct documents, twice as many are fetched.
OVERFETCH_MARGIN = 1.25


class ChunkHit(NamedTuple):
    """A chunk found for a document (a tuple: arms return hundreds, cheap to build and unpack)."""

    document_id: str
    chunk_id: str
    score: float


@dataclass
class _VectorSnapshot:
    version: int
    chunks_per_document: float = 1.0
    chunk_ids: np.ndarray | None = None
    document_ids: np.ndarray | None = None
    # None when the table is too large for an in-memory scan.
    matrix: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        """About what the snapshot holds in memory (the ids' strings counted at 100 bytes)."""
        return 0 if self.matrix is None else self.matrix.nbytes + 100 * len(self.matrix)


def best_per_document(hits: list[ChunkHit], limit: int) -> list[ChunkHit]:
    """Keep each document's first (best) chunk, in order, up to `limit` documents."""
    seen: set[str] = set()
    out: list[ChunkHit] = []
    for hit in hits:
        if hit.document_id not in seen:
            seen.add(hit.document_id)
            out.append(hit)
            if len(out) == limit:
                break
    return out


class ChunkReader:
    def __init__(
        self,
        connection: lancedb.AsyncConnection,
        exact_scan_max_chunks: int,
        snapshot_bytes: int = 1 << 30,
        max_graphs: int = 8,
    ):
        self._db = connection
        self._exact_scan_max_chunks = exact_scan_max_chunks
        self._snapshot_bytes = snapshot_bytes
        self._max_graphs = max_graphs
        self._tables: dict[ResourceRef, lancedb.AsyncTable] = {}
        self._snapshots: OrderedDict[ResourceRef, _VectorSnapshot] = OrderedDict()
        self._snapshot_locks: weakref.WeakValueDictionary[tuple[str, ResourceRef], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._graphs: OrderedDict[ResourceRef, GraphSnapshot] = OrderedDict()

    @classmethod
    async def open(
        cls,
        location: StoreLocation,
        exact_scan_max_chunks: int,
        snapshot_bytes: int = 1 << 30,
        max_graphs: int = 8,
    ) -> ChunkReader:
        connection = await connect(location)
        return cls(connection, exact_scan_max_chunks, snapshot_bytes, max_graphs)

    def _lock(self, key: tuple[str, ResourceRef]) -> asyncio.Lock:
        lock = self._snapshot_locks.get(key)
        if lock is None:
            lock = self._snapshot_locks[key] = asyncio.Lock()
        return lock

    def _keep_snapshot(self, collection: ResourceRef, snapshot: _VectorSnapshot) -> _VectorSnapshot:
        self._snapshots[collection] = snapshot
        self._snapshots.move_to_end(collection)
        while (
            sum(s.nbytes for s in self._snapshots.values()) > self._snapshot_bytes
            and len(self._snapshots) > 1
        ):
            self._snapshots.popitem(last=False)
        return snapshot

    async def _table(self, collection: ResourceRef) -> lancedb.AsyncTable:
        table = self._tables.get(collection)
        if table is None:
            try:
                table = await self._db.open_table(schema.chunks_table(collection))
            except ValueError:
                raise errors.collection_not_found(collection.name) from None
            self._tables[collection] = table
        return table

    @asynccontextmanager
    async def _gone_is_not_found(self, collection: ResourceRef):
        """A read that fails because the collection was deleted meanwhile is NotFound (and the
        cached handles of it are dropped)."""
        try:
            yield
        except errors.SoundingError:
            raise
        except Exception:
            self.forget(collection)
            try:
                await self._db.open_table(schema.chunks_table(collection))
            except ValueError:
                raise errors.collection_not_found(collection.name) from None
            raise

    def forget(self, collection: ResourceRef) -> None:
        """Drop cached handles (after the collection was deleted or recreated)."""
        self._tables.pop(collection, None)
        self._snapshots.pop(collection, None)
        self._graphs.pop(collection, None)

    async def graph(self, collection: ResourceRef) -> GraphSnapshot | None:
        """The collection's knowledge graph as last built, or None before its first build."""
        tables = await GraphSnapshot.open_tables(self._db, collection)
        if tables is None:
            return None
        version = (await tables[0].version(), await tables[1].version())
        cached = self._graphs.get(collection)
        if cached is None or cached.version != version:
            async with self._lock(("graph", collection)):
                cached = self._graphs.get(collection)
                if cached is None or cached.version != version:
                    cached = self._graphs[collection] = await GraphSnapshot.load(*tables)
        self._graphs.move_to_end(collection)
        while len(self._graphs) > self._max_graphs:
            self._graphs.popitem(last=False)
        return cached

    async def vector_search(
        self, collection: ResourceRef, vector: np.ndarray, limit: int, version: int | None = None
    ) -> list[ChunkHit]:
        """Best chunk per document by cosine similarity; `version`, when given, is the collection's
        current version (read by the only writer)."""
        async with self._gone_is_not_found(collection):
            table = await self._table(collection)
            snapshot = await self._snapshot(collection, table, version)
            if snapshot.matrix is not None:
                return _exact_scan(snapshot, vector, limit)

            async def fetch(count: int) -> list[ChunkHit]:
                rows = (
                    await table.vector_search(vector)
                    .distance_type("cosine")
                    .select(["chunk_id", "document_id"])
                    .limit(count)
                    .to_arrow()
                ).to_pylist()
                return [ChunkHit(r["document_id"], r["chunk_id"], 1.0 - r["_distance"]) for r in rows]

            return await _documents(fetch, limit, snapshot.chunks_per_document)

    async def text_search(
        self, collection: ResourceRef, query: str, limit: int, version: int | None = None
    ) -> list[ChunkHit]:
        async with self._gone_is_not_found(collection):
            table = await self._table(collection)
            snapshot = await self._snapshot(collection, table, version)

            async def fetch(count: int) -> list[ChunkHit]:
                rows = (
                    await table.query()
                    .nearest_to_text(query)
                    # Naming `_score` keeps LanceDB from logging a deprecation warning per search.
                    .select(["chunk_id", "document_id", "_score"])
                    .limit(count)
                    .to_arrow()
                ).to_pylist()
                return [ChunkHit(r["document_id"], r["chunk_id"], float(r["_score"])) for r in rows]

            return await _documents(fetch, limit, snapshot.chunks_per_document)

    async def _snapshot(
        self, collection: ResourceRef, table: lancedb.AsyncTable, known_version: int | None = None
    ) -> _VectorSnapshot:
        snapshot = self._snapshots.get(collection)
        if snapshot is not None and known_version is not None and snapshot.version == known_version:
            self._snapshots.move_to_end(collection)
            return snapshot
        version = await table.version()
        snapshot = self._snapshots.get(collection)  # it may have given way meanwhile
        if snapshot is not None and snapshot.version == version:
            self._snapshots.move_to_end(collection)
            return snapshot
        async with self._lock(("vectors", collection)):
            snapshot = self._snapshots.get(collection)
            if snapshot is not None and snapshot.version == version:
                return snapshot
            chunk_count = await table.count_rows()
            document_count = await table.count_rows("chunk_index = 0")
            chunks_per_document = chunk_count / document_count if document_count else 1.0
            too_large = _VectorSnapshot(version, chunks_per_document)
            dimension = (await table.schema()).field("vector").type.list_size
            if (
                chunk_count > self._exact_scan_max_chunks
                or chunk_count * (dimension * 4 + 100) > self._snapshot_bytes
            ):
                return self._keep_snapshot(collection, too_large)
            data = await table.query().select(["chunk_id", "document_id", "vector"]).to_arrow()
            vectors = data.column("vector").combine_chunks()
            matrix = vectors.values.to_numpy(zero_copy_only=False).reshape(-1, dimension)
            snapshot = _VectorSnapshot(
                version=version,
                chunks_per_document=chunks_per_document,
                chunk_ids=np.asarray(data.column("chunk_id").to_pylist(), dtype=object),
                document_ids=np.asarray(data.column("document_id").to_pylist(), dtype=object),
                matrix=np.ascontiguousarray(matrix, dtype=np.float32),
            )
            return self._keep_snapshot(collection, snapshot)


async def _documents(fetch, limit: int, chunks_per_document: float) -> list[ChunkHit]:
    """The best chunk of each of the top `limit` documents, fetching more chunks while the
    fetched ones hold fewer than `limit` distinct documents and more chunks exist."""
    count = math.ceil(limit * chunks_per_document * OVERFETCH_MARGIN)
    while True:
        hits = await fetch(count)
        documents = best_per_document(hits, limit)
        if len(documents) == limit or len(hits) < count:
            return documents
        count *= 2


def _exact_scan(snapshot: _VectorSnapshot, vector: np.ndarray, limit: int) -> list[ChunkHit]:
    """Exact cosine ranking over the snapshot (rows are L2-normalised), best chunk per document."""
    matrix, document_ids, chunk_ids = snapshot.matrix, snapshot.document_ids, snapshot.chunk_ids
    if matrix is None or document_ids is None or chunk_ids is None:
        raise ValueError("the snapshot holds no vectors to scan")
    if matrix.shape[0] == 0:
        return []
    scores = matrix @ vector.astype(np.float32)
    count = min(math.ceil(limit * snapshot.chunks_per_document * OVERFETCH_MARGIN), scores.shape[0])
    while True:
        top = np.argpartition(-scores, count - 1)[:count]
        top = top[np.lexsort((top, -scores[top]))]
        hits = [ChunkHit(str(document_ids[i]), str(chunk_ids[i]), float(scores[i])) for i in top]
        documents = best_per_document(hits, limit)
        if len(documents) == limit or count == scores.shape[0]:
            return documents
        count = min(count * 2, scores.shape[0])
