import numpy as np
import pytest
from sounding.core.bandit import (
    FEEDBACK_BONUS,
    ArmScore,
    ArmStats,
    ExplorationSchedule,
    LinUCB,
    Replay,
    contribution,
    holdout_score,
    rewards,
    should_prune,
    train,
)

pytestmark = pytest.mark.unit


def test_an_untrained_arm_scores_zero_mean_and_alpha_width():
    bandit = LinUCB(["a", "b"], 3, alpha=0.5)
    scores = bandit.scores([1.0, 0.0, 0.0])
    assert scores["a"] == ArmScore(0.0, 0.5)
    assert bandit.confidence([1.0, 0.0, 0.0]) == 0.0


def test_linucb_updates_match_the_closed_form():
    bandit = LinUCB(["a"], 2, alpha=1.0)
    bandit.update("a", [1.0, 0.0], 1.0)
    bandit.update("a", [1.0, 1.0], 0.0)
    # A = I + e1 e1ᵀ + (1,1)(1,1)ᵀ = [[3, 1], [1, 2]], b = (1, 0).
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    theta = np.linalg.solve(a, [1.0, 0.0])
    x = np.array([0.0, 1.0])
    score = bandit.scores(x)["a"]
    assert score.mean == pytest.approx(theta @ x) == pytest.approx(-0.2)
    assert score.width == pytest.approx(np.sqrt(x @ np.linalg.inv(a) @ x)) == pytest.approx(np.sqrt(0.6))
    assert bandit.pulls["a"] == 2


def test_the_bandit_learns_which_arm_pays_in_which_context():
    rng = np.random.default_rng(0)
    bandit = LinUCB(["left", "right"], 2, alpha=0.2)
    sides = rng.integers(2, size=200)
    for side in sides:
        x = np.eye(2)[side]
        bandit.update("left", x, float(side == 0))
        bandit.update("right", x, float(side == 1))
    left, right = bandit.scores([1.0, 0.0]), bandit.scores([0.0, 1.0])
    assert left["left"].upper > left["right"].upper and right["right"].upper > right["left"].upper
    # A = I + n·e1e1ᵀ along e1, so the width is 1/√(1 + n) of its prior.
    assert bandit.confidence([1.0, 0.0]) == pytest.approx(1 - 1 / np.sqrt(1 + np.sum(sides == 0)))


def test_context_length_is_checked():
    with pytest.raises(ValueError):
        LinUCB(["a"], 3).scores([1.0])


def test_update_many_equals_one_update_per_arm_and_ignores_unknown_arms():
    rng = np.random.default_rng(3)
    together, apart = LinUCB(["a", "b", "c"], 4, 0.7), LinUCB(["a", "b", "c"], 4, 0.7)
    for _ in range(30):
        x, rewards = rng.normal(size=4), {"a": rng.uniform(), "c": rng.uniform(), "zz": 1.0}
        together.update_many(x, rewards)
        for arm in ("a", "c"):
            apart.update(arm, x, rewards[arm])
        probe = rng.normal(size=4)  # scoring between updates refreshes only what changed
        mine, theirs = together.scores(probe), apart.scores(probe)
        for arm in ("a", "b", "c"):
            assert (mine[arm].mean, mine[arm].width) == pytest.approx((theirs[arm].mean, theirs[arm].width))
    assert together.pulls == apart.pulls == {"a": 30, "b": 0, "c": 30}


def test_exploration_schedule():
    schedule = ExplorationSchedule(cold_start_queries=10, force_all_every=50, initial_rate=0.3, min_rate=0.05)
    assert schedule.mode(9, 1.0, 0.99) == "cold_start"
    assert schedule.mode(49, 1.0, 0.99) == "forced_all"
    assert schedule.rate(10, 1.0) == pytest.approx(0.3)
    assert schedule.rate(10, 0.2) == pytest.approx(0.6)  # doubled when unsure
    assert schedule.rate(110, 1.0) == pytest.approx(0.3 * 0.99**100)
    assert schedule.rate(10_000, 1.0) == pytest.approx(0.05)  # decays to the floor
    assert schedule.mode(20, 1.0, 0.26) == "explore"  # rate 0.3 · 0.99¹⁰ = 0.271
    assert schedule.mode(20, 1.0, 0.28) == "exploit"


@pytest.mark.parametrize(
    "contribution_,feedback,latency_ms,expected",
    [
        (0.5, "", 0.0, 0.5),
        (0.5, "helpful", 0.0, 0.8),
        (0.5, "not_helpful", 0.0, 0.2),
        (0.5, "", 500.0, 0.4),
        (0.5, "", 2500.0, 0.3),  # the latency penalty is capped at 0.2
        (1.0, "helpful", 0.0, 1.0),
        (0.0, "not_helpful", 100.0, 0.0),
    ],
)
def test_reward(contribution_, feedback, latency_ms, expected):
    assert rewards(contribution_, FEEDBACK_BONUS[feedback], latency_ms) == pytest.approx(expected)


def test_contribution_is_the_share_of_used_documents_found():
    assert contribution(["d1", "d2", "d3"], ["d2", "d9"]) == 0.5
    assert contribution(["d1"], []) == 0.0


def test_pruning():
    stats = {
        "good": ArmStats(200, 0.6, 0.5),
        "useless": ArmStats(200, 0.05, 0.01),
        "dominated": ArmStats(200, 0.25, 0.3),
        "new": ArmStats(10, 0.0, 0.0),
    }
    assert not should_prune("good", stats)
    assert should_prune("useless", stats)
    assert should_prune("dominated", stats)
    assert not should_prune("new", stats)


def test_holdout_score_replays_the_greedy_choice():
    history = [Replay([1.0, 0.0], {"a": 1.0, "b": 0.0}), Replay([0.0, 1.0], {"a": 0.0, "b": 0.8})] * 20
    bandit = train(["a", "b"], 2, 0.5, history)
    assert holdout_score(bandit, history[:2]) == pytest.approx(0.9)
    untrained = LinUCB(["a", "b"], 2, 0.5)
    assert holdout_score(untrained, history[:2]) == pytest.approx(0.5)


def test_a_batch_update_equals_the_updates_one_at_a_time():
    rng = np.random.default_rng(3)
    arms = ("a", "b", "a+b")
    one, batch = LinUCB(arms, 4, 0.5), LinUCB(arms, 4, 0.5)
    contexts = rng.random((50, 4))
    rewards = [
        {arm: float(rng.random()) for arm in arms if rng.random() < 0.6} | {"unknown": 1.0} for _ in contexts
    ]
    for context, observed in zip(contexts, rewards, strict=True):
        one.update_many(context, observed)
    batch.update_batch(contexts, rewards)
    probe = rng.random(4)
    assert one.pulls == batch.pulls and one.pulls["a"] > 0
    for arm, score in one.scores(probe).items():
        assert batch.scores(probe)[arm].mean == pytest.approx(score.mean)
        assert batch.scores(probe)[arm].width == pytest.approx(score.width)
