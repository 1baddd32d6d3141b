import asyncio

import numpy as np
import pytest
from sounding.models.client import ModelsClient

pytestmark = pytest.mark.integration


def test_embed_matches_the_in_process_model_and_batches_concurrent_callers(stack):
    from sounding.models.embedder import TorchEmbedder

    texts = [f"sentence number {i} about ocean depth" for i in range(40)]

    async def run():
        models = ModelsClient(stack.settings.models.address)
        try:
            together = await asyncio.gather(*(models.embed([t]) for t in texts))
            return np.concatenate(together), await models.embedder_info()
        finally:
            await models.close()

    vectors, (model, dimension) = asyncio.run(run())
    reference = TorchEmbedder("cpu").encode(texts)
    assert vectors.shape == (40, 384) == (len(texts), dimension)
    assert "MiniLM" in model
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, reference, atol=1e-4)


def test_embed_rejects_an_empty_request(stack):
    import grpc
    from sounding.runtime import errors

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
    """Batched rows, padded or sharing a prompt's prefill, decode greedily as they do alone."""
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
            # five rows, three prompts: the repeated ones share their prefill
            together = await asyncio.gather(*(generate(models, p) for p in prompts + prompts[:2]))
            stopped = await generate(models, "Count from one to ten, one number per line.", stop=("3",))
            return alone, together, stopped
        finally:
            await models.close()

    alone, together, (stopped_text, stopped_reason) = asyncio.run(run())
    assert together == alone + alone[:2]
    assert all(text for text, _ in alone)
    assert "3" not in stopped_text and stopped_reason == "stop"


def _models_call(stack, call):
    async def run():
        models = ModelsClient(stack.settings.models.address)
        try:
            return await call(models)
        finally:
            await models.close()

    return asyncio.run(run())


@pytest.mark.slow
def test_entail_gives_a_distribution_per_pair_and_batches_concurrent_callers(stack):
    pairs = [
        ("A man is playing a guitar on stage.", "A man is performing music."),
        ("A man is playing a guitar on stage.", "The man is asleep in his bed."),
        ("Two dogs run across a field.", "The dogs are brown."),
    ]

    async def call(models):
        alone = await models.entail(pairs, timeout=600)
        together = await asyncio.gather(*(models.entail([p], timeout=600) for p in pairs))
        return alone, np.concatenate(together)

    alone, together = _models_call(stack, call)
    assert alone.shape == (3, 3)
    np.testing.assert_allclose(alone.sum(axis=1), 1.0, atol=1e-5)
    assert (alone >= 0).all()
    # Batched with other callers or alone, a pair gets the same probabilities.
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_entail_and_cluster_reject_empty_requests_naming_the_field(stack):
    from sounding.runtime import errors

    with pytest.raises(errors.InvalidArgument) as entail:
        _models_call(stack, lambda models: models.entail([]))
    assert entail.value.field == "pairs"
    with pytest.raises(errors.InvalidArgument) as cluster:
        _models_call(stack, lambda models: models.cluster([]))
    assert cluster.value.field == "texts"
    with pytest.raises(errors.InvalidArgument) as threshold:
        _models_call(stack, lambda models: models.cluster(["a"], distance_threshold=3.0))
    assert threshold.value.field == "distance_threshold"


@pytest.mark.slow
def test_cluster_groups_paraphrases_and_entailment_only_refines_embedding_clusters(stack):
    texts = [
        "The butler killed the victim with a candlestick.",
        "The victim was killed by the butler using a candlestick.",
        "Paris is the capital of France.",
        "France's capital city is Paris.",
        "The butler did not kill the victim.",
        "PARIS is the capital of France!",
    ]

    async def call(models):
        return (
            await models.cluster(texts, "exact"),
            await models.cluster(texts, "embedding"),
            await models.cluster(texts, "entailment", timeout=600),
        )

    exact, embedding, entailment = _models_call(stack, call)
    assert exact == [0, 1, 2, 3, 4, 2]
    assert embedding[0] == embedding[1] and embedding[2] == embedding[3] == embedding[5]
    assert embedding[0] != embedding[2]
    # Entailment clusters never join texts that embedding clusters keep apart.
    for i in range(len(texts)):
        for j in range(len(texts)):
            if entailment[i] == entailment[j]:
                assert embedding[i] == embedding[j]
    # Labels are numbered in order of first appearance.
    assert [label for i, label in enumerate(entailment) if label not in entailment[:i]] == list(
        range(max(entailment) + 1)
    )
