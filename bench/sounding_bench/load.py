"""The load and fault suite (`sounding eval load`): concurrent traffic of every kind against a
supervised stack of its own for a fixed time, the resident memory of every process sampled
throughout, and, with `kills`, the sidecar, one strategy worker and the orchestrator killed with
SIGKILL in turn; afterwards, what was acknowledged is checked to be there.

Traffic, all at once:
- `retrieve_streams` threads, each running Retrieves back to back (top 10 of the collection,
  arms chosen by the selector; one in `hyde_every` also asks for HyDE, so generation is part of
  the mix); half of the results are reported with Observe, in batches once a second;
- `inquiry_sessions` threads playing bulls and cows (eig) against an oracle; one game in five
  is left after two questions (to be resumed at the end);
- one thread ingesting a batch of four new documents every `ingest_every_s` seconds;
- health checks every 100 ms.
Every call's latency and outcome is kept; what counts as an error is any failed call but a
deliberate RESOURCE_EXHAUSTED. With kills, calls failing while a process is down (from the kill
until the stack serves again, and 5 s more for clients to reconnect) are counted apart. The
failed calls (the first `MAX_FAILURES_LISTED`, RESOURCE_EXHAUSTED aside) are listed with their
times and messages.

When the stack serves again after a kill: `sounding_bench.crashes`.

Afterwards: every acknowledged observation, sent again, must be refused ALREADY_EXISTS (so it
was kept); the ingested collection must hold every acknowledged document; every inquiry
session must resume. Memory: each process's resident set after the first minute against the
largest it reached later (a restarted process starts its series again).
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench import crashes, load_report
from sounding_bench.fuzz import stack_processes
from sounding_bench.harness import DEMO_CORPUS, DENSE_AND_LEXICAL_ARMS, error_kind, fresh_stack
from sounding_bench.health import HealthWatch

if TYPE_CHECKING:
    from sounding_client import Client

HEALTH_INTERVAL_S = 0.1
MEMORY_INTERVAL_S = 5.0
RECONNECT_S = 5.0
READINESS_INTERVAL_S = 1.0  # how often the orchestrator probes its peers (gateway/readiness.py)
MAX_FAILURES_LISTED = 200  # the first failed calls (deliberate RESOURCE_EXHAUSTED aside) in the result
INGEST_COLLECTION = "load-ingest"
RETRIEVE_COLLECTION = "load"


@dataclass
class Ledger:
    """What the stack acknowledged, to check afterwards; and every call's outcome."""

    observed: list[str] = field(default_factory=list)
    ingested: list[str] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    pending_observations: list = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    outcomes: list[tuple[float, str, str]] = field(default_factory=list)  # (time, rpc, code)
    failures: list[dict] = field(default_factory=list)  # each failed call: when, what, why
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, rpc: str, started: float, code: str = "OK", message: str = "") -> None:
        with self.lock:
            now, elapsed = time.time(), time.perf_counter() - started
            if code == "OK":
                self.latencies[rpc].append(elapsed)
            else:
                failure = {"rpc": rpc, "code": code, "started": now - elapsed, "ended": now}
                self.failures.append({**failure, "message": message[:300]})
            self.outcomes.append((now, rpc, code))

    def failed(self, rpc: str, started: float, error: Exception) -> None:
        self.record(rpc, started, error_kind(error), str(error))


def retrieving(
    client, queries: list[str], ledger: Ledger, stop: threading.Event, hyde_every: int, rng
) -> None:
    from sounding_client import RetrievalOutcome

    count = 0
    while not stop.is_set():
        count += 1
        arms = ("dense", "lexical", "hyde") if hyde_every and count % hyde_every == 0 else ()
        started = time.perf_counter()
        try:
            final = client.retrieve_final(
                RETRIEVE_COLLECTION, rng.choice(queries), top_k=10, arms=arms, omit_text=True, timeout=120
            )
        except Exception as error:
            ledger.failed("Retrieve", started, error)
            stop.wait(0.2)
            continue
        ledger.record("Retrieve", started)
        if final.hits and rng.random() < 0.5:
            with ledger.lock:
                ledger.pending_observations.append(
                    RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,), feedback="helpful")
                )


def observing(client, ledger: Ledger, stop: threading.Event) -> None:
    """Every second, the pending outcomes in one Observe; the recorded ones join the ledger,
    those refused UNAVAILABLE (not logged yet) wait for the next. Once stopped, one last Observe
    for what is pending."""
    last = False
    while not last:
        last = stop.wait(1.0)
        with ledger.lock:
            batch, ledger.pending_observations = ledger.pending_observations, []
        if not batch:
            continue
        started = time.perf_counter()
        try:
            ack = client.observe(batch)
        except Exception as error:
            ledger.failed("Observe", started, error)
            continue
        ledger.record("Observe", started)
        refused = {r.index: r.code for r in ack.rejected}
        with ledger.lock:
            for index, outcome in enumerate(batch):
                if index not in refused:
                    ledger.observed.append(outcome.retrieval_id)
                elif refused[index] == "UNAVAILABLE":
                    ledger.pending_observations.append(outcome)
                else:
                    ledger.outcomes.append((time.time(), "Observe(outcome)", refused[index]))


def inquiring(client, ledger: Ledger, stop: threading.Event, rng) -> None:
    from sounding_client import Ask, InquiryAnswer

    table = bc.feedback_table()
    games = 0
    while not stop.is_set():
        games += 1
        secret = rng.choice(table.strings)
        abandon = games % 5 == 0
        inquiry = client.inquire("bulls_and_cows", timeout=60)
        started = time.perf_counter()
        try:
            for event in inquiry:
                with ledger.lock:
                    ledger.sessions.add(event.session_id)
                if isinstance(event, Ask):
                    ledger.record("Inquire step", started)
                    if stop.is_set() or (abandon and event.turn > 2):
                        break
                    code = int(table.table[table.index[event.question], table.index[secret]])
                    started = time.perf_counter()
                    inquiry.answer(" ".join(map(str, divmod(code, bc.CODES_PER_FEEDBACK))))
                elif isinstance(event, InquiryAnswer):
                    ledger.record("Inquire step", started)
        except Exception as error:
            ledger.failed("Inquire step", started, error)
            stop.wait(0.2)
        finally:
            inquiry.close()


def ingesting(client, ledger: Ledger, stop: threading.Event, every_s: float) -> None:
    batch = 0
    while not stop.wait(every_s):
        batch += 1
        documents = [
            {
                "id": f"load-{batch}-{i}",
                "title": f"load document {batch}.{i}",
                "text": f"batch {batch} item {i} " * 40,
            }
            for i in range(4)
        ]
        started = time.perf_counter()
        try:
            for _ in client.ingest(INGEST_COLLECTION, documents, batch_size=4):
                with ledger.lock:
                    ledger.ingested.extend(d["id"] for d in documents)
            ledger.record("IngestDocuments", started)
        except Exception as error:
            ledger.failed("IngestDocuments", started, error)


def sampling_memory(stack, samples: list[dict], stop: threading.Event, started: float) -> None:
    import psutil

    while True:
        row = {"t": round(time.time() - started, 1)}
        try:
            processes = stack_processes(stack)
            for name, pid in processes.items():
                row[f"{name.split()[0]} {pid}"] = psutil.Process(pid).memory_info().rss
        except (psutil.Error, AttributeError):
            pass
        samples.append(row)
        if stop.wait(MEMORY_INTERVAL_S):
            return


def verify(client, ledger: Ledger) -> dict:
    """Whether everything acknowledged is there: observations (each sent again must be refused
    ALREADY_EXISTS), ingested documents (counted), inquiry sessions (each resumes)."""
    from sounding_client import Belief, RetrievalOutcome, SoundingError

    codes: Counter[str] = Counter()
    for start in range(0, len(ledger.observed), 5000):
        ids = ledger.observed[start : start + 5000]
        ack = client.observe([RetrievalOutcome(i, ()) for i in ids])
        refused = {r.index: r.code for r in ack.rejected}
        codes.update(refused.get(i, "RECORDED_AGAIN") for i in range(len(ids)))
    collection = client.get_collection(INGEST_COLLECTION)
    resumed, lost_sessions = 0, []
    for session_id in sorted(ledger.sessions):
        inquiry = client.resume_inquiry(session_id, timeout=60)
        try:
            first = next(iter(inquiry))
            resumed += isinstance(first, Belief)
        except SoundingError as error:
            lost_sessions.append((session_id, error.code.name))
        finally:
            inquiry.close()
    return {
        "observations_acknowledged": len(ledger.observed),
        "observations_kept": codes.get("ALREADY_EXISTS", 0),
        "observations_lost": len(ledger.observed) - codes.get("ALREADY_EXISTS", 0),
        "observation_codes_when_sent_again": dict(codes),
        "documents_acknowledged": len(ledger.ingested),
        "documents_in_collection": collection.document_count,
        "documents_lost": len(set(ledger.ingested)) - collection.document_count,
        "sessions": len(ledger.sessions),
        "sessions_resumed": resumed,
        "sessions_lost": lost_sessions,
    }


@dataclass(frozen=True)
class LoadRun:
    """What a run sends: the traffic above for `duration_s` seconds, with `kills` at their times,
    every random choice seeded by `seed`; the corpus (its first `corpus_limit` documents, or all,
    ingested first) and queries of the BEIR dataset at `data`, or the demo corpus and a few fixed
    queries. A health check slower than `health_timeout_s` fails DEADLINE_EXCEEDED (an error);
    `settle_s`: how long health must say SERVING after a kill it never reported (default: two of
    the orchestrator's readiness probes, each its interval and timeout, and `RECONNECT_S`)."""

    duration_s: float
    retrieve_streams: int = 32
    inquiry_sessions: int = 4
    hyde_every: int = 20
    ingest_every_s: float = 5.0
    kills: tuple[crashes.Kill, ...] = ()
    seed: int = 0
    data: Path | None = None
    corpus_limit: int | None = None
    health_timeout_s: float = 2.0
    settle_s: float | None = None


def planned_kills(duration_s: float) -> tuple[crashes.Kill, ...]:
    """The sidecar, a strategy worker and the orchestrator, killed in turn at a quarter, half and
    three quarters of a run."""
    shares = ((0.25, "sidecar"), (0.5, "worker"), (0.75, "orchestrator"))
    return tuple(crashes.Kill(duration_s * share, what) for share, what in shares)


def run(spec: LoadRun, settings: Settings, console: Console) -> dict:
    """The run on a fresh, supervised stack on `settings`' data directory, the corpus ingested
    first: the result of `traffic`, led by the corpus and how many of its documents."""
    from sounding.cli.common import read_documents
    from sounding_client import Client

    source = spec.data / "corpus.jsonl" if spec.data else DEMO_CORPUS
    documents = [
        {
            "id": document.get("_id", document.get("id")),
            "title": document.get("title", ""),
            "text": document["text"],
        }
        for document in itertools.islice(read_documents(source), spec.corpus_limit)
    ]
    queries = queries_from(spec.data / "queries.jsonl" if spec.data else None)
    with fresh_stack(settings, console, DENSE_AND_LEXICAL_ARMS, supervised=True) as stack:
        with Client(settings.address, timeout=1800) as client, progress_bar(console) as progress:
            client.create_collection(RETRIEVE_COLLECTION)
            task = progress.add_task(f"ingesting {len(documents)} documents", total=len(documents))
            for report in client.ingest(RETRIEVE_COLLECTION, documents, batch_size=64):
                progress.update(task, completed=report.total_documents)
            client.create_collection(INGEST_COLLECTION)
        with progress_bar(console) as progress:
            task = progress.add_task("traffic", total=spec.duration_s)
            result = traffic(
                stack,
                lambda: Client(settings.address, timeout=120),
                queries,
                spec,
                progress=lambda elapsed: progress.update(task, completed=min(elapsed, spec.duration_s)),
            )
    return {"corpus": str(source), "documents": len(documents), **result}


def traffic(
    stack,
    client_factory: Callable[[], Client],
    queries: list[str],
    spec: LoadRun,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Traffic against `stack` (supervised, collections prepared) as `spec` says, with its kills;
    then the checks. Returns the result (without provenance)."""
    probe_s = stack.settings.limits.deadlines.readiness_probe_s
    settle = 2 * (READINESS_INTERVAL_S + probe_s) + RECONNECT_S if spec.settle_s is None else spec.settle_s
    ledger = Ledger()
    stop = threading.Event()
    samples: list[dict] = []
    started = time.time()
    clients = [client_factory() for _ in range(4)]
    threads = [
        threading.Thread(target=sampling_memory, args=(stack, samples, stop, started)),
        threading.Thread(target=observing, args=(clients[0], ledger, stop)),
        threading.Thread(target=ingesting, args=(clients[1], ledger, stop, spec.ingest_every_s)),
    ]
    threads += [
        threading.Thread(
            target=retrieving,
            args=(
                clients[i % 4],
                queries,
                ledger,
                stop,
                spec.hyde_every,
                random.Random(spec.seed * 1000 + i),
            ),
        )
        for i in range(spec.retrieve_streams)
    ]
    threads += [
        threading.Thread(
            target=inquiring, args=(clients[2 + i % 2], ledger, stop, random.Random(spec.seed * 7 + i))
        )
        for i in range(spec.inquiry_sessions)
    ]
    windows: list[dict] = []
    spans: list[tuple[float, float]] = []  # each kill's disruption, unrounded: (from, until)

    def wait_until(at_s: float) -> None:
        while time.time() - started < at_s:
            time.sleep(0.5)
            if progress:
                progress(time.time() - started)

    with HealthWatch(stack.settings.address, HEALTH_INTERVAL_S, spec.health_timeout_s) as health:
        for thread in threads:
            thread.start()
        for planned in sorted(spec.kills, key=lambda k: k.at_s):
            wait_until(planned.at_s)
            before = set(stack_processes(stack).values())
            killed_at = time.time()
            pid = crashes.kill(stack, planned.what)
            back = crashes.recovered(
                stack,
                planned.what,
                pid,
                before,
                clients[3],
                RETRIEVE_COLLECTION,
                queries[0],
                health,
                killed_at,
                settle,
            )
            spans.append((killed_at, (back or time.time()) + RECONNECT_S))
            windows.append(
                {
                    "what": planned.what,
                    "pid": pid,
                    "at_s": round(killed_at - started, 1),
                    "recovered": back is not None,
                    "serving_again_after_s": round(back - killed_at, 1) if back else None,
                    "until_s": round(spans[-1][1] - started, 1),
                }
            )
        wait_until(spec.duration_s)
        stop.set()
        for thread in threads:
            thread.join(timeout=180)
    ledger.outcomes += [(t, "Health", outcome) for t, outcome, _ in health.checks]
    ledger.latencies["Health"] = [latency for _, outcome, latency in health.checks if outcome == "OK"]
    verification = verify(clients[0], ledger)
    for client in clients:
        client.close()

    errors, during = load_report.tally_failures(ledger.outcomes, spans)
    calls = Counter(rpc for _, rpc, _ in ledger.outcomes)
    return {
        "duration_s": spec.duration_s,
        "traffic": {
            "retrieve_streams": spec.retrieve_streams,
            "inquiry_sessions": spec.inquiry_sessions,
            "hyde_every": spec.hyde_every,
            "ingest_every_s": spec.ingest_every_s,
        },
        "calls": dict(calls),
        "latency": {rpc: load_report.percentiles(values) for rpc, values in sorted(ledger.latencies.items())},
        "errors": {f"{rpc} {code}": n for (rpc, code), n in sorted(errors.items())},
        "errors_excluding_resource_exhausted": sum(
            n for (_, code), n in errors.items() if code != "RESOURCE_EXHAUSTED"
        ),
        "kills": windows,
        "errors_while_disrupted": {f"{rpc} {code}": n for (rpc, code), n in sorted(during.items())},
        "failures": [
            {
                **f,
                "started": round(f["started"] - started, 2),
                "ended": round(f["ended"] - started, 2),
                "disrupted": load_report.disrupted(f["ended"], spans),
            }
            for f in ledger.failures
            if f["code"] != "RESOURCE_EXHAUSTED"
        ][:MAX_FAILURES_LISTED],
        "restarts": [{"at_s": round(t - started, 1), "process": name} for t, name in stack.restarts],
        "verification": verification,
        "memory": load_report.memory_summary(samples),
        "memory_samples": samples,
    }


def queries_from(path: Path | None, limit: int = 300) -> list[str]:
    """Query texts (only `text`) from a BEIR queries file, or a few fixed ones."""
    if path is None or not path.exists():
        return ["how do ships measure the depth of water?", "combining rankings", "sound speed in seawater"]
    with path.open() as lines:
        return [json.loads(line)["text"] for line in lines if line.strip()][:limit]
