import re
import subprocess
import sys

import grpc
import pytest
from sounding_client import CalibrationProgress, CalibrationReport, Plan, RetrievalOutcome, SoundingError

pytestmark = pytest.mark.integration

QUERY = "which instrument times an echo to find the depth"


def plan_scores(client, query: str) -> dict[str, float]:
    for event in client.retrieve("demo", query, top_k=3):
        if isinstance(event, Plan):
            return {a.arm: a.score for a in event.arms}
    raise AssertionError("no plan")


def test_an_observe_stream_with_an_unknown_retrieval_records_the_others(client, demo_collection):
    first = client.retrieve_final("demo", "how deep is the water under a ship", top_k=3)
    second = client.retrieve_final("demo", "tides and chart datum", top_k=3)
    result = client.observe(
        [
            RetrievalOutcome(first.retrieval_id, (first.hits[0].document_id,), feedback="helpful"),
            RetrievalOutcome("no-such-retrieval", ("lead-line",)),
            RetrievalOutcome(second.retrieval_id, (second.hits[1].document_id,), agent_success=True),
            RetrievalOutcome(first.retrieval_id, ()),
        ]
    )
    assert result.recorded == 2
    assert [(r.index, r.code) for r in result.rejected] == [(1, "NOT_FOUND"), (3, "ALREADY_EXISTS")]
    assert "no-such-retrieval" in result.rejected[0].message


def test_an_acknowledged_observation_survives_kill_9_and_the_selector_state_is_restored(
    client, stack, demo_collection
):
    before = plan_scores(client, QUERY)
    final = client.retrieve_final("demo", QUERY, top_k=3)
    used = tuple(h.document_id for h in final.hits[:2])
    assert client.observe([RetrievalOutcome(final.retrieval_id, used, feedback="helpful")]).recorded == 1
    learned = plan_scores(client, QUERY)
    assert learned != pytest.approx(before, rel=1e-4), "the observation changed the arms' scores"
    stack.kill_orchestrator()
    stack.start_orchestrator()
    # The same state scores the query alike, up to the float32 precision of its embedding (the
    # encoder's micro-batches may pad it differently from one call to the next).
    assert plan_scores(client, QUERY) == pytest.approx(learned, rel=1e-6)
    again = client.observe([RetrievalOutcome(final.retrieval_id, used)])
    assert [r.code for r in again.rejected] == ["ALREADY_EXISTS"], "the restart remembers it was observed"


def test_calibrate_bandit_needs_outcomes_then_reports_and_versions_the_selector(client, demo_collection):
    with pytest.raises(SoundingError) as refused:
        list(client.calibrate("bandit"))
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.reason == "TOO_FEW_OUTCOMES"
    queries = [d["title"] for d in demo_collection] * 5
    outcomes = []
    for query in queries:
        final = client.retrieve_final("demo", query, top_k=3)
        outcomes.append(RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,)))
    assert client.observe(outcomes).recorded == len(queries)
    events = list(client.calibrate("bandit"))
    assert [type(e) for e in events[:-1]] == [CalibrationProgress] * (len(events) - 1)
    report = events[-1]
    assert isinstance(report, CalibrationReport) and report.target == "bandit"
    assert report.sample_size >= len(queries)
    assert {"candidate_score", "incumbent_score", "dense.mean_reward"} <= set(report.diagnostics)
    assert report.deployed == (report.version == "1")
    assert report.summary.startswith("deployed" if report.deployed else "kept")


def test_calibrate_confidence_maps_the_stated_confidence_to_agent_success(client, demo_collection):
    before = client.retrieve_final("demo", "chart datum", top_k=3, synthesis_confidence=0.9)
    assert before.confidence.kind == "derived"
    assert before.confidence.value == pytest.approx(0.9 * (1 - before.uncertainty.miss_rate.value))
    outcomes = []
    for i, query in enumerate([d["text"][:60] for d in demo_collection] * 5):
        final = client.retrieve_final("demo", query, top_k=3, synthesis_confidence=0.9)
        # The agent succeeds 9 times in 10, more often than the confidence stated (at most 0.9).
        outcomes.append(RetrievalOutcome(final.retrieval_id, agent_success=i % 10 != 0))
    assert client.observe(outcomes).recorded == len(outcomes)
    events = list(client.calibrate("confidence"))
    report = events[-1]
    assert isinstance(report, CalibrationReport) and report.target == "confidence" and report.deployed
    assert report.sample_size >= len(outcomes)
    assert report.summary.startswith("deployed confidence map v1")
    diagnostics = report.diagnostics
    assert diagnostics["confidence_ece_cross_validated"] < diagnostics["confidence_ece_before"]
    assert diagnostics["confidence_ece_after"] <= diagnostics["confidence_ece_before"]
    assert diagnostics["observed_success_share"] == pytest.approx(54 / 60, abs=0.1)
    assert [c.name for c in report.curves] == ["perfect", "confidence, stated", "confidence, calibrated"]
    after = client.retrieve_final("demo", "chart datum", top_k=3, synthesis_confidence=0.9)
    assert after.confidence.kind == "measured"
    assert after.confidence.calibration_version == report.version
    assert after.confidence.sample_size == report.sample_size
    stated = 0.9 * (1 - after.uncertainty.miss_rate.value)
    assert after.confidence.inputs["stated_confidence"] == pytest.approx(stated)
    assert 0.0 <= after.confidence.value <= 1.0
    # Without a synthesis confidence there is nothing to calibrate.
    assert client.retrieve_final("demo", "chart datum", top_k=3).confidence.kind == "absent"


def test_strategy_metrics_describe_what_ran_and_what_was_observed(client, demo_collection):
    before = client.strategy_metrics()
    final = client.retrieve_final("demo", "echo sounder speed of sound", top_k=3)
    client.observe([RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,))])
    after = client.strategy_metrics()
    assert after.planned_retrievals == before.planned_retrievals + 1
    assert after.observations == before.observations + 1
    arms = {a.arm: a for a in after.arms}
    assert set(arms) == {"dense", "lexical"}
    assert all(0 <= a.selection_rate <= 1 and 0 <= a.exploration_share <= 1 for a in arms.values())
    assert sum(a.runs for a in arms.values()) > sum(a.runs for a in before.arms)
    assert arms["dense"].mean_latency_ms > 0
    # Nothing generated: an arm's cost is its latency.
    assert arms["dense"].mean_cost_ms == pytest.approx(arms["dense"].mean_latency_ms)
    assert 0 <= after.selection_entropy_bits <= 1.0  # two arms: at most one bit


def test_calibrate_miss_rate_turns_stated_rates_into_measured_ones(client, demo_collection, stack, tmp_path):
    before = client.retrieve_final("demo", "lead line", top_k=3)
    assert before.uncertainty.miss_rate.kind == "derived"
    assert before.uncertainty.estimated_recall.kind == "absent"
    ids = [d["id"] for d in demo_collection]
    outcomes = []
    for i, query in enumerate([d["text"][:80] for d in demo_collection] * 5):
        final = client.retrieve_final("demo", query, top_k=3)
        missed = tuple(d for d in ids[i % 3 : i % 3 + 1] if d not in {h.document_id for h in final.hits})
        outcomes.append(
            RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,), missed_document_ids=missed)
        )
    assert client.observe(outcomes).recorded == len(outcomes)
    report = list(client.calibrate("miss_rate"))[-1]
    assert isinstance(report, CalibrationReport) and report.target == "miss_rate" and report.deployed
    assert report.sample_size >= len(outcomes)
    assert {"miss_rate_ece_before", "miss_rate_ece_after", "recall_ece_after"} <= set(report.diagnostics)
    assert [c.name for c in report.curves] == [
        "perfect",
        "miss rate, stated",
        "miss rate, calibrated",
        "recall, stated",
        "recall, calibrated",
    ]
    assert all(0.0 <= v <= 1.0 for c in report.curves for v in (*c.x, *c.y))
    after = client.retrieve_final("demo", "lead line", top_k=3)
    assert after.uncertainty.miss_rate.kind == "measured"
    assert after.uncertainty.miss_rate.calibration_version == report.version
    assert 0.0 <= after.uncertainty.miss_rate.inputs["stated_miss_rate"] <= 1.0
    assert after.uncertainty.estimated_recall.kind == "measured"
    assert after.uncertainty.estimated_recall.sample_size == report.sample_size
    # The CLI calibrates again and draws the curves the server returned.
    drawn = tmp_path / "reliability.png"
    command = ["calibrate", "miss_rate", "--plot", str(drawn), "--address", stack.settings.address]
    cli = subprocess.run(
        [sys.executable, "-m", "sounding.cli", *command], capture_output=True, text=True, timeout=120
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert re.search(r"miss_rate v\d+ \(deployed\)", cli.stdout) and "miss_rate_ece_after" in cli.stdout
    assert drawn.read_bytes().startswith(b"\x89PNG")
