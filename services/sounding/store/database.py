"""The store as a process opens it: one LanceDB connection (`connection.connect`) and the
durability of its writes, from which every table family opens: the collections
(`collections.Store`), the graphs, and each tenant's learning, tool and corpus inquiry logs."""

from __future__ import annotations

from dataclasses import dataclass

import lancedb

from sounding.store.connection import connect
from sounding.store.durability import Durability
from sounding.store.location import StoreLocation


@dataclass(frozen=True)
class Database:
    connection: lancedb.AsyncConnection
    durability: Durability

    @classmethod
    async def open(cls, location: StoreLocation, durability: Durability | None = None) -> Database:
        """Connected to the store at `location`; writes made durable as `durability` says (by
        default, as far as the process: `Durability("process")`)."""
        return cls(await connect(location), durability or Durability("process", location))
