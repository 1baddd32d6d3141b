"""What the learning package takes and gives: outcomes reported through Observe, rejections,
calibration progress and reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

CalibrationTarget = Literal["bandit", "miss_rate", "confidence", "stop_threshold", "query_adapter"]
CALIBRATION_TARGETS: tuple[CalibrationTarget, ...] = get_args(CalibrationTarget)


@dataclass(frozen=True)
class RetrievalOutcome:
    retrieval_id: str
    used_document_ids: tuple[str, ...] = ()
    feedback: str = ""
    agent_success: bool | None = None
    found_missing_content: bool = False
    missed_document_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rejected:
    index: int
    code: str
    message: str


@dataclass(frozen=True, kw_only=True)
class Curve:
    """One line of a calibration's diagram: the points (x[i], y[i]) in drawing order; the curves
    of one report share their axes."""

    name: str
    x_label: str
    y_label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class CalibrationProgress:
    stage: str
    fraction: float


@dataclass(frozen=True)
class CalibrationReport:
    target: CalibrationTarget
    # The version in use afterwards (0: never calibrated).
    version: int
    sample_size: int
    deployed: bool
    summary: str
    diagnostics: dict[str, float]
    curves: tuple[Curve, ...] = ()


@dataclass(frozen=True)
class ObserveResult:
    recorded: int
    rejected: list[Rejected]
