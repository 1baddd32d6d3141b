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
these methods there is refused. Unlike §3.7 and §3.8, which also stop at an entropy threshold
and answer with the most probable hypothesis, these are question selectors only: the session's
stop rule decides when to answer, and the answer is the state's, as for every other selection.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import numpy as np

from sounding.core import hypothesis_planning
from sounding.core.hypothesis_planning import HypothesisProblem
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.assessment import REGIMES, Backend, SamplingSettings, label_answers
from sounding.inquiry.llm.selection import ScoredCandidate, Selection, candidates, fallback
from sounding.inquiry.llm.tasks import Problem

PLANNING_METHODS = ("eig", "uot")
PLANNING_TASKS = ("gn", "sp")
HYPOTHESIS_SAMPLES = 8
UNKNOWN_BELOW = 0.5
SP_NOISE = 0.1
SP_OUTCOMES = ("Yes", "No", "Unknown")


def hypothesis_tokens_per_state(problem: Problem, settings: SamplingSettings) -> int:
    """The most tokens a planning method generates per state beyond the candidate list."""
    if problem.task.name != "sp":
        return 0
    return HYPOTHESIS_SAMPLES * (settings.answer_tokens or problem.task.answer_tokens)


def gn_problem(turns, questions: Sequence[str]) -> tuple[HypothesisProblem, list[str]]:
    """The consistent secrets (uniform) and each guess's exact feedback under each (every
    question a valid guess); outcome labels are feedback sentences, as `tasks.parse_outcome`
    writes them."""
    table = bc.feedback_table()
    secrets = np.array([table.index[s] for s in tasks.consistent_guesses(turns)])
    outcomes = np.stack([table.table[table.index[q], secrets] for q in questions]).astype(int)
    alphabet = int(bc.CODES_PER_FEEDBACK**2)
    labels = [
        bc.feedback_sentence(code // bc.CODES_PER_FEEDBACK, code % bc.CODES_PER_FEEDBACK)
        for code in range(alphabet)
    ]
    return HypothesisProblem.of(np.ones(len(secrets)), outcomes, alphabet), labels


def implied_outcome_statements(question: str) -> list[str]:
    return [f'The answer to the question "{question}" is {word.lower()}.' for word in SP_OUTCOMES]


async def sp_problem(
    backend: Backend, problem: Problem, turns, questions: Sequence[str], settings: SamplingSettings, rng
) -> tuple[HypothesisProblem, list[str]]:
    """Sampled, clustered explanations and each question's NLI-predicted outcome under each."""
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.answer_tokens or problem.task.answer_tokens
    prompt = tasks.initial_prompt(problem, turns)
    texts = await asyncio.gather(
        *(backend.text(prompt, temperature, top_p, tokens) for _ in range(HYPOTHESIS_SAMPLES))
    )
    answers = [tasks.parse_answer(problem, t, rng) for t in texts]
    parsed = [a for a in answers if a != tasks.UNPARSED]
    if not parsed:
        return HypothesisProblem.of([1.0], np.zeros((len(questions), 1)), len(SP_OUTCOMES), SP_NOISE), list(
            SP_OUTCOMES
        )
    labels = await label_answers(backend, problem, parsed)
    clusters = sorted(set(labels), key=labels.index)
    stories = [parsed[labels.index(c)] for c in clusters]
    prior = np.array([labels.count(c) for c in clusters], dtype=float)
    pairs = [(story, s) for q in questions for story in stories for s in implied_outcome_statements(q)]
    entailment = np.asarray(await backend.entail(pairs), dtype=float)[:, 0]
    by_statement = entailment.reshape(len(questions), len(stories), len(SP_OUTCOMES))
    outcomes = by_statement.argmax(axis=2)
    outcomes[by_statement.max(axis=2) < UNKNOWN_BELOW] = SP_OUTCOMES.index("Unknown")
    return HypothesisProblem.of(prior, outcomes, len(SP_OUTCOMES), SP_NOISE), list(SP_OUTCOMES)


async def plan_question(
    method: str,
    backend: Backend,
    problem: Problem,
    turns,
    settings: SamplingSettings,
    rng: random.Random,
    cost: float,
) -> Selection:
    """The candidate of largest EIG (`eig`) or two-step gain (`uot`), less `cost`."""
    if method not in PLANNING_METHODS or problem.task.name not in PLANNING_TASKS:
        raise ValueError(f"{method} plans over gn or sp hypotheses")
    found = await candidates(backend, problem, turns, settings, rng)
    if problem.task.name == "gn":
        found = [q for q in found if len(q) == bc.LENGTH and q.isdigit() and len(set(q)) == bc.LENGTH]
    found = found[: 2 * settings.question_candidates]  # at most as many as C-IP-full scores
    if not found:
        return fallback(problem, turns, rng)
    # The arithmetic (up to 5,040 secrets, and the feedback table's first build) runs on a worker
    # thread, off the event loop.
    if problem.task.name == "gn":
        hypotheses, labels = await asyncio.to_thread(gn_problem, turns, found)
    else:
        hypotheses, labels = await sp_problem(backend, problem, turns, found, settings, rng)
    planner = (
        hypothesis_planning.expected_information_gain
        if method == "eig"
        else hypothesis_planning.two_step_gains
    )
    gains = await asyncio.to_thread(planner, hypotheses)
    scored = []
    for index, (question, gain) in enumerate(zip(found, gains, strict=True)):
        marginal, _ = hypotheses.branches(index)
        outcomes = {labels[o]: float(m) for o, m in enumerate(marginal) if m > 0}
        scored.append(ScoredCandidate(question, float(gain), float(gain) - cost, outcomes))
    scored.sort(key=lambda c: -c.value)
    what = "expected information gain" if method == "eig" else "two-step gain"
    return Selection(
        scored[0].question,
        f"{method}: {what} {scored[0].reduction:.3f} nats over {len(hypotheses.prior)} hypotheses, "
        f"{len(scored) - 1} other candidates",
        scored,
    )
