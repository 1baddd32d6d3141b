"""Every number Sounding states carries where it comes from (retrieval-uncertainty spec)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Provenance:
    """A stated value and where it comes from: absent, deterministic, derived or measured."""

    kind: str
    value: float | None = None
    reason: str = ""
    formula: str = ""
    inputs: Mapping[str, float] = field(default_factory=dict)
    calibration_version: str = ""
    sample_size: int = 0

    @staticmethod
    def absent(reason: str) -> Provenance:
        return Provenance("absent", reason=reason)

    @staticmethod
    def deterministic(value: float, reason: str) -> Provenance:
        return Provenance("deterministic", value=value, reason=reason)
