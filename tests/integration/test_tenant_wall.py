"""The tenant wall, tried as an attacker would (issue 46) against a live stack of its own: tokens
for the `default` tenant among others on the public port (plaintext, loopback), TLS and a token
on the sidecar's, the generator behind an OpenAI-style endpoint that answers 401 quoting its API
key. Each test names the attack it repeats; the property test generates requests of every RPC
and domain parameter from several tenants (`test_tenant_properties`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import psutil
import pytest
import trustme
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sounding.serving import auth
from sounding.settings.config import AuthSettings, ModelsSettings, Settings, TlsSettings
from sounding.stack import Stack
from sounding_client import Client, SoundingError, Tool

from . import raw_http2
from .conftest import SHORT_NLI_TRAINING, SLOW_MACHINE_DEADLINES, free_port, tls_environment, write_tokens

pytestmark = pytest.mark.integration

TENANTS = {"default": ("reader", "admin"), "acme": ("reader", "admin"), "globex": ("admin",)}
UPSTREAM_KEY = "sk-upstream-0f9e8d7c6b5a"


def documents(tenant: str) -> list[dict]:
    """Each tenant's documents carry its name in their ids and a word of its own in their text."""
    return [
        {"id": f"{tenant}-doc-{i}", "title": f"{tenant}mark {i}", "text": f"{tenant}mark {text}"}
        for i, text in enumerate(
            (
                "The reef lies two fathoms under the tide at the harbour mouth.",
                "A leadsman casts a weighted line to measure the depth of water.",
                "Sonar pulses echo from the sea floor and give its depth.",
            )
        )
    ]


@dataclasses.dataclass
class Wall:
    stack: Stack
    files: dict[str, Path]
    tokens: dict[str, str]
    sidecar_token: str

    def client(self, who: str) -> Client:
        return Client(self.stack.settings.address, timeout=60, token=self.tokens[who])

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.stack.log_dir.glob("*.log")))


class Upstream(BaseHTTPRequestHandler):
    """An OpenAI-style generator endpoint refusing every request, quoting the key it was sent."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = {
            "error": {"message": f"Incorrect API key provided: {UPSTREAM_KEY}", "type": "invalid_api_key"}
        }
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def wall(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wall")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    files = {"ca": tmp / "ca.pem", "cert": tmp / "server.pem", "key": tmp / "server.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["cert"]))
    server.private_key_pem.write_to_path(str(files["key"]))
    files["tokens"] = tmp / "tokens.toml"
    tokens = write_tokens(
        files["tokens"], [(tenant, role) for tenant, roles in TENANTS.items() for role in roles]
    )
    sidecar_token = auth.new_token()[0]
    files["sidecar_token"] = tmp / "sidecar.token"
    files["sidecar_token"].write_text(sidecar_token)
    files["upstream_key"] = tmp / "upstream.key"
    files["upstream_key"].write_text(UPSTREAM_KEY)
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()

    sidecar_tls = TlsSettings(cert_file=files["cert"], key_file=files["key"], ca_file=files["ca"])
    settings = Settings(
        data_dir=tmp / "data",
        address=f"127.0.0.1:{free_port()}",
        auth=AuthSettings(tokens_file=files["tokens"]),
        models=ModelsSettings(
            address=f"127.0.0.1:{free_port()}", tls=sidecar_tls, token_file=files["sidecar_token"]
        ),
    )
    env = {
        "SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]',
        "SOUNDING_AUTH__TOKENS_FILE": str(files["tokens"]),
        "SOUNDING_MODELS__TOKEN_FILE": str(files["sidecar_token"]),
        "SOUNDING_MODELS__GENERATOR__BACKEND": "openai",
        "SOUNDING_MODELS__GENERATOR__OPENAI_BASE_URL": f"http://127.0.0.1:{upstream.server_address[1]}/v1",
        "SOUNDING_MODELS__GENERATOR__OPENAI_API_KEY_FILE": str(files["upstream_key"]),
        **SHORT_NLI_TRAINING,
        **SLOW_MACHINE_DEADLINES,
        **tls_environment("SOUNDING_MODELS__TLS__", sidecar_tls),
    }
    stack = Stack(settings, env=env, log_dir=tmp / "logs")
    stack.start()
    wall = Wall(stack, files, tokens, sidecar_token)
    for tenant in TENANTS:
        with wall.client(f"{tenant}-admin") as admin:
            names = ("docs", "private") if tenant == "acme" else ("docs",)
            for name in names:
                admin.create_collection(name)
                list(admin.ingest(name, documents(tenant)))
    yield wall
    stack.stop()
    upstream.shutdown()


def _code(attempt) -> tuple[str, str]:
    try:
        attempt()
        return "OK", ""
    except SoundingError as error:
        return error.code.name, (error.fields or [""])[0]


def _whole(client, query: str) -> bool:
    """Whether a Retrieve of `query` answered with every arm."""
    try:
        return not client.retrieve_final("docs", query, top_k=1).failed_arms
    except SoundingError:
        return False


def test_the_default_tenant_cannot_reach_another_tenants_collection_by_its_key(wall):
    """Attack 1: `domain_parameters["collection"] = "acme.private"` from a default reader read
    acme's documents; Calibrate(QUERY_ADAPTER) told a default admin which collections exist."""
    with wall.client("default-reader") as reader, wall.client("default-admin") as admin:
        inquiries = {
            name: _code(
                lambda name=name: list(
                    reader.inquire(
                        "corpus",
                        domain_parameters={"collection": name},
                        context="The reef lies two fathoms down.",
                    )
                )
            )
            for name in ("acme.private", "acme.nothing", "private", "nothing")
        }
        calibrations = {
            name: _code(lambda name=name: list(admin.calibrate("query_adapter", collection=name)))
            for name in ("acme.private", "acme.nothing", "private", "nothing")
        }
    field = "start.domain_parameters.collection"
    assert inquiries == {
        "acme.private": ("INVALID_ARGUMENT", field),
        "acme.nothing": ("INVALID_ARGUMENT", field),
        "private": ("NOT_FOUND", field),
        "nothing": ("NOT_FOUND", field),
    }
    # Whether another tenant has a collection of that name is not told either.
    assert calibrations["acme.private"] == calibrations["acme.nothing"] == ("INVALID_ARGUMENT", "collection")
    assert calibrations["private"] == calibrations["nothing"] == ("NOT_FOUND", "collection")
    time.sleep(0.5)
    audit = [
        json.loads(line.split(" audit ", 1)[1]) for line in wall.logs().splitlines() if " audit {" in line
    ]
    refused = [
        (a["tenant"], a["role"], a["resource"], a["outcome"])
        for a in audit
        if a["method"].endswith("/Inquire") and a["tenant"] == "default"
    ]
    assert ("default", "reader", "collection=acme.private", "INVALID_ARGUMENT") in refused
    assert "acme-doc" not in wall.logs()


def test_unauthenticated_streams_cannot_starve_authenticated_calls(wall):
    """Attack 2: 256 health and reflection streams without a token took every call slot of both
    servers; the orchestrator then reported NOT_SERVING and Retrieves failed."""
    from sounding_bench import flood

    sidecar_credentials = grpc.ssl_channel_credentials(wall.files["ca"].read_bytes())

    async def attack():
        public_channel = grpc.aio.insecure_channel(wall.stack.settings.address)
        sidecar_channel = grpc.aio.secure_channel(wall.stack.settings.models.address, sidecar_credentials)
        try:
            public, held = await flood.open_streams(public_channel, 300)
            sidecar, more = await flood.open_streams(sidecar_channel, 300)
            # Authenticated calls while the flood's streams are held open.
            with wall.client("acme-reader") as reader:
                finals = [
                    await asyncio.to_thread(
                        reader.retrieve_final, "docs", f"how deep is the reef {i}", top_k=2
                    )
                    for i in range(20)
                ]
            await asyncio.sleep(3)  # two readiness probes of the orchestrator (one a second)
            # Asked with a token: this address's budget without one is taken by the flood.
            token = (("authorization", f"Bearer {wall.tokens['acme-reader']}"),)
            health = health_pb2_grpc.HealthStub(public_channel)
            status = (await health.Check(health_pb2.HealthCheckRequest(), metadata=token)).status
            for call in held + more:
                call.cancel()
            return public, sidecar, finals, status
        finally:
            await public_channel.close()
            await sidecar_channel.close()

    public, sidecar, finals, status = asyncio.run(attack())
    assert all(f.hits and f.hits[0].document_id.startswith("acme-doc") for f in finals)
    assert status == health_pb2.HealthCheckResponse.SERVING
    per_peer = 8  # SOUNDING_LIMITS__TRANSPORT__MAX_UNAUTHENTICATED_CALLS_PER_PEER
    # Beyond the budget, refused at once: by the budget (RESOURCE_EXHAUSTED), or for streams past
    # the connection's 100 by HTTP/2 itself (UNAVAILABLE; INTERNAL when refused mid-request). The
    # sidecar serves no reflection at all (UNIMPLEMENTED).
    for outcomes in (public, sidecar):
        assert 0 < outcomes["SERVED"] <= per_peer and sum(outcomes.values()) == 600, outcomes
        assert set(outcomes) <= {"SERVED", "RESOURCE_EXHAUSTED", "UNIMPLEMENTED", "UNAVAILABLE", "INTERNAL"}
    assert public.get("RESOURCE_EXHAUSTED") and sidecar.get("RESOURCE_EXHAUSTED"), (public, sidecar)


def _listening_ports(process: psutil.Process) -> set[int]:
    return {c.laddr.port for c in process.net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def _channel_ports() -> dict[int, int]:
    """The strategy workers' channel ports (pid -> port): of a worker's listening ports, the one
    that greets a new connection with a 32-byte nonce rather than an HTTP/2 SETTINGS frame."""
    found = {}
    for process in psutil.process_iter(["cmdline"]):
        if "StrategyWorker" not in " ".join(process.info["cmdline"] or ()):
            continue
        for port in _listening_ports(process):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as probe:
                    greeting = probe.recv(32)
            except OSError:
                continue
            if len(greeting) == 32 and not (greeting[3] == 0x04 and greeting[5:9] == b"\0\0\0\0"):
                found[process.pid] = port
    return found


def test_sockets_that_never_authenticate_cannot_keep_the_orchestrator_from_a_worker(wall):
    """Attack 3: 16 sockets held open on a worker's channel took its 16-connection cap, and the
    orchestrator's reconnect was refused (Retrieve UNAVAILABLE) until they let go. Here 64 are
    held on every worker's channel, a worker is killed (its replacement listens on a new port,
    flooded too as soon as it appears) and Retrieves go on."""
    held: list[socket.socket] = []
    stop = threading.Event()
    flooded: set[int] = set()

    def flood():
        while not stop.is_set():
            for port in set(_channel_ports().values()) - flooded:
                for _ in range(64):
                    try:
                        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
                    except OSError:
                        break
                flooded.add(port)
            stop.wait(0.05)

    with wall.client("globex-admin") as client:
        before = _channel_ports()
        assert before, "no strategy worker channel found"
        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        try:
            while not set(before.values()) <= flooded:
                time.sleep(0.05)
            during = [client.retrieve_final("docs", f"sonar depth {i}", top_k=1) for i in range(6)]
            psutil.Process(next(iter(before))).send_signal(signal.SIGKILL)
            deadline = time.monotonic() + 600
            # A retrieval sent to the killed worker fails until Ray has restarted it and the
            # orchestrator has reconnected (to a port the flood then crowds too).
            while not (len(flooded) > len(before) and _whole(client, "lead line")):
                assert time.monotonic() < deadline, "no whole Retrieve after the worker's restart"
                time.sleep(0.2)
            after = [client.retrieve_final("docs", f"lead line {i}", top_k=1) for i in range(6)]
        finally:
            stop.set()
            flooder.join()
            for sock in held:
                sock.close()
    assert len(flooded) > len(before)  # the replacement's channel was crowded too
    assert all(f.hits[0].document_id.startswith("globex-doc") for f in during + after)
    assert not any(f.failed_arms for f in during + after)


def test_a_token_with_a_stray_byte_reaches_no_log(wall):
    """Attack 4: a valid token followed by one byte that is not UTF-8 was logged by grpcio, whole,
    three times per call."""
    token, sidecar_token = wall.tokens["acme-admin"], wall.sidecar_token
    statuses = [
        raw_http2.call(
            wall.stack.settings.address,
            path,
            [(b"authorization", b"Bearer " + token.encode() + b"\xff")],
        ).get(b"grpc-status")
        for path in ("/sounding.v1.CorpusService/ListCollections", "/grpc.health.v1.Health/Check")
    ]
    sidecar = raw_http2.call(
        wall.stack.settings.models.address,
        "/sounding.models.v1.ModelService/Embed",
        [(b"authorization", b"Bearer " + sidecar_token.encode() + b"\xff")],
        ca_file=wall.files["ca"],
    ).get(b"grpc-status")
    assert statuses == [b"16", b"16"] and sidecar == b"16"  # UNAUTHENTICATED
    time.sleep(0.5)
    logs = wall.logs()
    assert token not in logs and sidecar_token not in logs
    assert "Invalid encoding" not in logs


def test_an_upstream_error_body_reaches_no_caller(wall):
    """Attack 5: the generator endpoint's error body (a 401 naming the API key) was passed on to
    any caller, a reader included."""
    with wall.client("acme-reader") as reader:
        final = reader.retrieve_final("docs", "how deep is the reef", top_k=2, arms=("dense", "hyde"))
    [failure] = final.failed_arms
    assert failure.arm == "hyde" and "401" in failure.message and "invalid_api_key" in failure.message
    assert UPSTREAM_KEY not in failure.message and UPSTREAM_KEY not in repr(final)
    assert UPSTREAM_KEY not in wall.logs()


def test_a_token_file_that_breaks_refuses_its_tokens(wall):
    """Attack 6: deleting the token file, or an edit that left it invalid, kept every old token
    valid."""
    path, original = wall.files["tokens"], wall.files["tokens"].read_text()

    def lists() -> str:
        with wall.client("acme-admin") as client:
            return _code(lambda: list(client.list_collections()))[0]

    def health() -> int:
        with grpc.insecure_channel(wall.stack.settings.address) as channel:
            return (
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
            )

    def becomes(probe, expected, within_s: float = 30.0):
        deadline = time.monotonic() + within_s
        while (seen := probe()) != expected and time.monotonic() < deadline:
            time.sleep(0.3)
        return seen

    observed = []
    try:
        for breaking in (path.unlink, lambda: path.write_text("[[tokens]]\n")):
            breaking()
            observed.append(
                (
                    becomes(lists, "UNAUTHENTICATED"),
                    becomes(health, health_pb2.HealthCheckResponse.NOT_SERVING),
                )
            )
            path.write_text(original)
            observed.append((becomes(lists, "OK"), becomes(health, health_pb2.HealthCheckResponse.SERVING)))
    finally:
        path.write_text(original)
    broken = ("UNAUTHENTICATED", health_pb2.HealthCheckResponse.NOT_SERVING)
    mended = ("OK", health_pb2.HealthCheckResponse.SERVING)
    assert observed == [broken, mended, broken, mended]
    assert "every token it held is refused" in wall.logs()


def test_every_port_of_the_stack_listens_on_loopback_only(wall):
    """Ray's own ports listened on every interface when Ray was local."""
    processes = [psutil.Process(wall.stack.orchestrator.pid), psutil.Process(wall.stack.models.pid)]
    processes += processes[0].children(recursive=True)
    listening = {
        (process.name(), c.laddr.ip)
        for process in processes
        for c in process.net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert len(listening) > 2  # the stack's servers and Ray's
    loopback = ("127.0.0.1", "::1", "::ffff:127.0.0.1")
    assert {entry for entry in listening if entry[1] not in loopback} == set()


def test_reflection_tells_the_public_api_only(wall):
    """Reflection handed out the internal worker and sidecar protos to anyone."""

    def ask(request: reflection_pb2.ServerReflectionRequest) -> reflection_pb2.ServerReflectionResponse:
        with grpc.insecure_channel(wall.stack.settings.address) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            return next(stub.ServerReflectionInfo(iter([request]), timeout=10))

    listed = ask(reflection_pb2.ServerReflectionRequest(list_services=""))
    assert {s.name for s in listed.list_services_response.service} == {
        "sounding.v1.SoundingService",
        "sounding.v1.CorpusService",
        "sounding.v1.ToolService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    public = ask(reflection_pb2.ServerReflectionRequest(file_containing_symbol="sounding.v1.SoundingService"))
    assert public.file_descriptor_response.file_descriptor_proto
    for internal in ("sounding.models.v1.ModelService", "sounding.worker.v1.WorkerCall"):
        answer = ask(reflection_pb2.ServerReflectionRequest(file_containing_symbol=internal))
        assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0], internal


# The property test: generated requests of every RPC, naming what a tenant owns, what other
# tenants own (by the names they use, and by their store keys), what exists nowhere and what
# nothing can be called, from each tenant in turn. For a tenant T and every other tenant U:
# - nothing in any answer to T (messages and errors) names or quotes anything of U's;
# - a request naming something of U's is answered as the same request naming nothing there is;
# - U's stored state (its tables, and its rows of the shared ones) is what it was before;
# - each of T's calls of a method that can change what is stored leaves one audit line.

AUDITED = {
    "Retrieve",
    "Inquire",
    "Observe",
    "Calibrate",
    "CreateCollection",
    "DeleteCollection",
    "IngestDocuments",
    "PutTools",
    "DeleteTools",
}
SHARED_KEYS = {
    "collections": "name",
    "graph_state": "collection",
    "inquiry_sessions": "session_id",
    "inquiry_session_setups": "session_id",
}
EXAMPLES_PER_TENANT = 170  # three tenants: over 500 generated requests, their paired ones aside
# What each kind of request names, and the name of that kind that exists nowhere.
NOWHERE = {"collection": "nothing", "session": "0" * 32, "retrieval": "f" * 32, "toolset": "nothingtools"}
KINDS = {
    "get": "collection",
    "list_after": "collection",
    "create_delete": "collection",
    "ingest": "collection",
    "retrieve": "collection",
    "inquire": "collection",
    "adapter": "collection",
    "resume": "session",
    "inquiry_outcome": "session",
    "retrieval_outcome": "retrieval",
    "delete_tools": "toolset",
    "list_tools": "toolset",
    "route": "toolset",
    "tool_metrics": "toolset",
    "tool_use": "toolset",
    # Requests that make what they name last name only the tenant's own, or what cannot be.
    "put_tools": "own toolset",
    "list": None,
    "metrics": None,
    "bandit": None,
    "miss_rate": None,
    "confidence": None,
}


@dataclasses.dataclass
class Owned:
    """What a tenant owns besides its collections: a session, a logged retrieval, a toolset."""

    session: str
    retrieval: str
    toolset: str


@pytest.fixture(scope="module")
def owned(wall) -> dict[str, Owned]:
    found = {}
    for tenant in TENANTS:
        with wall.client(f"{tenant}-admin") as admin:
            session = admin.inquire("bulls_and_cows")
            next(iter(session))
            session.close()
            retrieval = admin.retrieve_final("docs", "how deep is the reef", top_k=2).retrieval_id
            toolset = f"{tenant}tools"
            admin.put_tools(toolset, [Tool(f"{tenant}_search", f"{tenant}mark search of the charts")])
            found[tenant] = Owned(session.session_id, retrieval, toolset)
    return found


def _names(kind: str | None, tenant: str, owned: dict[str, Owned]) -> list[tuple[str, str]]:
    """(name, category) pairs a request of `kind` may name: "own", "foreign" (another tenant's,
    as it names it), "key" (another tenant's store key), "nowhere" and "bad" (no resource can be
    called that)."""
    others = [u for u in TENANTS if u != tenant]
    if kind is None:
        return [("", "own")]
    if kind == "own toolset":
        return [(owned[tenant].toolset, "own"), ("zzz.tools", "bad"), ("", "bad")]
    own = {
        "collection": ["docs", *(["private"] if tenant == "acme" else [])],
        "session": [owned[tenant].session],
        "retrieval": [owned[tenant].retrieval],
        "toolset": [owned[tenant].toolset],
    }[kind]
    foreign = {
        "collection": ["private"] if tenant != "acme" else [],
        "session": [owned[u].session for u in others],
        "retrieval": [owned[u].retrieval for u in others],
        "toolset": [owned[u].toolset for u in others],
    }[kind]
    keys = {
        "collection": [f"{u}.docs" for u in others] + (["acme.private"] if tenant != "acme" else []),
        "session": [f"{u}.{owned[u].session}" for u in others],
        "retrieval": [],
        "toolset": [f"{u}.{owned[u].toolset}" for u in others],
    }[kind]
    return (
        [(n, "own") for n in own]
        + [(n, "foreign") for n in foreign]
        + [(n, "key") for n in keys]
        + [(NOWHERE[kind], "nowhere"), ("zzz." + NOWHERE[kind], "bad"), ("UPPER", "bad")]
    )


def _requests(tenant: str, owned: dict[str, Owned]):
    from hypothesis import strategies as st

    # A number worked into each request's free text: every example is a request of its own.
    variants = st.integers(0, 10**9)
    return st.one_of(
        *(
            st.tuples(st.just(kind), st.sampled_from(_names(named, tenant, owned)), variants)
            for kind, named in KINDS.items()
        )
    ).map(lambda t: (t[0], *t[1], t[2]))


def _call(stubs, metadata, kind: str, name: str, variant: int):
    """The method a request of `kind` naming `name` calls, and a function that makes the call."""
    from sounding_api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2, tools_pb2

    sounding, corpus, tools = stubs
    kw = {"metadata": metadata, "timeout": 120}
    target = sounding_pb2.CalibrationTarget
    document = common_pb2.Document(id=f"probe-{variant}", text=f"Probe {variant} about the depth of water.")

    def observe(**observation):
        return sounding.Observe(iter([sounding_pb2.ObserveRequest(**observation)]), **kw)

    def inquire(message):
        return list(sounding.Inquire(iter([message]), **kw))

    def calibrate(which, collection=""):
        return list(
            sounding.Calibrate(sounding_pb2.CalibrateRequest(target=which, collection=collection), **kw)
        )

    start = sounding_pb2.InquiryStart(
        domain="corpus",
        domain_parameters={"collection": name},
        context=f"The reef lies {variant} fathoms down.",
        policy=sounding_pb2.InquiryPolicy(max_turns=1),
    )
    return {
        "get": (
            "GetCollection",
            lambda: corpus.GetCollection(corpus_pb2.GetCollectionRequest(name=name), **kw),
        ),
        "list_after": (
            "ListCollections",
            lambda: corpus.ListCollections(corpus_pb2.ListCollectionsRequest(page_token=name), **kw),
        ),
        "list": (
            "ListCollections",
            lambda: corpus.ListCollections(corpus_pb2.ListCollectionsRequest(), **kw),
        ),
        "create_delete": (
            "CreateCollection",
            lambda: corpus.CreateCollection(corpus_pb2.CreateCollectionRequest(name=name), **kw),
        ),
        "ingest": (
            "IngestDocuments",
            lambda: list(
                corpus.IngestDocuments(
                    iter([corpus_pb2.IngestDocumentsRequest(collection=name, documents=[document])]), **kw
                )
            ),
        ),
        "retrieve": (
            "Retrieve",
            lambda: list(
                sounding.Retrieve(
                    sounding_pb2.RetrieveRequest(collection=name, query=f"depth {variant}", top_k=3), **kw
                )
            ),
        ),
        "inquire": ("Inquire", lambda: inquire(sounding_pb2.InquireRequest(start=start))),
        "resume": (
            "Inquire",
            lambda: inquire(sounding_pb2.InquireRequest(resume=sounding_pb2.InquiryResume(session_id=name))),
        ),
        "retrieval_outcome": (
            "Observe",
            lambda: observe(
                retrieval_outcome=sounding_pb2.RetrievalOutcome(
                    retrieval_id=name, used_document_ids=["probe"]
                )
            ),
        ),
        "inquiry_outcome": (
            "Observe",
            lambda: observe(
                inquiry_outcome=sounding_pb2.InquiryOutcome(session_id=name, ground_truth="1234")
            ),
        ),
        "tool_use": (
            "Observe",
            lambda: observe(
                tool_use=sounding_pb2.ToolUseEvent(
                    request="search the charts", used_tool="probe_tool", toolset=name
                )
            ),
        ),
        "adapter": ("Calibrate", lambda: calibrate(target.CALIBRATION_TARGET_QUERY_ADAPTER, name)),
        "bandit": ("Calibrate", lambda: calibrate(target.CALIBRATION_TARGET_BANDIT)),
        "miss_rate": ("Calibrate", lambda: calibrate(target.CALIBRATION_TARGET_MISS_RATE)),
        "confidence": ("Calibrate", lambda: calibrate(target.CALIBRATION_TARGET_CONFIDENCE)),
        "metrics": (
            "GetStrategyMetrics",
            lambda: sounding.GetStrategyMetrics(sounding_pb2.GetStrategyMetricsRequest(), **kw),
        ),
        "put_tools": (
            "PutTools",
            lambda: tools.PutTools(
                tools_pb2.PutToolsRequest(
                    toolset=name, tools=[tools_pb2.Tool(name="probe_tool", description="probes the depth")]
                ),
                **kw,
            ),
        ),
        "delete_tools": (
            "DeleteTools",
            lambda: tools.DeleteTools(tools_pb2.DeleteToolsRequest(toolset=name, names=["probe_tool"]), **kw),
        ),
        "list_tools": ("ListTools", lambda: tools.ListTools(tools_pb2.ListToolsRequest(toolset=name), **kw)),
        "route": (
            "RouteTool",
            lambda: tools.RouteTool(
                tools_pb2.RouteToolRequest(toolset=name, request="search the charts", top_k=2), **kw
            ),
        ),
        "tool_metrics": (
            "GetToolMetrics",
            lambda: tools.GetToolMetrics(tools_pb2.GetToolMetricsRequest(toolset=name), **kw),
        ),
    }[kind]


def _owner(table: str) -> str | None:
    for prefix in ("chunks__", "entities__", "edges__"):
        if table.startswith(prefix):
            return table[len(prefix) :].partition(".")[0]
    return table.rpartition(".")[2] if "." in table else None


def _state(data_dir: Path, tenant: str) -> dict[str, list[str]]:
    """Everything stored of `tenant`'s: its tables' rows, and its rows of the shared tables."""
    import lancedb

    db = lancedb.connect(str(data_dir))
    state = {}
    for name in db.table_names(limit=100_000):
        if _owner(name) == tenant:
            state[name] = sorted(map(repr, db.open_table(name).to_arrow().to_pylist()))
        elif name in SHARED_KEYS:
            key = SHARED_KEYS[name]
            rows = db.open_table(name).to_arrow().to_pylist()
            state[name] = sorted(repr(r) for r in rows if r[key].startswith(f"{tenant}."))
    return state


def _audited(wall: Wall, start: int, tenant: str) -> dict[str, int]:
    """The tenant's audit lines since `start` (an offset in the orchestrator's log), by method."""
    counts: dict[str, int] = {}
    log = (wall.stack.log_dir / "orchestrator.log").read_text(errors="replace")[start:]
    for line in log.splitlines():
        if " audit {" in line:
            entry = json.loads(line.split(" audit ", 1)[1])
            if entry["tenant"] == tenant:
                method = entry["method"].rsplit("/", 1)[1]
                counts[method] = counts.get(method, 0) + 1
    return counts


def _settle(wall: Wall, tenant: str) -> None:
    """Until what the tenant's calls write in the background is written: its logged retrievals
    (GetStrategyMetrics waits for them) and its collections' graphs."""
    with wall.client(f"{tenant}-admin") as admin:
        admin.strategy_metrics()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(2.5)  # the graph builder waits for two quiet seconds
            if all(c.graph_current for c in admin.list_collections()):
                return
    raise TimeoutError(f"{tenant}'s graphs did not catch up")


@pytest.mark.parametrize("tenant", list(TENANTS))
def test_tenant_properties(wall, owned, tenant):
    from hypothesis import HealthCheck, given, settings
    from sounding_api.sounding.v1 import corpus_pb2, corpus_pb2_grpc, sounding_pb2_grpc, tools_pb2_grpc

    others = [u for u in TENANTS if u != tenant]
    secrets_of = {
        u: (f"{u}-doc", f"{u}mark", owned[u].session, owned[u].retrieval, f"{u}_search") for u in others
    }
    data_dir = wall.stack.settings.data_dir
    _settle(wall, tenant)
    before = {u: _state(data_dir, u) for u in others}
    log_start = len((wall.stack.log_dir / "orchestrator.log").read_text(errors="replace"))
    made: dict[str, int] = {}
    metadata = (("authorization", f"Bearer {wall.tokens[f'{tenant}-admin']}"),)

    with grpc.insecure_channel(wall.stack.settings.address) as channel:
        stubs = (
            sounding_pb2_grpc.SoundingServiceStub(channel),
            corpus_pb2_grpc.CorpusServiceStub(channel),
            tools_pb2_grpc.ToolServiceStub(channel),
        )

        def answer(kind: str, name: str, variant: int) -> tuple[str, str]:
            """(status code, the status message with the name sent left out) of one request."""
            method, call = _call(stubs, metadata, kind, name, variant)
            made[method] = made.get(method, 0) + (method in AUDITED)
            try:
                code, message, text = "OK", "", repr(call())
            except grpc.RpcError as error:
                code, message = error.code().name, error.details() or ""
                text = f"{message} {error.trailing_metadata()!r}"
            if kind == "create_delete" and code == "OK":  # the tenant's own now: dropped again
                request = corpus_pb2.DeleteCollectionRequest(name=name)
                stubs[1].DeleteCollection(request, metadata=metadata, timeout=60)
                made["DeleteCollection"] = made.get("DeleteCollection", 0) + 1
            # What the request itself named may come back (an error quoting it); nothing else may.
            unsent = text.replace(name, "") if name else text
            for u, secrets in secrets_of.items():
                leaked = [s for s in secrets if s in unsent]
                assert not leaked, (tenant, kind, name, u, leaked, text[:400])
            return code, message.replace(name, "<name>") if name else message

        @settings(
            max_examples=EXAMPLES_PER_TENANT,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(request=_requests(tenant, owned))
        def one(request):
            kind, name, category, variant = request
            generated.append(kind)
            seen = answer(kind, name, variant)
            if category in ("foreign", "key"):
                named = KINDS[kind]
                nowhere = NOWHERE[named] if category == "foreign" else "zzz." + NOWHERE[named]
                assert answer(kind, nowhere, variant) == seen, (tenant, kind, name, category)

        generated: list[str] = []
        one()

    _settle(wall, tenant)
    after = {u: _state(data_dir, u) for u in others}
    for u in others:
        changed = sorted(t for t in before[u].keys() | after[u].keys() if before[u].get(t) != after[u].get(t))
        assert not changed, (tenant, u, changed)
    assert _audited(wall, log_start, tenant) == {m: n for m, n in made.items() if n}
    assert len(generated) >= EXAMPLES_PER_TENANT and set(generated) == set(KINDS)


def test_the_flood_harness_on_a_few_streams(wall):
    """`sounding eval flood`'s two parts, on this stack with small numbers."""
    from sounding_bench import flood

    target = flood.Target(
        wall.stack.settings.address,
        wall.stack.settings.models.address,
        wall.tokens["globex-admin"],
        wall.sidecar_token,
        "docs",
    )
    # The sidecar of this stack speaks TLS, which the harness's own stack does not: only the
    # public port here.
    public_only = dataclasses.replace(target, sidecar=target.public, sidecar_token=target.public_token)
    held = flood.held_streams(public_only, streams=12, retrieves=3)
    assert held["retrieves_succeeded"] == 3 and held["health_with_a_token"]["public"] == "SERVING"
    assert sum(held["public_streams"].values()) == 24 and held["public_streams"]["SERVED"] <= 8
    assert flood.verdict(held, per_peer=8)
    large = flood.large_bodies(target, orchestrator_pid(wall), bodies=2, body_mib=1.0)
    assert large["without_a_token"]["codes"] == {"UNAUTHENTICATED": 2}
    assert large["with_a_token"]["codes"] == {"INVALID_ARGUMENT": 2}  # read, decoded: too long a query
    assert large["health_check_without_a_token"]["codes"] == {"NOT_FOUND": 2}  # read within the budget


def orchestrator_pid(wall: Wall) -> int:
    assert wall.stack.orchestrator is not None
    return wall.stack.orchestrator.pid
