"""Leases in the store: the few jobs that need one writer at a time among every process sharing
the store (README, "Scaling out"), held by one process until it releases the lease or lets it
expire.

A lease is a row of the `leases` table: its holder, its fencing token and its expiry (wall-clock
microseconds: the holders' clocks are assumed to agree to well within `ttl_s`). It is taken by a
conditional update, "free or expired: mine, token + 1", which Lance commits atomically; of several
processes taking it at once exactly one updates the row, and the others see it held. The holder
renews it every third of `ttl_s`; a holder that dies leaves it to expire, and the next taker gets a
larger token, so a holder whose renewal finds the token moved on has lost it (`LeaseLost`) and its
work under the lease is cancelled before its next commit.

- SCHEMA: creating, upgrading and indexing tables when a process opens them.
- COLLECTIONS: registering and deleting collections, and dropping chunk tables no collection owns.
- COMPACTION: compacting tables (one process at a time; the others skip their turn or wait).
- GRAPHS: building collections' knowledge graphs (one build at a time; a graph another process
  built meanwhile is not built again).

The same table keeps counters that hand out numbers no two processes share (`reserve`): a
counter's token is the last number given out, advanced by the same kind of conditional update.

Within a process a lease is held by one task at a time, and never taken again by the task that
holds it (no nesting).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import lancedb
import pyarrow as pa

from sounding.store.connection import table_names
from sounding.store.schema import sql_string

log = logging.getLogger(__name__)

LEASES_TABLE = "leases"
SCHEMA = "schema"
COLLECTIONS = "collections"
COMPACTION = "compaction"
GRAPHS = "graphs"
NAMES = (SCHEMA, COLLECTIONS, COMPACTION, GRAPHS)

LEASES_SCHEMA = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("holder", pa.string(), nullable=False),
        pa.field("token", pa.int64(), nullable=False),
        pa.field("expires_us", pa.int64(), nullable=False),
    ]
)
# Polling for a held lease starts at the first delay and doubles up to the second.
POLL_S = (0.05, 0.5)


class LeaseLost(RuntimeError):
    """The lease expired and another process took it while its holder was still working."""


class LeaseBusy(TimeoutError):
    """The lease stayed held by another process for as long as the caller would wait."""


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    token: int


def _now_us() -> int:
    return int(time.time() * 1e6)


async def _updated(table: lancedb.AsyncTable, where: str, updates_sql: dict[str, str]) -> int:
    """The rows a conditional update changed: 0 also when other processes kept changing them
    for all of Lance's retries of the commit (the rows are theirs for now)."""
    try:
        return (await table.update(where=where, updates_sql=updates_sql)).rows_updated
    except RuntimeError as error:
        if "Commit conflict" not in str(error):
            raise
        return 0


async def take_if_free(table: lancedb.AsyncTable, where: str, claim: str, ttl_s: float) -> int | None:
    """Take the lease-like row `where` selects (holder, token, expires_us) if it is free or
    expired: `claim` holds it, with the next token, for `ttl_s`. The new token, or None if it is
    held (or another taker won it at the same moment)."""
    now = _now_us()
    taken = await _updated(
        table,
        f"{where} AND expires_us < {now}",
        {"holder": sql_string(claim), "token": "token + 1", "expires_us": str(now + int(ttl_s * 1e6))},
    )
    if not taken:
        return None
    row = (await table.query().where(where).limit(1).to_arrow()).to_pylist()[0]
    # Another process can have taken it only after it expired, a whole ttl_s from now.
    return row["token"] if row["holder"] == claim else None


class Leases:
    """The store's leases, taken in this process's name: `holder` is its host, the address it
    serves (`served`; empty for a process serving none), its pid and a nonce. Earlier holders
    of the same host and address are dead once this process listens there (`predecessors`)."""

    def __init__(self, table: lancedb.AsyncTable, ttl_s: float, served: str = ""):
        self._table = table
        self.ttl_s = ttl_s
        self.predecessors = f"{socket.gethostname()}/{served}/"
        self.holder = f"{self.predecessors}{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self._local = {name: asyncio.Lock() for name in NAMES}

    @classmethod
    async def open(cls, db: lancedb.AsyncConnection, ttl_s: float, served: str = "") -> Leases:
        """The leases table, created with a free row per lease if missing. Creating it races
        other processes doing the same: the loser opens the winner's."""
        if LEASES_TABLE not in await table_names(db):
            rows = [{"name": n, "holder": "", "token": 0, "expires_us": 0} for n in NAMES]
            with suppress(Exception):
                await db.create_table(LEASES_TABLE, pa.Table.from_pylist(rows, LEASES_SCHEMA))
        table = await db.open_table(LEASES_TABLE)
        present = {row["name"] for row in (await table.query().select(["name"]).to_arrow()).to_pylist()}
        missing = [n for n in NAMES if n not in present]
        if missing:
            # A row added twice by two processes at once is harmless: every change updates all
            # rows of the name together, so they never differ.
            rows = [{"name": n, "holder": "", "token": 0, "expires_us": 0} for n in missing]
            await table.add(pa.Table.from_pylist(rows, LEASES_SCHEMA))
        return cls(table, ttl_s, served)

    async def _row(self, name: str) -> dict:
        rows = (await self._table.query().where(f"name = {sql_string(name)}").limit(1).to_arrow()).to_pylist()
        return rows[0]

    async def add_counter(self, name: str) -> None:
        """Add the counter `name` (its last number -1) if it is missing. The caller holds the
        SCHEMA lease, so a counter has one row."""
        if not await self._table.count_rows(f"name = {sql_string(name)}"):
            row = {"name": name, "holder": "", "token": -1, "expires_us": 0}
            await self._table.add(pa.Table.from_pylist([row], LEASES_SCHEMA))

    async def reserve(self, name: str, count: int, after: int = -1) -> range:
        """`count` consecutive numbers of the counter `name`, all above `after`, given to no
        other process."""
        while True:
            last = (await self._row(name))["token"]
            start = max(last, after) + 1
            where = f"name = {sql_string(name)} AND token = {last}"
            if await _updated(self._table, where, {"token": str(start + count - 1)}):
                return range(start, start + count)

    async def try_acquire(self, name: str) -> Lease | None:
        """The lease if it is free or expired (taken with the next token), else None."""
        claim = f"{self.holder}/{uuid.uuid4().hex[:8]}"
        token = await take_if_free(self._table, f"name = {sql_string(name)}", claim, self.ttl_s)
        return None if token is None else Lease(name, claim, token)

    async def acquire(self, name: str, timeout_s: float) -> Lease:
        """The lease, waiting up to `timeout_s` for its holder to release it or let it expire."""
        deadline = time.monotonic() + timeout_s
        delay = POLL_S[0]
        while (lease := await self.try_acquire(name)) is None:
            if time.monotonic() + delay > deadline:
                row = await self._row(name)
                raise LeaseBusy(
                    f"the store's {name} lease is held by {row['holder'].rsplit('/', 1)[0]} "
                    f"(waited {timeout_s:.0f} s)"
                )
            await asyncio.sleep(delay)
            delay = min(2 * delay, POLL_S[1])
        return lease

    async def renew(self, lease: Lease) -> None:
        """Extend the lease by `ttl_s`; LeaseLost if another process holds it now."""
        result = await self._table.update(
            where=f"name = {sql_string(lease.name)} AND holder = {sql_string(lease.holder)} "
            f"AND token = {lease.token}",
            updates_sql={"expires_us": str(_now_us() + int(self.ttl_s * 1e6))},
        )
        if not result.rows_updated:
            raise LeaseLost(f"the store's {lease.name} lease (token {lease.token}) was taken over")

    async def release(self, lease: Lease) -> None:
        """Free the lease at once (if this holder still has it)."""
        await self._table.update(
            where=f"name = {sql_string(lease.name)} AND holder = {sql_string(lease.holder)} "
            f"AND token = {lease.token}",
            updates_sql={"holder": "''", "expires_us": "0"},
        )

    @asynccontextmanager
    async def held(self, name: str, timeout_s: float | None = None) -> AsyncIterator[Lease]:
        """Hold the lease for the block (waiting up to `timeout_s`, by default `ttl_s` and a
        half: long enough for a dead holder's lease to expire), renewing it meanwhile. If a
        renewal finds it lost, the block is cancelled and `LeaseLost` raised in its place."""
        async with self._local[name]:
            lease = await self.acquire(name, 1.5 * self.ttl_s if timeout_s is None else timeout_s)
            async with self._kept(lease):
                yield lease

    @asynccontextmanager
    async def held_if_free(self, name: str) -> AsyncIterator[Lease | None]:
        """Hold the lease for the block if no one (in this process or another) holds it; the
        block gets None otherwise."""
        local = self._local[name]
        if local.locked():
            yield None
            return
        async with local:
            lease = await self.try_acquire(name)
            if lease is None:
                yield None
                return
            async with self._kept(lease):
                yield lease

    @asynccontextmanager
    async def _kept(self, lease: Lease) -> AsyncIterator[None]:
        body = asyncio.current_task()
        assert body is not None
        lost: list[LeaseLost] = []

        async def keep() -> None:
            while True:
                await asyncio.sleep(self.ttl_s / 3)
                try:
                    await self.renew(lease)
                except LeaseLost as error:
                    lost.append(error)
                    body.cancel()
                    return
                except Exception:
                    log.warning("renewing the %s lease failed; trying again", lease.name, exc_info=True)

        keeper = asyncio.get_running_loop().create_task(keep())
        try:
            yield
        except asyncio.CancelledError:
            if lost:
                body.uncancel()
                raise lost[0] from None
            raise
        finally:
            keeper.cancel()
            with suppress(asyncio.CancelledError):
                await keeper
            if not lost:
                try:
                    await asyncio.shield(self.release(lease))
                except Exception:
                    log.warning("releasing the %s lease failed; it expires", lease.name, exc_info=True)
