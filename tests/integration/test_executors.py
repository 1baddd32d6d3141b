"""Congruence: the same arm calls through the in-process executor and the Ray executor, and the
exact in-memory dense scan against LanceDB's own vector search, give the same rankings."""

import asyncio

import numpy as np
import pytest
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
