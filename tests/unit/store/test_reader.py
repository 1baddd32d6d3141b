import asyncio

import numpy as np
import pyarrow as pa
import pytest
from sounding.store import schema
from sounding.store.collections import Store
from sounding.store.database import Database
from sounding.store.location import StoreLocation
from sounding.store.reader import (
    ChunkHit,
    ChunkReader,
    _documents,
    _exact_scan,
    _VectorSnapshot,
    best_per_document,
)
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit
C = ResourceRef("default", "c")


def ref(name: str) -> ResourceRef:
    return ResourceRef("default", name)


# Document "a" owns the six best chunks, then b, c, d follow.
RANKED = [ChunkHit("a", f"a#{i}", 1.0 - i / 100) for i in range(6)] + [
    ChunkHit(d, f"{d}#0", 0.5 - i / 100) for i, d in enumerate("bcd")
]


def test_best_per_document_keeps_first_chunk_in_order():
    assert [(h.document_id, h.chunk_id) for h in best_per_document(RANKED, 3)] == [
        ("a", "a#0"),
        ("b", "b#0"),
        ("c", "c#0"),
    ]


def test_documents_fetches_more_until_enough_distinct_documents():
    asked: list[int] = []

    async def fetch(count):
        asked.append(count)
        return RANKED[:count]

    documents = asyncio.run(_documents(fetch, 3, chunks_per_document=1.0))
    assert [h.document_id for h in documents] == ["a", "b", "c"]
    assert asked == [4, 8]  # 4 chunks are all of a; 8 reach b and c


def test_documents_stops_when_the_table_is_exhausted():
    async def fetch(count):
        return RANKED[:count]

    documents = asyncio.run(_documents(fetch, 10, chunks_per_document=1.0))
    assert [h.document_id for h in documents] == ["a", "b", "c", "d"]


def test_exact_scan_collapses_to_documents_and_orders_by_cosine():
    rng = np.random.default_rng(0)
    query = rng.standard_normal(8).astype(np.float32)
    query /= np.linalg.norm(query)
    noise = rng.standard_normal((9, 8)).astype(np.float32) * 0.05
    matrix = np.stack([query] * 9) + noise * np.arange(1, 10)[:, None]
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    documents = np.array(["a"] * 6 + ["b", "c", "d"], dtype=object)
    chunks = np.array([f"{d}#{i}" for i, d in enumerate(documents)], dtype=object)
    snapshot = _VectorSnapshot(1, 9 / 4, chunks, documents, matrix)
    hits = _exact_scan(snapshot, query, 3)
    scores = matrix @ query
    best = {}
    for index in np.argsort(-scores):
        best.setdefault(documents[index], (chunks[index], float(scores[index])))
    expected = list(best.items())[:3]
    assert [(h.document_id, h.chunk_id) for h in hits] == [(d, c) for d, (c, _) in expected]
    assert [h.score for h in hits] == pytest.approx([s for _, (_, s) in expected])


def rows(document_ids, direction):
    """Chunk rows of one chunk per document, every vector along `direction`."""
    vector = np.asarray(direction, dtype=np.float32) / np.linalg.norm(direction)
    return pa.Table.from_pylist(
        [
            {
                "chunk_id": f"{d}#0",
                "document_id": d,
                "chunk_index": 0,
                "title": d,
                "text": d,
                "search_text": d,
                "metadata": {},
                "vector": vector.tolist(),
            }
            for d in document_ids
        ],
        schema.chunks_schema(len(direction)),
    )


def test_a_version_read_by_the_writer_shows_the_reader_every_acknowledged_write(tmp_path):
    """The orchestrator reads the version (Store.stats) and passes it to the workers' readers:
    a reader whose snapshot has that version skips LanceDB's version check, and one whose
    snapshot is older loads the new version."""

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        await store.create_collection(C, "", "test", 2, 400, 50)
        await store.write_documents(C, rows(["a"], [1.0, 0.0]), ["a"])
        reader = await ChunkReader.open(StoreLocation(str(tmp_path)), exact_scan_max_chunks=100)
        first = await store.stats(C)
        before = await reader.vector_search(C, np.array([0.0, 1.0], np.float32), 5, first.version)
        await store.write_documents(C, rows(["b"], [0.0, 1.0]), ["b"])
        second = await store.stats(C)
        table = await reader._table(C)
        asked = []
        original = table.version

        async def counted_version():
            asked.append(1)
            return await original()

        table.version = counted_version
        after = await reader.vector_search(C, np.array([0.0, 1.0], np.float32), 5, second.version)
        again = await reader.vector_search(C, np.array([0.0, 1.0], np.float32), 5, second.version)
        return first.version, second.version, before, after, again, len(asked)

    first, second, before, after, again, asked = asyncio.run(run())
    assert second > first
    assert [h.document_id for h in before] == ["a"]
    assert [h.document_id for h in after] == ["b", "a"] == [h.document_id for h in again]
    assert asked == 1  # once to load the newer version, not for the search at a known version


def test_held_vectors_stay_within_the_budget_and_a_collection_over_it_is_searched_in_lancedb(tmp_path):
    vector_bytes = 16 * 4 + 100  # what one 16-dimensional chunk counts for

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        for name, count in (("small", 10), ("other", 20), ("large", 40)):
            await store.create_collection(ref(name), "", "test", 16, 400, 50)
            documents = [f"{name}{i}" for i in range(count)]
            await store.write_documents(ref(name), rows(documents, [1.0] + [0.0] * 15), documents)
        reader = await ChunkReader.open(StoreLocation(str(tmp_path)), 100, snapshot_bytes=25 * vector_bytes)
        query = np.asarray([1.0] + [0.0] * 15, np.float32)
        found = {}
        for name in ("small", "other", "large"):
            found[name] = await reader.vector_search(ref(name), query, 3)
        return reader, found

    reader, found = asyncio.run(run())
    assert all(len(hits) == 3 for hits in found.values())
    assert list(reader._snapshots) == [ref("other"), ref("large")]  # "small" gave way to "other"
    assert reader._snapshots[ref("large")].matrix is None  # 40 chunks exceed the budget alone
    assert sum(s.nbytes for s in reader._snapshots.values()) <= 25 * vector_bytes


def test_a_collection_deleted_under_cached_handles_is_not_found_for_writer_and_reader(tmp_path):
    """Found by the fuzz suite: ListCollections racing DeleteCollection read a dropped table."""
    import lancedb
    from sounding.runtime import errors

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        await store.create_collection(C, "", "test", 2, 400, 50)
        await store.write_documents(C, rows(["a"], [1.0, 0.0]), ["a"])
        reader = await ChunkReader.open(StoreLocation(str(tmp_path)), exact_scan_max_chunks=100)
        await store.stats(C)
        await reader.vector_search(C, np.array([1.0, 0.0], np.float32), 1)
        # Another writer's delete, which this store's and reader's caches do not know of.
        other = lancedb.connect(str(tmp_path))
        other.open_table(schema.COLLECTIONS_TABLE).delete(f"name = '{C.key}'")
        other.drop_table(schema.chunks_table(C))
        store._infos.clear()
        failures = []
        for call in (
            store.stats(C),
            store.fetch_chunks(C, ["a#0"]),
            reader.text_search(C, "a", 1),
        ):
            try:
                await call
                failures.append(None)
            except errors.NotFound as error:
                failures.append(error.reason)
        return failures

    assert asyncio.run(run()) == ["COLLECTION_NOT_FOUND"] * 3
