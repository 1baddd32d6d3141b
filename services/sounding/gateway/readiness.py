"""The orchestrator's health status: what `grpc.health.v1.Health` answers.

NOT_SERVING until every probe answers (the models sidecar, the strategy workers); while serving,
the probes run every `interval_s` and two failures in a row set NOT_SERVING until they answer
again; from the moment a drain starts it stays NOT_SERVING. A probe is a coroutine function that
raises (or times out) when its peer does not answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from grpc_health.v1 import health, health_pb2

log = logging.getLogger(__name__)

Probe = Callable[[], Awaitable[object]]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Readiness:
    def __init__(
        self,
        servicer: health.aio.HealthServicer,
        names: Sequence[str],
        probes: dict[str, Probe],
        interval_s: float = 1.0,
        probe_timeout_s: float = 2.0,
    ):
        self._servicer = servicer
        self._names = (*names, "")
        self._probes = probes
        self._interval_s = interval_s
        self._probe_timeout_s = probe_timeout_s
        self._watching: asyncio.Task | None = None
        self._draining = False
        self.status = NOT_SERVING

    async def _set(self, status) -> None:
        if status != self.status:
            log.info("health: %s", health_pb2.HealthCheckResponse.ServingStatus.Name(status))
        self.status = status
        for name in self._names:
            await self._servicer.set(name, status)

    async def _failing(self) -> list[str]:
        """The probes that do not answer now."""

        async def answers(probe: Probe) -> bool:
            try:
                async with asyncio.timeout(self._probe_timeout_s):
                    await probe()
                return True
            except Exception:
                return False

        results = await asyncio.gather(*(answers(p) for p in self._probes.values()))
        return [name for name, ok in zip(self._probes, results, strict=True) if not ok]

    async def start(self) -> None:
        """NOT_SERVING until every probe answers, then SERVING and watching."""
        await self._set(NOT_SERVING)
        while failing := await self._failing():
            log.info("health: waiting for %s", ", ".join(failing))
            await asyncio.sleep(self._interval_s)
        await self._set(SERVING)
        self._watching = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        misses = 0
        while not self._draining:
            await asyncio.sleep(self._interval_s)
            failing = await self._failing()
            misses = misses + 1 if failing else 0
            if self._draining:
                return
            if misses >= 2 and self.status == SERVING:
                log.warning("health: %s not answering", ", ".join(failing))
                await self._set(NOT_SERVING)
            elif not failing and self.status != SERVING:
                await self._set(SERVING)

    async def drain(self) -> None:
        """NOT_SERVING from now on."""
        self._draining = True
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
        await self._set(NOT_SERVING)
