"""`sounding eval throughput`: closed-loop throughput and latency against concurrency, the service
beside its in-process peers, and the limit this hardware sets (issue 51, item 2).

Protocol, fixed before the first run:
- Corpus: a BEIR dataset's corpus, ingested through the service into a fresh collection of a
  stack of the harness's own whose learning log and calibrations start empty (a new user's
  collection; `harness.own_stack`), its graph built before anything is measured. Queries: the
  split's query texts, cut to the service's query limit, cycled in order.
- Systems:
  - `sounding_default`: Retrieve naming `dense` and `lexical` as a client sends it by default
    (top 10 with their text; the expansion loop as the collection's defaults decide);
  - `sounding_loop_off`: the same request with the expansion loop off (`max_iterations` 0);
  - `lancedb_hybrid`: LanceDB's hybrid query in this process over the same MiniLM vectors, each
    query encoded here (`references.LanceHybrid`);
  - `bm25s_minilm`: bm25s and an exact MiniLM scan in this process, fused by RRF (k = 60).
- A level: `clients` threads, each sending its next query as soon as its last one is answered,
  for `seconds`; a query's latency runs from the call to its final result. Throughput: answered
  queries over the time from the level's start to its last answer. Failures are counted by kind.
- Within a level every system runs once, the order rotated from level to level, so a drift of
  the machine's speed touches them alike.
- The hardware's limit: the query encodes per second the sidecar's encoder sustains alone, one
  caller sending batches of each size in `ENCODER_BATCHES` for `seconds` (the best batch size's
  rate E), and the store's search time per query S (the median over `SEARCH_SAMPLE` queries of a
  LanceDB hybrid search given the query's vector); limit = 1 / (1/E + S) queries per second.
  Each service system's throughput is stated as a share of it.
- Ratios per level: default over hybrid, default over loop off, loop off over the limit.
- Then, unless `cold_start_queries` is 0, the selector's cold start (`cold_start`: its protocol),
  after every level, so its Observes cannot touch the levels' figures.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from sounding.settings.config import Settings

from sounding_bench import beir, cold_start
from sounding_bench.harness import error_kind, own_stack
from sounding_bench.references import References, references_for
from sounding_bench.retrieval import fit_queries

LEVELS = (1, 4, 16, 64)
SECONDS = 20.0
TOP_K = 10
ENCODER_BATCHES = (1, 8, 32, 64)
SEARCH_SAMPLE = 200
COLD_START_QUERIES = 300
SERVICE_SYSTEMS = ("sounding_default", "sounding_loop_off")
SYSTEMS = (*SERVICE_SYSTEMS, "lancedb_hybrid", "bm25s_minilm")


@dataclass(frozen=True)
class ThroughputRun:
    """What a run measures: the BEIR dataset at `data` and the split whose query texts are sent,
    the concurrent clients of each level and the seconds each system runs per level, on a stack
    of the harness's own or the one at `address`."""

    data: Path
    split: str
    levels: tuple[int, ...] = LEVELS
    seconds: float = SECONDS
    address: str | None = None
    # Retrieves naming no arms in the cold-start phase (0: none).
    cold_start_queries: int = COLD_START_QUERIES


def closed_loop(
    call: Callable[[str], object],
    queries: Sequence[str],
    clients: int,
    seconds: float,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """`clients` threads calling `call(query)` back to back for `seconds` of `clock`, the queries
    taken in turn; throughput and latency percentiles of the answered calls, failures by kind
    (a gRPC status code's name, else the exception's)."""
    latencies: list[float] = []
    failures: Counter[str] = Counter()
    turn = itertools.count()
    started = clock()
    stop_at = started + seconds
    last_answer = [started]

    def client() -> None:
        while (sent := clock()) < stop_at:
            query = queries[next(turn) % len(queries)]
            try:
                call(query)
            except Exception as error:  # a failed call is counted, not raised: the level goes on
                failures[error_kind(error)] += 1
                continue
            answered = clock()
            latencies.append(answered - sent)
            last_answer[0] = max(last_answer[0], answered)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return summary(latencies, last_answer[0] - started, clients, dict(failures))


def summary(latencies: Sequence[float], elapsed_s: float, clients: int, failures: dict[str, int]) -> dict:
    """A level's figures: answered queries per second, p50 and p99 latency in ms."""
    answered = len(latencies)
    p50, p99 = np.percentile(latencies, [50, 99]) * 1000 if answered else (None, None)
    return {
        "clients": clients,
        "answered": answered,
        "seconds": round(elapsed_s, 3),
        "qps": round(answered / elapsed_s, 2) if elapsed_s > 0 else 0.0,
        "p50_ms": None if p50 is None else round(float(p50), 1),
        "p99_ms": None if p99 is None else round(float(p99), 1),
        "failures": failures,
    }


def hardware_limit(encodes_per_s: float, search_s: float) -> float:
    """Queries per second when each costs one query encode at the encoder's best rate and one
    search: 1 / (1/E + S)."""
    return 1.0 / (1.0 / encodes_per_s + search_s)


def rotated(systems: Sequence[str], level_index: int) -> list[str]:
    """The order of the systems at a level: rotated by one per level."""
    shift = level_index % len(systems)
    return [*systems[shift:], *systems[:shift]]


def ratios(levels: dict[str, dict[str, dict]], limit_qps: float) -> dict[str, dict[str, float | None]]:
    """Per level: default over hybrid, default over loop off, loop off over the limit."""

    def over(a: float, b: float) -> float | None:
        return round(a / b, 3) if b > 0 else None

    return {
        level: {
            "default_over_hybrid": over(s["sounding_default"]["qps"], s["lancedb_hybrid"]["qps"]),
            "default_over_loop_off": over(s["sounding_default"]["qps"], s["sounding_loop_off"]["qps"]),
            "loop_off_over_limit": over(s["sounding_loop_off"]["qps"], limit_qps),
        }
        for level, s in levels.items()
    }


def encoder_rate(
    models_address: str,
    queries: Sequence[str],
    seconds: float,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """Query encodes per second of the sidecar's encoder alone, per batch size, one caller."""
    from sounding.models.client import ModelsClient

    async def measure() -> dict[str, float]:
        models = ModelsClient(models_address)
        try:
            rates = {}
            for batch in ENCODER_BATCHES:
                encoded, turn = 0, itertools.count()
                started = clock()
                while True:  # one batch at least, however slow
                    texts = [queries[next(turn) % len(queries)] for _ in range(batch)]
                    await models.embed(texts)
                    encoded += batch
                    if (elapsed := clock() - started) >= seconds:
                        break
                rates[str(batch)] = round(encoded / elapsed, 1)
            return rates
        finally:
            await models.close()

    rates = asyncio.run(measure())
    best = max(rates, key=lambda batch: rates[batch])
    return {"per_batch": rates, "best_batch": int(best), "encodes_per_s": rates[best]}


def search_time(references: References, queries: Sequence[str]) -> float:
    """The median seconds of a LanceDB hybrid search given the query's vector."""
    sample = list(queries[:SEARCH_SAMPLE])
    vectors = references.encode(sample)
    times = []
    for text, vector in zip(sample, vectors, strict=True):
        started = time.perf_counter()
        references.hybrid_search(text, vector)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def run(
    spec: ThroughputRun, settings: Settings, console: Console, clock: Callable[[], float] = time.perf_counter
) -> dict:
    """The protocol above on a stack of the harness's own, or on the stack at `spec.address` (the
    result says which); every level and the encoder timed by `clock`."""
    from sounding_client import ExpansionOptions

    dataset = beir.load(spec.data, spec.split)
    queries, query_record = fit_queries(dataset.queries, settings.limits.retrieve.max_query_chars, "truncate")
    texts = list(queries.values())
    cache = settings.cache_dir / "eval"
    cache.mkdir(parents=True, exist_ok=True)
    with own_stack(
        settings, "throughput", dataset, console, include_calibrations=True, address=spec.address
    ) as (client, collection):
        _, references = references_for(dataset, cache, collection, TOP_K, False, console, settings.models)
        loop_off = ExpansionOptions(max_iterations=0)
        calls: dict[str, Callable[[str], object]] = {
            "sounding_default": lambda q: client.retrieve_final(
                collection, q, top_k=TOP_K, arms=["dense", "lexical"]
            ),
            "sounding_loop_off": lambda q: client.retrieve_final(
                collection, q, top_k=TOP_K, arms=["dense", "lexical"], expansion=loop_off
            ),
            "lancedb_hybrid": references.hybrid,
            "bm25s_minilm": references.bm25s_minilm,
        }
        measured: dict[str, dict[str, dict]] = {}
        for index, clients in enumerate(spec.levels):
            measured[str(clients)] = {}
            for system in rotated(SYSTEMS, index):
                console.print(f"{clients} clients: {system}")
                measured[str(clients)][system] = closed_loop(
                    calls[system], texts, clients, spec.seconds, clock
                )
        console.print("the encoder alone")
        encoder = encoder_rate(settings.models.address, texts, spec.seconds, clock)
        search_s = search_time(references, texts)
        selector = None
        if spec.cold_start_queries:
            console.print(f"the selector's cold start: {spec.cold_start_queries} queries naming no arms")
            selector = cold_start.run(
                client,
                collection,
                queries,
                dataset.qrels,
                spec.cold_start_queries,
                settings.retrieval.selection.cold_start_queries,
            )
    limit_qps = hardware_limit(encoder["encodes_per_s"], search_s)
    return {
        "dataset": dataset.name,
        "split": spec.split,
        "stack": {"own": spec.address is None, "address": spec.address},
        "queries": query_record,
        "protocol": {
            "levels": list(spec.levels),
            "seconds": spec.seconds,
            "top_k": TOP_K,
            "systems": list(SYSTEMS),
        },
        "levels": measured,
        "limit": {
            "encoder": encoder,
            "search_ms_p50": round(search_s * 1000, 2),
            "qps": round(limit_qps, 1),
            "service_share": {
                level: {system: round(s[system]["qps"] / limit_qps, 3) for system in SERVICE_SYSTEMS}
                for level, s in measured.items()
            },
        },
        "ratios": ratios(measured, limit_qps),
        "selector_cold_start": selector,
    }


def plot(result: dict) -> bytes:
    """Throughput, p50 and p99 latency against concurrency, one line per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [int(level) for level in result["levels"]]
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for system in result["protocol"]["systems"]:
        rows = [result["levels"][str(level)][system] for level in levels]
        for axis, key in zip(axes, ("qps", "p50_ms", "p99_ms"), strict=True):
            axis.plot(levels, [row[key] for row in rows], marker="o", label=system)
    axes[0].axhline(result["limit"]["qps"], color="grey", linestyle="--", label="encoder + search limit")
    for axis, label in zip(axes, ("queries per second", "p50 latency (ms)", "p99 latency (ms)"), strict=True):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrent clients")
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=8)
    figure.suptitle(f"Closed-loop Retrieve, {result['dataset']} ({result['split']} queries)")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()
