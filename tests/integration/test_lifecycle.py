"""An orchestrator's life: it refuses a data directory another one serves, reports NOT_SERVING
from the moment it drains, lets calls in flight finish and refuses new ones."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sounding.settings.config import ModelsSettings, Settings
from sounding.stack import Stack
from sounding_client import Ask, Client, Final, SoundingError, StrategyResult

from .conftest import DEMO_CORPUS, SHORT_NLI_TRAINING, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


# However busy the machine, nothing here takes this long unless it hangs.
PATIENCE_S = 300.0


@pytest.fixture
def own_orchestrator(stack, tmp_path):
    """An orchestrator of its own (data directory, port, Ray runtime) beside the session's
    sidecar."""
    settings = Settings(
        data_dir=tmp_path,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=stack.settings.models.address),
    )
    # A grace longer than the test waits for the exit: an exit within it is the drain ending.
    env = {"SOUNDING_LIMITS__TRANSPORT__DRAIN_GRACE_S": str(2 * PATIENCE_S)}
    running = Stack(settings, env=env, log_dir=tmp_path / "logs")
    try:
        running.start_orchestrator(timeout_s=PATIENCE_S)
        yield running
    finally:
        running.stop()


class _Silent(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        upstream = self.server
        assert isinstance(upstream, SilentUpstream)
        upstream.received.set()
        upstream.released.wait()  # then closes the connection without a response

    def log_message(self, *args):
        pass


class SilentUpstream(ThreadingHTTPServer):
    """An OpenAI-style generator endpoint on a free local port that takes every request and
    never answers it (until `released`)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Silent)
        self.received = threading.Event()
        self.released = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture
def stalled_generator_stack(tmp_path):
    """A stack of its own whose sidecar generates through an endpoint that never answers: a
    generating arm (HyDE) can never finish, and any other arm has a generous arm timeout."""
    upstream = SilentUpstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    settings = Settings(
        data_dir=tmp_path,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=f"127.0.0.1:{free_port()}"),
    )
    env = {
        "SOUNDING_MODELS__GENERATOR__BACKEND": "openai",
        "SOUNDING_MODELS__GENERATOR__OPENAI_BASE_URL": upstream.base_url,
        # The session stack's budget: its trained copy is reused (the NLI model is not used here).
        **SHORT_NLI_TRAINING,
        "SOUNDING_LIMITS__RETRIEVE__ARM_TIMEOUT_S": "30",
    }
    running = Stack(settings, env=env, log_dir=tmp_path / "logs")
    try:
        running.start_models(timeout_s=PATIENCE_S)
        running.start_orchestrator(timeout_s=PATIENCE_S)
        yield running, upstream
    finally:
        upstream.released.set()  # no generation is left for the sidecar to drain
        running.stop()
        upstream.shutdown()
        upstream.server_close()


def health_status(address: str) -> str:
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        except grpc.RpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def test_sigterm_drains_calls_in_flight_hands_inquiries_back_and_refuses_new_ones(own_orchestrator):
    address = own_orchestrator.settings.address
    assert health_status(address) == "SERVING"
    sent, release = threading.Event(), threading.Event()

    def documents():
        yield {"id": "first", "text": "A lead line is cast to sound the depth."}
        sent.set()  # the call is open and its first document on its way
        release.wait()  # the ingest stays in flight until the test releases it
        yield {"id": "second", "text": "An echo sounder times the echo from the seabed."}

    with Client(address, timeout=PATIENCE_S) as client, ThreadPoolExecutor(1) as pool:
        client.create_collection("drained")
        ingested = pool.submit(list, client.ingest("drained", documents(), batch_size=1))
        assert sent.wait(timeout=PATIENCE_S)
        inquiry = client.inquire("bulls_and_cows")
        events = iter(inquiry)
        while not isinstance(next(events), Ask):
            pass
        process = own_orchestrator.terminate_orchestrator()
        deadline = time.monotonic() + PATIENCE_S
        while (status := health_status(address)) != "NOT_SERVING":
            assert status == "SERVING", status
            assert time.monotonic() < deadline, "still SERVING after SIGTERM"
            time.sleep(0.05)
        with Client(address, timeout=60) as newcomer, pytest.raises(SoundingError) as refused:
            newcomer.create_collection("late")
        assert refused.value.code == grpc.StatusCode.UNAVAILABLE
        # The inquiry waiting for its answer is handed back at once, to resume elsewhere.
        with pytest.raises(SoundingError) as handed_back:
            next(events)
        assert handed_back.value.code == grpc.StatusCode.UNAVAILABLE
        assert handed_back.value.reason == "DRAINING"
        assert process.poll() is None  # the ingest in flight holds the drain
        release.set()  # the call in flight goes on
        assert ingested.result(timeout=PATIENCE_S)[-1].total_documents == 2
    # The grace is twice this wait: an exit within it is the drain ending with the last call.
    assert process.wait(timeout=PATIENCE_S) == 0
    own_orchestrator.start_orchestrator(timeout_s=PATIENCE_S)
    with Client(address, timeout=PATIENCE_S) as client:
        assert client.get_collection("drained").document_count == 2
        resumed = iter(client.resume_inquiry(inquiry.session_id))
        assert next(e for e in resumed if isinstance(e, Ask)).turn == 1  # the question it was on


def test_an_arm_past_its_timeout_is_named_in_the_final_and_the_others_result_stands(
    stalled_generator_stack,
):
    stack, upstream = stalled_generator_stack
    documents = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    with Client(stack.settings.address, timeout=PATIENCE_S) as client:
        client.create_collection("degrade")
        list(client.ingest("degrade", documents, batch_size=6))
        events = list(
            client.retrieve(
                "degrade", "how do ships measure depth", top_k=3, arms=["dense", "lexical", "hyde"]
            )
        )
    assert upstream.received.is_set(), "HyDE never asked the generator"
    final = events[-1]
    assert isinstance(final, Final) and len(final.hits) == 3
    assert [(f.arm, f.code) for f in final.failed_arms] == [("hyde", "DEADLINE_EXCEEDED")]
    assert {e.arm for e in events if isinstance(e, StrategyResult)} == {"dense", "lexical"}
