"""How Sounding serves a gRPC service: the same for the orchestrator and the models sidecar.

`service_handler(service, servicer, policies)` binds each method of a service descriptor to the
servicer's method of the same name (a coroutine for a unary response, an async generator for a
streamed one) and wraps every call:
- the caller is authenticated from the call's metadata before anything of its request is read
  (`auth.Authenticator`: UNAUTHENTICATED without a valid bearer token when tokens are
  configured; the refusal never reads, let alone decodes, the request body), then its role is
  checked against the method's (PERMISSION_DENIED); the servicer finds the caller in
  `context.principal`;
- requests decode leniently: a message that does not parse is answered INVALID_ARGUMENT naming
  the field it was traced to (grpc's own decoding answers UNKNOWN); one that breaks a rule its
  proto declares (`validation`) is answered INVALID_ARGUMENT naming the violated fields;
- calls beyond the method's concurrency, or the server's (`Gate`, authenticated calls only), are
  answered RESOURCE_EXHAUSTED at once, and once the server drains (`Gate.drain`) new calls are
  answered UNAVAILABLE while those in flight finish;
- a call without a client deadline gets its method's default one (`context.time_remaining()`
  reports it, so the work below it is bounded too); a client-streamed request whose first
  message, or next one, does not arrive in time ends DEADLINE_EXCEEDED;
- a server span under the caller's trace;
- a call of a method that can change what is stored (`CallPolicy.audited`) leaves an audit line;
- domain errors become statuses with details (`grpc_errors`); any other exception is logged
  with an incident id and answered INTERNAL.
Client cancels and deadlines cancel the handler's task; the services release their work in
their `finally` blocks.

Who is let in at all, and how many at once, is `admission`'s: the gate of authenticated calls,
refusals made before a request is read, and the services a caller may use without a token.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor, message_factory
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from sounding.runtime import errors, telemetry
from sounding.serving import auth, validation
from sounding.serving.admission import HANDLERS, Gate, refusal
from sounding.serving.audit import AuditRecord
from sounding.serving.decoding import Undecodable, lenient_decoder
from sounding.serving.grpc_errors import abort
from sounding.settings.config import TlsSettings
from sounding.settings.limits import TransportLimits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallPolicy:
    """Limits of one method's calls (None: no limit)."""

    # The deadline of a call whose client set none.
    deadline_s: float | None = None
    # Client-streamed requests: until the first message, and between later ones.
    first_message_s: float | None = None
    idle_s: float | None = None
    max_concurrent: int | None = None
    # The least role a caller needs (when tokens are configured).
    role: auth.Role = "reader"
    # Whether its calls can change what is stored, and so leave an audit line (`audit`); by
    # default, those of the methods above `reader`.
    audited: bool | None = None

    @property
    def audits(self) -> bool:
        return self.role != "reader" if self.audited is None else self.audited


class _Context:
    """The servicer context with the server's default deadline folded into `time_remaining`, and
    the authenticated caller as `principal`."""

    def __init__(self, context: grpc.aio.ServicerContext, deadline: float | None, principal: auth.Principal):
        self._context = context
        self._deadline = deadline
        self.principal = principal

    def time_remaining(self) -> float | None:
        client = self._context.time_remaining()
        if self._deadline is None:
            return client
        own = max(self._deadline - asyncio.get_running_loop().time(), 0.0)
        return own if client is None else min(client, own)

    def __getattr__(self, name: str):
        return getattr(self._context, name)


class _Method:
    """One method's wrapper around its servicer behaviour."""

    def __init__(self, method: descriptor.MethodDescriptor, behaviour, policy: CallPolicy, gate: Gate):
        self.full_name = f"{method.containing_service.full_name}/{method.name}"
        self._behaviour = behaviour
        self._policy = policy
        self._gate = gate
        self._running = 0
        self._client_streaming = method.client_streaming
        self._make = HANDLERS[(method.client_streaming, method.server_streaming)]
        self._handle = self._streaming if method.server_streaming else self._unary
        self._decode = lenient_decoder(message_factory.GetMessageClass(method.input_type))
        self._encode = message_factory.GetMessageClass(method.output_type).SerializeToString

    def serving(self, principal: auth.Principal) -> grpc.RpcMethodHandler:
        """The handler of one call by `principal`, authenticated from the call's metadata."""
        return self._make(
            functools.partial(self._handle, principal=principal),
            request_deserializer=self._decode,
            response_serializer=self._encode,
        )

    def refusing(self, error: errors.SoundingError) -> grpc.RpcMethodHandler:
        """The handler of a call refused before anything of its request is read (audited, if the
        method is)."""

        return refusal(error, AuditRecord(self.full_name) if self._policy.audits else None)

    @contextmanager
    def _slot(self):
        """One of the method's concurrent calls; RESOURCE_EXHAUSTED when all are taken."""
        limit = self._policy.max_concurrent
        if limit is not None and self._running >= limit:
            raise errors.ResourceExhausted(
                f"{self.full_name} is serving {limit} calls, its limit; retry later",
                reason="TOO_MANY_CALLS",
            )
        self._gate.enter()
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            self._gate.leave()

    def _deadline(self, context) -> float | None:
        """The server's deadline on the event loop's clock, for a call that set none."""
        if self._policy.deadline_s is None or context.time_remaining() is not None:
            return None
        return asyncio.get_running_loop().time() + self._policy.deadline_s

    def _timed_out(self) -> errors.DeadlineExceeded:
        return errors.DeadlineExceeded(
            f"the call set no deadline and ran past the server's default of {self._policy.deadline_s:g} s",
            reason="SERVER_DEADLINE",
        )

    async def _requests(self, request_iterator, record: AuditRecord | None) -> AsyncIterator[Any]:
        """Client-streamed requests, decoded, each within its timeout (noted in `record`)."""
        iterator = aiter(request_iterator)
        timeout, which = self._policy.first_message_s, "first"
        index = 0
        while True:
            try:
                async with asyncio.timeout(timeout):
                    message = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise errors.DeadlineExceeded(
                    f"no {which} request message within {timeout:g} s", reason="REQUEST_IDLE"
                ) from None
            if isinstance(message, Undecodable):
                raise message.error(f"messages[{index}].")
            validation.check(message)
            if record is not None:
                record.note(message)
            yield message
            timeout, which, index = self._policy.idle_s, "next", index + 1

    def _authorize(self, principal: auth.Principal, record: AuditRecord | None) -> None:
        """PermissionDenied unless the caller's role allows this method (before it may take a
        slot)."""
        if record is not None:
            record.principal = principal
        auth.authorize(principal, self._policy.role, self.full_name)

    def _prepare(self, request, context, principal, record: AuditRecord | None):
        """The request (decoded, or the stream of them), the context bounded by the server's
        deadline and carrying the caller, and that deadline."""
        deadline = self._deadline(context)
        if self._client_streaming:
            request = self._requests(request, record)
        elif isinstance(request, Undecodable):
            raise request.error()
        else:
            validation.check(request)
        return request, _Context(context, deadline, principal), deadline

    def _record(self, request) -> AuditRecord | None:
        """The audit record of a call that may change what is stored (noting a unary request at
        once, so that a refused call names what it tried to change)."""
        if not self._policy.audits:
            return None
        record = AuditRecord(self.full_name)
        if not self._client_streaming and not isinstance(request, Undecodable):
            record.note(request)
        return record

    def _as_status(self, error: Exception) -> errors.SoundingError:
        return error if isinstance(error, errors.SoundingError) else errors.internal(self.full_name, error)

    async def _fail(self, context, error: errors.SoundingError, record: AuditRecord | None) -> None:
        if record is not None:
            record.outcome = error.code
        await abort(context, error)

    async def _within(self, deadline: float | None, awaitable):
        """`awaitable`, bounded by the server's deadline (if the call has one)."""
        try:
            async with asyncio.timeout_at(deadline):
                return await awaitable
        except TimeoutError:
            if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                raise self._timed_out() from None
            raise

    @asynccontextmanager
    async def _call(self, context, record: AuditRecord | None) -> AsyncIterator[tuple[Span, Context]]:
        """A call under its server span (with the caller's trace as parent): the span gets the
        call's status code, the audit record its outcome; an error ends the call with its status
        (INTERNAL for one that is not a SoundingError)."""
        parent = telemetry.extract(context.invocation_metadata())
        span = telemetry.tracer().start_span(
            self.full_name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=telemetry.rpc_attributes(self.full_name),
        )
        failure: BaseException | None = None
        try:
            yield span, parent
            if record is not None:
                record.outcome = "OK"
        except (asyncio.CancelledError, GeneratorExit) as error:
            failure = error
            if record is not None:
                record.outcome = "CANCELLED"
            raise
        except grpc.aio.AbortError:
            raise
        except Exception as error:
            failure = self._as_status(error)
            await self._fail(context, failure, record)
        finally:
            telemetry.end_rpc_span(span, telemetry.status_code(failure))
            if record is not None:
                record.emit()

    async def _unary(self, request, context, principal: auth.Principal):
        record = self._record(request)
        async with self._call(context, record) as (span, _):
            with trace.use_span(span, end_on_exit=False):
                self._authorize(principal, record)
                with self._slot():
                    request, bounded, deadline = self._prepare(request, context, principal, record)
                    return await self._within(deadline, self._behaviour(request, bounded))

    async def _streaming(self, request, context, principal: auth.Principal):
        record = self._record(request)
        async with self._call(context, record) as (span, parent):
            with trace.use_span(span, end_on_exit=False):
                self._authorize(principal, record)
            with self._slot():
                request, bounded, deadline = self._prepare(request, context, principal, record)
                responses = telemetry.stream_in_span(self._behaviour(request, bounded), span, parent)
                async with aclosing(responses):
                    while True:
                        # The deadline bounds each step, never a yield (a timeout must not span a
                        # suspension of this generator).
                        try:
                            response = await self._within(deadline, anext(responses))
                        except StopAsyncIteration:
                            return
                        yield response


class _Service(grpc.GenericRpcHandler):
    """A service's methods behind the door: each call's caller is authenticated from its metadata
    when grpc looks up the handler, before anything of the request is read."""

    def __init__(self, methods: Mapping[str, _Method], authenticator: auth.Authenticator):
        self._methods = {f"/{m.full_name}": m for m in methods.values()}
        self._authenticator = authenticator

    def service(self, handler_call_details):
        method = self._methods.get(handler_call_details.method)
        if method is None:
            return None
        try:
            principal = self._authenticator.authenticate(handler_call_details.invocation_metadata)
        except errors.SoundingError as refused:
            return method.refusing(refused)
        return method.serving(principal)


def service_handler(
    service: descriptor.ServiceDescriptor,
    servicer: object,
    policies: Mapping[str, CallPolicy],
    gate: Gate | None = None,
    authenticator: auth.Authenticator | None = None,
) -> grpc.GenericRpcHandler:
    """Every method of `service`, served by the servicer's method of the same name under the
    policy named after it (a method without one has no limits), admitted through `gate`, its
    callers identified by `authenticator` (none: every caller is `auth.LOCAL`)."""
    gate = gate or Gate()
    methods = {}
    for method in service.methods:
        behaviour = getattr(servicer, method.name, None)
        if behaviour is None:
            raise TypeError(f"{type(servicer).__name__} does not implement {service.full_name}.{method.name}")
        methods[method.name] = _Method(method, behaviour, policies.get(method.name, CallPolicy()), gate)
    return _Service(methods, authenticator or auth.Authenticator())


def server(limits: TransportLimits) -> grpc.aio.Server:
    """A grpc.aio server under the transport limits. grpc's own cap on calls at once is a backstop
    twice the budgets' sum (authenticated calls, and health and reflection without a token): it
    bounds how many request bodies are read at once (each at most `max_message_bytes`), with
    room for the calls being refused at any moment; the budgets refuse long before it is met."""
    return grpc.aio.server(
        maximum_concurrent_rpcs=2 * (limits.max_concurrent_rpcs + limits.max_unauthenticated_calls),
        options=[
            ("grpc.max_receive_message_length", limits.max_message_bytes),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.max_concurrent_streams", limits.max_streams_per_connection),
            ("grpc.keepalive_time_ms", int(limits.keepalive_time_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(limits.keepalive_timeout_s * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            (
                "grpc.http2.min_recv_ping_interval_without_data_ms",
                int(limits.min_client_ping_interval_s * 1000),
            ),
            ("grpc.http2.max_ping_strikes", 2),
            ("grpc.max_connection_idle_ms", int(limits.max_connection_idle_s * 1000)),
            # A second server on a taken port must fail, not silently share its traffic.
            ("grpc.so_reuseport", 0),
        ],
    )


def _read(path) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def listen(server: grpc.aio.Server, address: str, tls: TlsSettings) -> None:
    """Binds `address`: TLS when the settings name a certificate and key (mutual TLS when they
    name a client CA), plaintext otherwise."""
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ValueError("TLS needs both a certificate file and a key file")
    if tls.cert_file is None or tls.key_file is None:
        if tls.client_ca_file is not None:
            raise ValueError("mutual TLS (a client CA file) needs a server certificate and key")
        with _binding(address):
            server.add_insecure_port(address)
        return
    client_ca = _read(tls.client_ca_file)
    credentials = grpc.ssl_server_credentials(
        [(tls.key_file.read_bytes(), tls.cert_file.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )
    with _binding(address):
        server.add_secure_port(address, credentials)


class ListenError(OSError):
    """A server could not bind its address."""


@contextmanager
def _binding(address: str):
    try:
        yield
    except RuntimeError as error:  # grpc's "Failed to bind to address …"
        raise ListenError(
            f"cannot listen on {address}: its port is in use (is another Sounding process running, "
            "`sounding up` or `sounding demo`?) or the host is not one of this machine's"
        ) from error


def instance_health_name(instance_id: str) -> str:
    """The health service a process started with `Settings.instance_id` answers for, with the
    server's own status (`sounding.stack` checks it reached its own child)."""
    return f"sounding.instance/{instance_id}"


def instance_health_names(instance_id: str) -> list[str]:
    """The instance's health service name, if it was given an id (else none)."""
    return [instance_health_name(instance_id)] if instance_id else []


def refuse_open_plaintext(address: str, authenticated: bool, allow_unauthenticated: bool, what: str) -> None:
    """ValueError when `address` is reachable beyond this machine and nothing authenticates its
    callers, unless explicitly allowed."""
    if not authenticated and not allow_unauthenticated and not auth.is_loopback(address):
        raise ValueError(
            f"{what} would listen on {address}, beyond loopback, with no tokens configured: anyone who "
            "reaches it could use it. Configure tokens (README, Security), or set "
            "SOUNDING_AUTH__ALLOW_UNAUTHENTICATED=true to serve it open anyway."
        )


def channel_credentials(tls: TlsSettings, token: str = "") -> grpc.ChannelCredentials | None:
    """Credentials of a channel under these client-side TLS settings (README, "Security"): TLS
    verified against `ca_file` when set, with the client certificate a mutual-TLS server asks for,
    and `token` sent as a bearer token on every call. Without TLS a token goes only to a loopback
    address (grpc's local credentials refuse any other); None: plaintext, no token."""
    if tls.ca_file is None:
        if not token:
            return None
        transport = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        transport = grpc.ssl_channel_credentials(
            _read(tls.ca_file), _read(tls.client_key_file), _read(tls.client_cert_file)
        )
    if not token:
        return transport
    return grpc.composite_channel_credentials(transport, grpc.access_token_call_credentials(token))
