"""Starting a stack never ends up talking to someone else's processes: a taken port ends the start
at once with one line naming it, the readiness check knows its own child from a stranger, speaks
the port's TLS, and a harness beside another stack runs on a stack of its own."""

import json
import os
import subprocess
import sys
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from sounding.serving.rpc import instance_health_name
from sounding.settings.config import ModelsSettings, Settings, TlsSettings
from sounding.stack import NotOurs, Stack, StackError, self_check, wait_serving

from .conftest import free_port, self_signed_certificate, write_tiny_corpus

pytestmark = pytest.mark.integration


def health_server(tls: TlsSettings | None = None) -> tuple[grpc.Server, health.HealthServicer, str]:
    """A bare gRPC health server on a loopback port, answering SERVING for the server as a whole."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"127.0.0.1:{free_port()}"
    if tls is None or tls.cert_file is None or tls.key_file is None:
        server.add_insecure_port(address)
    else:
        credentials = grpc.ssl_server_credentials([(tls.key_file.read_bytes(), tls.cert_file.read_bytes())])
        server.add_secure_port(address, credentials)
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    server.start()
    return server, servicer, address


def test_a_taken_port_ends_the_start_before_any_process_starts_naming_the_port_and_the_fix(tmp_path):
    server, _, address = health_server()
    try:
        settings = Settings(data_dir=tmp_path, models=ModelsSettings(address=address))
        stack = Stack(settings, log_dir=tmp_path / "logs")
        with pytest.raises(StackError) as refused:
            stack.start()
        port = address.rpartition(":")[2]
        assert f"port {port} ({address}) is in use" in str(refused.value)
        assert "SOUNDING_MODELS__ADDRESS" in str(refused.value) and "\n" not in str(refused.value)
        assert stack.models is None and stack.orchestrator is None
    finally:
        server.stop(None)


def test_the_readiness_check_tells_its_own_child_from_a_stranger_on_the_port():
    server, servicer, address = health_server()
    try:
        with pytest.raises(NotOurs):
            wait_serving(address, 600, service=instance_health_name("abc"))
        servicer.set(instance_health_name("abc"), health_pb2.HealthCheckResponse.SERVING)
        wait_serving(address, 600, service=instance_health_name("abc"))
    finally:
        server.stop(None)


def test_the_readiness_check_speaks_tls_with_the_servers_own_certificate_when_no_ca_is_set(tmp_path):
    cert_file, key_file = self_signed_certificate(tmp_path, "sounding.internal")  # not the address's name
    tls = TlsSettings(cert_file=cert_file, key_file=key_file)
    server, _, address = health_server(tls)
    try:
        credentials, options = self_check(tls)
        assert credentials is not None
        wait_serving(address, 600, credentials=credentials, options=options)
    finally:
        server.stop(None)


def test_an_eval_beside_a_stack_on_its_configured_ports_runs_on_a_stack_of_its_own(stack, client, tmp_path):
    data = tmp_path / "tinybeir"
    write_tiny_corpus(data)
    (data / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "how do ships measure water depth", "metadata": {}}) + "\n"
    )
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tsonar\t1\n")
    before = sorted(c.name for c in client.list_collections())
    env = {
        **os.environ,
        # The other stack is where this environment's configuration says Sounding serves.
        "SOUNDING_ADDRESS": stack.settings.address,
        "SOUNDING_MODELS__ADDRESS": stack.settings.models.address,
        "SOUNDING_DATA_DIR": str(tmp_path / "data"),
        "SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]',
    }
    out = tmp_path / "result.json"
    command = [sys.executable, "-m", "sounding.cli", "eval", "retrieval", "--data", str(data), "--split"]
    run = subprocess.run([*command, "test", "--out", str(out)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    stacks = json.loads(out.read_text())["provenance"]["stacks"]
    assert len(stacks) == 1 and stacks[0]["own"] is True
    assert stacks[0]["address"] not in (stack.settings.address, stack.settings.models.address)
    assert stacks[0]["data_dir"].startswith(str(tmp_path / "data"))
    assert sorted(c.name for c in client.list_collections()) == before
    assert "Warning" not in run.stderr and "WARN" not in run.stderr, run.stderr
