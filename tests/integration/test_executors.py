"""Congruence: the same arm calls through the in-process executor and the Ray executor, and the
exact in-memory dense scan against LanceDB's own vector search, give the same rankings. The Ray
executor's calls are cancelled on the workers, and survive a worker's death."""

import asyncio
import os
import signal
import uuid

import numpy as np
import pytest
from sounding import errors
from sounding.retrieval.executors import InProcessExecutor, RayExecutor
from sounding.retrieval.protocol import ArmRequest
from sounding.store.reader import ChunkReader

pytestmark = pytest.mark.integration

QUERIES = ["depth of water under a ship", "fusing rankings", "learning from rewards", "leadsman"]


@pytest.fixture(scope="module")
def ray_runtime():
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, num_cpus=2)
    yield
    ray.shutdown()


def test_in_process_and_ray_executors_agree(stack, demo_collection, ray_runtime):
    async def run():
        local = await InProcessExecutor.open(stack.settings)
        remote = await RayExecutor.open(stack.settings)
        try:
            pairs = []
            for query in QUERIES:
                for arm in ("dense", "lexical"):
                    request = ArmRequest("demo", query, 5)
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
        remote = await RayExecutor.open(stack.settings)
        try:

            async def running(count):
                return sum(await remote.calls_in_flight()) == count

            # `hyde` generates before it searches (seconds on a CPU); a new query misses the cache.
            request = ArmRequest("demo", f"how deep is the water {uuid.uuid4().hex}", 5, 60.0)
            call = asyncio.ensure_future(remote.run("hyde", request, {}))
            await _until(lambda: running(1))
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            await _until(lambda: running(0), timeout_s=5.0)
            return call.cancelled(), sum(await remote.calls_in_flight())
        finally:
            await remote.close()

    assert asyncio.run(run()) == (True, 0)


def test_a_ray_worker_that_dies_is_restarted_and_its_calls_resume(stack, demo_collection, ray_runtime):
    async def run():
        remote = await RayExecutor.open(stack.settings)
        request = ArmRequest("demo", "depth of water under a ship", 5)
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
        exact = await ChunkReader.open(stack.settings.store_uri, exact_scan_max_chunks=10_000)
        lance = await ChunkReader.open(stack.settings.store_uri, exact_scan_max_chunks=0)
        try:
            out = []
            for query in QUERIES:
                vector = (await models.embed([query]))[0]
                out.append(
                    (
                        await exact.vector_search("demo", vector, 6),
                        await lance.vector_search("demo", vector, 6),
                    )
                )
            return out
        finally:
            await models.close()

    for exact_hits, lance_hits in asyncio.run(run()):
        assert [h.document_id for h in exact_hits] == [h.document_id for h in lance_hits]
        np.testing.assert_allclose([h.score for h in exact_hits], [h.score for h in lance_hits], atol=1e-5)
