"""Bulls and cows with 4 distinct digits (AR-Bench Guessing Numbers).

Every one of the 5,040 secrets is a hypothesis and every one of them is also a possible guess.
The feedback of a guess against a secret is (bulls, cows): right digit in the right place, right
digit in the wrong place. `FeedbackTable` holds the code bulls·5 + cows for every
(guess, secret) pair, computed once with numpy; a move scores every guess against the secrets
still consistent with the history.

Policies:
- `eig`: the guess with the largest expected information gain (the entropy of the partition of
  the consistent secrets by feedback, uniform prior), preferring consistent guesses on ties;
- `eig_lookahead`: looks ahead to the end of the game: the move of a plan that a branch-and-bound
  search over whole games found to need the fewest guesses on average (`bulls_and_cows_plan`);
- `naive`: the first consistent secret in lexicographic order;
- `random_consistent`: a uniformly random consistent secret (seeded).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sounding.inquiry.domains import bulls_and_cows_plan
from sounding.runtime import errors

LENGTH = 4
CODES_PER_FEEDBACK = 5  # cows < 5
SOLVED = LENGTH * CODES_PER_FEEDBACK  # (4 bulls, 0 cows)
POLICIES = ("eig", "eig_lookahead", "naive", "random_consistent")
_GUESS = re.compile(r"^\s*(\d{4})\s*$")
# Feedback patterns, matched against the answer with its whitespace (and literal "\n") collapsed
# to single spaces: no two quantifiers can match the same characters and no match starts inside
# a digit run, so each takes time linear in the answer's length.
_SENTENCE = re.compile(
    r"(?<!\d)(\d{1,2}) digits? (?:are|is) present in the answer and in the correct positions? ?"
    r"(\d{1,2}) digits? (?:are|is) present in the answer but in the different positions?",
    re.IGNORECASE,
)
_COMPACT = re.compile(r"(?<![\w])(\d) ?[ab] ?,? ?(\d) ?[bc](?!\w)", re.IGNORECASE)
_NAMED = re.compile(r"(?<!\d)(\d) ?bulls?\W{0,3}(?:and )?(\d) ?cows?\b", re.IGNORECASE)
_PAIR = re.compile(r"(\d)(?: ?[,;/] ?| )(\d)")


@dataclass(frozen=True)
class FeedbackTable:
    codes: np.ndarray  # (5040, 4) digits, lexicographic
    strings: tuple[str, ...]
    index: dict[str, int]
    table: np.ndarray  # (5040, 5040) uint8: bulls * 5 + cows, [guess, secret]


@lru_cache(maxsize=1)
def feedback_table() -> FeedbackTable:
    codes = np.array(list(itertools.permutations(range(10), LENGTH)), dtype=np.int8)
    bulls = np.zeros((len(codes), len(codes)), dtype=np.uint8)
    for position in range(LENGTH):
        bulls += codes[:, position][:, None] == codes[:, position][None, :]
    presence = np.zeros((len(codes), 10), dtype=np.float32)
    presence[np.arange(len(codes))[:, None], codes] = 1.0
    common = (presence @ presence.T).astype(np.uint8)
    table = bulls * CODES_PER_FEEDBACK + (common - bulls)
    strings = tuple("".join(map(str, c)) for c in codes)
    return FeedbackTable(codes, strings, {s: i for i, s in enumerate(strings)}, table)


def parse_guess(text: str) -> int:
    """The index of a guess of 4 distinct digits; ValueError naming what is wrong."""
    match = _GUESS.match(text)
    if not match:
        raise ValueError(f"a guess is exactly 4 digits, got {text!r}")
    if len(set(match.group(1))) != LENGTH:
        raise ValueError(f"a guess has 4 distinct digits, got {text!r}")
    return feedback_table().index[match.group(1)]


def parse_feedback(text: str) -> tuple[int, int]:
    """(bulls, cows) from "1 2", "1,2", "1A2B", "1B2C", "1 bull and 2 cows" or AR-Bench's
    sentence (found anywhere in the text, the short forms too, but the bare pair which must be
    the whole text)."""
    normal = " ".join(text.replace("\\n", " ").split())
    match = (
        _SENTENCE.search(normal)
        or _COMPACT.search(normal)
        or _NAMED.search(normal)
        or _PAIR.fullmatch(normal)
    )
    if not match:
        raise ValueError(
            "feedback is 'BULLS COWS' (e.g. '1 2') or AR-Bench's sentence "
            f"('1 digits are present in the answer and in the correct positions …'); got {text[:80]!r}"
        )
    bulls, cows = int(match.group(1)), int(match.group(2))
    if bulls + cows > LENGTH or (bulls, cows) == (LENGTH - 1, 1):
        raise ValueError(f"no secret can give {bulls} bulls and {cows} cows")
    return bulls, cows


def score(guess: str, secret: str) -> tuple[int, int]:
    """(bulls, cows) of a guess against a secret, both 4 distinct digits."""
    table = feedback_table()
    return divmod(int(table.table[table.index[guess], table.index[secret]]), CODES_PER_FEEDBACK)


def feedback_sentence(bulls: int, cows: int) -> str:
    """AR-Bench's wording of the feedback."""
    return (
        f"{bulls} digits are present in the answer and in the correct positions \n"
        f"{cows} digits are present in the answer but in the different positions"
    )


def consistent_secrets(history: list[tuple[int, int]]) -> np.ndarray:
    """Indices of the secrets consistent with every (guess index, feedback code) so far."""
    table = feedback_table().table
    mask = np.ones(table.shape[0], dtype=bool)
    for guess, code in history:
        mask &= table[guess] == code
    return np.flatnonzero(mask)


def partition_entropies(candidates: np.ndarray) -> np.ndarray:
    """For every guess, the entropy (bits) of the partition of `candidates` by its feedback:
    the expected information gain of that guess under a uniform prior over the candidates."""
    table = feedback_table().table
    count = len(candidates)
    guesses = table.shape[0]
    codes = table[:, candidates].astype(np.int32) + (np.arange(guesses, dtype=np.int32) * 25)[:, None]
    sizes = np.bincount(codes.ravel(), minlength=guesses * 25).reshape(guesses, 25).astype(np.float64)
    p = sizes / count
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log2(p), 0.0)
    return terms.sum(axis=1)


@lru_cache(maxsize=1)
def _opening_gains() -> np.ndarray:
    """Every guess's gain before any feedback (the same for every game), computed once."""
    gains = partition_entropies(np.arange(feedback_table().table.shape[0]))
    gains.setflags(write=False)
    return gains


def choose_guess(
    history: list[tuple[int, int]], policy: str, rng: np.random.Generator | None = None
) -> tuple[int, np.ndarray]:
    """The guess the policy makes after `history` (guess index, feedback code), and every guess's
    expected information gain (bits)."""
    candidates, gains = _position(tuple(history))
    if len(candidates) == 0:
        raise ValueError("no secret is consistent with the feedback so far")
    if len(candidates) == 1 or policy == "naive":
        return int(candidates[0]), gains
    if policy == "random_consistent":
        return int((rng or np.random.default_rng()).choice(candidates)), gains
    if policy == "eig":
        # A consistent guess can win outright: prefer it among (near-)equal gains.
        is_candidate = np.zeros_like(gains, dtype=bool)
        is_candidate[candidates] = True
        return int(np.argmax(gains + is_candidate * 1e-9)), gains
    if policy == "eig_lookahead":
        return _planned(history).guess, gains
    raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")


@lru_cache(maxsize=1)
def shipped_plan() -> bulls_and_cows_plan.Plan:
    """The `eig_lookahead` plan in the package."""
    return bulls_and_cows_plan.read(bulls_and_cows_plan.SHIPPED.read_text(), feedback_table().index)


def _planned(history: list[tuple[int, int]]) -> bulls_and_cows_plan.Move:
    """The plan's move after `history`, which must be the plan's own guesses."""
    plan = shipped_plan()
    path: tuple[int, ...] = ()
    for guess, code in history:
        if plan[path].guess != guess:
            raise ValueError("eig_lookahead continues only games it played itself")
        path = (*path, code)
    return plan[path]


@lru_cache(maxsize=512)
def _position(history: tuple[tuple[int, int], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Consistent secrets and every guess's gain after `history`; shared by all games that
    reach the same position (every eig game has the same first move and 14 possible seconds)."""
    candidates = consistent_secrets(list(history))
    if len(candidates) == feedback_table().table.shape[0]:
        return candidates, _opening_gains()
    if len(candidates) <= 1:
        return candidates, np.zeros(feedback_table().table.shape[0])
    gains = partition_entropies(candidates)
    gains.setflags(write=False)
    return candidates, gains


class BullsAndCows:
    """The `bulls_and_cows` inquiry domain: each question is a guess, each answer its feedback."""

    name = "bulls_and_cows"

    def __init__(self, history: list[tuple[int, int]] | None = None, solved: bool = False):
        self.history = [(int(guess), int(code)) for guess, code in history or []]
        self.solved = solved

    @classmethod
    def from_state(cls, setup: dict, state: dict) -> BullsAndCows:
        return cls(state["history"], state["solved"])

    def setup(self) -> dict:
        return {}

    def state(self) -> dict:
        return {"history": [list(step) for step in self.history], "solved": self.solved}

    def _candidates(self) -> np.ndarray:
        return _position(tuple(self.history))[0]

    def belief(self):
        from sounding.inquiry.protocol import BeliefView, ScoredHypothesis

        strings = feedback_table().strings
        candidates = self._candidates()
        total = feedback_table().table.shape[0]
        count = len(candidates)
        if self.solved:
            guess = self.history[-1][0]
            return BeliefView(
                0.0, float(np.log2(total)), [ScoredHypothesis(strings[guess], "", 1.0)], 0.0, 1.0
            )
        if count == 0:
            return BeliefView(0.0, float(np.log2(total)), [], 1.0, 0.0)
        top = [ScoredHypothesis(strings[i], "", 1.0 / count) for i in candidates[:5]]
        return BeliefView(float(np.log2(count)), float(np.log2(total)), top, 0.0, 1.0 / count)

    def choose(self, policy, turn: int):
        from sounding.inquiry.protocol import Choice, ScoredQuestion

        candidates, gains = _position(tuple(self.history))
        if len(candidates) == 0:
            return None
        rng = np.random.default_rng([policy.seed or 0, turn])
        guess, _ = choose_guess(self.history, policy.question_selection, rng)
        strings = feedback_table().strings

        def scored(index: int) -> ScoredQuestion:
            gain = float(gains[index])
            return ScoredQuestion(f"guess-{turn}", strings[index], gain, gain / (1 + policy.cost_sensitivity))

        ranked = [int(i) for i in np.argsort(-gains, kind="stable")[:4] if int(i) != guess][:3]
        parts = int(len(np.unique(feedback_table().table[guess, candidates])))
        rationale = (
            f"{strings[guess]} splits the {len(candidates)} consistent secrets into {parts} feedback "
            f"groups ({policy.question_selection})"
        )
        if policy.question_selection == "eig_lookahead" and len(candidates) > 1:
            expected = _planned(self.history).total / len(candidates)
            rationale += f"; the plan expects {expected:.3f} more guesses, this one included"
        return Choice(scored(guess), rationale, [scored(i) for i in ranked])

    def observe(self, question_id: str, question: str, answer: str) -> None:
        """`question` is the guess that was asked; `answer` its feedback."""
        guess = parse_guess(question)
        try:
            bulls, cows = parse_feedback(answer)
        except ValueError as error:
            raise errors.InvalidArgument(str(error), field="observation.answer") from None
        code = bulls * CODES_PER_FEEDBACK + cows
        self.history.append((guess, code))
        self.solved = code == SOLVED

    async def think(self, policy, turn: int, backend) -> None:
        """Nothing to precompute: the belief and the choice are computed on demand."""

    def finished(self) -> str:
        if self.solved:
            return "confidence_reached"
        if len(self._candidates()) == 0:
            return "no_viable_queries"
        return ""

    def answer(self) -> tuple[str, float]:
        strings = feedback_table().strings
        if self.solved:
            return strings[self.history[-1][0]], 1.0
        candidates = self._candidates()
        if len(candidates) == 0:
            return "", 0.0
        return strings[candidates[0]], 1.0 / len(candidates)
