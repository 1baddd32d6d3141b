"""A tenant's tool registries and what routing learned from use (`tools.ToolService`, spec
tool-selection-learning): the tools of each toolset (a removed tool stays as a tombstone, so a
toolset's version only grows), tool-use events as Observe received them, the label each processed
event got, and the confirmed (request -> tool) exemplars.

Registry changes and events are durable when their call returns; labels and exemplars are written
by the learner in batches (an event without a label is one the learner has still to process).

Several orchestrators share the tables (README, "Scaling out"): event sequences come in blocks
from a counter in the store, so no two events share one, and two orchestrators that both process
an event (one taking up what the other still holds) write its label and exemplar twice, which the
reads here count once.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, replace

import lancedb
import numpy as np
import pyarrow as pa

from sounding.core.tool_routing import LabelTier
from sounding.store.compaction import BackgroundCompaction
from sounding.store.connection import table_names
from sounding.store.database import Database
from sounding.store.durability import Durability
from sounding.store.group_commit import GroupCommit
from sounding.store.lease import SCHEMA, Leases
from sounding.store.schema import sql_string
from sounding.store.tenancy import DEFAULT_TENANT, tenant_table

TOOLS_TABLE = "tools"
EVENTS_TABLE = "tool_events"
LABELS_TABLE = "tool_labels"
EXEMPLARS_TABLE = "tool_exemplars"

TOOLS_SCHEMA = pa.schema(
    [
        ("toolset", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        # The tool's parameters as the JSON schema the client registered (free-form).
        ("parameters_json", pa.string()),
        # The toolset version that last changed this tool.
        ("version", pa.int64()),
        ("removed", pa.bool_()),
        # The embedding of the tool's name, description and parameter names.
        ("embedding", pa.list_(pa.float32())),
        ("update_time_us", pa.int64()),
    ]
)
EVENTS_SCHEMA = pa.schema(
    [
        ("sequence", pa.int64()),
        ("toolset", pa.string()),
        ("request", pa.string()),
        ("used_tool", pa.string()),
        ("offered_tools", pa.list_(pa.string())),
        ("success", pa.bool_()),
        ("create_time_us", pa.int64()),
    ]
)
LABELS_SCHEMA = pa.schema(
    [
        ("sequence", pa.int64()),
        ("toolset", pa.string()),
        ("used_tool", pa.string()),
        # The ranker's top-1 and margin when the event was processed ("" and 0 if it could not rank).
        ("top1", pa.string()),
        ("margin", pa.float64()),
        # Why the event was flagged (`FlagReason`), the tier asked (`LabelTier`, "" if unflagged)
        # and its label ("" if unflagged, or if the teacher declined or failed).
        ("flag", pa.string()),
        ("tier", pa.string()),
        ("label", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)
EXEMPLARS_SCHEMA = pa.schema(
    [
        ("sequence", pa.int64()),
        ("toolset", pa.string()),
        ("tool", pa.string()),
        ("request", pa.string()),
        ("tier", pa.string()),
        ("embedding", pa.list_(pa.float32())),
        ("create_time_us", pa.int64()),
    ]
)
SCHEMAS = {
    TOOLS_TABLE: TOOLS_SCHEMA,
    EVENTS_TABLE: EVENTS_SCHEMA,
    LABELS_TABLE: LABELS_SCHEMA,
    EXEMPLARS_TABLE: EXEMPLARS_SCHEMA,
}
WRITES_PER_COMPACTION = 200
SEQUENCE_COUNTER = "tool-events"


@dataclass(frozen=True, kw_only=True)
class ToolRecord:
    toolset: str
    name: str
    description: str
    parameters_json: str
    version: int
    removed: bool
    embedding: np.ndarray


@dataclass(frozen=True, kw_only=True)
class ToolUseRecord:
    sequence: int
    toolset: str
    request: str
    used_tool: str
    offered_tools: tuple[str, ...] = ()
    success: bool | None = None


@dataclass(frozen=True, kw_only=True)
class LabelRecord:
    sequence: int
    toolset: str
    used_tool: str
    top1: str
    margin: float
    flag: str
    tier: str
    label: str


@dataclass(frozen=True, kw_only=True)
class ExemplarRecord:
    sequence: int
    toolset: str
    tool: str
    request: str
    tier: str
    embedding: np.ndarray
    # When it was written (0 before it is).
    create_time_us: int = 0


def _now_us() -> int:
    return int(time.time() * 1e6)


class ToolStore:
    """The tenant's four tables (their names carry the tenant, as the learning log's do)."""

    def __init__(
        self,
        db: lancedb.AsyncConnection,
        durability: Durability,
        leases: Leases,
        tables: dict[str, lancedb.AsyncTable],
        tenant: str,
    ):
        self._db = db
        self._durability = durability
        self._leases = leases
        self._counter = f"{SEQUENCE_COUNTER}/{tenant}"
        self._tables = tables
        self.compaction = BackgroundCompaction(leases, tables.values(), WRITES_PER_COMPACTION)
        self._events = GroupCommit(self._commit_events)

    @classmethod
    async def open(cls, db: Database, tenant: str = DEFAULT_TENANT) -> ToolStore:
        connection = db.connection
        tables = {}
        async with db.leases.held(SCHEMA):
            existing = set(await table_names(connection))
            for table, schema in SCHEMAS.items():
                name = tenant_table(table, tenant)
                if name not in existing:
                    await connection.create_table(name, schema=schema, exist_ok=True)
                tables[table] = await connection.open_table(name)
            await db.leases.add_counter(f"{SEQUENCE_COUNTER}/{tenant}")
        store = cls(connection, db.durability, db.leases, tables, tenant)
        await store.compaction.catch_up()
        return store

    async def tools(self) -> list[ToolRecord]:
        """Every tool of every toolset, removed ones included."""
        table = await self._tables[TOOLS_TABLE].query().to_arrow()

        def decode() -> list[ToolRecord]:
            return [
                ToolRecord(
                    toolset=r["toolset"],
                    name=r["name"],
                    description=r["description"],
                    parameters_json=r["parameters_json"],
                    version=r["version"],
                    removed=r["removed"],
                    embedding=np.asarray(r["embedding"], dtype=np.float32),
                )
                for r in table.to_pylist()
            ]

        return await asyncio.to_thread(decode)

    async def put_tools(self, records: Sequence[ToolRecord]) -> None:
        """Adds or replaces tools by (toolset, name) in one commit, durable when this returns."""
        now = _now_us()
        rows = [
            {**asdict(r), "embedding": np.asarray(r.embedding, np.float32).tolist(), "update_time_us": now}
            for r in records
        ]
        await (
            self._tables[TOOLS_TABLE]
            .merge_insert(["toolset", "name"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(pa.Table.from_pylist(rows, TOOLS_SCHEMA))
        )
        self.compaction.count()
        await self._durability.sync()

    async def delete_exemplars(self, toolset: str, tools: Sequence[str]) -> None:
        """Forget what the tools learned (one commit), durable when this returns."""
        names = ", ".join(sql_string(t) for t in tools)
        await self._tables[EXEMPLARS_TABLE].delete(f"toolset = {sql_string(toolset)} AND tool IN ({names})")
        await self._durability.sync()

    async def append_events(self, records: Sequence[ToolUseRecord]) -> None:
        """Durable when this returns; events submitted while a commit is in flight share the next."""
        await self._events.submit(records)
        await self._durability.sync()

    async def _commit_events(self, batches: list[Sequence[ToolUseRecord]]) -> None:
        records = [r for b in batches for r in b]
        if not records:
            return

        def encode() -> pa.Table:
            columns = {
                name: [getattr(r, name) for r in records]
                for name in ("sequence", "toolset", "request", "used_tool", "offered_tools", "success")
            }
            columns["create_time_us"] = [_now_us()] * len(records)
            return pa.Table.from_pydict(columns, EVENTS_SCHEMA)

        await self._tables[EVENTS_TABLE].add(await asyncio.to_thread(encode))
        self.compaction.count()

    async def last_sequence(self) -> int:
        """The highest event sequence recorded (-1 for none)."""
        table = await self._tables[EVENTS_TABLE].query().select(["sequence"]).to_arrow()
        return max(table.column("sequence").to_pylist(), default=-1)

    async def reserve_sequences(self, count: int, after: int) -> range:
        """`count` event sequences above `after` that no other process is given."""
        return await self._leases.reserve(self._counter, count, after)

    async def versions(self) -> tuple[int, int]:
        """The versions of the tools and exemplars tables: equal versions, equal tables."""
        return (
            await self._tables[TOOLS_TABLE].version(),
            await self._tables[EXEMPLARS_TABLE].version(),
        )

    async def exemplars_since(self, since_us: int) -> list[ExemplarRecord]:
        """The exemplars stamped at or after `since_us`, with their stamps."""
        table = await self._tables[EXEMPLARS_TABLE].query().where(f"create_time_us >= {since_us}").to_arrow()
        return [
            ExemplarRecord(
                sequence=r["sequence"],
                toolset=r["toolset"],
                tool=r["tool"],
                request=r["request"],
                tier=r["tier"],
                embedding=np.asarray(r["embedding"], np.float32),
                create_time_us=r["create_time_us"],
            )
            for r in table.to_pylist()
        ]

    async def unlabelled_events(self, limit: int, skip: Collection[int] = ()) -> list[ToolUseRecord]:
        """The first `limit` recorded events (in sequence order) that have no label yet, leaving
        out the sequences in `skip` (events the learner holds already)."""
        labelled = await self._tables[LABELS_TABLE].query().select(["sequence"]).to_arrow()
        recorded = await self._tables[EVENTS_TABLE].query().select(["sequence"]).to_arrow()
        waiting = np.setdiff1d(
            recorded.column("sequence").to_numpy(),
            np.concatenate([labelled.column("sequence").to_numpy(), np.fromiter(skip, np.int64)]),
        )[:limit]
        if len(waiting) == 0:
            return []
        numbers = ", ".join(str(int(s)) for s in waiting)
        table = (
            await self._tables[EVENTS_TABLE].query().where(f"sequence IN ({numbers})").to_arrow()
        ).sort_by("sequence")
        return [
            ToolUseRecord(
                sequence=r["sequence"],
                toolset=r["toolset"],
                request=r["request"],
                used_tool=r["used_tool"],
                offered_tools=tuple(r["offered_tools"] or ()),
                success=r["success"],
            )
            for r in table.to_pylist()
        ]

    async def append_learned(
        self, labels: Sequence[LabelRecord], exemplars: Sequence[ExemplarRecord]
    ) -> list[ExemplarRecord]:
        """A processed batch's labels and exemplars (exemplars first: a label marks its event as
        processed, so a crash between the two commits processes the event again); the exemplars
        as written, stamped. Not flushed to disk: they are derived from the recorded events, and
        a flush here would hold up the acknowledgements of Observe, which share the flush (an
        event whose label a power loss takes is processed again)."""
        now = _now_us()
        stamped = [replace(e, create_time_us=now) for e in exemplars]
        if stamped:
            rows = [{**asdict(e), "embedding": np.asarray(e.embedding, np.float32).tolist()} for e in stamped]
            await self._tables[EXEMPLARS_TABLE].add(pa.Table.from_pylist(rows, EXEMPLARS_SCHEMA))
        if labels:
            rows = [{**asdict(label), "create_time_us": now} for label in labels]
            await self._tables[LABELS_TABLE].add(pa.Table.from_pylist(rows, LABELS_SCHEMA))
        self.compaction.count()
        return stamped

    async def latest_exemplars(
        self, per_tool: int
    ) -> dict[tuple[str, str, bool], list[tuple[int, int, np.ndarray]]]:
        """Per (toolset, tool, trusted: whether the tier is the agent's trusted use), its latest
        `per_tool` exemplars by (stamp, sequence) as (stamp, sequence, embedding), oldest first,
        each event's once; read in batches, holding at most twice `per_tool` per key at a time."""
        kept: dict[tuple[str, str, bool], dict[int, tuple[int, int, np.ndarray]]] = {}

        def latest(
            exemplars: dict[int, tuple[int, int, np.ndarray]],
        ) -> dict[int, tuple[int, int, np.ndarray]]:
            newest = sorted(exemplars.values(), key=lambda e: e[:2])[-per_tool:]
            return {e[1]: e for e in newest}

        query = (
            self._tables[EXEMPLARS_TABLE]
            .query()
            .select(["sequence", "toolset", "tool", "tier", "embedding", "create_time_us"])
        )
        async for batch in await query.to_batches():
            for row in batch.to_pylist():
                key = (row["toolset"], row["tool"], row["tier"] == LabelTier.TRUSTED)
                exemplars = kept.setdefault(key, {})
                exemplars[row["sequence"]] = (
                    row["create_time_us"],
                    row["sequence"],
                    np.asarray(row["embedding"], np.float32),
                )
                if len(exemplars) > 2 * per_tool:
                    kept[key] = latest(exemplars)
        return {
            key: sorted(latest(exemplars).values(), key=lambda e: e[:2]) for key, exemplars in kept.items()
        }

    async def labels(self, toolset: str) -> pa.Table:
        """A toolset's labels (sequence, flag, tier, label, top1, used_tool, margin), by sequence,
        each event's once."""
        table = await (
            self._tables[LABELS_TABLE]
            .query()
            .where(f"toolset = {sql_string(toolset)}")
            .select(["sequence", "flag", "tier", "label", "top1", "used_tool", "margin"])
            .to_arrow()
        )
        table = table.sort_by("sequence")
        first = np.unique(table.column("sequence").to_numpy(), return_index=True)[1]
        return table.take(first)

    async def exemplar_counts(self) -> dict[tuple[str, str], int]:
        """Exemplars saved per (toolset, tool), each event's once."""
        table = await self._tables[EXEMPLARS_TABLE].query().select(["sequence", "toolset", "tool"]).to_arrow()
        columns = (table.column(c).to_pylist() for c in ("sequence", "toolset", "tool"))
        return dict(Counter((toolset, tool) for _, toolset, tool in set(zip(*columns, strict=True))))

    async def event_count(self, toolset: str) -> int:
        return await self._tables[EVENTS_TABLE].count_rows(f"toolset = {sql_string(toolset)}")
