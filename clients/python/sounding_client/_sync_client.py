"""Generated from _async_client.py by `python tools/generate_sync_client.py`:
do not edit. The blocking `Client` and `Inquiry`, twins of `AsyncClient` and `AsyncInquiry` (see
there); `make lint` fails when this file is not what the script makes of _async_client.py.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable, Iterator

import grpc
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2

from sounding_client import _convert, _requests, inquiry
from sounding_client import types as t
from sounding_client._transport import DEFAULT_ADDRESS, Connection
from sounding_client.credentials import PathType


class Client(Connection):
    """A client of the Sounding services: `AsyncClient` for asyncio (its calls are awaited, its
    streams async iterators), `Client` blocking (iterators). `token`: sent as a bearer token on
    every call; `ca_file`: TLS, verifying the server against this CA bundle; `cert_file` and
    `key_file`: the client certificate for mutual TLS. `timeout`: each call's, in seconds."""

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
        super().__init__(address, token, ca_file, cert_file, key_file)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_collection(self, name: str, description: str = "") -> t.Collection:
        request = corpus_pb2.CreateCollectionRequest(name=name, description=description)
        response = self._unary(self._corpus.CreateCollection, request)
        return _convert.collection(response.collection)

    def get_collection(self, name: str) -> t.Collection:
        request = corpus_pb2.GetCollectionRequest(name=name)
        response = self._unary(self._corpus.GetCollection, request)
        return _convert.collection(response.collection)

    def list_collections(self, page_size: int = 100) -> Iterator[t.Collection]:
        token = ""
        while True:
            request = corpus_pb2.ListCollectionsRequest(page_size=page_size, page_token=token)
            response = self._unary(self._corpus.ListCollections, request)
            for collection in response.collections:
                yield _convert.collection(collection)
            token = response.next_page_token
            if not token:
                return

    def delete_collection(self, name: str) -> None:
        self._unary(self._corpus.DeleteCollection, corpus_pb2.DeleteCollectionRequest(name=name))

    def ingest(
        self, collection: str, documents: Iterable[_requests.DocumentLike], batch_size: int = 64
    ) -> Iterator[t.IngestProgress]:
        """Streams documents in batches; yields a progress report per durably written batch."""
        call = self._corpus.IngestDocuments(
            _requests.ingest_requests(collection, documents, batch_size), timeout=self.timeout
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
        a reason. (An agent reporting tool uses on its turn's path uses a `ToolUseObserver` or
        an `AsyncToolUseObserver`.)"""
        requests = _requests.observe_requests(outcomes)
        response = self._unary(self._sounding.Observe, requests, timeout)
        return _convert.observe_result(response)

    def put_tools(self, toolset: str, tools: Iterable[t.Tool]) -> tuple[int, int]:
        """Add tools to a toolset or replace them by name; (the toolset's new version, its tool count)."""
        response = self._unary(self._tools.PutTools, _requests.put_tools_request(toolset, tools))
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
            for tool in response.tools:
                yield _convert.tool(tool)
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
            _requests.calibrate_request(target, **options), timeout=timeout or self.timeout
        )
        yield from self._stream(call, _convert.calibrate_event)

    def strategy_metrics(self) -> t.StrategyMetrics:
        """How the strategy selector has behaved, per arm and overall."""
        request = sounding_pb2.GetStrategyMetricsRequest()
        return _convert.strategy_metrics(self._unary(self._sounding.GetStrategyMetrics, request))

    def retrieve_final(self, collection: str, query: str, **options) -> t.Final:
        """Runs a Retrieve and returns only its final result."""
        for event in self.retrieve(collection, query, **options):
            if isinstance(event, t.Final):
                return event
        raise RuntimeError("the Retrieve stream ended without a final result")

    def inquire(
        self,
        domain: str,
        policy: inquiry.InquiryPolicy | None = None,
        hypotheses: Iterable[inquiry.Hypothesis] = (),
        questions: Iterable[inquiry.Question] = (),
        domain_parameters: dict[str, str] | None = None,
        timeout: float | None = None,
        context: str = "",
    ) -> Inquiry:
        """Start an inquiry session (domain "bulls_and_cows", "hypotheses", "llm" with the
        problem in `context`, or "corpus" with the claim in `context` and the collection in
        `domain_parameters`: the server runs its own queries and streams Evidence)."""
        start = _requests.inquiry_start(
            domain, policy or inquiry.InquiryPolicy(), hypotheses, questions, domain_parameters or {}, context
        )
        return Inquiry(self._sounding, start, timeout or self.timeout)

    def resume_inquiry(self, session_id: str, timeout: float | None = None) -> Inquiry:
        """Continue a stored session on a new stream: it first re-sends the current Belief and
        the pending Ask (or the final answer)."""
        return Inquiry(self._sounding, _requests.inquiry_resume(session_id), timeout or self.timeout)

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


class Inquiry:
    """A live Inquire session: iterate it (`async for` an `AsyncInquiry`) for Belief, Ask,
    Evidence and InquiryAnswer events; after each Ask, call `answer(...)` before asking for the
    next event. `session_id` is known after the first event and lets `resume_inquiry` continue
    the session on a new stream."""

    _CLOSE = object()
    session_id = ""
    last_ask: inquiry.Ask | None = None

    def __init__(self, stub, first_request, timeout):
        self._outbox: queue.Queue = queue.Queue()
        self._outbox.put_nowait(first_request)
        self._call = stub.Inquire(self._outgoing(), timeout=timeout)

    def _outgoing(self):
        while (request := self._outbox.get()) is not self._CLOSE:
            yield request

    def __iter__(self) -> Iterator[inquiry.InquiryEvent]:
        try:
            for message in self._call:
                event = _convert.inquiry_event(message)
                self.session_id = event.session_id
                if isinstance(event, inquiry.Ask):
                    self.last_ask = event
                yield event
        except grpc.RpcError as error:
            raise _convert.error(error) from None
        finally:
            self.close()

    def answer(self, answer: str, question_id: str | None = None) -> None:
        """Answer the last question asked (or the one named)."""
        if question_id is None:
            if self.last_ask is None:
                raise RuntimeError("no question has been asked yet")
            question_id = self.last_ask.question_id
        self._outbox.put_nowait(_requests.inquiry_observation(question_id, answer))

    def close(self) -> None:
        """End the stream (the session stays stored and can be resumed)."""
        self._outbox.put_nowait(self._CLOSE)
        self._call.cancel()
