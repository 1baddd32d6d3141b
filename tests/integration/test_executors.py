"""Congruence: the same arm calls through the in-process executor and the Ray executor, and the
exact in-memory dense scan against LanceDB's own vector search, give the same rankings. The Ray
executor's calls are cancelled on the workers, and survive a worker's death."""

import asyncio
import os
import secrets
import signal
import time
import uuid

import numpy as np
import pytest
from sounding.api.sounding.worker.v1 import worker_pb2
from sounding.assembly.configs import ray_executor_config, runner_config
from sounding.retrieval import channel
from sounding.retrieval.channel import ChannelClient
from sounding.retrieval.executors import InProcessExecutor, RayExecutor, StrategyWorker
from sounding.retrieval.protocol import ArmRequest
from sounding.runtime import errors
from sounding.store.reader import ChunkReader
from sounding.store.tenancy import DEFAULT_TENANT, ResourceRef

pytestmark = pytest.mark.integration

DEMO = ResourceRef(DEFAULT_TENANT, "demo")  # the demo collection of the shared stack (no tokens)
QUERIES = ["depth of water under a ship", "fusing rankings", "learning from rewards", "leadsman"]


@pytest.fixture(scope="module")
def ray_runtime():
    import ray

    ray.init(address="local", include_dashboard=False, log_to_driver=False, num_cpus=2)
    yield
    ray.shutdown()


def test_in_process_and_ray_executors_agree(stack, demo_collection, ray_runtime):
    async def run():
        local = await InProcessExecutor.open(runner_config(stack.settings))
        remote = await RayExecutor.open(ray_executor_config(stack.settings))
        try:
            pairs = []
            for query in QUERIES:
                for arm in ("dense", "lexical"):
                    request = ArmRequest(DEMO, query, 5)
                    pairs.append((await local.run(arm, request, {}), await remote.run(arm, request, {})))
            return pairs
        finally:
            await local.close()
            await remote.close()

    for local_result, ray_result in asyncio.run(run()):
        assert local_result.arm == ray_result.arm
        assert [h.document_id for h in local_result.hits] == [h.document_id for h in ray_result.hits]
        np.testing.assert_allclose(
            [h.score for h in local_result.hits], [h.score for h in ray_result.hits], rtol=1e-5
        )


async def _until(condition, timeout_s: float = 30.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("condition not reached")


def test_cancelling_a_ray_arm_cancels_its_call_on_the_worker(stack, demo_collection, ray_runtime):
    async def run():
        remote = await RayExecutor.open(ray_executor_config(stack.settings))
        try:

            async def running(count):
                return sum(await remote.calls_in_flight()) == count

            # `hyde` generates before it searches (seconds on a CPU); a new query misses the cache.
            request = ArmRequest(DEMO, f"how deep is the water {uuid.uuid4().hex}", 5, 60.0)
            call = asyncio.ensure_future(remote.run("hyde", request, {}))
            await _until(lambda: running(1))
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            await _until(lambda: running(0), timeout_s=60.0)
            return call.cancelled(), sum(await remote.calls_in_flight())
        finally:
            await remote.close()

    assert asyncio.run(run()) == (True, 0)


def test_a_ray_worker_that_dies_is_restarted_and_its_calls_resume(stack, demo_collection, ray_runtime):
    async def run():
        remote = await RayExecutor.open(ray_executor_config(stack.settings))
        request = ArmRequest(DEMO, "depth of water under a ship", 5)
        try:
            workers = remote._workers  # the test kills them as a crash would
            before = [await remote.run("lexical", request, {}) for _ in workers]
            pids = [await worker.__ray_call__.remote(lambda self: os.getpid()) for worker in workers]
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            outcomes = []
            for _ in range(2 * len(workers)):
                try:
                    outcomes.append(await remote.run("lexical", request, {}))
                except errors.Unavailable:  # a call that raced the death
                    outcomes.append(None)
            new_pids = [await worker.__ray_call__.remote(lambda self: os.getpid()) for worker in workers]
            return before, outcomes, pids, new_pids
        finally:
            await remote.close()

    before, outcomes, pids, new_pids = asyncio.run(run())
    assert not set(pids) & set(new_pids)  # every worker was replaced
    # Each worker answers again, with the same hits as before it died.
    assert [o.hits for o in outcomes[-len(before) :]] == [b.hits for b in before]


def test_exact_scan_agrees_with_lancedb_vector_search(stack, demo_collection):
    from sounding.models.client import ModelsClient

    async def run():
        models = ModelsClient(stack.settings.models.address)
        exact = await ChunkReader.open(stack.settings.store_location, exact_scan_max_chunks=10_000)
        lance = await ChunkReader.open(stack.settings.store_location, exact_scan_max_chunks=0)
        try:
            out = []
            for query in QUERIES:
                vector = (await models.embed([query]))[0]
                out.append(
                    (
                        await exact.vector_search(DEMO, vector, 6),
                        await lance.vector_search(DEMO, vector, 6),
                    )
                )
            return out
        finally:
            await models.close()

    for exact_hits, lance_hits in asyncio.run(run()):
        assert [h.document_id for h in exact_hits] == [h.document_id for h in lance_hits]
        np.testing.assert_allclose([h.score for h in exact_hits], [h.score for h in lance_hits], atol=1e-5)


def test_a_local_ray_runtimes_workers_listen_on_loopback(stack, ray_runtime):
    async def run():
        remote = await RayExecutor.open(ray_executor_config(stack.settings))
        try:
            return [await worker.address.remote() for worker in remote._workers]
        finally:
            await remote.close()

    assert {host for host, _ in asyncio.run(run())} == {"127.0.0.1"}


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the worker closes the connection, having sent nothing more."""
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), seconds) == b""
    return time.monotonic() - started


def test_the_worker_channel_closes_strangers_replays_and_silence(stack, ray_runtime):
    """A real Ray strategy worker: a recorded handshake replayed, a wrong proof and a silent
    client are each closed (before any call is read; the silent one at the handshake's timeout), and the
    worker still serves its orchestrator afterwards."""
    import ray

    secret = secrets.token_bytes(32)
    worker = ray.remote(num_cpus=0)(StrategyWorker).remote(runner_config(stack.settings), secret, "127.0.0.1")

    async def run():
        host, port = await worker.address.remote()
        recorded = bytearray()

        async def recording_proxy(client_reader, client_writer):
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)

            async def pump(source, sink, record):
                while data := await source.read(65536):
                    if record:
                        recorded.extend(data)
                    sink.write(data)
                sink.close()

            await asyncio.gather(
                pump(client_reader, upstream_writer, True), pump(upstream_reader, client_writer, False)
            )

        proxy = await asyncio.start_server(recording_proxy, "127.0.0.1", 0)
        proxied = proxy.sockets[0].getsockname()[:2]

        async def locate(address=proxied):
            return address

        asking = worker_pb2.WorkerCall(calls_in_flight=worker_pb2.CallsInFlightCall())
        orchestrator = ChannelClient(locate, secret)
        assert (await orchestrator.call(asking)).calls_in_flight == 0
        await orchestrator.close()
        proxy.close()

        reader, writer = await asyncio.open_connection(host, port)
        await reader.readexactly(channel.NONCE_BYTES)
        writer.write(bytes(recorded))  # the recorded handshake and call
        replay_closed = await _closed_within(reader, 60)

        reader, writer = await asyncio.open_connection(host, port)
        await reader.readexactly(channel.NONCE_BYTES)
        writer.write(secrets.token_bytes(channel.NONCE_BYTES + channel.TAG_BYTES))
        wrong_closed = await _closed_within(reader, 60)

        reader, writer = await asyncio.open_connection(host, port)
        await reader.readexactly(channel.NONCE_BYTES)
        silent_closed = await _closed_within(reader, 60)

        again = ChannelClient(lambda: _located(host, port), secret)
        try:
            return (
                len(recorded),
                replay_closed,
                wrong_closed,
                silent_closed,
                (await again.call(asking)).calls_in_flight,
            )
        finally:
            await again.close()

    try:
        recorded_bytes, replay_s, wrong_s, silent_s, in_flight = asyncio.run(run())
    finally:
        ray.kill(worker)
    assert recorded_bytes > channel.NONCE_BYTES + channel.TAG_BYTES  # the handshake and a call
    # Refused on reading the proof, not left to the handshake's timeout; silence is not waited out.
    assert replay_s < channel.HANDSHAKE_TIMEOUT_S and wrong_s < channel.HANDSHAKE_TIMEOUT_S
    assert silent_s < 60
    assert in_flight == 0


async def _located(host: str, port: int) -> tuple[str, int]:
    return host, port
