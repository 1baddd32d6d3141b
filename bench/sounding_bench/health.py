"""Watching a server's health while something is done to it (the fuzz and load suites, tests)."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc


class HealthWatch:
    """Asks `grpc.health.v1.Health/Check` every `interval_s` on a channel and thread of its own,
    once connected; at least one check is kept, however soon the watch ends.
    Keeps each check as (time, outcome, latency): outcome "OK" (SERVING), "NOT_SERVING", or the
    failed call's code (its latency counted as `timeout_s`); `serving` is set while the latest
    check said SERVING."""

    def __init__(self, address: str, interval_s: float = 0.05, timeout_s: float = 2.0):
        self._address, self._interval_s, self._timeout_s = address, interval_s, timeout_s
        self.checks: list[tuple[float, str, float]] = []
        self.serving = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with grpc.insecure_channel(self._address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            request = health_pb2.HealthCheckRequest()
            try:
                check(request, timeout=30)  # connected before measuring
            except grpc.RpcError:
                pass
            while True:  # the first check is kept whenever the watch ends
                started = time.perf_counter()
                try:
                    status = check(request, timeout=self._timeout_s).status
                    outcome = "OK" if status == health_pb2.HealthCheckResponse.SERVING else "NOT_SERVING"
                    latency = time.perf_counter() - started
                except grpc.RpcError as error:
                    outcome, latency = error.code().name, self._timeout_s
                self.checks.append((time.time(), outcome, latency))
                (self.serving.set if outcome == "OK" else self.serving.clear)()
                if self._stop.wait(self._interval_s):
                    return

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def latencies(self) -> list[float]:
        return [latency for _, _, latency in self.checks]

    def summary(self) -> dict:
        values = np.asarray(self.latencies) * 1000
        return {
            "checks": len(values),
            "not_serving": sum(outcome != "OK" for _, outcome, _ in self.checks),
            "p50_ms": round(float(np.percentile(values, 50)), 1) if len(values) else None,
            "p99_ms": round(float(np.percentile(values, 99)), 1) if len(values) else None,
            "max_ms": round(float(values.max()), 1) if len(values) else None,
        }
