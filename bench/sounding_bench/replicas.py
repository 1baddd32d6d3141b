"""`sounding eval replicas`: several orchestrators on one store (README, "Scaling out").

Protocol, fixed before the first run:
- One models sidecar and up to three orchestrators of the run's own, each with its own Ray
  runtime, all on one store (a local directory emptied first); the first `documents` documents
  of a BEIR corpus are ingested through the first orchestrator, and the split's query texts,
  cycled, are what is retrieved. Everything runs on this machine's cores: with two, more
  orchestrators share the same CPUs, so the throughput figures show the cost of the extra
  processes, not scaling (the result records the core count).
- Propagation (two orchestrators A and B, the defaults): `trials` times, for the next query, B's
  plan scores are read twice (a Retrieve with every selectable arm requested, cancelled at its
  Plan event: each arm's score is then the upper score of its own one-arm plan, a function of
  the learned state and the query alone; a trial whose two reads differ is void: B's scores
  move by themselves, so there is no change to wait for), the query is retrieved on A and its
  outcome (the top hit used, feedback "helpful") observed on A, and A's plan scores read again
  (a trial where they did not move is void: the outcome carries no signal); from A's
  acknowledgement, B's plan scores are read back to back until they equal A's (to 1e-6,
  relative), for up to PROPAGATION_TIMEOUT_S (else counted unseen). The delay is to the end of
  the first read that equals, an upper bound (one read's latency is in it; their median is
  reported).
- Shared state's cost (one orchestrator): the default (the store followed every 0.5 s) against
  following it every 60 s (the longest setting: the single process of before followed nothing),
  alternating, `rounds` rounds each, each on an orchestrator started for it on the store as it
  was when the phase began (copied then and put back before every round, so every round starts
  from the same documents and learned state): `clients` threads run Retrieves back to back for
  `seconds`, then one Observe stream carries an outcome for each of those retrievals, timed to
  its acknowledgement. Per mode, pooled over its rounds: Retrieve p50 and p95, Retrieves/s,
  Observe events/s; and shared / single.
- Throughput through Envoy (`sounding_bench.balancer`) in front of 1, 2 and 3 orchestrators:
  `clients` threads running Retrieves back to back for `seconds`: Retrieves/s, p50, p95.
In this order: propagation; throughput (on A, then A and B, then a third); shared state's cost.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from sounding.settings.config import Settings
from sounding.stack import Stack

from sounding_bench import beir
from sounding_bench.balancer import Envoy
from sounding_bench.harness import INGEST_BATCH, free_port
from sounding_bench.retrieval import fit_queries

PROPAGATION_TIMEOUT_S = 60.0
TOP_K = 10
COLLECTION = "replicas"
FOLLOW_EVERY = {"shared": "0.5", "single": "60"}


@dataclass(frozen=True)
class ReplicasRun:
    data: Path
    split: str
    documents: int = 500
    trials: int = 30
    rounds: int = 2
    clients: int = 4
    seconds: float = 30.0
    own_sidecar: bool = True  # else the one at `settings.models.address`


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 1)


def plan_scores(client, query: str, arms: tuple[str, ...] = ()) -> dict[str, float]:
    """The orchestrator's plan scores for `query` with `arms` requested (the selector's own plan
    when none are), from a Retrieve cancelled at its Plan."""
    from sounding_client import Plan

    for event in client.retrieve(COLLECTION, query, top_k=TOP_K, arms=list(arms)):
        if isinstance(event, Plan):
            return {a.arm: round(a.score, 9) for a in event.arms}
    raise RuntimeError("a Retrieve without a Plan")


class Orchestrators:
    """The run's sidecar and its orchestrators on one store, stopped on `close`."""

    def __init__(self, settings: Settings, console: Console):
        self.settings = settings
        self.console = console
        self.sidecar = Stack(settings, log_dir=settings.data_dir / "logs" / "sidecar")
        self.started = 0

    def start(self, env: dict[str, str] | None = None) -> Stack:
        self.started += 1
        settings = self.settings.model_copy(update={"address": f"127.0.0.1:{free_port()}"})
        orchestrator = Stack(settings, env=env, log_dir=self.settings.data_dir / "logs" / f"o{self.started}")
        with self.console.status(f"starting orchestrator {self.started}"):
            orchestrator.start_orchestrator()
        return orchestrator


def closed_loop(
    address: str, queries: list[str], clients: int, seconds: float
) -> tuple[list[float], list[tuple[str, str]]]:
    """`clients` threads running Retrieves back to back for `seconds`: each one's latency, and
    each retrieval's id with its top hit's document id ("" for none), in the order made."""
    from sounding_client import Client

    latencies: list[float] = []
    made: list[tuple[str, str]] = []  # (retrieval id, top hit)
    failures: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(start: int) -> None:
        with Client(address, timeout=120) as client:
            i = start
            while time.monotonic() < deadline:
                began = time.perf_counter()
                try:
                    final = client.retrieve_final(
                        COLLECTION, queries[i % len(queries)], top_k=TOP_K, omit_text=True
                    )
                except Exception as error:  # counted, never hidden
                    with lock:
                        failures.append(type(error).__name__)
                    continue
                finally:
                    i += clients
                with lock:
                    latencies.append(time.perf_counter() - began)
                    made.append((final.retrieval_id, final.hits[0].document_id if final.hits else ""))

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} Retrieves failed: {sorted(set(failures))}")
    return latencies, made


def load_figures(latencies: list[float], seconds: float) -> dict:
    return {
        "retrieves": len(latencies),
        "retrieves_per_s": round(len(latencies) / seconds, 2),
        "p50_ms": _ms(statistics.median(latencies)),
        "p95_ms": _ms(_percentile(latencies, 0.95)),
    }


def _same(first: dict[str, float], second: dict[str, float]) -> bool:
    return first.keys() == second.keys() and all(
        abs(first[arm] - second[arm]) <= 1e-6 * max(1.0, abs(first[arm])) for arm in first
    )


def propagation(a: Stack, b: Stack, queries: list[str], trials: int) -> dict:
    """The protocol's propagation trials from A to B (both running)."""
    from sounding_client import Client, RetrievalOutcome

    delays, reads, void = [], [], {"unchanged_on_a": 0, "unsteady_on_b": 0}
    unseen = 0
    with Client(a.settings.address) as here, Client(b.settings.address) as there:
        arms = tuple(plan_scores(here, queries[0]))  # every arm the selector chooses among
        for trial in range(trials):
            query = queries[trial % len(queries)]
            before_here, before_there = plan_scores(here, query, arms), plan_scores(there, query, arms)
            if not _same(plan_scores(there, query, arms), before_there):
                void["unsteady_on_b"] += 1  # reading B's plan moved it: no signal to wait for
                continue
            final = here.retrieve_final(COLLECTION, query, top_k=TOP_K, omit_text=True)
            top = (final.hits[0].document_id,) if final.hits else ()
            here.observe([RetrievalOutcome(final.retrieval_id, top, feedback="helpful")])
            acknowledged = time.perf_counter()
            after_here = plan_scores(here, query, arms)
            if _same(after_here, before_here):
                void["unchanged_on_a"] += 1
                continue
            while True:
                started = time.perf_counter()
                arrived = _same(plan_scores(there, query, arms), after_here)
                reads.append(time.perf_counter() - started)
                if arrived:
                    delays.append(time.perf_counter() - acknowledged)
                    break
                if time.perf_counter() - acknowledged > PROPAGATION_TIMEOUT_S:
                    unseen += 1
                    break
    return {
        "trials": trials,
        "arms_requested": list(arms),
        "measured": len(delays),
        "void": void,
        "unseen_within_timeout": unseen,
        "delay_p50_s": round(statistics.median(delays), 3) if delays else None,
        "delay_p95_s": round(_percentile(delays, 0.95), 3) if delays else None,
        "delay_max_s": round(max(delays), 3) if delays else None,
        "plan_read_p50_ms": _ms(statistics.median(reads)) if reads else None,
        "delays_s": [round(d, 3) for d in delays],
    }


def shared_state_cost(
    orchestrators: Orchestrators, queries: list[str], spec: ReplicasRun, console: Console
) -> dict:
    from sounding_client import Client, RetrievalOutcome

    pooled: dict[str, dict[str, list[float]]] = {
        m: {"latencies": [], "observe_rates": []} for m in FOLLOW_EVERY
    }
    store = Path(orchestrators.settings.store_location.uri)  # the run's own local directory
    snapshot = store.with_name(f"{store.name}-at-start")
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(store, snapshot)
    rounds = []
    for round_ in range(spec.rounds):
        for mode, every in FOLLOW_EVERY.items():
            console.print(f"round {round_ + 1}: following the store every {every} s")
            shutil.rmtree(store)
            shutil.copytree(snapshot, store)
            orchestrator = orchestrators.start({"SOUNDING_STORE__FOLLOW_INTERVAL_S": every})
            try:
                latencies, made = closed_loop(
                    orchestrator.settings.address, queries, spec.clients, spec.seconds
                )
                outcomes = []
                for retrieval_id, top in made:
                    outcomes.append(RetrievalOutcome(retrieval_id, (top,) if top else ()))
                with Client(orchestrator.settings.address, timeout=300) as client:
                    started = time.perf_counter()
                    recorded = client.observe(outcomes).recorded
                    observe_s = time.perf_counter() - started
            finally:
                orchestrator.stop()
            pooled[mode]["latencies"] += latencies
            pooled[mode]["observe_rates"].append(recorded / observe_s)
            rounds.append(
                {
                    "round": round_ + 1,
                    "mode": mode,
                    "follow_interval_s": float(every),
                    **load_figures(latencies, spec.seconds),
                    "observe_events": len(outcomes),
                    "observe_recorded": recorded,
                    "observe_events_per_s": round(recorded / observe_s, 1),
                }
            )
    modes = {
        mode: {
            "retrieve_p50_ms": _ms(statistics.median(p["latencies"])),
            "retrieve_p95_ms": _ms(_percentile(p["latencies"], 0.95)),
            "retrieves_per_s": round(len(p["latencies"]) / (spec.seconds * spec.rounds), 2),
            "observe_events_per_s": round(statistics.mean(p["observe_rates"]), 1),
        }
        for mode, p in pooled.items()
    }
    shared, single = modes["shared"], modes["single"]
    return {
        "rounds": rounds,
        "modes": modes,
        "shared_over_single": {
            # Speeds: above 1 is faster shared. Latency: single's p50 over shared's (the same sense).
            "retrieve_p50_speed": round(single["retrieve_p50_ms"] / shared["retrieve_p50_ms"], 3),
            "retrieves_per_s": round(shared["retrieves_per_s"] / single["retrieves_per_s"], 3),
            "observe_events_per_s": round(shared["observe_events_per_s"] / single["observe_events_per_s"], 3),
        },
    }


def throughput(
    orchestrators: Orchestrators, running: list[Stack], queries: list[str], spec: ReplicasRun
) -> list[dict]:
    """Through Envoy in front of 1, 2 and 3 orchestrators (those running first, then more started
    and appended to `running`)."""
    results = []
    for count in (1, 2, 3):
        while len(running) < count:
            running.append(orchestrators.start())
        log_dir = orchestrators.settings.data_dir / "logs" / f"envoy-{count}"
        with Envoy([r.settings.address for r in running[:count]], log_dir) as envoy:
            orchestrators.console.print(
                f"{spec.clients} clients through Envoy in front of {count} orchestrators"
            )
            latencies, _ = closed_loop(envoy.address, queries, spec.clients, spec.seconds)
        results.append({"orchestrators": count, **load_figures(latencies, spec.seconds)})
    return results


def run(spec: ReplicasRun, settings: Settings, console: Console) -> dict:
    from sounding_client import Client

    dataset = beir.load(spec.data, spec.split)
    texts, query_record = fit_queries(dataset.queries, settings.limits.retrieve.max_query_chars, "truncate")
    queries = list(texts.values())
    shutil.rmtree(settings.data_dir, ignore_errors=True)
    orchestrators = Orchestrators(settings, console)
    if spec.own_sidecar:
        with console.status("starting the models sidecar"):
            orchestrators.sidecar.start_models()
    try:
        running = [orchestrators.start()]
        try:
            with Client(running[0].settings.address, timeout=600) as client:
                client.create_collection(
                    COLLECTION, f"the first {spec.documents} documents of {dataset.name}"
                )
                started = time.perf_counter()
                list(client.ingest(COLLECTION, dataset.corpus[: spec.documents], batch_size=INGEST_BATCH))
                ingest_s = time.perf_counter() - started
            running.append(orchestrators.start())
            console.print("propagation of an outcome from one orchestrator to another")
            delay = propagation(running[0], running[1], queries, spec.trials)
            scaling = throughput(orchestrators, running, queries, spec)
        finally:
            for orchestrator in running:
                orchestrator.stop()
        cost = shared_state_cost(orchestrators, queries, spec, console)
    finally:
        orchestrators.sidecar.stop()
    return {
        "dataset": dataset.name,
        "split": spec.split,
        "queries": query_record,
        "machine": {"cores": os.cpu_count()},
        "protocol": {
            "documents": spec.documents,
            "trials": spec.trials,
            "rounds": spec.rounds,
            "clients": spec.clients,
            "seconds": spec.seconds,
            "top_k": TOP_K,
            "propagation_timeout_s": PROPAGATION_TIMEOUT_S,
            "follow_interval_s": {mode: float(every) for mode, every in FOLLOW_EVERY.items()},
        },
        "ingest_s": round(ingest_s, 1),
        "propagation": delay,
        "shared_state_cost": cost,
        "throughput": scaling,
    }
