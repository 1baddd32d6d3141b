from types import SimpleNamespace

import numpy as np
import pytest
from sounding.core.fusion import min_max_fusion, weighted_rrf
from sounding_bench.fixed_plans import ArmsPass, fixed_plan_rewards, fixed_plans, over_seeds, scored_hits

pytestmark = pytest.mark.unit

# dense: x far above y; lexical: y and z close. RRF ranks y first (found by both), min-max x.
SCORED = {"dense": {"q": [("x", 10.0), ("y", 1.0)]}, "lexical": {"q": [("y", 2.0), ("z", 1.9)]}}


def arms_pass(fusion: str, costs=None) -> ArmsPass:
    costs = costs or {"dense": 10.0, "lexical": 10.0}
    return ArmsPass(
        SCORED, {a: [c] for a, c in costs.items()}, {a: {"q": c} for a, c in costs.items()}, {"q": fusion}
    )


@pytest.mark.parametrize("fusion", ["rrf", "min_max"])
def test_fixed_plans_fuse_every_set_of_arms_as_the_service_fused_that_query(fusion):
    plans = fixed_plans(arms_pass(fusion), fusion_k=60.0, limit=10)
    both = {a: SCORED[a]["q"] for a in SCORED}
    fuse = weighted_rrf if fusion == "rrf" else min_max_fusion
    assert plans["dense"] == {"q": ["x", "y"]} and plans["lexical"] == {"q": ["y", "z"]}
    assert plans["dense+lexical"] == {"q": [item.key for item in fuse(both)]}
    assert plans["dense+lexical"]["q"][0] == ("y" if fusion == "rrf" else "x")


def test_fixed_plan_rewards_are_the_selectors_fused_ndcg_less_the_slowest_arms_penalty():
    dataset = SimpleNamespace(qrels={"q": {"x": 1, "w": 0}})
    rewards = fixed_plan_rewards(arms_pass("min_max", {"dense": 10.0, "lexical": 2500.0}), dataset, ["q"])
    assert rewards["dense"] == pytest.approx([1 - 10 / 5000])
    assert rewards["lexical"] == pytest.approx([0.0])  # found nothing needed; clamped at 0
    assert rewards["dense+lexical"] == pytest.approx([1 - 0.2])  # x first by min-max; lexical's 2.5 s
    by_ranks = fixed_plan_rewards(arms_pass("rrf", {"dense": 10.0, "lexical": 2500.0}), dataset, ["q"])
    assert by_ranks["dense+lexical"] == pytest.approx([1 / np.log2(3) - 0.2])  # x second by RRF


def test_scored_hits_keep_each_document_once_at_its_first_rank():
    hits = [
        SimpleNamespace(document_id=d, score=s) for d, s in (("q", 9.0), ("a", 3.0), ("b", 2.0), ("a", 1.0))
    ]
    assert scored_hits(hits) == [("q", 9.0), ("a", 3.0), ("b", 2.0)]


def test_fixed_plans_fuse_with_the_query_itself_and_then_leave_it_out():
    # q's own id tops dense: it stretches dense's range (so x normalises to 0.1), then goes.
    scored = {
        "dense": {"q": [("q", 100.0), ("x", 10.0), ("y", 0.0)]},
        "lexical": {"q": [("y", 2.0), ("x", 0.0)]},
    }
    passed = ArmsPass(scored, {}, {}, {"q": "min_max"})
    assert fixed_plans(passed, fusion_k=60.0, limit=1) == {
        "dense": {"q": ["x"]},
        "lexical": {"q": ["y"]},
        "dense+lexical": {"q": ["y"]},  # y: 0 + 1; x: 0.1 + 0
    }


def run_result(adaptive, plans) -> dict:
    """A run's result as `adaptive.run` shapes it: {plan: (ndcg, reward, slowest arm cost)}."""
    return {
        "systems": {"adaptive": {"ndcg@10": adaptive[0], "mean_reward": adaptive[1]}},
        "fixed_plans_test": {
            name: {"ndcg@10": n, "mean_reward": r, "slowest_arm_mean_cost_ms": c}
            for name, (n, r, c) in plans.items()
        },
    }


def test_over_seeds_compares_adaptive_with_the_best_plans_by_their_means():
    results = [
        run_result(
            (0.70, 0.66),
            {"dense": (0.68, 0.67, 20.0), "hyde": (0.72, 0.50, 900.0), "grounded": (0.9, 0.4, 3000.0)},
        ),
        run_result(
            (0.72, 0.64),
            {"dense": (0.68, 0.65, 20.0), "hyde": (0.70, 0.52, 1100.0), "grounded": (0.9, 0.4, 3000.0)},
        ),
    ]
    summary = over_seeds(results)
    assert summary["runs"] == 2
    assert summary["systems"]["adaptive"]["ndcg@10"] == {
        "mean": 0.71,
        "std": pytest.approx(0.0141, abs=1e-4),
        "min": 0.7,
        "max": 0.72,
    }
    assert summary["best_fixed_plan_by_reward"] == "dense"
    assert summary["adaptive_minus_best_fixed_plan_reward"] == pytest.approx(0.65 - 0.66)
    # hyde cost over 1 s in one run, grounded in both: only dense is affordable in every run.
    assert summary["best_affordable_fixed_plan"] == "dense"
    assert summary["adaptive_minus_best_affordable_fixed_plan_ndcg"] == pytest.approx(0.71 - 0.68)
