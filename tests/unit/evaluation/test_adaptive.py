import numpy as np
import pytest
from sounding.evaluation.adaptive import regret_growth

pytestmark = pytest.mark.unit


def test_square_root_growth_is_sublinear_with_slope_one_half():
    t = np.arange(1, 801)
    growth = regret_growth(3 * np.sqrt(t))
    assert growth["log_log_slope_second_half"] == pytest.approx(0.5, abs=1e-3)
    assert growth["sublinear"] is True


def test_linear_growth_is_not_sublinear():
    growth = regret_growth(0.02 * np.arange(1, 801))
    assert growth["log_log_slope_second_half"] == pytest.approx(1.0, abs=1e-3)
    assert growth["sublinear"] is False


def test_regret_that_ends_below_zero_has_no_slope_and_counts_as_sublinear():
    cumulative = np.concatenate([np.linspace(0.1, 2.0, 400), np.linspace(2.0, -5.0, 400)])
    growth = regret_growth(cumulative)
    assert growth["log_log_slope_second_half"] is None
    assert (growth["sublinear"], growth["final_cumulative"], growth["max_cumulative"]) == (True, -5.0, 2.0)


def test_regret_that_dips_below_zero_but_ends_positive_is_not_called_sublinear():
    cumulative = np.concatenate([np.linspace(-1.0, -0.5, 400), np.linspace(-0.5, 3.0, 400)])
    growth = regret_growth(cumulative)
    assert (growth["log_log_slope_second_half"], growth["sublinear"]) == (None, False)
