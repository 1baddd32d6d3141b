import math

import numpy as np
import pytest
from sounding_bench.metrics import beir_scores, paired_difference, per_query, percentiles

pytestmark = pytest.mark.unit


def test_ndcg_by_hand():
    qrels = {"q": {"a": 1, "b": 1}, "graded": {"a": 2, "b": 1}}
    rankings = {"q": ["x", "a", "y", "b"], "graded": ["b", "x", "a"]}
    values = per_query(rankings, qrels, ["q", "graded"], ("ndcg@10", "ndcg@1"))
    # a at rank 2, b at rank 4: DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert values["q"]["ndcg@10"] == pytest.approx(expected)
    assert values["q"]["ndcg@1"] == 0.0
    # linear gains: b (1) at rank 1, a (2) at rank 3; ideal 2 then 1
    expected = (1 + 2 / math.log2(4)) / (2 + 1 / math.log2(3))
    assert values["graded"]["ndcg@10"] == pytest.approx(expected)


def test_recall_keeps_the_given_order_and_cutoff():
    qrels = {"q": {"a": 1, "b": 1, "c": 1}, "none": {"a": 1}}
    values = per_query({"q": ["a", "x", "b"], "none": ["x"]}, qrels, ["q", "none"], ("recall@2", "recall@3"))
    assert values["q"]["recall@2"] == pytest.approx(1 / 3)
    assert values["q"]["recall@3"] == pytest.approx(2 / 3)
    assert values["none"]["recall@3"] == 0.0


def test_a_query_without_a_ranking_scores_zero_and_counts_in_the_mean():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    scores = beir_scores({"q1": ["a"]}, qrels, ["q1", "q2"])
    assert scores == {"ndcg@10": 0.5, "recall@100": 0.5}


def test_unknown_measures_are_refused():
    with pytest.raises(ValueError, match="unknown measure"):
        per_query({}, {}, [], ("map@10",))


def test_percentiles():
    stats = percentiles([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats["latency_ms_p50"] == 3.0 and stats["latency_ms_p95"] > 4.0


def test_paired_difference_has_a_bootstrap_interval_and_a_constant_difference_its_own():
    a = np.array([0, 0, 0, 1] * 25)
    b = np.array([1, 1, 0, 1] * 25)
    found = paired_difference(a, b, seed=0)
    assert found["difference"] == -0.5 and found["interval_95"][0] < -0.5 < found["interval_95"][1] < 0
    assert paired_difference(a, a, seed=0) == {"difference": 0.0, "interval_95": [0.0, 0.0]}
