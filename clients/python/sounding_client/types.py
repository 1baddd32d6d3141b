"""Typed results and arguments of the Sounding API, independent of protobuf (Inquire's are in
inquiry.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import grpc


@dataclass(frozen=True, slots=True)
class ArmRank:
    arm: str
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    document_id: str
    chunk_id: str
    score: float
    text: str = ""
    title: str = ""
    contributions: list[ArmRank] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedArm:
    arm: str
    chosen: bool
    score: float
    exploration: bool
    fusion_weight: float
    reason: str


@dataclass(frozen=True)
class Plan:
    retrieval_id: str
    arms: list[PlannedArm]
    # "requested", or the selector's "cold_start", "forced_all", "explore" or "exploit".
    mode: str = ""
    # The Calibrate("query_adapter") version the query was searched with; 0 for none.
    query_adapter_version: int = 0
    # How the ranking is fused: "min_max" or "rrf" ("" from a server older than the choice).
    fusion: str = ""


@dataclass(frozen=True)
class StrategyResult:
    arm: str
    hits: Sequence[Hit]
    latency_ms: float
    generated_text: str = ""
    # latency_ms plus the decode time of generations served from the sidecar's cache.
    cost_ms: float = 0.0


@dataclass(frozen=True)
class Fused:
    hits: Sequence[Hit]
    arms: list[str]


@dataclass(frozen=True)
class Confidence:
    """A stated value with its provenance: absent, deterministic, derived or measured."""

    kind: str
    value: float | None = None
    reason: str = ""
    formula: str = ""
    inputs: dict[str, float] = field(default_factory=dict)
    calibration_version: str = ""
    sample_size: int = 0


@dataclass(frozen=True)
class QueryExpansion:
    original: str
    expanded: str
    strategy: str
    result_count: int
    found_unique_results: bool


@dataclass(frozen=True)
class SemanticGap:
    kind: str
    description: str
    severity: float
    mitigation: str
    miss_likelihood: Confidence


@dataclass(frozen=True)
class Expansion:
    """One iteration of the expansion loop."""

    iteration: int
    strategy: str
    gap: str
    queries: list[str]
    new_hits: int
    result_count: int
    estimated_recall: Confidence


@dataclass(frozen=True)
class ExpansionOptions:
    """Overrides of the expansion loop's defaults (None keeps the default; max_iterations=0
    turns the loop off)."""

    min_recall: float | None = None
    max_iterations: int | None = None
    budget: int | None = None
    strategies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Uncertainty:
    miss_rate: Confidence
    coverage_estimate: Confidence
    estimated_recall: Confidence
    query_difficulty: Confidence
    corpus_coverage: Confidence
    query_expansions: list[QueryExpansion] = field(default_factory=list)
    semantic_gaps: list[SemanticGap] = field(default_factory=list)


@dataclass(frozen=True)
class ArmFailure:
    """An arm (or "expansion:<strategy>") left out of a result: the canonical code and why."""

    arm: str
    code: str
    message: str


@dataclass(frozen=True)
class Final:
    retrieval_id: str
    hits: Sequence[Hit]
    uncertainty: Uncertainty
    confidence: Confidence
    latency_ms: float
    # Arms that failed or ran out of time; the hits are what the others found.
    failed_arms: Sequence[ArmFailure] = ()


RetrieveEvent = Plan | StrategyResult | Fused | Expansion | Final


@dataclass(frozen=True)
class Collection:
    name: str
    description: str
    embedding_model: str
    embedding_dimension: int
    document_count: int
    chunk_count: int
    fts_indexed_chunk_count: int
    graph_entity_count: int = 0
    graph_edge_count: int = 0
    # Whether the knowledge graph reflects the current chunks (it is rebuilt after ingestion).
    graph_current: bool = False
    # When it was created (UTC); None if the server did not say.
    create_time: datetime | None = None


@dataclass(frozen=True)
class IngestProgress:
    batch_index: int
    batch_documents: int
    batch_chunks: int
    total_documents: int
    total_chunks: int
    elapsed_seconds: float


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


class SoundingError(Exception):
    """A failed call: the gRPC code, message, ErrorInfo reason and BadRequest field violations."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        field_violations: list[FieldViolation] | None = None,
        metadata: dict[str, str] | None = None,
    ):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.reason = reason
        self.field_violations = field_violations or []
        self.metadata = metadata or {}

    @property
    def fields(self) -> list[str]:
        return [v.field for v in self.field_violations] or (
            [self.metadata["field"]] if "field" in self.metadata else []
        )


@dataclass(frozen=True)
class RetrievalOutcome:
    """What came of a Retrieve: the documents the agent used, feedback ("helpful",
    "not_helpful" or ""), whether the agent succeeded, and content it found missing."""

    retrieval_id: str
    used_document_ids: tuple[str, ...] = ()
    feedback: str = ""
    agent_success: bool | None = None
    found_missing_content: bool = False
    missed_document_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class InquiryOutcome:
    """The ground truth of an inquiry session (llm domain): its assessed states become
    calibration data for Calibrate("stop_threshold")."""

    session_id: str
    ground_truth: str


@dataclass(frozen=True)
class ToolUse:
    """A tool an agent used for a request, routed in `toolset`: learned from off the call's path
    (a fallback tool used, or one the router did not rank first, teaches the router). `success`:
    whether the use served the request, if known."""

    toolset: str
    request: str
    used_tool: str
    offered_tools: tuple[str, ...] = ()
    success: bool | None = None


@dataclass(frozen=True)
class Tool:
    """A tool of a toolset. `parameters_json`: its parameters' JSON schema (an object), or "".
    `version` and `exemplar_count` are the server's (ignored when putting tools)."""

    name: str
    description: str
    parameters_json: str = ""
    version: int = 0
    exemplar_count: int = 0


@dataclass(frozen=True)
class ToolRoute:
    """A toolset's tools ranked for a request: (name, cosine score) best first, the top-1's
    margin over the second; `ok` is false when there was nothing to rank."""

    candidates: tuple[tuple[str, float], ...]
    top1: str
    margin: float
    ok: bool
    version: int


@dataclass(frozen=True)
class ToolAccuracyWindow:
    first_sequence: int
    last_sequence: int
    labelled: int
    accuracy: float


@dataclass(frozen=True)
class ToolMetrics:
    version: int
    tool_count: int
    events: int
    processed: int
    flagged_fallback: int
    flagged_disagreement: int
    labels_free: int
    labels_teacher: int
    labels_trusted: int
    teacher_dropped: int
    accuracy: float
    accuracy_windows: tuple[ToolAccuracyWindow, ...]
    exemplars: dict[str, int]
    dropped_since_start: int
    refreshes_since_start: int
    mean_refresh_seconds: float
    # Processed events flagged as mis-routes, as a share of those processed.
    flagged_share: float = 0.0
    # Whether the free tier's and the teacher's exemplars route now (validated on held-back
    # trusted uses; otherwise the descriptions and the trusted uses alone route).
    untrusted_exemplars_route: bool = False


@dataclass(frozen=True)
class CalibrationState:
    """A state passed inline to Calibrate("stop_threshold"): the rule's score (set rules: the
    nonconformity), whether answering there was wrong, and a stated confidence if any."""

    score: float
    error: bool
    stated_confidence: float | None = None


@dataclass(frozen=True)
class RejectedObservation:
    # 0-based position of the observation in the stream.
    index: int
    # Canonical gRPC code name, e.g. "NOT_FOUND".
    code: str
    message: str


@dataclass(frozen=True)
class ObserveResult:
    recorded: int
    rejected: list[RejectedObservation]


@dataclass(frozen=True)
class CalibrationProgress:
    stage: str
    fraction: float


@dataclass(frozen=True)
class CalibrationCurve:
    """One line of a calibration's diagram: the points (x[i], y[i]) in drawing order; the curves
    of one report share their axes."""

    name: str
    x_label: str
    y_label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class CalibrationReport:
    # "bandit", "miss_rate", "stop_threshold", "confidence" or "query_adapter".
    target: str
    version: str
    sample_size: int
    deployed: bool
    summary: str
    diagnostics: dict[str, float]
    # The fit's diagram as points (reliability or risk-coverage curves); empty for BANDIT.
    curves: tuple[CalibrationCurve, ...] = ()


CalibrateEvent = CalibrationProgress | CalibrationReport


@dataclass(frozen=True)
class ArmMetrics:
    arm: str
    selection_rate: float
    contribution_rate: float
    mean_latency_ms: float
    mean_reward: float
    exploration_share: float
    runs: int
    observed_runs: int
    # Latency with cached generations counted at their decode time: what the selector charges.
    mean_cost_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class CorpusInquiryMetrics:
    """What a tenant's corpus inquiries learned: queries run, sessions whose verdict was
    observed, prediction errors (information gain in bits, reach, cost in ms) and each candidate
    strategy's {strategy: (queries, mean information gain)}."""

    queries: int
    observed_sessions: int
    information_gain_mae: float
    information_gain_mae_last_10: float
    information_gain_mae_last_100: float
    reach_mae: float
    reach_accuracy: float
    cost_mae_ms: float
    strategies: dict[str, tuple[int, float]]


@dataclass(frozen=True)
class StrategyMetrics:
    arms: list[ArmMetrics]
    selection_entropy_bits: float
    cumulative_regret: float
    planned_retrievals: int
    observations: int
    pruned_arms: list[str]
    selector_version: int
    corpus_inquiry: CorpusInquiryMetrics | None = None
