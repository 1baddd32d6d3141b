"""sounding.serving.rpc against a real in-process grpc.aio server, with a servicer of CorpusService."""

import asyncio
import json

import grpc
import pytest
from sounding.runtime import errors
from sounding.serving import admission, decoding, rpc
from sounding.settings.limits import TransportLimits
from sounding_api.sounding.v1 import common_pb2, corpus_pb2
from sounding_client import SoundingError
from sounding_client._convert import error

pytestmark = pytest.mark.unit

CORPUS = corpus_pb2.DESCRIPTOR.services_by_name["CorpusService"]


class Servicer:
    """GetCollection names the remaining time in the description (a holding servicer's sets
    `started` and answers once `release` is set); ListCollections fails unexpectedly;
    IngestDocuments acknowledges every batch."""

    def __init__(self):
        self.holding = False
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def GetCollection(self, request, context):
        if self.holding:
            self.started.set()
            await self.release.wait()
        remaining = context.time_remaining()
        return corpus_pb2.GetCollectionResponse(
            collection=corpus_pb2.Collection(name=request.name, description=f"{remaining}")
        )

    async def ListCollections(self, request, context):
        raise KeyError("a bug")

    async def CreateCollection(self, request, context):
        raise errors.InvalidArgument("bad name", field="name")

    async def DeleteCollection(self, request, context):
        return corpus_pb2.DeleteCollectionResponse()

    async def IngestDocuments(self, request_iterator, context):
        index = 0
        async for request in request_iterator:
            yield corpus_pb2.IngestDocumentsResponse(
                batch_index=index, batch_documents=len(request.documents)
            )
            index += 1


# Requests that keep the rules their protos declare.
NAMED = corpus_pb2.GetCollectionRequest(name="c").SerializeToString()
BATCH = corpus_pb2.IngestDocumentsRequest(
    collection="c", documents=[common_pb2.Document(id="a", text="b")]
).SerializeToString()

DEFAULT_DEADLINE_S = 5.0
POLICIES = {
    "GetCollection": rpc.CallPolicy(deadline_s=DEFAULT_DEADLINE_S, max_concurrent=1),
    "IngestDocuments": rpc.CallPolicy(first_message_s=60.0, idle_s=60.0),
}


def run(body, policies=POLICIES):
    async def main():
        servicer = Servicer()
        server = rpc.server(TransportLimits())
        server.add_generic_rpc_handlers((rpc.service_handler(CORPUS, servicer, policies),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await channel.channel_ready()
                return await body(channel, servicer)
        finally:
            await server.stop(None)

    return asyncio.run(main())


def raw(channel, method, kind="unary_unary"):
    return getattr(channel, kind)(
        f"/sounding.v1.CorpusService/{method}",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )


async def failure(call) -> SoundingError:
    """The SoundingError (with its decoded details) a call fails with."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return error(raised.value)


def test_a_request_that_does_not_decode_is_invalid_argument_naming_the_field():
    async def body(channel, _):
        return await failure(raw(channel, "GetCollection")(b"\x0a\x02\xff\xfe"))  # name: not UTF-8

    failed = run(body)
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT and failed.reason == "UNDECODABLE_REQUEST"
    assert failed.fields == ["name"]


async def ingest(channel, requests) -> tuple[list, SoundingError]:
    """Responses received before the IngestDocuments call failed, and its failure."""
    received = []

    async def consume():
        async for response in raw(channel, "IngestDocuments", "stream_stream")(requests):
            received.append(response)

    return received, await failure(consume())


def test_a_streamed_message_that_does_not_decode_names_its_position_and_field():
    document = common_pb2.Document(id="a", text="b").SerializeToString() + b"\x1a\x02\xff\xfe"
    bad = b"\x12" + bytes([len(document)]) + document
    received, failed = run(lambda channel, _: ingest(channel, iter([BATCH, bad])))
    assert len(received) == 1  # the first batch was acknowledged before the bad one arrived
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert failed.fields == ["messages[1].documents[0].title"]


def test_a_request_that_breaks_its_declared_rules_is_invalid_argument_naming_every_field():
    async def body(channel, _):
        return await failure(
            raw(channel, "GetCollection")(
                corpus_pb2.GetCollectionRequest(name="Not A Name").SerializeToString()
            )
        )

    failed = run(body)
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert failed.fields == ["name"] and "does not match" in failed.message


def test_a_streamed_message_that_breaks_the_rules_fails_the_call_after_the_batches_before_it():
    bad = corpus_pb2.IngestDocumentsRequest(
        documents=[
            common_pb2.Document(id="ok", text="fine"),
            common_pb2.Document(id="a#b", text="   "),
        ]
    ).SerializeToString()

    received, failed = run(lambda channel, _: ingest(channel, iter([BATCH, bad])))
    assert len(received) == 1
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert failed.fields == ["documents[1].id", "documents[1].text"]


def test_locating_the_bad_field_reads_a_bounded_number_of_fields():
    decode = decoding.lenient_decoder(corpus_pb2.IngestDocumentsRequest)
    padded = b"\xf8\x01\x00" * (decoding.LOCATE_MAX_FIELDS + 10) + b"\x0a\x02\xff\xfe"
    assert decode(padded).field == ""
    assert decode(b"\xf8\x01\x00" * 10 + b"\x0a\x02\xff\xfe").field == "collection"


def test_an_unexpected_exception_is_internal_with_an_incident_id_and_no_traceback():
    failed = run(lambda channel, _: failure(raw(channel, "ListCollections")(b"")))
    assert failed.code == grpc.StatusCode.INTERNAL
    assert "incident" in failed.message and "KeyError" not in failed.message


def test_domain_errors_keep_their_code_and_field():
    failed = run(lambda channel, _: failure(raw(channel, "CreateCollection")(b"")))
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert failed.fields == ["name"]


def test_a_call_without_a_deadline_gets_the_default_and_sees_it_in_time_remaining():
    async def body(channel, servicer):
        ok = corpus_pb2.GetCollectionResponse.FromString(await raw(channel, "GetCollection")(NAMED))
        servicer.holding = True  # never answers: only the default deadline ends the call
        return float(ok.collection.description), await failure(raw(channel, "GetCollection")(NAMED))

    remaining, failed = run(body)
    assert 0 < remaining <= DEFAULT_DEADLINE_S
    assert failed.code == grpc.StatusCode.DEADLINE_EXCEEDED and failed.reason == "SERVER_DEADLINE"


def test_a_client_deadline_shorter_than_the_default_wins():
    async def body(channel, _):
        response = await raw(channel, "GetCollection")(NAMED, timeout=DEFAULT_DEADLINE_S / 2)
        return float(corpus_pb2.GetCollectionResponse.FromString(response).collection.description)

    # The client's deadline (as the header carries it, rounded up), not the server's default.
    assert 0 < run(body) <= DEFAULT_DEADLINE_S / 2 + 0.01


def test_calls_beyond_the_concurrency_limit_are_resource_exhausted_at_once():
    async def body(channel, servicer):
        servicer.holding = True
        first = asyncio.ensure_future(raw(channel, "GetCollection")(NAMED))
        await servicer.started.wait()
        failed = await failure(raw(channel, "GetCollection")(NAMED))
        refused_while_the_first_ran = not first.done()  # it did not wait for the slot
        servicer.release.set()
        await first
        return failed, refused_while_the_first_ran

    failed, refused_while_the_first_ran = run(body)
    assert failed.code == grpc.StatusCode.RESOURCE_EXHAUSTED and failed.reason == "TOO_MANY_CALLS"
    assert refused_while_the_first_ran


@pytest.mark.parametrize(
    "sent,policy,reason",
    [
        (0, rpc.CallPolicy(first_message_s=0.2, idle_s=60.0), "no first request message"),
        (1, rpc.CallPolicy(first_message_s=60.0, idle_s=0.2), "no next request message"),
    ],
)
def test_a_client_stream_that_goes_quiet_ends_deadline_exceeded(sent, policy, reason):
    async def requests():
        for _ in range(sent):
            yield BATCH
        await asyncio.sleep(120)

    received, failed = run(
        lambda channel, _: ingest(channel, requests()), {**POLICIES, "IngestDocuments": policy}
    )
    assert len(received) == sent
    assert failed.code == grpc.StatusCode.DEADLINE_EXCEEDED and reason in failed.message


def test_a_draining_server_refuses_new_calls_unavailable_and_waits_for_those_in_flight():
    gate = admission.Gate()

    async def body():
        servicer = Servicer()
        servicer.holding = True
        server = rpc.server(TransportLimits())
        server.add_generic_rpc_handlers((rpc.service_handler(CORPUS, servicer, {}, gate),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            in_flight = asyncio.ensure_future(
                raw(channel, "GetCollection")(
                    corpus_pb2.GetCollectionRequest(name="in-flight").SerializeToString()
                )
            )
            await servicer.started.wait()
            draining = asyncio.ensure_future(gate.drain(60.0))
            await asyncio.sleep(0)
            refused = await failure(raw(channel, "DeleteCollection")(b""))
            servicer.release.set()
            finished = await in_flight
            drained = await draining
        await server.stop(None)
        return refused, finished, drained

    refused, finished, drained = asyncio.run(body())
    assert refused.code == grpc.StatusCode.UNAVAILABLE and refused.reason == "DRAINING"
    assert (
        corpus_pb2.GetCollectionResponse.FromString(finished).collection.name == "in-flight"
    )  # it completed
    assert drained and gate.in_flight == 0


def _served_with(authenticator, body, policies):
    async def main():
        server = rpc.server(TransportLimits())
        server.add_generic_rpc_handlers(
            (rpc.service_handler(CORPUS, Servicer(), policies, None, authenticator),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await body(channel)
        finally:
            await server.stop(None)

    return asyncio.run(main())


def test_callers_are_authenticated_before_anything_else_and_held_to_the_methods_role(caplog):
    from sounding.serving import auth

    reader, reader_hash = auth.new_token()
    writer, writer_hash = auth.new_token()
    authenticator = auth.Authenticator(
        [
            auth.TokenEntry(sha256=reader_hash, tenant="acme", role="reader"),
            auth.TokenEntry(sha256=writer_hash, tenant="acme", role="writer"),
        ]
    )
    policies = {
        "DeleteCollection": rpc.CallPolicy(role="writer"),
        "GetCollection": rpc.CallPolicy(max_concurrent=0),
    }

    async def body(channel):
        codes = {}
        for who, token in (("none", None), ("reader", reader), ("writer", writer)):
            metadata = (("authorization", f"Bearer {token}"),) if token else None
            for method, request in (
                ("DeleteCollection", corpus_pb2.DeleteCollectionRequest(name="docs").SerializeToString()),
                ("GetCollection", b"\xff\xff"),  # undecodable, and no slot free
            ):
                try:
                    await raw(channel, method)(request, metadata=metadata)
                    codes[who, method] = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as failure:
                    codes[who, method] = failure.code()
        return codes

    with caplog.at_level("INFO", logger="sounding.audit"):
        codes = _served_with(authenticator, body, policies)
    assert codes == {
        ("none", "DeleteCollection"): grpc.StatusCode.UNAUTHENTICATED,
        ("none", "GetCollection"): grpc.StatusCode.UNAUTHENTICATED,
        ("reader", "DeleteCollection"): grpc.StatusCode.PERMISSION_DENIED,
        ("reader", "GetCollection"): grpc.StatusCode.RESOURCE_EXHAUSTED,
        ("writer", "DeleteCollection"): grpc.StatusCode.OK,
        ("writer", "GetCollection"): grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
    audited = [line for line in caplog.messages if line.startswith("audit ")]
    # Only the state-changing method is audited, each call with its caller and outcome (a call
    # without a token is refused before its request is read: what it named is not known).
    assert [json.loads(line.removeprefix("audit ")) for line in audited] == [
        {
            "method": "sounding.v1.CorpusService/DeleteCollection",
            "tenant": None,
            "role": None,
            "resource": "",
            "messages": 0,
            "outcome": "UNAUTHENTICATED",
        },
        {
            "method": "sounding.v1.CorpusService/DeleteCollection",
            "tenant": "acme",
            "role": "reader",
            "resource": "collection=docs",
            "messages": 1,
            "outcome": "PERMISSION_DENIED",
        },
        {
            "method": "sounding.v1.CorpusService/DeleteCollection",
            "tenant": "acme",
            "role": "writer",
            "resource": "collection=docs",
            "messages": 1,
            "outcome": "OK",
        },
    ]
    assert reader not in caplog.text and writer not in caplog.text


def test_a_server_beyond_loopback_without_tokens_refuses_to_start():
    with pytest.raises(ValueError, match="beyond loopback"):
        rpc.refuse_open_plaintext("0.0.0.0:50051", False, False, "the orchestrator")
    rpc.refuse_open_plaintext("0.0.0.0:50051", True, False, "the orchestrator")
    rpc.refuse_open_plaintext("0.0.0.0:50051", False, True, "the orchestrator")
    rpc.refuse_open_plaintext("127.0.0.1:50051", False, False, "the orchestrator")
