"""GraphBuilder: keeps each collection's knowledge graph current with its chunks.

When an ingest stream ends, `schedule` (re)builds the collection's graph once it has been quiet
for a moment (streams ending close together share one build), so ingestion never waits for it. A build
streams the chunks' text at one table version in record batches, extracts at most
`max_entities_per_chunk` entities of each chunk (sounding.core.entities) on a worker thread,
counts co-occurrences within chunks (so at most n(n-1)/2 pairs a chunk: no document can make the
graph outgrow memory), embeds the entities it has no vector for, and swaps the graph in,
recording the version it reflects. `catch_up` rebuilds the graphs that lag their chunks
(after a restart, or a crash mid-build).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from sounding.core.entities import co_occurrences, extract_entities
from sounding.models.client import ModelsClient
from sounding.store.collections import CollectionStats, Store
from sounding.store.graph import GraphStore
from sounding.store.lease import LeaseBusy
from sounding.store.tenancy import ResourceRef

log = logging.getLogger(__name__)
EMBED_BATCH = 256
READ_BATCH_ROWS = 4096


def count_graph(
    texts: list[str], max_entities: int, chunk_counts: Counter[str], edges: Counter[tuple[str, str]]
) -> None:
    """Add the chunks' entities (at most `max_entities` of each) to `chunk_counts` and their
    co-occurrences to `edges`: at most max_entities·(max_entities−1)/2 pairs a chunk."""
    entity_lists = [extract_entities(t)[:max_entities] for t in texts]
    chunk_counts.update(e for entities in entity_lists for e in set(entities))
    edges.update(co_occurrences(entity_lists))


@dataclass(frozen=True)
class GraphConfig:
    """The entities a build takes from each chunk, and how long a collection's writes must have
    been quiet before its graph is built."""

    max_entities_per_chunk: int
    quiet_s: float = 2.0


class GraphBuilder:
    def __init__(self, store: Store, graphs: GraphStore, models: ModelsClient, config: GraphConfig):
        self._store = store
        self._graphs = graphs
        self._models = models
        self._config = config
        self._tasks: dict[ResourceRef, asyncio.Task] = {}
        self._dirty: set[ResourceRef] = set()

    def schedule(self, collection: ResourceRef) -> None:
        self._dirty.add(collection)
        task = self._tasks.get(collection)
        if task is None or task.done():
            self._tasks[collection] = asyncio.ensure_future(self._run(collection))

    async def _run(self, collection: ResourceRef) -> None:
        while collection in self._dirty:
            self._dirty.discard(collection)
            await asyncio.sleep(self._config.quiet_s)
            if collection in self._dirty:
                continue  # more writes arrived: wait for quiet again
            try:
                await self.rebuild(collection)
            except LeaseBusy:
                log.info("another process is building graphs; %s is looked at again later", collection)
                self._dirty.add(collection)
            except Exception:
                log.exception(
                    "building the graph of %s failed; the next write or restart retries", collection
                )

    async def wait(self, collection: ResourceRef) -> None:
        """Until no build of `collection` is pending."""
        while (task := self._tasks.get(collection)) is not None and not task.done():
            await asyncio.shield(task)

    async def catch_up(self) -> None:
        for info in await self._store.list_collections():
            table = await self._store.chunks(info.ref)
            if await self._graphs.built_version(info.ref) != await table.version():
                self.schedule(info.ref)

    async def stats(self, collection: ResourceRef, stats: CollectionStats) -> CollectionStats:
        """`stats` with the collection's graph counts and whether the graph is current."""
        state = await self._graphs.state(collection)
        if state is None:
            return stats
        return replace(
            stats,
            graph_entity_count=state["entity_count"],
            graph_edge_count=state["edge_count"],
            graph_current=state["chunks_version"] == stats.version,
        )

    async def drop(self, collection: ResourceRef) -> None:
        task = self._tasks.pop(collection, None)
        self._dirty.discard(collection)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._graphs.drop(collection)

    async def rebuild(self, collection: ResourceRef) -> None:
        """Build the collection's graph unless the stored one is current; one build at a time
        among the processes sharing the store (README, "Scaling out")."""
        async with self._graphs.building():
            await self._build(collection)

    async def _build(self, collection: ResourceRef) -> None:
        info = await self._store.get_collection(collection)
        table = await self._store.chunks(collection)
        version = await table.version()
        if await self._graphs.built_version(collection) == version:
            return  # current, built here or by another process
        # A write landing between reading the version and the rows only makes this graph newer
        # than recorded; the build that write schedules brings the record up to date.
        chunk_counts: Counter[str] = Counter()
        edges: Counter[tuple[str, str]] = Counter()
        reader = await table.query().select(["search_text"]).to_batches(max_batch_length=READ_BATCH_ROWS)
        async for batch in reader:
            texts = batch.column("search_text").to_pylist()
            await asyncio.to_thread(
                count_graph, texts, self._config.max_entities_per_chunk, chunk_counts, edges
            )
        vectors = await self._graphs.vectors(collection)
        missing = [e for e in chunk_counts if e not in vectors]
        for start in range(0, len(missing), EMBED_BATCH):
            part = missing[start : start + EMBED_BATCH]
            vectors.update(zip(part, np.asarray(await self._models.embed(part)), strict=True))
        await self._graphs.replace(
            collection, version, dict(chunk_counts), vectors, dict(edges), info.embedding_dimension
        )
        log.info(
            "graph of %s: %d entities, %d edges (chunk table version %d)",
            collection,
            len(chunk_counts),
            len(edges),
            version,
        )
