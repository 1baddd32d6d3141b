"""Ranking metrics as BEIR reports them (trec_eval conventions, linear gains)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def ndcg_at_k(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """nDCG@k = DCG@k / ideal DCG@k with DCG = sum_i rel_i / log2(i + 1), i from 1."""
    dcg = sum(relevance.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted((r for r in relevance.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, r in relevance.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def beir_scores(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]
) -> dict[str, float]:
    """Mean nDCG@10 and recall@100 over the given queries, rounded as the bench tables show them."""
    return {
        "ndcg@10": round(float(np.mean([ndcg_at_k(rankings[q], qrels[q], 10) for q in query_ids])), 4),
        "recall@100": round(float(np.mean([recall_at_k(rankings[q], qrels[q], 100) for q in query_ids])), 4),
    }


def without_self(query_id: str, ids: Sequence[str]) -> list[str]:
    """The ranking without the query's own id (BEIR drops a document that is the query)."""
    return [d for d in ids if d != query_id]


def percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    values = np.asarray(values_ms, dtype=float)
    return {
        "latency_ms_p50": round(float(np.percentile(values, 50)), 3),
        "latency_ms_p95": round(float(np.percentile(values, 95)), 3),
    }
