"""Running CPU-bound work off the event loop, in a bounded pool.

`BoundedPool(threads, queue)` runs `await pool(function, *args)` on one of `threads` worker
threads; at most `queue` more calls wait for one, and a call beyond that is refused at once with
RESOURCE_EXHAUSTED, so a burst of heavy requests cannot pile up work without end. A call whose
caller is cancelled while it waits never runs; one already running finishes on its thread (a
thread cannot be interrupted) and holds its place until then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sounding import errors


class BoundedPool:
    def __init__(self, threads: int, queue: int, name: str):
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._places = threads + queue
        self._taken = 0
        self._name = name

    @property
    def taken(self) -> int:
        """Calls running or waiting."""
        return self._taken

    async def __call__(self, function: Callable[..., Any], *args: Any) -> Any:
        if self._taken >= self._places:
            raise errors.ResourceExhausted(
                f"the {self._name} pool has {self._taken} calls running or waiting, its limit; retry later",
                reason="COMPUTE_BUSY",
            )
        loop = asyncio.get_running_loop()
        self._taken += 1
        future = self._pool.submit(function, *args)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        return await asyncio.wrap_future(future)

    def _release(self) -> None:
        self._taken -= 1

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
