"""Who a server lets in, and how many at once (the orchestrator's and the sidecar's alike):

- `Gate`: the authenticated calls of a server, all methods together: at most so many at once,
  and none new once it drains;
- `refusal`: the handler of a call refused before anything of its request is read;
- `open_service_handler`: the services a caller may use without a token (health, reflection),
  served on a budget of their own (`OpenCalls`): at most so many calls at once in all and from
  one peer address, so that unauthenticated streams held open never take what authenticated
  calls need. A caller that sends a valid token is served outside that budget.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from contextlib import contextmanager

import grpc
from google.protobuf import descriptor, message_factory

from sounding import auth, errors
from sounding.audit import AuditRecord
from sounding.grpc_errors import abort

HANDLERS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class Gate:
    """Admission to all of a server's authenticated methods: counts the calls in flight, refuses
    one beyond `max_in_flight` (RESOURCE_EXHAUSTED) and, once draining, every new one
    (UNAVAILABLE, reason DRAINING: a client should retry elsewhere). grpc's own shutdown answers
    new calls CANCELLED, which clients take as final."""

    def __init__(self, max_in_flight: int | None = None):
        self.draining = False
        self.in_flight = 0
        self._max_in_flight = max_in_flight
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        if self.draining:
            raise errors.Unavailable("the server is shutting down; retry on another", reason="DRAINING")
        if self._max_in_flight is not None and self.in_flight >= self._max_in_flight:
            raise errors.ResourceExhausted(
                f"the server is serving {self._max_in_flight} calls, its limit; retry later",
                reason="TOO_MANY_CALLS",
            )
        self.in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self._idle.set()

    async def drain(self, grace_s: float) -> bool:
        """Refuse new calls; wait until those in flight ended (True) or `grace_s` passed."""
        self.draining = True
        try:
            async with asyncio.timeout(grace_s):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False


class OpenCalls:
    """The budget of the calls a caller may make without a token (health, reflection): at most
    `max_calls` at once in all and `max_calls_per_peer` from one address (a peer's port aside);
    beyond, RESOURCE_EXHAUSTED at once."""

    def __init__(self, max_calls: int, max_calls_per_peer: int):
        self._max_calls = max_calls
        self._max_calls_per_peer = max_calls_per_peer
        self._by_peer: Counter[str] = Counter()
        self.in_flight = 0

    @contextmanager
    def slot(self, peer: str):
        address = peer_address(peer)
        if self.in_flight >= self._max_calls or self._by_peer[address] >= self._max_calls_per_peer:
            raise errors.ResourceExhausted(
                f"at most {self._max_calls_per_peer} calls without a token from one address, and "
                f"{self._max_calls} in all, are served at once; retry later",
                reason="TOO_MANY_OPEN_CALLS",
            )
        self.in_flight += 1
        self._by_peer[address] += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self._by_peer[address] -= 1
            if not self._by_peer[address]:
                del self._by_peer[address]


def peer_address(peer: str) -> str:
    """The address of a grpc peer string (`ipv4:10.0.0.1:5000`, `ipv6:[::1]:5000`), its port aside."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rsplit(":", 1)[0]
    return peer


def _budgeted(behaviour, budget: OpenCalls):
    """`behaviour` (a coroutine, or an async generator of responses) within the budget."""
    if inspect.isasyncgenfunction(behaviour):

        async def stream(request, context):
            try:
                with budget.slot(context.peer()):
                    async for response in behaviour(request, context):
                        yield response
            except errors.SoundingError as refused:
                await abort(context, refused)

        return stream

    async def call(request, context):
        try:
            with budget.slot(context.peer()):
                return await behaviour(request, context)
        except errors.SoundingError as refused:
            await abort(context, refused)

    return call


def open_service_handler(
    service: descriptor.ServiceDescriptor,
    servicer: object,
    budget: OpenCalls,
    authenticator: auth.Authenticator,
) -> grpc.GenericRpcHandler:
    """Every method of a service that needs no token (`servicer` implements them as grpc's own
    servicers do), served within `budget` to callers that send none; a caller that sends a valid
    token is served outside it, one that sends an invalid token is refused (UNAUTHENTICATED)."""
    handlers: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}
    for method in service.methods:
        behaviour = getattr(servicer, method.name)
        make = HANDLERS[(method.client_streaming, method.server_streaming)]
        codecs = {
            "request_deserializer": message_factory.GetMessageClass(method.input_type).FromString,
            "response_serializer": message_factory.GetMessageClass(method.output_type).SerializeToString,
        }
        handlers[f"/{service.full_name}/{method.name}"] = (
            make(behaviour, **codecs),
            make(_budgeted(behaviour, budget), **codecs),
        )

    return _OpenService(handlers, authenticator)


class _OpenService(grpc.GenericRpcHandler):
    """Per method, (its handler for a caller with a valid token, its budgeted one)."""

    def __init__(
        self,
        handlers: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]],
        authenticator: auth.Authenticator,
    ):
        self._handlers = handlers
        self._authenticator = authenticator

    def service(self, handler_call_details):
        pair = self._handlers.get(handler_call_details.method)
        if pair is None:
            return None
        metadata = handler_call_details.invocation_metadata
        if not self._authenticator.enabled or not auth.has_token(metadata):
            return pair[1]
        try:
            self._authenticator.authenticate(metadata)
        except errors.SoundingError as refused:
            return refusal(refused)
        return pair[0]


def refusal(error: errors.SoundingError, record: AuditRecord | None = None) -> grpc.RpcMethodHandler:
    """A handler answering `error` without reading the request: a handler of a client stream that
    reads none of it, whatever the method's kind (grpc reads a unary request before its handler
    runs). `record`, if any, is emitted with the refusal as its outcome."""

    async def refuse(request_iterator, context) -> None:
        if record is not None:
            record.outcome = error.code
            record.emit()
        await abort(context, error)

    return grpc.stream_stream_rpc_method_handler(refuse)


