"""Sounding clients: `Client` (blocking, iterators) and `AsyncClient` (asyncio, async iterators).

Both raise `SoundingError` with the status details on failure. Breaking out of a streaming
iterator cancels the call on the server.
"""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import AsyncIterator, Iterable, Iterator

import grpc
from sounding_api.sounding.v1 import (
    corpus_pb2,
    corpus_pb2_grpc,
    sounding_pb2,
    sounding_pb2_grpc,
    tools_pb2,
    tools_pb2_grpc,
)

from sounding_client import _convert
from sounding_client import types as t
from sounding_client.credentials import PathType, channel_credentials

DEFAULT_ADDRESS = "127.0.0.1:50051"
# Reads that change nothing are retried when the server is unavailable (restarting, draining: the
# next attempt may reach another replica); no other call is, since it may have taken effect.
RETRIED_READS = {
    "sounding.v1.CorpusService": ("GetCollection", "ListCollections"),
    "sounding.v1.SoundingService": ("GetStrategyMetrics",),
    "sounding.v1.ToolService": ("ListTools", "RouteTool", "GetToolMetrics"),
}
SERVICE_CONFIG = {
    "methodConfig": [
        {
            "name": [
                {"service": service, "method": m}
                for service, methods in RETRIED_READS.items()
                for m in methods
            ],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.2s",
                "maxBackoff": "2s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ]
}
CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # Reconnect within a second or two after the server restarts, not after minutes of backoff.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


def _channel(make_secure, make_insecure, address: str, token, ca_file, cert_file, key_file):
    security = channel_credentials(token, ca_file, cert_file, key_file)
    if security is None:
        return make_insecure(address, options=CHANNEL_OPTIONS)
    return make_secure(address, security, options=CHANNEL_OPTIONS)


class Client:
    """`token`: sent as a bearer token on every call; `ca_file`: TLS, verifying the server against
    this CA bundle; `cert_file` and `key_file`: the client certificate for mutual TLS."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        timeout: float | None = None,
        *,
        token: str | None = None,
        ca_file: PathType | None = None,
        cert_file: PathType | None = None,
        key_file: PathType | None = None,
    ):
        self._channel = _channel(
            grpc.secure_channel, grpc.insecure_channel, address, token, ca_file, cert_file, key_file
        )
        self._sounding = sounding_pb2_grpc.SoundingServiceStub(self._channel)
        self._corpus = corpus_pb2_grpc.CorpusServiceStub(self._channel)
        self._tools = tools_pb2_grpc.ToolServiceStub(self._channel)
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
        expansion: t.ExpansionOptions | None = None,
        learned_ranking: bool = True,
    ) -> Iterator[t.RetrieveEvent]:
        """Stream a Retrieve's events; `learned_ranking=False` searches with the base embeddings,
        without the collection's query adapter (Calibrate("query_adapter"))."""
        request = _convert.retrieve_request(
            collection,
            query,
            top_k,
            arms,
            fusion_k,
            omit_text,
            synthesis_confidence,
            expansion,
            learned_ranking,
        )
        call = self._sounding.Retrieve(request, timeout=timeout or self.timeout)
        yield from self._stream(call, _convert.retrieve_event)

    def observe(
        self,
        outcomes: Iterable[t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse],
        timeout: float | None = None,
    ) -> t.ObserveResult:
        """Report outcomes of earlier Retrieves and inquiries, and tools used. The returned
        acknowledgement means the recorded ones are durable; those not recorded are listed with
        a reason. (An agent reporting tool uses on its turn's path uses a `ToolUseObserver`.)"""
        requests = [_convert.observe_request(o) for o in outcomes]
        return _convert.observe_result(self._unary(self._sounding.Observe, iter(requests), timeout))

    def observe_future(self, requests: Iterator[sounding_pb2.ObserveRequest], timeout: float) -> grpc.Future:
        """Observe as a cancellable call (for the `ToolUseObserver`, whose close cancels it):
        `result()` is the raw ObserveResponse or raises the `grpc.RpcError`."""
        return self._sounding.Observe.future(requests, timeout=timeout)

    def put_tools(self, toolset: str, tools: Iterable[t.Tool]) -> tuple[int, int]:
        """Add tools to a toolset or replace them by name; (the toolset's new version, its tool count)."""
        response = self._unary(self._tools.PutTools, _convert.put_tools_request(toolset, tools))
        return response.version, response.tool_count

    def delete_tools(
        self, toolset: str, names: Iterable[str], forget_exemplars: bool = False
    ) -> tuple[int, int]:
        """Remove tools; with `forget_exemplars`, also what they learned from use."""
        request = tools_pb2.DeleteToolsRequest(
            toolset=toolset, names=list(names), forget_exemplars=forget_exemplars
        )
        response = self._unary(self._tools.DeleteTools, request)
        return response.version, response.tool_count

    def list_tools(self, toolset: str, page_size: int = 100) -> Iterator[t.Tool]:
        token = ""
        while True:
            request = tools_pb2.ListToolsRequest(toolset=toolset, page_size=page_size, page_token=token)
            response = self._unary(self._tools.ListTools, request)
            yield from (_convert.tool(x) for x in response.tools)
            token = response.next_page_token
            if not token:
                return

    def route_tool(
        self, toolset: str, request: str, top_k: int = 5, offered_tools: Iterable[str] = ()
    ) -> t.ToolRoute:
        """The toolset's tools ranked for `request` (among `offered_tools` if given)."""
        message = tools_pb2.RouteToolRequest(
            toolset=toolset, request=request, top_k=top_k, offered_tools=list(offered_tools)
        )
        return _convert.tool_route(self._unary(self._tools.RouteTool, message))

    def tool_metrics(self, toolset: str, window: int = 100) -> t.ToolMetrics:
        request = tools_pb2.GetToolMetricsRequest(toolset=toolset, window=window)
        return _convert.tool_metrics(self._unary(self._tools.GetToolMetrics, request))

    def calibrate(self, target: str, timeout: float | None = None, **options) -> Iterator[t.CalibrateEvent]:
        """Fit `target` ("bandit", "miss_rate", "stop_threshold", "confidence", or "query_adapter"
        with `collection=`) from recorded outcomes; yields progress and finally the report."""
        call = self._sounding.Calibrate(
            _convert.calibrate_request(target, **options), timeout=timeout or self.timeout
        )
        yield from self._stream(call, _convert.calibrate_event)

    def strategy_metrics(self) -> t.StrategyMetrics:
        """How the strategy selector has behaved, per arm and overall."""
        response = self._unary(self._sounding.GetStrategyMetrics, sounding_pb2.GetStrategyMetricsRequest())
        return _convert.strategy_metrics(response)

    def retrieve_final(self, collection: str, query: str, **options) -> t.Final:
        """Runs a Retrieve and returns only its final result."""
        for event in self.retrieve(collection, query, **options):
            if isinstance(event, t.Final):
                return event
        raise RuntimeError("the Retrieve stream ended without a final result")

    def inquire(
        self,
        domain: str,
        policy: t.InquiryPolicy | None = None,
        hypotheses: Iterable[t.Hypothesis] = (),
        questions: Iterable[t.Question] = (),
        domain_parameters: dict[str, str] | None = None,
        timeout: float | None = None,
        context: str = "",
    ) -> Inquiry:
        """Start an inquiry session (domain "bulls_and_cows", "hypotheses", "llm" with the
        problem in `context`, or "corpus" with the claim in `context` and the collection in
        `domain_parameters`: the server runs its own queries and streams Evidence)."""
        start = _convert.inquiry_start(
            domain, policy or t.InquiryPolicy(), hypotheses, questions, domain_parameters or {}, context
        )
        return Inquiry(self._sounding, start, timeout or self.timeout)

    def resume_inquiry(self, session_id: str, timeout: float | None = None) -> Inquiry:
        """Continue a stored session on a new stream: it first re-sends the current Belief and
        the pending Ask (or the final answer)."""
        return Inquiry(self._sounding, _convert.inquiry_resume(session_id), timeout or self.timeout)

    def _unary(self, method, request, timeout: float | None = None):
        try:
            return method(request, timeout=timeout or self.timeout)
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


class _Session:
    """What both inquiry sessions track: the session id, once known, and the pending Ask."""

    session_id = ""
    last_ask: t.Ask | None = None

    def _seen(self, message) -> t.InquiryEvent:
        event = _convert.inquiry_event(message)
        self.session_id = event.session_id
        if isinstance(event, t.Ask):
            self.last_ask = event
        return event

    def _observation(self, answer: str, question_id: str | None):
        if question_id is None:
            if self.last_ask is None:
                raise RuntimeError("no question has been asked yet")
            question_id = self.last_ask.question_id
        return _convert.inquiry_observation(question_id, answer)


class Inquiry(_Session):
    """A live Inquire session. Iterate it for Belief, Ask and InquiryAnswer events; after each
    Ask, call `answer(...)` before asking for the next event. `session_id` is known after the
    first event and lets `Client.resume_inquiry` continue the session on a new stream."""

    _CLOSE = object()

    def __init__(self, stub, first_request, timeout):
        self._outbox: queue.Queue = queue.Queue()
        self._outbox.put(first_request)
        self._call = stub.Inquire(self._requests(), timeout=timeout)

    def _requests(self):
        while (request := self._outbox.get()) is not self._CLOSE:
            yield request

    def __iter__(self) -> Iterator[t.InquiryEvent]:
        try:
            for message in self._call:
                yield self._seen(message)
        except grpc.RpcError as error:
            raise _convert.error(error) from None
        finally:
            self.close()

    def answer(self, answer: str, question_id: str | None = None) -> None:
        """Answer the last question asked (or the one named)."""
        self._outbox.put(self._observation(answer, question_id))

    def close(self) -> None:
        """End the stream (the session stays stored and can be resumed)."""
        self._outbox.put(self._CLOSE)
        self._call.cancel()


class AsyncClient:
    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        timeout: float | None = None,
        *,
        token: str | None = None,
        ca_file: PathType | None = None,
        cert_file: PathType | None = None,
        key_file: PathType | None = None,
    ):
        """As `Client`."""
        self._channel = _channel(
            grpc.aio.secure_channel, grpc.aio.insecure_channel, address, token, ca_file, cert_file, key_file
        )
        self._sounding = sounding_pb2_grpc.SoundingServiceStub(self._channel)
        self._corpus = corpus_pb2_grpc.CorpusServiceStub(self._channel)
        self._tools = tools_pb2_grpc.ToolServiceStub(self._channel)
        self.timeout = timeout

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def wait_ready(self, timeout: float = 30.0) -> None:
        await asyncio.wait_for(self._channel.channel_ready(), timeout)

    async def create_collection(self, name: str, description: str = "") -> t.Collection:
        request = corpus_pb2.CreateCollectionRequest(name=name, description=description)
        return _convert.collection((await self._unary(self._corpus.CreateCollection, request)).collection)

    async def get_collection(self, name: str) -> t.Collection:
        request = corpus_pb2.GetCollectionRequest(name=name)
        return _convert.collection((await self._unary(self._corpus.GetCollection, request)).collection)

    async def list_collections(self, page_size: int = 100) -> AsyncIterator[t.Collection]:
        token = ""
        while True:
            request = corpus_pb2.ListCollectionsRequest(page_size=page_size, page_token=token)
            response = await self._unary(self._corpus.ListCollections, request)
            for collection in response.collections:
                yield _convert.collection(collection)
            token = response.next_page_token
            if not token:
                return

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
        expansion: t.ExpansionOptions | None = None,
        learned_ranking: bool = True,
    ) -> AsyncIterator[t.RetrieveEvent]:
        request = _convert.retrieve_request(
            collection,
            query,
            top_k,
            arms,
            fusion_k,
            omit_text,
            synthesis_confidence,
            expansion,
            learned_ranking,
        )
        call = self._sounding.Retrieve(request, timeout=timeout or self.timeout)
        async for event in self._stream(call, _convert.retrieve_event):
            yield event

    async def observe(
        self,
        outcomes: Iterable[t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse],
        timeout: float | None = None,
    ) -> t.ObserveResult:
        """Report outcomes and tools used (see `Client.observe`)."""
        requests = [_convert.observe_request(o) for o in outcomes]
        return _convert.observe_result(await self._unary(self._sounding.Observe, iter(requests), timeout))

    async def put_tools(self, toolset: str, tools: Iterable[t.Tool]) -> tuple[int, int]:
        response = await self._unary(self._tools.PutTools, _convert.put_tools_request(toolset, tools))
        return response.version, response.tool_count

    async def delete_tools(
        self, toolset: str, names: Iterable[str], forget_exemplars: bool = False
    ) -> tuple[int, int]:
        request = tools_pb2.DeleteToolsRequest(
            toolset=toolset, names=list(names), forget_exemplars=forget_exemplars
        )
        response = await self._unary(self._tools.DeleteTools, request)
        return response.version, response.tool_count

    async def list_tools(self, toolset: str, page_size: int = 100) -> AsyncIterator[t.Tool]:
        token = ""
        while True:
            request = tools_pb2.ListToolsRequest(toolset=toolset, page_size=page_size, page_token=token)
            response = await self._unary(self._tools.ListTools, request)
            for x in response.tools:
                yield _convert.tool(x)
            token = response.next_page_token
            if not token:
                return

    async def route_tool(
        self, toolset: str, request: str, top_k: int = 5, offered_tools: Iterable[str] = ()
    ) -> t.ToolRoute:
        message = tools_pb2.RouteToolRequest(
            toolset=toolset, request=request, top_k=top_k, offered_tools=list(offered_tools)
        )
        return _convert.tool_route(await self._unary(self._tools.RouteTool, message))

    async def tool_metrics(self, toolset: str, window: int = 100) -> t.ToolMetrics:
        request = tools_pb2.GetToolMetricsRequest(toolset=toolset, window=window)
        return _convert.tool_metrics(await self._unary(self._tools.GetToolMetrics, request))

    async def calibrate(
        self, target: str, timeout: float | None = None, **options
    ) -> AsyncIterator[t.CalibrateEvent]:
        """See `Client.calibrate`."""
        call = self._sounding.Calibrate(
            _convert.calibrate_request(target, **options), timeout=timeout or self.timeout
        )
        async for event in self._stream(call, _convert.calibrate_event):
            yield event

    async def strategy_metrics(self) -> t.StrategyMetrics:
        """See `Client.strategy_metrics`."""
        response = await self._unary(
            self._sounding.GetStrategyMetrics, sounding_pb2.GetStrategyMetricsRequest()
        )
        return _convert.strategy_metrics(response)

    async def retrieve_final(self, collection: str, query: str, **options) -> t.Final:
        async for event in self.retrieve(collection, query, **options):
            if isinstance(event, t.Final):
                return event
        raise RuntimeError("the Retrieve stream ended without a final result")

    def inquire(
        self,
        domain: str,
        policy: t.InquiryPolicy | None = None,
        hypotheses: Iterable[t.Hypothesis] = (),
        questions: Iterable[t.Question] = (),
        domain_parameters: dict[str, str] | None = None,
        timeout: float | None = None,
        context: str = "",
    ) -> AsyncInquiry:
        """See `Client.inquire`."""
        start = _convert.inquiry_start(
            domain, policy or t.InquiryPolicy(), hypotheses, questions, domain_parameters or {}, context
        )
        return AsyncInquiry(self._sounding, start, timeout or self.timeout)

    def resume_inquiry(self, session_id: str, timeout: float | None = None) -> AsyncInquiry:
        """See `Client.resume_inquiry`."""
        return AsyncInquiry(self._sounding, _convert.inquiry_resume(session_id), timeout or self.timeout)

    async def _unary(self, method, request, timeout: float | None = None):
        try:
            return await method(request, timeout=timeout or self.timeout)
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


class AsyncInquiry(_Session):
    """A live Inquire session on an `AsyncClient`: `async for` its events; after each Ask, call
    `answer(...)` before awaiting the next event. As `Inquiry` otherwise."""

    _CLOSE = object()

    def __init__(self, stub, first_request, timeout):
        self._outbox: asyncio.Queue = asyncio.Queue()
        self._outbox.put_nowait(first_request)
        self._call = stub.Inquire(self._requests(), timeout=timeout)

    async def _requests(self):
        while (request := await self._outbox.get()) is not self._CLOSE:
            yield request

    async def __aiter__(self) -> AsyncIterator[t.InquiryEvent]:
        try:
            async for message in self._call:
                yield self._seen(message)
        except grpc.RpcError as error:
            raise _convert.error(error) from None
        finally:
            self.close()

    def answer(self, answer: str, question_id: str | None = None) -> None:
        """Answer the last question asked (or the one named)."""
        self._outbox.put_nowait(self._observation(answer, question_id))

    def close(self) -> None:
        """End the stream (the session stays stored and can be resumed)."""
        self._outbox.put_nowait(self._CLOSE)
        self._call.cancel()
