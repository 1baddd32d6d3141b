"""Following what other orchestrators on the store write (README, "Scaling out"): a process
reads the rows stamped since its newest one, less FOLLOW_SLACK_US (a row is stamped before it is
committed, and the writers' clocks may differ a little), and takes in those whose keys it has not
seen (retrieval ids of observations, sequences of tool exemplars).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

# How far before its newest stamp a process looks again for rows committed late.
FOLLOW_SLACK_US = 30_000_000

K = TypeVar("K", bound=Hashable)


class SeenStamps(Generic[K]):
    """The keys of the rows a process has taken in, with their stamps, back to FOLLOW_SLACK_US
    before the newest stamp (older rows can no longer turn up as new)."""

    def __init__(self, slack_us: int = FOLLOW_SLACK_US):
        self._slack_us = slack_us
        self._stamps: dict[K, int] = {}
        self._pruned_at = 0
        self.newest_us = 0

    @property
    def since_us(self) -> int:
        """Where the next read starts."""
        return self.newest_us - self._slack_us

    def __contains__(self, key: K) -> bool:
        return key in self._stamps

    def add(self, stamps: Iterable[tuple[K, int]]) -> None:
        """(key, stamp) of rows taken in."""
        for key, stamp_us in stamps:
            self._stamps[key] = stamp_us
            self.newest_us = max(self.newest_us, stamp_us)
        if len(self._stamps) > 2 * self._pruned_at:
            cutoff = self.since_us
            self._stamps = {k: stamp for k, stamp in self._stamps.items() if stamp >= cutoff}
            self._pruned_at = len(self._stamps)


async def follow(catch_up: Callable[[], Awaitable[None]], interval_s: float, what: str) -> None:
    """Runs until cancelled: `catch_up` every `interval_s`; a failure is logged and the next
    turn tries again."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await catch_up()
        except Exception:
            log.warning("reading %s other orchestrators wrote failed; trying again", what, exc_info=True)
