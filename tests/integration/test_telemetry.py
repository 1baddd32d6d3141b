import time

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

CLIENT = Span.SpanKind.SPAN_KIND_CLIENT

pytestmark = pytest.mark.integration


def test_rpc_arm_and_sidecar_spans_share_one_trace(client, demo_collection, span_collector):
    started_ns = time.time_ns()
    # Read to the stream's end: a client that leaves right after the Final event may cancel the
    # call before the server has finished it (then its status is CANCELLED).
    list(client.retrieve("demo", "echo sounding", top_k=3, arms=["dense", "lexical"]))
    embed = "sounding.models.v1.ModelService/Embed"
    wanted = {"arm.dense", "arm.lexical", embed}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        retrieves = [
            s
            for s in span_collector.spans
            if s["name"] == "sounding.v1.SoundingService/Retrieve" and s["start_ns"] >= started_ns
        ]
        for root in retrieves:
            in_trace = [s for s in span_collector.spans if s["trace_id"] == root["trace_id"]]
            names = {s["name"] for s in in_trace}
            services = {s["service"] for s in in_trace}
            if wanted <= names and {"sounding-worker", "sounding-models"} <= services:
                arms = [s for s in in_trace if s["name"].startswith("arm.")]
                assert all(s["service"] == "sounding-worker" for s in arms)
                assert root["service"] == "sounding-orchestrator"
                # The RPC semantic conventions on server and client spans; custom attributes namespaced.
                assert root["attributes"] == {
                    "rpc.system": "grpc",
                    "rpc.service": "sounding.v1.SoundingService",
                    "rpc.method": "Retrieve",
                    "rpc.grpc.status_code": 0,
                }
                calls = [s for s in in_trace if s["name"] == embed and s["kind"] == CLIENT]
                assert calls and all(
                    call["attributes"]["rpc.method"] == "Embed"
                    and call["attributes"]["rpc.grpc.status_code"] == 0
                    and call["attributes"]["sounding.texts"] >= 1
                    for call in calls
                )
                assert {s["attributes"]["sounding.arm"] for s in arms} == {"dense", "lexical"}
                return
        time.sleep(0.25)
    pytest.fail(f"no complete trace among {len(span_collector.spans)} spans")


def test_arm_runs_and_rewards_are_exported_as_metrics(client, demo_collection, span_collector):
    from sounding_client import RetrievalOutcome

    final = client.retrieve_final("demo", "tides and chart datum", top_k=3, arms=["dense", "lexical"])
    client.observe([RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,))])
    deadline = time.monotonic() + 120
    wanted = {
        "sounding.retrieval.arm.runs",
        "sounding.retrieval.arm.duration",
        "sounding.retrieval.arm.reward",
    }
    while time.monotonic() < deadline:
        points = [p for p in span_collector.metrics.points if p[0] == "sounding-orchestrator"]
        if wanted <= {name for _, name, _ in points}:
            runs = [attributes for _, name, attributes in points if name == "sounding.retrieval.arm.runs"]
            assert {a["sounding.arm"] for a in runs} >= {"dense", "lexical"}
            return
        time.sleep(0.25)
    pytest.fail(f"metrics seen: {sorted({name for _, name, _ in span_collector.metrics.points})}")
