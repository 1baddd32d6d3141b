"""Learning-log tables written by earlier versions, brought to the current schema when the log
opens: structured values that were JSON strings (`arms_json`, `outcome_json`, `rewards_json`,
`scores_json`, `pruned_arms_json`) become the typed columns that replace them, and columns added
since (`stated_miss_rate`) are filled with nulls.

A table is rewritten in one Lance commit (an overwrite is a new version of the same table), so a
crash during the upgrade leaves the old table whole and the next start upgrades it again; its
indexes are rebuilt by the caller.
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


# legacy column -> (the column replacing it, its value from the legacy one)
LEGACY_COLUMNS: dict[str, tuple[str, Callable[[str], object]]] = {
    "arms_json": ("arms", _arms),
    "outcome_json": ("outcome", _outcome),
    "rewards_json": ("rewards", json.loads),
    "scores_json": ("scores", json.loads),
    "pruned_arms_json": ("pruned_arms", json.loads),
}


def needs_upgrade(columns: set[str], schema: pa.Schema) -> bool:
    return bool(columns & LEGACY_COLUMNS.keys()) or not set(schema.names) <= columns


def upgraded(old: pa.Table, schema: pa.Schema) -> pa.Table:
    """`old`'s rows in `schema`: legacy columns converted, missing columns null."""
    rows = []
    for row in old.to_pylist():
        new = {name: row.get(name) for name in schema.names}
        for legacy, (column, convert) in LEGACY_COLUMNS.items():
            if legacy in row:
                new[column] = convert(row[legacy])
        rows.append(new)
    return pa.Table.from_pylist(rows, schema)


async def upgrade(db: lancedb.AsyncConnection, name: str, schema: pa.Schema) -> bool:
    """Rewrites table `name` into `schema` if it predates it (True when it did)."""
    table = await db.open_table(name)
    if not needs_upgrade({f.name for f in await table.schema()}, schema):
        return False
    old = await table.query().to_arrow()
    new = await asyncio.to_thread(upgraded, old, schema)
    await db.create_table(name, data=new, mode="overwrite")
    return True
