"""The selector's cold start as a new user meets it (issue 51, item 1), a phase of
`sounding eval throughput`.

Protocol, fixed before the first run: on the harness's collection, before any Retrieve that
names no arms (so the tenant's selector starts at its first planned query), each of the first
`queries` query texts of the split, cycled, is sent twice, in an order alternating per query:
- `no_arms`: a Retrieve naming no arms, as a client sends it by default (top 10 with text);
- `dense_lexical`: the same Retrieve naming `dense` and `lexical`.
A query's latency runs from the call to its Final event. After each `no_arms` Retrieve its
ground truth goes through Observe (the relevant documents in the top 10 "used", the others
"missed"), so the selector learns as it would from an agent that reports outcomes.

Reported: p50 and mean latency of each system over the first `cold_start_queries` queries (the
selector's cold start) and over all, their ratio, each planned query's mode, arms and latency,
how many queries ran each arm, and `GetStrategyMetrics`' arm statistics at the end.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

TOP_K = 10
ARMS = ("dense", "lexical")


def _timed(client, collection: str, query: str, arms: Sequence[str]):
    """The Plan and Final events of a Retrieve, and its latency in ms."""
    from sounding_client import Final, Plan

    events = []
    started = time.perf_counter()
    events.extend(client.retrieve(collection, query, top_k=TOP_K, arms=arms))
    latency_ms = (time.perf_counter() - started) * 1000
    [plan] = [e for e in events if isinstance(e, Plan)]
    [final] = [e for e in events if isinstance(e, Final)]
    return plan, final, latency_ms


def _figures(latencies: Sequence[float]) -> dict:
    return {
        "queries": len(latencies),
        "p50_ms": round(float(np.percentile(latencies, 50)), 1),
        "mean_ms": round(float(np.mean(latencies)), 1),
    }


def run(
    client,
    collection: str,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    count: int,
    cold_start_queries: int,
) -> dict:
    """The protocol above; `queries` are the split's (id → text), `qrels` their judgements."""
    from sounding_client import RetrievalOutcome

    ids = list(queries)
    planned, no_arms, dense_lexical = [], [], []
    for index in range(count):
        query_id = ids[index % len(ids)]
        text = queries[query_id]
        if index % 2:
            dense_lexical.append(_timed(client, collection, text, ARMS)[2])
        plan, final, latency_ms = _timed(client, collection, text, ())
        no_arms.append(latency_ms)
        if not index % 2:
            dense_lexical.append(_timed(client, collection, text, ARMS)[2])
        returned = [hit.document_id for hit in final.hits]
        relevant = {doc for doc, grade in qrels.get(query_id, {}).items() if grade > 0}
        client.observe(
            [
                RetrievalOutcome(
                    final.retrieval_id,
                    used_document_ids=tuple(d for d in returned if d in relevant),
                    missed_document_ids=tuple(sorted(relevant - set(returned))),
                )
            ]
        )
        planned.append(
            {
                "query_id": query_id,
                "mode": plan.mode,
                "arms": [a.arm for a in plan.arms if a.chosen],
                "latency_ms": round(latency_ms, 1),
                "dense_lexical_ms": round(dense_lexical[-1], 1),
            }
        )
    metrics = client.strategy_metrics()
    head = slice(0, cold_start_queries)
    cold = {"no_arms": _figures(no_arms[head]), "dense_lexical": _figures(dense_lexical[head])}
    cold["p50_ratio"] = round(cold["no_arms"]["p50_ms"] / cold["dense_lexical"]["p50_ms"], 3)
    overall = {"no_arms": _figures(no_arms), "dense_lexical": _figures(dense_lexical)}
    overall["p50_ratio"] = round(overall["no_arms"]["p50_ms"] / overall["dense_lexical"]["p50_ms"], 3)
    return {
        "protocol": {"queries": count, "cold_start_queries": cold_start_queries, "top_k": TOP_K},
        "cold_start": cold,
        "all": overall,
        "modes": dict(Counter(p["mode"] for p in planned)),
        "arm_runs": dict(Counter(arm for p in planned for arm in p["arms"])),
        "arm_statistics": [
            {
                "arm": a.arm,
                "runs": a.runs,
                "observed_runs": a.observed_runs,
                "mean_reward": round(a.mean_reward, 4),
                "contribution_rate": round(a.contribution_rate, 4),
                "mean_latency_ms": round(a.mean_latency_ms, 1),
                "mean_cost_ms": round(a.mean_cost_ms, 1),
            }
            for a in metrics.arms
        ],
        "per_query": planned,
    }
