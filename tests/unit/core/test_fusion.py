import pytest
from sounding.core.fusion import DEFAULT_RRF_K, MIN_MAX, RRF, Fusion, min_max_fusion, weighted_rrf

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


def test_min_max_scores_are_the_weighted_mean_of_normalised_scores():
    fused = min_max_fusion(
        {"dense": [("a", 0.9), ("b", 0.5), ("c", 0.4)], "lexical": [("b", 8.0), ("d", 2.0)]},
        weights={"dense": 3.0, "lexical": 1.0},
    )
    scores = {item.key: item.score for item in fused}
    assert scores["a"] == pytest.approx(3.0 * 1.0 / 4)
    assert scores["b"] == pytest.approx((3.0 * 0.2 + 1.0 * 1.0) / 4)
    assert scores["c"] == pytest.approx(0.0)
    assert scores["d"] == pytest.approx(0.0)
    b = next(item for item in fused if item.key == "b")
    assert {(c.arm, c.rank, c.score) for c in b.contributions} == {("dense", 2, 0.5), ("lexical", 1, 8.0)}


def test_min_max_keeps_score_gaps_that_rrf_loses():
    """A document an arm scores far above its other hits goes ahead of one both arms rank second
    by a small margin; RRF, seeing ranks only, puts the latter first."""
    rankings = {
        "dense": [("x", 0.9), ("y", 0.5), ("z", 0.49)],
        "lexical": [("w", 10.0), ("y", 5.0), ("v", 4.9), ("x", 0.1)],
    }
    assert [item.key for item in min_max_fusion(rankings)][:3] == ["w", "x", "y"]
    assert weighted_rrf(rankings)[0].key == "y"
    assert [i.key for i in Fusion(MIN_MAX).fuse(rankings)] == [i.key for i in min_max_fusion(rankings)]
    assert [i.key for i in Fusion(RRF, k=10).fuse(rankings)] == [i.key for i in weighted_rrf(rankings, k=10)]


def test_min_max_edge_cases():
    # Equal scores (one hit included) normalise to 1; an empty arm still counts in the weights.
    fused = min_max_fusion({"dense": [("a", 0.3), ("b", 0.3)], "lexical": [("c", 2.0)], "hyde": []})
    assert {item.key: item.score for item in fused} == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert [item.key for item in fused] == ["a", "c", "b"]  # ties: best rank, then key
    assert min_max_fusion({}) == []
    assert len(min_max_fusion({"x": [(str(i), float(i)) for i in range(10)]}, limit=3)) == 3
    with pytest.raises(ValueError, match="not finite"):
        min_max_fusion({"x": [("a", float("nan"))]})
    with pytest.raises(ValueError, match="twice"):
        min_max_fusion({"x": [("a", 0.0), ("a", 1.0)]})
    with pytest.raises(ValueError, match="sum to zero"):
        min_max_fusion({"x": [("a", 1.0)]}, weights={"x": 0.0})


def test_fusion_names_a_known_method():
    assert Fusion() == Fusion(MIN_MAX, DEFAULT_RRF_K)
    with pytest.raises(ValueError, match="unknown fusion method"):
        Fusion("borda")
    with pytest.raises(ValueError):
        Fusion(RRF, k=0)
