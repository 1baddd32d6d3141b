import asyncio
from pathlib import Path

import pytest
from sounding.models.server import ModelServicer, ModelServicerConfig
from sounding.settings.config import ModelsSettings
from sounding.settings.limits import ModelsLimits

pytestmark = pytest.mark.unit


class SlowLoads:
    """Stands in for ModelServicer._load_nli: counts loads; each takes `delay_s`, the first
    `failures` of them fail."""

    def __init__(self, delay_s: float, failures: int = 0):
        self.started = 0
        self.delay_s = delay_s
        self.failures = failures

    async def __call__(self):
        self.started += 1
        await asyncio.sleep(self.delay_s)
        if self.started <= self.failures:
            raise RuntimeError("the training failed")
        return ("model", "batcher")


def servicer(loads: SlowLoads) -> ModelServicer:
    config = ModelServicerConfig(ModelsSettings(), ModelsLimits(), Path("generations.sqlite"))
    s = ModelServicer(embedder=None, batcher=None, encode_thread=None, config=config)  # type: ignore[arg-type]
    s._load_nli = loads  # type: ignore[method-assign]
    return s


def test_a_caller_that_gives_up_does_not_stop_the_load_and_callers_share_one():
    async def scenario():
        loads = SlowLoads(delay_s=0.2)
        s = servicer(loads)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(s.nli(), timeout=0.05)  # a deadline shorter than the training
        first, second = await asyncio.gather(s.nli(), s.nli())
        assert first == second == ("model", "batcher")
        return loads.started

    assert asyncio.run(scenario()) == 1


def test_a_failed_load_is_tried_again_by_the_next_call():
    async def scenario():
        loads = SlowLoads(delay_s=0.0, failures=1)
        s = servicer(loads)
        with pytest.raises(RuntimeError, match="failed"):
            await s.nli()
        assert await s.nli() == ("model", "batcher")
        return loads.started

    assert asyncio.run(scenario()) == 2


def test_closing_during_a_load_cancels_it():
    async def scenario():
        s = servicer(SlowLoads(delay_s=10.0))
        waiting = asyncio.create_task(s.nli())
        await asyncio.sleep(0.01)
        await s.close()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return s._nli_load

    load = asyncio.run(scenario())
    assert load is not None and load.cancelled()
