"""Typed events and arguments of the Inquire call, independent of protobuf."""

from __future__ import annotations

from dataclasses import dataclass, field

from sounding_client.types import Confidence


@dataclass(frozen=True)
class ScoredHypothesis:
    id: str
    description: str
    probability: float


@dataclass(frozen=True)
class Homogeneity:
    p_max: float
    mean_pairwise_similarity: float
    effective_rank: float
    exact_repetition_rate: float
    trigram_jaccard: float
    # 1 - agreement of the prompt variants' modal answers (None: the variants were not sampled).
    prompt_sensitivity: float | None = None
    # The question just answered, after voi or cip_full: -ln of the share of imagined answers
    # that matched the real one, and whether any did (None: no imagined answers).
    simulator_surprise: float | None = None
    simulator_overlap: bool | None = None


@dataclass(frozen=True)
class StopSignal:
    """A stop rule's reading of the state (llm domain): score (lower is readier), threshold in
    use, whether it answers, the calibration version (0: the rule's default), and what it answers
    with when that is not the belief's most probable hypothesis (`hypothesis_entropy`)."""

    rule: str
    score: float
    threshold: float
    answers: bool
    calibration_version: int
    answer: str = ""


@dataclass(frozen=True)
class Belief:
    session_id: str
    turn: int
    entropy_bits: float
    normalized_uncertainty: float
    top_hypotheses: list[ScoredHypothesis]
    unknown_mass: float
    # What the session would answer if it stopped now.
    current_answer: str = ""
    # llm domain only.
    homogeneity: Homogeneity | None = None
    homogeneity_bucket: str = ""
    stop_signals: list[StopSignal] = field(default_factory=list)


@dataclass(frozen=True)
class ScoredQuestion:
    question_id: str
    question: str
    expected_information_gain: float
    cost_adjusted_score: float


@dataclass(frozen=True)
class Ask:
    session_id: str
    turn: int
    question_id: str
    question: str
    expected_information_gain: float
    cost: float
    cost_adjusted_score: float
    exploration_bonus: float
    rationale: str
    runners_up: list[ScoredQuestion]


@dataclass(frozen=True)
class InquiryAnswer:
    session_id: str
    answer: str
    confidence: Confidence
    # confidence_reached, budget_exhausted, max_queries_reached, diminishing_returns, no_viable_queries,
    # target_out_of_reach (corpus eig: the target confidence cannot be reached in the queries left)
    stopping_reason: str
    forced: bool
    entropy_bits: list[float]
    predicted_gain: list[float]
    actual_gain: list[float]


@dataclass(frozen=True)
class EvidenceHit:
    document_id: str
    chunk_id: str
    score: float
    # The session had not read this chunk before.
    new: bool


@dataclass(frozen=True)
class EvidenceSentence:
    document_id: str
    text: str
    entailment: float
    contradiction: float


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The corpus domain: a query the server ran for the session, what it found and how it was
    judged (the Belief after it follows)."""

    session_id: str
    turn: int
    question_id: str
    query: str
    strategy: str
    hits: list[EvidenceHit]
    sentences: list[EvidenceSentence]
    sentences_read: int
    # "entailing", "contradicting" or "nothing" ("" when nothing new about the claim was reached).
    outcome: str
    strongest_entailment: float
    strongest_contradiction: float
    reached: bool
    predicted_reach: float
    expected_information_gain: float
    actual_information_gain: float
    latency_ms: float
    # The chance, read before the query ran, that the candidate queries then available, run in
    # turn by reach, bring the belief to the target confidence within the session's remaining
    # queries (looking at most 10 ahead).
    target_chance: float


InquiryEvent = Belief | Ask | Evidence | InquiryAnswer


@dataclass(frozen=True)
class Hypothesis:
    id: str
    description: str = ""
    prior: float = 0.0


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    outcomes: dict[str, str]
    cost: float = 1.0


@dataclass(frozen=True)
class InquiryPolicy:
    # "": the domain's default (eig; direct_prompting in the llm domain).
    question_selection: str = ""
    stop_rule: str = "default"
    cost_sensitivity: float = 1.0
    exploration_weight: float = 0.0
    max_turns: int = 25
    target_confidence: float = 0.95
    cost_budget: float = 0.0
    seed: int | None = None
    # Bits; None means the server's default (0.01), 0 never stops for diminishing returns.
    min_information_gain: float | None = None
