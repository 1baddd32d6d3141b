import numpy as np
import pytest
from sounding.inquiry.domains.hypotheses import HypothesisSet
from sounding.inquiry.protocol import HypothesisIn, Policy, QuestionIn
from sounding.runtime import errors

pytestmark = pytest.mark.unit


def eight_animals(noise: float = 0.0) -> HypothesisSet:
    """Eight hypotheses; `constant` is asked first in the given order but tells nothing,
    `lopsided` splits 1:7, `bit0..bit2` split them evenly."""
    hypotheses = [HypothesisIn(f"h{i}") for i in range(8)]
    questions = [
        QuestionIn("constant", "is it an animal?", 1.0, {h.id: "yes" for h in hypotheses}),
        QuestionIn("lopsided", "is it h0?", 1.0, {h.id: "yes" if h.id == "h0" else "no" for h in hypotheses}),
    ] + [
        QuestionIn(f"bit{j}", f"bit {j}?", 1.0, {f"h{i}": "yes" if i >> j & 1 else "no" for i in range(8)})
        for j in range(3)
    ]
    return HypothesisSet.from_request(hypotheses, questions, {"noise": str(noise)})


@pytest.mark.parametrize(
    "policy,first",
    [("fixed_order", "constant"), ("fixed_order_informative", "lopsided"), ("eig", "bit0")],
)
def test_each_policy_picks_its_first_question(policy, first):
    choice = eight_animals().choose(Policy(question_selection=policy), 1)
    assert choice.chosen.question_id == first


def test_eig_of_an_even_split_is_one_bit_and_answers_halve_the_set():
    domain = eight_animals()
    choice = domain.choose(Policy(), 1)
    assert choice.chosen.expected_information_gain == pytest.approx(1.0)
    domain.observe("bit0", "", "yes")
    assert np.count_nonzero(domain.probabilities) == 4
    assert domain.belief().entropy_bits == pytest.approx(2.0)


def test_noisy_answers_keep_contradicted_hypotheses_alive():
    domain = eight_animals(noise=0.1)
    domain.observe("bit0", "", "yes")
    odd, even = domain.probabilities[1], domain.probabilities[0]
    assert odd / even == pytest.approx(0.9 / 0.1)


def test_no_question_left_that_tells_hypotheses_apart():
    domain = eight_animals()
    for j, answer in enumerate(["yes", "no", "yes"]):
        domain.observe(f"bit{j}", "", answer)
    assert domain.answer() == ("h5", 1.0)
    assert domain.choose(Policy(question_selection="fixed_order"), 4) is None


def test_setup_and_state_rebuild_the_same_domain():
    domain = eight_animals(noise=0.05)
    domain.observe("bit1", "", "no")
    rebuilt = HypothesisSet.from_state(domain.setup(), domain.state())
    assert rebuilt.probabilities.tolist() == domain.probabilities.tolist()
    assert rebuilt.choose(Policy(), 2) == domain.choose(Policy(), 2)


def test_an_answer_outside_the_alphabet_names_the_field():
    with pytest.raises(errors.InvalidArgument) as caught:
        eight_animals().observe("bit0", "", "maybe")
    assert caught.value.field == "observation.answer"


def test_cost_sensitivity_changes_the_choice():
    """Spec §7.2 cost_sensitivity_effect: an even split that costs 10 against a 1:7 split that
    costs 1."""
    hypotheses = [HypothesisIn(f"h{i}") for i in range(8)]
    questions = [
        QuestionIn("even", "even split", 10.0, {f"h{i}": "yes" if i < 4 else "no" for i in range(8)}),
        QuestionIn("cheap", "cheap split", 1.0, {f"h{i}": "yes" if i == 0 else "no" for i in range(8)}),
    ]
    domain = HypothesisSet.from_request(hypotheses, questions)
    assert domain.choose(Policy(cost_sensitivity=0.0), 1).chosen.question_id == "even"
    assert domain.choose(Policy(cost_sensitivity=10.0), 1).chosen.question_id == "cheap"


def test_exploration_weight_changes_the_choice():
    """Spec §7.2 exploration_exploitation_balance: after asking about colour, a slightly more
    informative colour question loses to a novel one once exploration counts."""
    hypotheses = [HypothesisIn(f"h{i}") for i in range(16)]

    def bit(j: int, text: str, flip: int = 0) -> QuestionIn:
        return QuestionIn(
            text, text, 1.0, {f"h{i}": "yes" if (i >> j) & 1 ^ (i == flip) else "no" for i in range(16)}
        )

    questions = [bit(0, "is it red"), bit(1, "is it dark red"), bit(2, "does it swim", flip=5)]
    domain = HypothesisSet.from_request(hypotheses, questions)
    domain.observe("is it red", "", "yes")
    assert domain.choose(Policy(exploration_weight=0.0), 2).chosen.question_id == "is it dark red"
    assert domain.choose(Policy(exploration_weight=1.0), 2).chosen.question_id == "does it swim"
