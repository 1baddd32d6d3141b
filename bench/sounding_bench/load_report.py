"""What a load run's records add up to (`sounding_bench.load`): latency percentiles, resident
memory per process life, and the failed calls outside and within the kills' disruptions."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np


def memory_summary(samples: list[dict], settle_s: float = 60.0) -> dict[str, dict]:
    """Per process ("name pid": a restarted process is another one): its resident set at the
    first sample `settle_s` into its life, the largest after, and their ratio."""
    series: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for row in samples:
        for name, value in row.items():
            if name != "t":
                series[name].append((row["t"], value))
    out = {}
    for name, points in series.items():
        first = points[0][0]
        after = [(t, v) for t, v in points if t - first >= settle_s]
        if not after:
            continue
        level, peak = after[0][1], max(v for _, v in after)
        out[name] = {
            "mib_after_first_minute": round(level / 2**20, 1),
            "mib_peak_after": round(peak / 2**20, 1),
            "ratio": round(peak / level, 3),
        }
    return out


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"count": 0}
    ms = np.asarray(values) * 1000
    return {
        "count": len(values),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "max_ms": round(float(ms.max()), 1),
    }


def disrupted(t: float, spans: Sequence[tuple[float, float]]) -> bool:
    """Whether time `t` falls in a kill's disruption (from the kill until the stack serves
    again and `RECONNECT_S` more), compared unrounded."""
    return any(since <= t <= until for since, until in spans)


def tally_failures(
    outcomes: Sequence[tuple[float, str, str]], spans: Sequence[tuple[float, float]]
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """The failed calls by (rpc, code): those outside every disruption, and those within one."""
    outside: Counter[tuple[str, str]] = Counter()
    within: Counter[tuple[str, str]] = Counter()
    for t, rpc, code in outcomes:
        if code != "OK":
            (within if disrupted(t, spans) else outside)[(rpc, code)] += 1
    return outside, within
