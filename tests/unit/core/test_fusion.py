import pytest
from sounding.core.fusion import weighted_rrf

pytestmark = pytest.mark.unit


def test_scores_are_weighted_reciprocal_ranks():
    fused = weighted_rrf(
        {"dense": [("a", 0.9), ("b", 0.8)], "lexical": [("b", 7.0), ("c", 3.0)]},
        weights={"dense": 2.0, "lexical": 1.0},
        k=60,
    )
    scores = {item.key: item.score for item in fused}
    assert scores["a"] == pytest.approx(2.0 / 61)
    assert scores["b"] == pytest.approx(2.0 / 62 + 1.0 / 61)
    assert scores["c"] == pytest.approx(1.0 / 62)
    assert [item.key for item in fused] == ["b", "a", "c"]


def test_records_every_contributing_arm_with_rank_and_score():
    fused = weighted_rrf({"dense": [("a", 0.9), ("b", 0.8)], "lexical": [("b", 7.0)]})
    b = next(item for item in fused if item.key == "b")
    assert {(c.arm, c.rank, c.score) for c in b.contributions} == {
        ("dense", 2, 0.8),
        ("lexical", 1, 7.0),
    }


def test_ties_break_by_best_rank_then_key():
    fused = weighted_rrf({"x": [("b", 0), ("a", 0)], "y": [("a", 0), ("b", 0)]})
    assert [item.key for item in fused] == ["a", "b"]


def test_limit_and_bad_input():
    assert len(weighted_rrf({"x": [(str(i), 0) for i in range(10)]}, limit=3)) == 3
    with pytest.raises(ValueError):
        weighted_rrf({"x": [("a", 0)]}, k=0)
    with pytest.raises(ValueError):
        weighted_rrf({"x": [("a", 0), ("a", 1)]})
