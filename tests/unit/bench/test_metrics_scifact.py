"""The trec_eval metrics against the hand-written ones they replaced, on SciFact's test queries:
the rankings `sounding eval retrieval` recorded (bench/results/scifact-retrieval.json), SciFact's
test qrels (tests/fixtures), and the figures bench/README.md reported before the swap."""

import json
import math
from pathlib import Path

import pytest
from sounding_bench.beir import read_qrels
from sounding_bench.metrics import beir_scores, per_query

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[3]
RESULT = ROOT / "bench" / "results" / "scifact-retrieval.json"
QRELS = read_qrels(Path(__file__).parents[2] / "fixtures" / "scifact-test-qrels.tsv")
# nDCG@10 and recall@100 of each system as the hand-written metrics computed them (bench/README.md,
# "Retrieval quality and latency", the run before the swap).
BEFORE_THE_SWAP = {
    "dense": (0.6448, 0.9217),
    "lexical": (0.6815, 0.9216),
    "fused": (0.7134, 0.955),
    "ref_bm25s": (0.6617, 0.8759),
    "ref_minilm": (0.6451, 0.925),
    "ref_rrf": (0.6849, 0.9543),
}


def hand_ndcg(ranking, relevance, k):
    dcg = sum(relevance.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted((r for r in relevance.values() if r > 0), reverse=True)[:k]
    return dcg / sum(r / math.log2(i + 2) for i, r in enumerate(ideal))


def hand_recall(ranking, relevance, k):
    relevant = {doc for doc, r in relevance.items() if r > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant)


@pytest.fixture(scope="module")
def rankings() -> dict[str, dict[str, list[str]]]:
    return json.loads(RESULT.read_text())["rankings"]


@pytest.mark.parametrize("system", sorted(BEFORE_THE_SWAP))
def test_trec_eval_agrees_with_the_hand_written_metrics_query_by_query(rankings, system):
    ids = sorted(QRELS)
    assert set(rankings[system]) == set(ids)  # all 300 test queries
    values = per_query(rankings[system], QRELS, ids)
    for q in ids:
        assert values[q]["ndcg@10"] == pytest.approx(hand_ndcg(rankings[system][q], QRELS[q], 10), abs=1e-12)
        assert values[q]["recall@100"] == pytest.approx(hand_recall(rankings[system][q], QRELS[q], 100))


@pytest.mark.parametrize("system", sorted(BEFORE_THE_SWAP))
def test_the_recorded_rankings_score_what_the_bench_reported_before_the_swap(rankings, system):
    scores = beir_scores(rankings[system], QRELS, sorted(QRELS))
    assert (scores["ndcg@10"], scores["recall@100"]) == BEFORE_THE_SWAP[system]
