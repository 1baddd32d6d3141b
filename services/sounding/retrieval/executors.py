"""Executors: where arms run. `InProcessExecutor` in the orchestrator's event loop;
`RayExecutor` on a pool of Ray strategy workers (async actors holding a StrategyRunner), called
over a direct channel (`retrieval.channel`).

Cancelling the task awaiting `run` cancels the arm: in process directly; on a worker through the
channel, which cancels the worker's coroutine and with it its sidecar call.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from sounding.api.sounding.worker.v1 import worker_pb2
from sounding.retrieval import wire
from sounding.retrieval.channel import ChannelClient, ChannelServer
from sounding.retrieval.protocol import ArmRequest, ArmResult, ExpansionRequest, ExpansionResult
from sounding.retrieval.runner import RunnerConfig, StrategyRunner
from sounding.runtime import errors, telemetry
from sounding.store.tenancy import ResourceRef


@dataclass(frozen=True)
class RayExecutorConfig:
    """The pool of strategy workers: how many, the custom Ray resources each requires, the host
    their channels listen on (None: their node's address) and what each one's runner opens."""

    workers: int
    resources: dict[str, float]
    host: str | None
    runner: RunnerConfig


class InProcessExecutor:
    def __init__(self, runner: StrategyRunner):
        self._runner = runner

    @classmethod
    async def open(cls, config: RunnerConfig) -> InProcessExecutor:
        return cls(await StrategyRunner.open(config))

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult:
        return await self._runner.run(arm, request, trace_carrier)

    async def expand(self, request: ExpansionRequest, trace_carrier: Mapping[str, str]) -> ExpansionResult:
        return await self._runner.expand(request, trace_carrier)

    async def forget(self, collection: ResourceRef) -> None:
        self._runner.forget(collection)

    async def close(self) -> None:
        await self._runner.close()


class StrategyWorker:
    """Body of the Ray actor: one warm StrategyRunner per worker process, served over a
    `ChannelServer` on `host` (Ray only starts, places and restarts the actor and tells its
    address)."""

    def __init__(self, config: RunnerConfig, secret: bytes, host: str | None):
        self._config = config
        self._secret = secret
        self._host = host
        self._runner: StrategyRunner | None = None
        self._channel: ChannelServer | None = None
        self._address: tuple[str, int] | None = None
        self._lock = asyncio.Lock()
        telemetry.setup("sounding-worker")

    async def address(self) -> tuple[str, int]:
        """Opens the runner and the channel (once); the channel's (host, port)."""
        import ray

        async with self._lock:
            if self._address is None:
                self._runner = await StrategyRunner.open(self._config)
                self._channel = ChannelServer(self._dispatch, self._secret)
                self._address = await self._channel.start(self._host or ray.util.get_node_ip_address())
            return self._address

    async def _dispatch(self, call: worker_pb2.WorkerCall) -> worker_pb2.WorkerReply:
        runner, channel = self._runner, self._channel
        assert runner is not None and channel is not None, "calls arrive only once address() opened both"
        method = call.WhichOneof("method")
        if method == "run_arm":
            request = wire.arm_request(call.run_arm)
            return wire.arm_outcome(await runner.run(call.run_arm.arm, request, call.trace_carrier))
        if method == "expand":
            request = wire.expansion_request(call.expand)
            return wire.expansion_outcome(await runner.expand(request, call.trace_carrier))
        if method == "forget":
            runner.forget(ResourceRef.from_key(call.forget.collection))
            return worker_pb2.WorkerReply(forgotten=worker_pb2.Forgotten())
        if method == "calls_in_flight":
            return worker_pb2.WorkerReply(calls_in_flight=channel.calls_in_flight - 1)
        raise errors.Unimplemented(f"the strategy worker has no method {method!r}")


class RayExecutor:
    """Arms on a pool of Ray actors, restarted by Ray when they die; each call goes to the next
    worker in turn, over its channel."""

    def __init__(self, workers: list, channels: list[ChannelClient]):
        self._workers = workers
        self._channels = channels
        self._next = itertools.cycle(range(len(workers)))

    @classmethod
    async def open(cls, config: RayExecutorConfig) -> RayExecutor:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("Ray is not initialised; the orchestrator starts or joins it")
        actor = ray.remote(StrategyWorker).options(
            num_cpus=0,
            resources=config.resources,
            max_concurrency=64,
            max_restarts=-1,
            max_task_retries=0,
        )
        secret = secrets.token_bytes(32)
        workers = [actor.remote(config.runner, secret, config.host) for _ in range(config.workers)]
        channels = [ChannelClient(functools.partial(_address, worker), secret) for worker in workers]
        executor = cls(workers, channels)
        await executor.calls_in_flight()
        return executor

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult:
        reply = await self._channels[next(self._next)].call(wire.arm_call(arm, request, trace_carrier))
        return wire.arm_result(reply)

    async def expand(self, request: ExpansionRequest, trace_carrier: Mapping[str, str]) -> ExpansionResult:
        reply = await self._channels[next(self._next)].call(wire.expansion_call(request, trace_carrier))
        return wire.expansion_result(reply)

    async def forget(self, collection: ResourceRef) -> None:
        await asyncio.gather(
            *(
                channel.call(worker_pb2.WorkerCall(forget=worker_pb2.ForgetCall(collection=collection.key)))
                for channel in self._channels
            )
        )

    async def calls_in_flight(self) -> list[int]:
        """Per worker, the calls it is running (a cancelled arm's call is gone from it)."""
        asking = worker_pb2.WorkerCall(calls_in_flight=worker_pb2.CallsInFlightCall())
        replies = await asyncio.gather(*(channel.call(asking) for channel in self._channels))
        return [reply.calls_in_flight for reply in replies]

    async def close(self) -> None:
        import ray

        for channel in self._channels:
            await channel.close()
        for worker in self._workers:
            ray.kill(worker)


async def _address(worker) -> tuple[str, int]:
    """A worker's channel address; after a restart, the new one (the call is retried until the
    restarted actor answers)."""
    from ray.exceptions import RayActorError

    try:
        return await worker.address.options(max_task_retries=-1).remote()
    except RayActorError as error:
        raise errors.Unavailable(f"strategy worker failed: {error}") from None
