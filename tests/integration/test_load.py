"""A short run of the load and fault suite (the five-minute runs are `sounding eval load`)."""

import json

import pytest
from sounding.settings.config import ModelsSettings, Settings
from sounding.settings.limits import DeadlineLimits, LimitsSettings
from sounding.stack import Stack
from sounding_bench import crashes, load
from sounding_client import Client

from .conftest import DEMO_CORPUS, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


# However busy the machine, nothing here takes this long unless it hangs.
PATIENCE_S = 300.0
# A peer busy on a busy machine still answers a readiness probe within this (the orchestrator
# reports NOT_SERVING after two missed probes, which would count as errors).
READINESS_PROBE_S = 10.0


def test_traffic_through_a_sidecar_and_a_worker_crash_loses_nothing_acknowledged(tmp_path):
    settings = Settings(
        data_dir=tmp_path,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=f"127.0.0.1:{free_port()}"),
        limits=LimitsSettings(deadlines=DeadlineLimits(readiness_probe_s=READINESS_PROBE_S)),
    )
    stack = Stack(
        settings,
        env={
            "SOUNDING_RETRIEVAL__SELECTION__ARMS": '["dense", "lexical"]',
            "SOUNDING_LIMITS__DEADLINES__READINESS_PROBE_S": str(READINESS_PROBE_S),
        },
        log_dir=tmp_path / "logs",
    )
    documents = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    try:
        stack.start_models(timeout_s=PATIENCE_S)
        stack.start_orchestrator(timeout_s=PATIENCE_S)
        stack.supervise()
        with Client(settings.address, timeout=PATIENCE_S) as client:
            client.create_collection(load.RETRIEVE_COLLECTION)
            list(client.ingest(load.RETRIEVE_COLLECTION, documents, batch_size=6))
            client.create_collection(load.INGEST_COLLECTION)
        spec = load.LoadRun(
            duration_s=40,
            retrieve_streams=4,
            inquiry_sessions=2,
            hyde_every=0,
            ingest_every_s=2.0,
            kills=(crashes.Kill(8, "worker"), crashes.Kill(16, "sidecar")),
            health_timeout_s=60,  # a slow health check is for the benchmark; its status counts here
        )
        result = load.traffic(
            stack, lambda: Client(settings.address, timeout=PATIENCE_S), load.queries_from(None), spec
        )
    finally:
        stack.stop()
    checked = result["verification"]
    # Floors low enough for a slow CI machine (about half the Retrieves with hits are observed).
    assert checked["observations_acknowledged"] >= 10 and checked["observations_lost"] == 0
    assert checked["documents_acknowledged"] >= 12 and checked["documents_lost"] == 0
    assert checked["sessions"] >= 4 and checked["sessions_resumed"] == checked["sessions"]
    assert [k["what"] for k in result["kills"]] == ["worker", "sidecar"]
    for k in result["kills"]:
        assert k["recovered"] and k["serving_again_after_s"] < PATIENCE_S, result["kills"]
    assert [r["process"] for r in result["restarts"]] == ["models"]  # Ray restarts the worker itself
    assert result["errors_excluding_resource_exhausted"] == 0, (
        result["errors"],
        result["kills"],
        [f for f in result["failures"] if not f["disrupted"]],
    )
    assert result["calls"]["Retrieve"] >= 25
