import time

import numpy as np
import pytest
from sounding.inquiry.domains import bulls_and_cows as bc

pytestmark = pytest.mark.unit


def feedback(guess: str, secret: str) -> tuple[int, int]:
    table = bc.feedback_table()
    return divmod(int(table.table[table.index[guess], table.index[secret]]), bc.CODES_PER_FEEDBACK)


def test_the_table_covers_every_secret_and_scores_like_the_rules():
    table = bc.feedback_table()
    assert table.table.shape == (5040, 5040)
    assert table.strings[0] == "0123" and "9876" in table.index
    assert feedback("1234", "1243") == (2, 2)
    assert feedback("1234", "5678") == (0, 0)
    assert feedback("0435", "4053") == (0, 4)
    assert feedback("0435", "0435") == (4, 0)
    assert (np.diag(table.table) == bc.SOLVED).all()
    assert (table.table == table.table.T).all()
    assert len(np.unique(table.table)) == 14  # (3, 1) is impossible


@pytest.mark.parametrize("text", ["123", "12345", "1123", "12a4", ""])
def test_malformed_guesses(text):
    with pytest.raises(ValueError):
        bc.parse_guess(text)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1 2", (1, 2)),
        ("1,2", (1, 2)),
        ("1A2B", (1, 2)),
        ("1B 2C", (1, 2)),
        (bc.feedback_sentence(2, 1), (2, 1)),
        (
            "0 digits are present in the answer and in the correct positions \\n3 digits are present in the "
            "answer but in the different positions",
            (0, 3),
        ),
    ],
)
def test_feedback_forms(text, expected):
    assert bc.parse_feedback(text) == expected


@pytest.mark.parametrize("text", ["3 1", "4 1", "five", "2", "12", "1 2 3"])
def test_impossible_or_malformed_feedback(text):
    with pytest.raises(ValueError):
        bc.parse_feedback(text)


HALF = "1 digits are present in the answer and in the correct positions"


@pytest.mark.parametrize(
    "text",
    [
        HALF + "\n" * 64 + "1",  # froze the orchestrator (exponential backtracking)
        HALF + "\\n" * 5000 + "x",
        " " * 100_000,
        "1" * 100_000,
        (HALF + " ") * 2000,
        "1 bull " * 20_000,
        "1 a " * 30_000,
        "!" * 100_000 + "1 2",
    ],
)
def test_feedback_parsing_takes_linear_time_on_hostile_answers(text):
    started = time.perf_counter()
    with pytest.raises(ValueError):
        bc.parse_feedback(text)
    assert time.perf_counter() - started < 10  # quadratic patterns took minutes


def test_the_sentence_parses_after_many_blank_lines():
    assert bc.parse_feedback(
        HALF + "\n" * 64 + "2 digits are present in the answer but in the different positions"
    ) == (
        1,
        2,
    )


def test_consistency_and_partition_entropy():
    table = bc.feedback_table()
    guess = table.index["0123"]
    history = [(guess, 1 * bc.CODES_PER_FEEDBACK + 1)]
    consistent = bc.consistent_secrets(history)
    assert all(feedback("0123", table.strings[i]) == (1, 1) for i in consistent)
    assert len(consistent) == int((table.table[guess] == 6).sum())
    gains = bc.partition_entropies(consistent)
    sizes = np.bincount(table.table[guess, consistent])
    assert gains[guess] == pytest.approx(0.0)  # every consistent secret answers it the same way
    p = sizes[sizes > 0] / sizes.sum()
    assert gains[guess] == pytest.approx(float(-(p * np.log2(p)).sum()))


@pytest.mark.parametrize("policy", bc.POLICIES)
def test_every_policy_solves_a_game(policy):
    table = bc.feedback_table()
    rng = np.random.default_rng(0)
    secret = table.index["7031"]
    history: list[tuple[int, int]] = []
    while len(history) < 25:
        guess, gains = bc.choose_guess(history, policy, rng)
        code = int(table.table[guess, secret])
        if code == bc.SOLVED:
            break
        history.append((guess, code))
    assert guess == secret and len(history) + 1 <= 9
    assert gains.shape == (5040,)


def test_naive_takes_the_first_consistent_secret_and_eig_the_most_informative():
    assert bc.choose_guess([], "naive")[0] == 0
    guess, gains = bc.choose_guess([], "eig")
    assert gains[guess] == pytest.approx(gains.max())
    impossible = [(0, 0), (0, 5)]  # 0123 shares no digit with the secret, then one digit
    with pytest.raises(ValueError, match="consistent"):
        bc.choose_guess(impossible, "eig")


def test_score_counts_bulls_and_cows_of_a_guess():
    assert bc.score("0453", "0435") == (2, 2)
    assert bc.score("0435", "0435") == (4, 0)
    assert bc.score("1289", "0435") == (0, 0)
