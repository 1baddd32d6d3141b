import math

import pytest
from sounding.core import stop_rules

pytestmark = pytest.mark.unit


def test_cluster_distribution_and_semantic_entropy():
    distribution = stop_rules.cluster_distribution(["a", "b", "a", "a"])
    assert distribution == {"a": 0.75, "b": 0.25}
    expected = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert stop_rules.semantic_entropy(distribution) == pytest.approx(expected)
    assert stop_rules.semantic_entropy({"a": 1.0}) == 0.0


def test_conformal_quantile_is_the_finite_sample_corrected_rank():
    scores = [0.1 * i for i in range(1, 10)]  # 0.1 ... 0.9, n = 9
    # ceil((9 + 1) * 0.8) = 8 -> the 8th smallest.
    assert stop_rules.conformal_quantile(scores, 0.2) == pytest.approx(0.8)
    # Too few states for the level: every label stays in the set.
    assert stop_rules.conformal_quantile([0.2, 0.4], 0.1) == 1.0


def test_prediction_sets_and_the_set_rule_answering_on_a_singleton_only():
    distribution = {"a": 0.7, "b": 0.2, "c": 0.1}
    assert stop_rules.prediction_set(distribution, 0.5) == ["a"]
    assert stop_rules.prediction_set(distribution, 0.85) == ["a", "b"]
    assert stop_rules.prediction_set(distribution, 0.2) == []
    assert stop_rules.set_rule_answers(1)
    # An empty set is not certainty (no answer is plausible enough), so it asks on, like two.
    assert not stop_rules.set_rule_answers(0)
    assert not stop_rules.set_rule_answers(2)
