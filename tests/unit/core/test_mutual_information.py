import math

import pytest
from sounding.core.mutual_information import cluster_ids_or_exact, mutual_information

pytestmark = pytest.mark.unit


def test_one_cluster_on_both_sides_is_exactly_zero():
    assert mutual_information(["a"] * 6, ["b"] * 6) == 0.0


def test_revisions_that_copy_the_initial_answer_carry_its_full_entropy():
    assert mutual_information(["a", "a", "b", "b"], ["x", "x", "y", "y"]) == pytest.approx(
        math.log(2), abs=1e-5
    )


def test_independent_revisions_carry_nothing():
    assert mutual_information(["a", "a", "b", "b"], ["x", "y", "x", "y"]) == pytest.approx(0.0, abs=1e-5)


def test_a_hand_computed_joint_table():
    # n(a,x)=2, n(a,y)=1, n(b,y)=1, n(b,x)=0; p(a)=3/4, p(b)=1/4, p(x)=p(y)=1/2:
    # I = 1/2 ln(4/3) + 1/4 ln(2/3) + 1/4 ln 2
    expected = 0.5 * math.log(4 / 3) + 0.25 * math.log(2 / 3) + 0.25 * math.log(2)
    assert mutual_information(["a", "a", "a", "b"], ["x", "x", "y", "y"]) == pytest.approx(expected, abs=1e-4)
    assert expected == pytest.approx(0.215762, abs=1e-6)


def test_a_failed_clustering_falls_back_to_exact_strings():
    answers = ["Mr. Green", "Mr. Green", "Ms. Scarlet"]
    assert cluster_ids_or_exact(answers, [0, float("nan"), 1]) == answers
    assert cluster_ids_or_exact(answers, None) == answers
    assert cluster_ids_or_exact(answers, [0, 0, 1]) == [0, 0, 1]


def test_mismatched_inputs_are_refused():
    with pytest.raises(ValueError):
        mutual_information(["a"], [])
