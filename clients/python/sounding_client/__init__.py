"""Python client for Sounding (sync and asyncio)."""

from sounding_client.client import AsyncClient, Client
from sounding_client.types import (
    ArmRank,
    Collection,
    Confidence,
    FieldViolation,
    Final,
    Fused,
    Hit,
    IngestProgress,
    Plan,
    PlannedArm,
    RetrieveEvent,
    SoundingError,
    StrategyResult,
    Uncertainty,
)

__all__ = [
    "ArmRank",
    "AsyncClient",
    "Client",
    "Collection",
    "Confidence",
    "FieldViolation",
    "Final",
    "Fused",
    "Hit",
    "IngestProgress",
    "Plan",
    "PlannedArm",
    "RetrieveEvent",
    "SoundingError",
    "StrategyResult",
    "Uncertainty",
]
