import asyncio

import pytest
from sounding.models.generators import GenerationParams
from sounding.models.local_generator import LocalGenerator
from sounding.settings.config import ModelsSettings

# The [models] extra's torch: absent where the unit tests run without it (make test-newer-python).
pytest.importorskip("torch")

pytestmark = [pytest.mark.unit, pytest.mark.slow]

PROMPTS = ["Name three fruits.", "What is a lighthouse? Answer in one sentence.", "Count to five."]
STORY = "A keeper lived in a lighthouse on a rock, lit the lamp at dusk and logged every ship. "
# Prompts sharing a long prefix with different rests, as an inquiry state's revision prompts do.
REVISIONS = [STORY + q for q in ("Where did the keeper live?", "When was the lamp lit?", "What was logged?")]


async def _texts(generator: LocalGenerator, prompts: list[str], params: GenerationParams) -> list[str]:
    async def one(prompt: str) -> str:
        pieces = [p.text async for p in generator.stream([{"role": "user", "content": prompt}], params)]
        return "".join(pieces)

    return list(await asyncio.gather(*(one(p) for p in prompts)))


@pytest.fixture(scope="module")
def model_dir():
    return ModelsSettings().cache_dir


@pytest.mark.parametrize("prompts", [PROMPTS, REVISIONS], ids=["template-prefix", "long-prefix"])
def test_rows_sharing_a_prefill_decode_as_each_prompt_does_alone(model_dir, prompts):
    """Five rows, three prompts, in one batch (the wait outlasts the submissions): the prefix
    the prompts share and the repeated prompts are encoded once, and greedy decoding gives each
    row the text its prompt gives alone."""
    params = GenerationParams(max_new_tokens=16)

    async def run():
        alone = LocalGenerator(model_dir, "cpu", max_batch_size=1, max_wait_ms=0)
        solo = [(await _texts(alone, [p], params))[0] for p in prompts]
        together = LocalGenerator(model_dir, "cpu", max_batch_size=5, max_wait_ms=2000)
        batched = await _texts(together, prompts + prompts[:2], params)
        return solo, batched

    solo, batched = asyncio.run(run())
    assert all(solo)
    assert batched == solo + solo[:2]


def test_sampled_rows_of_one_prompt_are_drawn_independently(model_dir):
    params = GenerationParams(max_new_tokens=12, temperature=1.0, top_p=1.0)

    async def run():
        generator = LocalGenerator(model_dir, "cpu", max_batch_size=6, max_wait_ms=2000)
        return await _texts(generator, ["Write a short poem about the sea."] * 6, params)

    samples = asyncio.run(run())
    assert len(set(samples)) > 1
