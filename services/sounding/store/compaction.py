"""Compaction of the store's tables: every commit adds a fragment and a table version, and a
table read through many of them slows every query. One process compacts at a time (the store's
COMPACTION lease); another whose turn comes meanwhile skips it, and its next count tries again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import timedelta
from typing import cast

import lancedb

from sounding.runtime.allocator import release_free_memory
from sounding.store.lease import COMPACTION, Leases

log = logging.getLogger(__name__)

# Every commit leaves a table version; optimising prunes those older than this, which no reader
# still needs (thousands of kept versions made each optimisation take seconds).
VERSION_RETENTION = timedelta(minutes=1)


async def compact(leases: Leases, *tables: lancedb.AsyncTable, wait: bool = False) -> None:
    """Compact the tables and prune versions older than VERSION_RETENTION, then hand the memory
    the pruned versions held back to the system. If another process is compacting, wait for it
    (`wait`) or skip. Best effort: a failure is logged (the next compaction tries again)."""
    try:
        async with leases.held(COMPACTION) if wait else leases.held_if_free(COMPACTION) as lease:
            if lease is None:
                log.debug("another process is compacting; %d tables wait for their next turn", len(tables))
                return
            for table in tables:
                try:
                    await table.optimize(cleanup_older_than=VERSION_RETENTION)
                except Exception:
                    log.warning(
                        "compacting %s failed; the next compaction tries again", table.name, exc_info=True
                    )
    except Exception:
        log.warning("the compaction lease failed; the next compaction tries again", exc_info=True)
        return
    await asyncio.to_thread(release_free_memory)


async def compact_if_fragmented(leases: Leases, tables: Collection[lancedb.AsyncTable], most: int) -> None:
    """Compact the tables now if any holds more than `most` small fragments: what a process that
    stopped before its next compaction, or an older version, left behind. Best effort, like
    `compact`: a table whose statistics cannot be read is logged and left to its count."""
    for table in tables:
        try:
            # A dict at run time, though typed as TableStatistics.
            stats = cast(dict, await table.stats())
        except Exception:
            log.warning(
                "reading the fragments of %s failed; its next compaction is left to its count",
                table.name,
                exc_info=True,
            )
            continue
        if stats["fragment_stats"]["num_small_fragments"] > most:
            await compact(leases, *tables)
            return


class BackgroundCompaction:
    """Append-only tables whose every append is a commit (a small fragment and a table version):
    after every `every` counted appends they are compacted in the background, so the append that
    reaches the count is acknowledged without waiting, and one compaction runs at a time (a count
    reached meanwhile waits for the next). Appends and compaction may overlap: LanceDB retries an
    append that races a compaction."""

    def __init__(self, leases: Leases, tables: Collection[lancedb.AsyncTable], every: int):
        self._leases, self._tables, self._every = leases, tuple(tables), every
        self._appends = 0
        self._running: asyncio.Task | None = None

    async def catch_up(self) -> None:
        """At open: compact now if a table holds more small fragments than `every` appends
        leave (`compact_if_fragmented`)."""
        await compact_if_fragmented(self._leases, self._tables, self._every)

    def count(self) -> None:
        self._appends += 1
        if self._appends % self._every == 0 and (self._running is None or self._running.done()):
            self._running = asyncio.get_running_loop().create_task(compact(self._leases, *self._tables))

    async def settled(self) -> None:
        """Returns once no compaction is running."""
        if self._running is not None:
            await self._running
