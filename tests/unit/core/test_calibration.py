import numpy as np
import pytest
from sounding.core.calibration import (
    IsotonicMap,
    MissRateCalibration,
    expected_calibration_error,
    reliability,
)

pytestmark = pytest.mark.unit


def test_isotonic_map_is_monotone_and_pools_violators():
    mapping = IsotonicMap.fit([0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 1.0])
    assert mapping.observed == (0.0, 0.5, 0.5, 1.0)
    assert mapping(0.25) == pytest.approx(0.5)
    assert mapping(-1.0) == 0.0 and mapping(2.0) == 1.0
    values = [mapping(v) for v in np.linspace(0, 1, 50)]
    assert all(a <= b for a, b in zip(values, values[1:], strict=False))


def test_isotonic_map_pools_equal_stated_values():
    mapping = IsotonicMap.fit([0.5, 0.5, 0.5, 0.9], [0.0, 0.0, 1.0, 1.0])
    assert mapping.stated == (0.5, 0.9)
    assert mapping(0.5) == pytest.approx(1 / 3)


def test_calibration_lowers_the_expected_calibration_error():
    rng = np.random.default_rng(0)
    stated = rng.uniform(0, 1, 2000)
    truth = stated**2  # stated rates run high
    outcomes = (rng.uniform(0, 1, 2000) < truth).astype(float)
    before = expected_calibration_error(stated, outcomes)
    mapping = IsotonicMap.fit(stated[:1000], outcomes[:1000])
    after = expected_calibration_error([mapping(v) for v in stated[1000:]], outcomes[1000:])
    assert before > 0.1 and after < 0.05


def test_reliability_bins():
    bins = reliability([0.05, 0.15, 0.15, 1.0], [0, 1, 0, 1], bins=10)
    assert [(b.low, b.count) for b in bins] == [(0.0, 1), (0.1, 2), (0.9, 1)]
    assert bins[1].mean_observed == 0.5
    assert expected_calibration_error([], []) == 0.0


def test_a_decreasing_map_and_arrays():
    mapping = IsotonicMap.fit([0.1, 0.2, 0.3], [1.0, 0.0, 0.5], increasing=False)
    assert mapping.observed == (1.0, 0.25, 0.25)
    assert mapping(np.array([0.0, 0.25, 1.0])).tolist() == [1.0, 0.25, 0.25]


def test_a_miss_rate_calibration_survives_its_params():
    fitted = MissRateCalibration(3, IsotonicMap.fit([0.1, 0.5], [0.0, 1.0]), None, 40)
    assert MissRateCalibration.from_params(3, fitted.params()) == fitted
