"""Calibrate(MISS_RATE) and Calibrate(CONFIDENCE): monotone maps from what retrievals stated to
what outcomes showed (retrieval-uncertainty spec, "Integration with Track F: Calibration").

From observed retrievals that stated a miss rate m:
- missed = 1 when the caller reported missing content (missed documents or found_missing_content),
  else 0; the miss-rate map is the isotonic fit of missed against m;
- recall = |used| / (|used| + |missed documents|) when the caller reported either; the recall map
  is the isotonic fit of recall against the stated recall 1 − m.
From observed retrievals that stated a conservative confidence c = synthesis × (1 − m) and whose
outcome says whether the agent succeeded: the confidence map is the isotonic fit of success
against c. It is deployed only if it validates: mapped by fits on the other folds (5-fold cross
validation), the outcomes' ECE must be lower than the stated confidence's, since a confidence
that already matches success gains nothing from a map fitted to noise.
The report gives the expected calibration error (10 bins) before and after the fit, on the
outcomes it was fitted to, the reliability bins, and the reliability curves to draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core.calibration import (
    ConfidenceCalibration,
    IsotonicMap,
    MissRateCalibration,
    expected_calibration_error,
    reliability,
)
from sounding.learning.protocol import Curve

MIN_OUTCOMES = 50
# Folds of the cross validation that decides whether a confidence map is deployed.
VALIDATION_FOLDS = 5


@dataclass(frozen=True)
class Outcome:
    stated_miss_rate: float
    missed: bool
    # None when the caller reported neither used nor missed documents.
    recall: float | None


def reported_missing(reported: dict) -> bool:
    """Whether an outcome (as logged) says the retrieval missed something."""
    return bool(reported["missed_document_ids"]) or bool(reported["found_missing_content"])


def outcome(stated_miss_rate: float, reported: dict) -> Outcome:
    used, missed = reported["used_document_ids"], reported["missed_document_ids"]
    return Outcome(
        stated_miss_rate,
        reported_missing(reported),
        len(used) / (len(used) + len(missed)) if used or missed else None,
    )


def fit(
    outcomes: Sequence[Outcome], version: int
) -> tuple[MissRateCalibration, dict[str, float], tuple[Curve, ...]]:
    """The calibration, its diagnostics and its reliability curves. ValueError with fewer than
    MIN_OUTCOMES outcomes."""
    if len(outcomes) < MIN_OUTCOMES:
        raise ValueError(f"needs at least {MIN_OUTCOMES} observed retrievals with a stated miss rate")
    stated = [o.stated_miss_rate for o in outcomes]
    missed = [float(o.missed) for o in outcomes]
    miss_map = IsotonicMap.fit(stated, missed)
    with_recall = [(1.0 - o.stated_miss_rate, o.recall) for o in outcomes if o.recall is not None]
    stated_recall = [stated for stated, _ in with_recall]
    observed_recall = [observed for _, observed in with_recall]
    recall_map = IsotonicMap.fit(stated_recall, observed_recall) if with_recall else None
    calibrated_miss = [miss_map(v) for v in stated]
    diagnostics = {
        "sample_size": float(len(outcomes)),
        "miss_rate_ece_before": expected_calibration_error(stated, missed),
        "miss_rate_ece_after": expected_calibration_error(calibrated_miss, missed),
        "observed_miss_share": sum(missed) / len(missed),
        "recall_sample_size": float(len(with_recall)),
    }
    curves = {"miss rate, stated": (stated, missed), "miss rate, calibrated": (calibrated_miss, missed)}
    if recall_map is not None:
        calibrated_recall = [recall_map(v) for v in stated_recall]
        diagnostics["recall_ece_before"] = expected_calibration_error(stated_recall, observed_recall)
        diagnostics["recall_ece_after"] = expected_calibration_error(calibrated_recall, observed_recall)
        curves["recall, stated"] = (stated_recall, observed_recall)
        curves["recall, calibrated"] = (calibrated_recall, observed_recall)
    for b in reliability(stated, missed):
        diagnostics[f"miss_rate_bin_{b.low:.1f}.count"] = float(b.count)
        diagnostics[f"miss_rate_bin_{b.low:.1f}.observed"] = b.mean_observed
    calibration = MissRateCalibration(version, miss_map, recall_map, len(outcomes))
    return calibration, diagnostics, reliability_curves(curves)


@dataclass(frozen=True)
class ConfidenceFit:
    calibration: ConfidenceCalibration
    # Whether the map validated (cross-validated ECE below the stated confidence's).
    deploy: bool
    diagnostics: dict[str, float]
    curves: tuple[Curve, ...]


def fit_confidence(outcomes: Sequence[tuple[float, bool]], version: int) -> ConfidenceFit:
    """From (stated conservative confidence, agent succeeded) pairs: the calibration, whether it
    validates, its diagnostics and its reliability curves. ValueError with fewer than MIN_OUTCOMES
    pairs."""
    if len(outcomes) < MIN_OUTCOMES:
        raise ValueError(f"needs at least {MIN_OUTCOMES} observed retrievals with a stated confidence")
    stated = [c for c, _ in outcomes]
    succeeded = [float(s) for _, s in outcomes]
    mapping = IsotonicMap.fit(stated, succeeded)
    calibrated = [mapping(c) for c in stated]
    held_out = cross_validated_map(stated, succeeded)
    diagnostics = {
        "sample_size": float(len(outcomes)),
        "confidence_ece_before": expected_calibration_error(stated, succeeded),
        "confidence_ece_after": expected_calibration_error(calibrated, succeeded),
        "confidence_ece_cross_validated": expected_calibration_error(held_out, succeeded),
        "observed_success_share": sum(succeeded) / len(succeeded),
    }
    for b in reliability(stated, succeeded):
        diagnostics[f"confidence_bin_{b.low:.1f}.count"] = float(b.count)
        diagnostics[f"confidence_bin_{b.low:.1f}.observed"] = b.mean_observed
    curves = reliability_curves(
        {"confidence, stated": (stated, succeeded), "confidence, calibrated": (calibrated, succeeded)}
    )
    deploy = diagnostics["confidence_ece_cross_validated"] < diagnostics["confidence_ece_before"]
    return ConfidenceFit(ConfidenceCalibration(version, mapping, len(outcomes)), deploy, diagnostics, curves)


def cross_validated_map(stated: Sequence[float], observed: Sequence[float]) -> np.ndarray:
    """Each stated value mapped by the isotonic fit on the other folds (VALIDATION_FOLDS, shuffled
    with seed 0)."""
    from sklearn.model_selection import KFold

    x, y = np.asarray(stated, dtype=float), np.asarray(observed, dtype=float)
    mapped = np.empty(len(x))
    for fitted, held in KFold(VALIDATION_FOLDS, shuffle=True, random_state=0).split(x):
        mapped[held] = IsotonicMap.fit(x[fitted], y[fitted])(x[held])
    return mapped


def reliability_curves(series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> tuple[Curve, ...]:
    """The diagonal of perfect calibration, then each series' reliability curve: mean stated
    against mean observed over 10 bins."""
    curves = [Curve(name="perfect", x_label="stated", y_label="observed", x=(0.0, 1.0), y=(0.0, 1.0))]
    for name, (stated, observed) in series.items():
        bins = reliability(stated, observed)
        curves.append(
            Curve(
                name=name,
                x_label="stated",
                y_label="observed",
                x=tuple(b.mean_stated for b in bins),
                y=tuple(b.mean_observed for b in bins),
            )
        )
    return tuple(curves)
