"""OpenTelemetry traces and metrics (on when OTEL_EXPORTER_OTLP_ENDPOINT is set, free when off), and
the processes' logging.

With no endpoint, no SDK provider is installed and the API's no-op tracer and meter are used, so
spans and measurements cost next to nothing. Trace context crosses process boundaries
explicitly: `inject()` gives a carrier dict for strategy-worker call arguments or gRPC metadata, `extract()`
turns it back into a context.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from typing import TypeVar

import grpc
from opentelemetry import context, metrics, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from sounding.runtime import errors

T = TypeVar("T")

_configured = False


def setup(service_name: str) -> None:
    """Install OTLP-exporting tracer and meter providers once per process, if an endpoint is
    configured."""
    global _configured
    if _configured or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME (and OTEL_RESOURCE_ATTRIBUTES) win over the process's default name.
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(
        MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    )
    _configured = True


class JsonLogFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the current trace and span ids (when
    a span is recording) and the exception's traceback, if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry["trace_id"] = trace.format_trace_id(span.trace_id)
            entry["span_id"] = trace.format_span_id(span.span_id)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


# grpc's core reports a metadata value that is not UTF-8 by quoting it whole, with a traceback,
# several times per call: a bearer token with one stray byte would reach the log, and any caller
# could fill the log with such reports. The call itself goes on and is refused (UNAUTHENTICATED).
GRPC_CORE_LOGGER = "grpc._cython.cygrpc"
UNDECODABLE_METADATA = "Invalid encoding on %s"


class DropUndecodableMetadata(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != UNDECODABLE_METADATA


def configure_logging(level: str, format: str) -> None:
    """The process's root logger at `level`, as text or JSON lines (`Settings.log_level`,
    `Settings.log_format`); grpc's reports quoting undecodable metadata are dropped."""
    grpc_core = logging.getLogger(GRPC_CORE_LOGGER)
    if not any(isinstance(f, DropUndecodableMetadata) for f in grpc_core.filters):
        grpc_core.addFilter(DropUndecodableMetadata())
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonLogFormatter()
        if format == "json"
        else logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    )
    logging.basicConfig(level=level, handlers=[handler], force=True)


def shutdown() -> None:
    """Flush and stop the exporters, if they were installed."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        shutdown_provider = getattr(provider, "shutdown", None)  # the SDK's providers; not the no-op ones
        if shutdown_provider is not None:
            shutdown_provider()


def meter() -> metrics.Meter:
    """The project's meter (instruments created from it before `setup` start exporting after)."""
    return metrics.get_meter("sounding")


def tracer() -> trace.Tracer:
    return trace.get_tracer("sounding")


def rpc_attributes(full_method: str) -> dict[str, str]:
    """The RPC semantic-convention attributes of the gRPC method `package.Service/Method`."""
    service, _, method = full_method.lstrip("/").partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}


def status_code(error: BaseException | None) -> grpc.StatusCode:
    """The gRPC status a call ends with when `error` (None: success) ends it."""
    if error is None:
        return grpc.StatusCode.OK
    if isinstance(error, grpc.RpcError) and hasattr(error, "code"):
        return error.code()
    if isinstance(error, errors.SoundingError):
        return grpc.StatusCode[error.code]
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def end_rpc_span(span: Span, code: grpc.StatusCode) -> None:
    """Record the call's status (`rpc.grpc.status_code`) on its span and end it."""
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    span.end()


@contextlib.contextmanager
def client_call(full_method: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[Span]:
    """A CLIENT span, current within the block, for a unary call of `full_method`."""
    span = tracer().start_span(
        full_method, kind=SpanKind.CLIENT, attributes={**rpc_attributes(full_method), **(attributes or {})}
    )
    with trace.use_span(span, end_on_exit=False):
        try:
            yield span
        except BaseException as error:
            end_rpc_span(span, status_code(error))
            raise
    end_rpc_span(span, grpc.StatusCode.OK)


def inject() -> dict[str, str]:
    """The current trace context as a carrier dict (W3C traceparent)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract(carrier: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> context.Context:
    if carrier is None:
        return context.get_current()
    return propagate.extract(dict(carrier))


async def traced_stream(
    stream: AsyncGenerator[T, None],
    name: str,
    parent: context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, AttributeValue] | None = None,
    rpc: bool = False,
) -> AsyncGenerator[T, None]:
    """`stream`'s items under a new span `name`, ended when the stream is (see `stream_in_span`).
    With `rpc`, `name` is a gRPC method: the span carries the RPC attributes and the status."""
    if rpc:
        attributes = {**rpc_attributes(name), **(attributes or {})}
    span = tracer().start_span(name, context=parent, kind=kind, attributes=attributes)
    failure: BaseException | None = None
    try:
        async with contextlib.aclosing(stream_in_span(stream, span, parent)) as items:
            async for item in items:
                yield item
    except BaseException as error:
        failure = error
        raise
    finally:
        if rpc:
            end_rpc_span(span, status_code(failure))
        else:
            span.end()


async def stream_in_span(
    stream: AsyncGenerator[T, None], span: Span, parent: context.Context | None = None
) -> AsyncGenerator[T, None]:
    """`stream`'s items with `span` current while `stream` computes each item (so spans and
    carriers made there are its children), never while the consumer holds one; the caller ends
    `span`.

    A span made current with `start_as_current_span` around a `yield` has to be detached in the
    context that attached it, and a consumer may close the generator from another (gRPC does
    when a client cancels a stream): OpenTelemetry then logs "Failed to detach context" with a
    traceback. Here every attach is undone before the item is handed on, and closing the
    stream (normally, on an error, or by the consumer) closes `stream` under the span too.
    `stream` should not have started yet."""
    span_context = trace.set_span_in_context(span, parent)
    try:
        while True:
            token = context.attach(span_context)
            try:
                item = await anext(stream)
            except StopAsyncIteration:
                return
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except BaseException as error:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, str(error)))
                raise
            finally:
                context.detach(token)
            yield item
    finally:
        token = context.attach(span_context)
        try:
            await stream.aclose()
        finally:
            context.detach(token)
