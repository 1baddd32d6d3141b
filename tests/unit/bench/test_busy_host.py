import os
import time

import pytest
from sounding_bench.busy_host import background_load


@pytest.mark.unit
def test_no_load_starts_nothing():
    with background_load(0.0) as record:
        assert record is None


@pytest.mark.unit
@pytest.mark.parametrize("duty_cycle", [-0.1, 1.0])
def test_a_duty_cycle_outside_0_1_is_refused(duty_cycle):
    with pytest.raises(ValueError), background_load(duty_cycle):
        pass


def _children_cpu_seconds() -> float:
    return os.times().children_user + os.times().children_system


@pytest.mark.slow
def test_the_load_process_spins_its_share_and_is_gone_after():
    before = _children_cpu_seconds()
    started = time.monotonic()
    with background_load(0.5) as record:
        assert record == {"processes": 1, "duty_cycle": 0.5, "period_ms": 10.0}
        time.sleep(1.5)
    wall = time.monotonic() - started
    used = _children_cpu_seconds() - before  # counted once the process has been waited for
    # It spun (python's start-up alone is a few hundredths), and no more than its half of the
    # time it ran plus start-up; how much of its half it got depends on what else runs.
    assert 0.1 <= used <= 0.5 * wall + 0.3
