import asyncio

import pytest
from sounding.models.generation_cache import CachedGenerator
from sounding.models.generators import GenerationParams, Piece

pytestmark = pytest.mark.unit


class CountingGenerator:
    model_name = "counting"

    def __init__(self):
        self.calls = 0

    async def stream(self, messages, params):
        self.calls += 1
        words = messages[-1]["content"].split()
        for index, word in enumerate(words):
            yield Piece(word + " ", "stop" if index == len(words) - 1 else "")


def collect(generator, messages, params):
    async def run():
        return [p async for p in generator.stream(messages, params)]

    return asyncio.run(run())


def text(pieces):
    return "".join(p.text for p in pieces), pieces[-1].finish_reason


def test_a_repeated_greedy_request_is_answered_from_the_cache(tmp_path):
    inner = CountingGenerator()
    cached = CachedGenerator(inner, "m", tmp_path / "g.sqlite", max_entries=10)
    messages = [{"role": "user", "content": "one two three"}]
    first = collect(cached, messages, GenerationParams())
    second = collect(cached, messages, GenerationParams())
    assert inner.calls == 1
    assert text(first) == text(second) == ("one two three ", "stop")
    assert len(second) == 1


def test_the_cache_survives_a_restart(tmp_path):
    messages = [{"role": "user", "content": "alpha beta"}]
    collect(
        CachedGenerator(CountingGenerator(), "m", tmp_path / "g.sqlite", 10), messages, GenerationParams()
    )
    inner = CountingGenerator()
    pieces = collect(CachedGenerator(inner, "m", tmp_path / "g.sqlite", 10), messages, GenerationParams())
    assert inner.calls == 0 and text(pieces) == ("alpha beta ", "stop")


@pytest.mark.parametrize(
    "params", [GenerationParams(temperature=0.7), GenerationParams(seed=3)], ids=["sampled", "seeded"]
)
def test_non_deterministic_requests_are_never_cached(tmp_path, params):
    inner = CountingGenerator()
    cached = CachedGenerator(inner, "m", tmp_path / "g.sqlite", 10)
    messages = [{"role": "user", "content": "x y"}]
    collect(cached, messages, params)
    collect(cached, messages, params)
    assert inner.calls == 2


def test_limits_and_model_identity_are_part_of_the_key(tmp_path):
    inner = CountingGenerator()
    path = tmp_path / "g.sqlite"
    messages = [{"role": "user", "content": "x y"}]
    collect(CachedGenerator(inner, "m", path, 10), messages, GenerationParams(max_new_tokens=5))
    collect(CachedGenerator(inner, "m", path, 10), messages, GenerationParams(max_new_tokens=6))
    collect(CachedGenerator(inner, "other", path, 10), messages, GenerationParams(max_new_tokens=5))
    collect(CachedGenerator(inner, "m", path, 10), messages, GenerationParams(max_new_tokens=5, stop=("y",)))
    assert inner.calls == 4


def test_an_abandoned_generation_is_not_stored(tmp_path):
    inner = CountingGenerator()
    cached = CachedGenerator(inner, "m", tmp_path / "g.sqlite", 10)
    messages = [{"role": "user", "content": "a b c d"}]

    async def first_piece_only():
        stream = cached.stream(messages, GenerationParams())
        await stream.__anext__()
        await stream.aclose()

    asyncio.run(first_piece_only())
    collect(cached, messages, GenerationParams())
    assert inner.calls == 2


def test_the_oldest_entries_are_evicted_beyond_the_limit(tmp_path):
    inner = CountingGenerator()
    cached = CachedGenerator(inner, "m", tmp_path / "g.sqlite", max_entries=2)
    for word in ("a", "b", "c"):
        collect(cached, [{"role": "user", "content": word}], GenerationParams())
    collect(cached, [{"role": "user", "content": "c"}], GenerationParams())
    assert inner.calls == 3
    collect(cached, [{"role": "user", "content": "a"}], GenerationParams())
    assert inner.calls == 4
