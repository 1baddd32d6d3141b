"""Sounding clients: `Client` (blocking, iterators) and `AsyncClient` (asyncio, async iterators).

`AsyncClient` and `AsyncInquiry` are written in _async_client.py; `Client` and `Inquiry` are
generated from them (_sync_client.py, by tools/generate_sync_client.py), so the two cannot drift.
"""

from sounding_client._async_client import AsyncClient, AsyncInquiry
from sounding_client._sync_client import Client, Inquiry

__all__ = ["AsyncClient", "AsyncInquiry", "Client", "Inquiry"]
