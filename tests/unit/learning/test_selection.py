import numpy as np
import pytest
from sounding.core.bandit import ExplorationSchedule
from sounding.learning import features
from sounding.learning.selection import SelectionConfig, StrategySelector

pytestmark = pytest.mark.unit
ARMS = ("dense", "lexical", "hyde")


def context(i: int) -> np.ndarray:
    x = np.zeros(features.DIMENSION)
    x[0], x[1 + i % 3] = 1.0, 1.0
    return x


def selector(**schedule) -> StrategySelector:
    config = SelectionConfig(alpha=0.1, schedule=ExplorationSchedule(**schedule))
    return StrategySelector(ARMS, config)


# Every plan of the three arms: dense and lexical fused rank best, hyde hurts any plan it joins.
REWARDS = {
    "dense": 0.6,
    "lexical": 0.5,
    "hyde": 0.1,
    "dense+lexical": 0.9,
    "dense+hyde": 0.3,
    "hyde+lexical": 0.2,
    "dense+hyde+lexical": 0.4,
}


def test_cold_start_runs_every_arm_then_the_best_plan_runs():
    chooser = selector(cold_start_queries=3, force_all_every=0, initial_rate=0.0, min_rate=0.0)
    for _ in range(50):
        chooser.learn(context(0), [1.0], REWARDS)
    plans = [chooser.plan(context(0)) for _ in range(4)]
    assert [p.mode for p in plans] == ["cold_start"] * 3 + ["exploit"]
    assert plans[0].chosen == list(ARMS)
    best = plans[-1]
    assert best.chosen == ["dense", "lexical"] and best.weights == {"dense": 1.0, "lexical": 1.0}
    assert [a.reason for a in best.arms] == ["exploit", "exploit", "not_in_best_plan"]
    # The chosen arms carry their plan's score; hyde the score of the plan with it added.
    dense, lexical, hyde = best.arms
    assert dense.score == lexical.score == pytest.approx(0.9, abs=0.05)
    assert hyde.score == pytest.approx(0.4, abs=0.05)


def test_the_best_plan_can_be_one_arm():
    chooser = selector(cold_start_queries=0, force_all_every=0, initial_rate=0.0, min_rate=0.0)
    for _ in range(50):
        chooser.learn(context(0), [1.0], {**REWARDS, "dense": 0.95})
    assert chooser.plan(context(0)).chosen == ["dense"]


def test_every_nth_query_runs_all_arms():
    chooser = selector(cold_start_queries=0, force_all_every=5, initial_rate=0.0, min_rate=0.0)
    modes = [chooser.plan(context(0)).mode for _ in range(10)]
    assert modes[4] == modes[9] == "forced_all"
    assert modes.count("forced_all") == 2


def test_exploration_adds_one_arm_the_best_plan_lacks_marked_as_such():
    chooser = selector(cold_start_queries=0, force_all_every=0, initial_rate=1.0, min_rate=1.0)
    for _ in range(50):
        chooser.learn(context(0), [1.0], REWARDS)
    plan = chooser.plan(context(0))
    assert plan.mode == "explore"
    assert plan.chosen == list(ARMS)
    [explored] = [a for a in plan.arms if a.exploration]
    assert explored.arm == "hyde" and explored.reason == "explore" and explored.fusion_weight == 1.0


def test_an_exploration_draw_when_the_best_plan_runs_every_arm_is_an_exploit_plan():
    chooser = selector(cold_start_queries=0, force_all_every=0, initial_rate=1.0, min_rate=1.0)
    for _ in range(50):
        chooser.learn(context(0), [1.0], {**REWARDS, "dense+hyde+lexical": 1.0})
    plan = chooser.plan(context(0))
    assert plan.chosen == list(ARMS) and not any(a.exploration for a in plan.arms)
    assert plan.mode == "exploit"


def test_plans_are_reproducible_from_the_query_index():
    first, second = selector(cold_start_queries=0), selector(cold_start_queries=0)
    assert [first.plan(context(i)).arms for i in range(20)] == [
        second.plan(context(i)).arms for i in range(20)
    ]


def test_requested_arms_do_not_advance_the_schedule():
    chooser = selector(cold_start_queries=1)
    plan = chooser.plan(context(0), requested=("lexical",))
    assert plan.mode == "requested" and plan.chosen == ["lexical"]
    assert chooser.queries_planned == 0


def test_similar_outcomes_average_the_nearest_observed_queries_best_plan():
    chooser = selector()
    assert chooser.similar_outcomes([1.0, 0.0]) == features.NO_HISTORY
    chooser.learn(context(0), [1.0, 0.0], {"dense": 0.8, "lexical": 0.2})
    chooser.learn(context(0), [0.0, 1.0], {"dense": 0.0, "lexical": 0.4})
    assert chooser.similar_outcomes([1.0, 0.1]) == pytest.approx((0.8 + 0.4) / 2)


def test_similar_outcomes_over_a_long_history_are_the_nearest_queries_rewards():
    rng = np.random.default_rng(7)
    chooser = selector()
    embeddings = rng.normal(size=(300, 8))  # past the buffer's first growths
    outcomes = rng.uniform(size=300)
    for embedding, outcome in zip(embeddings, outcomes, strict=True):
        chooser.learn(context(0), embedding, {"dense": outcome})
    query = rng.normal(size=8)
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    nearest = np.argsort(-(unit @ (query / np.linalg.norm(query))))[:5]
    assert chooser.similar_outcomes(query) == pytest.approx(outcomes[nearest].mean())


def test_exploiting_follows_the_baseline_plan_unless_the_bandit_is_sure_of_another_for_this_query():
    chooser = selector(cold_start_queries=0, force_all_every=0, initial_rate=0.0, min_rate=0.0)
    # dense+lexical is the best plan on average; for queries of kind 1 dense alone is far better.
    for i in range(300):
        kind = i % 3
        chooser.learn(context(i), [1.0], {**REWARDS, "dense": 1.0 if kind == 1 else 0.2})
    assert chooser.baseline() == "dense+lexical"
    assert chooser.plan(context(0)).chosen == ["dense", "lexical"]
    assert chooser.plan(context(1)).chosen == ["dense"]


def test_a_plan_the_bandit_is_unsure_of_does_not_displace_the_baseline():
    chooser = StrategySelector(ARMS, SelectionConfig(alpha=1.0, schedule=ExplorationSchedule(0, 0, 0.0, 0.0)))
    for i in range(30):
        chooser.learn(context(i), [1.0], REWARDS)
    # Ten queries of a new kind saw hyde alone far ahead; with α = 1 that is not yet sure.
    novel = np.zeros(features.DIMENSION)
    novel[0], novel[5] = 1.0, 1.0
    for _ in range(10):
        chooser.learn(novel, [1.0], {"hyde": 1.0, "dense": 0.6, "dense+lexical": 0.7})
    scores = chooser.bandit.scores(novel)
    assert scores["hyde"].upper > scores["dense+lexical"].upper  # plain LinUCB would run hyde
    assert chooser.plan(novel).chosen == ["dense", "lexical"]


def test_the_baseline_follows_a_change_within_its_window():
    chooser = selector(cold_start_queries=0, force_all_every=0, initial_rate=0.0, min_rate=0.0)
    for i in range(300):
        chooser.learn(context(i), [1.0], REWARDS)
    assert chooser.baseline() == "dense+lexical"
    for i in range(80):  # dense alone improved (say, a new query adapter)
        chooser.learn(context(i), [1.0], {"dense": 1.0, "lexical": 0.5, "dense+lexical": 0.8})
    assert chooser.baseline() == "dense"


def costly_selector(
    arms=("dense", "lexical", "hyde", "multi_query"), share=0.1, **schedule
) -> StrategySelector:
    config = SelectionConfig(
        alpha=0.1,
        schedule=ExplorationSchedule(**schedule),
        costly_ratio=10.0,
        costly_share=share,
    )
    return StrategySelector(arms, config, assumed_costly=("hyde", "multi_query"))


def test_cold_start_runs_a_costly_arm_on_a_share_of_queries_one_at_a_time():
    chooser = costly_selector(cold_start_queries=1000, force_all_every=0)
    plans = [chooser.plan(context(i)) for i in range(1000)]
    assert {p.mode for p in plans} == {"cold_start"}
    costly_runs = [set(p.chosen) - {"dense", "lexical"} for p in plans]
    assert all({"dense", "lexical"} <= set(p.chosen) for p in plans)
    assert all(len(extra) <= 1 for extra in costly_runs)
    share = np.mean([bool(extra) for extra in costly_runs])
    assert 0.07 < share < 0.13
    # each costly arm is tried
    assert {arm for extra in costly_runs for arm in extra} == {"hyde", "multi_query"}
    held_back = next(p for p, extra in zip(plans, costly_runs, strict=True) if not extra)
    assert {a.reason for a in held_back.arms if not a.chosen} == {"costly"}


def test_an_arm_is_costly_by_its_measured_cost_once_it_has_run():
    chooser = costly_selector()
    assert chooser.costly() == {"hyde", "multi_query"}
    chooser.costs.measured("dense", 30.0)
    chooser.costs.measured("lexical", 5.0)
    chooser.costs.measured("hyde", 400.0)  # fast generation (a GPU): 400 ms < 10 × max(5, 100) ms
    chooser.costs.measured("multi_query", 9000.0)
    assert chooser.costly() == {"multi_query"}
    for _ in range(30):  # a running mean: dense slows down for good, 1500 ms > 10 × 100 ms
        chooser.costs.measured("dense", 1500.0)
    assert chooser.costly() == {"dense", "multi_query"}


def test_when_every_arm_is_costly_cold_start_runs_them_all():
    chooser = costly_selector(arms=("hyde", "multi_query"), cold_start_queries=5)
    assert chooser.costly() == frozenset()
    assert all(chooser.plan(context(i)).chosen == ["hyde", "multi_query"] for i in range(5))


def test_exploration_adds_a_costly_arm_only_on_its_share():
    chooser = costly_selector(cold_start_queries=0, force_all_every=0, initial_rate=1.0, min_rate=1.0)
    for _ in range(50):
        chooser.learn(context(0), [1.0], {"dense+lexical": 0.9, "dense": 0.5, "lexical": 0.4})
    plans = [chooser.plan(context(0)) for _ in range(600)]
    explored = [a.arm for p in plans for a in p.arms if a.exploration]
    costly = [arm for arm in explored if arm in ("hyde", "multi_query")]
    assert 0.05 < len(costly) / len(plans) < 0.15
    # without costly arms every query explores
    free = costly_selector(share=1.0, cold_start_queries=0, force_all_every=0, initial_rate=1.0, min_rate=1.0)
    for _ in range(50):
        free.learn(context(0), [1.0], {"dense+lexical": 0.9, "dense": 0.5, "lexical": 0.4})
    assert all(any(a.exploration for a in free.plan(context(0)).arms) for _ in range(50))
