"""Dynamic micro-batching: concurrent callers' texts are encoded together.

The first request of a batch waits at most `max_wait_ms` for company; everything queued by then
(up to `max_batch_size` texts, whole requests only) runs as one call of `encode` on `thread`, a
single-worker executor. Load the model on that same thread: torch keeps an OpenMP team per
calling thread, and two teams spinning on a small machine roughly double the encode time.
Requests arriving while a batch runs form the next one. A caller that is cancelled before
its batch starts is dropped from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np


@dataclass
class _Pending:
    texts: Sequence[str]
    future: asyncio.Future


class MicroBatcher:
    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        max_batch_size: int,
        max_wait_ms: float,
        thread: ThreadPoolExecutor,
    ):
        self._encode = encode
        self._max_batch_size = max_batch_size
        self._max_wait_s = max_wait_ms / 1000.0
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._thread = thread
        self._task: asyncio.Task | None = None
        self.batch_sizes: list[int] = []

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def submit(self, texts: Sequence[str]) -> np.ndarray:
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(texts, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            if self._queue.empty() and self._max_wait_s > 0:
                await asyncio.sleep(self._max_wait_s)
            size = len(batch[0].texts)
            while size < self._max_batch_size and not self._queue.empty():
                pending = self._queue.get_nowait()
                batch.append(pending)
                size += len(pending.texts)
            live = [p for p in batch if not p.future.done()]
            if not live:
                continue
            texts = [t for p in live for t in p.texts]
            self.batch_sizes.append(len(texts))
            try:
                vectors = await loop.run_in_executor(self._thread, self._encode, texts)
            except Exception as error:  # one failed batch fails its callers, not the batcher
                for p in live:
                    if not p.future.done():
                        p.future.set_exception(error)
                continue
            start = 0
            for p in live:
                end = start + len(p.texts)
                if not p.future.done():
                    p.future.set_result(vectors[start:end])
                start = end
