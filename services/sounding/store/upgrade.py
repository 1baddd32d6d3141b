"""Tables written by earlier versions, brought to the current schema when they open: structured
values that were JSON strings (the learning log's `arms_json`, `outcome_json`, `rewards_json`,
`scores_json`, `pruned_arms_json`; a chunk table's `metadata_json`) become the typed columns that
replace them, and columns added since (`stated_miss_rate`, `expansions`) are filled with nulls.

A table is rewritten in one Lance commit (an overwrite is a new version of the same table), so a
crash during the upgrade leaves the old table whole and the next start upgrades it again. The
rewrite holds one table in memory, converting only the legacy columns value by value. An
overwrite drops the table's indexes: the caller rebuilds them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import lancedb
import pyarrow as pa


def _arms(text: str) -> list[dict]:
    """{arm: run} as logged before `cost_ms` and `exploration` were recorded too (a run's cost
    was its latency, and no run explored)."""
    return [
        {
            "arm": arm,
            "document_ids": run["document_ids"],
            "latency_ms": run["latency_ms"],
            "cost_ms": run.get("cost_ms", run["latency_ms"]),
            "exploration": bool(run.get("exploration", False)),
        }
        for arm, run in json.loads(text).items()
    ]


def _outcome(text: str) -> dict:
    return {
        "used_document_ids": [],
        "feedback": "",
        "agent_success": None,
        "found_missing_content": False,
        "missed_document_ids": [],
        **json.loads(text),
    }


def _metadata(text: str | None) -> dict[str, str]:
    return json.loads(text or "{}")


# legacy column -> (the column replacing it, its value from the legacy one)
LEGACY_COLUMNS: dict[str, tuple[str, Callable[[str], object]]] = {
    "arms_json": ("arms", _arms),
    "outcome_json": ("outcome", _outcome),
    "rewards_json": ("rewards", json.loads),
    "scores_json": ("scores", json.loads),
    "pruned_arms_json": ("pruned_arms", json.loads),
    "metadata_json": ("metadata", _metadata),
}


def needs_upgrade(columns: set[str], schema: pa.Schema) -> bool:
    return bool(columns & LEGACY_COLUMNS.keys()) or not set(schema.names) <= columns


def upgraded(old: pa.Table, schema: pa.Schema) -> pa.Table:
    """`old` in `schema`: legacy columns converted, the others kept, missing columns null."""
    replacing = {
        column: (legacy, convert)
        for legacy, (column, convert) in LEGACY_COLUMNS.items()
        if legacy in old.column_names
    }
    columns: list[pa.Array | pa.ChunkedArray] = []
    for field in schema:
        if field.name in replacing:
            legacy, convert = replacing[field.name]
            columns.append(pa.array([convert(v) for v in old.column(legacy).to_pylist()], field.type))
        elif field.name in old.column_names:
            columns.append(old.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(old.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


async def upgrade(db: lancedb.AsyncConnection, name: str, schema: pa.Schema) -> bool:
    """Rewrites table `name` into `schema` if it predates it (True when it did)."""
    table = await db.open_table(name)
    if not needs_upgrade({f.name for f in await table.schema()}, schema):
        return False
    old = await table.query().to_arrow()
    new = await asyncio.to_thread(upgraded, old, schema)
    await db.create_table(name, data=new, mode="overwrite")
    return True
