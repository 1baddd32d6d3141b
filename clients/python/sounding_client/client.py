"""Sounding clients: `Client` (blocking, iterators) and `AsyncClient` (asyncio, async iterators).

Both raise `SoundingError` with the status details on failure. Breaking out of a streaming
iterator cancels the call on the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

import grpc
from sounding.api.sounding.v1 import corpus_pb2, corpus_pb2_grpc, sounding_pb2_grpc

from sounding_client import _convert
from sounding_client import types as t

DEFAULT_ADDRESS = "127.0.0.1:50051"
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


class Client:
    def __init__(self, address: str = DEFAULT_ADDRESS, timeout: float | None = None):
        self._channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._sounding = sounding_pb2_grpc.SoundingServiceStub(self._channel)
        self._corpus = corpus_pb2_grpc.CorpusServiceStub(self._channel)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        grpc.channel_ready_future(self._channel).result(timeout=timeout)

    def create_collection(self, name: str, description: str = "") -> t.Collection:
        request = corpus_pb2.CreateCollectionRequest(name=name, description=description)
        return _convert.collection(self._unary(self._corpus.CreateCollection, request).collection)

    def get_collection(self, name: str) -> t.Collection:
        request = corpus_pb2.GetCollectionRequest(name=name)
        return _convert.collection(self._unary(self._corpus.GetCollection, request).collection)

    def list_collections(self, page_size: int = 100) -> Iterator[t.Collection]:
        token = ""
        while True:
            request = corpus_pb2.ListCollectionsRequest(page_size=page_size, page_token=token)
            response = self._unary(self._corpus.ListCollections, request)
            yield from (_convert.collection(c) for c in response.collections)
            token = response.next_page_token
            if not token:
                return

    def delete_collection(self, name: str) -> None:
        self._unary(self._corpus.DeleteCollection, corpus_pb2.DeleteCollectionRequest(name=name))

    def ingest(
        self, collection: str, documents: Iterable[_convert.DocumentLike], batch_size: int = 64
    ) -> Iterator[t.IngestProgress]:
        """Streams documents in batches; yields a progress report per durably written batch."""
        call = self._corpus.IngestDocuments(
            _convert.ingest_requests(collection, documents, batch_size), timeout=self.timeout
        )
        yield from self._stream(call, _convert.progress)

    def retrieve(
        self,
        collection: str,
        query: str,
        top_k: int = 10,
        arms: Iterable[str] = (),
        fusion_k: float = 0.0,
        omit_text: bool = False,
        synthesis_confidence: float | None = None,
        timeout: float | None = None,
    ) -> Iterator[t.RetrieveEvent]:
        request = _convert.retrieve_request(
            collection, query, top_k, arms, fusion_k, omit_text, synthesis_confidence
        )
        call = self._sounding.Retrieve(request, timeout=timeout or self.timeout)
        yield from self._stream(call, _convert.retrieve_event)

    def retrieve_final(self, collection: str, query: str, **options) -> t.Final:
        """Runs a Retrieve and returns only its final result."""
        for event in self.retrieve(collection, query, **options):
            if isinstance(event, t.Final):
                return event
        raise RuntimeError("the Retrieve stream ended without a final result")

    def _unary(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise _convert.error(error) from None

    @staticmethod
    def _stream(call, convert):
        try:
            for message in call:
                yield convert(message)
        except grpc.RpcError as error:
            raise _convert.error(error) from None
        finally:
            call.cancel()


class AsyncClient:
    def __init__(self, address: str = DEFAULT_ADDRESS, timeout: float | None = None):
        self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._sounding = sounding_pb2_grpc.SoundingServiceStub(self._channel)
        self._corpus = corpus_pb2_grpc.CorpusServiceStub(self._channel)
        self.timeout = timeout

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def create_collection(self, name: str, description: str = "") -> t.Collection:
        request = corpus_pb2.CreateCollectionRequest(name=name, description=description)
        return _convert.collection((await self._unary(self._corpus.CreateCollection, request)).collection)

    async def get_collection(self, name: str) -> t.Collection:
        request = corpus_pb2.GetCollectionRequest(name=name)
        return _convert.collection((await self._unary(self._corpus.GetCollection, request)).collection)

    async def delete_collection(self, name: str) -> None:
        await self._unary(self._corpus.DeleteCollection, corpus_pb2.DeleteCollectionRequest(name=name))

    async def ingest(
        self, collection: str, documents: Iterable[_convert.DocumentLike], batch_size: int = 64
    ) -> AsyncIterator[t.IngestProgress]:
        call = self._corpus.IngestDocuments(
            _convert.ingest_requests(collection, documents, batch_size), timeout=self.timeout
        )
        async for progress in self._stream(call, _convert.progress):
            yield progress

    async def retrieve(
        self,
        collection: str,
        query: str,
        top_k: int = 10,
        arms: Iterable[str] = (),
        fusion_k: float = 0.0,
        omit_text: bool = False,
        synthesis_confidence: float | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[t.RetrieveEvent]:
        request = _convert.retrieve_request(
            collection, query, top_k, arms, fusion_k, omit_text, synthesis_confidence
        )
        call = self._sounding.Retrieve(request, timeout=timeout or self.timeout)
        async for event in self._stream(call, _convert.retrieve_event):
            yield event

    async def retrieve_final(self, collection: str, query: str, **options) -> t.Final:
        async for event in self.retrieve(collection, query, **options):
            if isinstance(event, t.Final):
                return event
        raise RuntimeError("the Retrieve stream ended without a final result")

    async def _unary(self, method, request):
        try:
            return await method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise _convert.error(error) from None

    @staticmethod
    async def _stream(call, convert):
        try:
            async for message in call:
                yield convert(message)
        except grpc.RpcError as error:
            raise _convert.error(error) from None
        finally:
            call.cancel()
