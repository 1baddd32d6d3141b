import asyncio

import numpy as np
import pytest
from sounding.models.client import ModelsClient

pytestmark = pytest.mark.integration


def test_embed_matches_the_in_process_model_and_batches_concurrent_callers(stack):
    from sounding.models.embedder import Embedder

    texts = [f"sentence number {i} about ocean depth" for i in range(40)]

    async def run():
        models = ModelsClient(stack.settings.models.address)
        try:
            together = await asyncio.gather(*(models.embed([t]) for t in texts))
            return np.concatenate(together), await models.embedder_info()
        finally:
            await models.close()

    vectors, (model, dimension) = asyncio.run(run())
    reference = Embedder("cpu").encode(texts)
    assert vectors.shape == (40, 384) == (len(texts), dimension)
    assert "MiniLM" in model
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, reference, atol=1e-4)


def test_embed_rejects_an_empty_request(stack):
    import grpc
    from sounding import errors

    async def run():
        models = ModelsClient(stack.settings.models.address)
        try:
            await models.embed([])
        finally:
            await models.close()

    with pytest.raises(errors.InvalidArgument):
        asyncio.run(run())
    assert grpc  # the sidecar answered INVALID_ARGUMENT, mapped to the domain error


@pytest.mark.slow
def test_generate_streams_smollm2_tokens(stack):
    async def run():
        models = ModelsClient(stack.settings.models.address)
        try:
            return [
                piece
                async for piece in models.generate(
                    [{"role": "user", "content": "What is the capital of France?"}],
                    max_new_tokens=12,
                    timeout=300,
                )
            ]
        finally:
            await models.close()

    pieces = asyncio.run(run())
    text = "".join(p.text for p in pieces)
    assert len([p for p in pieces if p.text]) >= 2, "tokens arrive as a stream, not at once"
    assert pieces[-1].finish_reason in {"stop", "length"}
    assert "Paris" in text
    assert pieces[-1].model == "SmolLM2-135M-Instruct"


@pytest.mark.slow
def test_concurrent_generations_are_batched_and_each_matches_its_solo_run(stack):
    prompts = ["Name three fruits.", "What is a lighthouse?", "Count to five."]

    async def generate(models, prompt, stop=()):
        pieces = [
            p
            async for p in models.generate(
                [{"role": "user", "content": prompt}], max_new_tokens=16, stop=stop, timeout=300
            )
        ]
        return "".join(p.text for p in pieces), pieces[-1].finish_reason

    async def run():
        models = ModelsClient(stack.settings.models.address)
        try:
            alone = [await generate(models, p) for p in prompts]
            together = await asyncio.gather(*(generate(models, p) for p in prompts))
            stopped = await generate(models, "Count from one to ten, one number per line.", stop=("3",))
            return alone, together, stopped
        finally:
            await models.close()

    alone, together, (stopped_text, stopped_reason) = asyncio.run(run())
    assert together == alone
    assert all(text for text, _ in alone)
    assert "3" not in stopped_text and stopped_reason == "stop"
