"""The claim-verification evidence model, with likelihoods computed by hand."""

import numpy as np
import pytest
from sounding.core.claim_evidence import (
    CONTRADICT,
    DEFAULT_SENSOR,
    ENTAILING,
    NOT_ENOUGH_INFO,
    NOTHING,
    NOTHING_NEW,
    SUPPORT,
    SensorModel,
    Thresholds,
    found_strength,
    likelihood,
    outcome,
    predicted_outcomes,
    ranked,
    sensor_counts,
    target_chance,
)
from sounding.core.information import bayes_update, information_gain

pytestmark = pytest.mark.unit


def test_the_strongest_sentences_decide_the_outcome_by_the_thresholds():
    t = Thresholds(entailing=0.5, contradicting=0.65)
    assert outcome([0.9, 0.2], [0.0, 0.5], t) == pytest.approx([1, 0, 0])  # 0.9 ≥ 0.5, 0.5 < 0.65
    assert outcome([0.4], [0.7], t) == pytest.approx([0, 1, 0])
    assert outcome([0.6], [0.7], t) == pytest.approx([0, 0, 1])  # both decide: nothing
    assert outcome([0.49], [0.64], t) == pytest.approx([0, 0, 1])  # neither does
    # Many weak sentences stay weak: the strongest decides, not how many there are.
    assert outcome([0.1] * 30, [0.0] * 30, t) == pytest.approx([0, 0, 1])
    assert outcome([], [], t) == pytest.approx([0, 0, 1])


def test_the_likelihood_mixes_the_sensor_columns_by_the_soft_outcome():
    table = np.array([[0.6, 0.1, 0.1], [0.1, 0.5, 0.1], [0.3, 0.4, 0.8]])
    v = np.array([0.5, 0.0, 0.5])
    # L(SUPPORT) = 0.5·0.6 + 0.5·0.3 = 0.45; L(CONTRADICT) = 0.05 + 0.2 = 0.25; L(NEI) = 0.05 + 0.4
    assert likelihood(v, table) == pytest.approx([0.45, 0.25, 0.45])
    posterior = bayes_update(np.full(3, 1 / 3), 0.0, likelihood(v, table), 0.0).probabilities
    assert posterior == pytest.approx([0.45 / 1.15, 0.25 / 1.15, 0.45 / 1.15])


def test_new_text_that_decides_nothing_moves_belief_to_not_enough_info():
    v = outcome([0.01], [0.01])
    posterior = bayes_update(np.full(3, 1 / 3), 0.0, likelihood(v, DEFAULT_SENSOR), 0.0).probabilities
    assert int(np.argmax(posterior)) == NOT_ENOUGH_INFO


def test_found_evidence_explains_the_silence_after_it():
    sensor = SensorModel(np.array([[0.6, 0.1, 0.1], [0.1, 0.5, 0.1], [0.3, 0.4, 0.8]]))
    table = sensor.given_found(found_entailing=1.0, found_contradicting=0.0)
    # Entailing evidence found for certain: SUPPORT's column is NOT_ENOUGH_INFO's, so silence
    # no longer tells them apart.
    assert table[:, SUPPORT] == pytest.approx([0.1, 0.1, 0.8])
    silence = likelihood([0, 0, 1], table)
    assert silence[SUPPORT] == silence[NOT_ENOUGH_INFO]
    half = sensor.given_found(0.5, 0.0)
    assert half[:, SUPPORT] == pytest.approx([0.35, 0.1, 0.55])
    assert half[:, CONTRADICT] == pytest.approx(sensor.table[:, CONTRADICT])


def test_found_strength_accumulates_as_a_noisy_or_over_queries():
    assert found_strength(0.0, [0.6, 0.1, 0.3], ENTAILING) == pytest.approx(0.6)
    # 1 - (1 - 0.6)(1 - 0.5) = 0.8
    assert found_strength(0.6, [0.5, 0.0, 0.5], ENTAILING) == pytest.approx(0.8)


def test_the_sensor_fit_adds_the_prior_table_as_pseudo_counts_per_verdict():
    sensor = SensorModel.fit([[8, 1, 0], [0, 6, 1], [2, 3, 9]], prior_weight=10.0, sessions=3)
    # SUPPORT: (8, 0, 2) + 10·(0.55, 0.05, 0.40) = (13.5, 0.5, 6) over 20
    assert sensor.table[:, SUPPORT] == pytest.approx([13.5 / 20, 0.5 / 20, 6 / 20])
    assert sensor.table.sum(axis=0) == pytest.approx([1.0, 1.0, 1.0])
    assert sensor.sessions == 3
    # A verdict never observed keeps the prior's column, not a flat one.
    unobserved = SensorModel.fit(np.zeros((3, 3)))
    assert unobserved.table == pytest.approx(DEFAULT_SENSOR)


def test_a_sessions_outcomes_count_in_its_verdicts_column_less_what_found_evidence_explains():
    outcomes = [[0.5, 0.1, 0.4], [0.0, 0.0, 1.0]]
    counts = sensor_counts(outcomes, [[0.0, 0.0], [0.0, 0.0]], CONTRADICT)
    assert counts[:, CONTRADICT] == pytest.approx([0.5, 0.1, 1.4])
    assert counts[:, SUPPORT] == pytest.approx([0, 0, 0])
    # After contradicting evidence of strength 0.75, the second query counts a quarter for
    # CONTRADICT and three quarters for NOT_ENOUGH_INFO (as given_found predicts it).
    counts = sensor_counts(outcomes, [[0.0, 0.0], [0.2, 0.75]], CONTRADICT)
    assert counts[:, CONTRADICT] == pytest.approx([0.5, 0.1, 0.4 + 0.25])
    assert counts[:, NOT_ENOUGH_INFO] == pytest.approx([0.0, 0.0, 0.75])
    assert sensor_counts(outcomes, [[0.9, 0.9], [0.9, 0.9]], NOT_ENOUGH_INFO)[
        :, NOT_ENOUGH_INFO
    ] == pytest.approx([0.5, 0.1, 1.4])


def test_a_candidate_that_reaches_more_new_text_gains_more():
    belief = np.array([0.4, 0.2, 0.4])
    gains = [
        information_gain(belief, predicted_outcomes(r, DEFAULT_SENSOR)).expected_gain for r in (0, 0.3, 0.9)
    ]
    assert gains[0] == pytest.approx(0.0)  # it can only reach nothing new: redundant
    assert 0 < gains[1] < gains[2]
    table = predicted_outcomes(0.25, DEFAULT_SENSOR)
    assert table.shape == (4, 3)
    assert table.sum(axis=0) == pytest.approx([1.0, 1.0, 1.0])
    assert table[NOTHING_NEW] == pytest.approx([0.75, 0.75, 0.75])
    assert table[NOTHING, SUPPORT] == pytest.approx(0.25 * DEFAULT_SENSOR[NOTHING, SUPPORT])


def test_the_target_chance_of_one_query_is_the_chance_of_an_outcome_that_reaches_it():
    uniform = np.full(3, 1 / 3)
    sensor = SensorModel()
    # Entailing: (0.55, 0.10, 0.08)/0.73, SUPPORT at 0.753; contradicting: CONTRADICT at 0.789;
    # nothing: NOT_ENOUGH_INFO at 0.85/1.70 = 0.5. Their chances are the sensor rows' means.
    entailing, contradicting = DEFAULT_SENSOR[0].mean(), DEFAULT_SENSOR[1].mean()
    assert target_chance(uniform, (0, 0), sensor, [1.0], 0.6) == pytest.approx(entailing + contradicting)
    assert target_chance(uniform, (0, 0), sensor, [0.5], 0.6) == pytest.approx(
        0.5 * (entailing + contradicting)
    )
    assert target_chance(uniform, (0, 0), sensor, [1.0], 0.49) == pytest.approx(1.0)
    assert target_chance(uniform, (0, 0), sensor, [1.0], 0.8) == pytest.approx(0.0)
    assert target_chance(uniform, (0, 0), sensor, [], 0.6) == 0.0
    assert target_chance([0.7, 0.2, 0.1], (0, 0), sensor, [], 0.6) == 1.0


def _enumerated_chance(belief, found, sensor, reaches, target):
    """Every sequence of results, one by one, nothing merged."""
    belief = np.asarray(belief, float)
    if belief.max() >= target:
        return 1.0
    if not reaches:
        return 0.0
    table = sensor.given_found(*found)
    reach, rest = reaches[0], reaches[1:]
    chance = (1 - reach) * _enumerated_chance(belief, found, sensor, rest, target)
    for o in range(3):
        p_o = float(belief @ table[o])
        if p_o > 0:
            after = list(found)
            if o < 2:
                after[o] = 1.0
            posterior = bayes_update(belief, 0.0, table[o], 0.0).probabilities
            chance += reach * p_o * _enumerated_chance(posterior, after, sensor, rest, target)
    return chance


@pytest.mark.parametrize("seed", range(5))
def test_the_merged_look_ahead_equals_the_enumeration_of_every_result_sequence(seed):
    rng = np.random.default_rng(seed)
    sensor = SensorModel(rng.dirichlet(np.ones(3), size=3).T)
    belief = rng.dirichlet(np.ones(3))
    reaches = sorted(rng.uniform(0, 1, size=5), reverse=True)
    target = float(rng.uniform(belief.max(), 0.95))
    found = (float(rng.integers(0, 2)), 0.0)
    expected = _enumerated_chance(belief, found, sensor, list(reaches), target)
    assert target_chance(belief, found, sensor, reaches, target) == pytest.approx(expected, abs=1e-9)


def test_more_queries_to_come_never_lower_the_target_chance():
    sensor = SensorModel()
    chances = [target_chance(np.full(3, 1 / 3), (0, 0), sensor, [0.6] * k, 0.75) for k in range(6)]
    assert chances == sorted(chances)
    assert chances[0] == 0.0 < chances[1] < chances[5] < 1.0


def test_verdicts_rank_by_probability_and_ties_go_to_not_enough_info():
    assert ranked([1 / 3, 1 / 3, 1 / 3]) == [NOT_ENOUGH_INFO, SUPPORT, CONTRADICT]
    assert ranked([0.5, 0.25, 0.25]) == [SUPPORT, NOT_ENOUGH_INFO, CONTRADICT]
    assert ranked([0.4, 0.4, 0.2]) == [SUPPORT, CONTRADICT, NOT_ENOUGH_INFO]
    assert ranked([0.2, 0.3, 0.5]) == [NOT_ENOUGH_INFO, CONTRADICT, SUPPORT]
    # equal up to rounding error still ties
    assert ranked([0.1 + 0.2, 0.4, 0.3])[1] == NOT_ENOUGH_INFO
