import pytest
from sounding.learning.metrics import ObservedRun, RunSummary, strategy_metrics

pytestmark = pytest.mark.unit


def ran(latency_ms: float, exploration: bool = False, cost_ms: float | None = None) -> dict:
    return {
        "document_ids": [],
        "latency_ms": latency_ms,
        "cost_ms": latency_ms if cost_ms is None else cost_ms,
        "exploration": exploration,
    }


def test_per_arm_and_system_metrics():
    runs = [
        RunSummary("exploit", {"dense": ran(10)}),
        RunSummary("explore", {"dense": ran(30), "hyde": ran(40, exploration=True, cost_ms=5000)}),
        RunSummary("requested", {"hyde": ran(1000)}),  # not a planned retrieval
    ]
    observed = [
        ObservedRun({"dense": 0.8}, {"dense": 1.0}),
        ObservedRun({"dense": 0.4, "hyde": 0.6}, {"dense": 0.0, "hyde": 0.5}),
    ]
    metrics = strategy_metrics(runs, observed, ["dense", "hyde", "lexical"])
    arms = {m.arm: m for m in metrics.arms}
    assert metrics.planned_retrievals == 2 and metrics.observations == 2
    assert arms["dense"].selection_rate == 1.0 and arms["hyde"].selection_rate == 0.5
    assert arms["lexical"].runs == 0 and arms["lexical"].selection_rate == 0.0
    assert arms["dense"].mean_latency_ms == 20.0 and arms["hyde"].mean_latency_ms == 520.0
    # hyde's explored run was served from the generation cache: 40 ms, but it cost 5 s to decode.
    assert arms["dense"].mean_cost_ms == 20.0 and arms["hyde"].mean_cost_ms == 3000.0
    assert arms["hyde"].exploration_share == 0.5
    assert arms["dense"].mean_reward == pytest.approx(0.6) and arms["dense"].contribution_rate == 0.5
    # Selections 2 : 1 over three arms.
    assert metrics.selection_entropy_bits == pytest.approx(0.9183, abs=1e-4)
    # Best mean reward is dense's 0.6 (hyde's 0.6 ties); per observation 0.6 - best reward run.
    assert metrics.cumulative_regret == pytest.approx((0.6 - 0.8) + (0.6 - 0.6))
