import asyncio

import numpy as np
import pytest
from sounding.store.reader import ChunkHit, _documents, _exact_scan, _VectorSnapshot, best_per_document

pytestmark = pytest.mark.unit

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


def test_a_version_read_by_the_writer_shows_the_reader_every_acknowledged_write(tmp_path):
    """The orchestrator reads the version (Store.stats) and passes it to the workers' readers:
    a reader whose snapshot has that version skips LanceDB's version check, and one whose
    snapshot is older loads the new version."""
    import pyarrow as pa
    from sounding.store import schema
    from sounding.store.collections import Store
    from sounding.store.reader import ChunkReader

    def rows(document_ids, direction):
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
                    "metadata_json": "{}",
                    "vector": vector.tolist(),
                }
                for d in document_ids
            ],
            schema.chunks_schema(2),
        )

    async def run():
        store = await Store.open(str(tmp_path))
        await store.create_collection("c", "", "test", 2, 400, 50)
        await store.write_documents("c", rows(["a"], [1.0, 0.0]), ["a"])
        reader = await ChunkReader.open(str(tmp_path), exact_scan_max_chunks=100)
        first = await store.stats("c")
        before = await reader.vector_search("c", np.array([0.0, 1.0], np.float32), 5, first.version)
        await store.write_documents("c", rows(["b"], [0.0, 1.0]), ["b"])
        second = await store.stats("c")
        table = await reader._table("c")
        asked = []
        original = table.version

        async def counted_version():
            asked.append(1)
            return await original()

        table.version = counted_version
        after = await reader.vector_search("c", np.array([0.0, 1.0], np.float32), 5, second.version)
        again = await reader.vector_search("c", np.array([0.0, 1.0], np.float32), 5, second.version)
        return first.version, second.version, before, after, again, len(asked)

    first, second, before, after, again, asked = asyncio.run(run())
    assert second > first
    assert [h.document_id for h in before] == ["a"]
    assert [h.document_id for h in after] == ["b", "a"] == [h.document_id for h in again]
    assert asked == 1  # once to load the newer version, not for the search at a known version
