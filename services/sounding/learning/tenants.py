"""Each tenant's learned state (README, "Security"): its learning log, strategy selector, miss
history and miss-rate calibration, bandit deployments, recorded inquiry states and stop
thresholds. Nothing of it is shared between tenants; a tenant's state is restored from its own
log on its first call after a start."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sounding.learning.inquiry import InquiryLearning
from sounding.learning.service import LearningService


@dataclass(frozen=True)
class TenantLearning:
    retrieval: LearningService
    inquiry: InquiryLearning


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


def _opened(opening: asyncio.Future) -> bool:
    return opening.done() and not opening.cancelled() and opening.exception() is None
