"""The client's retry policy, against a real in-process gRPC server that fails on purpose."""

import asyncio

import grpc
import pytest
from sounding_api.sounding.v1 import corpus_pb2
from sounding_client import AsyncClient, SoundingError

pytestmark = pytest.mark.unit


class Flaky:
    """CorpusService methods that answer UNAVAILABLE the first `failures` times each is called."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls: dict[str, int] = {}

    def handler(self, method: str, response):
        async def handle(request, context):
            self.calls[method] = self.calls.get(method, 0) + 1
            if self.calls[method] <= self.failures:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
            return response

        request_type = getattr(corpus_pb2, f"{method}Request")
        return grpc.unary_unary_rpc_method_handler(
            handle, request_type.FromString, type(response).SerializeToString
        )


def test_reads_are_retried_when_unavailable_and_writes_are_not():
    flaky = Flaky(failures=2)
    collection = corpus_pb2.Collection(name="docs")
    handlers = {
        "GetCollection": flaky.handler(
            "GetCollection", corpus_pb2.GetCollectionResponse(collection=collection)
        ),
        "CreateCollection": flaky.handler(
            "CreateCollection", corpus_pb2.CreateCollectionResponse(collection=collection)
        ),
    }

    async def run():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("sounding.v1.CorpusService", handlers),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with AsyncClient(f"127.0.0.1:{port}", timeout=10) as client:
                got = await client.get_collection("docs")
                with pytest.raises(SoundingError) as refused:
                    await client.create_collection("docs")
            return got, refused.value
        finally:
            await server.stop(None)

    got, refused = asyncio.run(run())
    assert got.name == "docs" and flaky.calls["GetCollection"] == 3
    assert refused.code == grpc.StatusCode.UNAVAILABLE and flaky.calls["CreateCollection"] == 1
