"""Following the learning log that other orchestrators on the store write (README, "Scaling
out"): what each has learned from is tracked by retrieval id, so an orchestrator reads the
observations stamped since its latest one, less FOLLOW_SLACK_US (a row is stamped before it is
committed, and the writers' clocks may differ a little), and learns from those it has not seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from sounding.store.learning import ObservationRecord

log = logging.getLogger(__name__)

# How far before its newest stamp an orchestrator looks again for observations committed late.
FOLLOW_SLACK_US = 30_000_000


class SeenObservations:
    """The observations a process has learned from, by retrieval id, back to FOLLOW_SLACK_US
    before the newest stamp (older ones can no longer turn up as new)."""

    def __init__(self, slack_us: int = FOLLOW_SLACK_US):
        self._slack_us = slack_us
        self._stamps: dict[str, int] = {}
        self._pruned_at = 0
        self.newest_us = 0

    @property
    def since_us(self) -> int:
        """Where the next read of the log starts."""
        return self.newest_us - self._slack_us

    def unseen(self, observations: Iterable[ObservationRecord]) -> list[ObservationRecord]:
        return [o for o in observations if o.retrieval_id not in self._stamps]

    def add(self, stamps: Iterable[tuple[str, int]]) -> None:
        """(retrieval id, stamp) of observations learned from."""
        for retrieval_id, stamp_us in stamps:
            self._stamps[retrieval_id] = stamp_us
            self.newest_us = max(self.newest_us, stamp_us)
        if len(self._stamps) > 2 * self._pruned_at:
            cutoff = self.since_us
            self._stamps = {i: stamp for i, stamp in self._stamps.items() if stamp >= cutoff}
            self._pruned_at = len(self._stamps)


async def follow(catch_up: Callable[[], Awaitable[None]], interval_s: float) -> None:
    """Runs until cancelled: `catch_up` every `interval_s`; a failure is logged and the next
    turn tries again."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await catch_up()
        except Exception:
            log.warning("reading what other orchestrators learned failed; trying again", exc_info=True)
