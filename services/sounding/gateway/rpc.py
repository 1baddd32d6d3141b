"""Per-RPC plumbing shared by the servicers: a server span under the caller's trace, and domain
errors turned into gRPC statuses with details. Client cancels and deadlines cancel the handler's
task; the services release their work (strategy-worker calls, sidecar calls) in their `finally` blocks."""

from __future__ import annotations

import functools
import inspect
from contextlib import aclosing

from opentelemetry.trace import SpanKind

from sounding import errors, telemetry
from sounding.grpc_errors import abort


def rpc(name: str):
    def decorate(handler):
        def span(context):
            return telemetry.tracer().start_as_current_span(
                name,
                context=telemetry.extract(context.invocation_metadata()),
                kind=SpanKind.SERVER,
            )

        if inspect.isasyncgenfunction(handler):

            @functools.wraps(handler)
            async def stream(self, request, context):
                responses = telemetry.traced_stream(
                    handler(self, request, context),
                    name,
                    telemetry.extract(context.invocation_metadata()),
                    SpanKind.SERVER,
                )
                async with aclosing(responses):
                    try:
                        async for response in responses:
                            yield response
                    except errors.SoundingError as error:
                        await abort(context, error)

            return stream

        @functools.wraps(handler)
        async def unary(self, request, context):
            with span(context):
                try:
                    return await handler(self, request, context)
                except errors.SoundingError as error:
                    await abort(context, error)

        return unary

    return decorate
