"""Contracts of the retrieval package: arm requests and results, executors, what Retrieve needs of
its tenant's learned state, streamed events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.calibration import ConfidenceCalibration, MissRateCalibration
from sounding.core.expansion_gate import ExpansionGate
from sounding.core.fusion import Contribution
from sounding.core.provenance import Provenance
from sounding.runtime import errors
from sounding.store.learning import RetrievalRecord
from sounding.store.reader import ChunkHit
from sounding.store.tenancy import ResourceRef


@dataclass(frozen=True)
class ArmRequest:
    collection: ResourceRef
    query: str
    limit: int
    # Seconds left before the caller's deadline, if it has one.
    timeout_s: float | None = None
    # The query's embedding, when the orchestrator already computed it.
    query_vector: np.ndarray | None = None
    # The collection's current version, when the orchestrator read it: a worker whose snapshot
    # has it searches without asking LanceDB for the version first.
    collection_version: int | None = None
    # The Retrieve this arm serves: its generations queue as one flow in the sidecar.
    flow: str = ""


@dataclass(frozen=True)
class ArmResult:
    arm: str
    hits: list[ChunkHit]
    latency_ms: float
    generated_text: str = ""
    # Decode time of the arm's generations that the sidecar served from its cache.
    cached_decode_ms: float = 0.0

    @property
    def cost_ms(self) -> float:
        """What the arm costs on a query it has not seen (the selector's latency penalty)."""
        return self.latency_ms + self.cached_decode_ms


@dataclass(frozen=True)
class ExpansionRequest:
    collection: ResourceRef
    query: str
    strategy: str
    # At most this many expanded queries.
    queries: int
    # Hits per expanded query.
    limit: int
    timeout_s: float | None = None
    query_vector: np.ndarray | None = None
    flow: str = ""


@dataclass(frozen=True)
class ExpansionResult:
    strategy: str
    # The expanded queries and, in the same order, each one's hits (best first).
    queries: list[str]
    hits: list[list[ChunkHit]]
    latency_ms: float


class Executor(Protocol):
    """Runs one arm or one expansion step. Implementations: in-process and on Ray strategy workers.

    Cancelling the awaiting task cancels the arm's work, wherever it runs.
    """

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult: ...

    async def expand(
        self, request: ExpansionRequest, trace_carrier: Mapping[str, str]
    ) -> ExpansionResult: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class ExpansionOptions:
    """A request's overrides of the expansion loop's defaults (None: the default)."""

    min_recall: float | None = None
    max_iterations: int | None = None
    budget: int | None = None
    strategies: tuple[str, ...] = ()

    @property
    def requested(self) -> bool:
        """Whether the request sets any option: the caller asks for the loop on its own terms."""
        return any(
            value is not None for value in (self.min_recall, self.max_iterations, self.budget)
        ) or bool(self.strategies)


@dataclass(frozen=True)
class RetrieveQuery:
    # The tenant's collection searched (README, "Security").
    collection: ResourceRef
    query: str
    top_k: int
    arms: tuple[str, ...] = ()
    # `core.fusion.FUSION_METHODS`, or "" for the deployment's (RRF when `fusion_k` is set).
    fusion: str = ""
    fusion_k: float = 0.0
    omit_text: bool = False
    synthesis_confidence: float | None = None
    timeout_s: float | None = None
    expansion: ExpansionOptions = ExpansionOptions()
    # Search with the collection's deployed query adapter, if any (`RetrieveRequest`).
    learned_ranking: bool = True


@dataclass(frozen=True)
class PlannedArm:
    arm: str
    chosen: bool
    reason: str
    fusion_weight: float = 1.0
    score: float = 0.0
    exploration: bool = False


@dataclass(frozen=True)
class Plan:
    query_index: int
    # cold_start, forced_all, explore, exploit or requested.
    mode: str
    arms: list[PlannedArm]
    bandit_confidence: float

    @property
    def chosen(self) -> list[str]:
        return [a.arm for a in self.arms if a.chosen]

    @property
    def weights(self) -> dict[str, float]:
        return {a.arm: a.fusion_weight for a in self.arms if a.chosen}

    def reweighted(self, factors: Mapping[str, float]) -> Plan:
        """The plan with its chosen arms' fusion weights multiplied by `factors` (1 if not named)."""
        arms = [
            replace(a, fusion_weight=a.fusion_weight * factors.get(a.arm, 1.0)) if a.chosen else a
            for a in self.arms
        ]
        return replace(self, arms=arms)


class MissRates(Protocol):
    def miss_rate(self, embedding: ArrayLike) -> float | None:
        """The smoothed miss share of the observed queries nearest `embedding` (None: none yet)."""
        ...


# (document id of each row, the rows' embeddings): every chunk of the given documents and a sample
# of at most the given size of the others (`Store.vector_pool`).
PoolReader = Callable[[Collection[str], int], Awaitable[tuple[np.ndarray, np.ndarray]]]


class RetrievalLearner(Protocol):
    """What Retrieve needs of its tenant's learned state (learning.service.LearningService): the
    query's features, a plan of arms, the miss history and calibration behind the stated miss
    rate, the calibration of the stated confidence, the collection's query adapter, a record of
    what ran, kept for Observe, and the gate of the expansion loop's steps."""

    @property
    def miss_history(self) -> MissRates: ...

    @property
    def miss_rate_calibration(self) -> MissRateCalibration | None: ...

    @property
    def confidence_calibration(self) -> ConfidenceCalibration | None: ...

    def features(self, query: str, embedding: ArrayLike, graph_entities: int = 0) -> np.ndarray: ...

    def plan(self, context: np.ndarray, requested: Sequence[str]) -> Plan: ...

    def remember(self, record: RetrievalRecord) -> None: ...

    @property
    def expansion_gate(self) -> ExpansionGate: ...

    @property
    def query_adapters(self) -> QueryAdapters: ...


class QueryAdapters(Protocol):
    def of(self, collection: ResourceRef, create_time_us: int) -> QueryAdapter | None:
        """The adapter deployed for this incarnation of the collection, if any."""
        ...


class QueryAdapter(Protocol):
    """A learned map from a query's embedding to the vector the arms search with
    (learning.query_adapter.QueryAdapter)."""

    @property
    def version(self) -> int: ...

    @property
    def fusion_weights(self) -> Mapping[str, float]:
        """Factors on the fusion weights of the arms it names."""
        ...

    @property
    def fusion(self) -> str:
        """The fusion method validated with it (`core.fusion.FUSION_METHODS`)."""
        ...

    def search_vector(self, embedding: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class PlanEvent:
    retrieval_id: str
    arms: list[PlannedArm]
    # How the arms were chosen (`Plan.mode`).
    mode: str
    # The query adapter version the query's embedding was searched with (0: none).
    query_adapter_version: int = 0
    # The fusion method of the result's ranking (`core.fusion.FUSION_METHODS`).
    fusion: str = ""


@dataclass(frozen=True, slots=True)
class FusedHit:
    document_id: str
    chunk_id: str
    score: float
    contributions: list[Contribution]
    title: str = ""
    text: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StrategyResultEvent:
    result: ArmResult


@dataclass(frozen=True)
class FusedEvent:
    hits: list[FusedHit]
    arms: list[str]


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
    miss_likelihood: Provenance


@dataclass(frozen=True)
class ExpansionEvent:
    iteration: int
    strategy: str
    gap: str
    queries: list[str]
    new_hits: int
    result_count: int
    estimated_recall: Provenance


@dataclass(frozen=True)
class Uncertainty:
    miss_rate: Provenance
    coverage_estimate: Provenance
    estimated_recall: Provenance
    query_difficulty: Provenance
    corpus_coverage: Provenance
    query_expansions: list[QueryExpansion] = field(default_factory=list)
    semantic_gaps: list[SemanticGap] = field(default_factory=list)


@dataclass(frozen=True)
class ArmFailure:
    """An arm (or "expansion:<strategy>") that failed: the canonical code name and why."""

    arm: str
    code: str
    message: str

    @classmethod
    def of(cls, arm: str, error: Exception, timeout_s: float | None) -> ArmFailure:
        """The failure an exception means (TimeoutError: `timeout_s` passed); an unexpected
        exception is INTERNAL, its traceback in the log under an incident id."""
        if isinstance(error, TimeoutError):
            within = f"within {timeout_s:g} s" if timeout_s is not None else "in time"
            return cls(arm, "DEADLINE_EXCEEDED", f"no result {within}")
        if not isinstance(error, errors.SoundingError):
            error = errors.internal(arm, error)
        return cls(arm, error.code, error.message)

    def error(self) -> errors.SoundingError:
        """The failure as the domain error of its code."""
        return errors.of_code(self.code, f"{self.arm}: {self.message}")


@dataclass(frozen=True)
class FinalEvent:
    retrieval_id: str
    hits: list[FusedHit]
    uncertainty: Uncertainty
    confidence: Provenance
    latency_ms: float
    failed_arms: list[ArmFailure] = field(default_factory=list)


RetrieveEvent = PlanEvent | StrategyResultEvent | FusedEvent | ExpansionEvent | FinalEvent
