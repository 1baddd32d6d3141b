"""Contracts of the inquiry package: session requests, domains and streamed events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from sounding.core.claim_evidence import SensorModel
from sounding.core.provenance import Provenance
from sounding.core.reach import ReachModel
from sounding.store.corpus_inquiry import ExecutedQuery

# A policy name that stands for the domain's default (`registry.DomainSpec.session_policy`).
DOMAIN_DEFAULT = "default"

# The default stop rule's diminishing-returns threshold (active-learning spec §3.4), in bits.
MIN_INFORMATION_GAIN = 0.01

STOPPING_REASONS = (
    "confidence_reached",
    "budget_exhausted",
    "max_queries_reached",
    "diminishing_returns",
    "no_viable_queries",
    "target_out_of_reach",
)


@dataclass(frozen=True)
class Policy:
    question_selection: str = DOMAIN_DEFAULT
    stop_rule: str = DOMAIN_DEFAULT
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
    in use (calibration version 0: the rule's default), whether the rule would answer, and with
    what when that is not the state's answer (`hypothesis_entropy`: its most probable member)."""

    rule: str
    score: float
    threshold: float
    answers: bool
    calibration_version: int = 0
    answer: str = ""


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
    homogeneity: dict[str, float | bool] | None = None
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


@dataclass(frozen=True)
class EvidenceHit:
    document_id: str
    chunk_id: str
    score: float
    # Whether the session had not read this chunk before.
    new: bool


@dataclass(frozen=True)
class EvidenceSentence:
    document_id: str
    text: str
    entailment: float
    contradiction: float


@dataclass(frozen=True, kw_only=True)
class EvidenceEvent:
    """What a query the server ran itself (the corpus domain) found, and how it was judged."""

    session_id: str
    turn: int
    question_id: str
    query: str
    strategy: str
    hits: list[EvidenceHit]
    # The strongest sentences for or against the claim among those newly read.
    sentences: list[EvidenceSentence]
    sentences_read: int
    # "entailing", "contradicting" or "nothing" ("" when nothing new about the claim was reached),
    # decided by the strongest sentences' probabilities.
    outcome: str
    strongest_entailment: float
    strongest_contradiction: float
    predicted_reach: float
    reached: bool
    predicted_gain: float
    actual_gain: float
    latency_ms: float
    # The chance, read before the query ran, of reaching the target confidence with the queries
    # to come (`core.claim_evidence.target_chance`).
    target_chance: float


InquiryEvent = BeliefEvent | AskEvent | EvidenceEvent | AnswerEvent


@dataclass(frozen=True)
class BeliefView:
    entropy_bits: float
    max_entropy_bits: float
    top_hypotheses: list[ScoredHypothesis]
    unknown_mass: float
    map_probability: float
    homogeneity: dict[str, float | bool] | None = None
    homogeneity_bucket: str = ""
    stop_signals: list[StopSignal] = field(default_factory=list)


@dataclass(frozen=True)
class Choice:
    """The question a domain would ask next, with its score, rationale and runners-up."""

    chosen: ScoredQuestion
    rationale: str
    runners_up: list[ScoredQuestion]


@dataclass(frozen=True)
class SearchHit:
    document_id: str
    chunk_id: str
    score: float
    title: str
    text: str


@dataclass(frozen=True)
class OutcomeModels:
    """What a corpus session predicts with (the tenant's, for one collection): the outcome model
    of reach, the sensor table of all queries and each generation strategy's own, and the costs
    measured so far."""

    reach: ReachModel
    sensor: SensorModel
    search_ms: float
    nli_ms_per_sentence: float
    sentences_per_query: float
    strategy_sensors: Mapping[str, SensorModel] = field(default_factory=dict)

    def sensor_for(self, strategy: str) -> SensorModel:
        """The table a query of `strategy` is predicted with: its strategy's, once a session
        with such a query was observed, else the table of all queries."""
        return self.strategy_sensors.get(strategy, self.sensor)


class CorpusBackend(Protocol):
    """What the corpus domain thinks and searches with, for one session of a tenant."""

    async def check(self, collection: str, arms: Sequence[str]) -> None:
        """NotFound if the tenant has no such collection, InvalidArgument for an unknown arm
        (naming the domain parameter)."""
        ...

    async def search(self, collection: str, query: str, top_k: int, arms: Sequence[str]) -> list[SearchHit]:
        """The retrieval pipeline's hits (the arms' rankings fused), with their text."""
        ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def entail(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """(entailment, neutral, contradiction) per (premise, hypothesis)."""
        ...

    async def generate(self, messages: Sequence[dict[str, str]], max_tokens: int) -> str:
        """The sidecar generator's greedy answer."""
        ...

    async def related(self, collection: str, entities: Sequence[str], limit: int) -> dict[str, list[str]]:
        """Each entity's strongest neighbours in the collection's graph (none before it is built)."""
        ...

    async def chunk_vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The unit embeddings of those of the chunks still present, by chunk id."""
        ...

    async def outcome_models(self, collection: str) -> OutcomeModels: ...

    async def record_query(self, query: ExecutedQuery) -> None:
        """Learn from an executed query (the outcome model) and log it."""
        ...


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


class SelfAnsweringDomain(Domain, Protocol):
    """A domain that runs its own questions (`registry.DomainSpec.answers_itself`)."""

    async def investigate(self, session_id: str, turn: int, question_id: str, backend: Any) -> EvidenceEvent:
        """Run the pending question, update the belief, and say what it found."""
        ...
