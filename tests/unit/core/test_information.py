"""The active-learning spec's Tier-0 cases (§7.1) and Tier-1 cases that are pure logic (§7.2)."""

import numpy as np
import pytest
from sounding.core.information import (
    OutcomeLearner,
    StoppingConfig,
    bayes_update,
    cost_adjusted_score,
    default_stopping,
    entropy_bits,
    expected_information_gain,
    exploration_bonus,
    max_entropy_bits,
)

pytestmark = pytest.mark.unit


def test_entropy_uniform_certain_binary():
    assert entropy_bits(np.full(4, 0.25)) == pytest.approx(2.0)
    assert entropy_bits(np.array([1.0, 0.0, 0.0])) == 0.0
    assert entropy_bits(np.array([0.5, 0.5])) == pytest.approx(1.0)
    assert entropy_bits(np.array([0.5]), unknown_mass=0.5) == pytest.approx(1.0)
    assert max_entropy_bits(8) == pytest.approx(3.0)


def test_eig_positive_for_an_informative_question():
    gain = expected_information_gain(np.full(4, 0.25), outcomes=np.array([0, 0, 1, 1]))
    assert gain.expected_gain == pytest.approx(1.0)
    assert [s.probability for s in gain.scenarios] == pytest.approx([0.5, 0.5])
    assert all(s.gain == pytest.approx(1.0) for s in gain.scenarios)


def test_eig_zero_for_a_redundant_question():
    assert expected_information_gain(np.full(4, 0.25), np.zeros(4)).expected_gain == pytest.approx(0.0)
    # asked again after its answer is known: every remaining hypothesis implies the same result
    posterior = np.array([0.5, 0.5, 0.0, 0.0])
    assert expected_information_gain(posterior, np.array([0, 0, 1, 1])).expected_gain == pytest.approx(0.0)


def test_noise_lowers_the_gain():
    clean = expected_information_gain(np.full(4, 0.25), np.array([0, 0, 1, 1]))
    noisy = expected_information_gain(np.full(4, 0.25), np.array([0, 0, 1, 1]), noise=0.1)
    # H(0.1) = 0.469 bits is lost to the noise
    assert noisy.expected_gain == pytest.approx(clean.expected_gain - 0.4690, abs=1e-3)


@pytest.mark.parametrize("cost_sensitivity,winner", [(0.0, "B"), (2.0, "A")])
def test_cost_adjusted_ranking(cost_sensitivity, winner):
    # the spec's scenario: A (EIG 0.5, cost 0.1) beats B (EIG 0.8, cost 0.9) at lambda = 2
    scores = {
        "A": cost_adjusted_score(0.5, 0.1, cost_sensitivity),
        "B": cost_adjusted_score(0.8, 0.9, cost_sensitivity),
    }
    assert max(scores, key=scores.get) == winner
    assert cost_adjusted_score(0.5, 0.1, 2.0) == pytest.approx(0.5 / 1.2)


def test_exploration_bonus_novel_and_repeated():
    assert (
        exploration_bonus(0.3, novelty=1.0, prediction_uncertainty=0.5, coverage=1.0, similar_queries=0) > 0
    )
    assert (
        exploration_bonus(0.3, novelty=0.0, prediction_uncertainty=0.5, coverage=0.5, similar_queries=3) == 0
    )
    assert exploration_bonus(0.3, 1.0, 1.0, 1.0, 0) == pytest.approx(0.3)


def test_stopping_rules_in_order():
    config = StoppingConfig(min_confidence=0.8, max_queries=5, max_cost=2.0, min_information_gain=0.05)
    assert default_stopping(0.9, 1, 0.0, 1.0, config).reason == "confidence_reached"
    assert default_stopping(0.5, 5, 0.0, 1.0, config).reason == "max_queries_reached"
    assert default_stopping(0.5, 3, 2.0, 1.0, config).reason == "budget_exhausted"
    assert default_stopping(0.5, 3, 1.0, 0.01, config).reason == "diminishing_returns"
    assert default_stopping(0.5, 1, 1.0, 0.01, config).stop is False  # needs two queries first
    assert default_stopping(0.5, 3, 1.0, 0.5, config).stop is False


def test_a_zero_gain_threshold_turns_diminishing_returns_off():
    config = StoppingConfig(0.8, 25, 10.0, 0.0)
    assert default_stopping(0.5, 3, 1.0, -0.2, config).stop is False


def test_bayesian_update_by_hand():
    # prior (0.5, 0.3, 0.2), unknown 0; likelihoods (0.9, 0.5, 0.1)
    posterior = bayes_update(np.array([0.5, 0.3, 0.2]), 0.0, np.array([0.9, 0.5, 0.1]), 0.0)
    evidence = 0.45 + 0.15 + 0.02
    assert posterior.probabilities == pytest.approx([0.45 / evidence, 0.15 / evidence, 0.02 / evidence])
    assert posterior.unknown_mass == 0.0


def test_an_observation_no_hypothesis_allows_moves_all_mass_to_unknown():
    posterior = bayes_update(np.array([0.6, 0.4]), 0.0, np.zeros(2), 0.0)
    assert posterior.unknown_mass == 1.0 and posterior.probabilities.sum() == 0.0
    kept = bayes_update(np.array([0.6, 0.3]), 0.1, np.zeros(2), 0.5)
    assert kept.unknown_mass == pytest.approx(1.0)


def test_full_exploration_loop_converges():
    """Tier-1 `full_exploration_loop`: greedy EIG questions about a hidden hypothesis."""
    rng = np.random.default_rng(1)
    hypotheses, questions = 64, 40
    answers = rng.integers(0, 2, size=(questions, hypotheses))
    truth = 37
    belief = np.full(hypotheses, 1.0 / hypotheses)
    asked = 0
    while belief.max() < 0.99 and asked < questions:
        gains = [expected_information_gain(belief, answers[q]).expected_gain for q in range(questions)]
        q = int(np.argmax(gains))
        likelihood = (answers[q] == answers[q, truth]).astype(float)
        belief = bayes_update(belief, 0.0, likelihood, 0.0).probabilities
        asked += 1
    assert int(np.argmax(belief)) == truth
    assert asked <= 10  # log2(64) = 6 is the floor


def test_learning_improves_predictions():
    """Tier-1 `learning_improves_predictions`: with a systematic bias, corrected predictions
    err less than raw ones once outcomes are recorded, and the windows report it."""
    learner = OutcomeLearner()
    rng = np.random.default_rng(0)
    raw_errors, corrected_errors = [], []
    for _ in range(30):
        actual = rng.uniform(0.5, 1.5)
        predicted = actual + 0.4 + rng.normal(0, 0.02)  # over-predicts by 0.4
        raw_errors.append(abs(predicted - actual))
        corrected_errors.append(abs(learner.corrected_gain(predicted) - actual))
        learner.record(predicted, actual, 0.2, 0.25, "found", "found")
    assert np.mean(corrected_errors[10:]) < 0.25 * np.mean(raw_errors[10:])
    metrics = learner.metrics()
    assert metrics.total_outcomes == 30
    assert metrics.information_gain_mae == pytest.approx(np.mean(raw_errors))
    assert metrics.cost_mae == pytest.approx(0.05)
    assert metrics.result_type_accuracy == 1.0
    assert set(metrics.windows) == {"last_10", "last_100"}
