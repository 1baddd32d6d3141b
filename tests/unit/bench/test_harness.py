"""The harnesses' shared helpers."""

import socket
import threading

import pytest
from rich.console import Console
from sounding.settings.config import Settings
from sounding_bench import harness
from sounding_bench.harness import run_concurrently

pytestmark = pytest.mark.unit


def test_every_item_runs_and_each_end_is_reported():
    seen, ends = [], []
    lock = threading.Lock()

    def work(a, b):
        with lock:
            seen.append(a + b)

    run_concurrently(work, [(1, 2), (3, 4), (5, 6)], 2, lambda: ends.append(1))
    assert sorted(seen) == [3, 7, 11] and len(ends) == 3


def test_a_failure_cancels_the_items_not_begun_and_is_raised():
    started = []
    later = threading.Event()  # items after the failing one wait for it

    def work(i):
        started.append(i)
        if i == 1:
            raise SystemExit(143)  # as a SIGTERM arrives
        if i > 1:
            later.wait(60)

    before = set(threading.enumerate())
    with pytest.raises(SystemExit):
        run_concurrently(work, [(i,) for i in range(100)], 1, lambda: None)
    later.set()
    for worker in set(threading.enumerate()) - before:  # what was not cancelled would run first
        worker.join(60)
    # The one worker may have begun the item after the failure before it was raised; no other.
    assert started[:2] == [0, 1] and len(started) <= 3


def test_a_run_that_starts_its_own_stack_takes_free_ports_whatever_the_environment(monkeypatch):
    monkeypatch.setenv("SOUNDING_ADDRESS", "127.0.0.1:50051")
    monkeypatch.setenv("SOUNDING_MODELS__ADDRESS", "127.0.0.1:50052")
    own = harness.run_settings()
    ports = {own.address, own.models.address}
    assert len(ports) == 2 and not ports & {"127.0.0.1:50051", "127.0.0.1:50052"}
    assert all(p.startswith("127.0.0.1:") for p in ports)
    # Pointed at a running stack, its sidecar is where the configuration says.
    assert harness.run_settings("10.0.0.9:50051").models.address == "127.0.0.1:50052"


def test_a_run_on_a_stack_started_elsewhere_says_so_on_the_console_and_in_its_provenance(monkeypatch):
    monkeypatch.setattr(harness, "_stacks", [])
    console = Console(record=True, width=200)
    with harness.serving(Settings(), "10.0.0.9:50051", console) as address:
        assert address == "10.0.0.9:50051"
    assert "on the stack at 10.0.0.9:50051, started elsewhere" in console.export_text()
    assert harness.provenance(Settings())["stacks"] == [{"own": False, "address": "10.0.0.9:50051"}]


def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice():
    ports = [harness.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(20000 <= port < min(32768, harness._ephemeral_floor()) for port in ports)


def test_a_port_something_listens_on_is_not_handed_out(monkeypatch):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        taken = listener.getsockname()[1]
        listener.listen()
        monkeypatch.setattr(harness, "_ASSIGNED_PORTS", range(taken, taken + 1))
        monkeypatch.setattr(harness, "_handed_out", set())
        monkeypatch.setattr(harness, "_ephemeral_floor", lambda: 65536)
        with pytest.raises(RuntimeError, match="no free loopback port"):
            harness.free_port()


def test_where_the_ephemeral_range_leaves_no_room_any_free_port_is_taken(monkeypatch):
    monkeypatch.setattr(harness, "_ephemeral_floor", lambda: 1024)
    port = harness.free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))  # it was free
