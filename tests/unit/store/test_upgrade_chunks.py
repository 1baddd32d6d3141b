"""A collection whose chunk table was written with its metadata as a JSON string (before the map
column) opens upgraded on a real LanceDB directory: every chunk, vector and metadata value
intact, full-text search indexed again, and nothing rewritten on the next open."""

import asyncio
import json

import lancedb
import pyarrow as pa
import pytest
from sounding.store import schema
from sounding.store.collections import Store
from sounding.store.database import Database
from sounding.store.location import StoreLocation
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit

LEGACY_CHUNKS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("document_id", pa.string()),
        ("chunk_index", pa.int32()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("search_text", pa.string()),
        ("metadata_json", pa.string()),
        ("vector", pa.list_(pa.float32(), 2)),
    ]
)
C = ResourceRef("default", "c")
METADATA = {"a": {"source": "pubmed", "year": "2019"}, "b": {}}


async def create_legacy_collection(path: str) -> None:
    store = await Store.open(await Database.open(StoreLocation(path)))
    await store.create_collection(C, "", "test", 2, 400, 50)
    rows = [
        {
            "chunk_id": schema.chunk_id(doc, 0),
            "document_id": doc,
            "chunk_index": 0,
            "title": f"title {doc}",
            "text": text,
            "search_text": f"title {doc} {text}",
            "metadata_json": json.dumps(METADATA[doc]),
            "vector": vector,
        }
        for doc, text, vector in (("a", "zebras graze", [1.0, 0.0]), ("b", "lions hunt", [0.0, 1.0]))
    ]
    db = await lancedb.connect_async(path)
    await db.create_table(
        schema.chunks_table(C), data=pa.Table.from_pylist(rows, LEGACY_CHUNKS), mode="overwrite"
    )


def test_a_legacy_chunk_table_opens_with_a_metadata_map_and_its_text_index(tmp_path):
    path = str(tmp_path)

    async def run():
        await create_legacy_collection(path)
        store = await Store.open(await Database.open(StoreLocation(path)))
        fetched = await store.fetch_chunks(C, ["a#0", "b#0"])
        table = await store.chunks(C)
        found = await table.query().nearest_to_text("zebras").select(["chunk_id"]).to_arrow()
        upgraded = (await table.schema(), await table.query().to_arrow(), await table.version())
        await Store.open(await Database.open(StoreLocation(path)))  # already upgraded: not rewritten
        again = await (await lancedb.connect_async(path)).open_table(schema.chunks_table(C))
        return fetched, found.column("chunk_id").to_pylist(), upgraded, await again.version()

    fetched, found, (table_schema, rows, version), version_after = asyncio.run(run())
    assert table_schema == schema.chunks_schema(2)
    assert {c: dict(r["metadata"]) for c, r in fetched.items()} == {
        "a#0": METADATA["a"],
        "b#0": METADATA["b"],
    }
    assert fetched["a#0"]["text"] == "zebras graze" and fetched["a#0"]["title"] == "title a"
    vectors = dict(zip(rows.column("chunk_id").to_pylist(), rows.column("vector").to_pylist(), strict=True))
    assert vectors == {"a#0": [1.0, 0.0], "b#0": [0.0, 1.0]}
    assert found == ["a#0"]
    assert version_after == version


def test_a_chunk_table_left_without_its_text_index_gets_it_back_on_open(tmp_path):
    """What a crash between an upgrade's rewrite and its index build leaves."""
    path = str(tmp_path)

    async def run():
        store = await Store.open(await Database.open(StoreLocation(path)))
        await store.create_collection(C, "", "test", 2, 400, 50)
        db = await lancedb.connect_async(path)
        table = await db.open_table(schema.chunks_table(C))
        await table.drop_index(schema.TEXT_INDEX)
        before = [i.name for i in await table.list_indices()]
        await Store.open(await Database.open(StoreLocation(path)))
        after = [i.name for i in await (await db.open_table(schema.chunks_table(C))).list_indices()]
        return before, after

    assert asyncio.run(run()) == ([], [schema.TEXT_INDEX])
