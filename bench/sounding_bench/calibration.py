"""`sounding eval calibration`: are the miss rate and recall a Retrieve states honest, and what
does the expansion loop buy?

On a stack of its own (data directory `<cache>/eval/calibration`; the collection is ingested
once and kept, the learning log and calibrations are emptied at every start), every Retrieve
names the `dense` and `lexical` arms, so the run measures the uncertainty, not the selector:

The train queries are split in two (seeded shuffle): half for each calibration, so the
confidence map learns from retrievals whose stated confidence is as new to the service as a
test query's (a query observed before has its own outcome in the miss history and in the
miss-rate map's fit).

1. Train: each query of the miss-rate half is retrieved (expansion loop on, the deployment's
   defaults) and its ground-truth outcome sent through Observe: the relevant documents in the top
   k are "used", the relevant ones outside it "missed".
2. Test, before calibration: each test query with the loop off, then with it on.
3. Calibrate(MISS_RATE) on the train outcomes.
4. Test, after calibration: each test query with the loop on (it now acts on measured recall).
5. Calibrate(CONFIDENCE): each query of the confidence half (loop on, miss rate now measured),
   its outcome sent with `agent_success` (a relevant document in the top k);
   Calibrate(CONFIDENCE) on those; then each test query once more.

Every Retrieve states a synthesis confidence of 1, so its conservative confidence is 1 − its miss
rate: the confidence passes judge it against success (a relevant document in the top k), by ECE,
before Calibrate(CONFIDENCE) (step 4's pass) and after it (step 5's).

Reported per test pass: the expected calibration error (10 equal-width bins) of the stated
recall of the top k (before calibration 1 − the derived miss rate, after it the measured
recall) against the actual recall@k; the AUROC of the stated miss rate for "a relevant document
is outside the top k"; nDCG@10 and recall@100. The loop's effect compares the loop-on passes
with the loop-off pass: overall, and on the queries the loop expanded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from sklearn.metrics import roc_auc_score
from sounding.cli.plots import calibration_png
from sounding.core.calibration import expected_calibration_error
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench import beir
from sounding_bench.harness import own_stack
from sounding_bench.metrics import beir_scores, per_query, without_self

TOP_K = 100
ARMS = ("dense", "lexical")
SYNTHESIS_CONFIDENCE = 1.0
IN_FLIGHT = 2
# The share of the train queries that calibrates the confidence (the rest: the miss rate), and
# the seed of their split.
CONFIDENCE_SHARE = 0.5
SPLIT_SEED = 0


@dataclass(frozen=True)
class Retrieved:
    retrieval_id: str
    ranking: list[str]
    miss_rate: float
    miss_rate_kind: str
    recall: float | None
    expansions: int
    latency_ms: float
    confidence: float
    confidence_kind: str


@dataclass(frozen=True)
class CalibrationRun:
    """What a run measures: the BEIR dataset at `data`, the split observed and fitted and the
    split judged (each cut to its first `train_limit` and `test_limit` queries if given), and the
    top `k` whose recall is stated and judged."""

    data: Path
    train_split: str
    split: str
    k: int = 10
    train_limit: int | None = None
    test_limit: int | None = None


def run(spec: CalibrationRun, settings: Settings, console: Console) -> tuple[dict, bytes]:
    """The result JSON and the reliability diagram of the calibration (PNG)."""
    from sounding_client import CalibrationReport, Expansion, ExpansionOptions, Final, RetrievalOutcome

    train, test = beir.load(spec.data, spec.train_split), beir.load(spec.data, spec.split)
    train_queries, confidence_queries = split_train(list(train.queries.items())[: spec.train_limit])
    test_queries = list(test.queries.items())[: spec.test_limit]
    loop_off = ExpansionOptions(max_iterations=0)

    with own_stack(settings, "calibration", train, console, include_calibrations=True) as (
        client,
        collection,
    ):

        def retrieve(query_id: str, text: str, expansion) -> Retrieved:
            started = time.perf_counter()
            final, expansions = None, 0
            for event in client.retrieve(
                collection,
                text,
                top_k=TOP_K + 1,
                arms=ARMS,
                omit_text=True,
                expansion=expansion,
                synthesis_confidence=SYNTHESIS_CONFIDENCE,
            ):
                if isinstance(event, Expansion):
                    expansions += 1
                elif isinstance(event, Final):
                    final = event
            miss_rate = final.uncertainty.miss_rate.value if final else None
            if final is None or miss_rate is None:
                raise RuntimeError(f"the Retrieve of {query_id} ended without its ranking and miss rate")
            u = final.uncertainty
            return Retrieved(
                final.retrieval_id,
                without_self(query_id, [h.document_id for h in final.hits])[:TOP_K],
                miss_rate,
                u.miss_rate.kind,
                u.estimated_recall.value,
                expansions,
                (time.perf_counter() - started) * 1000,
                float(final.confidence.value or 0.0),
                final.confidence.kind,
            )

        def each(queries, label: str, work: Callable[[str, str], Retrieved]) -> dict[str, Retrieved]:
            out: dict[str, Retrieved] = {}
            with progress_bar(console) as progress, ThreadPoolExecutor(IN_FLIGHT) as pool:
                task = progress.add_task(label, total=len(queries))
                futures = {pool.submit(work, q, t): q for q, t in queries}
                for future, query_id in futures.items():
                    out[query_id] = future.result()
                    progress.advance(task)
            return out

        def train_one(query_id: str, text: str, success: bool = False) -> Retrieved:
            """The query retrieved and its outcome observed (with agent_success, if asked)."""
            retrieved = retrieve(query_id, text, None)
            relevant = _relevant(train.qrels[query_id])
            top = set(retrieved.ranking[: spec.k])
            ack = client.observe(
                [
                    RetrievalOutcome(
                        retrieved.retrieval_id,
                        tuple(d for d in retrieved.ranking[: spec.k] if d in relevant),
                        agent_success=bool(relevant & top) if success else None,
                        found_missing_content=bool(relevant - top),
                        missed_document_ids=tuple(sorted(relevant - top)),
                    )
                ]
            )
            if ack.recorded != 1:
                raise RuntimeError(f"Observe did not record {query_id}: {ack.rejected}")
            return retrieved

        trained = each(train_queries, f"train ({spec.train_split}), miss-rate half, observed", train_one)
        without_loop = each(test_queries, f"{spec.split}, loop off", lambda q, t: retrieve(q, t, loop_off))
        before = each(test_queries, f"{spec.split}, loop on, uncalibrated", lambda q, t: retrieve(q, t, None))
        report = list(client.calibrate("miss_rate"))[-1]
        if not isinstance(report, CalibrationReport):
            raise RuntimeError("Calibrate(MISS_RATE) ended without its report")
        after = each(test_queries, f"{spec.split}, loop on, calibrated", lambda q, t: retrieve(q, t, None))
        each(
            confidence_queries,
            f"train ({spec.train_split}), confidence half, observed with success",
            lambda q, t: train_one(q, t, True),
        )
        confidence_report = list(client.calibrate("confidence"))[-1]
        if not isinstance(confidence_report, CalibrationReport):
            raise RuntimeError("Calibrate(CONFIDENCE) ended without its report")
        confident = each(
            test_queries, f"{spec.split}, confidence calibrated", lambda q, t: retrieve(q, t, None)
        )

    test_ids = [q for q, _ in test_queries]
    train_recall = _recall({q: r.ranking for q, r in trained.items()}, train.qrels, list(trained), spec.k)
    passes = {
        "loop_off_uncalibrated": without_loop,
        "loop_on_uncalibrated": before,
        "loop_on_calibrated": after,
        "confidence_calibrated": confident,
    }
    result = {
        "dataset": train.name,
        "train_split": spec.train_split,
        "split": spec.split,
        "train_queries": len(train_queries) + len(confidence_queries),
        "train_split_halves": {
            "miss_rate": len(train_queries),
            "confidence": len(confidence_queries),
            "confidence_share": CONFIDENCE_SHARE,
            "seed": SPLIT_SEED,
        },
        "test_queries": len(test_queries),
        "arms": list(ARMS),
        "k": spec.k,
        "train": {
            "observed_miss_share": round(float(np.mean(train_recall < 1.0)), 4),
            "queries_expanded": sum(r.expansions > 0 for r in trained.values()),
        },
        "calibration": {
            "version": report.version,
            "sample_size": report.sample_size,
            "diagnostics_on_train": {
                key: round(value, 4) for key, value in report.diagnostics.items() if "bin" not in key
            },
        },
        "confidence_calibration": {
            "version": confidence_report.version,
            "sample_size": confidence_report.sample_size,
            "deployed": confidence_report.deployed,
            "summary": confidence_report.summary,
            "diagnostics_on_train": {
                key: round(value, 4)
                for key, value in confidence_report.diagnostics.items()
                if "bin" not in key
            },
            f"ece_confidence_for_success@{spec.k}_before": _confidence_ece(after, test, test_ids, spec.k),
            f"ece_confidence_for_success@{spec.k}_after": _confidence_ece(confident, test, test_ids, spec.k),
        },
        "passes": {name: _pass_metrics(p, test, test_ids, spec.k) for name, p in passes.items()},
        "loop_effect": {
            "uncalibrated": _loop_effect(without_loop, before, test, test_ids),
            "calibrated": _loop_effect(without_loop, after, test, test_ids),
        },
        "note": "stated recall before calibration is 1 - the derived miss rate (the service itself "
        "reports recall as absent(uncalibrated) until Calibrate runs); after it, the measured recall",
        # Each test pass's outputs per query: the ranking (top 100 ids), what it stated, expansions.
        "per_query": {
            name: {
                q: {
                    "ranking": r.ranking,
                    "miss_rate": r.miss_rate,
                    "miss_rate_kind": r.miss_rate_kind,
                    "recall": r.recall,
                    "expansions": r.expansions,
                    "confidence": r.confidence,
                    "confidence_kind": r.confidence_kind,
                }
                for q, r in p.items()
            }
            for name, p in passes.items()
        },
    }
    return result, calibration_png(report.curves, f"Calibrate(MISS_RATE) v{report.version}: reliability")


def split_train(queries: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The miss-rate half and the confidence half (CONFIDENCE_SHARE of the queries), each in the
    dataset's order; a seeded shuffle decides which query goes where."""
    order = np.random.default_rng(SPLIT_SEED).permutation(len(queries))
    chosen = set(order[: round(len(queries) * CONFIDENCE_SHARE)].tolist())
    return (
        [q for i, q in enumerate(queries) if i not in chosen],
        [q for i, q in enumerate(queries) if i in chosen],
    )


def _relevant(qrels: dict[str, int]) -> set[str]:
    return {d for d, grade in qrels.items() if grade > 0}


def _recall(rankings: dict[str, list[str]], qrels, ids: list[str], k: int) -> np.ndarray:
    """recall@k of each query of `ids`, in that order."""
    values = per_query(rankings, qrels, ids, (f"recall@{k}",))
    return np.array([values[q][f"recall@{k}"] for q in ids])


def _confidence_ece(retrieved: dict[str, Retrieved], dataset, ids: list[str], k: int) -> float:
    """ECE of the stated confidence against success: a relevant document in the top k."""
    success = [bool(_relevant(dataset.qrels[q]) & set(retrieved[q].ranking[:k])) for q in ids]
    return round(expected_calibration_error([retrieved[q].confidence for q in ids], success), 4)


def _pass_metrics(retrieved: dict[str, Retrieved], dataset, ids: list[str], k: int) -> dict:
    stated_miss = np.array([retrieved[q].miss_rate for q in ids])
    calibrated = retrieved[ids[0]].miss_rate_kind == "measured"
    stated_recall = np.array(
        [retrieved[q].recall if calibrated else 1.0 - retrieved[q].miss_rate for q in ids], dtype=float
    )
    actual_recall = _recall({q: retrieved[q].ranking for q in ids}, dataset.qrels, ids, k)
    missed = actual_recall < 1.0
    return {
        **beir_scores({q: retrieved[q].ranking for q in ids}, dataset.qrels, ids),
        "miss_rate_kind": retrieved[ids[0]].miss_rate_kind,
        f"ece_stated_recall@{k}": round(expected_calibration_error(stated_recall, actual_recall), 4),
        f"mean_stated_recall@{k}": round(float(stated_recall.mean()), 4),
        f"mean_actual_recall@{k}": round(float(actual_recall.mean()), 4),
        f"auroc_miss_rate_for_missed@{k}": (
            round(float(roc_auc_score(missed, stated_miss)), 4) if 0 < missed.sum() < len(ids) else None
        ),
        f"missed_share@{k}": round(float(missed.mean()), 4),
        "queries_expanded": int(sum(retrieved[q].expansions > 0 for q in ids)),
        "mean_expansion_steps": round(float(np.mean([retrieved[q].expansions for q in ids])), 3),
        "mean_latency_ms": round(float(np.mean([retrieved[q].latency_ms for q in ids])), 1),
    }


def _loop_effect(off: dict[str, Retrieved], on: dict[str, Retrieved], dataset, ids: list[str]) -> dict:
    expanded = [q for q in ids if on[q].expansions > 0]
    overall_off = beir_scores({q: off[q].ranking for q in ids}, dataset.qrels, ids)
    overall_on = beir_scores({q: on[q].ranking for q in ids}, dataset.qrels, ids)
    effect = {
        "queries_expanded": len(expanded),
        "ndcg@10_change": round(overall_on["ndcg@10"] - overall_off["ndcg@10"], 4),
        "recall@100_change": round(overall_on["recall@100"] - overall_off["recall@100"], 4),
    }
    if expanded:
        off_expanded = beir_scores({q: off[q].ranking for q in expanded}, dataset.qrels, expanded)
        on_expanded = beir_scores({q: on[q].ranking for q in expanded}, dataset.qrels, expanded)
        effect["expanded_queries"] = {
            "recall@100_without_loop": off_expanded["recall@100"],
            "recall@100_with_loop": on_expanded["recall@100"],
            "ndcg@10_without_loop": off_expanded["ndcg@10"],
            "ndcg@10_with_loop": on_expanded["ndcg@10"],
        }
    return effect
