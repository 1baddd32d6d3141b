"""The one-writer rule, enforced: an orchestrator holds an exclusive lock on its data directory.

A second orchestrator started on the same directory stops at once with `DataDirectoryInUse`
(naming the holder's pid) instead of opening the store, where it would drop the tables the first
one is writing. The lock is an advisory `flock` on `<data dir>/orchestrator.lock`, released by the
kernel when the holder exits, however it exits. (An `s3://` store shared by several machines
needs a lock of its own; this one guards a local directory.)
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "orchestrator.lock"


class DataDirectoryInUse(RuntimeError):
    pass


class DataDirectoryLock:
    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirectoryLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirectoryInUse(
                f"another orchestrator (pid {holder}) serves the data directory {self.path.parent}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
