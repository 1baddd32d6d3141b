import threading
import time

import grpc
import pytest
from sounding_bench.health import HealthWatch
from sounding_client import SoundingError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Each Retrieve's deadline, generous for a busy machine: a Retrieve whose sidecar dies must end
# UNAVAILABLE long before it (a sidecar that is down fails the call at once).
DEADLINE_S = 120.0
# However busy the machine, nothing here takes this long unless it hangs.
PATIENCE_S = 300.0


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_killing_the_sidecar_mid_retrieve_gives_unavailable_then_recovers(stack, client, demo_collection):
    outcomes: list[tuple[str, float]] = []
    stop = threading.Event()
    served, refused = threading.Event(), threading.Event()

    def keep_retrieving():
        while not stop.is_set():
            started = time.monotonic()
            try:
                client.retrieve_final("demo", "sound velocity in seawater", top_k=5, timeout=DEADLINE_S)
                outcomes.append(("OK", time.monotonic() - started))
                served.set()
            except SoundingError as error:
                outcomes.append((error.code.name, time.monotonic() - started))
                if error.code == grpc.StatusCode.UNAVAILABLE:
                    refused.set()

    worker = threading.Thread(target=keep_retrieving, daemon=True)
    worker.start()
    try:
        assert served.wait(PATIENCE_S), f"no Retrieve succeeded before the kill: {outcomes[-5:]}"
        stack.kill_models()
        assert refused.wait(PATIENCE_S), f"no Retrieve was refused without a sidecar: {outcomes[-5:]}"
    finally:
        stop.set()
        worker.join(timeout=DEADLINE_S + 60)
    assert not worker.is_alive(), "a Retrieve hung past its deadline"
    codes = [code for code, _ in outcomes]
    assert set(codes) <= {"OK", "UNAVAILABLE"}, codes
    assert max(seconds for _, seconds in outcomes) < DEADLINE_S
    # Checks may be slow on a busy machine; only the status they answer counts here.
    with HealthWatch(stack.settings.address, timeout_s=60) as health:
        assert wait_for(lambda: any(c[1] == "NOT_SERVING" for c in health.checks), PATIENCE_S), (
            "still SERVING without a sidecar"
        )

    stack.start_models(timeout_s=PATIENCE_S)
    with HealthWatch(stack.settings.address, timeout_s=60) as health:
        assert wait_for(health.serving.is_set, PATIENCE_S), "not SERVING again after the sidecar came back"
    deadline = time.monotonic() + PATIENCE_S
    while True:
        try:
            final = client.retrieve_final("demo", "sound velocity in seawater", top_k=5, timeout=DEADLINE_S)
            break
        except SoundingError as error:
            assert error.code == grpc.StatusCode.UNAVAILABLE
            assert time.monotonic() < deadline, "Retrieve did not recover after the sidecar restarted"
            time.sleep(0.2)
    assert final.hits[0].document_id == "echo-sounder"
