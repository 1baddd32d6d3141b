import time

import pytest
from sounding_bench import crashes, load

pytestmark = pytest.mark.unit


def test_every_failed_call_is_kept_with_its_times_and_message():
    ledger = load.Ledger()
    started = time.perf_counter() - 0.25
    ledger.failed("Retrieve", started, RuntimeError("worker gone"))
    ledger.record("Retrieve", time.perf_counter())
    (failure,) = ledger.failures
    assert failure["code"] == "RuntimeError" and failure["message"] == "worker gone"
    assert 0.2 < failure["ended"] - failure["started"] < 5
    assert [code for _, _, code in ledger.outcomes] == ["RuntimeError", "OK"]


def _checks(*timeline: tuple[float, str]) -> list[tuple[float, str, float]]:
    return [(t, outcome, 0.001) for t, outcome in timeline]


def test_health_that_reported_the_loss_served_again_at_its_first_serving_after_the_last_report():
    checks = _checks((9, "OK"), (11, "OK"), (12, "NOT_SERVING"), (13, "NOT_SERVING"), (14, "OK"), (15, "OK"))
    assert crashes.serving_again(checks, "sidecar", since=10, ready_at=12.5, settle_s=30) == 14
    # a Retrieve that succeeded later than health's SERVING is when it served again
    assert crashes.serving_again(checks, "sidecar", since=10, ready_at=14.5, settle_s=30) == 14.5
    # still reporting the loss at the last check: not known yet
    assert crashes.serving_again(checks[:4], "sidecar", since=10, ready_at=12.5, settle_s=30) is None


def test_health_that_never_reported_the_loss_must_stay_serving_for_the_settling_time():
    quiet = _checks(*((float(t), "OK") for t in range(10, 40)))
    assert crashes.serving_again(quiet, "worker", since=10, ready_at=12, settle_s=20) == 12
    assert crashes.serving_again(quiet[:20], "worker", since=10, ready_at=12, settle_s=20) is None
    # a failed check after the successor was ready restarts the settling
    blip = [*quiet[:10], (20.0, "UNAVAILABLE", 2.0), *quiet[11:]]
    assert crashes.serving_again(blip, "worker", since=10, ready_at=12, settle_s=15) == 21
    # for the orchestrator any failure is the loss itself
    assert crashes.serving_again(blip, "orchestrator", since=10, ready_at=12, settle_s=15) == 21
