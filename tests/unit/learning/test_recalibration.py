import numpy as np
import pytest
from sounding.learning.recalibration import MIN_OBSERVATIONS, Observed, arm_stats, recalibrate

pytestmark = pytest.mark.unit
ARMS = ("dense", "lexical", "hyde")
DAY_US = 24 * 3600 * 10**6


def stream(n: int, rewards_for, start_us: int = 0) -> list[Observed]:
    """Contexts alternate between two kinds; `rewards_for(kind, t)` gives every arm's reward,
    and each arm alone is the only plan observed."""
    observed = []
    for t in range(n):
        kind = t % 2
        context = np.array([1.0, float(kind == 0), float(kind == 1)])
        rewards = rewards_for(kind, t)
        observed.append(
            Observed(start_us + t, context, rewards, {a: float(r > 0.3) for a, r in rewards.items()}, rewards)
        )
    return observed


def test_too_few_observations():
    with pytest.raises(ValueError, match=str(MIN_OBSERVATIONS)):
        recalibrate(stream(10, lambda k, t: {"dense": 1.0}), ARMS, 1.0, 3, 0, 0, [])


def test_an_arm_that_never_helps_is_pruned_and_the_candidate_deploys():
    observed = stream(
        300,
        lambda kind, t: {
            "dense": 0.8 if kind == 0 else 0.2,
            "lexical": 0.2 if kind == 0 else 0.8,
            "hyde": 0.0,
        },
    )
    result = recalibrate(observed, ARMS, 1.0, 3, 0, 0, [])
    assert result.pruned_arms == ["hyde"]
    assert result.deploy and result.candidate_score >= 0.95 * result.incumbent_score
    assert result.holdout_size == 60 and result.training_size == 240
    assert result.candidate_score == pytest.approx(0.8)  # picks the right arm for each kind


def test_a_window_that_forgets_a_changed_world_beats_the_incumbent():
    # The arms swap roles on day 40; the incumbent learned from everything, the candidate from
    # the last 30 days only.
    old = stream(
        400, lambda kind, t: {"dense": 0.9 if kind == 0 else 0.1, "lexical": 0.1 if kind == 0 else 0.9}
    )
    new = stream(
        120,
        lambda kind, t: {"dense": 0.1 if kind == 0 else 0.9, "lexical": 0.9 if kind == 0 else 0.1},
        40 * DAY_US,
    )
    result = recalibrate(old + new, ("dense", "lexical"), 1.0, 3, 35 * DAY_US, 0, [])
    assert result.candidate_score > result.incumbent_score
    assert result.deploy


def test_a_candidate_worse_than_95_percent_is_not_deployed():
    # The incumbent's window holds the data; the candidate's window (from t = 10^12) holds none.
    observed = stream(
        200, lambda kind, t: {"dense": 0.9 if kind == 0 else 0.1, "lexical": 0.1 if kind == 0 else 0.9}
    )
    result = recalibrate(observed, ("dense", "lexical"), 1.0, 3, 10**12, 0, [])
    assert result.training_size == 0
    assert result.candidate_score < 0.95 * result.incumbent_score
    assert not result.deploy


def test_plans_of_a_pruned_arm_are_left_out_and_plans_are_judged_on_their_own_rewards():
    def rewards(kind, t):
        return {"dense": 0.5, "lexical": 0.4, "hyde": 0.0, "dense+lexical": 0.9, "dense+hyde": 0.95}

    observed = [
        Observed(t, np.array([1.0, 0.0, 0.0]), {"dense": 0.5, "lexical": 0.4, "hyde": 0.0}, {}, rewards(0, t))
        for t in range(300)
    ]
    result = recalibrate(observed, ARMS, 1.0, 3, 0, 0, [])
    # hyde is pruned on its own reward, so its best-rewarded plan is out of the candidate.
    assert result.pruned_arms == ["hyde"]
    assert result.candidate_score == pytest.approx(0.9)
    assert result.incumbent_score == pytest.approx(0.95)


def test_arm_stats():
    observed = stream(4, lambda kind, t: {"dense": 0.5 * kind, "lexical": 0.9})
    stats = arm_stats(observed, ("dense", "lexical", "hyde"))
    assert stats["dense"].uses == 4 and stats["dense"].mean_reward == pytest.approx(0.25)
    assert stats["dense"].contribution_rate == pytest.approx(0.5)
    assert stats["hyde"].uses == 0
