"""The harnesses' shared helpers."""

import threading

import pytest
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
