import asyncio
import time

import numpy as np
import pytest
from sounding.core.clustering import (
    canonical,
    embedding_clusters,
    exact_clusters,
    refine_with_entailment,
    renumber,
)

pytestmark = pytest.mark.unit


def test_canonical_folds_case_space_and_edge_punctuation():
    assert canonical("  The Butler,  did it! ") == "the butler, did it"
    assert canonical('"0435"') == "0435"


def test_canonical_is_linear_on_long_punctuation_runs():
    started = time.perf_counter()
    assert canonical("a" + "!" * 200_000 + "a") == "a" + "!" * 200_000 + "a"
    assert canonical("!" * 200_000) == ""
    assert time.perf_counter() - started < 10  # the old end-anchored regex took minutes


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


ENTAIL = (0.9, 0.05, 0.05)
NEUTRAL = (0.2, 0.7, 0.1)
CONTRADICT = (0.05, 0.15, 0.8)


class Scorer:
    """`entail` over a table of pair probabilities (ENTAIL for pairs it lacks), recording calls."""

    def __init__(self, table=None):
        self.table = table or {}
        self.calls: list[list[tuple[int, int]]] = []

    async def __call__(self, pairs):
        self.calls.append(list(pairs))
        return [self.table.get(pair, ENTAIL) for pair in pairs]


def refine(labels, scorer, max_pairs=10_000):
    return asyncio.run(refine_with_entailment(labels, scorer, max_pairs))


def test_refine_splits_contradictions_and_one_way_entailment():
    # 0, 1 and 2 are one embedding cluster; 0 and 1 mutually entail; 2 contradicts 0; 3 is alone.
    scorer = Scorer({(0, 2): CONTRADICT, (2, 0): CONTRADICT, (1, 2): ENTAIL, (2, 1): NEUTRAL})
    assert refine([0, 0, 0, 1], scorer) == [0, 0, 1, 2]


def test_refine_keeps_a_cluster_whose_members_mutually_entail():
    scorer = Scorer()
    assert refine([0, 0, 0], scorer) == [0, 0, 0]
    assert scorer.calls == [[(0, 1), (1, 0), (0, 2), (2, 0)]]  # one round against the first member


def test_refine_split_rule_needs_low_entailment_and_high_contradiction():
    # Contradiction 0.55 but entailment 0.4 (not < 0.3), and entailment is not the top class:
    # no contradiction split, but no mutual entailment either, so still two clusters.
    assert refine([0, 0], Scorer({(0, 1): (0.4, 0.05, 0.55), (1, 0): ENTAIL})) == [0, 1]
    assert refine([0, 0], Scorer({(0, 1): (0.5, 0.1, 0.4), (1, 0): ENTAIL})) == [0, 0]


def test_refine_tries_sub_clusters_in_the_order_they_were_founded():
    # 1 and 2 disagree with 0; 2 agrees with 1, which founded the second sub-cluster; 3 agrees
    # with 0 and with 1, and joins 0 (founded first).
    table = {(0, 1): NEUTRAL, (0, 2): NEUTRAL, (2, 0): NEUTRAL, (1, 0): NEUTRAL}
    scorer = Scorer(table)
    assert refine([0, 0, 0, 0], scorer) == [0, 1, 1, 0]
    assert [len(call) for call in scorer.calls] == [6, 2]


def test_refine_scores_at_most_max_pairs_and_leaves_the_rest_apart():
    everything_differs = {(i, j): NEUTRAL for i in range(50) for j in range(50)}
    scorer = Scorer(everything_differs)
    labels = refine([0] * 50, scorer, max_pairs=300)
    assert sum(len(call) for call in scorer.calls) <= 300
    assert labels == list(range(50))  # nothing merged that was not scored
    unbounded = Scorer(everything_differs)
    refine([0] * 50, unbounded)
    assert sum(len(call) for call in unbounded.calls) == 2 * sum(range(50))
