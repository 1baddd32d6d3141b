import numpy as np
import pytest
from sounding.core.bandit import FEEDBACK_BONUS, rewards
from sounding.core.fusion import min_max_fusion, weighted_rrf
from sounding.core.plans import (
    PlanInputs,
    fused_tops,
    plan_arms,
    plan_name,
    plan_rewards,
    plan_rewards_many,
    plans,
)

pytestmark = pytest.mark.unit


def ranked_contribution(ranking, needed, depth=10) -> float:
    """The reference: nDCG@depth of `ranking` with `needed` as the relevant documents (binary
    gains), what a plan's contribution is (core.plans)."""
    needed = set(needed)
    if not needed:
        return 0.0
    gains = [1 / np.log2(rank + 2) for rank, doc in enumerate(ranking[:depth]) if doc in needed]
    ideal = sum(1 / np.log2(rank + 2) for rank in range(min(len(needed), depth)))
    return float(sum(gains) / ideal)


def test_plans_are_every_nonempty_set_named_by_sorted_arms():
    assert plans(["lexical", "dense"]) == ["lexical", "dense", "dense+lexical"]
    assert len(plans(["a", "b", "c", "d", "e", "f"])) == 63
    assert plan_name(["lexical", "dense", "hyde"]) == "dense+hyde+lexical"
    assert plan_arms("dense+lexical") == ["dense", "lexical"]


def test_ranked_contribution_is_ndcg_against_the_needed_documents():
    # Needed d1 (rank 1) and d3 (rank 3): DCG 1 + 1/2; ideal 1 + 1/log2(3).
    assert ranked_contribution(["d1", "d2", "d3"], ["d1", "d3"]) == pytest.approx(1.5 / (1 + 1 / np.log2(3)))
    assert ranked_contribution(["d1", "d2"], ["d2"], depth=1) == 0.0
    assert ranked_contribution(["d1"], []) == 0.0
    # More needed documents than the depth: the ideal is a full list.
    assert ranked_contribution(["a", "b"], ["a", "b", "c"], depth=2) == pytest.approx(1.0)


def test_every_plan_is_rewarded_for_its_own_fused_ranking_and_slowest_arm():
    rankings = {"dense": ["d1", "d2", "d3"], "lexical": ["d3", "d4", "d1"], "hyde": ["d5"]}
    costs = {"dense": 0.0, "lexical": 0.0, "hyde": 2500.0}
    rewards = plan_rewards(rankings, costs, needed={"d3"}, feedback="", rrf_k=60, depth=1)
    assert set(rewards) == set(plans(["dense", "hyde", "lexical"]))
    # Top 1: dense d1, lexical d3; fused, d1 and d3 both score 1/61 + 1/63, a tie broken by id: d1.
    assert rewards["dense"] == 0.0 and rewards["lexical"] == 1.0 and rewards["dense+lexical"] == 0.0
    # hyde's 2.5 s costs its plans the full 0.2; its ranking alone finds nothing needed.
    assert rewards["hyde"] == 0.0 and rewards["hyde+lexical"] == pytest.approx(0.8)


def test_a_plan_reward_counts_a_document_repeated_by_an_arm_at_its_first_rank():
    rewards = plan_rewards({"dense": ["d2", "d2", "d1"]}, {"dense": 0.0}, {"d1"}, "helpful", depth=2)
    # d1 at rank 2: 1/log2(3), plus the helpful bonus, clamped to 1.
    assert rewards == {"dense": pytest.approx(min(1.0, 1 / np.log2(3) + 0.3))}
    assert plan_rewards({}, {}, {"d1"}, "") == {}


def random_retrieval(rng, arms, pool=60, size=30):
    rankings = {a: [f"d{i}" for i in rng.permutation(pool)[:size]] for a in arms}
    # Descending scores with gaps of every size, so min-max and RRF rank differently.
    scores = {a: sorted(rng.exponential(1.0, size=size).tolist(), reverse=True) for a in arms}
    costs = {a: float(rng.uniform(0, 2000)) for a in arms}
    needed = {f"d{i}" for i in rng.permutation(pool)[:4]}
    return rankings, scores, costs, needed


@pytest.mark.parametrize("fusion", ["rrf", "min_max"])
def test_plan_rewards_rank_as_the_services_fusion_does(fusion):
    rng = np.random.default_rng(11)
    arms = ["dense", "lexical", "hyde", "grounded"]
    for _ in range(20):
        rankings, scores, costs, needed = random_retrieval(rng, arms)
        rewarded = plan_rewards(rankings, costs, needed, "", scores=scores if fusion == "min_max" else None)
        for plan in plans(arms):
            members = plan_arms(plan)
            if fusion == "min_max":
                fused = min_max_fusion(
                    {a: list(zip(rankings[a], scores[a], strict=True)) for a in members}, limit=10
                )
            else:
                fused = weighted_rrf({a: [(d, 0.0) for d in rankings[a]] for a in members}, limit=10)
            expected = rewards(
                ranked_contribution([f.key for f in fused], needed),
                FEEDBACK_BONUS[""],
                max(costs[a] for a in members),
            )
            assert rewarded[plan] == pytest.approx(expected)


def test_plans_of_a_min_max_retrieval_are_rewarded_on_its_scores_not_its_ranks():
    # d1 is dense's first, far above its others; d2 is second in dense and last in lexical, both
    # barely above those arms' lowest scores. RRF sees two good ranks for d2; min-max sees d2 at
    # about 0.01 and d1 at 1 (level with lexical's first, d3, and ahead of it by id).
    rankings = {"dense": ["d1", "d2", "d5"], "lexical": ["d3", "d4", "d2"]}
    scores = {"dense": [10.0, 1.1, 1.0], "lexical": [5.0, 4.9, 1.0]}
    costs = {"dense": 0.0, "lexical": 0.0}
    by_rrf = plan_rewards(rankings, costs, {"d1"}, "", depth=1)
    by_scores = plan_rewards(rankings, costs, {"d1"}, "", depth=1, scores=scores)
    assert by_rrf["dense+lexical"] == 0.0  # d2: 1/62 + 1/63 > d1: 1/61
    assert by_scores["dense+lexical"] == 1.0


def test_min_max_ties_go_to_the_best_rank_then_to_id_order():
    # Equal scores normalise to 1 each: the arm's own order decides, not the ids.
    (tops,) = fused_tops([{"lexical": ["d3", "d1", "d2"]}], depth=3, scores=[{"lexical": [2.0, 2.0, 2.0]}])
    assert [tops.documents[i] for i in tops.top[0]] == ["d3", "d1", "d2"]
    # Two arms each giving its own document 1: both rank 1, so id order.
    (tops,) = fused_tops(
        [{"dense": ["d9", "d1"], "lexical": ["d5", "d1"]}],
        depth=2,
        scores=[{"dense": [1.0, 0.0], "lexical": [3.0, 0.0]}],
    )
    assert [tops.documents[i] for i in tops.top[2]] == ["d5", "d9"]


def test_a_document_an_arm_repeats_counts_once_in_its_min_max_range():
    # The repeat of x at score 1 is not a. The range of a is 3 to 2, so y normalises to 0.
    rankings = {"a": ["x", "y", "x"], "b": ["v", "u", "t"]}
    scores = {"a": [3.0, 2.0, 1.0], "b": [1.0, 0.4, 0.0]}
    (tops,) = fused_tops([rankings], depth=5, scores=[scores])
    first_only = {"a": [("x", 3.0), ("y", 2.0)], "b": list(zip(rankings["b"], scores["b"], strict=True))}
    assert [tops.documents[i] for i in tops.top[2]] == [f.key for f in min_max_fusion(first_only)]
    # x and v lead at 1 (v by id), u 0.4; y and t at 0, y by its better rank.
    assert [tops.documents[i] for i in tops.top[2]] == ["v", "x", "u", "y", "t"]


def test_min_max_and_rrf_retrievals_rewarded_together_equal_each_alone():
    rng = np.random.default_rng(3)
    arms = ["dense", "lexical"]
    retrievals = []
    for index in range(30):
        rankings, scores, costs, needed = random_retrieval(rng, arms, size=int(rng.integers(0, 12)))
        retrievals.append(PlanInputs(rankings, costs, needed, "", scores=scores if index % 2 else None))
    together = plan_rewards_many(retrievals)
    assert together == [pytest.approx(plan_rewards_many([r])[0]) for r in retrievals]
    # The scores matter: without them the min-max retrievals are rewarded otherwise.
    assert together != plan_rewards_many([r._replace(scores=None) for r in retrievals])


def test_scores_must_cover_each_ranked_document():
    with pytest.raises(ValueError, match="dense"):
        fused_tops([{"dense": ["d1", "d2"]}], scores=[{"dense": [1.0]}])
    with pytest.raises(ValueError, match="dense"):
        fused_tops([{"dense": ["d1"]}], scores=[{"dense": [float("nan")]}])
    with pytest.raises(ValueError, match="every retrieval"):
        fused_tops([{"dense": ["d1"]}], scores=[])


def test_rewards_computed_together_equal_each_computed_alone():
    rng = np.random.default_rng(7)
    pool = [f"d{i}" for i in range(30)]
    retrievals = []
    for index in range(40):
        arms = ("dense", "lexical", "hyde")[: 1 + index % 3]
        rankings = {arm: list(rng.choice(pool, size=int(rng.integers(0, 12)))) for arm in arms}
        costs = {arm: float(rng.uniform(0, 3000)) for arm in arms}
        needed = set(rng.choice(pool, size=int(rng.integers(0, 4)), replace=False))
        retrievals.append(PlanInputs(rankings, costs, needed, ("", "helpful", "not_helpful")[index % 3]))
    retrievals.append(PlanInputs({}, {}, {"d1"}, ""))
    together = plan_rewards_many(retrievals)
    for retrieval, rewarded in zip(retrievals, together, strict=True):
        alone = plan_rewards_many([retrieval])[0]
        assert rewarded.keys() == alone.keys() == set(plans(sorted(retrieval.rankings)))
        assert rewarded == pytest.approx(alone)
    # a retrieval whose arms found nothing earns only what feedback and latency give
    assert plan_rewards({"dense": []}, {"dense": 0.0}, {"d1"}, "helpful") == {"dense": pytest.approx(0.3)}


def test_rewards_from_known_fused_tops_equal_those_ranked_again_and_use_them():
    rng = np.random.default_rng(5)
    pool = [f"d{i}" for i in range(40)]
    retrievals = [
        PlanInputs(
            {arm: list(rng.choice(pool, size=int(rng.integers(0, 15)))) for arm in ("dense", "lexical")},
            {"dense": float(rng.uniform(0, 900)), "lexical": float(rng.uniform(0, 900))},
            set(rng.choice(pool, size=3, replace=False)),
            "",
        )
        for _ in range(30)
    ]
    tops = fused_tops([r.rankings for r in retrievals])
    # Known tops stand for the rankings, which may then be left out.
    known = plan_rewards_many(
        [r._replace(rankings={}, tops=t) for r, t in zip(retrievals, tops, strict=True)]
    )
    assert known == plan_rewards_many(retrievals)
    # Another retrieval's tops give other rewards: the known tops are what is rewarded.
    swapped = [r._replace(tops=t) for r, t in zip(retrievals, tops[1:] + tops[:1], strict=True)]
    assert plan_rewards_many(swapped) != plan_rewards_many(retrievals)


def test_fused_tops_are_each_plans_fused_ranking_by_position():
    rankings = {"dense": ["d3", "d1", "d3"], "lexical": ["d2", "d1"]}
    (tops,) = fused_tops([rankings], rrf_k=60, depth=3)
    assert tops.documents == ["d1", "d2", "d3"]
    # plans: dense, lexical, dense+lexical; -1 past the documents a plan ranks.
    assert tops.top.tolist() == [[2, 0, -1], [1, 0, -1], [0, 1, 2]]  # d2 and d3 tie: id order
    assert fused_tops([{}])[0].documents == []
