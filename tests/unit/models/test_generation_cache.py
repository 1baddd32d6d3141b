import asyncio
import sqlite3

import pytest
from sounding.models.generation_cache import CachedGenerator
from sounding.models.generators import GenerationParams, Piece

pytestmark = pytest.mark.unit


class CountingGenerator:
    model_name = "counting"

    def __init__(self, seconds_per_piece: float = 0.0):
        self.calls = 0
        self.seconds_per_piece = seconds_per_piece

    async def stream(self, messages, params, flow=""):
        self.calls += 1
        words = messages[-1]["content"].split()
        for index, word in enumerate(words):
            await asyncio.sleep(self.seconds_per_piece)
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


def test_an_entry_serves_only_requests_of_its_scope(tmp_path):
    inner = CountingGenerator()
    cached = CachedGenerator(inner, "m", tmp_path / "g.sqlite", max_entries=10)
    messages = [{"role": "user", "content": "what did acme ask"}]
    collect(cached, messages, GenerationParams(cache_scope="acme"))
    (acme_hit,) = collect(cached, messages, GenerationParams(cache_scope="acme"))
    globex = collect(cached, messages, GenerationParams(cache_scope="globex"))
    assert inner.calls == 2  # globex's request was decoded afresh, not answered from acme's entry
    assert all(p.cached_decode_ms == 0.0 for p in globex) and text(globex) == text([acme_hit])


def test_a_hit_carries_the_time_decoding_took_and_a_fresh_generation_none(tmp_path):
    cached = CachedGenerator(CountingGenerator(0.05), "m", tmp_path / "g.sqlite", max_entries=10)
    messages = [{"role": "user", "content": "one two three"}]
    fresh = collect(cached, messages, GenerationParams())
    (hit,) = collect(cached, messages, GenerationParams())
    assert all(p.cached_decode_ms == 0.0 for p in fresh)
    assert 150 <= hit.cached_decode_ms < 60_000  # three 50 ms tokens, however slowly


def test_a_cache_written_before_decode_times_were_kept_is_upgraded_in_place(tmp_path):
    path = tmp_path / "g.sqlite"
    messages = [{"role": "user", "content": "alpha beta"}]
    legacy = sqlite3.connect(path)
    legacy.execute(
        "CREATE TABLE generations (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
        "finish_reason TEXT NOT NULL, stored INTEGER NOT NULL)"
    )
    key = CachedGenerator(CountingGenerator(), "m", tmp_path / "other.sqlite", 10).key(
        messages, GenerationParams()
    )
    legacy.execute("INSERT INTO generations VALUES (?, 'old text', 'stop', 1)", (key,))
    legacy.commit()
    legacy.close()
    inner = CountingGenerator()
    cached = CachedGenerator(inner, "m", path, 10)
    (hit,) = collect(cached, messages, GenerationParams())
    assert (hit.text, hit.cached_decode_ms, inner.calls) == ("old text", 0.0, 0)
    collect(cached, [{"role": "user", "content": "new words"}], GenerationParams())
    (again,) = collect(cached, [{"role": "user", "content": "new words"}], GenerationParams())
    assert again.cached_decode_ms > 0


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
