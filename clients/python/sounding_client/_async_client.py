"""The client, written once: `AsyncClient` and `AsyncInquiry` here, and the blocking `Client` and
`Inquiry` generated from them into _sync_client.py by `python tools/generate_sync_client.py`
(`async` and `await` dropped, the asyncio names given their blocking spelling). What the two do
each their own way is in _transport.py.

Both raise `SoundingError` with the status details on failure. Breaking out of a streaming
iterator cancels the call on the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable

import grpc
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2

from sounding_client import _convert, _requests, inquiry
from sounding_client import types as t
from sounding_client._transport import DEFAULT_ADDRESS, AsyncConnection
from sounding_client.credentials import PathType

# How long an inquiry keeps resuming a stream that broke (by default), and the pause before each.
RESUME_WITHIN_S = 30.0
RESUME_PAUSE_S = 0.25
RETRIEVE_ATTEMPTS = 4


def _cut(error: t.SoundingError) -> bool:
    """The call's server went away under it (draining, restarting, dead): UNAVAILABLE, or a
    stream reset (a balancer cuts a stream whose server died with RST_STREAM, which gRPC reports
    as INTERNAL)."""
    return error.code == grpc.StatusCode.UNAVAILABLE or (
        error.code == grpc.StatusCode.INTERNAL and "RST_STREAM" in error.message
    )


class AsyncClient(AsyncConnection):
    """A client of the Sounding services: `AsyncClient` for asyncio (its calls are awaited, its
    streams async iterators), `Client` blocking (iterators). `token`: sent as a bearer token on
    every call; `ca_file`: TLS, verifying the server against this CA bundle; `cert_file` and
    `key_file`: the client certificate for mutual TLS. `timeout`: each call's, in seconds.
    `resume_within_s`: how long an inquiry keeps resuming a stream that broke (`AsyncInquiry`).
    `round_robin`: spread calls over every address the target resolves to (README, "Scaling
    out")."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        timeout: float | None = None,
        *,
        token: str | None = None,
        ca_file: PathType | None = None,
        cert_file: PathType | None = None,
        key_file: PathType | None = None,
        resume_within_s: float = RESUME_WITHIN_S,
        round_robin: bool = False,
    ):
        super().__init__(address, token, ca_file, cert_file, key_file, round_robin)
        self.timeout = timeout
        self.resume_within_s = resume_within_s

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def create_collection(self, name: str, description: str = "") -> t.Collection:
        request = corpus_pb2.CreateCollectionRequest(name=name, description=description)
        response = await self._unary(self._corpus.CreateCollection, request)
        return _convert.collection(response.collection)

    async def get_collection(self, name: str) -> t.Collection:
        request = corpus_pb2.GetCollectionRequest(name=name)
        response = await self._unary(self._corpus.GetCollection, request)
        return _convert.collection(response.collection)

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
        self, collection: str, documents: Iterable[_requests.DocumentLike], batch_size: int = 64
    ) -> AsyncIterator[t.IngestProgress]:
        """Streams documents in batches; yields a progress report per durably written batch."""
        call = self._corpus.IngestDocuments(
            _requests.ingest_requests(collection, documents, batch_size), timeout=self.timeout
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
        fusion: str | None = None,
    ) -> AsyncIterator[t.RetrieveEvent]:
        """Stream a Retrieve's events; `learned_ranking=False` searches with the base embeddings,
        without the collection's query adapter (Calibrate("query_adapter")); `fusion` is
        "min_max" or "rrf" (None: the deployment's, or RRF when `fusion_k` is set)."""
        request = _requests.retrieve_request(
            collection,
            query,
            top_k,
            arms,
            fusion_k,
            omit_text,
            synthesis_confidence,
            expansion,
            learned_ranking,
            fusion,
        )
        call = self._sounding.Retrieve(request, timeout=timeout or self.timeout)
        async for event in self._stream(call, _convert.retrieve_event):
            yield event

    async def observe(
        self,
        outcomes: Iterable[t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse],
        timeout: float | None = None,
    ) -> t.ObserveResult:
        """Report outcomes of earlier Retrieves and inquiries, and tools used. The returned
        acknowledgement means the recorded ones are durable; those not recorded are listed with
        a reason. (An agent reporting tool uses on its turn's path uses a `ToolUseObserver` or
        an `AsyncToolUseObserver`.)"""
        requests = _requests.observe_requests(outcomes)
        response = await self._unary(self._sounding.Observe, requests, timeout)
        return _convert.observe_result(response)

    async def put_tools(self, toolset: str, tools: Iterable[t.Tool]) -> tuple[int, int]:
        """Add tools to a toolset or replace them by name; (the toolset's new version, its tool count)."""
        response = await self._unary(self._tools.PutTools, _requests.put_tools_request(toolset, tools))
        return response.version, response.tool_count

    async def delete_tools(
        self, toolset: str, names: Iterable[str], forget_exemplars: bool = False
    ) -> tuple[int, int]:
        """Remove tools; with `forget_exemplars`, also what they learned from use."""
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
            for tool in response.tools:
                yield _convert.tool(tool)
            token = response.next_page_token
            if not token:
                return

    async def route_tool(
        self, toolset: str, request: str, top_k: int = 5, offered_tools: Iterable[str] = ()
    ) -> t.ToolRoute:
        """The toolset's tools ranked for `request` (among `offered_tools` if given)."""
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
        """Fit `target` ("bandit", "miss_rate", "stop_threshold", "confidence", or "query_adapter"
        with `collection=`) from recorded outcomes; yields progress and finally the report."""
        call = self._sounding.Calibrate(
            _requests.calibrate_request(target, **options), timeout=timeout or self.timeout
        )
        async for event in self._stream(call, _convert.calibrate_event):
            yield event

    async def strategy_metrics(self) -> t.StrategyMetrics:
        """How the strategy selector has behaved, per arm and overall."""
        request = sounding_pb2.GetStrategyMetricsRequest()
        return _convert.strategy_metrics(await self._unary(self._sounding.GetStrategyMetrics, request))

    async def retrieve_final(self, collection: str, query: str, **options) -> t.Final:
        """Runs a Retrieve and returns only its final result. A stream the server ends with
        UNAVAILABLE or that is cut (draining, restarting, gone) is run again, up to
        RETRIEVE_ATTEMPTS in all."""
        for attempt in range(RETRIEVE_ATTEMPTS):
            try:
                async for event in self.retrieve(collection, query, **options):
                    if isinstance(event, t.Final):
                        return event
                raise RuntimeError("the Retrieve stream ended without a final result")
            except t.SoundingError as error:
                if not _cut(error) or attempt == RETRIEVE_ATTEMPTS - 1:
                    raise
                await self._pause(RESUME_PAUSE_S * 2**attempt)
        raise AssertionError("unreachable")

    def inquire(
        self,
        domain: str,
        policy: inquiry.InquiryPolicy | None = None,
        hypotheses: Iterable[inquiry.Hypothesis] = (),
        questions: Iterable[inquiry.Question] = (),
        domain_parameters: dict[str, str] | None = None,
        timeout: float | None = None,
        context: str = "",
    ) -> AsyncInquiry:
        """Start an inquiry session (domain "bulls_and_cows", "hypotheses", "llm" with the
        problem in `context`, or "corpus" with the claim in `context` and the collection in
        `domain_parameters`: the server runs its own queries and streams Evidence)."""
        start = _requests.inquiry_start(
            domain, policy or inquiry.InquiryPolicy(), hypotheses, questions, domain_parameters or {}, context
        )
        return AsyncInquiry(self._sounding, start, timeout or self.timeout, self)

    def resume_inquiry(self, session_id: str, timeout: float | None = None) -> AsyncInquiry:
        """Continue a stored session on a new stream: it first re-sends the current Belief and
        the pending Ask (or the final answer)."""
        return AsyncInquiry(
            self._sounding, _requests.inquiry_resume(session_id), timeout or self.timeout, self
        )

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


class AsyncInquiry:
    """A live Inquire session: iterate it (`async for` an `AsyncInquiry`) for Belief, Ask,
    Evidence and InquiryAnswer events; after each Ask, call `answer(...)` before asking for the
    next event. `session_id` is known after the first event and lets `resume_inquiry` continue
    the session on a new stream.

    Once the session is known, a stream the server ends with UNAVAILABLE or that is cut (its
    replica draining, restarting or gone) is resumed on a new stream, which the deployment's
    balancer may send to another replica, for up to the client's `resume_within_s` (a session a
    dead replica held is free once its hold expires): the events already delivered are not
    delivered again, and an answer the server had not applied is sent again. A session another
    stream took over is not resumed."""

    _CLOSE = object()
    session_id = ""
    last_ask: inquiry.Ask | None = None
    resumes = 0

    def __init__(self, stub, first_request, timeout, client: AsyncClient):
        self._stub, self._timeout = stub, timeout
        self._pause, self._resume_within_s = client._pause, client.resume_within_s
        self._answer: sounding_pb2.InquireRequest | None = None  # to `last_ask`, once sent
        self._open(first_request)

    def _open(self, first_request) -> None:
        self._outbox: asyncio.Queue = asyncio.Queue()
        self._outbox.put_nowait(first_request)
        self._call = self._stub.Inquire(self._outgoing(self._outbox), timeout=self._timeout)

    async def _outgoing(self, outbox):
        while (request := await outbox.get()) is not self._CLOSE:
            yield request

    def _resumable(self, error: t.SoundingError, since: float | None) -> bool:
        if not self.session_id or (since is not None and time.monotonic() - since > self._resume_within_s):
            return False
        if _cut(error):
            return error.reason != "SESSION_TAKEN_OVER"
        # A resume that finds the session still held by the stream that broke.
        return since is not None and error.reason == "SESSION_BUSY"

    async def __aiter__(self) -> AsyncIterator[inquiry.InquiryEvent]:
        resuming_since: float | None = None  # when the streams began to break, while they do
        replaying = False  # a resumed stream re-sends the current Belief and the pending Ask
        belief: inquiry.Belief | None = None  # a re-sent Belief, delivered if what follows is new
        try:
            while True:
                try:
                    async for message in self._call:
                        event = _convert.inquiry_event(message)
                        self.session_id = event.session_id
                        if replaying and isinstance(event, inquiry.Belief):
                            belief = event
                            continue
                        if replaying and isinstance(event, inquiry.Ask) and self.last_ask is not None:
                            replaying = False
                            if event.question_id == self.last_ask.question_id:
                                if self._answer is not None:
                                    self._outbox.put_nowait(self._answer)
                                continue  # delivered before the break
                        replaying, resuming_since = False, None
                        if belief is not None:
                            yield belief
                            belief = None
                        if isinstance(event, inquiry.Ask):
                            self.last_ask, self._answer = event, None
                        yield event
                    return
                except grpc.RpcError as rpc_error:
                    error = _convert.error(rpc_error)
                    if not self._resumable(error, resuming_since):
                        raise error from None
                resuming_since = resuming_since or time.monotonic()
                self._outbox.put_nowait(self._CLOSE)  # the broken stream's sender stops
                await self._pause(RESUME_PAUSE_S)
                self.resumes += 1
                self._open(_requests.inquiry_resume(self.session_id))
                replaying, belief = True, None
        finally:
            self.close()

    def answer(self, answer: str, question_id: str | None = None) -> None:
        """Answer the last question asked (or the one named)."""
        if question_id is None:
            if self.last_ask is None:
                raise RuntimeError("no question has been asked yet")
            question_id = self.last_ask.question_id
        request = _requests.inquiry_observation(question_id, answer)
        if self.last_ask is not None and question_id == self.last_ask.question_id:
            self._answer = request
        self._outbox.put_nowait(request)

    def close(self) -> None:
        """End the stream (the session stays stored and can be resumed)."""
        self._outbox.put_nowait(self._CLOSE)
        self._call.cancel()
