"""Contracts of the retrieval package: arm requests and results, executors, streamed events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sounding.core.fusion import Contribution
from sounding.core.provenance import Provenance
from sounding.store.reader import ChunkHit


@dataclass(frozen=True)
class ArmRequest:
    collection: str
    query: str
    limit: int
    # Seconds left before the caller's deadline, if it has one.
    timeout_s: float | None = None
    # The query's embedding, when the orchestrator already computed it.
    query_vector: np.ndarray | None = None


@dataclass(frozen=True)
class ArmResult:
    arm: str
    hits: list[ChunkHit]
    latency_ms: float
    generated_text: str = ""


class Executor(Protocol):
    """Runs one arm. Implementations: in-process and on Ray strategy workers.

    Cancelling the awaiting task cancels the arm's work, wherever it runs.
    """

    async def run(self, arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> ArmResult: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class RetrieveQuery:
    collection: str
    query: str
    top_k: int
    arms: tuple[str, ...] = ()
    fusion_k: float = 0.0
    omit_text: bool = False
    synthesis_confidence: float | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class PlannedArm:
    arm: str
    chosen: bool
    reason: str
    fusion_weight: float = 1.0
    score: float = 0.0
    exploration: bool = False


@dataclass(frozen=True)
class PlanEvent:
    retrieval_id: str
    arms: list[PlannedArm]


@dataclass(frozen=True)
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
class Uncertainty:
    miss_rate: Provenance
    coverage_estimate: Provenance
    estimated_recall: Provenance
    query_difficulty: Provenance
    corpus_coverage: Provenance
    query_expansions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FinalEvent:
    retrieval_id: str
    hits: list[FusedHit]
    uncertainty: Uncertainty
    confidence: Provenance
    latency_ms: float


RetrieveEvent = PlanEvent | StrategyResultEvent | FusedEvent | FinalEvent
