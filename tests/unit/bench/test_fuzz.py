from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from sounding_api.sounding.v1 import corpus_pb2
from sounding_bench import fuzz, generated_calls

pytestmark = pytest.mark.unit

POOLS = fuzz.Pools(sessions=["s1"], retrievals=["r1"], documents=["d1"]).by_field()


@settings(
    max_examples=300,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
    deadline=None,
    derandomize=True,
)
@given(generated_calls.calls(POOLS, {}))
def test_generated_calls_are_sendable(call):
    assert 1 <= len(call.payloads) <= (5 if call.client_streaming else 1)
    assert all(len(p) < 64 * 1024 * 1024 for p in call.payloads)  # what a client may send
    assert call.path.startswith("/sounding.")


def test_a_marker_becomes_invalid_utf8_on_the_wire():
    payload = generated_calls.wire(corpus_pb2.GetCollectionRequest(name="a" + generated_calls.MARKER))
    with pytest.raises(Exception, match="UTF-8"):
        corpus_pb2.GetCollectionRequest.FromString(payload)


class ToyServer:
    """A CorpusService whose GetCollection fails with a bare exception (UNKNOWN) on a name
    starting with "f", and a health service; every other method is UNIMPLEMENTED."""

    def __init__(self):
        from grpc_health.v1 import health, health_pb2_grpc

        def get(request_bytes, context):
            request = corpus_pb2.GetCollectionRequest.FromString(request_bytes)
            if request.name.startswith("f"):
                raise RuntimeError("boom")
            return b""

        self.server = grpc.server(ThreadPoolExecutor(8))
        self.server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "sounding.v1.CorpusService", {"GetCollection": grpc.unary_unary_rpc_method_handler(get)}
                ),
            )
        )
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


def test_a_run_counts_codes_per_method_and_keeps_the_forbidden_calls():
    toy = ToyServer()
    try:
        address = f"127.0.0.1:{toy.port}"
        spec = fuzz.FuzzRun(160, seed=3, weights={"GetCollection": 20})
        result = fuzz.send_generated(address, address, fuzz.Pools(), spec)
    finally:
        toy.server.stop(None)
    assert result["requests"] == 160
    get = result["by_method"]["sounding.v1.CorpusService/GetCollection"]
    assert get.get("UNKNOWN", 0) > 0 and get.get("OK", 0) > 0  # "fuzz" is in the name pool
    assert {f["method"] for f in result["forbidden"]} == {"/sounding.v1.CorpusService/GetCollection"}
    assert len(result["forbidden"]) == get["UNKNOWN"]
    others = [codes for method, codes in result["by_method"].items() if not method.endswith("GetCollection")]
    assert all(set(codes) <= {"UNIMPLEMENTED", "CANCELLED", "RESOURCE_EXHAUSTED"} for codes in others)
    assert result["health"]["checks"] > 0 and result["health"]["not_serving"] == 0


def test_every_method_has_valid_seed_requests():
    found = generated_calls.seeds(POOLS)
    assert set(found) == {m.name for service in generated_calls.SERVICES for m in service.methods}
    assert all(streams and all(streams) for streams in found.values())
