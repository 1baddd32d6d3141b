import math

import numpy as np
import pytest
from sounding.core import homogeneity

pytestmark = pytest.mark.unit


def test_identical_samples_are_fully_homogeneous():
    vectors = np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (4, 1))
    diagnosed = homogeneity.diagnose(["same answer here"] * 4, vectors, [0, 0, 0, 0])
    assert diagnosed.p_max == 1.0
    assert diagnosed.mean_pairwise_similarity == pytest.approx(1.0)
    assert diagnosed.effective_rank == pytest.approx(1.0)
    assert diagnosed.exact_repetition_rate == 1.0
    assert diagnosed.trigram_jaccard == 1.0
    assert diagnosed.bucket == "high"


def test_orthogonal_distinct_samples_are_not():
    vectors = np.eye(4, dtype=np.float32)
    texts = ["the cat sat down", "a dog ran far away", "birds fly south now", "fish swim in lakes"]
    diagnosed = homogeneity.diagnose(texts, vectors, [0, 1, 2, 3])
    assert diagnosed.p_max == 0.25
    assert diagnosed.mean_pairwise_similarity == pytest.approx(0.0)
    assert diagnosed.effective_rank == pytest.approx(4.0)
    assert diagnosed.exact_repetition_rate == 0.0
    assert diagnosed.trigram_jaccard == 0.0
    assert diagnosed.bucket == "low"


def test_hand_computed_values():
    assert homogeneity.p_max(["a", "a", "b"], [1.0, 1.0, 2.0]) == pytest.approx(0.5)
    assert homogeneity.exact_repetition_rate(["x", "x", "y"]) == pytest.approx(1 / 3)
    # 3-grams of "a b c d" = {abc, bcd}; of "a b c" = {abc}: Jaccard 1/2.
    assert homogeneity.trigram_jaccard(["a b c d", "a b c"]) == pytest.approx(0.5)
    assert homogeneity.bucket(0.75) == "medium"


def test_prompt_sensitivity_is_the_disagreement_of_the_variants_modal_answers():
    assert homogeneity.prompt_sensitivity(["a", "a", "a"]) == 0.0
    assert homogeneity.prompt_sensitivity(["a", "a", "b"]) == pytest.approx(2 / 3)
    assert homogeneity.prompt_sensitivity(["a", "b", "c"]) == 1.0
    assert homogeneity.prompt_sensitivity(["a"]) == 0.0


def test_simulator_divergence_is_the_surprise_of_the_real_answer_and_whether_it_was_imagined():
    assert homogeneity.simulator_divergence(0.25, 8) == (pytest.approx(math.log(4)), True)
    # Never imagined: floored at half an imagined answer in eight.
    assert homogeneity.simulator_divergence(0.0, 8) == (pytest.approx(math.log(16)), False)
