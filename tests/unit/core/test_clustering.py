import numpy as np
import pytest
from sounding.core.clustering import (
    canonical,
    embedding_clusters,
    exact_clusters,
    refine_with_entailment,
    renumber,
    within_cluster_pairs,
)

pytestmark = pytest.mark.unit


def test_canonical_folds_case_space_and_edge_punctuation():
    assert canonical("  The Butler,  did it! ") == "the butler, did it"
    assert canonical('"0435"') == "0435"


def test_exact_clusters_number_by_first_appearance():
    assert exact_clusters(["Alice.", "bob", "alice", "Carol", "BOB!"]) == [0, 1, 0, 2, 1]


def test_renumber():
    assert renumber([7, 3, 7, 9]) == [0, 1, 0, 2]


def _unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_embedding_clusters_merge_close_vectors_only():
    vectors = _unit([[1, 0, 0], [0.99, 0.05, 0], [0, 1, 0], [0, 0.98, 0.1], [0, 0, 1]])
    assert embedding_clusters(vectors, 0.25) == [0, 0, 1, 1, 2]
    # A threshold near 0 leaves every text alone; a large one merges everything.
    assert embedding_clusters(vectors, 1e-6) == [0, 1, 2, 3, 4]
    assert embedding_clusters(vectors, 2.0) == [0, 0, 0, 0, 0]


def test_embedding_clusters_of_one_or_none():
    assert embedding_clusters(_unit([[1, 2, 3]])) == [0]
    assert embedding_clusters(np.zeros((0, 3), dtype=np.float32)) == []


def test_within_cluster_pairs_are_ordered_pairs_inside_clusters():
    assert sorted(within_cluster_pairs([0, 1, 0, 0])) == [(0, 2), (0, 3), (2, 0), (2, 3), (3, 0), (3, 2)]


ENTAIL = (0.9, 0.05, 0.05)
NEUTRAL = (0.2, 0.7, 0.1)
CONTRADICT = (0.05, 0.15, 0.8)


def test_refine_splits_contradictions_and_one_way_entailment():
    # 0, 1 and 2 are one embedding cluster; 0 and 1 mutually entail; 2 contradicts 0; 3 is alone.
    labels = [0, 0, 0, 1]
    probabilities = {pair: ENTAIL for pair in within_cluster_pairs(labels)}
    probabilities[(0, 2)] = probabilities[(2, 0)] = CONTRADICT
    probabilities[(1, 2)] = ENTAIL
    probabilities[(2, 1)] = NEUTRAL  # 2 entails 1 only one way: not the same meaning
    assert refine_with_entailment(labels, probabilities) == [0, 0, 1, 2]


def test_refine_keeps_a_cluster_whose_members_mutually_entail():
    labels = [0, 0, 0]
    probabilities = {pair: ENTAIL for pair in within_cluster_pairs(labels)}
    assert refine_with_entailment(labels, probabilities) == [0, 0, 0]


def test_refine_split_rule_needs_low_entailment_and_high_contradiction():
    labels = [0, 0]
    # Contradiction 0.55 but entailment 0.4 (not < 0.3), and entailment is not the top class:
    # no contradiction split, but no mutual entailment either, so still two clusters.
    probabilities = {(0, 1): (0.4, 0.05, 0.55), (1, 0): ENTAIL}
    assert refine_with_entailment(labels, probabilities) == [0, 1]
    probabilities = {(0, 1): (0.5, 0.1, 0.4), (1, 0): ENTAIL}
    assert refine_with_entailment(labels, probabilities) == [0, 0]
