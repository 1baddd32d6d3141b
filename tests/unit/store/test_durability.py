import asyncio
import threading
import time

import pytest
from sounding.store import durability
from sounding.store.database import Database
from sounding.store.durability import Durability
from sounding.store.location import StoreLocation
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit
C = ResourceRef("default", "c")


@pytest.fixture
def flushes(monkeypatch):
    """The real syncfs, counted and slowed a little, so that callers can overlap."""
    calls = []
    real = durability._syncfs

    def counted(path):
        calls.append(threading.get_ident())
        time.sleep(0.02)
        real(path)

    monkeypatch.setattr(durability, "_syncfs", counted)
    return calls


def test_fsync_mode_flushes_and_concurrent_callers_share_flushes(tmp_path, flushes):
    sync = Durability("fsync", StoreLocation(str(tmp_path)))

    async def run():
        await sync.sync()
        await asyncio.gather(*(sync.sync() for _ in range(20)))

    asyncio.run(run())
    assert len(flushes) >= 2
    assert len(flushes) <= 3  # the first, then the twenty in one or two


@pytest.mark.parametrize("mode,uri", [("process", "LOCAL"), ("fsync", "s3://bucket/store")])
def test_no_flush_in_process_mode_or_on_object_storage(tmp_path, flushes, mode, uri):
    asyncio.run(Durability(mode, StoreLocation(str(tmp_path) if uri == "LOCAL" else uri)).sync())
    assert flushes == []


def test_the_store_acknowledges_a_write_only_after_the_flush(tmp_path, flushes):
    import lancedb
    import numpy as np
    import pyarrow as pa
    from sounding.store import schema
    from sounding.store.collections import Store

    order = []
    sync = Durability("fsync", StoreLocation(str(tmp_path)))
    flush = sync.sync

    async def recorded():
        # What a new reader finds on disk at the moment of the flush: the commit must be there.
        db = lancedb.connect(str(tmp_path))
        names = set(db.table_names())
        rows = db.open_table(schema.chunks_table(C)).count_rows() if schema.chunks_table(C) in names else 0
        registered = C.key in db.open_table(schema.COLLECTIONS_TABLE).to_arrow().column("name").to_pylist()
        await flush()
        order.append(f"flushed (registered {registered}, {rows} rows)")

    sync.sync = recorded

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path)), sync))
        await store.create_collection(C, "", "test", 2, 400, 50)
        order.append("created")
        row = {
            "chunk_id": "a#0",
            "document_id": "a",
            "chunk_index": 0,
            "title": "",
            "text": "a",
            "search_text": "a",
            "metadata": {},
            "vector": np.array([1.0, 0.0], np.float32).tolist(),
        }
        await store.write_documents(C, pa.Table.from_pylist([row], schema.chunks_schema(2)), ["a"])
        order.append("written")

    asyncio.run(run())
    assert order == [
        "flushed (registered True, 0 rows)",
        "created",
        "flushed (registered True, 1 rows)",
        "written",
    ]
