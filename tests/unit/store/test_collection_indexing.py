"""An ingest's batches optimise the chunk table only now and then (an optimisation rewrites the
table), chunks not yet indexed are still found by full-text search, and `index` leaves every
chunk indexed."""

import asyncio

import pyarrow as pa
import pytest
from sounding.store import collections, schema
from sounding.store.collections import Store
from sounding.store.database import Database
from sounding.store.location import StoreLocation
from sounding.store.reader import ChunkReader
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit
C = ResourceRef("default", "c")
BATCHES, BATCH = 11, 10


def rows(document_ids: list[str]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "chunk_id": f"{d}#0",
                "document_id": d,
                "chunk_index": 0,
                "title": "",
                "text": f"about {d}",
                "search_text": f"about {d}",
                "metadata": {},
                "vector": [1.0, 0.0],
            }
            for d in document_ids
        ],
        schema.chunks_schema(2),
    )


def test_batches_optimise_geometrically_and_unindexed_chunks_are_still_found(tmp_path, monkeypatch):
    monkeypatch.setattr(collections, "REINDEX_MIN_ROWS", BATCH)
    optimised: list[int] = []
    original = collections.compact

    async def counted(leases, *tables, wait=False):
        optimised.append(len(tables))
        await original(leases, *tables, wait=wait)

    monkeypatch.setattr(collections, "compact", counted)

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        await store.create_collection(C, "", "test", 2, 400, 50)
        for batch in range(BATCHES):
            ids = [f"doc{batch}x{i}" for i in range(BATCH)]
            await store.write_documents(C, rows(ids), ids)
        before = await store.stats(C)
        reader = await ChunkReader.open(StoreLocation(str(tmp_path)), exact_scan_max_chunks=1000)
        newest = await reader.text_search(C, f"doc{BATCHES - 1}x3", 3, before.version)
        optimisations = len(optimised)
        await store.index(C)
        after = await store.stats(C)
        await store.index(C)  # nothing left to index: no optimisation
        return before, newest, optimisations, after, len(optimised)

    before, newest, optimisations, after, total = asyncio.run(run())
    assert before.chunk_count == BATCHES * BATCH
    # Optimised once the unindexed chunks reach a quarter of the indexed ones: after batches
    # 1-5 (10 unindexed against at most 40 indexed), 7 and 9; not after 11 (20 against 90).
    assert optimisations == 7
    assert before.fts_indexed_chunk_count < before.chunk_count
    assert newest and newest[0].document_id == f"doc{BATCHES - 1}x3"
    assert after.fts_indexed_chunk_count == after.chunk_count == BATCHES * BATCH
    assert total == optimisations + 1
