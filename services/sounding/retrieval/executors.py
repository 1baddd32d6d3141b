"""Executors: where arms run. `InProcessExecutor` in the orchestrator's event loop;
`RayExecutor` on a pool of Ray strategy workers (async actors holding a StrategyRunner).

Cancelling the task awaiting `run` cancels the arm: in process directly, on Ray through
`ray.cancel`, which cancels the worker's coroutine and with it its sidecar call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping

from sounding import errors, telemetry
from sounding.config import Settings
from sounding.retrieval.protocol import ArmRequest, ArmResult, ExpansionRequest, ExpansionResult
from sounding.retrieval.runner import StrategyRunner

log = logging.getLogger(__name__)


class InProcessExecutor:
    def __init__(self, runner: StrategyRunner):
        self._runner = runner

    @classmethod
    async def open(cls, settings: Settings) -> InProcessExecutor:
        return cls(
            await StrategyRunner.open(
                settings.models.address,
                settings.store_uri,
                settings.retrieval.exact_scan_max_chunks,
            )
        )

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult:
        return await self._runner.run(arm, request, trace_carrier)

    async def expand(self, request: ExpansionRequest, trace_carrier: Mapping[str, str]) -> ExpansionResult:
        return await self._runner.expand(request, trace_carrier)

    async def forget(self, collection: str) -> None:
        self._runner.forget(collection)

    async def close(self) -> None:
        await self._runner.close()


class StrategyWorker:
    """Body of the Ray actor: one warm StrategyRunner per worker process."""

    def __init__(self, models_address: str, store_uri: str, exact_scan_max_chunks: int):
        self._args = (models_address, store_uri, exact_scan_max_chunks)
        self._runner: StrategyRunner | None = None
        self._lock = asyncio.Lock()
        telemetry.setup("sounding-worker")

    async def _ready(self) -> StrategyRunner:
        async with self._lock:
            if self._runner is None:
                self._runner = await StrategyRunner.open(*self._args)
            return self._runner

    async def warm(self) -> bool:
        await self._ready()
        return True

    async def run(self, arm: str, request: ArmRequest, trace_carrier: dict[str, str]) -> ArmResult:
        return await (await self._ready()).run(arm, request, trace_carrier)

    async def expand(self, request: ExpansionRequest, trace_carrier: dict[str, str]) -> ExpansionResult:
        return await (await self._ready()).expand(request, trace_carrier)

    async def forget(self, collection: str) -> None:
        (await self._ready()).forget(collection)


class RayExecutor:
    def __init__(self, workers: list):
        self._workers = workers
        self._next = itertools.cycle(range(len(workers)))

    @classmethod
    async def open(cls, settings: Settings) -> RayExecutor:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("Ray is not initialised; the orchestrator starts or joins it")
        actor = ray.remote(num_cpus=0, max_concurrency=64, max_restarts=-1, max_task_retries=0)(
            StrategyWorker
        )
        workers = [
            actor.remote(
                settings.models.address,
                settings.store_uri,
                settings.retrieval.exact_scan_max_chunks,
            )
            for _ in range(settings.retrieval.strategy_workers)
        ]
        await asyncio.gather(*(w.warm.remote() for w in workers))
        return cls(workers)

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult:
        worker = self._workers[next(self._next)]
        return await self._await(worker.run.remote(arm, request, dict(trace_carrier)))

    async def expand(self, request: ExpansionRequest, trace_carrier: Mapping[str, str]) -> ExpansionResult:
        worker = self._workers[next(self._next)]
        return await self._await(worker.expand.remote(request, dict(trace_carrier)))

    @staticmethod
    async def _await(ref):
        """The task's result; cancelling the caller cancels the task; errors as Sounding's."""
        import ray

        try:
            return await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise
        except ray.exceptions.RayTaskError as error:
            if isinstance(error.cause, errors.SoundingError):
                raise error.cause from None
            raise
        except ray.exceptions.RayActorError as error:
            raise errors.Unavailable(f"strategy worker failed: {error}") from None

    async def forget(self, collection: str) -> None:
        await asyncio.gather(*(w.forget.remote(collection) for w in self._workers))

    async def close(self) -> None:
        import ray

        for worker in self._workers:
            ray.kill(worker)
