"""The tool-use observers' non-blocking contract, against real in-process gRPC servers (one that
records what it receives, one that holds every call until the test lets it go) and a port nobody
serves. No verdict reads how fast the machine is: a call that would not return by itself stands in
for a slow one, so what returns at all was not waiting for it."""

import asyncio
import contextlib
import inspect
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from sounding_api.sounding.v1 import sounding_pb2
from sounding_client import AsyncClient, AsyncToolUseObserver, Client, ToolUseObserver

pytestmark = pytest.mark.unit


class Recorder:
    """An Observe that records each tool-use event; a holding one answers only once `release` is
    set (the server's teardown sets it)."""

    def __init__(self, holding: bool = False):
        self.release = threading.Event()
        if not holding:
            self.release.set()
        self.requests: list[str] = []
        self.calls = 0

    def observe(self, request_iterator, context):
        self.calls += 1
        received = [
            item.tool_use.request
            for m in request_iterator
            for item in (m.batch.observations if m.WhichOneof("observation") == "batch" else (m,))
        ]
        self.release.wait()
        self.requests.extend(received)
        return sounding_pb2.ObserveResponse(recorded=len(received))


@contextlib.contextmanager
def serving(recorder: Recorder) -> Iterator[str]:
    """A server for `recorder` at the yielded address; its held calls are let go on the way out."""
    server, address = serve(recorder)
    try:
        yield address
    finally:
        recorder.release.set()
        server.stop(None)


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


def wait_for_calls(recorder: Recorder, calls: int) -> None:
    deadline = time.monotonic() + 60
    while recorder.calls < calls:
        assert time.monotonic() < deadline, "the observer's worker never called Observe"
        time.sleep(0.001)


def observe_in_a_thread(observer: ToolUseObserver, count: int) -> bool:
    """Whether `count` observe calls all returned; made in a thread so that a call that blocks
    fails the test (after a minute) instead of hanging it."""
    caller = threading.Thread(
        target=lambda: [observer.observe("tools", f"request {i}", "shell") for i in range(count)],
        daemon=True,
    )
    caller.start()
    caller.join(60)
    return not caller.is_alive()


def test_observe_returns_while_the_worker_is_stuck_in_a_call_and_drops_on_a_full_queue():
    # The spec's non-blocking handoff: observe only enqueues (dropping when full), so it returns
    # while the worker's call never does.
    recorder = Recorder(holding=True)
    with serving(recorder) as address, Client(address, timeout=30) as client:
        observer = ToolUseObserver(client, queue_size=100, batch_size=1, call_timeout_s=30)
        observer.observe("tools", "request held", "shell")
        wait_for_calls(recorder, 1)
        assert observe_in_a_thread(observer, 20_000), "observe blocked on the call in flight"
        assert (observer.sent, observer.dropped) == (0, 20_000 - 100)
        observer.close(timeout=0.1)
    assert (observer.sent, observer.dropped + observer.failed) == (0, 20_001)
    assert observer_threads() == []


def test_observe_returns_with_the_server_stopped():
    with Client(unserved_address(), timeout=1) as client:
        observer = ToolUseObserver(client, queue_size=100_000)
        assert observe_in_a_thread(observer, 20_000), "observe blocked on an unreachable server"
        observer.close(timeout=0.2)
    assert observer.sent == 0 and observer.dropped + observer.failed == 20_000
    assert observer_threads() == []


def test_a_full_queue_drops_and_counts():
    recorder = Recorder(holding=True)
    with serving(recorder) as address, Client(address, timeout=30) as client:
        observer = ToolUseObserver(client, queue_size=10, batch_size=1, call_timeout_s=30)
        observer.observe("tools", "request 0", "shell")
        wait_for_calls(recorder, 1)  # the worker holds one event, in its call
        for i in range(1, 100):
            observer.observe("tools", f"request {i}", "shell")
        dropped_while_open = observer.dropped
        observer.close(timeout=0.1)
    assert dropped_while_open == 100 - 1 - 10
    assert (observer.sent, observer.dropped) == (0, 100)
    assert observer_threads() == []


def test_close_flushes_what_is_queued_and_leaves_no_thread():
    recorder = Recorder()
    with serving(recorder) as address, Client(address, timeout=30) as client:
        observer = ToolUseObserver(client, batch_size=16, flush_interval_s=30)
        for i in range(100):
            observer.observe("tools", f"request {i}", "search", success=True)
        observer.close(timeout=60)
    assert recorder.requests == [f"request {i}" for i in range(100)]
    assert (observer.sent, observer.dropped, observer.failed) == (100, 0, 0)
    assert recorder.calls >= 100 // 16
    assert observer_threads() == []


def test_close_cancels_what_it_cannot_send_within_its_timeout():
    # The call in flight never answers by itself: close returning at all means it was cancelled.
    recorder = Recorder(holding=True)
    with serving(recorder) as address, Client(address, timeout=30) as client:
        observer = ToolUseObserver(client, batch_size=10, flush_interval_s=0.01, call_timeout_s=300)
        for i in range(50):
            observer.observe("tools", f"request {i}", "search")
        wait_for_calls(recorder, 1)
        closing = threading.Thread(target=observer.close, kwargs={"timeout": 0.5}, daemon=True)
        closing.start()
        closing.join(60)
        assert not closing.is_alive(), "close waited for a call that never answers"
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

    async def run(address: str):
        async with AsyncClient(address, timeout=30) as client:
            observer = AsyncToolUseObserver(client, batch_size=8)
            for i in range(40):
                observer.observe("tools", f"request {i}", "search")
            sent_before_yielding = recorder.calls
            await observer.close(timeout=60)
            await observer.close(timeout=60)
            observer.observe("tools", "after close", "search")
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            return observer, sent_before_yielding, tasks

    # observe is a plain call that only enqueues: nothing is sent until the loop gets control.
    assert not inspect.iscoroutinefunction(AsyncToolUseObserver.observe)
    with serving(recorder) as address:
        observer, sent_before_yielding, tasks = asyncio.run(run(address))
    assert sent_before_yielding == 0
    assert recorder.requests == [f"request {i}" for i in range(40)]
    assert (observer.sent, observer.dropped, observer.failed) == (40, 0, 0)
    assert tasks == []


def test_the_async_observer_cancels_what_it_cannot_send_within_its_timeout():
    recorder = Recorder(holding=True)

    async def run(address: str):
        async with AsyncClient(address, timeout=30) as client:
            observer = AsyncToolUseObserver(client, batch_size=10, call_timeout_s=300)
            for i in range(30):
                observer.observe("tools", f"request {i}", "search")
            await asyncio.wait_for(observer.close(timeout=0.5), 60)
            return observer

    with serving(recorder) as address:
        observer = asyncio.run(run(address))
    assert observer.sent == 0 and observer.dropped == 30
