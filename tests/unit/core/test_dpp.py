import itertools

import numpy as np
import pytest
from sounding.core import dpp

pytestmark = pytest.mark.unit


def log_volume(vectors, quality, chosen, sigma=dpp.DEFAULT_SIGMA) -> float:
    kernel = quality[:, None] * dpp.rbf_similarity(vectors, sigma) * quality[None, :]
    return float(np.linalg.slogdet(kernel[np.ix_(chosen, chosen)])[1])


def test_far_apart_candidates_are_taken_by_quality():
    vectors = np.eye(4) * 10.0  # similarity ~0 between any two
    assert dpp.greedy_slate(vectors, np.array([0.5, 2.0, 1.0, 3.0]), size=3) == [3, 1, 2]


def test_a_duplicate_of_the_best_loses_to_a_weaker_distinct_candidate_and_duplicates_end_the_slate():
    vectors = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    assert dpp.greedy_slate(vectors, np.array([2.0, 1.9, 1.0]), size=2) == [0, 2]
    # Only duplicates remain after the first two: the slate stops short of its size.
    assert dpp.greedy_slate(vectors, np.array([2.0, 1.9, 1.0]), size=3) == [0, 2]


def test_each_step_takes_the_largest_determinant_gain_as_brute_force_finds_it():
    rng = np.random.default_rng(0)
    for _ in range(20):
        vectors = rng.normal(scale=0.4, size=(7, 3))
        quality = rng.uniform(0.5, 2.0, size=7)
        slate = dpp.greedy_slate(vectors, quality, size=4)
        for step in range(1, len(slate) + 1):
            best = max(
                (i for i in range(7) if i not in slate[: step - 1]),
                key=lambda i: log_volume(vectors, quality, [*slate[: step - 1], i]),
            )
            assert slate[step - 1] == best


def test_greedy_is_close_to_the_best_slate_on_small_instances():
    rng = np.random.default_rng(1)
    vectors, quality = rng.normal(scale=0.4, size=(8, 2)), np.ones(8)
    slate = dpp.greedy_slate(vectors, quality, size=3)
    optimum = max(log_volume(vectors, quality, list(c)) for c in itertools.combinations(range(8), 3))
    assert log_volume(vectors, quality, slate) >= optimum - 0.5


def test_quality_must_be_positive_and_match_the_candidates():
    with pytest.raises(ValueError, match="positive"):
        dpp.greedy_slate(np.zeros((2, 2)), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="one quality"):
        dpp.greedy_slate(np.zeros((2, 2)), np.array([1.0]))
