"""`sounding eval observe`: how fast one Observe stream is acknowledged (issue 51, item 4).

Protocol, fixed before the first run:
- A stack of the harness's own whose learning log starts empty (`harness.own_stack`), a BEIR
  dataset's corpus ingested through the service.
- Retrievals: `retrievals` Retrieves naming `dense` and `lexical` (top 10, no text), the split's
  query texts cycled, from RETRIEVAL_CLIENTS concurrent threads (not timed).
- Retrieval outcomes: one Observe stream carrying an outcome for every one of those retrievals
  (the relevant documents in the top 10 "used", the other relevant ones "missed"), timed from
  the call to its acknowledgement. events/s = outcomes recorded / seconds. Each acknowledged
  outcome is durable (the service commits before it answers; the kill -9 tests hold it to that).
- Tool uses: a toolset of TOOLS tools put once; then `tool_streams` Observe streams, one after
  another, each of `retrievals` tool-use events (a query text, the tool it was served by, in
  turn), each timed the same way.
- Reported: each stream's events, seconds and events/s, and what the service refused.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from sounding.settings.config import Settings

from sounding_bench import beir
from sounding_bench.harness import own_stack
from sounding_bench.retrieval import fit_queries

RETRIEVALS = 10_000
TOOL_STREAMS = 3
RETRIEVAL_CLIENTS = 16
TOP_K = 10
TOOLSET = "observe-bench"
TOOLS = 30


@dataclass(frozen=True)
class ObserveRun:
    """What a run measures: the BEIR dataset at `data` and the split whose queries are sent, the
    outcomes per stream, and how many tool-use streams; on a stack of the harness's own or the
    one at `address`."""

    data: Path
    split: str
    retrievals: int = RETRIEVALS
    tool_streams: int = TOOL_STREAMS
    address: str | None = None


def timed(call, *arguments) -> tuple[object, float]:
    started = time.perf_counter()
    result = call(*arguments)
    return result, time.perf_counter() - started


def stream_figures(result, seconds: float, sent: int) -> dict:
    """A stream's figures: events sent and recorded, seconds, events/s, refusals by code."""
    return {
        "events": sent,
        "recorded": result.recorded,
        "seconds": round(seconds, 4),
        "events_per_s": round(result.recorded / seconds, 1),
        "rejected": dict(Counter(r.code for r in result.rejected)),
    }


def run(spec: ObserveRun, settings: Settings, console: Console) -> dict:
    """The protocol above, on a stack of the harness's own or the one at `spec.address` (the
    result says which)."""
    from sounding_client import RetrievalOutcome, Tool, ToolUse

    dataset = beir.load(spec.data, spec.split)
    queries, query_record = fit_queries(dataset.queries, settings.limits.retrieve.max_query_chars, "truncate")
    ids = list(queries)
    with own_stack(
        settings, "observe", dataset, console, include_calibrations=True, address=spec.address
    ) as (client, collection):

        def retrieve(index: int) -> tuple[str, str, list[str]]:
            query_id = ids[index % len(ids)]
            final = client.retrieve_final(
                collection, queries[query_id], top_k=TOP_K, arms=["dense", "lexical"], omit_text=True
            )
            return query_id, final.retrieval_id, [hit.document_id for hit in final.hits]

        console.print(f"{spec.retrievals} retrievals to observe")
        with ThreadPoolExecutor(RETRIEVAL_CLIENTS) as pool:
            retrieved = list(pool.map(retrieve, range(spec.retrievals)))
        outcomes = []
        for query_id, retrieval_id, returned in retrieved:
            relevant = {doc for doc, grade in dataset.qrels.get(query_id, {}).items() if grade > 0}
            outcomes.append(
                RetrievalOutcome(
                    retrieval_id,
                    used_document_ids=tuple(d for d in returned if d in relevant),
                    missed_document_ids=tuple(sorted(relevant - set(returned))),
                )
            )
        console.print(f"one Observe stream of {len(outcomes)} retrieval outcomes")
        acknowledged, seconds = timed(client.observe, outcomes)
        retrieval_stream = stream_figures(acknowledged, seconds, len(outcomes))

        tools = [Tool(f"tool_{i}", f"answers questions of kind {i}") for i in range(TOOLS)]
        client.put_tools(TOOLSET, tools)
        tool_streams = []
        for stream in range(spec.tool_streams):
            console.print(f"tool-use stream {stream + 1} of {spec.tool_streams}")
            uses = [
                ToolUse(TOOLSET, queries[ids[i % len(ids)]], tools[(stream + i) % TOOLS].name)
                for i in range(spec.retrievals)
            ]
            acknowledged, seconds = timed(client.observe, uses)
            tool_streams.append(stream_figures(acknowledged, seconds, len(uses)))
    return {
        "dataset": dataset.name,
        "split": spec.split,
        "stack": {"own": spec.address is None, "address": spec.address},
        "queries": query_record,
        "protocol": {
            "retrievals": spec.retrievals,
            "retrieval_arms": ["dense", "lexical"],
            "retrieval_clients": RETRIEVAL_CLIENTS,
            "top_k": TOP_K,
            "tool_streams": spec.tool_streams,
            "tools": TOOLS,
        },
        "retrieval_outcomes": retrieval_stream,
        "tool_uses": tool_streams,
    }
