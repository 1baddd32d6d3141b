"""Calibration maps and how well stated rates match observed ones: the isotonic map behind
Calibrate(MISS_RATE) and the verbalized-confidence stop rule, reliability bins and the expected
calibration error (retrieval-uncertainty spec, "Integration with Track F: Calibration")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class IsotonicMap:
    """A monotone map from stated to observed rates, fitted by isotonic regression
    (scikit-learn's, ties pooled with their counts as weights): piecewise linear between the fitted
    points, flat beyond them."""

    stated: tuple[float, ...]
    observed: tuple[float, ...]

    @classmethod
    def fit(cls, stated: ArrayLike, observed: ArrayLike, increasing: bool = True) -> IsotonicMap:
        from sklearn.isotonic import IsotonicRegression

        x = np.asarray(stated, dtype=float)
        y = np.asarray(observed, dtype=float)
        if len(x) == 0 or len(x) != len(y):
            raise ValueError("fit needs equally many stated and observed values, at least one")
        fitted = IsotonicRegression(increasing=increasing, out_of_bounds="clip").fit(x, y)
        return cls(
            tuple(float(v) for v in fitted.X_thresholds_), tuple(float(v) for v in fitted.y_thresholds_)
        )

    @overload
    def __call__(self, value: float) -> float: ...
    @overload
    def __call__(self, value: np.ndarray) -> np.ndarray: ...
    def __call__(self, value: float | np.ndarray) -> float | np.ndarray:
        mapped = np.interp(value, self.stated, self.observed)
        return float(mapped) if np.ndim(mapped) == 0 else mapped


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    count: int
    mean_stated: float
    mean_observed: float


def reliability(stated: ArrayLike, observed: ArrayLike, bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1] (the last one closed), empty bins left out."""
    x = np.clip(np.asarray(stated, dtype=float), 0.0, 1.0)
    y = np.asarray(observed, dtype=float)
    index = np.minimum((x * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        mask = index == b
        if mask.any():
            out.append(
                ReliabilityBin(
                    b / bins, (b + 1) / bins, int(mask.sum()), float(x[mask].mean()), float(y[mask].mean())
                )
            )
    return out


def expected_calibration_error(stated: ArrayLike, observed: ArrayLike, bins: int = 10) -> float:
    """Σ over bins of (bin share) · |mean stated − mean observed|."""
    stated, observed = np.asarray(stated, dtype=float), np.asarray(observed, dtype=float)
    total = len(stated)
    if total == 0:
        return 0.0
    return float(
        sum(
            b.count / total * abs(b.mean_stated - b.mean_observed)
            for b in reliability(stated, observed, bins)
        )
    )


@dataclass(frozen=True)
class MissRateCalibration:
    """A deployed Calibrate(MISS_RATE): stated miss rate -> observed miss rate, and stated recall
    -> observed recall when outcomes reported recall."""

    version: int
    miss_rate: IsotonicMap
    recall: IsotonicMap | None
    sample_size: int

    def params(self) -> dict:
        return {
            "miss_rate": [list(self.miss_rate.stated), list(self.miss_rate.observed)],
            "recall": [list(self.recall.stated), list(self.recall.observed)] if self.recall else None,
            "sample_size": self.sample_size,
        }

    @classmethod
    def from_params(cls, version: int, params: dict) -> MissRateCalibration:
        recall = params["recall"]
        return cls(
            version,
            IsotonicMap(tuple(params["miss_rate"][0]), tuple(params["miss_rate"][1])),
            IsotonicMap(tuple(recall[0]), tuple(recall[1])) if recall else None,
            params["sample_size"],
        )


@dataclass(frozen=True)
class ConfidenceCalibration:
    """A deployed Calibrate(CONFIDENCE): the conservative confidence a retrieval stated
    (synthesis × (1 − miss rate)) -> the share of such retrievals after which the agent
    succeeded."""

    version: int
    confidence: IsotonicMap
    sample_size: int

    def params(self) -> dict:
        return {
            "confidence": [list(self.confidence.stated), list(self.confidence.observed)],
            "sample_size": self.sample_size,
        }

    @classmethod
    def from_params(cls, version: int, params: dict) -> ConfidenceCalibration:
        stated, observed = params["confidence"]
        return cls(version, IsotonicMap(tuple(stated), tuple(observed)), params["sample_size"])
