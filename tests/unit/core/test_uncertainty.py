import pytest
from sounding.core.uncertainty import (
    DEFAULT_HISTORICAL_MISS_RATE,
    MissRateSignals,
    arm_disagreement,
    near_threshold,
    query_complexity,
    tail_density,
)

pytestmark = pytest.mark.unit


def test_tail_density():
    assert tail_density([]) == 0.5
    assert tail_density([0.9, 0.8, 0.35, 0.1]) == 0.25  # one of four in [0.3, 0.5)
    assert tail_density([0.4] * 10) == 0.5  # capped
    assert tail_density([0.3, 0.5]) == 0.5  # 0.3 is in the band, 0.5 is not: 1 of 2


def test_near_threshold():
    assert near_threshold([0.9, 0.1]) == 0.0
    assert near_threshold([0.31, 0.49, 0.4]) == pytest.approx(0.3 * 1)  # 3/10 reaches the cap
    assert near_threshold([0.4, 0.45]) == pytest.approx(0.2)
    assert near_threshold([0.3, 0.5]) == 0.0  # strict band


def test_query_complexity_counts_concepts():
    assert query_complexity("echo sounding") == pytest.approx(0.2)
    many = "BRCA1, IL-6, p53, insulin resistance, microRNA levels and tumour growth in mice"
    assert query_complexity(many) == 1.0


def test_arm_disagreement():
    assert arm_disagreement({"dense": ["a", "b"]}) == 0.0
    assert arm_disagreement({"dense": ["a", "b"], "lexical": ["b", "a"]}) == 0.0
    assert arm_disagreement({"dense": ["a", "b"], "lexical": ["c", "d"]}) == 1.0
    assert arm_disagreement({"dense": ["a", "b", "c"], "lexical": ["b", "c", "d"]}) == pytest.approx(0.5)


def test_the_combination_and_its_cap():
    signals = MissRateSignals(0.2, 0.1, 0.3, 0.4, 0.5, 0.6)
    assert signals.miss_rate() == pytest.approx(0.06 + 0.1 + 0.09 + 0.04 + 0.05 + 0.18)
    assert MissRateSignals(0.5, 0.3, 1.0, 1.0, 1.0, 1.0).miss_rate() == 0.9
    measured = MissRateSignals.measure(
        "echo sounding", [0.9, 0.4], {"dense": ["a"], "lexical": ["a"]}, separation_scores=[8.0, 2.0]
    )
    assert measured.historical == DEFAULT_HISTORICAL_MISS_RATE
    assert measured.flatness == 0.25  # fewer than ten hits: the last over the first
    assert set(measured.inputs()) == {
        "tail_density",
        "near_threshold",
        "historical_miss_rate",
        "query_complexity",
        "arm_disagreement",
        "score_flatness",
    }


def test_flatness_is_the_tenth_score_over_the_first():
    from sounding.core.uncertainty import flatness

    scores = [10.0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0.5]
    assert flatness(scores) == pytest.approx(0.1)
    assert flatness([5.0] * 12) == 1.0  # nothing stands out
    assert flatness([]) == 1.0 and flatness([0.0, 0.0]) == 1.0


def test_historical_miss_rate_is_the_smoothed_miss_share_of_the_nearest_observed_queries():
    from sounding.core.uncertainty import MissHistory

    history = MissHistory()
    assert history.miss_rate([1.0, 0.0]) is None
    for _ in range(10):
        history.add([1.0, 0.0], missed=True)
        history.add([0.0, 1.0], missed=False)
    # The ten nearest of a query along the first axis all missed: (10 + 2 * 0.3) / (10 + 2).
    assert history.miss_rate([2.0, 0.1]) == pytest.approx(10.6 / 12)
    assert history.miss_rate([0.1, 2.0]) == pytest.approx(0.6 / 12)
