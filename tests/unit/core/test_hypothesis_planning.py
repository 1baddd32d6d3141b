import math

import numpy as np
import pytest
from sounding.core.hypothesis_planning import (
    HypothesisProblem,
    entropy,
    expected_information_gain,
    two_step_gains,
)

pytestmark = pytest.mark.unit

# Four equally likely hypotheses; q0 splits {0,1}|{2,3}, q1 {0,2}|{1,3}, q2 {0}|{1,2,3}, q3 nothing.
TABLE = [[0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], [0, 0, 0, 0]]


def test_exact_outcomes_gain_the_entropy_of_the_partition():
    gains = expected_information_gain(HypothesisProblem.of(np.ones(4), TABLE, alphabet=2))
    assert gains == pytest.approx([math.log(2), math.log(2), math.log(4) - 0.75 * math.log(3), 0.0])


def test_a_noisy_answer_channel_gains_less_by_hand():
    # p(o | z) = 0.9 for the implied outcome, 0.1 for the other: posteriors (0.9, 0.1).
    problem = HypothesisProblem.of([0.5, 0.5], [[0, 1]], alphabet=2, noise=0.2)
    expected = math.log(2) - entropy([0.9, 0.1])
    assert expected_information_gain(problem) == pytest.approx([expected])
    marginal, posteriors = problem.branches(0)
    assert marginal == pytest.approx([0.5, 0.5])
    assert posteriors == pytest.approx(np.array([[0.9, 0.1], [0.1, 0.9]]))


def test_an_unused_outcome_is_an_empty_branch_that_keeps_the_prior_and_weighs_nothing():
    problem = HypothesisProblem.of([0.25, 0.75], [[0, 1]], alphabet=3)
    marginal, posteriors = problem.branches(0)
    assert marginal == pytest.approx([0.25, 0.75, 0.0])
    assert posteriors[2] == pytest.approx([0.25, 0.75])
    assert expected_information_gain(problem) == pytest.approx([entropy([0.25, 0.75])])


def test_two_step_planning_propagates_each_branchs_best_follow_up():
    gains = two_step_gains(HypothesisProblem.of(np.ones(4), TABLE, alphabet=2))
    # q0 then q1 (or q1 then q0) identifies the hypothesis: ln 4.
    # q2 then, on {1,2,3} (mass 3/4), q0 or q1 splits it 1|2: the follow-up gains H(1/3, 2/3).
    # q3 learns nothing first and then the best single question: ln 2.
    q2 = math.log(4) - 0.75 * math.log(3) + 0.75 * entropy([1 / 3, 2 / 3])
    assert gains == pytest.approx([math.log(4), math.log(4), q2, math.log(2)])
    assert q2 == pytest.approx(1.5 * math.log(2))


def test_two_step_planning_can_prefer_a_question_greedy_gain_ranks_lower():
    # p = (1/6, 1/6, 1/6, 1/2). q0 splits {0,1,2}|{3}: the largest gain at once (ln 2), but no
    # yes/no follow-up can split three equal hypotheses evenly. q2 splits {0,2}|{1,3} and either
    # q0 or q1 then identifies the hypothesis: the whole entropy, ½ ln 12.
    table = [[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 1, 0]]
    problem = HypothesisProblem.of([1, 1, 1, 3], table, alphabet=2)
    greedy = expected_information_gain(problem)
    planned = two_step_gains(problem)
    assert int(np.argmax(greedy)) == 0
    assert greedy[0] == pytest.approx(math.log(2))
    assert greedy[2] == pytest.approx(entropy([1 / 3, 2 / 3]))
    assert planned[0] == pytest.approx(math.log(2) + 0.5 * entropy([1 / 3, 2 / 3]))
    assert planned[2] == pytest.approx(0.5 * math.log(12))
    assert int(np.argmax(planned)) == 2


@pytest.mark.parametrize(
    ("prior", "table", "alphabet", "noise"),
    [
        ([], [[]], 2, 0.0),
        ([1, -1], [[0, 1]], 2, 0.0),
        ([1, 1], [[0, 1, 0]], 2, 0.0),
        ([1, 1], [[0, 2]], 2, 0.0),
        ([1, 1], [[0, 1]], 2, 1.0),
    ],
)
def test_malformed_problems_are_refused(prior, table, alphabet, noise):
    with pytest.raises(ValueError):
        HypothesisProblem.of(prior, table, alphabet, noise)
