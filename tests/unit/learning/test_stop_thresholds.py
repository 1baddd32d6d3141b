import math

import numpy as np
import pytest
from sounding.learning import stop_thresholds
from sounding.runtime import errors
from sounding.store.learning import InquiryState

pytestmark = pytest.mark.unit


def states(scores, erred, rule="robust_mi_risk", stated=None, nonconformity=None):
    return [
        InquiryState(
            session_id=f"s{i}",
            task="dc",
            regime="normal",
            bucket="",
            turn=0,
            scores={rule: score},
            error=bool(error),
            nonconformity=nonconformity[i] if nonconformity is not None else 0.0,
            stated_confidence=stated[i] if stated is not None else None,
        )
        for i, (score, error) in enumerate(zip(scores, erred, strict=True))
    ]


def test_the_threshold_answers_the_right_states_and_keeps_the_risk_bound():
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.uniform(0, 0.2, 200), rng.uniform(0.5, 1.0, 100)])
    erred = np.concatenate([np.zeros(200), np.ones(100)])
    fitted = stop_thresholds.fit(states(scores, erred), "robust_mi_risk", 0.1, 0.05)
    assert fitted.params["never_answer"] is False
    # Every right state is answered; a few wrong ones may join while the bound stays <= delta.
    assert fitted.params["value"] >= scores[:200].max()
    assert 200 <= fitted.diagnostics["answered"] < 300
    assert fitted.diagnostics["risk_upper_bound"] <= 0.1
    risk, bound, _, chosen = fitted.curves
    assert risk.x == bound.x and all(b >= r for r, b in zip(risk.y, bound.y, strict=True))
    assert chosen.x[0] == fitted.diagnostics["coverage"]


def test_all_wrong_states_never_answer():
    fitted = stop_thresholds.fit(states(np.linspace(0, 1, 50), np.ones(50), "mi_only"), "mi_only", 0.1, 0.05)
    assert fitted.params == {
        "value": None,
        "never_answer": True,
        "confidence_map": None,
        "threshold_rule": "fixed_sequence",
    }
    assert stop_thresholds.threshold_value(fitted.params) == -math.inf


def test_verbalized_confidence_is_mapped_by_isotonic_regression_first():
    stated = [0.9] * 40 + [0.5] * 40
    erred = [0] * 38 + [1] * 2 + [1] * 30 + [0] * 10
    fitted = stop_thresholds.fit(
        states([0.0] * 80, erred, "verbalized_confidence", stated=stated), "verbalized_confidence", 0.2, 0.05
    )
    xs, ys = fitted.params["confidence_map"]
    assert np.interp(0.9, xs, ys) == pytest.approx(38 / 40)
    assert np.interp(0.5, xs, ys) == pytest.approx(10 / 40)


def test_set_rules_fit_the_conformal_quantile():
    nonconformity = [i / 100 for i in range(100)]
    fitted = stop_thresholds.fit(
        states([0.0] * 100, [0] * 100, "knowno_set_size", nonconformity=nonconformity),
        "knowno_set_size",
        0.1,
        0.05,
    )
    assert fitted.params["value"] == pytest.approx(0.90)  # ceil(101 * 0.9) = 91st smallest


def test_too_few_states_is_a_failed_precondition():
    with pytest.raises(errors.FailedPrecondition):
        stop_thresholds.fit(states([0.1] * 3, [0] * 3), "robust_mi_risk", 0.1, 0.05)


def test_the_specifications_largest_prefix_rule_looks_past_the_first_failing_prefix():
    # 40 right states, 10 wrong, then 400 right: fixed-sequence testing stops where the errors
    # start; the largest prefix under the bound takes in most of the later right states.
    erred = [False] * 40 + [True] * 10 + [False] * 400
    scores = np.arange(len(erred), dtype=float)
    fixed = stop_thresholds.fit(states(scores, erred), "robust_mi_risk", 0.1, 0.05)
    largest = stop_thresholds.fit(states(scores, erred), "robust_mi_risk", 0.1, 0.05, "largest_prefix")
    assert fixed.params["threshold_rule"] == "fixed_sequence" and fixed.params["value"] < 40
    assert largest.params["threshold_rule"] == "largest_prefix" and largest.params["value"] > 50
    assert largest.diagnostics["risk_upper_bound"] <= 0.1
    assert "(largest_prefix)" in largest.summary
