"""The Go client against the live stack: `clients/go/cmd/livetest` (built by `make go-client`)
ingests, streams a Retrieve, observes, meets a Calibrate refusal and a field violation, cancels
a Retrieve and an inquiry mid-stream, plays bulls and cows to the answer, routes a request to
tools, teaches the router through the non-blocking observer and checks that observer's contract
with a server that never answers; it prints what it saw as JSON."""

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import ride_out_restart

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def livetest() -> Path:
    subprocess.run(["make", "-s", "go-client"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    return ROOT / "build" / "go" / "livetest"


def test_the_go_client_does_every_call_against_the_stack(stack, livetest):
    ran = subprocess.run(
        [str(livetest), "-address", stack.settings.address, "-collection", "go-client", "-secret", "3910"],
        capture_output=True,
        text=True,
        timeout=900,  # generous, and longer than the program's own 10-minute deadline
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["ingested"] == 3
    assert seen["events_before_final"][0] == "plan" and "strategy_result" in seen["events_before_final"]
    assert seen["top_hit"] == "lead" and seen["recorded"] == 1
    assert (seen["calibrate_code"], seen["calibrate_reason"]) == ("FailedPrecondition", "TOO_FEW_OUTCOMES")
    assert (seen["invalid_code"], seen["invalid_fields"]) == ("InvalidArgument", ["name"])
    assert seen["retrieve_cancel_code"] == "Canceled"
    assert seen["asks_before_cancel"] == 2 and seen["resumed_after_cancel"]
    assert seen["answer"] == "3910" and seen["stopping_reason"] == "STOPPING_REASON_CONFIDENCE_REACHED"
    assert seen["route_before"] != "search_web" and seen["route_after"] == "search_web"
    assert seen["observer_sent"] == 4 and seen["tool_events_processed"] == 4
    # The observer's contract (the spec's non-blocking hand-off: Observe only queues, a full queue
    # drops) with a server that takes every call and holds it for longer than this test waits:
    # all 10,000 calls returned while the first batch was held (none sent or failed yet), so none
    # waited on the network, whatever the machine's speed; the queue of 1,000 refuses the rest
    # but for a batch (up to 64) the observer may have taken; nothing is recorded; and the program
    # finished, so Close cancelled what was held rather than waiting out its hour-long timeout.
    assert seen["observe_calls"] == 10000 and seen["silent_settled_while_observing"] == 0, seen
    assert 9000 - 64 <= seen["silent_dropped_on_full"] <= 9000, seen
    assert seen["silent_sent"] == 0 and seen["silent_dropped_or_failed"] == 10000, seen


def test_the_go_client_resumes_an_inquiry_whose_server_restarted_under_it(stack, livetest, tmp_path):
    """Its orchestrator drains (handing the stream back) and starts again while the game waits
    at its second question: the client resumes the session by itself, turns applied once."""
    seen = ride_out_restart(stack, tmp_path, [str(livetest), "-ride-out", "-secret", "2580", "-address"])
    assert seen["answer"] == "2580" and seen["resumes"] >= 1
    assert seen["turns"] == list(range(1, len(seen["turns"]) + 1))
