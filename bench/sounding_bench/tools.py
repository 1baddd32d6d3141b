"""`sounding eval tools`: tool routing on BFCL (issue 19), through the public API.

Every function of the labelled files (multiple, live_multiple, simple_python) is pooled into one
toolset (a name defined twice keeps its first description). Their requests (the first turn's
user messages) are split, seeded, into a train stream and a test set; so are the live_irrelevance
requests (for which no pooled tool is meant).

Per learning configuration (free tier only; the free tier and the generator as teacher; the free
tier and trusted successful uses), on a stack of its own: the tools are registered, the test set
routed (description-only centroids: nothing learned yet), then the train stream replayed as an
agent would: each request routed (its top-1 judged before anything is learned from it:
prequential), then its tool use reported through the non-blocking observer: the `ground_truth`
function with success reported, or with probability `fallback_share` the fallback tool `shell`
with nothing reported. Once the learner has processed every event, the test set is routed again.
On the first stack, BM25 over the same tool texts (bm25s, in process) and LanceDB hybrid search
over them (the tools ingested as documents, Retrieve's dense and full-text arms fused by RRF) rank
the test set too.

Measures on the test set: top-1 and top-5 accuracy and MRR (trec_eval's Success@1, Success@5 and
RR over the top 10). Declining: per router, a threshold on the top-1 score chosen on the train
split (that router's scores for the train requests and the train irrelevance requests, the cut
that maximizes balanced accuracy; a learning router has learned from the train requests, so their
scores run higher than unseen requests' and the cut errs towards declining), then the share of
test irrelevance requests declined and of test labelled requests wrongly declined. Intake (on the
trusted-uses configuration's stack, when it runs): Observe-to-exemplar latency of single events
(a successful use of a tool the ranker did not put first, confirmed by trusted use and folded
in), and events/s acknowledged for batches from concurrent streams.
"""

from __future__ import annotations

import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings
from sounding.tools.registry import tool_text

from sounding_bench.harness import fresh_stack, own_settings
from sounding_bench.metrics import per_query

if TYPE_CHECKING:
    from sounding_client import ToolRoute

LABELLED_FILES = ("BFCL_v4_multiple.json", "BFCL_v4_live_multiple.json", "BFCL_v4_simple_python.json")
IRRELEVANCE_FILE = "BFCL_v4_live_irrelevance.json"
FALLBACK_TOOL = "shell"
TOOLSET = "bfcl"
TOP_K = 10
MEASURES = ("success@1", "success@5", "mrr")
CONFIGS = {
    "free": {"SOUNDING_TOOLS__TEACHER": "none", "SOUNDING_TOOLS__TRUST_SUCCESSFUL_USES": "false"},
    "teacher": {"SOUNDING_TOOLS__TEACHER": "generator", "SOUNDING_TOOLS__TRUST_SUCCESSFUL_USES": "false"},
    "trusted": {"SOUNDING_TOOLS__TEACHER": "none", "SOUNDING_TOOLS__TRUST_SUCCESSFUL_USES": "true"},
}
INTAKE_EVENTS = 20_000
INTAKE_STREAMS = 4
INTAKE_BATCH = 500
LATENCY_PROBES = 20
# The intake is measured on this configuration's stack (its probes are confirmed by trusted use).
INTAKE_CONFIG = "trusted"
PROBE_TIMEOUT_S = 60.0
PUT_BATCH = 500


@dataclass(frozen=True)
class Request:
    id: str
    text: str
    tool: str | None  # None: an irrelevance request


# A request is cut to this many characters (Retrieve takes at most 4,096).
MAX_REQUEST_CHARS = 4000


def _request_text(question: list) -> str:
    first = question[0] if question and isinstance(question[0], list) else question
    text = "\n".join(m["content"] for m in first if m.get("role") == "user").strip()
    return (text or "(empty request)")[:MAX_REQUEST_CHARS]


def load(data: Path) -> tuple[dict[str, dict], list[Request], list[Request]]:
    """(tools by name, labelled requests, irrelevance requests)."""
    tools: dict[str, dict] = {}
    labelled, irrelevant = [], []
    for name in (*LABELLED_FILES, IRRELEVANCE_FILE):
        answers = {}
        if name != IRRELEVANCE_FILE:
            for line in (data / "possible_answer" / name).read_text().splitlines():
                record = json.loads(line)
                answers[record["id"]] = next(iter(record["ground_truth"][0]))
        for line in (data / name).read_text().splitlines():
            item = json.loads(line)
            if name != IRRELEVANCE_FILE:
                for function in item["function"]:
                    tools.setdefault(function["name"], function)
                labelled.append(Request(item["id"], _request_text(item["question"]), answers[item["id"]]))
            else:
                irrelevant.append(Request(item["id"], _request_text(item["question"]), None))
    return tools, labelled, irrelevant


def split(requests: list[Request], test_share: float, seed: int) -> tuple[list[Request], list[Request]]:
    order = np.random.default_rng(seed).permutation(len(requests))
    cut = int(round(len(requests) * (1 - test_share)))
    return [requests[i] for i in order[:cut]], [requests[i] for i in order[cut:]]


def _specs(tools: dict[str, dict]):
    from sounding_client import Tool

    return [
        Tool(name, f.get("description") or name, json.dumps(f.get("parameters") or {}))
        for name, f in sorted(tools.items())
    ]


def _scores(rankings: dict[str, list[str]], requests: list[Request]) -> dict:
    qrels = {r.id: {r.tool: 1} for r in requests if r.tool}
    values = per_query(rankings, qrels, list(qrels), MEASURES)
    return {m: round(float(np.mean([values[q][m] for q in qrels])), 4) for m in MEASURES}


def _route_all(client, requests: list[Request]) -> dict[str, ToolRoute]:
    with ThreadPoolExecutor(4) as pool:
        routes = pool.map(lambda r: client.route_tool(TOOLSET, r.text, top_k=TOP_K), requests)
        return dict(zip([r.id for r in requests], routes, strict=True))


def _rankings(routes: dict[str, ToolRoute]) -> dict[str, list[str]]:
    return {q: [name for name, _ in route.candidates] for q, route in routes.items()}


def _bm25(tools: dict[str, dict], requests: list[Request]) -> dict[str, list[str]]:
    import bm25s

    names = sorted(tools)
    texts = [
        tool_text(n, tools[n].get("description") or n, json.dumps(tools[n].get("parameters") or {}))
        for n in names
    ]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    found, _ = retriever.retrieve(
        bm25s.tokenize([r.text for r in requests], stopwords="en", show_progress=False),
        k=min(TOP_K, len(names)),
        show_progress=False,
    )
    return {r.id: [names[i] for i in row] for r, row in zip(requests, found, strict=True)}


def _hybrid(client, tools: dict[str, dict], requests: list[Request]) -> dict[str, list[str]]:
    """LanceDB's dense and full-text search over the tool texts, fused by RRF (Retrieve's arms)."""
    from sounding_client import ExpansionOptions

    collection = "bfcl-tools"
    client.create_collection(collection)
    documents = [
        {"id": n, "text": tool_text(n, f.get("description") or n, json.dumps(f.get("parameters") or {}))}
        for n, f in sorted(tools.items())
    ]
    list(client.ingest(collection, documents, batch_size=64))

    def one(r: Request) -> list[str]:
        final = client.retrieve_final(
            collection,
            r.text,
            top_k=TOP_K,
            arms=("dense", "lexical"),
            omit_text=True,
            expansion=ExpansionOptions(max_iterations=0),
        )
        return [h.document_id for h in final.hits]

    with ThreadPoolExecutor(4) as pool:
        return dict(zip([r.id for r in requests], pool.map(one, requests), strict=True))


def _replay(client, stream: list[Request], fallback_share: float, seed: int, console: Console) -> dict:
    """The train stream as an agent plays it: route, use a tool, report the use (observer)."""
    from sounding_client import ToolUseObserver

    rng = np.random.default_rng(seed + 1)
    correct, used = [], []
    observer = ToolUseObserver(client, queue_size=len(stream) + 1, flush_interval_s=0.05)
    with progress_bar(console) as progress:
        task = progress.add_task("train stream", total=len(stream))
        for r in stream:
            route = client.route_tool(TOOLSET, r.text, top_k=TOP_K)
            correct.append(route.top1 == r.tool)
            fallback = rng.random() < fallback_share
            used.append(FALLBACK_TOOL if fallback else r.tool)
            observer.observe(TOOLSET, r.text, used[-1], success=None if fallback else True)
            progress.advance(task)
    observer.close(timeout=120)
    started = time.perf_counter()
    metrics = client.tool_metrics(TOOLSET)
    while metrics.processed < metrics.events:
        time.sleep(0.5)
        metrics = client.tool_metrics(TOOLSET)
    return {
        "prequential_top1": [bool(c) for c in correct],
        "prequential_top1_accuracy": round(float(np.mean(correct)), 4),
        "fallback_uses": used.count(FALLBACK_TOOL),
        "observer": {"sent": observer.sent, "dropped": observer.dropped, "failed": observer.failed},
        "wait_for_learner_s": round(time.perf_counter() - started, 1),
        "learner": {
            "events": metrics.events,
            "processed": metrics.processed,
            "flagged_fallback": metrics.flagged_fallback,
            "flagged_disagreement": metrics.flagged_disagreement,
            "labels_free": metrics.labels_free,
            "labels_teacher": metrics.labels_teacher,
            "labels_trusted": metrics.labels_trusted,
            "teacher_dropped": metrics.teacher_dropped,
            "accuracy_against_labels": round(metrics.accuracy, 4),
            "exemplars": sum(metrics.exemplars.values()),
            "tools_with_exemplars": len(metrics.exemplars),
            "refreshes": metrics.refreshes_since_start,
            "mean_refresh_s": round(metrics.mean_refresh_seconds, 4),
            "dropped": metrics.dropped_since_start,
            "flagged_share": round(metrics.flagged_share, 4),
            "untrusted_exemplars_route": metrics.untrusted_exemplars_route,
        },
    }


def _threshold(accepted: list[float], declined: list[float]) -> float:
    """The top-1 score below which a request is declined: the cut (among the observed scores)
    with the best balanced accuracy on these train scores."""
    candidates = sorted(set(accepted) | set(declined))
    best, best_score = 0.0, -1.0
    for cut in candidates:
        balanced = (np.mean(np.asarray(accepted) >= cut) + np.mean(np.asarray(declined) < cut)) / 2
        if balanced > best_score:
            best, best_score = cut, float(balanced)
    return best


def _declining(threshold: float, relevant_scores: list[float], irrelevant_scores: list[float]) -> dict:
    return {
        "threshold": round(threshold, 4),
        "irrelevant_declined": round(float(np.mean(np.asarray(irrelevant_scores) < threshold)), 4),
        "relevant_declined": round(float(np.mean(np.asarray(relevant_scores) < threshold)), 4),
    }


def _intake(client) -> dict:
    """Observe-to-processed latency of single events, then events/s for concurrent batches."""
    from sounding_client import ToolUse

    latencies = []
    for i in range(LATENCY_PROBES):
        request = f"probe request {i}"
        used = client.route_tool(TOOLSET, request, top_k=TOP_K).candidates[-1][0]
        before = sum(client.tool_metrics(TOOLSET).exemplars.values())
        started = time.perf_counter()
        client.observe([ToolUse(TOOLSET, request, used, success=True)])
        while sum(client.tool_metrics(TOOLSET).exemplars.values()) <= before:
            if time.perf_counter() - started > PROBE_TIMEOUT_S:
                raise RuntimeError("a probe's exemplar was not saved: run the intake with trusted uses on")
            time.sleep(0.005)
        latencies.append((time.perf_counter() - started) * 1000)
    batches = [
        [ToolUse(TOOLSET, f"intake request {b}-{i}", FALLBACK_TOOL) for i in range(INTAKE_BATCH)]
        for b in range(INTAKE_EVENTS // INTAKE_BATCH)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(INTAKE_STREAMS) as pool:
        recorded = sum(r.recorded for r in pool.map(client.observe, batches))
    seconds = time.perf_counter() - started
    return {
        "observe_to_exemplar_ms": {
            "p50": round(float(np.percentile(latencies, 50)), 1),
            "p95": round(float(np.percentile(latencies, 95)), 1),
        },
        "events": recorded,
        "streams": INTAKE_STREAMS,
        "batch": INTAKE_BATCH,
        "seconds": round(seconds, 2),
        "events_per_s": round(recorded / seconds, 1),
        "dropped_by_learner_queue": client.tool_metrics(TOOLSET).dropped_since_start,
    }


def _plot(curves: dict[str, list[bool]], window: int = 100) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    window = max(1, min([window, *(len(c) for c in curves.values())]))
    for name, correct in curves.items():
        values = np.convolve(np.asarray(correct, float), np.ones(window) / window, mode="valid")
        axes.plot(np.arange(window, len(correct) + 1), values, label=name)
    axes.set_xlabel("train request")
    axes.set_ylabel(f"top-1 accuracy (last {window}, before learning from it)")
    axes.set_title("BFCL: prequential top-1 over the train stream")
    axes.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


@dataclass(frozen=True)
class ToolsRun:
    """What a run measures: the BFCL directory at `data`, the seed of the splits and the fallback
    uses, the share of requests held out for test, the share of train turns whose agent used the
    fallback tool, the learning configurations (names of `CONFIGS`), and only the first `limit`
    requests of each kind if given."""

    data: Path
    seed: int = 0
    test_share: float = 0.3
    fallback_share: float = 0.2
    configs: tuple[str, ...] = tuple(CONFIGS)
    limit: int | None = None


def run(spec: ToolsRun, settings: Settings, console: Console) -> tuple[dict, bytes]:
    """The result JSON and the prequential curves as a PNG. Each configuration's stack starts on
    an emptied data directory of its own (the learner starts from nothing)."""
    from sounding_client import Client

    tools, labelled, irrelevant = load(spec.data)
    train, test = split(labelled[: spec.limit] if spec.limit else labelled, spec.test_share, spec.seed)
    irrelevant_train, irrelevant_test = split(
        irrelevant[: spec.limit] if spec.limit else irrelevant, spec.test_share, spec.seed
    )
    tool_specs = _specs(tools)
    systems, learned, curves, declining, intake = {}, {}, {}, {}, {}
    score: dict[str, float] = {}
    for index, config in enumerate(spec.configs):
        run_settings = own_settings(settings, f"tools-{config}")
        with (
            fresh_stack(run_settings, console, CONFIGS[config]),
            Client(run_settings.address, timeout=600) as client,
        ):
            for start in range(0, len(tool_specs), PUT_BATCH):
                client.put_tools(TOOLSET, tool_specs[start : start + PUT_BATCH])
            if index == 0:
                console.print("description-only, BM25 and hybrid on the test set")
                described = _route_all(client, test + irrelevant_test + irrelevant_train)
                systems["description_only"] = _scores(_rankings(described), test)
                systems["bm25_descriptions"] = _scores(_bm25(tools, test), test)
                systems["lancedb_hybrid_descriptions"] = _scores(_hybrid(client, tools, test), test)
                train_routes = _route_all(client, train)
                score = {
                    q: r.candidates[0][1] if r.candidates else 0.0
                    for q, r in {**described, **train_routes}.items()
                }
                cut = _threshold([score[r.id] for r in train], [score[r.id] for r in irrelevant_train])
                declining["description_only"] = _declining(
                    cut, [score[r.id] for r in test], [score[r.id] for r in irrelevant_test]
                )
            console.print(f"learning router, {config}: replaying {len(train)} train requests")
            learned[config] = _replay(client, train, spec.fallback_share, spec.seed, console)
            curves[config] = learned[config]["prequential_top1"]
            after = _route_all(client, test + irrelevant_test + irrelevant_train)
            systems[f"learning_{config}"] = _scores(_rankings(after), test)
            after.update(_route_all(client, train))
            top1 = {q: r.candidates[0][1] if r.candidates else 0.0 for q, r in after.items()}
            cut = _threshold([top1[r.id] for r in train], [top1[r.id] for r in irrelevant_train])
            declining[f"learning_{config}"] = _declining(
                cut, [top1[r.id] for r in test], [top1[r.id] for r in irrelevant_test]
            )
            if config == INTAKE_CONFIG:
                console.print("intake")
                intake = _intake(client)
    best = max((s for s in systems if s.startswith("learning_")), key=lambda s: systems[s]["success@1"])
    result = {
        "data": str(spec.data),
        "seed": spec.seed,
        "splits": {
            "tools": len(tools),
            "train": len(train),
            "test": len(test),
            "irrelevance_train": len(irrelevant_train),
            "irrelevance_test": len(irrelevant_test),
        },
        "settings": {
            "test_share": spec.test_share,
            "fallback_share": spec.fallback_share,
            "top_k": TOP_K,
            "configs": CONFIGS,
        },
        "systems": systems,
        "learning": learned,
        "declining": declining,
        "intake": intake,
        "comparisons": {
            "best_learning": best,
            "top1_gain_over_description_only": round(
                systems[best]["success@1"] - systems["description_only"]["success@1"], 4
            ),
            "top1_gain_over_bm25": round(
                systems[best]["success@1"] - systems["bm25_descriptions"]["success@1"], 4
            ),
            "top1_gain_over_hybrid": round(
                systems[best]["success@1"] - systems["lancedb_hybrid_descriptions"]["success@1"], 4
            ),
        },
    }
    return result, _plot(curves)
