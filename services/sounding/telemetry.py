"""OpenTelemetry tracing: on when OTEL_EXPORTER_OTLP_ENDPOINT is set, free when off.

With no endpoint, no SDK provider is installed and the API's no-op tracer is used, so spans cost
next to nothing. Trace context crosses process boundaries explicitly: `inject()` gives a carrier
dict for Ray task arguments or gRPC metadata, `extract()` turns it back into a context.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from opentelemetry import context, propagate, trace

_configured = False


def setup(service_name: str) -> None:
    """Install an OTLP-exporting tracer provider once per process, if an endpoint is configured."""
    global _configured
    if _configured or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True


def shutdown() -> None:
    """Flush and stop the exporter, if one was installed."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()


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
