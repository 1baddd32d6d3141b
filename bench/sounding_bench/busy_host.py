"""A reproducible stand-in for a busy host: a process that keeps one core busy for a share of
every period (`duty_cycle`), so that latency ratios can be measured under load as well as on a
quiet machine."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

PERIOD_MS = 10.0

_BUSY_LOOP = """
import sys, time
busy, idle = float(sys.argv[1]), float(sys.argv[2])
while True:
    started = time.perf_counter()
    while time.perf_counter() - started < busy:
        pass
    time.sleep(idle)
"""


@contextmanager
def background_load(duty_cycle: float, period_ms: float = PERIOD_MS) -> Iterator[dict | None]:
    """While the block runs, one process spins `duty_cycle` of each `period_ms` and sleeps the
    rest (nothing when `duty_cycle` is 0). Yields the load's description for the result."""
    if not 0.0 <= duty_cycle < 1.0:
        raise ValueError("duty_cycle must be in [0, 1)")
    if duty_cycle == 0.0:
        yield None
        return
    busy_s = period_ms * duty_cycle / 1000
    idle_s = period_ms * (1 - duty_cycle) / 1000
    process = subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(busy_s), str(idle_s)])
    try:
        yield {"processes": 1, "duty_cycle": duty_cycle, "period_ms": period_ms}
    finally:
        process.kill()
        process.wait()
