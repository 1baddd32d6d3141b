"""Who a server lets in (sounding.serving.admission), on an in-process grpc.aio server."""

import asyncio

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from sounding.runtime import errors
from sounding.serving import admission, auth, rpc
from sounding.settings.limits import TransportLimits
from sounding_api.sounding.v1 import corpus_pb2

pytestmark = pytest.mark.unit

HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]
CORPUS = corpus_pb2.DESCRIPTOR.services_by_name["CorpusService"]


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:10.0.0.7:5000", "10.0.0.7"),
        ("ipv6:[::1]:5000", "::1"),
        ("ipv6:%5B::1%5D:5000", "::1"),  # as grpc 1.85 writes it
        ("ipv6:[2001:db8::7:1]:5000", "2001:db8::/64"),  # one host holds a whole /64
        ("unix:/tmp/s.sock", "unix:/tmp/s.sock"),
    ],
)
def test_a_peers_address_leaves_its_port_out(peer, address):
    assert admission.peer_address(peer) == address


def test_open_calls_are_capped_per_address_and_in_all():
    budget = admission.OpenCalls(max_calls=3, max_calls_per_peer=2)
    with budget.slot("ipv4:10.0.0.1:1"), budget.slot("ipv4:10.0.0.1:2"):
        with pytest.raises(errors.ResourceExhausted):  # a third from the same address
            with budget.slot("ipv4:10.0.0.1:3"):
                pass
        with budget.slot("ipv4:10.0.0.2:1"):
            with pytest.raises(errors.ResourceExhausted):  # a fourth in all
                with budget.slot("ipv4:10.0.0.3:1"):
                    pass
    assert budget.in_flight == 0
    with budget.slot("ipv4:10.0.0.1:4"):  # released: served again
        assert budget.in_flight == 1


def test_calls_from_loopback_count_against_their_address_only():
    budget = admission.OpenCalls(max_calls=2, max_calls_per_peer=2)
    with budget.slot("ipv4:10.0.0.1:1"), budget.slot("ipv4:10.0.0.2:1"):  # the total taken
        with budget.slot("ipv4:127.0.0.1:1"), budget.slot("ipv4:127.0.0.1:2"):  # probes in the pod
            with pytest.raises(errors.ResourceExhausted):  # loopback's own share is taken
                with budget.slot("ipv4:127.0.0.1:3"):
                    pass
            with pytest.raises(errors.ResourceExhausted):  # the total is taken
                with budget.slot("ipv4:10.0.0.3:1"):
                    pass


def test_a_call_without_a_valid_token_gets_a_handler_that_reads_nothing():
    token, digest = auth.new_token()
    authenticator = auth.Authenticator([auth.TokenEntry(sha256=digest, tenant="acme", role="admin")])

    class Servicer:
        def __getattr__(self, name):
            async def never(request, context):
                raise AssertionError("never reached")

            return never

    door = rpc.service_handler(CORPUS, Servicer(), {}, None, authenticator)
    method = "/sounding.v1.CorpusService/GetCollection"

    class Details(grpc.HandlerCallDetails):
        def __init__(self, metadata):
            self.method, self.invocation_metadata = method, metadata

    refused = door.service(Details((("authorization", "Bearer snd_wrong"),)))
    served = door.service(Details((("authorization", f"Bearer {token}"),)))
    assert refused is not None and served is not None
    # grpc reads a request before a unary handler runs, never for a client-streaming one.
    assert refused.request_streaming and refused.request_deserializer is None
    assert not served.request_streaming and served.request_deserializer is not None


def test_health_without_a_token_has_its_own_budget_and_a_token_goes_around_it():
    token, digest = auth.new_token()
    authenticator = auth.Authenticator([auth.TokenEntry(sha256=digest, tenant="sidecar", role="admin")])
    budget = admission.OpenCalls(max_calls=4, max_calls_per_peer=2)
    with_token = admission.OpenCalls(max_calls=4, max_calls_per_peer=4, what="with a token")

    async def main():
        servicer = health.aio.HealthServicer()
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        server = rpc.server(TransportLimits())
        server.add_generic_rpc_handlers(
            (admission.open_service_handler(HEALTH, servicer, (budget, with_token), authenticator),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                watches = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(2)]
                for watch in watches:
                    await watch.read()  # held open: both of this address's slots
                codes = {}
                for who, metadata in (
                    ("none", None),
                    ("token", (("authorization", f"Bearer {token}"),)),
                    ("wrong token", (("authorization", "Bearer snd_wrong"),)),
                ):
                    try:
                        await stub.Check(health_pb2.HealthCheckRequest(), metadata=metadata, timeout=10)
                        codes[who] = grpc.StatusCode.OK
                    except grpc.aio.AioRpcError as error:
                        codes[who] = error.code()
                for watch in watches:
                    watch.cancel()
                async with asyncio.timeout(60):  # the server lets both slots go
                    while budget.in_flight:
                        await asyncio.sleep(0.005)
                after = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                return codes, after.status, budget.in_flight
        finally:
            await server.stop(None)

    codes, after, in_flight = asyncio.run(main())
    handler = admission.open_service_handler(
        HEALTH, health.aio.HealthServicer(), (budget, with_token), authenticator
    )

    class Details(grpc.HandlerCallDetails):
        method, invocation_metadata = "/grpc.health.v1.Health/Check", ()

    # A health check's request is read only once the call holds its slot.
    assert handler.service(Details()).request_streaming
    assert codes == {
        "none": grpc.StatusCode.RESOURCE_EXHAUSTED,
        "token": grpc.StatusCode.OK,
        "wrong token": grpc.StatusCode.UNAUTHENTICATED,
    }
    assert after == health_pb2.HealthCheckResponse.SERVING and in_flight == 0
