"""An orchestrator's life: it refuses a data directory another one serves, reports NOT_SERVING
from the moment it drains, lets calls in flight finish and refuses new ones."""

import json
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sounding.config import ModelsSettings, Settings
from sounding.stack import Stack
from sounding_client import Ask, Belief, Client, Final, SoundingError, StrategyResult

from .conftest import DEMO_CORPUS, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def own_orchestrator(stack, tmp_path):
    """An orchestrator of its own (data directory, port, Ray runtime) beside the session's
    sidecar."""
    settings = Settings(
        data_dir=tmp_path,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=stack.settings.models.address),
    )
    env = {
        "SOUNDING_LIMITS__TRANSPORT__DRAIN_GRACE_S": "20",
        # HyDE's generation (64 tokens) takes longer than this on 2 cores; dense and lexical do not.
        "SOUNDING_LIMITS__RETRIEVE__ARM_TIMEOUT_S": "0.5",
    }
    running = Stack(settings, env=env, log_dir=tmp_path / "logs")
    running.start_orchestrator()
    yield running
    running.stop()


def health_status(address: str) -> str:
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def test_a_second_orchestrator_on_the_same_data_directory_refuses_to_start(stack, client, demo_collection):
    env = {
        **stack.env,
        "SOUNDING_ADDRESS": f"127.0.0.1:{free_port()}",
    }
    started = time.monotonic()
    second = subprocess.run(
        [sys.executable, "-m", "sounding.cli", "serve"], env=env, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 1
    assert "another orchestrator" in second.stdout + second.stderr
    assert time.monotonic() - started < 60  # before starting Ray or opening the store
    assert client.retrieve_final("demo", "sound velocity in seawater", top_k=3).hits  # the first serves on


def test_sigterm_drains_calls_in_flight_and_refuses_new_ones(own_orchestrator):
    address = own_orchestrator.settings.address
    assert health_status(address) == "SERVING"
    with Client(address, timeout=30) as client:
        inquiry = client.inquire("bulls_and_cows")
        events = iter(inquiry)
        while not isinstance(next(events), Ask):
            pass
        process = own_orchestrator.terminate_orchestrator()
        deadline = time.monotonic() + 10
        while health_status(address) == "SERVING":
            assert time.monotonic() < deadline, "still SERVING after SIGTERM"
            time.sleep(0.05)
        with Client(address, timeout=5) as newcomer, pytest.raises(SoundingError) as refused:
            newcomer.create_collection("late")
        assert refused.value.code == grpc.StatusCode.UNAVAILABLE
        assert process.poll() is None  # the open inquiry holds the drain
        inquiry.answer("0 0")  # the call in flight goes on
        following = next(events)
        assert isinstance(following, Belief) and following.turn == 1
        inquiry.close()
    assert process.wait(timeout=20) == 0  # exits once its last call ended, before the grace


def test_an_arm_past_its_timeout_is_named_in_the_final_and_the_others_result_stands(own_orchestrator):
    documents = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    with Client(own_orchestrator.settings.address, timeout=60) as client:
        client.create_collection("degrade")
        list(client.ingest("degrade", documents, batch_size=6))
        events = list(
            client.retrieve(
                "degrade", "how do ships measure depth", top_k=3, arms=["dense", "lexical", "hyde"]
            )
        )
    final = events[-1]
    assert isinstance(final, Final) and len(final.hits) == 3
    assert [(f.arm, f.code) for f in final.failed_arms] == [("hyde", "DEADLINE_EXCEEDED")]
    assert {e.arm for e in events if isinstance(e, StrategyResult)} == {"dense", "lexical"}
