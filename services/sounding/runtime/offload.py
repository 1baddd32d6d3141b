"""Work the event loop must not be exposed to.

`BoundedPool(threads, queue)` runs `await pool(function, *args)` on one of `threads` worker
threads; at most `queue` more calls wait for one, and a call beyond that is refused at once with
RESOURCE_EXHAUSTED, so a burst of heavy requests cannot pile up work without end. A call whose
caller is cancelled while it waits never runs; one already running finishes on its thread (a
thread cannot be interrupted) and holds its place until then.

`await completed(coroutine)` runs a write that a cancel must not split: if the caller is
cancelled meanwhile, it still waits for the write to finish (so whatever it holds, a lock, is
held until then) and only then lets the cancellation through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sounding.runtime import errors

T = TypeVar("T")


class BoundedPool:
    def __init__(self, threads: int, queue: int, name: str):
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._places = threads + queue
        self._taken = 0
        self._name = name

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


async def completed(coroutine: Coroutine[Any, Any, T]) -> T:
    task = asyncio.ensure_future(coroutine)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        raise
