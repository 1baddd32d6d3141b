"""What a Retrieve states about itself, each value with its provenance (retrieval-uncertainty
spec): what the result may have missed, the recall the expansion loop acts on, and the
conservative confidence, derived until Calibrate fits them to outcomes, measured after."""

from __future__ import annotations

from sounding.core.calibration import ConfidenceCalibration, MissRateCalibration
from sounding.core.expansion import Gap
from sounding.core.provenance import Provenance
from sounding.core.uncertainty import FORMULA as MISS_RATE_FORMULA
from sounding.core.uncertainty import MissRateSignals
from sounding.retrieval.iterative import LoopState
from sounding.retrieval.protocol import ArmResult, RetrieveQuery, SemanticGap, Uncertainty

UNCALIBRATED = "uncalibrated"


def loop_recall(miss_rate: float, calibration: MissRateCalibration | None) -> Provenance:
    """The recall the loop acts on: measured once calibrated, else derived as 1 − miss rate."""
    if calibration is None:
        return Provenance(
            "derived", value=1.0 - miss_rate, formula="1 - miss_rate", inputs={"miss_rate": miss_rate}
        )
    return measured_recall(miss_rate, calibration)


def measured_recall(miss_rate: float, calibration: MissRateCalibration) -> Provenance:
    value = (
        calibration.recall(1.0 - miss_rate)
        if calibration.recall is not None
        else 1.0 - calibration.miss_rate(miss_rate)
    )
    return Provenance(
        "measured",
        value=value,
        calibration_version=str(calibration.version),
        sample_size=calibration.sample_size,
    )


def uncertainty(
    stats,
    signals: MissRateSignals,
    loop: LoopState,
    gaps: list[Gap],
    dense: ArmResult | None,
    calibration: MissRateCalibration | None,
) -> Uncertainty:
    """What the result may have missed, each value with its provenance.

    - corpus coverage: deterministic, from index statistics;
    - miss rate: the spec's heuristic (`core.uncertainty`) over what the arms found, derived
      with its inputs until Calibrate(MISS_RATE) fitted it to outcomes, then measured. It is
      about the result as ranked: the expansion loop never reorders its head and only adds
      below it, so the loop's own running estimate (in its Expansion events, which decides
      when it stops) is not the stated one;
    - estimated recall: measured after a calibration, absent(uncalibrated) before;
    - coverage estimate: corpus coverage × (1 − miss rate), derived;
    - query difficulty: 0.5·query complexity + 0.5·(1 − best dense similarity), derived;
    - each semantic gap's miss likelihood: absent(uncalibrated) (no outcome says which gap
      caused a miss)."""
    if stats.chunk_count == 0:
        coverage_value, coverage_basis = 0.0, "the collection holds no chunks"
    else:
        coverage_value = stats.fts_indexed_chunk_count / stats.chunk_count
        coverage_basis = "share of chunks embedded and full-text indexed (every ingested chunk is embedded)"
    coverage = Provenance.deterministic(coverage_value, coverage_basis)
    uncalibrated = Provenance.absent(UNCALIBRATED)
    stated = signals.miss_rate()
    miss_rate = Provenance("derived", value=stated, formula=MISS_RATE_FORMULA, inputs=signals.inputs())
    recall = uncalibrated
    miss_value = stated
    if calibration is not None:
        miss_value = calibration.miss_rate(stated)
        miss_rate = Provenance(
            "measured",
            value=miss_value,
            inputs={"stated_miss_rate": stated},
            calibration_version=str(calibration.version),
            sample_size=calibration.sample_size,
        )
        recall = measured_recall(stated, calibration)
    top_similarity = max((h.score for h in dense.hits), default=0.0) if dense else 0.0
    difficulty = Provenance(
        "derived",
        value=0.5 * signals.complexity + 0.5 * (1.0 - min(max(top_similarity, 0.0), 1.0)),
        formula="0.5*query_complexity + 0.5*(1 - top_dense_similarity)",
        inputs={"query_complexity": signals.complexity, "top_dense_similarity": top_similarity},
    )
    coverage_estimate = Provenance(
        "derived",
        value=coverage_value * (1.0 - miss_value),
        formula="corpus_coverage * (1 - miss_rate)",
        inputs={"corpus_coverage": coverage_value, "miss_rate": miss_value},
    )
    return Uncertainty(
        miss_rate=miss_rate,
        coverage_estimate=coverage_estimate,
        estimated_recall=recall,
        query_difficulty=difficulty,
        corpus_coverage=coverage,
        query_expansions=list(loop.expansions),
        semantic_gaps=[
            SemanticGap(g.kind, g.description, g.severity, g.mitigation, uncalibrated) for g in gaps
        ],
    )


def conservative_confidence(
    query: RetrieveQuery, uncertainty: Uncertainty, calibration: ConfidenceCalibration | None
) -> Provenance:
    """synthesis × (1 − miss_rate), derived, with both inputs (retrieval-uncertainty spec); once
    Calibrate(CONFIDENCE) fitted it to agents' outcomes, the map's value, measured (the stated
    value among its inputs)."""
    if query.synthesis_confidence is None:
        return Provenance.absent("no synthesis_confidence in the request")
    miss_rate = uncertainty.miss_rate.value
    if miss_rate is None:
        return Provenance.absent("the result has no miss rate")
    stated = query.synthesis_confidence * (1 - miss_rate)
    if calibration is not None:
        return Provenance(
            "measured",
            value=calibration.confidence(stated),
            inputs={"stated_confidence": stated},
            calibration_version=str(calibration.version),
            sample_size=calibration.sample_size,
        )
    return Provenance(
        "derived",
        value=stated,
        formula="synthesis_confidence * (1 - miss_rate)",
        inputs={"synthesis_confidence": query.synthesis_confidence, "miss_rate": miss_rate},
    )


def stated_confidence(confidence: Provenance) -> float | None:
    """The conservative confidence as stated before any calibration (what Calibrate fits)."""
    if confidence.kind == "measured":
        return confidence.inputs["stated_confidence"]
    return confidence.value
