import time

import pytest
from sounding.evaluation import load

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
