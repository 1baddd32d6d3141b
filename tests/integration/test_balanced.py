"""Three orchestrators on one store behind Envoy (`sounding_bench.balancer`), on a local
directory and on object storage (moto), racing to create one collection (one wins); then mixed
traffic through Envoy, and inquiry games through Envoy or the client's own round robin, while
each orchestrator in turn is restarted gracefully and one is then killed -9. No read fails,
nothing acknowledged is lost, every inquiry session is resumed elsewhere and completed with no
step applied twice, and an outcome sent again is recorded once."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from sounding.stack import Stack
from sounding_bench.balancer import Envoy
from sounding_client import (
    Ask,
    Client,
    InquiryAnswer,
    InquiryPolicy,
    RetrievalOutcome,
    SoundingError,
    Tool,
    ToolUse,
)

from .conftest import replica
from .test_inquiry import oracle

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Envoy checks health every 0.5 s: a draining orchestrator takes new calls for 2 s more.
DRAINING = {"SOUNDING_LIMITS__TRANSPORT__DRAIN_DELAY_S": "2"}
SECRETS = ("4096", "7031", "2580")
TOOLS = [
    Tool("get_tide", "tide tables high water low water"),
    Tool("get_depth", "sounding line depth fathoms"),
]
# Generous for a busy machine: a session a killed orchestrator held is free after its 10 s hold.
RESUME_WITHIN_S = 300.0


def log_text(i: int) -> str:
    return f"Log {i}: marker{i:04d}q read {i % 40 + 3} fathoms at the buoy."


class Traffic(threading.Thread):
    """Ingest, Retrieve, Observe (sent again while the server is unavailable), a tool use and
    two reads, in turn through the balancer until stopped; what was acknowledged and what failed."""

    def __init__(self, address: str):
        super().__init__(name="traffic", daemon=True)
        self.address = address
        self.stopping = threading.Event()
        self.failed_reads: list[tuple[str, SoundingError]] = []
        self.failed_writes: list[tuple[str, str]] = []
        self.sent_documents: list[str] = []
        self.documents: list[str] = []  # acknowledged
        self.sent_outcomes = 0
        self.outcomes: list[RetrievalOutcome] = []  # acknowledged
        self.sent_tool_uses = 0
        self.tool_uses = 0  # acknowledged
        self.rounds = 0

    def run(self) -> None:
        with Client(self.address, timeout=120) as client:
            while not self.stopping.is_set():
                self.round(client, self.rounds)
                self.rounds += 1

    def read(self, name: str, call):
        try:
            return call()
        except SoundingError as error:
            self.failed_reads.append((name, error))
            return None

    def round(self, client: Client, i: int) -> None:
        document = {
            "id": f"log-{i}",
            "text": f"Log {i}: marker{i:04d}q read {i % 40 + 3} fathoms at the buoy.",
        }
        self.sent_documents.append(document["id"])
        try:
            list(client.ingest("fleet", [document]))
            self.documents.append(document["id"])
        except SoundingError as error:
            self.failed_writes.append(("ingest", error.code.name))
        final = self.read(
            "retrieve", lambda: client.retrieve_final("fleet", f"buoy {i % 40 + 3} fathoms", top_k=3)
        )
        if final is not None and final.hits:
            self.observe(client, RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,)))
        use = ToolUse("kit", f"how deep is it at buoy {i}", "shell")
        self.sent_tool_uses += 1
        try:
            self.tool_uses += client.observe([use]).recorded
        except SoundingError as error:
            self.failed_writes.append(("tool use", error.code.name))
        self.read("get collection", lambda: client.get_collection("fleet"))
        self.read("route tool", lambda: client.route_tool("kit", f"depth at buoy {i}"))

    def observe(self, client: Client, outcome: RetrievalOutcome) -> None:
        """Sent again while the server is unavailable: once recorded, it is refused ALREADY_EXISTS."""
        self.sent_outcomes += 1
        for _ in range(8):
            try:
                result = client.observe([outcome])
            except SoundingError as error:
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    self.failed_writes.append(("observe", error.code.name))
                    return
                time.sleep(0.5)
                continue
            codes = [r.code for r in result.rejected]
            if result.recorded == 1 or codes == ["ALREADY_EXISTS"]:
                self.outcomes.append(outcome)
            else:  # its Retrieve's record died with a killed orchestrator before it was written
                self.failed_writes.append(("observe", ",".join(codes)))
            return
        self.failed_writes.append(("observe", "UNAVAILABLE"))


def drive(address: str, secret: str, arrived: list[threading.Barrier], go: list[threading.Event]):
    """Play a game through the balancer, one answer per phase: at each phase's Ask, wait for the
    phase's restart to be done. (events, resumes)."""
    events = []
    balancing = address.startswith("ipv4:")  # the client's own round robin over the orchestrators
    with Client(address, timeout=600, resume_within_s=RESUME_WITHIN_S, round_robin=balancing) as client:
        inquiry = client.inquire("bulls_and_cows", InquiryPolicy(question_selection="eig"))
        phase = 0
        for event in inquiry:
            events.append(event)
            if isinstance(event, Ask):
                if phase < len(go):
                    arrived[phase].wait()
                    go[phase].wait()
                    phase += 1
                inquiry.answer(oracle(secret, event.question))
        for late in range(phase, len(go)):  # a game won early lets the phases go on without it
            arrived[late].wait()
        return events, inquiry.resumes


def client_round_robin(addresses: list[str]) -> str:
    """The client's own balancing: one target naming every orchestrator (as a headless
    Service's DNS name does), spread round robin."""
    return "ipv4:" + ",".join(addresses)


@pytest.fixture(params=["local directory", "object storage"])
def setup(request, tmp_path):
    """(data directory of the replicas, environment, whether the games balance on their own)
    for a store of either kind: on the local directory the games reach the orchestrators through
    the client's round robin, the rest of the traffic through Envoy; on object storage, all of it
    through Envoy."""
    if request.param == "local directory":
        return lambda name: tmp_path / "shared", dict(DRAINING), True
    _, _, env = request.getfixturevalue("object_store")
    return lambda name: tmp_path / name, {**env, **DRAINING}, False


def create_once(address: str) -> bool:
    """Create the collection `fleet` on this orchestrator: True, or False if another did first."""
    with Client(address) as client:
        try:
            client.create_collection("fleet")
            return True
        except SoundingError as error:
            assert error.code == grpc.StatusCode.ALREADY_EXISTS
            return False


def test_three_orchestrators_behind_a_balancer_ride_out_rolling_restarts_and_a_kill(stack, setup, tmp_path):
    data_dir, env, games_balance_themselves = setup
    replicas: list[Stack] = [replica(stack, data_dir(n), tmp_path / n / "logs", env) for n in "abc"]
    # Each in turn drained and started again, then one killed -9 and started again.
    phases = [(r, "restart") for r in replicas] + [(replicas[1], "kill")]
    arrived = [threading.Barrier(len(SECRETS) + 1) for _ in phases]
    go = [threading.Event() for _ in phases]
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda r: r.start_orchestrator(), replicas))
            addresses = [r.settings.address for r in replicas]
            created = list(pool.map(create_once, addresses))  # all three at once
        assert sorted(created) == [False, False, True]  # exactly one created it
        games_reach = client_round_robin(addresses) if games_balance_themselves else None
        with Envoy(addresses, tmp_path / "envoy") as balancer, Client(balancer.address) as client:
            client.put_tools("kit", TOOLS)
            traffic = Traffic(balancer.address)
            traffic.start()
            with ThreadPoolExecutor(len(SECRETS)) as pool:
                games = [pool.submit(drive, games_reach or balancer.address, s, arrived, go) for s in SECRETS]
                for (running, how), barrier, done in zip(phases, arrived, go, strict=True):
                    barrier.wait(timeout=600)  # every game waits at an Ask, its stream open
                    if how == "restart":
                        running.stop()  # SIGTERM: it drains
                    else:
                        running.kill_orchestrator()
                    running.start_orchestrator()
                    done.set()
                played = [game.result(timeout=900) for game in games]
            rounds = traffic.rounds
            while traffic.rounds < rounds + 3:  # some rounds with all three back
                time.sleep(0.2)
            traffic.stopping.set()
            traffic.join(timeout=300)

            assert traffic.failed_reads == []
            document_count = client.get_collection("fleet").document_count
            assert len(traffic.documents) <= document_count <= len(traffic.sent_documents)
            for document in traffic.documents:
                i = int(document.split("-")[1])
                found = client.retrieve_final("fleet", log_text(i), top_k=5)
                assert document in [hit.document_id for hit in found.hits]
            observations = client.strategy_metrics().observations
            assert len(traffic.outcomes) <= observations <= traffic.sent_outcomes
            sent_again = client.observe(traffic.outcomes)  # to whichever replica Envoy picks
            assert sent_again.recorded == 0
            assert {r.code for r in sent_again.rejected} == {"ALREADY_EXISTS"}
            assert client.strategy_metrics().observations == observations
            tool_events = client.tool_metrics("kit").events
            assert traffic.tool_uses <= tool_events <= traffic.sent_tool_uses
    finally:
        for running in replicas:
            running.stop()

    assert traffic.rounds > len(phases)  # traffic ran through the restarts
    for (events, resumes), secret in zip(played, SECRETS, strict=True):
        assert isinstance(events[-1], InquiryAnswer) and events[-1].answer == secret
        turns = [e.turn for e in events if isinstance(e, Ask)]
        assert turns == list(range(1, len(turns) + 1))  # each step once: no turn repeated or skipped
        assert resumes >= 1  # its orchestrator went away at least once while it was open
