"""`sounding eval retrieval`: BEIR quality and latency through the service, beside in-process
references computed in the same run.

Service systems (over gRPC, one Retrieve per query and system, arms named in the request):
`dense`, `lexical`, `fused` (both arms, the fusion a client gets by default: min-max) and
`fused_rrf` (both arms, RRF k = 60, the fusion before it), searching with the base embeddings.
With `learn_split`, the learned ranking first (`learn_ranking`): that split's queries are
replayed as outcomes through Observe and Calibrate(QUERY_ADAPTER) fits the collection's query
adapter; then `dense_learned`, `fused_learned` (the same requests with the adapter: what a
client gets by default) and `fused_learned_rrf` are measured beside the others. References
(in this process, same machine, same moment): `ref_bm25s`, `ref_minilm` (all-MiniLM-L6-v2
exact cosine scan), `ref_rrf` (their RRF, k = 60), `ref_lancedb_hybrid` (LanceDB's hybrid
query over the same vectors and its full-text index, fused by its RRF reranker: the peer a user
could call in process). Each reference's latency covers the whole query path (tokenise or encode
the query, score, fuse). Systems take
turns query by query, so a drift in the machine's speed affects them alike. A hit whose id
equals the query id is dropped, as BEIR does.

Ingestion goes through the service into a collection named by the corpus content hash, so a
second run reuses it (`--fresh` re-ingests); the in-process corpus embeddings are cached the same
way. The ingest rate is documents per second from the first batch sent to the last acknowledged,
beside the in-process encode rate of the same documents.

With `background_load` > 0 a process keeps one core busy for that share of the time while the
queries run (`sounding_bench.busy_host`), to see how the ratios hold on a busy host.

Before anything is ingested, the queries are checked against the service's query limit
(`SOUNDING_LIMITS__RETRIEVE__MAX_QUERY_CHARS`): longer ones stop the run with their count, or are
truncated or skipped as asked (`long_queries`), and the result says how many. Each measured query
is journalled (`journal`) as it finishes, so an interrupted run resumes with the next one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import threadpoolctl
from rich.console import Console
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench import beir, busy_host
from sounding_bench.harness import calibration_record, collection_of, ingested, serving
from sounding_bench.journal import append_journal, read_journal
from sounding_bench.metrics import beir_scores, percentiles, without_self
from sounding_bench.references import references_for

TOP_K = 100
# The hits an agent reads of a replayed outcome's Retrieve.
SHOWN = 10


LONG_QUERIES = ("fail", "truncate", "skip")


@dataclass(frozen=True)
class RetrievalRun:
    """What a run measures: the BEIR dataset at `data` and the split whose queries are measured,
    on the stack at `address` or one started on the settings (`fresh`: ingest and encode again
    even if cached); `background_load`, `long_queries` (one of `LONG_QUERIES`), `journal` and
    `learn_split` as above."""

    data: Path
    split: str
    address: str | None = None
    fresh: bool = False
    background_load: float = 0.0
    long_queries: str = "fail"
    journal: Path | None = None
    learn_split: str | None = None


def _score(rankings: dict[str, list[str]], dataset: beir.BeirDataset, ids: list[str]) -> dict[str, float]:
    return beir_scores(rankings, dataset.qrels, ids)


def fit_queries(queries: dict[str, str], limit: int, handling: str) -> tuple[dict[str, str], dict]:
    """The queries the service will take: those over `limit` characters stop the run (`fail`),
    or are cut to it (`truncate`) or left out (`skip`); and a record of what was done."""
    long = [q for q, text in queries.items() if len(text) > limit]
    if long and handling == "fail":
        raise ValueError(
            f"{len(long)} of {len(queries)} queries are longer than the service's {limit}-character "
            "limit (SOUNDING_LIMITS__RETRIEVE__MAX_QUERY_CHARS); run with --long-queries truncate or skip"
        )
    kept = {
        q: text[:limit] if q in long else text
        for q, text in queries.items()
        if not (handling == "skip" and q in long)
    }
    return kept, {"limit_chars": limit, "longer": len(long), "handling": handling, "measured": len(kept)}


def run(spec: RetrievalRun, settings: Settings, console: Console) -> dict:
    """The result JSON (the protocol above)."""
    from sounding_client import Client, ExpansionOptions, Final

    dataset = beir.load(spec.data, spec.split)
    queries, query_record = fit_queries(
        dataset.queries, settings.limits.retrieve.max_query_chars, spec.long_queries
    )
    header = {
        "data": str(spec.data),
        "split": spec.split,
        "long_queries": spec.long_queries,
        "background_load": spec.background_load,
        "learn_split": spec.learn_split,
    }
    done = read_journal(spec.journal, header) if spec.journal else {}
    collection = collection_of(dataset)
    cache = settings.cache_dir / "eval"
    cache.mkdir(parents=True, exist_ok=True)

    with serving(settings, spec.address, console) as address, Client(address) as client:
        ingest_record = ingested(
            client, collection, dataset, cache / f"{collection}-ingest.json", spec.fresh, console
        )
        # a corpus smaller than TOP_K + 1 is ranked whole
        encode, references = references_for(
            dataset, cache, collection, TOP_K + 1, spec.fresh, console, settings.models
        )
        ingest_record["inprocess_encode_docs_per_s"] = encode["docs_per_s"]
        ingest_record["service_over_inprocess"] = round(ingest_record["docs_per_s"] / encode["docs_per_s"], 3)
        ingest_record["inprocess_encode_cached"] = encode["cached"]

        # The arms and fusion are measured; the expansion loop is off (`eval calibration` measures it).
        no_loop = ExpansionOptions(max_iterations=0)
        # {system: (arms, learned ranking, fusion: None for the default)}
        service_arms = {
            "dense": (["dense"], False, None),
            "lexical": (["lexical"], False, None),
            "fused": (["dense", "lexical"], False, None),
            "fused_rrf": (["dense", "lexical"], False, "rrf"),
        }
        learning = None
        if spec.learn_split:
            learned_from = beir.load(spec.data, spec.learn_split)
            learning = learn_ranking(
                client, collection, learned_from, spec.learn_split, settings, spec.long_queries, console
            )
            service_arms |= {
                "dense_learned": (["dense"], True, None),
                "fused_learned": (["dense", "lexical"], True, None),
                "fused_learned_rrf": (["dense", "lexical"], True, "rrf"),
            }
        names = [*service_arms, *references.names]
        rankings: dict[str, dict[str, list[str]]] = {name: {} for name in names}
        latencies: dict[str, list[float]] = {name: [] for name in names}
        # Query by query, the references and then each service system, so that every system is
        # timed under the same conditions (this machine's speed drifts over minutes).
        with (
            threadpoolctl.threadpool_limits(1, user_api="blas"),  # as in the strategy workers
            busy_host.background_load(spec.background_load) as load_record,
            progress_bar(console) as progress,
        ):
            task = progress.add_task("references and service", total=len(queries))
            for query_id, text in queries.items():
                if query_id in done:  # measured before the run was interrupted
                    for name in names:
                        rankings[name][query_id] = done[query_id]["rankings"][name]
                        latencies[name].append(done[query_id]["latency_ms"][name])
                    progress.advance(task)
                    continue
                for name, (ranking, latency_ms) in references.search(text).items():
                    rankings[name][query_id] = without_self(query_id, ranking)
                    latencies[name].append(latency_ms)
                for name, (arms, learned, fusion) in service_arms.items():
                    started = time.perf_counter()
                    final = next(
                        e
                        for e in client.retrieve(
                            collection,
                            text,
                            top_k=TOP_K + 1,
                            arms=arms,
                            omit_text=True,
                            expansion=no_loop,
                            learned_ranking=learned,
                            fusion=fusion,
                        )
                        if isinstance(e, Final)
                    )
                    ranking = [h.document_id for h in final.hits]  # decoded within the timing
                    latencies[name].append((time.perf_counter() - started) * 1000)
                    rankings[name][query_id] = without_self(query_id, ranking)
                if spec.journal:
                    record = {
                        "id": query_id,
                        "rankings": {name: rankings[name][query_id] for name in names},
                        "latency_ms": {name: latencies[name][-1] for name in names},
                    }
                    append_journal(spec.journal, header, record)
                progress.advance(task)
        ids = list(queries)
        systems = {
            name: {**_score(rankings[name], dataset, ids), **percentiles(latencies[name])} for name in names
        }

    fused_p50 = systems["fused"]["latency_ms_p50"]
    comparisons = {}
    if learning is not None:
        for name in ("fused_learned", "dense_learned"):
            comparisons[f"{name}_ndcg_minus_ref_lancedb_hybrid"] = round(
                systems[name]["ndcg@10"] - systems["ref_lancedb_hybrid"]["ndcg@10"], 4
            )
        comparisons["fused_learned_minus_fused_ndcg"] = round(
            systems["fused_learned"]["ndcg@10"] - systems["fused"]["ndcg@10"], 4
        )
        comparisons["fused_learned_minus_fused_recall@100"] = round(
            systems["fused_learned"]["recall@100"] - systems["fused"]["recall@100"], 4
        )
        comparisons["fused_learned_minus_fused_learned_rrf_ndcg"] = round(
            systems["fused_learned"]["ndcg@10"] - systems["fused_learned_rrf"]["ndcg@10"], 4
        )
    return {
        "dataset": dataset.name,
        "split": spec.split,
        "queries": len(queries),
        "long_queries": query_record,
        "resumed_queries": len(done),
        "top_k": TOP_K,
        "systems": systems,
        "ingest": ingest_record,
        "background_load": load_record,
        "comparisons": {
            "fused_p50_over_ref_rrf_p50": round(fused_p50 / systems["ref_rrf"]["latency_ms_p50"], 3),
            "fused_p50_minus_ref_lancedb_hybrid_p50_ms": round(
                fused_p50 - systems["ref_lancedb_hybrid"]["latency_ms_p50"], 2
            ),
            "fused_minus_fused_rrf_ndcg": round(
                systems["fused"]["ndcg@10"] - systems["fused_rrf"]["ndcg@10"], 4
            ),
            "fused_minus_fused_rrf_recall@100": round(
                systems["fused"]["recall@100"] - systems["fused_rrf"]["recall@100"], 4
            ),
            # What the default fusion adds to a Retrieve's p50, against RRF in the same run.
            "fused_p50_minus_fused_rrf_p50_ms": round(fused_p50 - systems["fused_rrf"]["latency_ms_p50"], 2),
            "fused_ndcg_minus_ref_lancedb_hybrid": round(
                systems["fused"]["ndcg@10"] - systems["ref_lancedb_hybrid"]["ndcg@10"], 4
            ),
            "dense_ndcg_minus_ref_minilm": round(
                systems["dense"]["ndcg@10"] - systems["ref_minilm"]["ndcg@10"], 4
            ),
            "ingest_service_over_inprocess_encode": ingest_record["service_over_inprocess"],
            **comparisons,
        },
        "learning": learning,
        "notes": "Service queries ask for ids only (omit_text) and top_k = 101 so that 100 remain "
        "after dropping the query's own id.",
        # Each system's ranking of each query (the top 100 document ids, best first).
        "rankings": {name: {q: r[:TOP_K] for q, r in rankings[name].items()} for name in names},
    }


def learn_ranking(
    client,
    collection: str,
    dataset: beir.BeirDataset,
    split: str,
    settings: Settings,
    long_queries: str,
    console: Console,
) -> dict:
    """Replays `dataset`'s queries as an agent's outcomes (of a `fused` Retrieve's top SHOWN hits,
    the relevant ones are used; the relevant ones it was not shown are missed) through Observe,
    then Calibrate(QUERY_ADAPTER); what was replayed and the report. Skipped when the collection
    already searches with an adapter (a run before on this data directory and ingest): then that
    adapter is measured."""
    from sounding_client import ExpansionOptions, Final, Plan, RetrievalOutcome

    queries, query_record = fit_queries(
        dataset.queries, settings.limits.retrieve.max_query_chars, long_queries
    )
    outcomes = []
    with progress_bar(console) as progress:
        task = progress.add_task(f"replaying {split} outcomes", total=len(queries))
        for query_id, text in queries.items():
            events = list(
                client.retrieve(
                    collection,
                    text,
                    top_k=SHOWN + 1,
                    arms=["dense", "lexical"],
                    omit_text=True,
                    expansion=ExpansionOptions(max_iterations=0),
                )
            )
            plan, final = events[0], events[-1]
            if not isinstance(plan, Plan) or not isinstance(final, Final):
                raise RuntimeError(f"the Retrieve of {query_id} ended without its plan or ranking")
            if plan.query_adapter_version:
                return {"split": split, "reused_adapter_version": plan.query_adapter_version}
            shown = without_self(query_id, [h.document_id for h in final.hits])[:SHOWN]
            relevant = {d for d, grade in dataset.qrels[query_id].items() if grade > 0}
            if relevant:
                missed = tuple(sorted(relevant - set(shown)))
                used = tuple(d for d in shown if d in relevant)
                outcomes.append(RetrievalOutcome(final.retrieval_id, used, missed_document_ids=missed))
            progress.advance(task)
    recorded = sum(client.observe(outcomes[i : i + 1000]).recorded for i in range(0, len(outcomes), 1000))
    return {
        "split": split,
        "queries": query_record,
        "outcomes_recorded": recorded,
        "shown": SHOWN,
        **calibration_record(client.calibrate("query_adapter", collection=collection)),
    }
