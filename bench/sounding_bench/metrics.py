"""Ranking metrics as BEIR reports them: trec_eval's (through ir-measures and pytrec_eval, BEIR's
own evaluator), with linear gains; and latency percentiles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

Rankings = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]
# The measures the harnesses report, by the names their results use.
BEIR_MEASURES = ("ndcg@10", "recall@100")


def per_query(
    rankings: Rankings, qrels: Qrels, query_ids: Sequence[str], measures: Sequence[str] = BEIR_MEASURES
) -> dict[str, dict[str, float]]:
    """Each query's value of each measure (`ndcg@k`, `recall@k`, `success@k`, `mrr`) for a ranking
    given as document ids, best first; a query with nothing relevant retrieved (or no ranking)
    scores 0."""
    import ir_measures

    by_measure = {ir_measures.parse_measure(_ir_measures_name(name)): name for name in measures}
    judged = [
        ir_measures.Qrel(q, doc, int(relevance)) for q in query_ids for doc, relevance in qrels[q].items()
    ]
    # trec_eval ranks by score: the position, as a descending score, keeps the given order.
    run = [
        ir_measures.ScoredDoc(q, doc, float(-position))
        for q in query_ids
        for position, doc in enumerate(rankings.get(q, ()))
    ]
    values = {q: dict.fromkeys(measures, 0.0) for q in query_ids}
    for metric in ir_measures.iter_calc(list(by_measure), judged, run):
        values[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    return values


def beir_scores(rankings: Rankings, qrels: Qrels, query_ids: Sequence[str]) -> dict[str, float]:
    """Mean nDCG@10 and recall@100 over the given queries, rounded as the bench tables show them."""
    values = per_query(rankings, qrels, query_ids)
    return {name: round(float(np.mean([values[q][name] for q in query_ids])), 4) for name in BEIR_MEASURES}


def _ir_measures_name(name: str) -> str:
    """`ndcg@10` -> `nDCG@10`, `recall@100` -> `R@100`, `success@5` -> `Success@5`, `mrr` -> `RR`
    (ir-measures' names)."""
    if name == "mrr":
        return "RR"
    measure, _, cutoff = name.partition("@")
    known = {"ndcg": "nDCG", "recall": "R", "success": "Success"}
    if measure not in known or not cutoff.isdigit():
        raise ValueError(f"unknown measure {name!r}: ndcg@k, recall@k, success@k or mrr")
    return f"{known[measure]}@{cutoff}"


def without_self(query_id: str, ids: Sequence[str]) -> list[str]:
    """The ranking without the query's own id (BEIR drops a document that is the query)."""
    return [d for d in ids if d != query_id]


def percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    values = np.asarray(values_ms, dtype=float)
    return {
        "latency_ms_p50": round(float(np.percentile(values, 50)), 3),
        "latency_ms_p95": round(float(np.percentile(values, 95)), 3),
    }


def paired_difference(a: ArrayLike, b: ArrayLike, seed: int, resamples: int = 2000) -> dict:
    """mean(a − b) over paired units (episodes) and its percentile bootstrap 95% interval (None
    from fewer than two units; ValueError from none)."""
    from scipy.stats import bootstrap

    difference = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if difference.size == 0:
        raise ValueError("no paired units")
    if difference.size < 2:
        return {"difference": round(float(difference[0]), 4), "interval_95": None}
    if np.all(difference == difference[0]):
        low = high = float(difference[0])
    else:
        found = bootstrap(
            (difference,),
            np.mean,
            n_resamples=resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = found.confidence_interval
    return {
        "difference": round(float(difference.mean()), 4),
        "interval_95": [round(float(low), 4), round(float(high), 4)],
    }
