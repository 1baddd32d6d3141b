"""One real stack per test session: the models sidecar, Ray and the orchestrator on a LanceDB
directory under pytest's tmp path, with spans and metrics exported to an in-test OTLP collector."""

from __future__ import annotations

import json
import subprocess
import uuid
from concurrent import futures
from pathlib import Path

import boto3
import grpc
import pytest
from moto.server import ThreadedMotoServer
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from sounding.settings.config import ModelsSettings, Settings
from sounding.stack import Stack
from sounding_bench.harness import free_port
from sounding_client import Client

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "examples" / "demo-corpus.jsonl"


# Five short documents (id: title, text) for the harnesses' tiny BEIR directories.
_TINY_BEIR_CORPUS = {
    "sonar": ("Sonar", "Ships measure the depth of water with sonar pulses and their echoes."),
    "lead": ("Lead line", "A sailor swung a weighted lead line to sound the depth by hand."),
    "tide": ("Tides", "Tides raise and lower the sea twice a day under the moon's pull."),
    "chart": ("Charts", "Nautical charts give depths below a datum for navigation."),
    "bread": ("Bread", "Yeast makes bread dough rise before it is baked."),
}


def write_tiny_corpus(path: Path) -> None:
    """A BEIR directory at `path` with the tiny corpus and an empty `qrels/`."""
    path.mkdir()
    (path / "qrels").mkdir()
    documents = (json.dumps({"_id": i, "title": t, "text": x}) for i, (t, x) in _TINY_BEIR_CORPUS.items())
    (path / "corpus.jsonl").write_text("\n".join(documents) + "\n")


def replica(stack: Stack, data_dir: Path, log_dir: Path, env: dict[str, str]) -> Stack:
    """An orchestrator of its own (port, Ray runtime, logs) on the store `data_dir` and `env` name,
    using the session stack's sidecar."""
    settings = Settings(
        data_dir=data_dir,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=stack.settings.models.address),
    )
    return Stack(settings, env=env, log_dir=log_dir)


def ride_out_restart(stack: Stack, tmp_path: Path, command: list[str]) -> dict:
    """Run a client's live test in its ride-out mode (`command`, to which the address is added)
    against an orchestrator of its own: when the game prints "waiting" at its second question,
    the orchestrator drains (handing the stream back) and starts again on the same address, and
    the game goes on. What the game printed (turns, answer, resumes)."""
    own = replica(stack, tmp_path / "store", tmp_path / "logs", {})
    own.start_orchestrator()
    try:
        game = subprocess.Popen(
            [*command, own.settings.address], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert game.stdout is not None and game.stdout.readline().strip() == "waiting"
        own.stop()  # SIGTERM: it drains
        own.start_orchestrator()
        out, _ = game.communicate("\n", timeout=900)
    finally:
        own.stop()
    assert game.returncode == 0
    return json.loads(out)


def write_tokens(path: Path, grants) -> dict[str, str]:
    """A token file at `path` granting each (tenant, role) of `grants` a token of its own; the
    tokens, by "<tenant>-<role>"."""
    from sounding.serving import auth

    tokens, entries = {}, []
    for tenant, role in grants:
        token, digest = auth.new_token()
        tokens[f"{tenant}-{role}"] = token
        entries.append(f'[[tokens]]\nsha256 = "{digest}"\ntenant = "{tenant}"\nrole = "{role}"\n')
    path.write_text("\n".join(entries))
    return tokens


def self_signed_certificate(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed server certificate for `name` (what `openssl req -x509` makes), and its key:
    (certificate file, key file) in `directory`."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / f"{name}.pem", directory / f"{name}-key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


def tls_environment(prefix: str, tls) -> dict[str, str]:
    """The environment variables setting `tls` (TlsSettings) under `prefix`."""
    return {prefix + key.upper(): str(value) for key, value in tls.model_dump().items() if value}


class SpanCollector(trace_service_pb2_grpc.TraceServiceServicer):
    """A minimal OTLP trace receiver keeping every span it is sent."""

    def __init__(self):
        self.spans: list[dict] = []

    def Export(self, request, context):
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"),
                "",
            )
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        {
                            "service": service,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "kind": span.kind,
                            "start_ns": span.start_time_unix_nano,
                            "attributes": {
                                a.key: a.value.string_value or a.value.int_value for a in span.attributes
                            },
                        }
                    )
        return trace_service_pb2.ExportTraceServiceResponse()


class MetricCollector(metrics_service_pb2_grpc.MetricsServiceServicer):
    """A minimal OTLP metrics receiver keeping (service, metric name, data point attributes)."""

    def __init__(self):
        self.points: list[tuple[str, str, dict]] = []

    def Export(self, request, context):
        for resource_metrics in request.resource_metrics:
            service = next(
                (
                    a.value.string_value
                    for a in resource_metrics.resource.attributes
                    if a.key == "service.name"
                ),
                "",
            )
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    data = getattr(metric, metric.WhichOneof("data"))
                    for point in data.data_points:
                        attributes = {
                            a.key: a.value.string_value or a.value.bool_value for a in point.attributes
                        }
                        self.points.append((service, metric.name, attributes))
        return metrics_service_pb2.ExportMetricsServiceResponse()


@pytest.fixture(scope="session")
def span_collector():
    collector = SpanCollector()
    collector.metrics = MetricCollector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(collector.metrics, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    collector.endpoint = f"http://127.0.0.1:{port}"
    yield collector
    server.stop(grace=None)


# Deadlines that hold on a slow or busy machine, where a batch of generations on two busy cores
# can outlast the deployment's 30 s arm timeout and a peer's probe its 2 s: no test's verdict may
# hang on how fast the machine is (the tests of these deadlines set their own).
SLOW_MACHINE_DEADLINES = {
    "SOUNDING_LIMITS__RETRIEVE__ARM_TIMEOUT_S": "600",
    "SOUNDING_LIMITS__DEADLINES__RETRIEVE_S": "900",
    "SOUNDING_LIMITS__DEADLINES__READINESS_PROBE_S": "30",
}
CALL_TIMEOUT_S = 900  # the client fixture's deadline, for a whole stream
# The NLI model a fresh machine trains on first use, kept short (about a minute on two idle cores).
SHORT_NLI_TRAINING = {"SOUNDING_MODELS__NLI__TRAIN_STEPS": "60"}


@pytest.fixture(scope="session")
def stack(tmp_path_factory, span_collector):
    data_dir = tmp_path_factory.mktemp("sounding")
    settings = Settings(
        data_dir=data_dir,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=f"127.0.0.1:{free_port()}"),
    )
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": span_collector.endpoint,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
        # Plans choose between the fast arms; tests that need the generating arms name them.
        "SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]',
        # A fresh machine trains the NLI model on first use; a short training keeps the suite
        # short (a copy trained for longer, if cached, is used as it is).
        **SHORT_NLI_TRAINING,
        **SLOW_MACHINE_DEADLINES,
    }
    running = Stack(settings, env=env, log_dir=data_dir / "logs")
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def client(stack):
    with Client(stack.settings.address, timeout=CALL_TIMEOUT_S) as c:
        yield c


@pytest.fixture(scope="session")
def demo_collection(client):
    documents = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    client.create_collection("demo")
    list(client.ingest("demo", documents, batch_size=5))
    return documents


@pytest.fixture
def object_store():
    """A bucket of its own (moto's servers in one process share their buckets) and the settings
    that put the store in it."""
    bucket = f"sounding-{uuid.uuid4().hex[:12]}"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    s3.create_bucket(Bucket=bucket)
    env = {
        "SOUNDING_STORE__URI": f"s3://{bucket}/store",
        "SOUNDING_STORE__ENDPOINT": endpoint,
        "SOUNDING_STORE__REGION": "us-east-1",
        "SOUNDING_STORE__ALLOW_HTTP": "true",
        "SOUNDING_STORE__ACCESS_KEY_ID": "test",
        "SOUNDING_STORE__SECRET_ACCESS_KEY": "test",
    }
    yield s3, bucket, env
    server.stop()
