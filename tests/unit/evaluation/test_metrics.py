import math

import pytest
from sounding.evaluation.metrics import ndcg_at_k, percentiles, recall_at_k

pytestmark = pytest.mark.unit


def test_ndcg_by_hand():
    relevance = {"a": 1, "b": 1}
    # a at rank 2, b at rank 4: DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["x", "a", "y", "b"], relevance, 10) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], relevance, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], relevance, 10) == 0.0
    assert ndcg_at_k(["x", "a"], relevance, 1) == 0.0


def test_recall_and_percentiles():
    assert recall_at_k(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a"], {}, 10) == 0.0
    stats = percentiles([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats["latency_ms_p50"] == 3.0 and stats["latency_ms_p95"] > 4.0
