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


def test_gn_functional_diversity_counts_the_digits_and_placements_the_guesses_tested():
    found = homogeneity.task_functional_diversity("gn", ["0123", "0145", "not a guess"])
    # Digits 0-5; placements (0,0) (1,1) (2,2) (3,3) (2,4) (3,5).
    assert found == {"digits_tested": pytest.approx(0.6), "placements_tested": pytest.approx(6 / 40)}


def test_dc_functional_diversity_is_the_normalised_entropy_of_the_suspects_addressed():
    even = homogeneity.task_functional_diversity("dc", ["q"] * 4, ["Ann", "Bob", "Ann", "Bob"], suspects=3)
    # Two suspects in equal shares over ln(min(3, 4)): ln 2 / ln 3.
    assert even["suspect_entropy"] == pytest.approx(math.log(2) / math.log(3))
    assert homogeneity.task_functional_diversity("dc", ["q"] * 3, ["Ann"] * 3, 3)["suspect_entropy"] == 0.0


def test_sp_functional_diversity_reads_each_questions_kind_from_its_wording():
    kinds = [
        homogeneity.question_kind(q)
        for q in ("Was he thirsty?", "Did he die because of the gun?", "Do you mean the barman?")
    ]
    assert kinds == ["factual", "causal", "clarification"]
    assert homogeneity.question_kind("Was the price reasonable?") == "factual"
    found = homogeneity.task_functional_diversity(
        "sp", ["Was he thirsty?", "Was it raining?", "Why did he go?"]
    )
    shares = [2 / 3, 1 / 3]
    assert found["question_kind_entropy"] == pytest.approx(
        -sum(p * math.log(p) for p in shares) / math.log(3)
    )
