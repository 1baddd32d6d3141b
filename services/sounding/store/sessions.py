"""Inquiry sessions in the store: a session's fixed setup (one row, written at its start) and
its state after the latest step (one row, replaced at every save), both found by session id, and
which process's stream holds it (`store.session_holds`).
Sessions idle past the retention are deleted (`expire_sessions`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection

import lancedb
import pyarrow as pa
from lancedb.index import BTree

from sounding.store import schema
from sounding.store.compaction import compact, compact_if_fragmented
from sounding.store.durability import Durability
from sounding.store.group_commit import GroupCommit
from sounding.store.lease import Leases
from sounding.store.session_holds import SessionHolds
from sounding.store.tenancy import ResourceRef

# Session saves are one small commit each; compact the table (and refresh its index) every so many.
SESSION_WRITES_PER_COMPACTION = 200
# A filter names at most this many session ids.
IDS_PER_FILTER = 500


class SessionTables:
    """The session part of the store (`Store` inherits it): commits are acknowledged only once
    `durability.sync()` says they are on disk."""

    _db: lancedb.AsyncConnection
    _durability: Durability
    _leases: Leases

    async def _ensure_sessions(self, names: Collection[str]) -> None:
        """Open the session tables (`names`: the tables there are), creating them if missing."""
        for name, table_schema in (
            (schema.SESSIONS_TABLE, schema.SESSIONS_SCHEMA),
            (schema.SESSION_SETUPS_TABLE, schema.SESSION_SETUPS_SCHEMA),
        ):
            if name not in names:
                table = await self._db.create_table(name, schema=table_schema, exist_ok=True)
                # Saves and loads find a session by id through this index, not by a scan.
                await table.create_index("session_id", config=BTree(), replace=True)
        self._sessions = await self._db.open_table(schema.SESSIONS_TABLE)
        self._session_setups = await self._db.open_table(schema.SESSION_SETUPS_TABLE)
        self.session_holds = await SessionHolds.open(self._db, set(names), self._sessions, self._leases)
        await compact_if_fragmented(
            self._leases, (self._sessions, self._session_setups), SESSION_WRITES_PER_COMPACTION
        )
        self._session_writes = 0
        # Saves replace rows (an update) and compaction rewrites them: LanceDB refuses such
        # commits when they overlap, so the session tables take one write at a time.
        self._session_lock = asyncio.Lock()
        self._session_saves = GroupCommit(self._commit_session_rows)

    async def create_session(self, session: ResourceRef, domain: str, setup_json: str) -> None:
        """Record a new session's fixed setup (once, before its first step is saved)."""
        row = {
            "session_id": session.key,
            "domain": domain,
            "setup_json": setup_json,
            "create_time_us": int(time.time() * 1e6),
        }
        async with self._session_lock:
            await self._session_setups.add(pa.Table.from_pylist([row], schema.SESSION_SETUPS_SCHEMA))
            await self._count_session_write()
        await self._durability.sync()

    async def save_session(self, session: ResourceRef, step: int, domain: str, state_json: str) -> None:
        """Store a session's state after `step`, replacing the one before (a session has one row
        however often it is saved or resumed). Saves of several sessions arriving together share
        one commit."""
        row = {
            "session_id": session.key,
            "step": step,
            "domain": domain,
            "state_json": state_json,
            "update_time_us": int(time.time() * 1e6),
        }
        await self._session_saves.submit(row)
        await self._durability.sync()

    async def _commit_session_rows(self, rows: list[dict]) -> None:
        latest = {row["session_id"]: row for row in sorted(rows, key=lambda r: r["step"])}
        async with self._session_lock:
            await (
                self._sessions.merge_insert("session_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(pa.Table.from_pylist(list(latest.values()), schema.SESSIONS_SCHEMA))
            )
            await self._count_session_write()

    async def _count_session_write(self) -> None:
        """Every small commit adds a table version; compact both session tables now and then
        (a failed compaction is logged and tried again later: the write itself is done)."""
        self._session_writes += 1
        if self._session_writes % SESSION_WRITES_PER_COMPACTION == 0:
            await compact(self._leases, self._sessions, self._session_setups)

    async def load_session(self, session: ResourceRef) -> tuple[str, str] | None:
        """(setup, state of the latest step) of a session, or None for an unknown session (data
        directories written before saves replaced their row may hold several rows: the latest
        step wins)."""
        where = f"session_id = {schema.sql_string(session.key)}"
        # Under the write lock, so that a load sees a session's expiry whole or not at all.
        async with self._session_lock:
            setups = (
                await self._session_setups.query().where(where).select(["setup_json"]).to_arrow()
            ).to_pylist()
            rows = (
                await self._sessions.query().where(where).select(["step", "state_json"]).to_arrow()
            ).to_pylist()
        if not setups or not rows:
            return None
        return setups[0]["setup_json"], max(rows, key=lambda r: r["step"])["state_json"]

    async def expire_sessions(self, idle_before_us: int, held: Callable[[ResourceRef], bool]) -> int:
        """Delete every session whose last step was saved before `idle_before_us` (its state
        and setup: a load then finds nothing), and every setup from before then left without a
        state (a start that crashed before its first save). A session stays if `held(id)` when
        its batch is deleted, or if it was saved again meanwhile. Deletes take the session
        tables IDS_PER_FILTER sessions at a time, under the write lock that loads take too, so
        saves and loads wait for one batch at most. Returns how many sessions went."""
        cutoff = int(idle_before_us)
        idle = await _session_ids(self._sessions, f"update_time_us < {cutoff}")
        stateless = set(await _session_ids(self._session_setups, f"create_time_us < {cutoff}"))
        stateless -= set(await _session_ids(self._sessions, "true", stateless))
        gone = 0
        for batch in _batches(sorted(set(idle) | stateless)):
            async with self._session_lock:
                ids = [i for i in batch if not held(ResourceRef.from_key(i))]
                if not ids:
                    continue
                # Superseded rows of older data directories go too; a row saved since stays.
                await self._sessions.delete(f"{_listed(ids)} AND update_time_us < {cutoff}")
                saved = set(await _session_ids(self._sessions, "true", ids))
                expired = [i for i in ids if i not in saved]
                if expired:
                    await self._session_setups.delete(f"{_listed(expired)} AND create_time_us < {cutoff}")
                    await self.session_holds.forget(expired)
                    await self._count_session_write()
                await self._count_session_write()
            gone += len(expired)
        if gone:
            await self._durability.sync()
        return gone


def _batches(ids: list[str]) -> list[list[str]]:
    return [ids[i : i + IDS_PER_FILTER] for i in range(0, len(ids), IDS_PER_FILTER)]


def _listed(ids: list[str]) -> str:
    return f"session_id IN ({', '.join(map(schema.sql_string, ids))})"


async def _session_ids(
    table: lancedb.AsyncTable, where: str, among: Collection[str] | None = None
) -> list[str]:
    """The session ids of `table`'s rows matching `where` (and, if given, in `among`)."""
    if among is None:
        found = await table.query().where(where).select(["session_id"]).to_arrow()
        return found.column("session_id").to_pylist()
    ids: list[str] = []
    for batch in _batches(sorted(among)):
        ids += await _session_ids(table, f"({where}) AND {_listed(batch)}")
    return ids
