"""Retrievals remembered for Observe (learning.service): each finished retrieval is held in memory
at once (so an Observe sent right after the Final event finds it) and appended to the log in the
background, batched (at most one commit a flush interval; whoever waits for them makes it at
once). A crash can lose the last interval's retrievals that nobody observed yet, never an
acknowledged observation. A failed append is retried with the next; until a retrieval is in the
log it is `unlogged`, and outcomes for it are refused, so no observation is ever durable for a
retrieval that is not. Memory is bounded: at most RECENT_RETRIEVALS retrievals holding at most
RECENT_DOCUMENT_IDS document ids together (older ones are read back from the log). Which recent
retrievals have an acknowledged observation is known here too, so Observe asks the log only about
the others. With each batch it writes, it works out the batch's fused plan rankings
(`core.plans.fused_tops`, off the event loop), so that Observe rewards a remembered retrieval's
plans without ranking them again."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from sounding.core.plans import FusedTops, fused_tops
from sounding.learning.outcomes import fusion_scores, rankings
from sounding.store.learning import LearningLog, RetrievalRecord

log = logging.getLogger(__name__)
RECENT_RETRIEVALS = 10_000
RECENT_DOCUMENT_IDS = 1_000_000
RETRIEVAL_FLUSH_INTERVAL_S = 1.0


class RememberedRetrievals:
    def __init__(self, log_: LearningLog):
        self._log = log_
        self._recent: OrderedDict[str, RetrievalRecord] = OrderedDict()
        self._recent_ids = 0
        # Recent retrievals with an observation in the log (a subset of `_recent`'s keys).
        self._observed: set[str] = set()
        self._unwritten: list[RetrievalRecord] = []
        # Retrievals remembered but not yet durably in the log.
        self._unlogged: set[str] = set()
        # The fused plan rankings of recent retrievals (those written so far).
        self._tops: dict[str, FusedTops] = {}
        self._flusher: asyncio.Task | None = None
        self._flush_now = asyncio.Event()
        self.flush_interval_s = RETRIEVAL_FLUSH_INTERVAL_S

    def add(self, record: RetrievalRecord) -> None:
        self._recent[record.retrieval_id] = record
        self._recent_ids += _document_ids(record)
        while len(self._recent) > RECENT_RETRIEVALS or self._recent_ids > RECENT_DOCUMENT_IDS:
            _, oldest = self._recent.popitem(last=False)
            self._forget(oldest)
        self._unwritten.append(record)
        self._unlogged.add(record.retrieval_id)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())

    def _forget(self, record: RetrievalRecord) -> None:
        self._recent_ids -= _document_ids(record)
        self._observed.discard(record.retrieval_id)
        self._tops.pop(record.retrieval_id, None)

    def mark_observed(self, retrieval_ids: list[str]) -> None:
        """These retrievals' observations are now durably in the log."""
        self._observed.update(i for i in retrieval_ids if i in self._recent)

    async def observed(self, retrieval_ids: set[str]) -> set[str]:
        """The retrievals among these that have an observation in the log: those known observed
        from memory, the others from the log (another orchestrator on the store may have
        recorded one since)."""
        known = retrieval_ids & self._observed
        others = retrieval_ids - known
        return known | (await self._log.observed_retrievals(others) if others else set())

    def tops(self, retrieval_id: str) -> FusedTops | None:
        """The retrieval's fused plan rankings, if it is recent and was written."""
        return self._tops.get(retrieval_id)

    def unlogged(self, retrieval_id: str) -> bool:
        """Whether the retrieval is remembered but not yet in the log (its write failed so far)."""
        return retrieval_id in self._unlogged

    @property
    def unwritten(self) -> list[RetrievalRecord]:
        """The retrievals waiting for the next append, oldest first."""
        return list(self._unwritten)

    async def _flush(self) -> None:
        """Writes remembered retrievals in batches, at most one commit per flush interval (a
        commit per query would compete with the queries), or at once when someone waits. A
        failed write keeps its retrievals for the next (the oldest are given up beyond
        RECENT_RETRIEVALS waiting)."""
        try:
            await asyncio.wait_for(self._flush_now.wait(), self.flush_interval_s)
        except TimeoutError:
            pass
        self._flush_now.clear()
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            tops = await asyncio.to_thread(
                fused_tops, [rankings(r) for r in batch], scores=[fusion_scores(r) for r in batch]
            )
            self._tops.update(
                (r.retrieval_id, t)
                for r, t in zip(batch, tops, strict=True)
                if r.retrieval_id in self._recent
            )
            try:
                await self._log.append_retrievals(batch)
            except Exception:
                log.exception("could not log %d retrievals; the next write retries them", len(batch))
                self._unwritten = batch + self._unwritten
                self._give_up_oldest_unwritten()
                return
            self._unlogged.difference_update(r.retrieval_id for r in batch)

    def not_held(self, retrieval_ids: set[str]) -> set[str]:
        """Those of the retrievals not in memory (neither recent nor waiting to be written)."""
        unwritten = {r.retrieval_id for r in self._unwritten}
        return {i for i in retrieval_ids if i not in self._recent and i not in unwritten}

    async def records(self, retrieval_ids: set[str]) -> dict[str, RetrievalRecord]:
        """The retrievals, from memory (recent, or still waiting to be written) or the log."""
        held = {r.retrieval_id: r for r in self._unwritten} | self._recent
        found = {i: held[i] for i in retrieval_ids if i in held}
        missing = retrieval_ids - set(found)
        if missing:
            found.update(await self._log.retrievals(missing))
        return found

    def _give_up_oldest_unwritten(self) -> None:
        """Waiting retrievals beyond RECENT_RETRIEVALS, or RECENT_DOCUMENT_IDS ids, are dropped,
        oldest first (outcomes for them are then NOT_FOUND)."""
        count, ids = len(self._unwritten), sum(map(_document_ids, self._unwritten))
        dropped = 0
        while count - dropped > RECENT_RETRIEVALS or ids > RECENT_DOCUMENT_IDS:
            ids -= _document_ids(self._unwritten[dropped])
            dropped += 1
        for record in self._unwritten[:dropped]:
            self._unlogged.discard(record.retrieval_id)
            if self._recent.pop(record.retrieval_id, None) is not None:
                self._forget(record)
        self._unwritten = self._unwritten[dropped:]

    async def wait_written(self) -> None:
        """Until every remembered retrieval is in the log, or an attempt to write them failed
        (those stay unlogged, for the next attempt)."""
        if self._unwritten and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.ensure_future(self._flush())
        while self._flusher is not None and not self._flusher.done():
            self._flush_now.set()
            await asyncio.shield(self._flusher)


def _document_ids(record: RetrievalRecord) -> int:
    return 1 + sum(len(ran["document_ids"]) for ran in record.arms.values())
