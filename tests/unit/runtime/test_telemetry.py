import asyncio
import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sounding.runtime import telemetry

pytestmark = pytest.mark.unit


@pytest.fixture
def spans(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "tracer", lambda: provider.get_tracer("test"))
    return exporter


def _numbers(count: int, closed: list[str]):
    async def stream():
        try:
            for i in range(count):
                with telemetry.tracer().start_as_current_span(f"step {i}"):
                    pass
                yield i
        finally:
            closed.append("closed")

    return stream()


def test_items_pass_through_and_steps_are_children_of_the_stream_span(spans):
    async def consume():
        held = []
        async for item in telemetry.traced_stream(_numbers(3, []), "outer"):
            held.append((item, trace.get_current_span().is_recording()))
        return held

    assert asyncio.run(consume()) == [(0, False), (1, False), (2, False)]  # not current in the consumer
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert set(finished) == {"outer", "step 0", "step 1", "step 2"}
    outer = finished["outer"].context.span_id
    assert all(finished[f"step {i}"].parent.span_id == outer for i in range(3))


def test_a_consumer_closing_from_another_context_detaches_cleanly(spans, caplog):
    closed: list[str] = []

    async def main():
        stream = telemetry.traced_stream(_numbers(5, closed), "outer")
        assert await anext(stream) == 0
        # gRPC closes a cancelled handler's generator from a task of its own.
        await asyncio.create_task(stream.aclose())

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert not [r for r in caplog.records if "detach" in r.getMessage()]
    assert closed == ["closed"]
    assert [span.name for span in spans.get_finished_spans()] == ["step 0", "outer"]


def test_an_error_in_the_stream_marks_the_span_and_propagates(spans):
    async def failing():
        yield 1
        raise ValueError("broken")

    async def consume():
        return [item async for item in telemetry.traced_stream(failing(), "outer")]

    with pytest.raises(ValueError, match="broken"):
        asyncio.run(consume())
    (outer,) = spans.get_finished_spans()
    assert outer.status.status_code == StatusCode.ERROR
    assert outer.events[0].name == "exception"
