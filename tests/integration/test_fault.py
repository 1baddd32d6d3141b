import threading
import time

import grpc
import pytest
from sounding.evaluation.health import HealthWatch
from sounding_client import SoundingError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEADLINE_S = 10.0


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

    def keep_retrieving():
        while not stop.is_set():
            started = time.monotonic()
            try:
                client.retrieve_final("demo", "sound velocity in seawater", top_k=5, timeout=DEADLINE_S)
                outcomes.append(("OK", time.monotonic() - started))
            except SoundingError as error:
                outcomes.append((error.code.name, time.monotonic() - started))

    worker = threading.Thread(target=keep_retrieving)
    worker.start()
    try:
        time.sleep(1.0)
        stack.kill_models()
        time.sleep(2.0)
    finally:
        stop.set()
        worker.join(timeout=DEADLINE_S + 5)
    assert not worker.is_alive(), "a Retrieve hung past its deadline"
    codes = [code for code, _ in outcomes]
    assert "OK" in codes and "UNAVAILABLE" in codes
    assert set(codes) <= {"OK", "UNAVAILABLE"}
    assert max(seconds for _, seconds in outcomes) < DEADLINE_S
    with HealthWatch(stack.settings.address) as health:
        assert wait_for(lambda: not health.serving.is_set() and health.checks, 10), (
            "still SERVING without a sidecar"
        )

    stack.start_models()
    with HealthWatch(stack.settings.address) as health:
        assert wait_for(health.serving.is_set, 20), "not SERVING again after the sidecar came back"
    deadline = time.monotonic() + 20
    while True:
        try:
            final = client.retrieve_final("demo", "sound velocity in seawater", top_k=5, timeout=DEADLINE_S)
            break
        except SoundingError as error:
            assert error.code == grpc.StatusCode.UNAVAILABLE
            assert time.monotonic() < deadline, "Retrieve did not recover after the sidecar restarted"
            time.sleep(0.2)
    assert final.hits[0].document_id == "echo-sounder"
