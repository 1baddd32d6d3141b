import pytest
from sounding.core.latency import LatencyEstimates

pytestmark = pytest.mark.unit


def test_the_first_measurement_is_the_estimate_and_later_ones_move_it_by_the_smoothing():
    estimates = LatencyEstimates(smoothing=0.25)
    assert estimates.get("hyde") is None
    estimates.measured("hyde", 100.0)
    assert estimates.get("hyde") == 100.0
    estimates.measured("hyde", 200.0)
    assert estimates.get("hyde") == pytest.approx(125.0)
    assert estimates.get("dense") is None


@pytest.mark.parametrize("smoothing", [0.0, 1.5])
def test_a_smoothing_outside_its_range_is_refused(smoothing):
    with pytest.raises(ValueError, match="smoothing"):
        LatencyEstimates(smoothing=smoothing)
