"""OpenTelemetry traces and metrics: on when OTEL_EXPORTER_OTLP_ENDPOINT is set, free when off.

With no endpoint, no SDK provider is installed and the API's no-op tracer and meter are used, so
spans and measurements cost next to nothing. Trace context crosses process boundaries
explicitly: `inject()` gives a carrier dict for strategy-worker call arguments or gRPC metadata, `extract()`
turns it back into a context.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TypeVar

from opentelemetry import context, metrics, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

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

    resource = Resource.create({"service.name": service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(
        MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    )
    _configured = True


def shutdown() -> None:
    """Flush and stop the exporters, if they were installed."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        if hasattr(provider, "shutdown"):
            provider.shutdown()


def meter() -> metrics.Meter:
    """The project's meter (instruments created from it before `setup` start exporting after)."""
    return metrics.get_meter("sounding")


def tracer() -> trace.Tracer:
    return trace.get_tracer("sounding")


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
    stream: AsyncIterator[T],
    name: str,
    parent: context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, object] | None = None,
) -> AsyncIterator[T]:
    """`stream`'s items under a span `name`: the span is current while `stream` computes each
    item (so spans and carriers made there are its children), never while the consumer holds one.

    A span made current with `start_as_current_span` around a `yield` has to be detached in the
    context that attached it, and a consumer may close the generator from another (gRPC does
    when a client cancels a stream): OpenTelemetry then logs "Failed to detach context" with a
    traceback. Here every attach is undone before the item is handed on, and closing the
    stream (normally, on an error, or by the consumer) closes `stream` under the span too.
    `stream` should not have started yet."""
    span = tracer().start_span(name, context=parent, kind=kind, attributes=attributes)
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
            span.end()
