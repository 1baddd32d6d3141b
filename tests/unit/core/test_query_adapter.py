import numpy as np
import pytest
from scipy.optimize import check_grad
from sounding.core import query_adapter

pytestmark = pytest.mark.unit


def unit(rows):
    rows = np.asarray(rows, dtype=float)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_adapted_maps_and_normalises():
    matrix = np.array([[2.0, 0.0], [0.0, 0.0]])
    assert query_adapter.adapted(matrix, np.array([0.6, 0.8])) == pytest.approx([1.0, 0.0])
    assert query_adapter.adapted(np.eye(2), unit([[3, 4], [1, 0]])) == pytest.approx(unit([[3, 4], [1, 0]]))


def test_documents_rank_by_their_best_chunk_and_ndcg_is_computed_by_hand():
    pool = unit([[1, 0], [0.9, 0.1], [0, 1], [0.5, 0.5]])
    documents = np.array(["a", "a", "b", "c"], dtype=object)
    rankings = query_adapter.ranked_ids(
        query_adapter.scored_document_rankings(unit([[1, 0.2], [0, 1]]), pool, documents)
    )
    assert rankings == [["a", "c", "b"], ["b", "c", "a"]]
    assert query_adapter.ranked_ids(
        query_adapter.scored_document_rankings(unit([[1, 0.2]]), pool, documents, depth=2)
    ) == [["a", "c"]]
    first = rankings[:1]
    assert query_adapter.ndcg_at_10(first, [{"a"}]) == pytest.approx(1.0)
    assert query_adapter.ndcg_at_10(first, [{"c"}]) == pytest.approx(1 / np.log2(3))
    expected = (1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3))
    assert query_adapter.ndcg_at_10(first, [{"a", "b"}]) == pytest.approx(expected)
    assert query_adapter.ndcg_at_10(rankings, [{"c"}, {"b"}]) == pytest.approx((1 / np.log2(3) + 1) / 2)


def loss(matrix_flat, queries, positives, pool, temperature, regularization):
    d = queries.shape[1]
    w = matrix_flat.reshape(d, d)
    mapped = queries @ w.T
    mapped /= np.linalg.norm(mapped, axis=1, keepdims=True)
    logits = mapped @ pool.T / temperature
    total = 0.0
    for i, rows in enumerate(positives):
        total += np.log(np.exp(logits[i]).sum()) - np.log(np.exp(logits[i, rows]).sum())
    return total / len(positives) + regularization * np.sum((w - np.eye(d)) ** 2)


def test_the_fit_follows_the_exact_gradient_of_its_stated_loss(monkeypatch):
    rng = np.random.default_rng(0)
    queries, pool = unit(rng.normal(size=(6, 4))), unit(rng.normal(size=(9, 4)))
    positives = [np.array([i, i + 3]) for i in range(6)]
    seen = {}

    def capture(function, start, **options):
        near_start = start + rng.normal(scale=0.1, size=start.shape)
        seen["error"] = check_grad(lambda w: function(w)[0], lambda w: function(w)[1], near_start)
        seen["loss"] = function(start)[0]
        return type("Result", (), {"x": start})()

    monkeypatch.setattr(query_adapter, "minimize", capture)
    query_adapter.fit(queries, positives, pool, temperature=0.5, regularization=0.1)
    assert seen["error"] < 1e-5
    assert seen["loss"] == pytest.approx(loss(np.eye(4).ravel(), queries, positives, pool, 0.5, 0.1))


def test_a_systematic_preference_is_learned_and_carries_to_unseen_queries(preference_problem):
    problem = preference_problem(120)
    used = problem.used(systematic=True)
    train, test = slice(0, 90), slice(90, None)
    rows = [np.array([problem.topics + t]) for t in range(90)]
    matrix = query_adapter.fit(problem.queries[train], rows, problem.pool)
    held = problem.queries[test]
    pool, documents = problem.pool, problem.documents
    before = query_adapter.ndcg_at_10(
        query_adapter.ranked_ids(query_adapter.scored_document_rankings(held, pool, documents)), used[test]
    )
    adapted = query_adapter.adapted(matrix, held)
    after = query_adapter.ndcg_at_10(
        query_adapter.ranked_ids(query_adapter.scored_document_rankings(adapted, pool, documents)), used[test]
    )
    assert before < 0.65 and after > 0.8


def test_every_query_needs_a_used_chunk():
    with pytest.raises(ValueError):
        query_adapter.fit(unit([[1, 0]]), [np.array([], dtype=int)], unit([[1, 0]]))
