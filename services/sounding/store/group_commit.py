"""Group commit: writes that arrive while a commit is in flight go together in the next one.

Each LanceDB commit costs a table version, a manifest write and room in LanceDB's caches
(bench/README.md, "Robustness: load and faults"); concurrent inquiry sessions each saving every
step would otherwise commit one row at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")


class GroupCommit(Generic[Item]):
    """`submit` returns once the commit holding its item is done, or raises that commit's
    error; `commit` gets every item that waited, in arrival order, and runs one at a time. A
    caller cancelled while waiting leaves its item in the commit."""

    def __init__(self, commit: Callable[[list[Item]], Awaitable[None]]):
        self._commit = commit
        self._waiting: list[tuple[Item, asyncio.Future]] = []
        self._draining: asyncio.Task | None = None

    async def submit(self, item: Item) -> None:
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._draining is None or self._draining.done():
            self._draining = asyncio.ensure_future(self._drain())
        await done

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await self._commit([item for item, _ in batch])
            except Exception as error:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(error)
            else:
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
