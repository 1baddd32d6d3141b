"""The TypeScript client against the live stack: `clients/typescript/livetest` (built by `make
ts-client`) ingests, streams a Retrieve, observes, meets a Calibrate refusal and a field
violation, aborts a Retrieve and an inquiry mid-stream, plays bulls and cows to the answer,
routes a request to tools, teaches the router through the non-blocking observer and checks that
observer's contract with a server that never answers; it prints what it saw as JSON."""

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import ride_out_restart

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# The oldest Node.js the client states it runs on (package.json's engines, README.md).
NODE_MAJOR = 22


@pytest.fixture(scope="module")
def livetest() -> Path:
    subprocess.run(["make", "-s", "ts-client"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    return ROOT / "clients" / "typescript" / "build" / "livetest" / "livetest" / "livetest.js"


@pytest.fixture(scope="module")
def node(livetest) -> str:
    """The node `make ts-client` builds the client with: the oldest major version it states."""
    path = str(ROOT / "build" / "node22" / "bin" / "node")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    assert int(version.strip().lstrip("v").split(".")[0]) == NODE_MAJOR, version
    return path


def test_the_typescript_client_does_every_call_against_the_stack(stack, livetest, node):
    ran = subprocess.run(
        [node, str(livetest), "--address", stack.settings.address, "--collection", "ts-client"],
        capture_output=True,
        text=True,
        # Generous (it waits up to 5 minutes for the learner), and under the 20-minute deadline its
        # calls carry: a call left open would keep node alive past this.
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["ingested"] == 3
    assert seen["events_before_final"][0] == "plan" and "strategyResult" in seen["events_before_final"]
    assert seen["top_hit"] == "lead" and seen["recorded"] == 1
    assert (seen["calibrate_code"], seen["calibrate_reason"]) == ("FAILED_PRECONDITION", "TOO_FEW_OUTCOMES")
    assert (seen["invalid_code"], seen["invalid_fields"]) == ("INVALID_ARGUMENT", ["name"])
    assert (seen["over_limit_code"], seen["over_limit_fields"]) == ("INVALID_ARGUMENT", ["top_k"])
    assert seen["retrieve_cancel_code"] == "CANCELED"
    assert seen["asks_before_cancel"] == 2 and seen["resumed_after_cancel"]
    assert seen["answer"] == "5281" and seen["stopping_reason"] == "CONFIDENCE_REACHED"
    assert seen["route_before"] != "search_web" and seen["route_after"] == "search_web"
    assert seen["observer_sent"] == 4 and seen["tool_events_processed"] == 4
    # The observer's contract (the spec's non-blocking hand-off: observe only queues, a full queue
    # drops) with a server that takes every call and holds it for longer than this test waits:
    # all 10,000 calls returned while the first batch was held (none sent or failed yet), so none
    # waited on the network, whatever the machine's speed; the queue of 1,000 refuses the rest;
    # nothing is recorded; and the program finished, so close aborted what was held rather than
    # waiting out its hour-long timeout.
    assert seen["observe_calls"] == 10000 and seen["silent_settled_while_observing"] == 0, seen
    assert seen["silent_dropped_on_full"] == 9000, seen
    assert seen["silent_sent"] == 0 and seen["silent_dropped_or_failed"] == 10000, seen


def test_the_typescript_client_resumes_an_inquiry_whose_server_restarted(stack, livetest, node, tmp_path):
    """Its orchestrator drains (handing the stream back) and starts again while the game waits
    at its second question: the client resumes the session by itself, turns applied once."""
    seen = ride_out_restart(
        stack, tmp_path, [node, str(livetest), "--ride-out", "--secret", "2580", "--address"]
    )
    assert seen["answer"] == "2580" and seen["resumes"] >= 1
    assert seen["turns"] == list(range(1, len(seen["turns"]) + 1))
