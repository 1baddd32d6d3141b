"""Contracts of the inquiry package: session requests, domains and streamed events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sounding.core.provenance import Provenance

# The default stop rule's diminishing-returns threshold (active-learning spec §3.4), in bits.
MIN_INFORMATION_GAIN = 0.01

STOPPING_REASONS = (
    "confidence_reached",
    "budget_exhausted",
    "max_queries_reached",
    "diminishing_returns",
    "no_viable_queries",
)


@dataclass(frozen=True)
class Policy:
    question_selection: str = "eig"
    stop_rule: str = "default"
    cost_sensitivity: float = 1.0
    exploration_weight: float = 0.0
    max_turns: int = 25
    target_confidence: float = 0.95
    cost_budget: float = float("inf")
    seed: int | None = None
    # The default stop rule's diminishing-returns threshold in bits; 0 turns that rule off.
    min_information_gain: float = MIN_INFORMATION_GAIN


@dataclass(frozen=True)
class HypothesisIn:
    id: str
    description: str = ""
    prior: float = 0.0


@dataclass(frozen=True)
class QuestionIn:
    id: str
    text: str
    cost: float
    outcomes: Mapping[str, str]


@dataclass(frozen=True)
class Start:
    domain: str
    policy: Policy
    domain_parameters: Mapping[str, str] = field(default_factory=dict)
    hypotheses: tuple[HypothesisIn, ...] = ()
    questions: tuple[QuestionIn, ...] = ()
    # Free-text problem description (the llm domain).
    context: str = ""


@dataclass(frozen=True)
class ScoredHypothesis:
    id: str
    description: str
    probability: float


@dataclass(frozen=True)
class StopSignal:
    """A stop rule's reading of the state: its score (lower is readier to answer), the threshold
    in use (calibration version 0: the rule's default) and whether the rule would answer."""

    rule: str
    score: float
    threshold: float
    answers: bool
    calibration_version: int = 0


@dataclass(frozen=True, kw_only=True)
class BeliefEvent:
    session_id: str
    turn: int
    entropy_bits: float
    normalized_uncertainty: float
    top_hypotheses: list[ScoredHypothesis]
    unknown_mass: float
    # What the session would answer if it stopped now.
    current_answer: str = ""
    # The llm domain: homogeneity diagnostics of the sampled answers and the stop signals.
    homogeneity: dict[str, float] | None = None
    homogeneity_bucket: str = ""
    stop_signals: list[StopSignal] = field(default_factory=list)


@dataclass(frozen=True)
class ScoredQuestion:
    question_id: str
    question: str
    expected_information_gain: float
    cost_adjusted_score: float
    cost: float = 1.0
    exploration_bonus: float = 0.0


@dataclass(frozen=True)
class AskEvent:
    session_id: str
    turn: int
    chosen: ScoredQuestion
    rationale: str
    runners_up: list[ScoredQuestion]


@dataclass(frozen=True)
class AnswerEvent:
    session_id: str
    answer: str
    confidence: Provenance
    stopping_reason: str
    forced: bool
    entropy_path: list[float]
    predicted_gains: list[float]
    actual_gains: list[float]


InquiryEvent = BeliefEvent | AskEvent | AnswerEvent


@dataclass(frozen=True)
class BeliefView:
    entropy_bits: float
    max_entropy_bits: float
    top_hypotheses: list[ScoredHypothesis]
    unknown_mass: float
    map_probability: float
    homogeneity: dict[str, float] | None = None
    homogeneity_bucket: str = ""
    stop_signals: list[StopSignal] = field(default_factory=list)


@dataclass(frozen=True)
class Choice:
    """The question a domain would ask next, with its score, rationale and runners-up."""

    chosen: ScoredQuestion
    rationale: str
    runners_up: list[ScoredQuestion]


class Domain(Protocol):
    """One kind of inquiry. Its setup and state are plain JSON, so a session can be stored and
    resumed; `from_state(setup, state)` rebuilds it."""

    name: str

    async def think(self, policy: Policy, turn: int, backend: Any) -> None:
        """Do the state's expensive work (model calls) before belief, finished and choose are
        read (what it finds is part of `state()`); a no-op for domains that compute everything
        on demand."""
        ...

    def belief(self) -> BeliefView: ...

    def choose(self, policy: Policy, turn: int) -> Choice | None:
        """The next question, or None when no question can still tell hypotheses apart."""
        ...

    def observe(self, question_id: str, question: str, answer: str) -> None:
        """Update the belief with the answer to the question asked (InvalidArgument naming
        `observation.answer` if the answer is malformed)."""
        ...

    def finished(self) -> str:
        """A stopping reason the domain itself decides (e.g. the secret was guessed), or ''."""
        ...

    def answer(self) -> tuple[str, float]:
        """The best answer now and its probability."""
        ...

    def setup(self) -> dict[str, Any]:
        """What stays fixed for the whole session (stored once, when it starts)."""
        ...

    def state(self) -> dict[str, Any]:
        """What the observations change (stored after every step)."""
        ...
