import itertools
from functools import cache

import numpy as np
import pytest
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.domains import bulls_and_cows_plan as planning

pytestmark = pytest.mark.unit


def small_game(digits: int, length: int) -> tuple[np.ndarray, int]:
    """The feedback table of bulls and cows with `length` distinct digits out of `digits`."""
    codes = list(itertools.permutations(range(digits), length))

    def feedback(guess, secret) -> int:
        bulls = sum(g == s for g, s in zip(guess, secret, strict=True))
        return bulls * 5 + len(set(guess) & set(secret)) - bulls

    table = np.array([[feedback(guess, secret) for secret in codes] for guess in codes], dtype=np.uint8)
    return table, length * 5


def exhaustive_total(table: np.ndarray, solved: int) -> int:
    """The optimal total number of guesses over every secret, trying every guess everywhere."""

    @cache
    def total(secrets: frozenset[int]) -> int:
        if len(secrets) == 1:
            return 1
        best = None
        for guess in range(table.shape[0]):
            parts: dict[int, set[int]] = {}
            for secret in secrets:
                parts.setdefault(int(table[guess, secret]), set()).add(secret)
            parts.pop(solved, None)
            if any(len(part) == len(secrets) for part in parts.values()):
                continue
            candidate = len(secrets) + sum(total(frozenset(part)) for part in parts.values())
            best = candidate if best is None else min(best, candidate)
        assert best is not None
        return best

    return total(frozenset(range(table.shape[0])))


@pytest.mark.parametrize(("count", "bound"), [(1, 1), (2, 3), (14, 27), (20, 45)])
def test_lower_bound(count, bound):
    assert planning.lower_bound(count) == bound


def test_a_search_wide_enough_to_try_every_guess_is_optimal():
    table, solved = small_game(digits=5, length=2)
    wide = planning.Search(table, solved, width=table.shape[0]).plan()
    narrow = planning.Search(table, solved, width=1).plan()
    optimum = exhaustive_total(table, solved)
    assert wide[()].total == optimum
    assert narrow[()].total >= optimum


def play(plan: planning.Plan, table: np.ndarray, solved: int, secret: int) -> int:
    path: tuple[int, ...] = ()
    for turn in itertools.count(1):
        code = int(table[plan[path].guess, secret])
        if code == solved:
            return turn
        path = (*path, code)
    raise AssertionError


def test_a_plan_solves_every_secret_in_the_total_it_states():
    table, solved = small_game(digits=6, length=3)
    plan = planning.Search(table, solved, width=3).plan()
    turns = [play(plan, table, solved, secret) for secret in range(table.shape[0])]
    assert sum(turns) == plan[()].total
    strings = ["".join(map(str, c)) for c in itertools.permutations(range(6), 3)]
    assert planning.read(planning.write(plan, strings), {s: i for i, s in enumerate(strings)}) == plan


def test_the_shipped_plan_solves_all_5040_secrets_in_at_most_5_22_guesses_on_average():
    table = bc.feedback_table().table
    plan = bc.shipped_plan()
    turns = np.array([play(plan, table, bc.SOLVED, secret) for secret in range(5040)])
    assert turns.sum() == plan[()].total
    assert turns.mean() <= 5.22
    assert turns.max() <= 7


def test_eig_lookahead_refuses_a_game_it_did_not_play():
    other = bc.feedback_table().index["4567"]
    with pytest.raises(ValueError, match="played itself"):
        bc.choose_guess([(other, 1)], "eig_lookahead")
