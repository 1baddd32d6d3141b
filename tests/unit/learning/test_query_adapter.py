import numpy as np
import pytest
from sounding.core.fusion import MIN_MAX, RRF, Fusion
from sounding.learning import query_adapter as qa
from sounding.learning.query_adapter import Outcome, QueryAdapter, fit_and_validate

pytestmark = pytest.mark.unit


def unit(rows):
    rows = np.asarray(rows, dtype=float)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def outcomes(problem, systematic: bool, others=None) -> list[Outcome]:
    used = problem.used(systematic)
    return [Outcome(q, used[t], others(t) if others else {}) for t, q in enumerate(problem.queries)]


def test_an_adapter_round_trips_through_its_stored_parameters():
    matrix = np.random.default_rng(0).normal(size=(5, 5)).astype(np.float32)
    adapter = QueryAdapter(3, matrix, 1234, 2.0)
    again = QueryAdapter.from_params(3, adapter.params())
    assert again.version == 3 and again.collection_create_time_us == 1234
    assert again.fusion_weights == {"dense": 2.0}
    assert np.array_equal(again.matrix, matrix)
    vector = unit([1, 2, 3, 4, 5])
    assert np.linalg.norm(again.search_vector(vector)) == pytest.approx(1.0, abs=1e-6)


def test_the_holdout_decides_the_deployment(preference_problem):
    p = preference_problem(120, seed=0)
    fitted = fit_and_validate(outcomes(p, systematic=True), p.documents, p.pool, incumbent=None)
    d = fitted.diagnostics
    assert d["holdout_size"] == 24 and d["training_size"] == 96 and d["pool_chunks"] == 240
    assert d["holdout_ndcg_at_10_incumbent"] == d["holdout_ndcg_at_10_base"]
    assert d["holdout_ndcg_at_10_candidate"] > d["holdout_ndcg_at_10_base"] + 0.1
    assert fitted.deploy
    # No other arm ran: the dense arm's weight stays 1.
    assert fitted.dense_fusion_weight == 1.0 and d["fusion_holdout_size"] == 0
    # Against an incumbent that already ranks as well, a refit is not deployed unless better.
    again = fit_and_validate(outcomes(p, systematic=True), p.documents, p.pool, incumbent=fitted.matrix)
    incumbent = again.diagnostics["holdout_ndcg_at_10_incumbent"]
    assert incumbent == pytest.approx(d["holdout_ndcg_at_10_candidate"])
    assert again.deploy is False


def test_nothing_is_deployed_where_the_base_embeddings_rank_the_used_documents_first(preference_problem):
    p = preference_problem(60, seed=0)
    fitted = fit_and_validate(outcomes(p, systematic=False), p.documents, p.pool, incumbent=None)
    assert fitted.diagnostics["holdout_ndcg_at_10_base"] == pytest.approx(1.0)
    assert fitted.deploy is False


def test_too_few_outcomes_are_refused(preference_problem):
    p = preference_problem(qa.MIN_OUTCOMES - 1)
    with pytest.raises(ValueError, match="at least"):
        fit_and_validate(outcomes(p, systematic=True), p.documents, p.pool, incumbent=None)


def test_the_dense_weight_is_the_one_whose_fusion_ranks_the_held_out_documents_best(preference_problem):
    p = preference_problem(120, seed=0)
    # The other arm ranks each topic's near page first and its used page 10th: the better the
    # adapted dense ranking, the more weight it earns against it.
    filler = [f"near{t}" for t in range(1, 10)]

    def lexical(topic: int) -> dict[str, list[str]]:
        return {"lexical": [f"near{topic}", *[f for f in filler if f != f"near{topic}"][:8], f"used{topic}"]}

    fitted = fit_and_validate(outcomes(p, True, lexical), p.documents, p.pool, incumbent=None)
    d = fitted.diagnostics
    assert d["fusion_holdout_size"] == 24
    by_weight = {w: d[f"holdout_fused_ndcg_at_10_dense_weight_{w:g}"] for w in qa.DENSE_FUSION_WEIGHTS}
    assert fitted.dense_fusion_weight == max(by_weight, key=lambda w: by_weight[w])
    assert fitted.dense_fusion_weight > 1.0 and by_weight[fitted.dense_fusion_weight] > by_weight[1.0]


def scored_outcomes(p, lexical) -> list[Outcome]:
    """The systematic problem's outcomes, each with the other arm's ranking and scores `lexical(t)`."""
    used = p.used(systematic=True)
    return [
        Outcome(q, used[t], {"lexical": [d for d, _ in lexical(t)]}, {"lexical": [s for _, s in lexical(t)]})
        for t, q in enumerate(p.queries)
    ]


def fillers(topic: int, count: int) -> list[str]:
    return [f"near{t}" for t in range(20, 40) if t != topic][:count]


def test_min_max_fusion_is_kept_with_the_adapter_where_it_ranks_the_held_out_documents_best(
    preference_problem,
):
    p = preference_problem(120, seed=0)

    # The other arm ranks the near page first and the used one 6th, a hair below it: RRF sees
    # only the ranks, min-max sees that the other arm hardly tells them apart.
    def lexical(topic: int) -> list[tuple[str, float]]:
        head = [(f"near{topic}", 10.0), *((f, 9.999 - 0.001 * i) for i, f in enumerate(fillers(topic, 4)))]
        return [*head, (f"used{topic}", 9.99), *((f, 0.0) for f in fillers(topic, 9)[4:])]

    fitted = fit_and_validate(scored_outcomes(p, lexical), p.documents, p.pool, incumbent=None)
    d = fitted.diagnostics
    assert fitted.fusion == MIN_MAX and d["fusion_min_max"] == 1.0 and d["fusion_holdout_size"] == 24
    best_rrf = max(d[f"holdout_fused_ndcg_at_10_dense_weight_{w:g}"] for w in qa.DENSE_FUSION_WEIGHTS)
    assert d[f"holdout_min_max_ndcg_at_10_dense_weight_{fitted.dense_fusion_weight:g}"] > best_rrf
    adapter = QueryAdapter(1, fitted.matrix, 0, fitted.dense_fusion_weight, fitted.fusion)
    assert QueryAdapter.from_params(1, adapter.params()).fusion == MIN_MAX


def test_rrf_is_chosen_where_the_logged_scores_mislead_min_max(preference_problem):
    p = preference_problem(120, seed=0)

    # The other arm scores its near page a hundred times its used one, which RRF reads as one rank.
    def lexical(topic: int) -> list[tuple[str, float]]:
        tail = [(f, 0.9 - 0.1 * i) for i, f in enumerate(fillers(topic, 8))]
        return [(f"near{topic}", 100.0), (f"used{topic}", 1.0), *tail]

    fitted = fit_and_validate(scored_outcomes(p, lexical), p.documents, p.pool, incumbent=None)
    d = fitted.diagnostics
    assert fitted.fusion == RRF and d["fusion_min_max"] == 0.0
    best_min_max = max(d[f"holdout_min_max_ndcg_at_10_dense_weight_{w:g}"] for w in qa.DENSE_FUSION_WEIGHTS)
    assert d[f"holdout_fused_ndcg_at_10_dense_weight_{fitted.dense_fusion_weight:g}"] > best_min_max


def test_without_logged_scores_the_fusion_stays_rrf(preference_problem):
    p = preference_problem(120, seed=0)
    logged = scored_outcomes(p, lambda t: [(f"near{t}", 1.0)])
    unscored = [Outcome(o.embedding, o.needed, o.other_rankings) for o in logged]
    fitted = fit_and_validate(unscored, p.documents, p.pool, incumbent=None)
    assert fitted.fusion == RRF and fitted.diagnostics["fusion_holdout_size"] == 24
    assert not any(key.startswith("holdout_min_max") for key in fitted.diagnostics)
    params = QueryAdapter(1, fitted.matrix, 0).params()
    del params["fusion"]
    assert QueryAdapter.from_params(1, params).fusion == RRF  # adapters fitted before the choice


def test_the_held_out_min_max_fusion_reads_the_logged_scores():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]

    def top(lexical_scores: list[float]) -> str:
        outcome = Outcome(np.ones(2), {"a"}, {"lexical": ["b", "a", "c"]}, {"lexical": lexical_scores})
        return qa._fused(dense, outcome, Fusion(MIN_MAX), 1.0)[0]

    # The other arm's near tie leaves the dense arm's first; its wide gap puts its own first.
    assert top([1.0, 0.999, 0.0]) == "a"
    assert top([1.0, 0.0, 0.0]) == "b"
