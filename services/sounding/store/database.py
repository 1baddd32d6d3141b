"""The store as a process opens it: one LanceDB connection (`connection.connect`), the
durability of its writes and the store's leases, from which every table family opens: the
collections (`collections.Store`), the graphs, and each tenant's learning, tool and corpus
inquiry logs."""

from __future__ import annotations

from dataclasses import dataclass

import lancedb

from sounding.store.connection import connect
from sounding.store.durability import Durability
from sounding.store.lease import Leases
from sounding.store.location import StoreLocation

# How long a lease outlives its holder's last renewal (`store.lease.Leases`).
LEASE_TTL_S = 10.0


@dataclass(frozen=True)
class Database:
    connection: lancedb.AsyncConnection
    durability: Durability
    leases: Leases

    @classmethod
    async def open(
        cls,
        location: StoreLocation,
        durability: Durability | None = None,
        lease_ttl_s: float = LEASE_TTL_S,
        served: str = "",
    ) -> Database:
        """Connected to the store at `location`; writes made durable as `durability` says (by
        default, as far as the process: `Durability("process")`); leases taken in the name of
        a process serving the address `served` (`Leases`)."""
        connection = await connect(location)
        return cls(
            connection,
            durability or Durability("process", location),
            await Leases.open(connection, lease_ttl_s, served),
        )
