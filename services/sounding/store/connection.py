"""How the store's classes connect to LanceDB: one way, sharing one cache per process.

LanceDB keeps index data and table versions' metadata in in-process caches which, left at their
defaults, grow with every commit (bench/README.md, "Robustness: load and faults"). `configure_caches` sets
their sizes once per process, before the first `connect`; every connection then shares them.
Readers in other processes need `read_consistency_interval=0` to see each new version at once
(DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import lancedb

from sounding.store.location import StoreLocation

_session: lancedb.Session | None = None
# For processes that never configure (tools, tests); the servers configure from limits.memory.
DEFAULT_CACHE_MIB = (256, 16)


def configure_caches(index_mib: int, metadata_mib: int) -> None:
    """The sizes of this process's LanceDB caches (index, table metadata), in MiB."""
    global _session
    _session = lancedb.Session(
        index_cache_size_bytes=index_mib << 20, metadata_cache_size_bytes=metadata_mib << 20
    )


async def connect(location: StoreLocation) -> lancedb.AsyncConnection:
    if _session is None:
        configure_caches(*DEFAULT_CACHE_MIB)
    return await lancedb.connect_async(
        location.uri,
        read_consistency_interval=timedelta(0),
        session=_session,
        storage_options=dict(location.options),
    )


async def table_names(db: lancedb.AsyncConnection) -> list[str]:
    """Every table of the store, page by page."""
    names: list[str] = []
    start_after = None
    while True:
        page = list(await db.table_names(start_after=start_after, limit=1000))
        names.extend(page)
        if len(page) < 1000:
            return names
        start_after = page[-1]


def drop_tables(location: StoreLocation, names: Sequence[str]) -> None:
    """Drop those of `names` that exist in the store at `location` (none there: nothing to do),
    for a harness that wants a cold start; never while a server has the store open."""
    if location.local_path is not None and not Path(location.local_path).exists():
        return
    db = lancedb.connect(location.uri, storage_options=dict(location.options))
    existing = set(db.table_names(limit=100_000))
    for name in names:
        if name in existing:
            db.drop_table(name)
