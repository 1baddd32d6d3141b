"""The corpus inquiry log: every query a corpus inquiry executed (what was predicted of it and
what it found) and the verdicts observed for finished sessions. A tenant's learner of corpus
inquiry (`learning.corpus_inquiry`) is rebuilt from it: the outcome model by replaying the
queries in order, the sensor table from the queries of sessions whose verdict was observed.

Both tables are append-only. A query row is written when its step completes (a step repeated
after a crash writes it again: readers take a session's first row of each turn); a verdict row is
acknowledged to the client, so it is synced.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import lancedb
import pyarrow as pa
from lancedb.index import BTree

from sounding.store.compaction import BackgroundCompaction
from sounding.store.connection import table_names
from sounding.store.database import Database
from sounding.store.durability import Durability
from sounding.store.lease import SCHEMA, Leases
from sounding.store.schema import sql_string
from sounding.store.tenancy import DEFAULT_TENANT, tenant_table
from sounding.store.upgrade import upgrade

QUERIES_TABLE = "corpus_inquiry_queries"
# A query or verdict row is one small commit: compact both tables every so many.
WRITES_PER_COMPACTION = 200
VERDICTS_TABLE = "corpus_inquiry_verdicts"

QUERIES_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("collection", pa.string()),
        ("turn", pa.int64()),
        ("strategy", pa.string()),
        # The outcome model's inputs for this query, as it saw them when the query was chosen, and
        # which inputs those are (a row of another feature set is not replayed into the model).
        ("features", pa.list_(pa.float64())),
        ("feature_set", pa.string()),
        ("predicted_reach", pa.float64()),
        ("reached", pa.bool_()),
        ("predicted_gain", pa.float64()),
        ("actual_gain", pa.float64()),
        ("predicted_cost_ms", pa.float64()),
        ("cost_ms", pa.float64()),
        # The soft outcome (entailing, contradicting, nothing) of the new text; empty if none.
        ("outcome", pa.list_(pa.float64())),
        # The strengths of the entailing and contradicting evidence found before this query.
        ("found_before", pa.list_(pa.float64())),
        ("search_ms", pa.float64()),
        ("nli_ms", pa.float64()),
        ("nli_pairs", pa.int64()),
        ("create_time_us", pa.int64()),
    ]
)

VERDICTS_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("collection", pa.string()),
        ("verdict", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)


@dataclass(frozen=True, kw_only=True)
class ExecutedQuery:
    session_id: str
    collection: str
    turn: int
    strategy: str
    features: list[float]
    feature_set: str
    predicted_reach: float
    reached: bool
    predicted_gain: float
    actual_gain: float
    predicted_cost_ms: float
    cost_ms: float
    outcome: list[float]
    found_before: list[float]
    search_ms: float
    nli_ms: float
    nli_pairs: int


@dataclass(frozen=True)
class Verdict:
    session_id: str
    collection: str
    verdict: str


class CorpusInquiryLog:
    def __init__(
        self,
        queries: lancedb.AsyncTable,
        verdicts: lancedb.AsyncTable,
        durability: Durability,
        leases: Leases,
    ):
        self._queries = queries
        self._verdicts = verdicts
        self._durability = durability
        self.compaction = BackgroundCompaction(leases, (queries, verdicts), WRITES_PER_COMPACTION)

    @classmethod
    async def open(cls, db: Database, tenant: str = DEFAULT_TENANT) -> CorpusInquiryLog:
        connection = db.connection
        tables: list[lancedb.AsyncTable] = []
        async with db.leases.held(SCHEMA):
            names = set(await table_names(connection))
            for table, table_schema in ((QUERIES_TABLE, QUERIES_SCHEMA), (VERDICTS_TABLE, VERDICTS_SCHEMA)):
                name = tenant_table(table, tenant)
                if name not in names:
                    await connection.create_table(name, schema=table_schema, exist_ok=True)
                else:
                    await upgrade(connection, name, table_schema)
                table = await connection.open_table(name)
                # Observe finds a session's rows through this index, not by a scan.
                if not any(index.columns == ["session_id"] for index in await table.list_indices()):
                    await table.create_index("session_id", config=BTree(), replace=True)
                tables.append(table)
        queries, verdicts = tables
        log = cls(queries, verdicts, db.durability, db.leases)
        await log.compaction.catch_up()
        return log

    async def append_query(self, query: ExecutedQuery) -> None:
        row = {**asdict(query), "create_time_us": int(time.time() * 1e6)}
        await self._queries.add(pa.Table.from_pylist([row], QUERIES_SCHEMA))
        self.compaction.count()

    async def versions(self) -> tuple[int, int]:
        """The versions of the two tables: equal versions, equal tables."""
        return await self._queries.version(), await self._verdicts.version()

    async def queries(self, session_ids: Sequence[str] | None = None) -> list[ExecutedQuery]:
        """Every recorded query in the order recorded (only the named sessions', if given)."""
        query = self._queries.query()
        if session_ids is not None:
            if not session_ids:
                return []
            query = query.where(f"session_id IN ({', '.join(sql_string(s) for s in session_ids)})")
        return [q for q, _ in await self._stamped_queries(query)]

    async def queries_since(self, since_us: int) -> list[tuple[ExecutedQuery, int]]:
        """The queries stamped at or after `since_us`, with their stamps, in the order recorded."""
        return await self._stamped_queries(self._queries.query().where(f"create_time_us >= {since_us}"))

    async def _stamped_queries(self, query) -> list[tuple[ExecutedQuery, int]]:
        table = await query.to_arrow()

        def decode() -> list[tuple[ExecutedQuery, int]]:
            rows = sorted(table.to_pylist(), key=lambda r: r["create_time_us"])
            return [
                (ExecutedQuery(**{k: v for k, v in r.items() if k != "create_time_us"}), r["create_time_us"])
                for r in rows
            ]

        return await asyncio.to_thread(decode)

    async def append_verdict(self, verdict: Verdict) -> int:
        """Durable when this returns; its stamp."""
        stamp_us = int(time.time() * 1e6)
        await self._verdicts.add(
            pa.Table.from_pylist([{**asdict(verdict), "create_time_us": stamp_us}], VERDICTS_SCHEMA)
        )
        self.compaction.count()
        await self._durability.sync()
        return stamp_us

    async def verdicts(self, since_us: int = 0) -> list[tuple[Verdict, int]]:
        """The verdicts stamped at or after `since_us`, with their stamps."""
        rows = (await self._verdicts.query().where(f"create_time_us >= {since_us}").to_arrow()).to_pylist()
        return [(Verdict(r["session_id"], r["collection"], r["verdict"]), r["create_time_us"]) for r in rows]

    async def observed(self, session_id: str) -> bool:
        rows = await self._verdicts.query().where(f"session_id = {sql_string(session_id)}").to_arrow()
        return rows.num_rows > 0
