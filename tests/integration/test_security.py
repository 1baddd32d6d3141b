"""A stack with every protection on: mutual TLS and bearer tokens on the public port, TLS and a
token on the sidecar's port, a throwaway CA made by trustme. Its own stack (authentication is
process-wide), shared by the tests of this module."""

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import trustme
from sounding.models.client import ModelsClient
from sounding.runtime.errors import SoundingError as DomainError
from sounding.serving import auth, rpc
from sounding.settings.config import AuthSettings, ModelsSettings, Settings, TlsSettings
from sounding.stack import Stack
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2
from sounding_client import CalibrationState, Client, InquiryOutcome, RetrievalOutcome, SoundingError

from .conftest import SLOW_MACHINE_DEADLINES, free_port, tls_environment, write_tokens

pytestmark = pytest.mark.integration

SERVICES = (
    sounding_pb2.DESCRIPTOR.services_by_name["SoundingService"],
    corpus_pb2.DESCRIPTOR.services_by_name["CorpusService"],
)
DOCUMENTS = [
    {"id": "tide", "title": "Tides", "text": "Tides rise and fall twice a day under the pull of the moon."},
    {
        "id": "lead",
        "title": "Sounding lead",
        "text": "A leadsman casts a weighted line to measure the depth.",
    },
]


@dataclasses.dataclass
class Secured:
    stack: Stack
    files: dict[str, Path]
    tokens: dict[str, str]
    sidecar_token: str

    def client(self, token: str | None = None, **overrides) -> Client:
        options = {
            "token": token,
            "ca_file": self.files["ca"],
            "cert_file": self.files["client_cert"],
            "key_file": self.files["client_key"],
            **overrides,
        }
        return Client(self.stack.settings.address, timeout=60, **options)

    def log(self, name: str) -> str:
        return (self.stack.log_dir / f"{name}.log").read_text()


def _write(tmp: Path, name: str, blob) -> Path:
    path = tmp / name
    blob.write_to_path(str(path))
    return path


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Secured:
    tmp = tmp_path_factory.mktemp("secured")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("agent@acme")
    files = {
        "ca": _write(tmp, "ca.pem", ca.cert_pem),
        "server_cert": _write(tmp, "server.pem", server.cert_chain_pems[0]),
        "server_key": _write(tmp, "server.key", server.private_key_pem),
        "client_cert": _write(tmp, "client.pem", client.cert_chain_pems[0]),
        "client_key": _write(tmp, "client.key", client.private_key_pem),
        "tokens": tmp / "tokens.toml",
        "sidecar_token": tmp / "sidecar.token",
    }
    grants = (("acme", "reader"), ("acme", "writer"), ("acme", "admin"), ("globex", "admin"))
    tokens = write_tokens(files["tokens"], grants)
    sidecar_token = auth.new_token()[0]
    files["sidecar_token"].write_text(sidecar_token)
    public_tls = TlsSettings(
        cert_file=files["server_cert"],
        key_file=files["server_key"],
        client_ca_file=files["ca"],
        ca_file=files["ca"],
        client_cert_file=files["client_cert"],
        client_key_file=files["client_key"],
    )
    sidecar_tls = TlsSettings(
        cert_file=files["server_cert"], key_file=files["server_key"], ca_file=files["ca"]
    )
    settings = Settings(
        data_dir=tmp / "data",
        address=f"127.0.0.1:{free_port()}",
        tls=public_tls,
        auth=AuthSettings(tokens_file=files["tokens"]),
        models=ModelsSettings(
            address=f"127.0.0.1:{free_port()}", tls=sidecar_tls, token_file=files["sidecar_token"]
        ),
    )
    env = {
        "SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]',
        "SOUNDING_AUTH__TOKENS_FILE": str(files["tokens"]),
        **SLOW_MACHINE_DEADLINES,
    }
    for prefix, tls in (("SOUNDING_TLS__", public_tls), ("SOUNDING_MODELS__TLS__", sidecar_tls)):
        env.update(tls_environment(prefix, tls))
    env["SOUNDING_MODELS__TOKEN_FILE"] = str(files["sidecar_token"])
    stack = Stack(settings, env=env, log_dir=tmp / "logs")
    stack.start()
    yield Secured(stack, files, tokens, sidecar_token)
    stack.stop()


def _raw_call(channel: grpc.Channel, service, method, metadata=None) -> grpc.StatusCode:
    """One call of `method` with an empty request (one empty message for a client stream)."""
    path = f"/{service.full_name}/{method.name}"
    kind = (
        ("stream" if method.client_streaming else "unary")
        + "_"
        + ("stream" if method.server_streaming else "unary")
    )
    callable_ = getattr(channel, kind)(
        path, request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    request = iter([b""]) if method.client_streaming else b""
    try:
        response = callable_(request, metadata=metadata, timeout=20)
        if method.server_streaming:
            list(response)
        return grpc.StatusCode.OK
    except grpc.RpcError as error:
        return error.code()


def _secure_channel(secured: Secured, token: str | None = None) -> grpc.Channel:
    files = secured.files
    credentials = rpc.channel_credentials(
        TlsSettings(
            ca_file=files["ca"], client_cert_file=files["client_cert"], client_key_file=files["client_key"]
        ),
        token or "",
    )
    return grpc.secure_channel(secured.stack.settings.address, credentials)


def test_every_public_rpc_without_a_valid_token_is_unauthenticated(secured):
    codes = {}
    with _secure_channel(secured) as channel:
        for service in SERVICES:
            for method in service.methods:
                codes[method.name] = _raw_call(channel, service, method)
                codes[method.name + " (wrong token)"] = _raw_call(
                    channel, service, method, (("authorization", "Bearer snd_not-a-token"),)
                )
    assert len(codes) == 2 * sum(len(service.methods) for service in SERVICES) >= 18
    assert set(codes.values()) == {grpc.StatusCode.UNAUTHENTICATED}, codes


def test_a_plaintext_client_and_a_client_without_a_certificate_are_refused(secured):
    token = secured.tokens["acme-admin"]
    with Client(secured.stack.settings.address, timeout=10) as plaintext:
        with pytest.raises(SoundingError) as refused:
            list(plaintext.list_collections())
    assert refused.value.code.name == "UNAVAILABLE"
    with Client(
        secured.stack.settings.address, timeout=10, token=token, ca_file=secured.files["ca"]
    ) as anonymous:
        with pytest.raises(SoundingError) as refused:
            list(anonymous.list_collections())
    assert refused.value.code.name == "UNAVAILABLE"
    with secured.client(token) as trusted:
        assert isinstance(list(trusted.list_collections()), list)


def test_roles_bound_what_each_token_may_do(secured):
    collection = "roles"
    with secured.client(secured.tokens["acme-writer"]) as writer:
        writer.create_collection(collection)
        list(writer.ingest(collection, DOCUMENTS))
        final = writer.retrieve_final(collection, "how deep is the water", top_k=1)
        assert (
            writer.observe([RetrievalOutcome(final.retrieval_id, used_document_ids=("lead",))]).recorded == 1
        )
        with pytest.raises(SoundingError) as denied:
            list(writer.calibrate("miss_rate", collection=collection))
        assert denied.value.code.name == "PERMISSION_DENIED"

    with secured.client(secured.tokens["acme-reader"]) as reader:
        assert reader.get_collection(collection).document_count == 2
        assert reader.retrieve_final(collection, "tides and the moon", top_k=1).hits[0].document_id == "tide"
        attempts = {
            "create": lambda: reader.create_collection("other"),
            "ingest": lambda: list(reader.ingest(collection, DOCUMENTS)),
            "delete": lambda: reader.delete_collection(collection),
            "observe": lambda: reader.observe(
                [RetrievalOutcome(final.retrieval_id, used_document_ids=("lead",))]
            ),
            "calibrate": lambda: list(reader.calibrate("miss_rate", collection=collection)),
        }
        codes = {}
        for name, attempt in attempts.items():
            try:
                attempt()
                codes[name] = "OK"
            except SoundingError as error:
                codes[name] = error.code.name
    assert codes == dict.fromkeys(attempts, "PERMISSION_DENIED")

    with secured.client(secured.tokens["acme-admin"]) as admin:
        try:
            list(admin.calibrate("miss_rate", collection=collection))
            admin_code = "OK"
        except SoundingError as error:
            admin_code = error.code.name  # too few outcomes to fit is not a refusal of the caller
    assert admin_code != "PERMISSION_DENIED"


def test_a_token_added_to_the_file_works_and_a_removed_one_stops_without_a_restart(secured):
    path = secured.files["tokens"]
    original = path.read_text()
    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "sounding.cli",
            "token",
            "create",
            "--tenant",
            "acme",
            "--role",
            "reader",
            "--file",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("snd_") and token not in path.read_text()

    def lists_with(token: str) -> str:
        with secured.client(token) as client:
            try:
                list(client.list_collections())
                return "OK"
            except SoundingError as error:
                return error.code.name

    def within(seconds: float, expected: str) -> str:
        deadline = time.monotonic() + seconds
        while (code := lists_with(token)) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        return code

    pid = secured.stack.orchestrator.pid
    assert within(60, "OK") == "OK"
    path.write_text(original)
    assert within(60, "UNAUTHENTICATED") == "UNAUTHENTICATED"
    assert secured.stack.orchestrator.pid == pid and secured.stack.orchestrator.poll() is None


def test_the_sidecar_needs_tls_and_its_token(secured):
    models = secured.stack.settings.models

    async def embed_with(credentials):
        client = ModelsClient(models.address, credentials)
        try:
            vectors = await client.embed(["depth"])
            return "OK", vectors.shape
        except DomainError as error:
            return error.code, None
        finally:
            await client.close()

    async def run():
        return (
            await embed_with(None),
            await embed_with(rpc.channel_credentials(models.tls)),
            await embed_with(rpc.channel_credentials(models.tls, "snd_wrong")),
            await embed_with(rpc.channel_credentials(models.tls, secured.sidecar_token)),
        )

    plaintext, no_token, wrong_token, trusted = asyncio.run(run())
    assert plaintext[0] == "UNAVAILABLE"
    assert no_token[0] == "UNAUTHENTICATED" and wrong_token[0] == "UNAUTHENTICATED"
    assert trusted == ("OK", (1, 384))


def test_mutating_calls_are_audited_and_no_secret_reaches_a_log(secured):
    with secured.client(secured.tokens["acme-writer"]) as writer:
        writer.create_collection("audited")
        writer.delete_collection("audited")
    with secured.client(secured.tokens["acme-reader"]) as reader:
        with pytest.raises(SoundingError):
            reader.delete_collection("audited")
    time.sleep(0.5)
    orchestrator = secured.log("orchestrator")
    lines = [
        json.loads("{" + line.split(" audit {", 1)[1])
        for line in orchestrator.splitlines()
        if " audit {" in line
    ]
    mine = [
        (line["method"].rsplit("/", 1)[1], line["tenant"], line["role"], line["outcome"])
        for line in lines
        if line["resource"] == "collection=audited"
    ]
    assert mine == [
        ("CreateCollection", "acme", "writer", "OK"),
        ("DeleteCollection", "acme", "writer", "OK"),
        ("DeleteCollection", "acme", "reader", "PERMISSION_DENIED"),
    ]
    logs = orchestrator + secured.log("models")
    for secret in (*secured.tokens.values(), secured.sidecar_token):
        assert secret not in logs


def test_a_server_beyond_loopback_without_tokens_refuses_to_start(tmp_path):
    env = {
        **os.environ,
        "SOUNDING_DATA_DIR": str(tmp_path),
        "SOUNDING_MODELS__ADDRESS": f"0.0.0.0:{free_port()}",
    }
    env.pop("SOUNDING_MODELS__TOKEN_FILE", None)
    started = subprocess.run(
        [sys.executable, "-m", "sounding.cli", "serve", "models"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert "beyond loopback" in started.stderr + started.stdout


def _code(attempt) -> str:
    try:
        attempt()
        return "OK"
    except SoundingError as error:
        return error.code.name


def test_a_tenant_cannot_reach_another_tenants_resources(secured):
    states = [CalibrationState(0.01 * i, False) for i in range(60)] + [
        CalibrationState(1.0 + 0.01 * i, True) for i in range(20)
    ]

    def calibrated_version(client) -> str:
        events = client.calibrate(
            "stop_threshold", task="dc", regime="normal", stop_rule="mi_only", states=states
        )
        return list(events)[-1].version

    with (
        secured.client(secured.tokens["acme-admin"]) as acme,
        secured.client(secured.tokens["globex-admin"]) as globex,
    ):
        acme.create_collection("private")
        list(acme.ingest("private", DOCUMENTS))
        acme.create_collection("charts")  # the same name in two tenants: two collections
        list(acme.ingest("charts", DOCUMENTS))
        globex.create_collection("charts")
        list(globex.ingest("charts", [{"id": "reef", "text": "The reef lies two fathoms under the tide."}]))
        planned_before = globex.strategy_metrics().planned_retrievals
        found = acme.retrieve_final("private", "how deep is the water", top_k=1)
        acme_session = acme.inquire("bulls_and_cows")
        next(iter(acme_session))
        acme_session.close()

        assert {c.name for c in globex.list_collections()} >= {"charts"}
        assert "private" not in {c.name for c in globex.list_collections()}
        assert globex.get_collection("charts").document_count == 1
        assert acme.get_collection("charts").document_count == 2
        assert [h.document_id for h in globex.retrieve_final("charts", "tide depth", top_k=5).hits] == [
            "reef"
        ]
        codes = {
            "get": _code(lambda: globex.get_collection("private")),
            "retrieve": _code(lambda: globex.retrieve_final("private", "how deep is the water")),
            "ingest": _code(lambda: list(globex.ingest("private", DOCUMENTS))),
            "delete": _code(lambda: globex.delete_collection("private")),
            "resume": _code(lambda: list(globex.resume_inquiry(acme_session.session_id))),
        }
        assert codes == dict.fromkeys(codes, "NOT_FOUND")
        observed = globex.observe(
            [
                RetrievalOutcome(found.retrieval_id, used_document_ids=("lead",)),
                InquiryOutcome(acme_session.session_id, "7031"),
            ]
        )
        assert observed.recorded == 0
        assert [(r.index, r.code) for r in observed.rejected] == [(0, "NOT_FOUND"), (1, "NOT_FOUND")]
        # Calibrations and their versions are the tenant's own; so are the selector's counts.
        assert (calibrated_version(acme), calibrated_version(acme)) == ("1", "2")
        assert calibrated_version(globex) == "1"
        assert globex.strategy_metrics().planned_retrievals == planned_before + 1

        # Nothing of acme's was touched: its retrieval is still there to observe, its collection to read.
        mine = acme.observe([RetrievalOutcome(found.retrieval_id, used_document_ids=("lead",))])
        assert mine.recorded == 1 and not mine.rejected
        assert acme.get_collection("private").document_count == 2
        assert next(iter(acme.resume_inquiry(acme_session.session_id))).session_id == acme_session.session_id


def test_the_health_command_checks_both_servers_over_tls(secured):
    files = secured.files

    def health(address: str, *options) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "sounding.cli", "health", "--address", address, *map(str, options)]
        # A generous --timeout: a check that runs out of time fails as DEADLINE_EXCEEDED.
        return subprocess.run([*command, "--timeout", "60"], capture_output=True, text=True, timeout=300)

    public = secured.stack.settings.address
    mutual = ("--tls-ca", files["ca"], "--tls-cert", files["client_cert"], "--tls-key", files["client_key"])
    serving = health(public, *mutual)
    assert serving.returncode == 0 and serving.stdout.strip().endswith(": SERVING"), serving.stdout
    sidecar = health(secured.stack.settings.models.address, "--tls-ca", files["ca"])
    assert sidecar.returncode == 0 and sidecar.stdout.strip().endswith(": SERVING"), sidecar.stdout
    plaintext = health(public)
    assert plaintext.returncode == 1 and "UNAVAILABLE" in plaintext.stdout
