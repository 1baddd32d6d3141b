"""The move of the default tenant's bare keys to `default.<name>` (`store.tenancy`), run when the
store opens, before anything reads it.

Stores written before every key carried its tenant named the default tenant's collections,
sessions and learning tables by their bare names. Here:
1. each bare per-tenant table (a learning, tool or corpus inquiry table; a collection's chunk or
   graph table) is copied to its qualified name, the collection keys its rows hold qualified on
   the way (`retrievals.collection`, `calibrations.target` of a query adapter);
2. the shared tables' bare keys are qualified in place, one commit each (the collection registry,
   the graph state, both session tables);
3. the bare tables are dropped (once steps 1 and 2 are durable), and a marker table written.
Step 1 reads from the bare tables, which stay the truth until step 3, so a crash anywhere is
repaired by the next open doing what is left: a copy is overwritten, never appended to. A copy
reads a batch at a time and drops its indexes; the tables' owners rebuild them when they open
(and the graphs, whose recorded chunk table versions no longer apply, are rebuilt).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import lancedb
import pyarrow as pa

from sounding.store import schema
from sounding.store.connection import table_names
from sounding.store.corpus_inquiry import QUERIES_TABLE, VERDICTS_TABLE
from sounding.store.graph import EDGES_PREFIX, ENTITIES_PREFIX, GRAPH_STATE_TABLE
from sounding.store.learning_tables import (
    CALIBRATIONS_TABLE,
    DEPLOYMENTS_TABLE,
    INQUIRY_STATES_TABLE,
    OBSERVATIONS_TABLE,
    RETRIEVALS_TABLE,
)
from sounding.store.tenancy import DEFAULT_TENANT, tenant_table
from sounding.store.tools import EVENTS_TABLE, EXEMPLARS_TABLE, LABELS_TABLE, TOOLS_TABLE

log = logging.getLogger(__name__)

QUALIFIED = DEFAULT_TENANT + "."
# Written once the move is done (or found nothing to move): what is bare after it is not ours.
MARKER_TABLE = "tenant_keys_moved"
ADAPTER_TARGET = "query_adapter:"
# Shared tables and the column holding their tenant-scoped keys.
SHARED_KEYS = {
    schema.COLLECTIONS_TABLE: "name",
    GRAPH_STATE_TABLE: "collection",
    schema.SESSIONS_TABLE: "session_id",
    schema.SESSION_SETUPS_TABLE: "session_id",
}
PER_COLLECTION_PREFIXES = (schema.CHUNKS_PREFIX, ENTITIES_PREFIX, EDGES_PREFIX)


def _qualified(values: pa.ChunkedArray, prefix: str = "") -> pa.ChunkedArray:
    """`prefix<key>` values whose key is bare become `prefix default.<key>`."""
    texts = values.to_pylist()
    return pa.chunked_array(
        [
            [
                prefix + QUALIFIED + v[len(prefix) :]
                if v is not None and v.startswith(prefix) and "." not in v[len(prefix) :]
                else v
                for v in texts
            ]
        ],
        values.type,
    )


def _retrievals(rows: pa.Table) -> pa.Table:
    index = rows.schema.get_field_index("collection")
    return rows.set_column(index, "collection", _qualified(rows.column("collection")))


def _calibrations(rows: pa.Table) -> pa.Table:
    index = rows.schema.get_field_index("target")
    return rows.set_column(index, "target", _qualified(rows.column("target"), ADAPTER_TARGET))


# The default tenant's learning tables, and what their rows need on the way.
LEARNING_TABLES: dict[str, Callable[[pa.Table], pa.Table] | None] = {
    RETRIEVALS_TABLE: _retrievals,
    CALIBRATIONS_TABLE: _calibrations,
    OBSERVATIONS_TABLE: None,
    DEPLOYMENTS_TABLE: None,
    INQUIRY_STATES_TABLE: None,
    QUERIES_TABLE: None,
    VERDICTS_TABLE: None,
    TOOLS_TABLE: None,
    EVENTS_TABLE: None,
    LABELS_TABLE: None,
    EXEMPLARS_TABLE: None,
}


def _bare_per_collection(name: str) -> bool:
    return any(name.startswith(p) and "." not in name[len(p) :] for p in PER_COLLECTION_PREFIXES)


def _qualified_table(name: str) -> str:
    if name in LEARNING_TABLES:
        return tenant_table(name, DEFAULT_TENANT)
    prefix = next(p for p in PER_COLLECTION_PREFIXES if name.startswith(p))
    return prefix + QUALIFIED + name[len(prefix) :]


async def _copy(db: lancedb.AsyncConnection, name: str) -> None:
    """The bare table `name` copied to its qualified name, batch by batch (a copy cut short is
    overwritten by the next one)."""
    convert = LEARNING_TABLES.get(name)
    source = await db.open_table(name)
    target = None
    async for batch in await source.query().to_batches():
        rows = pa.Table.from_batches([batch])
        rows = convert(rows) if convert else rows
        if target is None:
            target = await db.create_table(_qualified_table(name), data=rows, mode="overwrite")
        else:
            await target.add(rows)
    if target is None:  # no rows: LanceDB makes an empty table from a schema, not from data
        await db.create_table(_qualified_table(name), schema=await source.schema(), mode="overwrite")


async def _bare_keys(db: lancedb.AsyncConnection, names: set[str]) -> dict[str, int]:
    """Per shared table, how many of its keys are bare."""
    counts = {}
    for table_name, column in SHARED_KEYS.items():
        if table_name in names:
            counts[table_name] = await (await db.open_table(table_name)).count_rows(
                f"strpos({column}, '.') = 0"
            )
    return counts


async def qualify_default_tenant(db: lancedb.AsyncConnection, sync: Callable[[], Awaitable[None]]) -> int:
    """Moves every bare key and table of the default tenant to its qualified name (see the module
    docstring), `sync` making the copies and keys durable before a bare table is dropped; returns
    how many tables were copied (0 once the store is current). A store moved before (it holds the
    marker) with bare tables or keys again was written by an earlier version since: it is not
    opened (RuntimeError), since moving them now would overwrite newer data."""
    names = set(await table_names(db))
    bare = sorted(n for n in names if n in LEARNING_TABLES or _bare_per_collection(n))
    bare_keys = {table: count for table, count in (await _bare_keys(db, names)).items() if count}
    if MARKER_TABLE in names:
        if bare or bare_keys:
            raise RuntimeError(
                "an earlier version of Sounding wrote to this store after its keys were moved to "
                f"<tenant>.<name> (bare tables {bare}, bare keys in {sorted(bare_keys)}); run the "
                "version that wrote them, or drop what they wrote, before opening it with this one"
            )
        return 0
    if not bare and not bare_keys:  # nothing to move (a marker lost in a crash is written again)
        await _mark(db)
        return 0
    for name in bare:
        await _copy(db, name)
    for table_name in bare_keys:
        column = SHARED_KEYS[table_name]
        updates = {column: f"concat('{QUALIFIED}', {column})"}
        if table_name == GRAPH_STATE_TABLE:
            updates["chunks_version"] = "-1"  # the copied chunk tables number their versions anew
        await (await db.open_table(table_name)).update(
            updates_sql=updates, where=f"strpos({column}, '.') = 0"
        )
    await sync()
    for name in bare:
        await db.drop_table(name)
    await _mark(db)
    await sync()
    log.info("moved %d tables of the default tenant to qualified names: %s", len(bare), ", ".join(bare))
    return len(bare)


async def _mark(db: lancedb.AsyncConnection) -> None:
    await db.create_table(MARKER_TABLE, data=pa.table({"moved_time_us": [int(time.time() * 1e6)]}))
