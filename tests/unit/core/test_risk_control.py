import math

import numpy as np
import pytest
from scipy.stats import beta, binom
from sounding.core.risk_control import calibrate_threshold, clopper_pearson_upper

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("errors", "n", "alpha"), [(0, 10, 0.05), (3, 40, 0.05), (7, 20, 0.1), (50, 500, 0.01)]
)
def test_the_upper_bound_is_the_rate_at_which_seeing_so_few_errors_has_probability_alpha(errors, n, alpha):
    upper = clopper_pearson_upper(errors, n, alpha)
    assert binom.cdf(errors, n, upper) == pytest.approx(alpha, rel=1e-6)
    assert upper == pytest.approx(beta(errors + 1, n - errors).ppf(1 - alpha))


def test_known_values_of_the_upper_bound():
    # No errors in n trials: 1 − α^(1/n) (the "rule of three" for large n).
    assert clopper_pearson_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10))
    assert clopper_pearson_upper(5, 5, 0.05) == 1.0
    with pytest.raises(ValueError):
        clopper_pearson_upper(6, 5, 0.05)


@pytest.mark.parametrize("rule", ["fixed_sequence", "largest_prefix"])
def test_tau_is_the_score_ending_the_largest_prefix_under_delta(rule):
    scores = np.arange(100) / 100
    errors = np.zeros(100, dtype=bool)
    errors[60:] = True  # the 40 least confident states all err
    fit = calibrate_threshold(scores, errors, delta=0.1, alpha=0.05, rule=rule)
    # The bound of j clean states plus e errors must stay at most 0.1.
    j = fit.answered
    assert clopper_pearson_upper(max(0, j - 60), j, 0.05) <= 0.1
    assert clopper_pearson_upper(max(0, j + 1 - 60), j + 1, 0.05) > 0.1
    assert fit.tau == scores[j - 1]
    assert fit.curve[-1].coverage == 1.0 and len(fit.curve) == 100


def test_fixed_sequence_stops_at_the_first_failing_prefix_but_the_spec_rule_looks_further():
    # 40 clean states, then 10 errors, then 400 clean ones: a later prefix passes again.
    errors = [False] * 40 + [True] * 10 + [False] * 400
    scores = np.arange(len(errors), dtype=float)
    spec = calibrate_threshold(scores, errors, delta=0.1, rule="largest_prefix")
    sequential = calibrate_threshold(scores, errors, delta=0.1, rule="fixed_sequence")
    assert spec.answered > 50
    assert 29 <= sequential.answered <= 40  # stopped where the errors start


def test_ties_end_prefixes_only_where_the_score_changes():
    fit = calibrate_threshold([0.1, 0.2, 0.2, 0.2, 0.3], [False] * 5, delta=0.9, alpha=0.05)
    assert [p.answered for p in fit.curve] == [1, 4, 5]


def test_never_answer_when_no_prefix_is_safe_enough():
    fit = calibrate_threshold([0.1, 0.2, 0.3], [True, False, True], delta=0.1)
    assert fit.never_answer and fit.tau == -math.inf and fit.answered == 0
    assert fit.empirical_risk is None and len(fit.curve) == 3


def test_answered_held_out_error_stays_under_delta_in_at_least_95_percent_of_calibrations():
    """Synthetic states: score ~ U(0, 1), error with probability 0.4 · score (so answering below
    τ errs at 0.2 τ on average). δ = 0.1, α = 0.05, 200 calibrations of 1,000 states each,
    judged on 20,000 fresh states."""
    rng = np.random.default_rng(0)
    delta, alpha, held_within = 0.1, 0.05, 0
    for _ in range(200):
        scores = rng.random(1000)
        errors = rng.random(1000) < 0.4 * scores
        fit = calibrate_threshold(scores, errors, delta, alpha)
        fresh = rng.random(20_000)
        fresh_errors = rng.random(20_000) < 0.4 * fresh
        answered = fresh <= fit.tau
        risk = fresh_errors[answered].mean() if answered.any() else 0.0
        held_within += risk <= delta
    assert held_within >= 190
