import numpy as np
import pytest
from sounding.core.calibration import ConfidenceCalibration, IsotonicMap, MissRateCalibration
from sounding.learning.calibration import (
    MIN_OUTCOMES,
    Outcome,
    cross_validated_map,
    fit,
    fit_confidence,
    outcome,
)

pytestmark = pytest.mark.unit


def test_an_outcome_reads_missed_content_and_recall():
    reported = {
        "used_document_ids": ["a", "b", "c"],
        "missed_document_ids": ["d"],
        "found_missing_content": False,
    }
    assert outcome(0.4, reported) == Outcome(0.4, True, 0.75)
    nothing = {"used_document_ids": [], "missed_document_ids": [], "found_missing_content": True}
    assert outcome(0.2, nothing) == Outcome(0.2, True, None)


def test_too_few_outcomes():
    with pytest.raises(ValueError, match=str(MIN_OUTCOMES)):
        fit([Outcome(0.5, False, 1.0)] * (MIN_OUTCOMES - 1), 1)


def test_fit_lowers_the_calibration_error_and_round_trips():
    rng = np.random.default_rng(3)
    stated = rng.uniform(0.2, 0.6, 400)
    # Stated rates run low: the real miss probability is 1.5 x the stated one.
    outcomes = [Outcome(float(s), bool(rng.random() < 1.5 * s), float(1 - 0.5 * s)) for s in stated]
    calibration, diagnostics, curves = fit(outcomes, version=3)
    assert diagnostics["miss_rate_ece_after"] < diagnostics["miss_rate_ece_before"]
    assert diagnostics["recall_ece_after"] <= diagnostics["recall_ece_before"]
    perfect, stated_curve, calibrated_curve = curves[:3]
    assert perfect.x == perfect.y == (0.0, 1.0)
    # Stated rates run low, so the stated curve lies above the diagonal; the fitted one near it.
    assert all(y > x for x, y in zip(stated_curve.x, stated_curve.y, strict=True) if x >= 0.3)
    assert max(abs(y - x) for x, y in zip(calibrated_curve.x, calibrated_curve.y, strict=True)) < 0.1
    assert calibration.miss_rate(0.5) > 0.5  # corrected upwards
    again = MissRateCalibration.from_params(3, calibration.params())
    assert again == calibration


def test_the_confidence_map_learns_how_often_agents_succeed_at_each_stated_confidence():
    with pytest.raises(ValueError, match=str(MIN_OUTCOMES)):
        fit_confidence([(0.9, True)] * (MIN_OUTCOMES - 1), 1)
    # Stated 0.9 succeeds half the time, stated 0.3 a quarter of the time: overconfident.
    outcomes = [(0.9, i % 2 == 0) for i in range(40)] + [(0.3, i % 4 == 0) for i in range(40)]
    fit = fit_confidence(outcomes, version=2)
    calibration, diagnostics, curves = fit.calibration, fit.diagnostics, fit.curves
    # Mapped by fits on the other folds, the outcomes are closer to calibrated than as stated.
    assert diagnostics["confidence_ece_cross_validated"] < diagnostics["confidence_ece_before"]
    assert fit.deploy
    assert calibration.confidence(0.9) == pytest.approx(0.5)
    assert calibration.confidence(0.3) == pytest.approx(0.25)
    # ECE before: half the outcomes 0.4 off, half 0.05 off; after: none.
    assert diagnostics["confidence_ece_before"] == pytest.approx(0.5 * 0.4 + 0.5 * 0.05)
    assert diagnostics["confidence_ece_after"] == pytest.approx(0.0, abs=1e-9)
    assert diagnostics["observed_success_share"] == pytest.approx(0.375)
    assert [c.name for c in curves] == ["perfect", "confidence, stated", "confidence, calibrated"]
    again = ConfidenceCalibration.from_params(2, calibration.params())
    assert again == calibration and again.sample_size == 80


def test_a_confidence_map_that_does_not_validate_is_not_deployed():
    # Stated 0.8 succeeds 80% of the time and stated 0.5 half the time: nothing to correct, so a
    # map fitted to the other folds can only add their noise.
    outcomes = [(0.8, i % 5 != 0) for i in range(50)] + [(0.5, i % 2 == 0) for i in range(50)]
    fit = fit_confidence(outcomes, version=1)
    assert fit.diagnostics["confidence_ece_before"] == pytest.approx(0.0, abs=1e-9)
    assert fit.diagnostics["confidence_ece_cross_validated"] > 0.0
    assert not fit.deploy


def test_cross_validation_maps_each_outcome_by_a_fit_that_did_not_see_it():
    # Two stated levels, each succeeding always; one outcome at 0.2 fails. Held out, its fold's
    # fit has never seen a failure at 0.2, so it maps to 1 there, where the in-sample fit would not.
    stated = [0.2] * 10 + [0.9] * 10
    observed = [1.0] * 20
    observed[0] = 0.0
    mapped = cross_validated_map(stated, observed)
    assert mapped[0] == pytest.approx(1.0)
    assert IsotonicMap.fit(stated, observed)(0.2) == pytest.approx(0.9)
