import numpy as np
import pytest
from sounding_bench.adaptive import regret_growth

pytestmark = pytest.mark.unit


def test_square_root_growth_is_sublinear_with_slope_one_half():
    t = np.arange(1, 801)
    growth = regret_growth(3 * np.sqrt(t))
    assert growth["log_log_slope"] == pytest.approx(0.5, abs=1e-3)
    assert growth["sublinear"] is True


def test_linear_growth_is_not_sublinear():
    growth = regret_growth(0.02 * np.arange(1, 801))
    assert growth["log_log_slope"] == pytest.approx(1.0, abs=1e-3)
    assert growth["sublinear"] is False


def test_regret_that_ends_below_zero_has_no_slope_and_counts_as_sublinear():
    cumulative = np.concatenate([np.linspace(0.1, 2.0, 400), np.linspace(2.0, -5.0, 400)])
    growth = regret_growth(cumulative)
    assert growth["log_log_slope"] is None
    assert (growth["sublinear"], growth["final_cumulative"], growth["max_cumulative"]) == (True, -5.0, 2.0)


def test_regret_that_dips_below_zero_but_ends_positive_is_not_called_sublinear():
    cumulative = np.concatenate([np.linspace(-1.0, -0.5, 400), np.linspace(-0.5, 3.0, 400)])
    growth = regret_growth(cumulative)
    assert (growth["log_log_slope"], growth["sublinear"]) == (None, False)


def test_the_linear_slope_is_the_mean_regret_per_query_of_the_trend():
    assert regret_growth(0.02 * np.arange(1, 801))["linear_slope"] == pytest.approx(0.02)
    assert regret_growth(np.array([1.0]))["linear_slope"] is None


def test_regret_is_summed_from_the_first_query_after_the_cold_start():
    from sounding_bench.adaptive import _regret

    class Dataset:
        qrels = {q: {"d": 1} for q in "abcd"}

    # The fixed arm finds d first on every query; adaptive misses it on the cold-start query a
    # (ignored) and on c.
    fixed = {q: ["d"] for q in "abcd"}
    adaptive = {"a": ["x"], "b": ["d"], "c": ["x"], "d": ["d"]}
    regret = _regret({"arm": fixed}, adaptive, Dataset(), list("abcd"), cold_start=1)
    assert (regret["first_query"], regret["cumulative"]) == (2, [0.0, 1.0, 1.0])


def test_regret_is_against_the_best_fixed_plan_in_hindsight():
    from sounding_bench.adaptive import _regret

    class Dataset:
        qrels = {q: {"d": 1} for q in "ab"}

    plans = {"weak": {q: ["x", "d"] for q in "ab"}, "strong": {q: ["d"] for q in "ab"}}
    regret = _regret(plans, {"a": ["x"], "b": ["x"]}, Dataset(), list("ab"), cold_start=0)
    assert regret["best_fixed_plan"] == "strong" and regret["cumulative"] == [1.0, 2.0]
