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
