"""Calibrate(MISS_RATE): monotone maps from what retrievals stated to what outcomes showed
(retrieval-uncertainty spec, "Integration with Track F: Calibration").

From observed retrievals that stated a miss rate m:
- missed = 1 when the caller reported missing content (missed documents or found_missing_content),
  else 0; the miss-rate map is the isotonic fit of missed against m;
- recall = |used| / (|used| + |missed documents|) when the caller reported either; the recall map
  is the isotonic fit of recall against the stated recall 1 − m.
The report gives the expected calibration error (10 bins) of both before and after the fit, on
the outcomes it was fitted to, the reliability bins, and a reliability diagram.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sounding.core.calibration import (
    IsotonicMap,
    MissRateCalibration,
    expected_calibration_error,
    reliability,
)

MIN_OUTCOMES = 50


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


def fit(outcomes: Sequence[Outcome], version: int) -> tuple[MissRateCalibration, dict[str, float], bytes]:
    """The calibration, its diagnostics and a reliability diagram (PNG). ValueError with fewer
    than MIN_OUTCOMES outcomes."""
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
    return calibration, diagnostics, reliability_png(curves)


def reliability_png(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> bytes:
    """The diagram as PNG; empty where matplotlib (the [eval] extra) is not installed."""
    if importlib.util.find_spec("matplotlib") is None:
        return b""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 5))
    axis.plot([0, 1], [0, 1], color="grey", linewidth=0.5, label="perfect")
    for label, (stated, observed) in curves.items():
        bins = reliability(stated, observed)
        axis.plot([b.mean_stated for b in bins], [b.mean_observed for b in bins], marker="o", label=label)
    axis.set_xlabel("stated")
    axis.set_ylabel("observed")
    axis.set_title("Reliability (10 bins)")
    axis.legend(fontsize="small")
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()
