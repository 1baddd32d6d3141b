"""What an acknowledgement guarantees about the store (README, "Durability").

LanceDB 0.40 (lance 13) writes every commit with plain writes and renames and never fsyncs: once
a commit returns, its files are in the kernel's page cache, which survives the process being
killed but not a power loss or a kernel crash. `Durability("fsync")` closes that gap: after each
commit a client is acknowledged for, `sync()` flushes the store's filesystem (`syncfs(2)`, on a
worker thread) before the acknowledgement is sent; callers waiting at the same time share one
flush. `Durability("process")` makes `sync()` a no-op. A store on object storage (`s3://`) is
durable when the object store acknowledges, so `sync()` does nothing there either.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from typing import Literal

from sounding.store.location import StoreLocation

Mode = Literal["process", "fsync"]


def _syncfs(path: str) -> None:
    """Flush the filesystem holding `path` (all of them where syncfs is missing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "syncfs"):
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"syncfs({path}): {os.strerror(error)}")
    finally:
        os.close(fd)


class Durability:
    def __init__(self, mode: Mode, location: StoreLocation):
        self.mode = mode
        self._path = location.local_path
        self._lock = asyncio.Lock()
        self._requested = 0
        self._done = 0

    async def sync(self) -> None:
        """Returns once every commit made before the call is on disk (in `fsync` mode)."""
        if self.mode != "fsync" or self._path is None:
            return
        self._requested += 1
        target = self._requested
        async with self._lock:
            if self._done >= target:
                return  # a flush that started after this call's commit covered it
            covered = self._requested
            await asyncio.to_thread(_syncfs, self._path)
            self._done = covered
