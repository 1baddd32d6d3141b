import asyncio
import re

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from sounding.runtime import errors
from sounding.store import schema
from sounding.store.collections import Store
from sounding.store.database import Database
from sounding.store.graph import GraphStore
from sounding.store.learning import LearningLog, RetrievalRecord
from sounding.store.lease import LEASES_TABLE
from sounding.store.location import StoreLocation
from sounding.store.tenancy import ResourceRef, tenant_table
from sounding.store.tenant_keys import MARKER_TABLE
from sounding.store.tools import ToolStore

pytestmark = pytest.mark.unit


async def open_store(path: str) -> Store:
    return await Store.open(await Database.open(StoreLocation(path)))


def test_every_tenants_keys_carry_the_tenant_and_no_name_holds_a_dot():
    assert ResourceRef("default", "docs").key == "default.docs"
    assert ResourceRef("acme", "docs").key == "acme.docs"
    assert ResourceRef.from_key("acme.docs") == ResourceRef("acme", "docs")
    assert tenant_table("retrievals", "default") == "retrievals.default"
    for tenant, name in (("default", "acme.private"), ("acme", ""), ("acme", "Docs"), ("ac.me", "docs")):
        with pytest.raises(ValueError):
            ResourceRef(tenant, name)
    for key in ("docs", "default.acme.private", ".docs"):
        with pytest.raises(ValueError):
            ResourceRef.from_key(key)
    with pytest.raises(ValueError):
        tenant_table("retrievals", "acme.private")


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "a" * 65, "has space", "acme.private"])
def test_a_name_no_resource_can_have_is_refused_naming_the_field(name):
    with pytest.raises(errors.InvalidArgument) as refused:
        ResourceRef.named("default", name, "start.domain_parameters.collection")
    assert refused.value.field == "start.domain_parameters.collection"


@pytest.mark.parametrize("name", ["a", "beir-scifact-1", "x_y", "0" * 64])
def test_names_a_resource_can_have(name):
    assert ResourceRef.named("acme", name, "name") == ResourceRef("acme", name)


def test_collections_of_the_same_name_in_two_tenants_are_two_and_listed_apart(tmp_path):
    # Tenants whose names sort next to "acme" must not leak into its listing.
    tenants = ("default", "acme", "acme-corp", "acme_x", "acme0", "globex")

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        for tenant in tenants:
            for name in ("docs", "notes"):
                await store.create_collection(ResourceRef(tenant, name), "", "m", 4, 100, 10)
        listed = {
            tenant: [c.name for c in await store.list_collections(tenant)] for tenant in (*tenants, "initech")
        }
        after = [c.name for c in await store.list_collections("acme", start_after="docs")]
        await store.delete_collection(ResourceRef("acme", "docs"))
        remaining = [c.ref.key for c in await store.list_collections()]
        reopened = [
            c.ref.key
            for c in await (
                await Store.open(await Database.open(StoreLocation(str(tmp_path))))
            ).list_collections()
        ]
        return listed, after, remaining, reopened

    listed, after, remaining, reopened = asyncio.run(run())
    assert listed == {**dict.fromkeys(tenants, ["docs", "notes"]), "initech": []}
    assert after == ["notes"]
    # Opening the store drops chunk tables nobody registered: the tenants' tables are registered.
    assert remaining == reopened
    assert len(remaining) == 2 * len(tenants) - 1 and "acme.docs" not in remaining


def test_each_tenants_learning_log_is_its_own(tmp_path):
    async def run():
        acme = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))), tenant="acme")
        globex = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))), tenant="globex")
        default = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        await acme.append_calibration("miss_rate", 1, {"a": 1.0}, {})
        return [await log.latest_calibration("miss_rate") for log in (acme, globex, default)]

    acme, globex, default = asyncio.run(run())
    assert acme == (1, {"a": 1.0}) and globex is None and default is None


DOCS = ResourceRef("default", "docs")
NOTES = ResourceRef("acme", "notes")
SESSION = ResourceRef("default", "s1")


async def _populate(path: str) -> None:
    """A current store holding something of every kind for the default tenant and for acme."""
    location = StoreLocation(path)
    store = await Store.open(await Database.open(location))
    for collection, text in ((DOCS, "zebras graze on the plain"), (NOTES, "lions hunt at dusk")):
        await store.create_collection(collection, "", "m", 2, 100, 10)
        row = {
            "chunk_id": "a#0",
            "document_id": "a",
            "chunk_index": 0,
            "title": "t",
            "text": text,
            "search_text": text,
            "metadata": [("k", "v")],
        }
        await store.write_documents(
            collection, schema.chunk_table([row], np.array([[1.0, 0.0]], np.float32), 2), ["a"]
        )
    await store.create_session(SESSION, "bulls_and_cows", "{}")
    await store.save_session(SESSION, 1, "bulls_and_cows", "state")
    graphs = await GraphStore.open(await Database.open(location))
    await graphs.replace(DOCS, 2, {"zebra": 1}, {"zebra": np.array([1.0, 0.0])}, {}, 2)
    for tenant, collection in (("default", DOCS), ("acme", NOTES)):
        log = await LearningLog.open(await Database.open(location), tenant=tenant)
        record = RetrievalRecord(
            retrieval_id="r1",
            collection=collection.key,
            query_index=0,
            mode="exploit",
            context=[0.0],
            embedding=[1.0, 0.0],
            arms={},
            create_time_us=1,
        )
        await log.append_retrievals([record])
        await log.append_calibration("query_adapter:" + collection.key, 1, {"w": 1}, {})
        await log.append_calibration("miss_rate", 1, {"a": 1.0}, {})
        await ToolStore.open(await Database.open(location), tenant=tenant)


def _legacy(path: str) -> None:
    """Turn a current store into one of before keys carried the default tenant: its tables and
    keys under their bare names, and no marker of a move."""
    db = lancedb.connect(path)
    db.drop_table(MARKER_TABLE)
    for name in db.table_names(limit=10_000):
        if name.endswith(".default") or "__default." in name:
            bare = name.removesuffix(".default").replace("__default.", "__")
            rows = db.open_table(name).to_arrow()
            for column, prefix in (("collection", ""), ("target", "query_adapter:")):
                if column in rows.column_names:
                    values = [v.replace(prefix + "default.", prefix) for v in rows.column(column).to_pylist()]
                    rows = rows.set_column(rows.schema.get_field_index(column), column, pa.array(values))
            db.create_table(bare, rows) if rows.num_rows else db.create_table(bare, schema=rows.schema)
            db.drop_table(name)
    for table, column in (
        ("collections", "name"),
        ("graph_state", "collection"),
        ("inquiry_sessions", "session_id"),
        ("inquiry_session_setups", "session_id"),
    ):
        db.open_table(table).update(
            where=f"starts_with({column}, 'default.')",
            values_sql={column: f"replace({column}, 'default.', '')"},
        )


def _contents(path: str) -> dict[str, list]:
    """Every table's rows (the marker of a move aside: it records when the move ran; and the
    leases, whose tokens count the opens)."""
    db = lancedb.connect(path)
    contents = {}
    for name in sorted(set(db.table_names(limit=10_000)) - {MARKER_TABLE, LEASES_TABLE}):
        contents[name] = sorted(map(repr, db.open_table(name).to_arrow().to_pylist()))
    return contents


def _versions(path: str) -> dict[str, int]:
    """Every table's version (but the leases': an open takes and releases them)."""
    db = lancedb.connect(path)
    return {name: db.open_table(name).version for name in set(db.table_names(limit=10_000)) - {LEASES_TABLE}}


def test_a_store_of_before_keys_carried_every_tenant_opens_with_everything_moved(tmp_path):
    path = str(tmp_path)
    asyncio.run(_populate(path))
    current = _contents(path)
    _legacy(path)
    legacy = _contents(path)
    assert "chunks__docs" in legacy and "retrievals" in legacy and "chunks__default.docs" not in legacy

    async def reopen():
        store = await Store.open(await Database.open(StoreLocation(path)))
        found = await (await store.chunks(DOCS)).query().nearest_to_text("zebras").to_arrow()
        return found.column("text").to_pylist(), await store.load_session(SESSION)

    texts, session = asyncio.run(reopen())
    moved = _contents(path)
    # The graph's recorded chunk table version is cleared (the copied table numbers its own).
    assert moved.pop("graph_state") == [
        r.replace("'chunks_version': 2", "'chunks_version': -1") for r in current.pop("graph_state")
    ]
    assert moved == current
    assert texts == ["zebras graze on the plain"] and session == ("{}", "state")
    versions = _versions(path)
    asyncio.run(open_store(path))  # nothing left to move: nothing is written
    assert _versions(path) == versions


def test_a_move_cut_short_is_finished_by_the_next_open(tmp_path):
    path = str(tmp_path)
    asyncio.run(_populate(path))
    current = _contents(path)
    _legacy(path)
    db = lancedb.connect(path)
    # A crash after an older copy of a bare table was written, before the keys were qualified.
    db.create_table("chunks__default.docs", schema=db.open_table("chunks__docs").schema)
    db.create_table("retrievals.default", schema=db.open_table("retrievals").schema)
    asyncio.run(open_store(path))
    assert _graph_versions_aside(_contents(path)) == _graph_versions_aside(current)
    # A crash after the keys were qualified, before the bare tables were dropped (and the marker
    # written).
    db.drop_table(MARKER_TABLE)
    db.create_table("chunks__docs", db.open_table("chunks__default.docs").to_arrow())
    db.create_table("edges__docs", db.open_table("edges__default.docs").to_arrow())
    asyncio.run(open_store(path))
    assert _graph_versions_aside(_contents(path)) == _graph_versions_aside(current)


def _graph_versions_aside(contents: dict[str, list]) -> dict[str, list]:
    return {
        **contents,
        "graph_state": [re.sub(r"'chunks_version': -?\d+", "", r) for r in contents["graph_state"]],
    }


def test_a_moved_store_that_an_earlier_version_wrote_to_again_is_not_opened(tmp_path):
    path = str(tmp_path)
    asyncio.run(_populate(path))
    current = _contents(path)
    db = lancedb.connect(path)
    # An earlier version, run on the moved store, logged retrievals under the bare name.
    db.create_table("retrievals", db.open_table("retrievals.default").to_arrow())
    with pytest.raises(RuntimeError, match="earlier version"):
        asyncio.run(open_store(path))
    db.drop_table("retrievals")
    asyncio.run(open_store(path))
    assert _contents(path) == current
