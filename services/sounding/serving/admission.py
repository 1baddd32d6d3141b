"""Who a server lets in, and how many at once (the orchestrator's and the sidecar's alike):

- `Gate`: the authenticated calls of a server, all methods together: at most so many at once,
  and none new once it drains;
- `refusal`: the handler of a call refused before anything of its request is read;
- `open_service_handler`: the services a caller may use without a token (health, reflection),
  served on a budget of their own (`OpenCalls`): at most so many calls at once in all and from
  one peer address, each slot taken before its request is read, so that unauthenticated
  streams held open never take what authenticated calls need. Callers that send a valid token
  have a budget of their own for these services too.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import urllib.parse
from collections import Counter
from contextlib import contextmanager

import grpc
from google.protobuf import descriptor, message_factory

from sounding.runtime import errors
from sounding.serving import auth
from sounding.serving.audit import AuditRecord
from sounding.serving.grpc_errors import abort
from sounding.settings.limits import TransportLimits

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
    """A budget of calls to the services that need no token (health, reflection): at most
    `max_calls` at once in all and `max_calls_per_peer` from one address (its port aside; an IPv6
    address by its /64); beyond, RESOURCE_EXHAUSTED at once. Calls from loopback count against
    their address's share only, not the total: a probe run inside the pod (`sounding health`)
    is not refused because remote callers took the total."""

    def __init__(self, max_calls: int, max_calls_per_peer: int, what: str = "without a token"):
        self._max_calls = max_calls
        self._max_calls_per_peer = max_calls_per_peer
        self._what = what
        self._by_peer: Counter[str] = Counter()
        self.in_flight = 0

    @contextmanager
    def slot(self, peer: str):
        address = peer_address(peer)
        counted = not _is_loopback(address)
        if (counted and self.in_flight >= self._max_calls) or self._by_peer[
            address
        ] >= self._max_calls_per_peer:
            raise errors.ResourceExhausted(
                f"at most {self._max_calls_per_peer} health and reflection calls {self._what} from one "
                f"address, and {self._max_calls} in all, are served at once; retry later",
                reason="TOO_MANY_OPEN_CALLS",
            )
        self.in_flight += counted
        self._by_peer[address] += 1
        try:
            yield
        finally:
            self.in_flight -= counted
            self._by_peer[address] -= 1
            if not self._by_peer[address]:
                del self._by_peer[address]


def peer_address(peer: str) -> str:
    """The address a grpc peer string names (`ipv4:10.0.0.1:5000` is 10.0.0.1), its port aside;
    of an IPv6 address, its /64 (`ipv6:[2001:db8::1]:5000` is 2001:db8::/64): one host holds
    a whole /64. grpc percent-encodes the brackets of an IPv6 address (`ipv6:%5B::1%5D:5000`)."""
    kind, _, rest = peer.partition(":")
    rest = urllib.parse.unquote(rest)
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        host = ipaddress.IPv6Address(rest.rsplit(":", 1)[0].strip("[]"))
        return "::1" if host.is_loopback else str(ipaddress.IPv6Network((host, 64), strict=False))
    return peer


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address.startswith("unix:")


# A request of a budgeted method that takes longer than this to arrive is refused.
OPEN_REQUEST_TIMEOUT_S = 10.0


def _budgeted(method: descriptor.MethodDescriptor, behaviour, budget: OpenCalls) -> grpc.RpcMethodHandler:
    """`behaviour` (grpc's own servicer method) within `budget`, its slot taken before anything of
    the request is read: a method of one request message is served as a client stream whose
    message is read once the call holds its slot (grpc would read a unary request before the
    handler runs), within OPEN_REQUEST_TIMEOUT_S."""
    request_type = message_factory.GetMessageClass(method.input_type)
    encode = message_factory.GetMessageClass(method.output_type).SerializeToString

    async def within(context, work):
        try:
            with budget.slot(context.peer()):
                return await work()
        except errors.SoundingError as refused:
            await abort(context, refused)

    async def request(context):
        try:
            async with asyncio.timeout(OPEN_REQUEST_TIMEOUT_S):
                message = await context.read()
        except TimeoutError:
            raise errors.DeadlineExceeded(
                "the request did not arrive in time", reason="REQUEST_IDLE"
            ) from None
        if not isinstance(message, request_type):  # the end of the stream
            raise errors.InvalidArgument("the call sent no request message", field="message")
        return message

    if method.client_streaming:
        if inspect.isasyncgenfunction(behaviour):

            async def stream(requests, context):
                try:
                    with budget.slot(context.peer()):
                        async for response in behaviour(requests, context):
                            yield response
                except errors.SoundingError as refused:
                    await abort(context, refused)

            handle = stream
        else:

            async def call(requests, context):
                return await within(context, lambda: behaviour(requests, context))

            handle = call
    else:

        async def one(requests, context):
            async def work():
                return await behaviour(await request(context), context)

            return await within(context, work)

        handle = one
    make = HANDLERS[(True, method.server_streaming)]
    return make(handle, request_deserializer=request_type.FromString, response_serializer=encode)


def open_budgets(limits: TransportLimits) -> tuple[OpenCalls, OpenCalls]:
    """A server's budgets of health and reflection calls: (without a token, with one)."""
    return (
        OpenCalls(limits.max_unauthenticated_calls, limits.max_unauthenticated_calls_per_peer),
        OpenCalls(limits.max_concurrent_rpcs, limits.max_concurrent_rpcs, "with a token"),
    )


def open_service_handler(
    service: descriptor.ServiceDescriptor,
    servicer: object,
    budgets: tuple[OpenCalls, OpenCalls],
    authenticator: auth.Authenticator,
) -> grpc.GenericRpcHandler:
    """Every method of a service that needs no token (`servicer` implements them as grpc's own
    servicers do), served within the first of `budgets` to callers that send no token and within
    the second to callers that send a valid one; a caller that sends an invalid token is refused
    (UNAUTHENTICATED)."""
    budget, authenticated = budgets
    handlers = {
        f"/{service.full_name}/{method.name}": (
            _budgeted(method, getattr(servicer, method.name), authenticated),
            _budgeted(method, getattr(servicer, method.name), budget),
        )
        for method in service.methods
    }
    return _OpenService(handlers, authenticator)


class _OpenService(grpc.GenericRpcHandler):
    """Per method, (its handler for a caller with a valid token, its handler for one without)."""

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
