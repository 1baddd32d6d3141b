"""Which process's stream drives each inquiry session, across every orchestrator sharing the
store (README, "Scaling out").

A hold is a row of `inquiry_session_holds`: the session, its holder (a process:
`Leases.holder`), a fencing token and an expiry. A stream takes the hold of its session by a
conditional update ("expired: mine, token + 1") that Lance commits atomically, so of two streams
resuming a session on two orchestrators at once exactly one gets it; the other is refused
SESSION_BUSY. A process renews all the holds it has in one update every third of the TTL, and
releases a hold when its stream ends; a process that dies leaves its holds to expire, after
which any orchestrator resumes the session (at once, if it is the dead one's successor on the
same host and address). Before every save a stream checks that its token still holds the session
(a process stalled for longer than the TTL may have lost it), so no step is saved twice.
"""

from __future__ import annotations

import time

import lancedb
import pyarrow as pa
from lancedb.index import BTree

from sounding.store.lease import SCHEMA, Leases, take_if_free
from sounding.store.schema import sql_string
from sounding.store.tenancy import ResourceRef

SESSION_HOLDS_TABLE = "inquiry_session_holds"
SESSION_HOLDS_SCHEMA = pa.schema(
    [
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("holder", pa.string(), nullable=False),
        pa.field("token", pa.int64(), nullable=False),
        pa.field("expires_us", pa.int64(), nullable=False),
    ]
)


def _now_us() -> int:
    return int(time.time() * 1e6)


class SessionHolds:
    """The holds of `holder` (this process) on a store's sessions."""

    def __init__(self, table: lancedb.AsyncTable, sessions: lancedb.AsyncTable, leases: Leases):
        self._table = table
        self._sessions = sessions
        self._leases = leases
        self.holder = leases.holder
        self.ttl_s = leases.ttl_s
        self._held = 0

    @classmethod
    async def open(
        cls, db: lancedb.AsyncConnection, names: set[str], sessions: lancedb.AsyncTable, leases: Leases
    ) -> SessionHolds:
        """The holds of the sessions in `sessions`, their table created and indexed if missing
        (`names`: the tables there are; by a caller holding the store's schema lease)."""
        if SESSION_HOLDS_TABLE not in names:
            table = await db.create_table(SESSION_HOLDS_TABLE, schema=SESSION_HOLDS_SCHEMA, exist_ok=True)
            await table.create_index("session_id", config=BTree(), replace=True)
        return cls(await db.open_table(SESSION_HOLDS_TABLE), sessions, leases)

    def _where(self, session: ResourceRef) -> str:
        return f"session_id = {sql_string(session.key)}"

    async def take(self, session: ResourceRef, new: bool = False) -> int | None:
        """This process's token for the session, if no live stream of any process holds it
        (a `new` session, of an id never used, is this process's at once); LookupError for a
        session there is not."""
        now = _now_us()
        if new:
            row = {"session_id": session.key, "holder": self.holder, "token": 1, "expires_us": now}
            row["expires_us"] = now + int(self.ttl_s * 1e6)
            await self._table.add(pa.Table.from_pylist([row], SESSION_HOLDS_SCHEMA))
            self._held += 1
            return 1
        if not await self._has_row(self._table, session):
            await self._add_free_row(session)
        token = await take_if_free(self._table, self._where(session), self.holder, self.ttl_s)
        if token is not None:
            self._held += 1
        return token

    async def _has_row(self, table: lancedb.AsyncTable, session: ResourceRef) -> bool:
        return bool((await table.query().where(self._where(session)).limit(1).to_arrow()).num_rows)

    async def _add_free_row(self, session: ResourceRef) -> None:
        """The hold row of a session saved without one (by a version before holds), added by
        one process at a time; LookupError if there is no such session."""
        if not await self._has_row(self._sessions, session):
            raise LookupError(session.key)
        async with self._leases.held(SCHEMA):
            if not await self._has_row(self._table, session):
                free = {"session_id": session.key, "holder": "", "token": 0, "expires_us": 0}
                await self._table.add(pa.Table.from_pylist([free], SESSION_HOLDS_SCHEMA))

    async def holds(self, session: ResourceRef, token: int) -> bool:
        """Whether `token` still holds the session."""
        where = f"{self._where(session)} AND holder = {sql_string(self.holder)} AND token = {token}"
        return bool((await self._table.query().where(where).limit(1).to_arrow()).num_rows)

    async def release(self, session: ResourceRef, token: int) -> None:
        """Free the session at once for any process's next stream."""
        self._held -= 1
        await self._table.update(
            where=f"{self._where(session)} AND holder = {sql_string(self.holder)} AND token = {token}",
            updates_sql={"holder": "''", "expires_us": "0"},
        )

    async def renew(self) -> None:
        """Extend every hold of this process by the TTL (one commit; none while it holds none)."""
        if self._held > 0:
            await self._table.update(
                where=f"holder = {sql_string(self.holder)} AND expires_us > 0",
                updates_sql={"expires_us": str(_now_us() + int(self.ttl_s * 1e6))},
            )

    async def release_predecessors(self) -> None:
        """Free the holds of earlier processes of this host and address, which are dead since
        this one listens there (an orchestrator restarted after a crash resumes its sessions
        at once, not after their TTL)."""
        await self._table.update(
            where=f"starts_with(holder, {sql_string(self._leases.predecessors)}) "
            f"AND holder != {sql_string(self.holder)} AND expires_us > 0",
            updates_sql={"holder": "''", "expires_us": "0"},
        )

    async def forget(self, session_ids: list[str]) -> None:
        """Drop the holds of expired sessions."""
        if session_ids:
            listed = ", ".join(map(sql_string, session_ids))
            await self._table.delete(f"session_id IN ({listed}) AND expires_us < {_now_us()}")
