"""Question selection over an explicit hypothesis set for the `llm` domain: `eig` (robust-MI
spec §3.8) and `uot` (§3.7, depth-2 planning); the arithmetic is `core.hypothesis_planning`.

The hypothesis set at a state:
- gn: the secrets consistent with the feedback so far, uniform; a guess's outcome under a
  secret is its exact feedback (noise-free).
- sp: `HYPOTHESIS_SAMPLES` explanations sampled from the policy model at the state (the
  regime's decoding), clustered with the task's entailment-aware clustering; p(z) is the
  cluster's share, the cluster's first explanation stands for it. A question's outcome under a
  hypothesis is predicted by the NLI model: the explanation as premise against "the answer to
  <q> is yes / no / unknown"; the most entailed statement decides, `unknown` when its
  entailment probability is below `UNKNOWN_BELOW`. The referee's answer is read through a
  channel with noise `SP_NOISE` (the NLI model's predictions are not certain).

The candidates are the shared question generator's (§2.6), the valid unasked ones (at most twice
the number asked for). A question's score is its EIG (or two-step gain) in nats, minus the
question cost. Other tasks have no hypothesis set the spec defines, so a session asking for
these methods there is refused. The session's stop rule decides when to answer; §3.7 and §3.8's
own stop, the set's entropy below a fixed threshold answered by its most probable member, is the
stop rule `hypothesis_entropy` (`core.stop_rules`), which reads the same set.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core import hypothesis_planning, stop_rules
from sounding.core.hypothesis_planning import HypothesisProblem
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.assessment import REGIMES, Backend, SamplingSettings, label_answers
from sounding.inquiry.llm.selection import ScoredCandidate, Selection, candidates, fallback
from sounding.inquiry.llm.tasks import Problem
from sounding.runtime import errors

PLANNING_METHODS = ("eig", "uot")
PLANNING_TASKS = ("gn", "sp")
HYPOTHESIS_SAMPLES = 8
UNKNOWN_BELOW = 0.5
SP_NOISE = 0.1
SP_OUTCOMES = ("Yes", "No", "Unknown")


def session_rules(task: str, question_selection: str, stop_rule: str, signals: str) -> list[str]:
    """The stop rules a session scores: its own, or with `signals` "all" every calibrated rule
    and, for a planning selection, `hypothesis_entropy`. InvalidArgument for a planning method
    outside the planning tasks, or hypothesis_entropy without one."""
    planned = question_selection in PLANNING_METHODS
    if planned and task not in PLANNING_TASKS:
        raise errors.InvalidArgument(
            f"{question_selection} plans over a hypothesis set, which only "
            f"{' and '.join(PLANNING_TASKS)} have",
            field="start.policy.question_selection",
        )
    if stop_rule == stop_rules.HYPOTHESIS_ENTROPY and not planned:
        raise errors.InvalidArgument(
            f"hypothesis_entropy stops on the hypothesis set of {' or '.join(PLANNING_METHODS)}; this "
            f"session's question_selection is {question_selection}",
            field="start.policy.stop_rule",
        )
    if signals != "all":
        return [stop_rule]
    return [*stop_rules.STOP_RULES, *([stop_rules.HYPOTHESIS_ENTROPY] if planned else [])]


def hypothesis_tokens_per_state(problem: Problem, settings: SamplingSettings) -> int:
    """The most tokens a planning method generates per state beyond the candidate list."""
    if problem.task.name != "sp":
        return 0
    return HYPOTHESIS_SAMPLES * (settings.answer_tokens or problem.task.answer_tokens)


@dataclass(frozen=True)
class HypothesisSet:
    """The hypotheses at a state: their prior (normalised) and what each stands for (gn: a
    secret; sp: its cluster's first explanation)."""

    prior: np.ndarray
    members: list[str]

    def entropy(self) -> float:
        """H(p(z)) in nats."""
        return hypothesis_planning.entropy(self.prior)

    def most_probable(self, preferred: str = "") -> tuple[str, float]:
        """The MAP member and its probability; among tied members `preferred` if it is one,
        else the first."""
        top = float(self.prior.max())
        tied = [m for m, p in zip(self.members, self.prior, strict=True) if p >= top - 1e-12]
        return (preferred if preferred in tied else tied[0]), top


async def hypothesis_set(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, rng: random.Random
) -> HypothesisSet:
    """gn: the consistent secrets, uniform (off the event loop: up to 5,040 of them). sp: the
    clusters of `HYPOTHESIS_SAMPLES` sampled explanations, weighted by their shares (one
    unparsed member when none parses)."""
    if problem.task.name == "gn":
        secrets = await asyncio.to_thread(tasks.consistent_guesses, turns)
        return HypothesisSet(np.full(len(secrets), 1.0 / len(secrets)), list(secrets))
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.answer_tokens or problem.task.answer_tokens
    prompt = tasks.initial_prompt(problem, turns)
    texts = await asyncio.gather(
        *(backend.text(prompt, temperature, top_p, tokens) for _ in range(HYPOTHESIS_SAMPLES))
    )
    parsed = [a for a in (tasks.parse_answer(problem, t, rng) for t in texts) if a != tasks.UNPARSED]
    if not parsed:
        return HypothesisSet(np.ones(1), [tasks.UNPARSED])
    labels = await label_answers(backend, problem, parsed)
    clusters = sorted(set(labels), key=labels.index)
    counts = np.array([labels.count(c) for c in clusters], dtype=float)
    return HypothesisSet(counts / counts.sum(), [parsed[labels.index(c)] for c in clusters])


def gn_problem(hypotheses: HypothesisSet, questions: Sequence[str]) -> tuple[HypothesisProblem, list[str]]:
    """Each guess's exact feedback under each consistent secret (every question a valid guess);
    outcome labels are feedback sentences, as `tasks.parse_outcome` writes them."""
    table = bc.feedback_table()
    secrets = np.array([table.index[s] for s in hypotheses.members])
    outcomes = np.stack([table.table[table.index[q], secrets] for q in questions]).astype(int)
    alphabet = int(bc.CODES_PER_FEEDBACK**2)
    labels = [
        bc.feedback_sentence(code // bc.CODES_PER_FEEDBACK, code % bc.CODES_PER_FEEDBACK)
        for code in range(alphabet)
    ]
    return HypothesisProblem.of(hypotheses.prior, outcomes, alphabet), labels


def implied_outcome_statements(question: str) -> list[str]:
    return [f'The answer to the question "{question}" is {word.lower()}.' for word in SP_OUTCOMES]


async def sp_problem(
    backend: Backend, hypotheses: HypothesisSet, questions: Sequence[str]
) -> tuple[HypothesisProblem, list[str]]:
    """Each question's NLI-predicted outcome under each explanation cluster."""
    if hypotheses.members == [tasks.UNPARSED]:
        outcomes = np.zeros((len(questions), 1))
        return HypothesisProblem.of(hypotheses.prior, outcomes, len(SP_OUTCOMES), SP_NOISE), list(SP_OUTCOMES)
    stories = hypotheses.members
    pairs = [(story, s) for q in questions for story in stories for s in implied_outcome_statements(q)]
    entailment = np.asarray(await backend.entail(pairs), dtype=float)[:, 0]
    by_statement = entailment.reshape(len(questions), len(stories), len(SP_OUTCOMES))
    outcomes = by_statement.argmax(axis=2)
    outcomes[by_statement.max(axis=2) < UNKNOWN_BELOW] = SP_OUTCOMES.index("Unknown")
    return HypothesisProblem.of(hypotheses.prior, outcomes, len(SP_OUTCOMES), SP_NOISE), list(SP_OUTCOMES)


async def plan_question(
    method: str,
    backend: Backend,
    problem: Problem,
    turns,
    settings: SamplingSettings,
    rng: random.Random,
    cost: float,
    hypotheses: HypothesisSet | None = None,
) -> Selection:
    """The candidate of largest EIG (`eig`) or two-step gain (`uot`), less `cost`, over
    `hypotheses` (the state's `hypothesis_set`, drawn here if not given)."""
    if method not in PLANNING_METHODS or problem.task.name not in PLANNING_TASKS:
        raise ValueError(f"{method} plans over gn or sp hypotheses")
    found = await candidates(backend, problem, turns, settings, rng)
    if problem.task.name == "gn":
        found = [q for q in found if len(q) == bc.LENGTH and q.isdigit() and len(set(q)) == bc.LENGTH]
    found = found[: 2 * settings.question_candidates]  # at most as many as C-IP-full scores
    if not found:
        return fallback(problem, turns, rng)
    hypotheses = hypotheses or await hypothesis_set(backend, problem, turns, settings, rng)
    # The arithmetic (up to 5,040 secrets, and the feedback table's first build) runs on a worker
    # thread, off the event loop.
    if problem.task.name == "gn":
        planned, labels = await asyncio.to_thread(gn_problem, hypotheses, found)
    else:
        planned, labels = await sp_problem(backend, hypotheses, found)
    planner = (
        hypothesis_planning.expected_information_gain
        if method == "eig"
        else hypothesis_planning.two_step_gains
    )
    gains = await asyncio.to_thread(planner, planned)
    scored = []
    for index, (question, gain) in enumerate(zip(found, gains, strict=True)):
        marginal, _ = planned.branches(index)
        outcomes = {labels[o]: float(m) for o, m in enumerate(marginal) if m > 0}
        scored.append(ScoredCandidate(question, float(gain), float(gain) - cost, outcomes))
    scored.sort(key=lambda c: -c.value)
    what = "expected information gain" if method == "eig" else "two-step gain"
    return Selection(
        scored[0].question,
        f"{method}: {what} {scored[0].reduction:.3f} nats over {len(planned.prior)} hypotheses, "
        f"{len(scored) - 1} other candidates",
        scored,
    )
