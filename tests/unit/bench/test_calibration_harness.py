"""The calibration harness's confidence measure on tiny data: the ECE of the stated confidence
against success (a relevant document in the top k)."""

from types import SimpleNamespace

import pytest
from sounding_bench.calibration import Retrieved, _confidence_ece, split_train

pytestmark = pytest.mark.unit


def retrieved(ranking, confidence):
    return Retrieved("r", ranking, 0.1, "derived", None, 0, 1.0, confidence, "derived")


def test_the_confidence_ece_judges_the_stated_confidence_against_success_in_the_top_k():
    dataset = SimpleNamespace(qrels={"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1, "d": 0}})
    passes = {
        "q1": retrieved(["a", "x"], 0.9),  # success
        "q2": retrieved(["x", "y", "b"], 0.9),  # b is third: no success at k = 2
        "q3": retrieved(["d", "x"], 0.2),  # d is not relevant (grade 0): no success
    }
    # One bin holds q1 and q2 (stated 0.9, observed 0.5), another q3 (stated 0.2, observed 0).
    assert _confidence_ece(passes, dataset, ["q1", "q2", "q3"], 2) == pytest.approx(
        2 / 3 * 0.4 + 1 / 3 * 0.2, abs=1e-4
    )
    assert _confidence_ece(passes, dataset, ["q1", "q2", "q3"], 3) == pytest.approx(
        1 / 3 * 0.2 + 2 / 3 * 0.1, abs=1e-4
    )


def test_the_train_queries_split_into_two_disjoint_halves_the_same_way_every_run():
    queries = [(f"q{i}", f"text {i}") for i in range(11)]
    miss_rate, confidence = split_train(queries)
    assert len(confidence) == 6 and len(miss_rate) == 5  # round(5.5): the confidence half
    assert sorted(miss_rate + confidence) == sorted(queries)
    assert miss_rate == [q for q in queries if q in miss_rate]  # the dataset's order kept
    assert split_train(queries) == (miss_rate, confidence)
