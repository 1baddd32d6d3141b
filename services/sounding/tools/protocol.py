"""What the tool service is asked and answers (README, "Tool selection"), what it is configured
with, and the seams it is built from: an embedder and a teacher."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sounding.settings.config import ToolSettings
from sounding.settings.limits import ToolLimits

# A registered tool's name is at most this long (tools.proto, Tool.name).
MAX_TOOL_NAME_CHARS = 128


@dataclass(frozen=True)
class ToolConfig:
    """A tenant's tool service, registry and learner: how routing is learned, and the
    deployment's limits on the tool calls."""

    settings: ToolSettings = field(default_factory=ToolSettings)
    limits: ToolLimits = field(default_factory=ToolLimits)


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    name: str
    description: str
    parameters_json: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolInfo:
    name: str
    description: str
    parameters_json: str
    version: int
    exemplar_count: int


@dataclass(frozen=True, kw_only=True)
class ToolUse:
    """A tool an agent used for a request (Observe's ToolUseEvent)."""

    toolset: str
    request: str
    used_tool: str
    offered_tools: tuple[str, ...] = ()
    success: bool | None = None


@dataclass(frozen=True)
class RejectedUse:
    """A tool-use event not recorded, by its position in the Observe stream."""

    index: int
    code: str
    message: str


@dataclass(frozen=True)
class AccuracyWindow:
    first_sequence: int
    last_sequence: int
    labelled: int
    accuracy: float


@dataclass(frozen=True, kw_only=True)
class ToolMetrics:
    version: int
    tool_count: int
    events: int
    processed: int
    # Processed events flagged as mis-routes (either reason), as a share of those processed.
    flagged_share: float
    flagged_fallback: int
    flagged_disagreement: int
    labels_free: int
    labels_teacher: int
    labels_trusted: int
    teacher_dropped: int
    accuracy: float
    accuracy_windows: tuple[AccuracyWindow, ...]
    exemplars: Mapping[str, int] = field(default_factory=dict)
    dropped_since_start: int = 0
    refreshes_since_start: int = 0
    mean_refresh_seconds: float = 0.0
    untrusted_exemplars_route: bool = False


class Embedder(Protocol):
    async def embed(self, texts: Sequence[str], timeout: float | None = None) -> np.ndarray:
        """Unit-length embeddings, one row per text."""
        ...


class Teacher(Protocol):
    async def label(self, request: str, candidates: Sequence[tuple[str, str]]) -> str | None:
        """The name of the candidate ((name, description) pairs) that serves `request`, or None
        when the teacher declines."""
        ...
