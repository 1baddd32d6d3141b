"""How the `llm` domain chooses its next question (robust-MI spec §2.6, §2.7, §3.1, §3.6;
`inquiry.llm.planning` has §3.7 and §3.8).

- `naive_prompting` (§3.1): the one question the model writes when asked for one.
- `direct_prompting`: the first valid, unasked candidate the model lists.
- `voi`: value of information by expected robust-MI reduction. The candidates are thinned to a
  diverse slate by greedy DPP (`core.dpp`, uniform quality); for each, the policy model imagines
  `SIMULATED_ANSWERS` answers (§2.7.2), canonical ones grouped into outcomes o with frequencies
  p(o); each outcome's next history h ⊕ (q, o) gets its robust MI from `K_FUTURE` samples of the
  first `FUTURE_VARIANTS` prompt variants (the spec's compute savings); VoI(q) = robust MI now −
  Σ p(o) robust MI(h ⊕ (q, o)) − the question's cost. The highest VoI is asked; the others are
  its runners-up.
- `cip_full` (§3.6): every candidate scored by the expected size of the conformal prediction set
  after its imagined answers (`K_FUTURE` plain samples per imagined history, the session's set
  quantile); the smallest is asked.

Either falls back to a task default (a fresh random guess for gn) when the model offers no valid,
unasked question in two attempts.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import numpy as np

from sounding.core import clustering, dpp, homogeneity, stop_rules
from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.assessment import (
    REGIMES,
    Backend,
    SamplingSettings,
    label_answers,
    sample_pairs,
    score_pairs,
)
from sounding.inquiry.llm.tasks import Problem

SIMULATED_ANSWERS = 8
K_FUTURE = 4
FUTURE_VARIANTS: tuple[tasks.Variant, ...] = ("base", "skeptical")
FALLBACK_QUESTIONS = {
    "dc": "Where were you and what were you doing when the murder happened?",
    "sp": "Did the person's death happen because of something they did themselves?",
    "generic": "What else should I know about this problem?",
}


@dataclass(frozen=True)
class ScoredCandidate:
    question: str
    # Robust MI now minus its expectation after the question; VoI is this minus the cost.
    reduction: float
    value: float
    # The imagined outcomes and their probabilities.
    outcomes: dict[str, float]


@dataclass(frozen=True)
class Selection:
    question: str
    rationale: str
    # Every scored candidate, best first (empty for direct prompting and the fallback).
    scored: list[ScoredCandidate]


def lookahead_tokens_per_state(problem: Problem, settings: SamplingSettings, method: str) -> int:
    """The most tokens a method generates per state beyond the candidate list: per candidate
    scored (a VoI slate holds at most `dpp.DEFAULT_SLATE`; C-IP-full scores at most twice the
    `question_candidates` asked for),
    the imagined answers and, per outcome, the measure's samples (VoI: the future variants'
    diversity-steered draws and revisions; C-IP-full: K_FUTURE plain answers), and the measure
    of the state itself. VoI ablated to a random candidate scores nothing."""
    answer_tokens = settings.answer_tokens or problem.task.answer_tokens
    if method == "voi" and settings.choice == "random":
        return 0
    if method == "voi":
        per_history = len(FUTURE_VARIANTS[: settings.variants]) * (settings.max_tries + 1) * K_FUTURE
        return (per_history + dpp.DEFAULT_SLATE * SIMULATED_ANSWERS * (1 + per_history)) * answer_tokens
    if method == "cip_full":
        scored = 2 * settings.question_candidates
        return (K_FUTURE + scored * SIMULATED_ANSWERS * (1 + K_FUTURE)) * answer_tokens
    return 0


async def candidates(backend: Backend, problem: Problem, turns, settings: SamplingSettings, rng) -> list[str]:
    """The valid, unasked questions the model lists (§2.6), at a second temperature if the first
    attempt gives none."""
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.question_tokens or problem.task.question_tokens
    prompt = tasks.question_prompt(problem, turns, settings.question_candidates)
    for attempt_temperature in (temperature, 0.7):
        text = await backend.text(prompt, attempt_temperature, top_p, tokens)
        found = tasks.unasked(tasks.parse_questions(problem, text, rng), turns)
        if found:
            return found
    return []


async def naive_prompting(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, rng: random.Random
) -> Selection:
    """§3.1's floor: the model asked for one question, and the first it writes asked as written
    (no list to choose from; a repeat of an earlier question is asked again)."""
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.question_tokens or problem.task.question_tokens
    text = await backend.text(tasks.question_prompt(problem, turns, 1), temperature, top_p, tokens)
    found = tasks.parse_questions(problem, text, rng)
    if found:
        return Selection(found[0], "naive prompting: the one question the model wrote", [])
    return fallback(problem, turns, rng)


async def direct_prompting(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, rng: random.Random
) -> Selection:
    found = await candidates(backend, problem, turns, settings, rng)
    if found:
        return Selection(found[0], f"direct prompting: first of {len(found)} valid candidates", [])
    return fallback(problem, turns, rng)


async def robust_mi(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, rng: random.Random
) -> float:
    """Robust MI of a (possibly imagined) history: the max over `FUTURE_VARIANTS` (the first
    `settings.variants` of them) of the diversity-steered self-revision MI with `K_FUTURE`
    samples."""
    future = replace(settings, samples=K_FUTURE)
    variants = FUTURE_VARIANTS[: settings.variants]
    sampled = await asyncio.gather(
        *(sample_pairs(backend, problem, turns, v, future, settings.diversity, rng) for v in variants)
    )
    await score_pairs(backend, problem, sampled)
    return max(s.mutual_information for s in sampled)


async def imagined_outcomes(
    backend: Backend, problem: Problem, turns, question: str, settings: SamplingSettings
) -> dict[str, float]:
    """p(o | h, q) from the policy model's imagined answers; unparsed ones are left out (none
    parsed: no outcome)."""
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.answer_tokens or problem.task.answer_tokens
    prompt = tasks.simulator_prompt(problem, turns, question)
    texts = await asyncio.gather(
        *(backend.text(prompt, temperature, top_p, tokens) for _ in range(SIMULATED_ANSWERS))
    )
    answers = [a for a in (tasks.parse_outcome(problem, t) for t in texts) if a != tasks.UNPARSED]
    if not answers:
        return {}
    if problem.task.name in ("gn", "sp"):
        counts = Counter(answers)
    else:  # free text: the first answer of each semantic cluster stands for it
        labels = await backend.cluster(answers, "embedding")
        first = {label: answers[labels.index(label)] for label in labels}
        counts = Counter(first[label] for label in labels)
    return {outcome: count / len(answers) for outcome, count in counts.items()}


async def _lookahead(
    backend: Backend,
    problem: Problem,
    turns,
    settings: SamplingSettings,
    questions: list[str],
    measure: Callable[[list], Awaitable[float]],
    current: float,
    cost: float,
) -> list[ScoredCandidate]:
    """Each question's expected reduction of `measure` (a history's uncertainty) over its
    imagined outcomes, best first; a question with no parsed outcome reduces nothing."""
    scored = []
    for question in questions:
        outcomes = await imagined_outcomes(backend, problem, turns, question, settings)
        after = [await measure([*turns, (question, outcome)]) for outcome in outcomes]
        expected = sum(p * v for p, v in zip(outcomes.values(), after, strict=True)) if outcomes else current
        scored.append(ScoredCandidate(question, current - expected, current - expected - cost, outcomes))
    return sorted(scored, key=lambda c: -c.value)


async def uncertainty(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, quantile: float, rng: random.Random
) -> float:
    """VoI's measure of a (possibly imagined) history: robust MI, or, as §5's ablations swap it,
    1 − p_max of `K_FUTURE` plain answers (`self_consistency`) or the conformal set's size."""
    if settings.measure == "set_size":
        return await set_size(backend, problem, turns, settings, quantile, rng)
    if settings.measure == "self_consistency":
        distribution = await plain_distribution(backend, problem, turns, settings, rng)
        return 1.0 - max(distribution.values())
    return await robust_mi(backend, problem, turns, settings, rng)


async def value_of_information(
    backend: Backend,
    problem: Problem,
    turns,
    settings: SamplingSettings,
    rng: random.Random,
    quantile: float,
    cost: float,
) -> Selection:
    """§2.7: the slate's candidate of largest VoI, measured by `uncertainty` now and after each
    imagined answer (`quantile`: the conformal set's, for the set-size measure). Under §5's
    ablations the slate is the first candidates listed (`slate="top"`) or the question a
    random valid candidate (`choice="random"`, nothing scored)."""
    found = await candidates(backend, problem, turns, settings, rng)
    if not found:
        return fallback(problem, turns, rng)
    if settings.choice == "random":
        return Selection(rng.choice(found), f"random: one of {len(found)} valid candidates (VoI ablated)", [])
    if settings.slate == "top":
        slate = found[: dpp.DEFAULT_SLATE]
    else:
        vectors = np.asarray(await backend.embed(found), dtype=float)
        slate = [found[i] for i in dpp.greedy_slate(vectors, np.ones(len(found)))]

    async def measure(history: list) -> float:
        return await uncertainty(backend, problem, history, settings, quantile, rng)

    current = await measure(list(turns))
    scored = await _lookahead(backend, problem, turns, settings, slate, measure, current, cost)
    return Selection(
        scored[0].question,
        f"voi: {scored[0].value:.3f} nats over the {len(scored) - 1} other candidates of a DPP slate "
        f"from {len(found)} ({len(scored[0].outcomes)} imagined outcomes)",
        scored,
    )


async def set_size(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, quantile: float, rng: random.Random
) -> float:
    """|C(h)|: the conformal prediction set (§3.5) of `K_FUTURE` plain answers at a history. An
    empty set (no answer plausible enough) counts as every cluster sampled, the least certain
    outcome, as the stop rules read it."""
    distribution = await plain_distribution(backend, problem, turns, settings, rng)
    return float(len(stop_rules.prediction_set(distribution, quantile)) or len(distribution))


async def plain_distribution(
    backend: Backend, problem: Problem, turns, settings: SamplingSettings, rng: random.Random
) -> dict:
    """The cluster shares of `K_FUTURE` plain answers at a history."""
    temperature, top_p = REGIMES[settings.regime]
    tokens = settings.answer_tokens or problem.task.answer_tokens
    prompt = tasks.initial_prompt(problem, turns)
    texts = await asyncio.gather(*(backend.text(prompt, temperature, top_p, tokens) for _ in range(K_FUTURE)))
    labels = await label_answers(backend, problem, [tasks.parse_answer(problem, t, rng) for t in texts])
    return stop_rules.cluster_distribution(labels)


async def smallest_expected_set(
    backend: Backend,
    problem: Problem,
    turns,
    settings: SamplingSettings,
    rng: random.Random,
    quantile: float,
    cost: float,
) -> Selection:
    """§3.6 C-IP-full: the candidate whose imagined answers leave the smallest expected conformal
    set; its score is the expected reduction of the set's size from now."""
    found = await candidates(backend, problem, turns, settings, rng)
    if not found:
        return fallback(problem, turns, rng)

    async def measure(history: list) -> float:
        return await set_size(backend, problem, history, settings, quantile, rng)

    current = await measure(list(turns))
    considered = found[: 2 * settings.question_candidates]
    scored = await _lookahead(backend, problem, turns, settings, considered, measure, current, cost)
    return Selection(
        scored[0].question,
        f"cip_full: expected set size {current - scored[0].reduction:.2f} (now {current:.0f}) over "
        f"{len(scored) - 1} other candidates",
        scored,
    )


async def divergence(
    backend: Backend, problem: Problem, imagined: dict[str, float], actual: str
) -> tuple[float, bool]:
    """§4.3 axis 4: the surprise of the real answer under the imagined ones and whether any meant
    the same (canonical answers compared as they are; free text by semantic cluster)."""
    if problem.task.name in ("gn", "sp") or actual == tasks.UNPARSED:
        matched = imagined.get(actual, 0.0)
    else:
        outcomes = list(imagined)
        labels = await backend.cluster([actual, *outcomes], "embedding")
        matched = sum(
            imagined[o] for o, label in zip(outcomes, labels[1:], strict=True) if label == labels[0]
        )
    return homogeneity.simulator_divergence(matched, SIMULATED_ANSWERS)


def fallback(problem: Problem, turns, rng: random.Random) -> Selection:
    rationale = "fallback: the model offered no valid, unasked question"
    asked = {clustering.canonical(q) for q, _ in turns}
    if problem.task.name == "gn":
        while True:
            guess = "".join(rng.sample("0123456789", 4))
            if guess not in asked:
                return Selection(guess, rationale, [])
    if problem.task.name == "dc":
        for suspect in problem.choices:
            question = f"{suspect}: {FALLBACK_QUESTIONS['dc']}"
            if clustering.canonical(question) not in asked:
                return Selection(question, rationale, [])
        return Selection(
            f"{problem.choices[len(turns) % len(problem.choices)]}: Is there anything else you saw?",
            rationale,
            [],
        )
    base = FALLBACK_QUESTIONS[problem.task.name if problem.task.name in FALLBACK_QUESTIONS else "generic"]
    question = base if clustering.canonical(base) not in asked else f"{base[:-1]} (turn {len(turns) + 1})?"
    return Selection(question, rationale, [])
