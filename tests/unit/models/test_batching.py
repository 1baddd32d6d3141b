import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from sounding.models.batching import MicroBatcher

pytestmark = pytest.mark.unit


class FakeEncoder:
    """Encodes text t as [len(t), call number] and records batch sizes; a holding one sets
    `encoding` when its first batch starts and finishes it only once `release` is set."""

    def __init__(self, holding: bool = False):
        self.calls: list[list[str]] = []
        self.encoding = threading.Event()
        self.release = threading.Event()
        if not holding:
            self.release.set()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.encoding.set()
        self.release.wait(60)
        self.calls.append(list(texts))
        return np.array([[len(t), len(self.calls)] for t in texts], dtype=np.float32)


async def _with_batcher(encoder, max_batch_size, max_wait_ms, body):
    thread = ThreadPoolExecutor(max_workers=1)
    batcher = MicroBatcher(encoder, max_batch_size, max_wait_ms, thread)
    batcher.start()
    try:
        return await body(batcher)
    finally:
        await batcher.close()
        thread.shutdown()


def test_concurrent_callers_share_one_batch_and_get_their_own_rows():
    encoder = FakeEncoder()

    async def body(batcher):
        return await asyncio.gather(
            batcher.submit(["a", "bb"]), batcher.submit(["ccc"]), batcher.submit(["dddd", "e"])
        )

    results = asyncio.run(_with_batcher(encoder, 64, 20.0, body))
    assert len(encoder.calls) == 1
    assert [r[:, 0].tolist() for r in results] == [[1, 2], [3], [4, 1]]


def test_batches_respect_max_batch_size():
    encoder = FakeEncoder()

    async def body(batcher):
        return await asyncio.gather(*(batcher.submit(["x", "y"]) for _ in range(5)))

    results = asyncio.run(_with_batcher(encoder, 4, 20.0, body))
    assert [len(c) for c in encoder.calls] == [4, 4, 2]
    assert all(r.shape == (2, 2) for r in results)


def test_a_large_request_is_spread_over_batches_and_a_small_one_waits_one_batch_at_most():
    encoder = FakeEncoder(holding=True)

    async def body(batcher):
        large = asyncio.ensure_future(batcher.submit([f"l{i}" for i in range(10)]))
        await asyncio.to_thread(encoder.encoding.wait, 60)  # the first 4 of the large request
        small = asyncio.ensure_future(batcher.submit(["small"]))
        await asyncio.sleep(0)  # it waits now
        encoder.release.set()
        return await large, await small

    large, small = asyncio.run(_with_batcher(encoder, 4, 0.0, body))
    assert encoder.calls[0] == ["l0", "l1", "l2", "l3"]
    assert "small" in encoder.calls[1] and len(encoder.calls[1]) == 4  # shares the next batch
    assert int(small[0, 1]) == 2
    assert large[:, 0].tolist() == [2.0] * 10 and len(encoder.calls) == 3  # rows back in order
    assert [t for call in encoder.calls for t in call if t.startswith("l")] == [f"l{i}" for i in range(10)]


def test_requests_arriving_during_a_batch_form_the_next_one():
    encoder = FakeEncoder(holding=True)

    async def body(batcher):
        first = asyncio.ensure_future(batcher.submit(["a"]))
        await asyncio.to_thread(encoder.encoding.wait, 60)
        rest = [asyncio.ensure_future(batcher.submit([t])) for t in ("b", "c", "d")]
        await asyncio.sleep(0)
        encoder.release.set()
        return await asyncio.gather(first, *rest)

    results = asyncio.run(_with_batcher(encoder, 64, 0.0, body))
    assert encoder.calls == [["a"], ["b", "c", "d"]]
    assert [int(r[0, 1]) for r in results] == [1, 2, 2, 2]


def test_a_cancelled_caller_is_dropped_and_a_failure_reaches_only_its_batch():
    calls = []

    def encode(texts):
        calls.append(list(texts))
        if "boom" in texts:
            raise RuntimeError("model failed")
        return np.zeros((len(texts), 2), dtype=np.float32)

    async def body(batcher):
        doomed = asyncio.ensure_future(batcher.submit(["cancelled"]))
        await asyncio.sleep(0)
        doomed.cancel()
        with pytest.raises(RuntimeError):
            await batcher.submit(["boom"])
        return await batcher.submit(["fine"])

    result = asyncio.run(_with_batcher(encode, 64, 5.0, body))
    assert result.shape == (1, 2)
    assert ["cancelled"] not in calls and all("cancelled" not in c for c in calls)
