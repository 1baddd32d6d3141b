"""The learning log: what each Retrieve ran and found, the outcomes observed for it, the inquiry
states recorded through Observe, and the calibrations and selector deployments fitted from them.

Every table is append-only, its structured values in Arrow types of their own (a log written
before that is upgraded when it opens: `store.upgrade`), and compacted every
WRITES_PER_COMPACTION appends. An observation is committed before
Observe acknowledges it, and the strategy selector is rebuilt by replaying the observations in
log order (by stamp, then sequence), so an acknowledged observation survives a crash and a restart
reproduces the selector exactly; other orchestrators on the store read what is stamped since they
last looked (`observations(since_us)`, `versions`). Rows are decoded on a worker thread (a log can
hold many thousands); lookups by id go in chunks of ID_CHUNK ids.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import BTree
from numpy.typing import ArrayLike

from sounding.core.expansion_gate import ExpansionStep
from sounding.store.compaction import BackgroundCompaction
from sounding.store.connection import table_names
from sounding.store.database import Database
from sounding.store.durability import Durability
from sounding.store.learning_tables import (
    CALIBRATIONS_SCHEMA,
    CALIBRATIONS_TABLE,
    DEPLOYMENTS_SCHEMA,
    DEPLOYMENTS_TABLE,
    INQUIRY_STATES_SCHEMA,
    INQUIRY_STATES_TABLE,
    OBSERVATIONS_SCHEMA,
    OBSERVATIONS_TABLE,
    RETRIEVALS_SCHEMA,
    RETRIEVALS_TABLE,
)
from sounding.store.lease import SCHEMA
from sounding.store.schema import sql_string
from sounding.store.tenancy import DEFAULT_TENANT, tenant_table
from sounding.store.upgrade import upgrade

WRITES_PER_COMPACTION = 200
ID_CHUNK = 1000


@dataclass(frozen=True)
class Deployment:
    version: int
    window_start_us: int
    pruned_arms: list[str]
    report: dict


@dataclass(frozen=True, kw_only=True)
class RetrievalRecord:
    retrieval_id: str
    collection: str
    query_index: int
    mode: str
    context: ArrayLike
    embedding: ArrayLike
    arms: dict[str, dict]
    stated_miss_rate: float | None = None
    stated_confidence: float | None = None
    expansions: tuple[ExpansionStep, ...] = ()
    # When it was logged (0 until then).
    create_time_us: int = 0
    # Each arm's scores of its `document_ids`, in the same order (empty in rows logged before).
    arm_scores: dict[str, list[float]] = field(default_factory=dict)
    # How the arms' rankings were fused (`core.fusion`'s method names; rows logged before it
    # was kept were fused by RRF).
    fusion: str = "rrf"

    def row(self) -> dict:
        return {
            "retrieval_id": self.retrieval_id,
            "collection": self.collection,
            "query_index": self.query_index,
            "mode": self.mode,
            "context": np.asarray(self.context, dtype=float).tolist(),
            "embedding": np.asarray(self.embedding, dtype=float).tolist(),
            "arms": [{"arm": arm, **ran} for arm, ran in self.arms.items()],
            "create_time_us": self.create_time_us or int(time.time() * 1e6),
            "stated_miss_rate": self.stated_miss_rate,
            "stated_confidence": self.stated_confidence,
            "expansions": [
                {
                    "strategy": step.strategy,
                    "added_document_ids": list(step.added_document_ids),
                    "latency_ms": step.latency_ms,
                }
                for step in self.expansions
            ],
            "arm_scores": [{"arm": arm, "scores": list(scores)} for arm, scores in self.arm_scores.items()],
            "fusion": self.fusion,
        }

    @classmethod
    def from_row(cls, row: dict) -> RetrievalRecord:
        return cls(
            retrieval_id=row["retrieval_id"],
            collection=row["collection"],
            query_index=row["query_index"],
            mode=row["mode"],
            context=row["context"],
            embedding=row["embedding"],
            arms=arms_of(row["arms"]),
            stated_miss_rate=row.get("stated_miss_rate"),
            stated_confidence=row.get("stated_confidence"),
            expansions=tuple(
                ExpansionStep(step["strategy"], tuple(step["added_document_ids"]), step["latency_ms"])
                for step in row.get("expansions") or ()
            ),
            create_time_us=row["create_time_us"],
            arm_scores={ran["arm"]: ran["scores"] for ran in row.get("arm_scores") or ()},
            fusion=row.get("fusion") or "rrf",
        )


def arms_of(column_value: list[dict]) -> dict[str, dict]:
    """{arm: {document_ids, latency_ms, cost_ms, exploration}} from an `arms` column value."""
    return {ran["arm"]: {k: v for k, v in ran.items() if k != "arm"} for ran in column_value}


@dataclass(frozen=True, kw_only=True)
class InquiryState:
    session_id: str
    task: str
    regime: str
    bucket: str
    turn: int
    scores: dict[str, float]
    error: bool
    nonconformity: float
    stated_confidence: float | None = None


@dataclass(frozen=True)
class ObservationRecord:
    sequence: int
    retrieval_id: str
    outcome: dict
    rewards: dict[str, float]
    create_time_us: int = 0
    plan_rewards: dict[str, float] | None = None


class LearningLog:
    """Appends that are acknowledged to a client (observations, inquiry states, calibrations,
    deployments) return once `durability.sync()` says they are on disk; retrievals are not
    acknowledged to anyone, and the sync of the observation about one covers it."""

    _retrievals: lancedb.AsyncTable
    _observations: lancedb.AsyncTable
    _calibrations: lancedb.AsyncTable
    _deployments: lancedb.AsyncTable
    _inquiry_states: lancedb.AsyncTable
    compaction: BackgroundCompaction

    def __init__(self, db: lancedb.AsyncConnection, durability: Durability):
        self._db = db
        self._durability = durability

    @classmethod
    async def open(cls, db: Database, tenant: str = DEFAULT_TENANT) -> LearningLog:
        """The tenant's log (its own tables: nothing of one tenant's log is read for another)."""
        log = cls(db.connection, db.durability)
        async with db.leases.held(SCHEMA):
            names = set(await table_names(db.connection))
            for name, table_schema in (
                (tenant_table(RETRIEVALS_TABLE, tenant), RETRIEVALS_SCHEMA),
                (tenant_table(OBSERVATIONS_TABLE, tenant), OBSERVATIONS_SCHEMA),
                (tenant_table(DEPLOYMENTS_TABLE, tenant), DEPLOYMENTS_SCHEMA),
                (tenant_table(CALIBRATIONS_TABLE, tenant), CALIBRATIONS_SCHEMA),
                (tenant_table(INQUIRY_STATES_TABLE, tenant), INQUIRY_STATES_SCHEMA),
            ):
                if name not in names:
                    await log._db.create_table(name, schema=table_schema, exist_ok=True)
                else:
                    await upgrade(log._db, name, table_schema)
            for name, key in (
                (tenant_table(RETRIEVALS_TABLE, tenant), "retrieval_id"),
                (tenant_table(OBSERVATIONS_TABLE, tenant), "retrieval_id"),
                # Each orchestrator reads the observations stamped since it last looked.
                (tenant_table(OBSERVATIONS_TABLE, tenant), "create_time_us"),
                (tenant_table(INQUIRY_STATES_TABLE, tenant), "session_id"),
            ):
                table = await log._db.open_table(name)
                if not any(index.columns == [key] for index in await table.list_indices()):
                    await table.create_index(key, config=BTree(), replace=True)
        log._retrievals = await log._db.open_table(tenant_table(RETRIEVALS_TABLE, tenant))
        log._calibrations = await log._db.open_table(tenant_table(CALIBRATIONS_TABLE, tenant))
        log._observations = await log._db.open_table(tenant_table(OBSERVATIONS_TABLE, tenant))
        log._deployments = await log._db.open_table(tenant_table(DEPLOYMENTS_TABLE, tenant))
        log._inquiry_states = await log._db.open_table(tenant_table(INQUIRY_STATES_TABLE, tenant))
        log.compaction = BackgroundCompaction(
            db.leases,
            (log._retrievals, log._observations, log._inquiry_states, log._calibrations, log._deployments),
            WRITES_PER_COMPACTION,
        )
        await log.compaction.catch_up()
        return log

    async def append_retrievals(self, records: Iterable[RetrievalRecord]) -> None:
        records = list(records)
        if records:
            table = await asyncio.to_thread(
                lambda: pa.Table.from_pylist([r.row() for r in records], RETRIEVALS_SCHEMA)
            )
            await self._retrievals.add(table)
            self.compaction.count()

    async def _by_ids(self, table: lancedb.AsyncTable, ids: Iterable[str], columns=None) -> list[pa.Table]:
        """The rows of `table` whose retrieval_id is one of `ids`, as Arrow tables."""
        ids = sorted(set(ids))
        parts = []
        for start in range(0, len(ids), ID_CHUNK):
            query = table.query().where(
                f"retrieval_id IN ({', '.join(sql_string(i) for i in ids[start : start + ID_CHUNK])})"
            )
            parts.append(await (query.select(columns) if columns else query).to_arrow())
        return parts

    async def retrievals(self, retrieval_ids: Iterable[str]) -> dict[str, RetrievalRecord]:
        parts = await self._by_ids(self._retrievals, retrieval_ids)

        def decode() -> dict[str, RetrievalRecord]:
            return {
                row["retrieval_id"]: RetrievalRecord.from_row(row)
                for part in parts
                for row in part.to_pylist()
            }

        return await asyncio.to_thread(decode) if parts else {}

    async def observed_retrievals(self, retrieval_ids: Iterable[str]) -> set[str]:
        """The retrievals among these that have an observation."""
        parts = await self._by_ids(self._observations, retrieval_ids, ["retrieval_id"])
        return {i for part in parts for i in part.column("retrieval_id").to_pylist()}

    async def retrieval_summaries(self) -> list[tuple[str, dict[str, dict]]]:
        """(mode, arms that ran) of every logged retrieval, without contexts or embeddings."""
        table = await self._retrievals.query().select(["mode", "arms"]).to_arrow()

        def decode() -> list[tuple[str, dict[str, dict]]]:
            return [
                (mode, arms_of(arms))
                for mode, arms in zip(
                    table.column("mode").to_pylist(), table.column("arms").to_pylist(), strict=True
                )
            ]

        return await asyncio.to_thread(decode)

    async def next_query_index(self) -> int:
        table = await self._retrievals.query().select(["query_index"]).to_arrow()
        values = table.column("query_index").to_pylist()
        return max(values, default=-1) + 1

    async def append_observations(self, records: Sequence[ObservationRecord]) -> int:
        """One commit for the batch: all of it is durable when this returns, or none of it.
        Returns the time the batch's rows were stamped with (`create_time_us`)."""
        now = int(time.time() * 1e6)
        if not records:
            return now

        def encode() -> pa.Table:  # off the event loop: a stream can carry thousands
            rows = [
                {
                    "sequence": r.sequence,
                    "retrieval_id": r.retrieval_id,
                    "outcome": r.outcome,
                    "rewards": r.rewards,
                    "create_time_us": now,
                    "plan_rewards": r.plan_rewards,
                }
                for r in records
            ]
            return pa.Table.from_pylist(rows, OBSERVATIONS_SCHEMA)

        await self._observations.add(await asyncio.to_thread(encode))
        self.compaction.count()
        await self._durability.sync()
        return now

    async def observations(self, since_us: int | None = None) -> list[ObservationRecord]:
        """Every observation (those stamped at `since_us` or later, if given) in log order: by
        stamp, then sequence. One per retrieval, the first: two orchestrators acknowledging
        outcomes of one retrieval at the same moment both append theirs."""
        query = self._observations.query()
        if since_us is not None:
            query = query.where(f"create_time_us >= {since_us}")
        table = await query.to_arrow()

        def decode() -> list[ObservationRecord]:
            ordered = table.sort_by([("create_time_us", "ascending"), ("sequence", "ascending")])
            first: dict[str, ObservationRecord] = {}
            for r in ordered.to_pylist():
                first.setdefault(
                    r["retrieval_id"],
                    ObservationRecord(
                        r["sequence"],
                        r["retrieval_id"],
                        r["outcome"],
                        dict(r["rewards"]),
                        r["create_time_us"],
                        None if r["plan_rewards"] is None else dict(r["plan_rewards"]),
                    ),
                )
            return list(first.values())

        return await asyncio.to_thread(decode)

    async def versions(self) -> tuple[int, int, int]:
        """The versions of the observation, deployment and calibration tables: any process's
        append to one moves it."""
        return (
            await self._observations.version(),
            await self._deployments.version(),
            await self._calibrations.version(),
        )

    async def append_deployment(self, deployment: Deployment) -> None:
        row = {
            "version": deployment.version,
            "window_start_us": deployment.window_start_us,
            "pruned_arms": deployment.pruned_arms,
            "report_json": json.dumps(deployment.report),
            "create_time_us": int(time.time() * 1e6),
        }
        await self._deployments.add(pa.Table.from_pylist([row], DEPLOYMENTS_SCHEMA))
        await self._durability.sync()

    async def latest_deployment(self) -> Deployment | None:
        rows = (await self._deployments.query().to_arrow()).to_pylist()
        if not rows:
            return None
        row = max(rows, key=lambda r: r["version"])
        return Deployment(
            row["version"],
            row["window_start_us"],
            row["pruned_arms"],
            json.loads(row["report_json"]),
        )

    async def append_calibration(self, target: str, version: int, params: dict, report: dict) -> None:
        row = {
            "target": target,
            "version": version,
            "params_json": json.dumps(params),
            "report_json": json.dumps(report),
            "create_time_us": int(time.time() * 1e6),
        }
        await self._calibrations.add(pa.Table.from_pylist([row], CALIBRATIONS_SCHEMA))
        await self._durability.sync()

    async def latest_calibration(self, target: str) -> tuple[int, dict] | None:
        """(version, parameters) of the target's latest calibration, or None."""
        rows = (
            await self._calibrations.query().where(f"target = {sql_string(target)}").to_arrow()
        ).to_pylist()
        if not rows:
            return None
        row = max(rows, key=lambda r: r["version"])
        return row["version"], json.loads(row["params_json"])

    async def calibrations_with_prefix(self, prefix: str) -> dict[str, tuple[int, dict]]:
        """{target: (version, parameters)} of the latest calibration of every target that starts
        with `prefix`."""
        rows = (await self._calibrations.query().to_arrow()).to_pylist()  # a small table
        latest: dict[str, tuple[int, dict]] = {}
        for row in rows:
            if row["target"].startswith(prefix) and row["version"] > latest.get(row["target"], (0, {}))[0]:
                latest[row["target"]] = (row["version"], json.loads(row["params_json"]))
        return latest

    async def append_inquiry_states(self, states: Sequence[InquiryState]) -> None:
        """One commit for the batch: all of it is durable when this returns, or none of it."""
        if not states:
            return
        now = int(time.time() * 1e6)
        rows = [
            {
                "session_id": s.session_id,
                "task": s.task,
                "regime": s.regime,
                "bucket": s.bucket,
                "turn": s.turn,
                "scores": s.scores,
                "error": s.error,
                "nonconformity": s.nonconformity,
                "stated_confidence": s.stated_confidence,
                "create_time_us": now,
            }
            for s in states
        ]
        await self._inquiry_states.add(pa.Table.from_pylist(rows, INQUIRY_STATES_SCHEMA))
        self.compaction.count()
        await self._durability.sync()

    async def inquiry_states(self, task: str, regime: str, bucket: str = "") -> list[InquiryState]:
        """Recorded states of the task and regime (and homogeneity bucket, if given)."""
        where = f"task = {sql_string(task)} AND regime = {sql_string(regime)}"
        if bucket:
            where += f" AND bucket = {sql_string(bucket)}"
        table = await self._inquiry_states.query().where(where).to_arrow()

        def decode() -> list[InquiryState]:
            return [
                InquiryState(
                    session_id=r["session_id"],
                    task=r["task"],
                    regime=r["regime"],
                    bucket=r["bucket"],
                    turn=r["turn"],
                    scores=dict(r["scores"]),
                    error=r["error"],
                    nonconformity=r["nonconformity"],
                    stated_confidence=r["stated_confidence"],
                )
                for r in table.to_pylist()
            ]

        return await asyncio.to_thread(decode)

    async def observed_sessions(self, session_ids: Sequence[str]) -> set[str]:
        """The sessions among these whose states are already recorded."""
        ids = sorted({i for i in session_ids if i})
        if not ids:
            return set()
        rows = (
            await self._inquiry_states.query()
            .where(f"session_id IN ({', '.join(sql_string(i) for i in ids)})")
            .select(["session_id"])
            .to_arrow()
        )
        return set(rows.column("session_id").to_pylist())
