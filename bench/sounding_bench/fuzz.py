"""The fuzz suite: generated requests against a live stack, every RPC of SoundingService,
CorpusService and the sidecar's ModelService (`sounding eval fuzz`; a short run is in `make test`).

Requests are drawn with hypothesis from the methods' protobuf descriptors. Half of the calls
start from a valid request of the method (built from the pools) with up to three fields replaced,
so that generated values reach past validation into the work (arms, moves, writes, generation);
the others are generated from nothing: each field present or not, oneofs set or left empty,
numbers at their type's bounds and beyond the documented limits (NaN and infinities too),
strings empty, odd (any Unicode), long (up to 2 MB) or taken from pools of values the stack
knows (its collections, sessions and retrievals, domain and arm names); repeated fields and maps
from empty to thousands of entries. One call in eight sends mutated bytes instead (truncated,
bytes flipped, garbage appended, or invalid UTF-8 in a string field). Client streams send one to
five messages in any order, and one in four is cut off mid-stream (the client cancels). Every
call has a deadline.

The verdict: every call ends with a canonical code other than UNKNOWN and INTERNAL (OK, an error
the server chose, or the client's own cancel or deadline), no process of the stack dies, and the
orchestrator's health check, asked every 50 ms throughout, answers quickly (p99, max).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
from hypothesis import HealthCheck, Phase, given, seed
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rich.console import Console
from sounding.api.sounding.models.v1 import models_pb2
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings
from sounding.stack import Stack

from sounding_bench.generated_calls import FUZZ_TOOLSET, SCRATCH_COLLECTION, Call, calls
from sounding_bench.harness import DEMO_CORPUS, DENSE_AND_LEXICAL_ARMS, fresh_stack
from sounding_bench.health import HealthWatch

FORBIDDEN = {"UNKNOWN", "INTERNAL"}
DEADLINE_S = 5.0


@dataclass
class Pools:
    """Values the stack knows, offered to fields of these names so requests reach past the
    first check."""

    collections: list[str] = field(default_factory=lambda: ["fuzz", SCRATCH_COLLECTION])
    sessions: list[str] = field(default_factory=list)
    retrievals: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)

    def by_field(self) -> dict[str, list[str]]:
        return {
            "collection": self.collections,
            "name": [SCRATCH_COLLECTION, "fuzz"],
            "page_token": self.collections,
            "session_id": self.sessions or ["0" * 32],
            "toolset": [FUZZ_TOOLSET],
            "used_tool": ["shell", "sound_depth", "scratch_tool"],
            "retrieval_id": self.retrievals or ["0" * 32],
            "used_document_ids": self.documents or ["d"],
            "missed_document_ids": self.documents or ["d"],
            "document_id": self.documents or ["d"],
            "domain": ["bulls_and_cows", "hypotheses", "llm", "corpus"],
            "question_selection": [
                "eig",
                "eig_lookahead",
                "naive",
                "random_consistent",
                "direct_prompting",
                "naive_prompting",
                "uot",
            ],
            "stop_rule": ["default", "robust_mi_risk", "mi_only", "self_consistency", "knowno_set_size"],
            "arms": ["dense", "lexical", "hyde", "query2doc", "multi_query", "grounded"],
            "strategies": [
                "synonym",
                "hypernym",
                "hyponym",
                "related_concept",
                "code_pattern",
                "reformulation",
            ],
            "task": ["dc", "sp", "gn", "generic"],
            "regime": ["normal", "collapse"],
            "bucket": ["low", "medium", "high"],
            "role": ["system", "user", "assistant"],
            "answer": ["1 2", "0 0", "4 0", "yes", "no", "1 digits are present in the answer"],
            "query": ["how do ships measure depth", "sound in water", "ranking fusion"],
        }


def send(channel: grpc.Channel, call: Call, deadline_s: float = DEADLINE_S) -> str:
    """The code the call ended with ("OK" included)."""
    identity = {"request_serializer": None, "response_deserializer": None}
    kind = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }[(call.client_streaming, call.server_streaming)]
    stub = kind(call.path, **identity)
    release = threading.Event()

    def requests() -> Iterator[bytes]:
        yield from call.payloads
        if call.cut_off:
            release.wait(deadline_s)

    try:
        if not call.client_streaming:
            result = stub(call.payloads[0], timeout=deadline_s)
            if call.server_streaming:
                for _ in result:
                    pass
        elif call.cut_off:
            future = stub.future(requests(), timeout=deadline_s) if not call.server_streaming else None
            if future is not None:
                time.sleep(0.05)
                future.cancel()
                release.set()
                return "CANCELLED" if future.cancelled() else future.code().name
            responses = stub(requests(), timeout=deadline_s)
            time.sleep(0.05)
            responses.cancel()
            release.set()
            for _ in responses:
                pass
        else:
            result = stub(requests(), timeout=deadline_s)
            if call.server_streaming:
                for _ in result:
                    pass
    except grpc.RpcError as error:
        return error.code().name
    finally:
        release.set()
    return "OK"


def prepare(client, documents: list[dict], sidecar: str) -> Pools:
    """A collection to fuzz ("fuzz", with `documents`), a few retrievals and inquiry sessions
    whose ids the generated requests may name, and the sidecar's NLI model loaded (trained
    first if no copy is cached: that is not what the run measures)."""
    from sounding_client import Ask, SoundingError, Tool

    with grpc.insecure_channel(sidecar) as channel:
        cluster = channel.unary_unary(
            "/sounding.models.v1.ModelService/Cluster",
            request_serializer=models_pb2.ClusterRequest.SerializeToString,
            response_deserializer=models_pb2.ClusterResponse.FromString,
        )
        cluster(
            models_pb2.ClusterRequest(texts=["a", "b"], method=models_pb2.CLUSTER_METHOD_ENTAILMENT),
            timeout=3600,
        )
    pools = Pools()
    try:
        client.create_collection("fuzz")
        list(client.ingest("fuzz", documents, batch_size=8))
    except SoundingError as error:
        if error.reason != "ALREADY_EXISTS":
            raise
    client.put_tools(
        FUZZ_TOOLSET,
        [
            Tool("sound_depth", "Measure water depth by echo sounding."),
            Tool("scratch_tool", "A tool the fuzz run may delete."),
        ],
    )
    pools.documents = [d["id"] for d in documents][:20]
    for query in ("depth of water", "ranking fusion", "sound"):
        pools.retrievals.append(
            client.retrieve_final("fuzz", query, top_k=3, arms=["dense", "lexical"]).retrieval_id
        )
    for _ in range(3):
        inquiry = client.inquire("bulls_and_cows")
        for event in inquiry:
            if isinstance(event, Ask):
                break
        inquiry.close()
        pools.sessions.append(inquiry.session_id)
    return pools


def stack_processes(stack: Stack) -> dict[str, int]:
    """The stack's processes by name: the orchestrator, the sidecar and each strategy worker."""
    import psutil

    if stack.orchestrator is None or stack.models is None:
        raise RuntimeError("the stack is not running")
    found = {"orchestrator": stack.orchestrator.pid, "sidecar": stack.models.pid}
    for child in psutil.Process(stack.orchestrator.pid).children(recursive=True):
        try:
            if "StrategyWorker" in " ".join(child.cmdline()):
                found[f"worker {child.pid}"] = child.pid
        except psutil.Error:
            continue
    return found


def still_alive(processes: dict[str, int]) -> dict[str, bool]:
    import psutil

    return {
        name: psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
        for name, pid in processes.items()
    }


@dataclass(frozen=True)
class FuzzRun:
    """What a run sends: `requests` generated calls, `concurrency` at a time, every random choice
    seeded by `seed`; `weights` raise some methods' share of the calls (by method name); a health
    check unanswered within `health_timeout_s` counts as failed (not serving)."""

    requests: int
    seed: int = 0
    concurrency: int = 4
    weights: dict[str, int] = field(default_factory=dict)
    health_timeout_s: float = 2.0


def run(spec: FuzzRun, settings: Settings, console: Console) -> dict:
    """The run on a fresh stack on `settings`' data directory, the bundled demo corpus prepared
    (`prepare`), every process watched (`still_alive`): the result of `send_generated`."""
    from sounding.cli.common import read_documents
    from sounding_client import Client

    with fresh_stack(settings, console, DENSE_AND_LEXICAL_ARMS) as stack:
        with Client(settings.address, timeout=1800) as client:
            pools = prepare(client, list(read_documents(DEMO_CORPUS)), settings.models.address)
        processes = stack_processes(stack)
        with progress_bar(console) as progress:
            task = progress.add_task("fuzzing", total=spec.requests)
            sent = send_generated(
                settings.address,
                settings.models.address,
                pools,
                spec,
                alive=lambda: still_alive(processes),
                progress=lambda count: progress.update(task, completed=count),
            )
    return {"concurrency": spec.concurrency, **sent}


def send_generated(
    orchestrator: str,
    sidecar: str,
    pools: Pools,
    spec: FuzzRun,
    alive: Callable[[], dict[str, bool]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Sends the generated calls to the stack at these addresses; returns the codes per method,
    the calls that ended UNKNOWN or INTERNAL, the health latencies and which processes lived."""
    by_field = pools.by_field()
    batch = 16
    codes: dict[str, Counter] = {}
    forbidden: list[dict] = []
    lock = threading.Lock()
    channels = {
        "sounding.models.v1.ModelService": grpc.insecure_channel(sidecar),
        "": grpc.insecure_channel(orchestrator, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]),
    }
    pool = ThreadPoolExecutor(spec.concurrency)
    sent = [0]

    def one(call: Call) -> None:
        channel = channels.get(call.service, channels[""])
        started = time.perf_counter()
        code = send(channel, call)
        with lock:
            codes.setdefault(f"{call.service}/{call.method}", Counter())[code] += 1
            sent[0] += 1
            if code in FORBIDDEN:
                forbidden.append(
                    {
                        "method": call.path,
                        "code": code,
                        "seconds": round(time.perf_counter() - started, 3),
                        "mutated": call.mutated,
                        "cut_off": call.cut_off,
                        "payloads": [p[:512].hex() for p in call.payloads],
                    }
                )
        if progress is not None:
            progress(sent[0])

    @seed(spec.seed)
    @hypothesis_settings(
        max_examples=max(spec.requests // batch, 1),
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),  # pyright: ignore[reportArgumentType]  # its members
    )
    @given(st.lists(calls(by_field, spec.weights), min_size=batch, max_size=batch))
    def drive(drawn: list[Call]) -> None:
        list(pool.map(one, drawn))

    started = time.perf_counter()
    with HealthWatch(orchestrator, timeout_s=spec.health_timeout_s) as health:
        random.seed(spec.seed)
        drive()
    pool.shutdown()
    for channel in channels.values():
        channel.close()
    total = Counter()
    for counter in codes.values():
        total.update(counter)
    return {
        "requests": sum(total.values()),
        "seconds": round(time.perf_counter() - started, 1),
        "codes": dict(sorted(total.items())),
        "by_method": {method: dict(sorted(c.items())) for method, c in sorted(codes.items())},
        "forbidden": forbidden,
        "health": health.summary(),
        "alive": alive() if alive is not None else {},
    }
