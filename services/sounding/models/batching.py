"""Dynamic micro-batching: concurrent callers' texts are encoded together, fairly.

A batch runs when the encoder is free; when only one request waits and it would not fill a
batch, it first waits at most `max_wait_ms` for company. A batch holds at most `max_batch_size`
texts, taken round-robin across the waiting requests (each gets an equal share of the batch,
leftover room goes to those with more), so a large request is encoded over several batches and
a one-text request arriving meanwhile waits for at most one batch. Batches run one at a time as
calls of `encode` on `thread`, a single-worker executor. Load the model on that same thread:
torch keeps an OpenMP team per calling thread, and two teams spinning on a small machine
roughly double the encode time. A caller that is cancelled is dropped from later batches.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class _Request:
    items: Sequence
    future: asyncio.Future
    # Items handed to batches so far, and the rows encoded (by start offset).
    taken: int = 0
    encoded: int = 0
    parts: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def left(self) -> int:
        return len(self.items) - self.taken


class MicroBatcher:
    def __init__(
        self,
        encode: Callable[[list], np.ndarray],
        max_batch_size: int,
        max_wait_ms: float,
        thread: ThreadPoolExecutor,
    ):
        self._encode = encode
        self._max_batch_size = max_batch_size
        self._max_wait_s = max_wait_ms / 1000.0
        self._waiting: deque[_Request] = deque()
        self._arrived = asyncio.Event()
        self._thread = thread
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def submit(self, items: Sequence) -> np.ndarray:
        """The encoded rows of `items` (at least one), in order."""
        if not items:
            raise ValueError("nothing to encode")
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(_Request(list(items), future))
        self._arrived.set()
        return await future

    def _take(self) -> list[tuple[_Request, int, int]]:
        """The next batch as (request, start, count) slices, round-robin across the waiting
        requests; requests with items left move to the back."""
        live = [r for r in self._waiting if not r.future.done()]
        room = self._max_batch_size
        taken: dict[int, tuple[_Request, int, int]] = {}
        while room and any(r.left for r in live):
            pending = [r for r in live if r.left]
            share = max(1, room // len(pending))
            for request in pending:
                count = min(share, request.left, room)
                start = request.taken
                _, first, before = taken.get(id(request), (request, start, 0))
                taken[id(request)] = (request, first, before + count)
                request.taken += count
                room -= count
                if not room:
                    break
        self._waiting = deque([r for r in live if r.left])
        return list(taken.values())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._waiting:
                self._arrived.clear()
                await self._arrived.wait()
            if (
                self._max_wait_s > 0
                and len(self._waiting) == 1
                and self._waiting[0].left < self._max_batch_size
            ):
                await asyncio.sleep(self._max_wait_s)
            batch = self._take()
            if not batch:
                continue
            items = [item for request, start, count in batch for item in request.items[start : start + count]]
            try:
                rows = await loop.run_in_executor(self._thread, self._encode, items)
            except Exception as error:  # one failed batch fails its callers, not the batcher
                for request, _, _ in batch:
                    if not request.future.done():
                        request.future.set_exception(error)
                continue
            offset = 0
            for request, start, count in batch:
                request.parts[start] = rows[offset : offset + count]
                request.encoded += count
                offset += count
                if request.encoded == len(request.items) and not request.future.done():
                    request.future.set_result(
                        np.concatenate([request.parts[s] for s in sorted(request.parts)])
                    )
