"""The tool-use observers' non-blocking contract, against real in-process gRPC servers (one that
records what it receives, one that is too slow to answer) and a port nobody serves."""

import asyncio
import socket
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest
from sounding_client import AsyncClient, AsyncToolUseObserver, Client, ToolUseObserver
from sounding_client.api.sounding.v1 import sounding_pb2

pytestmark = pytest.mark.unit


class Recorder:
    """An Observe that records each tool-use event, optionally sleeping before answering."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.requests: list[str] = []
        self.calls = 0

    def observe(self, request_iterator, context):
        self.calls += 1
        received = [m.tool_use.request for m in request_iterator]
        time.sleep(self.delay_s)
        self.requests.extend(received)
        return sounding_pb2.ObserveResponse(recorded=len(received))


def serve(recorder: Recorder) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    handler = grpc.stream_unary_rpc_method_handler(
        recorder.observe,
        sounding_pb2.ObserveRequest.FromString,
        sounding_pb2.ObserveResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("sounding.v1.SoundingService", {"Observe": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def unserved_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def observer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sounding-tool-observer"]


def test_observe_returns_within_100_microseconds_p99_with_the_server_stopped():
    with Client(unserved_address(), timeout=1) as client:
        observer = ToolUseObserver(client, queue_size=100_000)
        took = []
        for i in range(20_000):
            started = time.perf_counter()
            observer.observe("tools", f"request {i}", "shell")
            took.append(time.perf_counter() - started)
        observer.close(timeout=0.2)
    assert np.percentile(took, 99) < 100e-6
    assert observer.sent == 0 and observer.dropped + observer.failed == 20_000
    assert observer_threads() == []


def wait_for_calls(recorder: Recorder, calls: int) -> None:
    deadline = time.monotonic() + 5
    while recorder.calls < calls:
        assert time.monotonic() < deadline, "the observer's worker never called Observe"
        time.sleep(0.001)


def test_a_full_queue_drops_and_counts():
    recorder = Recorder(delay_s=3.0)
    server, address = serve(recorder)
    try:
        with Client(address, timeout=30) as client:
            observer = ToolUseObserver(client, queue_size=10, batch_size=1, call_timeout_s=30)
            observer.observe("tools", "request 0", "shell")
            wait_for_calls(recorder, 1)  # the worker holds one event, in its call
            for i in range(1, 100):
                observer.observe("tools", f"request {i}", "shell")
            dropped_while_open = observer.dropped
            observer.close(timeout=0.1)
    finally:
        server.stop(None)
    assert dropped_while_open == 100 - 1 - 10
    assert (observer.sent, observer.dropped) == (0, 100)
    assert observer_threads() == []


def test_close_flushes_what_is_queued_and_leaves_no_thread():
    recorder = Recorder()
    server, address = serve(recorder)
    try:
        with Client(address, timeout=5) as client:
            observer = ToolUseObserver(client, batch_size=16, flush_interval_s=30)
            for i in range(100):
                observer.observe("tools", f"request {i}", "search", success=True)
            started = time.perf_counter()
            observer.close(timeout=5)
            took = time.perf_counter() - started
    finally:
        server.stop(None)
    assert recorder.requests == [f"request {i}" for i in range(100)]
    assert (observer.sent, observer.dropped, observer.failed) == (100, 0, 0)
    assert recorder.calls >= 100 // 16
    assert took < 5 and observer_threads() == []


def test_close_cancels_what_it_cannot_send_within_its_timeout():
    recorder = Recorder(delay_s=3.0)
    server, address = serve(recorder)
    try:
        with Client(address, timeout=30) as client:
            observer = ToolUseObserver(client, batch_size=10, flush_interval_s=0.01, call_timeout_s=30)
            for i in range(50):
                observer.observe("tools", f"request {i}", "search")
            wait_for_calls(recorder, 1)  # a call in flight, which close must cancel
            started = time.perf_counter()
            observer.close(timeout=0.5)
            took = time.perf_counter() - started
    finally:
        server.stop(None)
    assert took < 1.5
    assert observer_threads() == []
    assert observer.sent == 0 and observer.dropped + observer.failed == 50


def test_closing_twice_and_observing_after_close_or_without_a_client_do_nothing():
    unconfigured = ToolUseObserver(None)
    unconfigured.observe("tools", "request", "shell")
    unconfigured.close()
    assert (unconfigured.sent, unconfigured.dropped) == (0, 0)
    with Client(unserved_address(), timeout=1) as client:
        observer = ToolUseObserver(client)
        observer.close(timeout=0.1)
        observer.close(timeout=0.1)
        observer.observe("tools", "request", "shell")
    assert observer.dropped == 0 and observer_threads() == []


def test_the_async_observer_flushes_on_close_and_leaves_no_task():
    recorder = Recorder()
    server, address = serve(recorder)

    async def run():
        async with AsyncClient(address, timeout=5) as client:
            observer = AsyncToolUseObserver(client, batch_size=8)
            took = []
            for i in range(40):
                started = time.perf_counter()
                observer.observe("tools", f"request {i}", "search")
                took.append(time.perf_counter() - started)
            await observer.close(timeout=5)
            await observer.close(timeout=5)
            observer.observe("tools", "after close", "search")
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            return observer, took, tasks

    try:
        observer, took, tasks = asyncio.run(run())
    finally:
        server.stop(None)
    assert recorder.requests == [f"request {i}" for i in range(40)]
    assert (observer.sent, observer.dropped, observer.failed) == (40, 0, 0)
    assert max(took) < 1e-3 and tasks == []


def test_the_async_observer_cancels_what_it_cannot_send_within_its_timeout():
    recorder = Recorder(delay_s=3.0)
    server, address = serve(recorder)

    async def run():
        async with AsyncClient(address, timeout=30) as client:
            observer = AsyncToolUseObserver(client, batch_size=10, call_timeout_s=30)
            for i in range(30):
                observer.observe("tools", f"request {i}", "search")
            started = time.perf_counter()
            await observer.close(timeout=0.5)
            return observer, time.perf_counter() - started

    try:
        observer, took = asyncio.run(run())
    finally:
        server.stop(None)
    assert took < 1.5
    assert observer.sent == 0 and observer.dropped == 30
