"""The throughput harness's pure parts: the closed loop on a clock each call advances (so what
it counts does not depend on the machine's speed), the figures and the ratios."""

import itertools
import threading

import pytest
from sounding_bench import throughput

pytestmark = pytest.mark.unit


class CallClock:
    """A clock that moves one second per call made, whatever the wall time."""

    def __init__(self):
        self.now = 0.0
        self._lock = threading.Lock()
        self.sent: list[str] = []

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def call(self, query: str) -> None:
        with self._lock:
            self.sent.append(query)
            self.now += 1.0
        if query == "bad":
            raise ValueError(query)


@pytest.mark.parametrize("clients", [1, 3])
def test_the_closed_loop_sends_back_to_back_until_its_time_is_up_and_counts_failures(clients):
    clock = CallClock()
    level = throughput.closed_loop(clock.call, ["a", "b", "bad"], clients, 30.0, clock)
    made = len(clock.sent)
    # Each call moves the clock a second: 30 calls use the time up; a client that read the clock
    # just before may still send one.
    assert 30 <= made <= 30 + clients - 1
    assert sorted(clock.sent) == sorted((["a", "b", "bad"] * made)[:made])
    assert level["failures"] == {"ValueError": clock.sent.count("bad")}
    assert level["answered"] == made - clock.sent.count("bad")
    assert level["clients"] == clients and level["qps"] == round(level["answered"] / level["seconds"], 2)


def test_the_clients_call_at_the_same_time():
    clock = CallClock()
    together = threading.Barrier(3, timeout=60)
    calls = itertools.count()

    def call(query: str) -> None:
        if next(calls) < 3:
            together.wait()  # broken unless the first three calls are in flight at once
        clock.call(query)

    level = throughput.closed_loop(call, ["a"], 3, 9.0, clock)
    assert level["failures"] == {} and level["answered"] >= 9


def test_a_level_with_nothing_answered_has_no_latency():
    assert throughput.summary([], 2.0, 4, {"UNAVAILABLE": 3}) == {
        "clients": 4,
        "answered": 0,
        "seconds": 2.0,
        "qps": 0.0,
        "p50_ms": None,
        "p99_ms": None,
        "failures": {"UNAVAILABLE": 3},
    }


def test_latency_percentiles_are_in_milliseconds():
    level = throughput.summary([0.010] * 99 + [1.0], 1.0, 1, {})
    assert level["p50_ms"] == 10.0 and 10.0 < level["p99_ms"] < 1000.0 and level["qps"] == 100.0


def test_the_limit_adds_an_encode_at_the_best_rate_to_a_search():
    assert throughput.hardware_limit(encodes_per_s=200.0, search_s=0.005) == pytest.approx(100.0)


def test_each_level_rotates_the_order_of_the_systems():
    orders = [throughput.rotated(throughput.SYSTEMS, i) for i in range(len(throughput.SYSTEMS))]
    assert [order[0] for order in orders] == list(throughput.SYSTEMS)
    assert all(sorted(order) == sorted(throughput.SYSTEMS) for order in orders)


def test_ratios_compare_the_default_with_the_peer_the_loop_off_and_the_limit():
    level = {
        "sounding_default": {"qps": 30.0},
        "sounding_loop_off": {"qps": 40.0},
        "lancedb_hybrid": {"qps": 20.0},
        "bm25s_minilm": {"qps": 25.0},
    }
    assert throughput.ratios({"16": level}, limit_qps=80.0) == {
        "16": {"default_over_hybrid": 1.5, "default_over_loop_off": 0.75, "loop_off_over_limit": 0.5}
    }
