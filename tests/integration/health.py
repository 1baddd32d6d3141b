"""Measuring the orchestrator's health latency while a test does something to it."""

from __future__ import annotations

import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


class HealthProbe:
    """Checks the orchestrator's health every `interval_s` on a channel of its own, in a thread,
    keeping each answer's latency (a failed or late check counts as its timeout)."""

    def __init__(self, address: str, interval_s: float = 0.01, timeout_s: float = 1.0):
        self._address, self._interval_s, self._timeout_s = address, interval_s, timeout_s
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with grpc.insecure_channel(self._address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            check(health_pb2.HealthCheckRequest(), timeout=10)  # connected before measuring
            while not self._stop.wait(self._interval_s):
                started = time.perf_counter()
                try:
                    check(health_pb2.HealthCheckRequest(), timeout=self._timeout_s)
                    self.latencies.append(time.perf_counter() - started)
                except grpc.RpcError:
                    self.latencies.append(self._timeout_s)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)
