"""A SIMULATED policy model for guessing numbers (`gn`): not a language model (issue 21, item 5).

It answers the prompts of `inquiry.llm.tasks` for one state of a session, knowing exactly which
secrets are consistent with the feedback so far, so that the error of every state is known and
the stop rules can be told apart on thousands of episodes in seconds:

- `normal`: every answer sample is a secret drawn uniformly from the consistent ones; a
  self-revision keeps the initial answer with probability `NORMAL_KEEP`, else draws again; the
  stated confidence is the answer's true probability (1 / consistent secrets, on the 1-10 scale,
  so never below 1).
- `collapse`: one arbitrary consistent secret (drawn once per state) takes `COLLAPSE_MASS` of
  every draw and the rest is uniform; a revision keeps its answer with probability
  `COLLAPSE_KEEP`; the stated confidence is 10 with a rationale of certainty (overconfident).

Prompt variants change nothing, so what robust MI gains here comes from diversity-steered
sampling alone. A question prompt lists consistent secrets (under collapse the collapsed one
first). Asked to imagine the feedback a guess would get (§2.7.2), it scores the guess against a
secret drawn as an answer is. Embeddings are one-hot digit positions, so distinct guesses are
never near-duplicates.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence

import numpy as np

from sounding.core.clustering import exact_clusters
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.tasks import Problem

NORMAL_KEEP = 0.5
COLLAPSE_MASS = 0.9
COLLAPSE_KEEP = 0.9
_DIGITS = re.compile(r"\d")
_TURN = re.compile(r"^Q(\d+): (.*?)\nA\1: (.*?)(?=\nQ\d+: |\n\n|\Z)", re.DOTALL | re.MULTILINE)
_SIMULATED_QUESTION = re.compile(r"answer to the next question: (.*)\n")


class SimulatedGuesser:
    """`assessment.Backend` for the states of a `gn` session: the state a prompt is about is read
    back from its transcript (a prompt it does not recognise is a bug and raises ValueError), so
    imagined states (the VoI lookahead's) are answered like real ones."""

    def __init__(self, problem: Problem, question_count: int, rng: random.Random):
        if problem.task.name != "gn":
            raise ValueError("the simulated policy plays gn only")
        self._problem, self._count, self._rng = problem, question_count, rng
        self._beliefs: dict[tuple, tuple[list[str], str]] = {}

    def belief(self, turns: Sequence[tuple[str, str]]) -> tuple[list[str], str]:
        """The secrets consistent with `turns` and the state's collapsed one (drawn once)."""
        key = tuple(turns)
        if key not in self._beliefs:
            consistent = tasks.consistent_guesses(turns)
            self._beliefs[key] = (consistent, self._rng.choice(consistent))
        return self._beliefs[key]

    def _draw(self, turns) -> str:
        consistent, collapsed = self.belief(turns)
        if self._problem.collapse and self._rng.random() < COLLAPSE_MASS:
            return collapsed
        return self._rng.choice(consistent)

    def _guess(self, guess: str, rationale: str = "") -> str:
        return json.dumps({"guess": guess, **({"rationale": rationale} if rationale else {})})

    async def text(self, messages, temperature, top_p, max_tokens) -> str:
        problem, messages = self._problem, list(messages)
        turns = transcript_turns(messages[1]["content"] if len(messages) > 1 else "")
        consistent, collapsed = self.belief(turns)
        count = next((c for c in (self._count, 1) if messages == tasks.question_prompt(problem, turns, c)), 0)
        if count:  # a candidate list, or naive prompting's one question
            ordered = self._rng.sample(consistent, min(count, len(consistent)))
            if problem.collapse:
                ordered = [collapsed, *(g for g in ordered if g != collapsed)][:count]
            return json.dumps(ordered)
        if messages == tasks.verbalized_prompt(problem, turns):
            guess = self._draw(turns)
            if problem.collapse:
                return json.dumps(
                    {"guess": guess, "rationale": "This is certainly the secret.", "confidence": 10}
                )
            return json.dumps({"guess": guess, "confidence": max(1, round(10 / len(consistent)))})
        question = _SIMULATED_QUESTION.search(_after_transcript_start(messages[-1]["content"]))
        if question and messages == tasks.simulator_prompt(problem, turns, question.group(1)):
            return bc.feedback_sentence(*bc.score(question.group(1), self._draw(turns)))
        for variant in tasks.VARIANTS:
            initial = tasks.initial_prompt(problem, turns, variant)
            if messages == initial:
                return self._guess(self._draw(turns))
            if messages[: len(initial)] == initial and len(messages) == len(initial) + 2:
                answered = "".join(_DIGITS.findall(messages[len(initial)]["content"]))[:4]
                keep = COLLAPSE_KEEP if problem.collapse else NORMAL_KEEP
                if answered in consistent and self._rng.random() < keep:
                    return self._guess(answered)
                return self._guess(self._draw(turns))
        raise ValueError("the simulated policy does not know this prompt")

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 4 * 10 + 1), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            digits = [int(d) for d in _DIGITS.findall(text)[:4]]
            for position, digit in enumerate(digits):
                row[position * 10 + digit] = 1.0
            if not digits:
                row[-1] = 1.0
            row /= np.linalg.norm(row)
        return rows

    async def cluster(self, texts: Sequence[str], method: str) -> list[int]:
        return exact_clusters(texts)

    async def entail(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        raise ValueError("the simulated gn policy judges no entailment (gn outcomes are exact)")


def _after_transcript_start(prompt: str) -> str:
    """The prompt from its transcript on: the client's context comes before it and is not read."""
    start = prompt.rfind(tasks.TRANSCRIPT_HEADING)
    return prompt[start:] if start >= 0 else ""


def transcript_turns(prompt: str) -> list[tuple[str, str]]:
    """The (question, answer) turns of a prompt's transcript (`tasks._transcript`'s format; a
    transcript clipped for length loses its earliest turns). Questions are the policy's own
    guesses and answers feedback sentences the domain wrote, so nothing a client sends is parsed."""
    return [(m.group(2), m.group(3)) for m in _TURN.finditer(_after_transcript_start(prompt))]
