"""Each tenant's learned state (README, "Security"): its learning log, strategy selector, miss
history and miss-rate calibration, bandit deployments, recorded inquiry states and stop
thresholds. Nothing of it is shared between tenants; a tenant's state is restored from its own
log on its first call after a start."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from sounding.learning.corpus_inquiry import CorpusInquiryLearning
from sounding.learning.inquiry import InquiryLearning, InquiryOutcome
from sounding.learning.protocol import ObserveResult, Rejected, RetrievalOutcome
from sounding.learning.service import LearningService
from sounding.tools.protocol import ToolUse
from sounding.tools.service import ToolService

Observation = RetrievalOutcome | InquiryOutcome | ToolUse | Rejected


@dataclass(frozen=True)
class TenantLearning:
    retrieval: LearningService
    inquiry: InquiryLearning
    tools: ToolService
    corpus_inquiry: CorpusInquiryLearning

    async def observe(self, observations: Sequence[Observation]) -> ObserveResult:
        """Record an Observe stream's outcomes, each with the learner of its kind; `Rejected` items
        (refused while converting) stay rejected. Rejections carry their stream positions."""
        inquiries = [(i, o) for i, o in enumerate(observations) if isinstance(o, InquiryOutcome)]
        retrieval_outcomes = [(i, o) for i, o in enumerate(observations) if isinstance(o, RetrievalOutcome)]
        positions = [i for i, _ in retrieval_outcomes]
        outcomes = [o for _, o in retrieval_outcomes]
        retrievals = await self.retrieval.observe(outcomes) if outcomes else ObserveResult(0, [])
        recorded, rejected = await self.inquiry.observe(inquiries) if inquiries else (0, [])
        tool_uses = [(i, o) for i, o in enumerate(observations) if isinstance(o, ToolUse)]
        if tool_uses:
            used, refused = await self.tools.observe(tool_uses)
            recorded += used
            rejected += [Rejected(r.index, r.code, r.message) for r in refused]
        rejected += [o for o in observations if isinstance(o, Rejected)]
        # The retrieval side numbers its rejections within `outcomes`: back to stream positions.
        rejected += [replace(r, index=positions[r.index]) for r in retrievals.rejected]
        return ObserveResult(retrievals.recorded + recorded, sorted(rejected, key=lambda r: r.index))


class Tenants:
    """`open_tenant(tenant)` restores a tenant's state; each is opened once (concurrent first
    calls wait for the same opening, which a cancelled caller does not cancel; a failed opening
    is tried again by the next call). Tenants are the token file's, so they are few."""

    def __init__(self, open_tenant: Callable[[str], Awaitable[TenantLearning]]):
        self._open_tenant = open_tenant
        self._opened: dict[str, asyncio.Future[TenantLearning]] = {}

    async def of(self, tenant: str) -> TenantLearning:
        opening = self._opened.get(tenant)
        if opening is not None and _opened(opening):
            return opening.result()
        if opening is None or opening.done():  # never opened, or the opening failed
            opening = self._opened[tenant] = asyncio.ensure_future(self._open_tenant(tenant))
        return await asyncio.shield(opening)

    async def close(self) -> None:
        """Writes what each opened tenant still holds in memory."""
        for opening in self._opened.values():
            if _opened(opening):
                await opening.result().retrieval.close()
                await opening.result().tools.close()
                await opening.result().corpus_inquiry.close()


def _opened(opening: asyncio.Future) -> bool:
    return opening.done() and not opening.cancelled() and opening.exception() is None
