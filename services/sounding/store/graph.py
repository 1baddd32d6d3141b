"""The corpus knowledge graph of a collection, in LanceDB: entities (with their embeddings and
how many chunks mention them) and weighted co-occurrence edges (how many chunks mention both).

The graph is derived data: `GraphStore.replace` swaps in a graph built from the chunk table at a
known table version, and records that version, so a graph that lags its chunks (an ingest since,
or a crash mid-build) is recognisable and rebuilt. Readers (`GraphSnapshot`) hold an in-memory
copy per table version.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import lancedb
import numpy as np
import pyarrow as pa

from sounding.store import schema
from sounding.store.connection import table_names
from sounding.store.database import Database
from sounding.store.lease import GRAPHS, SCHEMA, Leases
from sounding.store.tenancy import ResourceRef

ENTITIES_PREFIX = "entities__"
EDGES_PREFIX = "edges__"
GRAPH_STATE_TABLE = "graph_state"
GRAPH_STATE_SCHEMA = pa.schema(
    [
        ("collection", pa.string()),
        # The chunk table version the graph was built from.
        ("chunks_version", pa.int64()),
        ("entity_count", pa.int64()),
        ("edge_count", pa.int64()),
        ("build_time_us", pa.int64()),
    ]
)
EDGES_SCHEMA = pa.schema([("source", pa.string()), ("target", pa.string()), ("weight", pa.int64())])


def entities_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            ("entity", pa.string()),
            ("chunk_count", pa.int64()),
            ("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


class GraphStore:
    """Writes and reads graph tables (the orchestrator's side)."""

    def __init__(self, db: lancedb.AsyncConnection, leases: Leases, state: lancedb.AsyncTable):
        self._db = db
        self._leases = leases
        self._state = state
        # Entity names per collection, with the state table's version they were read at (a
        # build by any process that shares the store moves it).
        self._names: dict[ResourceRef, tuple[int, frozenset[str]]] = {}

    @classmethod
    async def open(cls, db: Database) -> GraphStore:
        """The graphs' store, its state table created if missing (here, so that no read writes)."""
        async with db.leases.held(SCHEMA):
            state = await db.connection.create_table(
                GRAPH_STATE_TABLE, schema=GRAPH_STATE_SCHEMA, exist_ok=True
            )
        return cls(db.connection, db.leases, state)

    @asynccontextmanager
    async def building(self) -> AsyncIterator[None]:
        """Hold the store's GRAPHS lease: one process builds graphs at a time, so a graph another
        process is building is not built twice (LeaseBusy if that build outlasts the wait)."""
        async with self._leases.held(GRAPHS):
            yield

    async def _state_table(self) -> lancedb.AsyncTable:
        return self._state

    async def state(self, collection: ResourceRef) -> dict | None:
        """The stored graph's chunk table version, entity and edge counts, or None."""
        table = await self._state_table()
        rows = (
            await table.query().where(f"collection = {schema.sql_string(collection.key)}").to_arrow()
        ).to_pylist()
        return rows[0] if rows else None

    async def built_version(self, collection: ResourceRef) -> int | None:
        """The chunk table version the stored graph reflects, or None if there is none."""
        state = await self.state(collection)
        return state["chunks_version"] if state else None

    async def vectors(self, collection: ResourceRef) -> dict[str, np.ndarray]:
        """The stored entity embeddings (to reuse for entities that persist across rebuilds)."""
        if ENTITIES_PREFIX + collection.key not in await table_names(self._db):
            return {}
        table = await self._db.open_table(ENTITIES_PREFIX + collection.key)
        data = await table.query().select(["entity", "vector"]).to_arrow()
        names = data.column("entity").to_pylist()
        matrix = schema.vector_matrix(data.column("vector"))
        return dict(zip(names, matrix, strict=True))

    async def replace(
        self,
        collection: ResourceRef,
        chunks_version: int,
        entities: dict[str, int],
        vectors: dict[str, np.ndarray],
        edges: dict[tuple[str, str], int],
        dimension: int,
    ) -> None:
        """Swap in a new graph (entities with chunk counts and vectors, edges with weights)."""
        names = sorted(entities)
        entity_rows = pa.table(
            {
                "entity": names,
                "chunk_count": [entities[n] for n in names],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(
                        np.concatenate([vectors[n] for n in names]).astype(np.float32)
                        if names
                        else np.zeros(0, np.float32)
                    ),
                    dimension,
                ),
            },
            schema=entities_schema(dimension),
        )
        edge_rows = pa.table(
            {
                "source": [a for a, _ in edges],
                "target": [b for _, b in edges],
                "weight": list(edges.values()),
            },
            schema=EDGES_SCHEMA,
        )
        await self._db.create_table(ENTITIES_PREFIX + collection.key, entity_rows, mode="overwrite")
        await self._db.create_table(EDGES_PREFIX + collection.key, edge_rows, mode="overwrite")
        state = pa.Table.from_pylist(
            [
                {
                    "collection": collection.key,
                    "chunks_version": chunks_version,
                    "entity_count": len(names),
                    "edge_count": len(edges),
                    "build_time_us": int(time.time() * 1e6),
                }
            ],
            GRAPH_STATE_SCHEMA,
        )
        table = await self._state_table()
        await (
            table.merge_insert("collection")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(state)
        )

    async def drop(self, collection: ResourceRef) -> None:
        existing = set(await table_names(self._db))
        for name in (ENTITIES_PREFIX + collection.key, EDGES_PREFIX + collection.key):
            if name in existing:
                await self._db.drop_table(name)
        table = await self._state_table()
        await table.delete(f"collection = {schema.sql_string(collection.key)}")

    async def related(self, collection: ResourceRef, entities: list[str], limit: int) -> dict[str, list[str]]:
        """Each named entity's strongest co-occurring neighbours (at most `limit`, by descending
        weight, then name); an entity the graph lacks, or a graph not built yet, has none."""
        names = await self.entity_names(collection)
        known = [e for e in dict.fromkeys(entities) if e in names]
        if not known:
            return {e: [] for e in entities}
        listed = ", ".join(schema.sql_string(e) for e in known)
        table = await self._db.open_table(EDGES_PREFIX + collection.key)
        rows = (
            await table.query().where(f"source IN ({listed}) OR target IN ({listed})").to_arrow()
        ).to_pylist()
        found: dict[str, list[tuple[int, str]]] = {e: [] for e in known}
        for row in rows:
            for this, other in ((row["source"], row["target"]), (row["target"], row["source"])):
                if this in found:
                    found[this].append((-row["weight"], other))
        return {e: [other for _, other in sorted(found.get(e, []))[:limit]] for e in entities}

    async def entity_names(self, collection: ResourceRef) -> frozenset[str]:
        """Every entity of the collection's graph (empty before the first build). Served from
        memory while the state table has not moved (a build or drop by any process moves it)."""
        version = await self._state.version()
        cached = self._names.get(collection)
        if cached is not None and cached[0] == version:
            return cached[1]
        try:
            table = await self._db.open_table(ENTITIES_PREFIX + collection.key)
            data = await table.query().select(["entity"]).to_arrow()
            names = frozenset(data.column("entity").to_pylist())
        except ValueError:
            names = frozenset()
        self._names[collection] = (version, names)
        return names


@dataclass
class GraphSnapshot:
    """A reader's in-memory graph: entity names and unit vectors, and each entity's neighbours
    by descending co-occurrence weight."""

    version: tuple[int, int]
    names: list[str]
    index: dict[str, int]
    matrix: np.ndarray
    neighbours: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    # How many chunks mention each entity (same order as `names`).
    chunk_counts: list[int] = field(default_factory=list)
    # Entities by the words they contain, built on first use.
    _by_word: dict[str, list[int]] | None = field(default=None, repr=False)

    @staticmethod
    async def open_tables(
        db: lancedb.AsyncConnection, collection: ResourceRef
    ) -> tuple[lancedb.AsyncTable, lancedb.AsyncTable] | None:
        """The collection's entity and edge tables, or None before its first graph build."""
        try:
            return await db.open_table(ENTITIES_PREFIX + collection.key), await db.open_table(
                EDGES_PREFIX + collection.key
            )
        except ValueError:
            return None

    @classmethod
    async def load(cls, entities: lancedb.AsyncTable, edges: lancedb.AsyncTable) -> GraphSnapshot:
        version = (await entities.version(), await edges.version())
        entity_data = await entities.query().select(["entity", "chunk_count", "vector"]).to_arrow()
        edge_data = await edges.query().to_arrow()
        return await asyncio.to_thread(cls._build, version, entity_data, edge_data)

    @classmethod
    def _build(cls, version, entity_data: pa.Table, edge_data: pa.Table) -> GraphSnapshot:
        names = entity_data.column("entity").to_pylist()
        index = {name: i for i, name in enumerate(names)}
        matrix = schema.vector_matrix(entity_data.column("vector")).astype(np.float32)
        if matrix.size:
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        neighbours: dict[int, list[tuple[int, int]]] = {}
        for source, target, weight in zip(
            edge_data.column("source").to_pylist(),
            edge_data.column("target").to_pylist(),
            edge_data.column("weight").to_pylist(),
            strict=True,
        ):
            a, b = index.get(source), index.get(target)
            if a is not None and b is not None:
                neighbours.setdefault(a, []).append((b, weight))
                neighbours.setdefault(b, []).append((a, weight))
        for links in neighbours.values():
            links.sort(key=lambda link: (-link[1], names[link[0]]))
        return cls(version, names, index, matrix, neighbours, entity_data.column("chunk_count").to_pylist())

    def nearest(
        self, vector: np.ndarray, limit: int, min_similarity: float, exclude: frozenset[str] = frozenset()
    ) -> list[tuple[str, float]]:
        """Entities by cosine similarity to `vector` (at least `min_similarity`), best first."""
        if not self.matrix.size:
            return []
        query = np.asarray(vector, dtype=np.float32)
        similarity = self.matrix @ (query / max(float(np.linalg.norm(query)), 1e-12))
        out: list[tuple[str, float]] = []
        for i in np.argsort(-similarity)[: limit + len(exclude) + 1]:
            if similarity[i] < min_similarity or len(out) >= limit:
                break
            if self.names[i] not in exclude:
                out.append((self.names[i], float(similarity[i])))
        return out

    def vector(self, entity: str) -> np.ndarray | None:
        i = self.index.get(entity)
        return None if i is None else self.matrix[i]

    def broader(self, phrase: str) -> list[str]:
        """Entities that are a shorter run of the phrase's words, longest (closest) first, then
        by how many chunks mention them."""
        words = phrase.split()
        runs = {
            " ".join(words[start : start + length])
            for length in range(len(words) - 1, 0, -1)
            for start in range(len(words) - length + 1)
        }
        found = [r for r in runs if r in self.index]
        return sorted(found, key=lambda r: (-len(r.split()), -self._chunks(r), r))

    def narrower(self, phrase: str, limit: int) -> list[str]:
        """Entities that contain the phrase's words as a run and add words to it, by how many
        chunks mention them."""
        if self._by_word is None:
            by_word: dict[str, list[int]] = {}
            for i, name in enumerate(self.names):
                for word in set(name.split()):
                    by_word.setdefault(word, []).append(i)
            self._by_word = by_word
        words = phrase.split()
        if not words:
            return []
        padded = f" {phrase} "
        found = [
            self.names[i]
            for i in self._by_word.get(words[0], [])
            if len(self.names[i].split()) > len(words) and padded in f" {self.names[i]} "
        ]
        return sorted(found, key=lambda n: (-self._chunks(n), n))[:limit]

    def _chunks(self, entity: str) -> int:
        i = self.index[entity]
        return self.chunk_counts[i] if i < len(self.chunk_counts) else 0

    def match(
        self, phrases: list[str], vector: np.ndarray | None, limit: int = 5, min_similarity: float = 0.6
    ) -> list[str]:
        """Graph entities the query names: its phrases found verbatim, then the entities
        nearest to the query embedding (cosine at least `min_similarity`)."""
        found = [p for p in phrases if p in self.index]
        if vector is not None and self.matrix.size and len(found) < limit:
            query = np.asarray(vector, dtype=np.float32)
            query = query / max(float(np.linalg.norm(query)), 1e-12)
            similarity = self.matrix @ query
            for i in np.argsort(-similarity)[: limit * 2]:
                if similarity[i] < min_similarity or len(found) >= limit:
                    break
                if self.names[i] not in found:
                    found.append(self.names[i])
        return found[:limit]

    def related(self, entities: list[str], limit: int = 10) -> list[str]:
        """The strongest co-occurring neighbours of `entities`, summed over them."""
        weights: dict[int, int] = {}
        chosen = {self.index[e] for e in entities if e in self.index}
        for i in chosen:
            for j, weight in self.neighbours.get(i, [])[:50]:
                if j not in chosen:
                    weights[j] = weights.get(j, 0) + weight
        ranked = sorted(weights, key=lambda j: (-weights[j], self.names[j]))
        return [self.names[j] for j in ranked[:limit]]
