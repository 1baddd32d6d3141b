"""Running latency estimates: an exponentially weighted mean per key (an arm, an expansion
strategy), so a cost measured long ago fades as the deployment's load or hardware changes."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class LatencyEstimates:
    """The weighted mean of each key's measured latencies: the newest weighs `smoothing`."""

    smoothing: float = 0.2
    _means: dict[Hashable, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 < self.smoothing <= 1.0:
            raise ValueError("smoothing must be in (0, 1]")

    def measured(self, key: Hashable, latency_ms: float) -> None:
        previous = self._means.get(key)
        self._means[key] = (
            latency_ms if previous is None else previous + self.smoothing * (latency_ms - previous)
        )

    def get(self, key: Hashable) -> float | None:
        """The estimate, or None before the first measurement."""
        return self._means.get(key)
