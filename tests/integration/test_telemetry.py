import time

import pytest

pytestmark = pytest.mark.integration


def test_rpc_arm_and_sidecar_spans_share_one_trace(client, demo_collection, span_collector):
    client.retrieve_final("demo", "echo sounding", top_k=3)
    wanted = {"arm.dense", "arm.lexical", "models.Embed"}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        retrieves = [s for s in span_collector.spans if s["name"] == "sounding.v1.SoundingService/Retrieve"]
        for root in retrieves:
            in_trace = [s for s in span_collector.spans if s["trace_id"] == root["trace_id"]]
            names = {s["name"] for s in in_trace}
            services = {s["service"] for s in in_trace}
            if wanted <= names and {"sounding-worker", "sounding-models"} <= services:
                arms = [s for s in in_trace if s["name"].startswith("arm.")]
                assert all(s["service"] == "sounding-worker" for s in arms)
                assert root["service"] == "sounding-orchestrator"
                return
        time.sleep(0.25)
    pytest.fail(f"no complete trace among {len(span_collector.spans)} spans")


def test_arm_runs_and_rewards_are_exported_as_metrics(client, demo_collection, span_collector):
    from sounding_client import RetrievalOutcome

    final = client.retrieve_final("demo", "tides and chart datum", top_k=3)
    client.observe([RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,))])
    deadline = time.monotonic() + 15
    wanted = {
        "sounding.retrieval.arm.runs",
        "sounding.retrieval.arm.latency",
        "sounding.retrieval.arm.reward",
    }
    while time.monotonic() < deadline:
        points = [p for p in span_collector.metrics.points if p[0] == "sounding-orchestrator"]
        if wanted <= {name for _, name, _ in points}:
            runs = [attributes for _, name, attributes in points if name == "sounding.retrieval.arm.runs"]
            assert {a["arm"] for a in runs} >= {"dense", "lexical"}
            return
        time.sleep(0.25)
    pytest.fail(f"metrics seen: {sorted({name for _, name, _ in span_collector.metrics.points})}")
