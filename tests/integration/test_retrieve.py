import ast
import asyncio
import os
import re
import time

import grpc
import pytest
from sounding_client import (
    AsyncClient,
    Expansion,
    ExpansionOptions,
    Final,
    Fused,
    Plan,
    SoundingError,
    StrategyResult,
)

pytestmark = pytest.mark.integration


def test_streams_plan_each_arm_fused_and_final(client, demo_collection):
    # Both arms named: the selector may plan either alone.
    query = "how do ships measure the depth of water"
    events = list(client.retrieve("demo", query, top_k=3, arms=["dense", "lexical"]))
    assert isinstance(events[0], Plan)
    assert {a.arm for a in events[0].arms} == {"dense", "lexical"}
    results = [e for e in events if isinstance(e, StrategyResult)]
    assert sorted(r.arm for r in results) == ["dense", "lexical"]
    assert all(len(r.hits) == 3 and r.latency_ms > 0 for r in results)
    # Nothing generated, nothing cached: an arm costs its latency.
    assert all(r.cost_ms == pytest.approx(r.latency_ms) for r in results)
    assert isinstance(events[-2], Fused) and isinstance(events[-1], Final)
    final = events[-1]
    assert final.retrieval_id == events[0].retrieval_id
    assert len(final.hits) == 3
    assert final.hits[0].document_id in {"lead-line", "echo-sounder", "multibeam", "chart-datum"}
    assert final.hits[0].text and final.hits[0].title
    ranks = {(c.arm, c.rank) for c in final.hits[0].contributions}
    assert ranks, "every hit says which arms found it"
    for hit in final.hits:
        for c in hit.contributions:
            arm_result = next(r for r in results if r.arm == c.arm)
            assert arm_result.hits[c.rank - 1].document_id == hit.document_id
    assert final.uncertainty.corpus_coverage.kind == "deterministic"
    assert final.uncertainty.corpus_coverage.value == 1.0
    coverage_estimate = final.uncertainty.coverage_estimate
    assert coverage_estimate.kind == "derived"
    assert coverage_estimate.value == pytest.approx(1.0 * (1 - final.uncertainty.miss_rate.value))
    assert final.uncertainty.query_difficulty.kind == "derived"
    assert 0 <= final.uncertainty.query_difficulty.value <= 1
    # Uncalibrated, the miss rate is derived and recall absent; once another test of this session
    # has run Calibrate(MISS_RATE), both are measured by the same calibration.
    miss_rate, recall = final.uncertainty.miss_rate, final.uncertainty.estimated_recall
    assert 0 <= miss_rate.value <= 1
    if miss_rate.kind == "derived":
        assert miss_rate.formula and (recall.kind, recall.reason) == ("absent", "uncalibrated")
    else:
        assert miss_rate.kind == recall.kind == "measured"
        assert miss_rate.calibration_version == recall.calibration_version


def test_each_arm_alone(client, demo_collection):
    dense = client.retrieve_final(
        "demo", "combining rankings from several retrievers", top_k=2, arms=["dense"]
    )
    assert dense.hits[0].document_id == "rrf"
    assert {c.arm for h in dense.hits for c in h.contributions} == {"dense"}
    lexical = client.retrieve_final("demo", "leadsman tallow", top_k=2, arms=["lexical"])
    assert lexical.hits[0].document_id == "lead-line"


def test_the_plan_says_how_its_arms_were_chosen(client, demo_collection):
    [requested] = [
        e for e in client.retrieve("demo", "tides", top_k=2, arms=["dense"]) if isinstance(e, Plan)
    ]
    assert requested.mode == "requested" and [a.reason for a in requested.arms] == ["requested"]
    [chosen] = [e for e in client.retrieve("demo", "tides", top_k=2) if isinstance(e, Plan)]
    picked = [a for a in chosen.arms if a.chosen]
    if chosen.mode in ("cold_start", "forced_all"):
        # every arm runs but those whose measured cost dwarfs the cheapest's (held back, said so)
        assert {a.reason for a in picked} == {chosen.mode}
        assert all(a.reason == "costly" for a in chosen.arms if not a.chosen)
    elif chosen.mode == "explore":
        assert sum(a.exploration for a in picked) == 1
    else:
        assert chosen.mode == "exploit" and {a.reason for a in picked} == {"exploit"}


@pytest.mark.parametrize(
    "options,code,field",
    [
        ({"query": ""}, grpc.StatusCode.INVALID_ARGUMENT, "query"),
        ({"top_k": 0}, grpc.StatusCode.INVALID_ARGUMENT, "top_k"),
        ({"top_k": 1001}, grpc.StatusCode.INVALID_ARGUMENT, "top_k"),
        ({"arms": ["telepathy"]}, grpc.StatusCode.INVALID_ARGUMENT, "arms"),
        ({"collection": "no-such-collection"}, grpc.StatusCode.NOT_FOUND, "collection"),
        (
            {"expansion": ExpansionOptions(min_recall=1.5)},
            grpc.StatusCode.INVALID_ARGUMENT,
            "expansion.min_recall",
        ),
        ({"expansion": ExpansionOptions(budget=0)}, grpc.StatusCode.INVALID_ARGUMENT, "expansion.budget"),
        (
            {"expansion": ExpansionOptions(strategies=("guessing",))},
            grpc.StatusCode.INVALID_ARGUMENT,
            "expansion.strategies",
        ),
    ],
)
def test_bad_requests(client, demo_collection, options, code, field):
    request = {"collection": "demo", "query": "depth", "top_k": 5, **options}
    with pytest.raises(SoundingError) as raised:
        client.retrieve_final(request.pop("collection"), request.pop("query"), **request)
    assert raised.value.code == code
    assert raised.value.fields == [field]


def test_async_client_streams_the_same_result(stack, client, demo_collection):
    # The arms named: the selector may plan the two calls differently.
    request = {"top_k": 4, "arms": ["dense", "lexical"]}

    async def run():
        async with AsyncClient(stack.settings.address) as async_client:
            return [e async for e in async_client.retrieve("demo", "calibrated confidence", **request)]

    events = asyncio.run(run())
    sync_final = client.retrieve_final("demo", "calibrated confidence", **request)
    assert [h.document_id for h in events[-1].hits] == [h.document_id for h in sync_final.hits]


def test_a_tiny_deadline_ends_the_stream_at_its_deadline(client, demo_collection):
    with pytest.raises(SoundingError) as raised:
        client.retrieve_final("demo", "depth", top_k=5, timeout=0.001)
    assert raised.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert client.retrieve_final("demo", "depth", top_k=5).hits  # the service is unaffected


@pytest.mark.slow
def test_the_generating_arms_search_with_the_text_they_generated(client, demo_collection):
    arms = ("hyde", "query2doc", "multi_query")
    events = list(client.retrieve("demo", "how do ships measure the depth of water", top_k=3, arms=arms))
    results = {e.arm: e for e in events if isinstance(e, StrategyResult)}
    assert set(results) == set(arms)
    for result in results.values():
        assert result.generated_text.strip(), f"{result.arm} shows what it generated"
        assert len(result.hits) == 3
    assert isinstance(events[-1], Final) and len(events[-1].hits) == 3


@pytest.mark.slow
def test_the_grounded_arm_expands_only_with_entities_of_the_corpus_graph(client, demo_collection):
    # The graph is built from the chunks shortly after an ingest goes quiet.
    deadline = time.monotonic() + 600
    while not (collection := client.get_collection("demo")).graph_current:
        assert time.monotonic() < deadline, "no graph after 600 s"
        time.sleep(0.5)
    assert collection.graph_entity_count > 20 and collection.graph_edge_count > collection.graph_entity_count
    events = client.retrieve("demo", "echo sounder and the speed of sound", top_k=3, arms=["grounded"])
    result = next(e for e in events if isinstance(e, StrategyResult))
    assert "[graph:" in result.generated_text
    searched = ast.literal_eval(re.search(r"searched with (\[.*\])\]$", result.generated_text).group(1))
    corpus = " ".join(f"{d['title']} {d['text']}" for d in demo_collection).lower()
    assert searched and all(entity in corpus for entity in searched)
    assert len(result.hits) == 3


def test_the_expansion_loop_streams_each_step_and_keeps_its_trace(client, demo_collection):
    query = "where is measureDepth defined"
    options = ExpansionOptions(min_recall=1.0, max_iterations=2, budget=3, strategies=("code_pattern",))
    events = list(client.retrieve("demo", query, top_k=5, expansion=options))
    steps = [e for e in events if isinstance(e, Expansion)]
    # One strategy allowed, so one step; it ran up to the budget's worth of respellings.
    assert [(s.iteration, s.strategy) for s in steps] == [(1, "code_pattern")]
    assert "measure_depth" in steps[0].queries[0] and 1 <= len(steps[0].queries) <= 3
    assert steps[0].estimated_recall.kind in {"derived", "measured"}
    after_step = events[events.index(steps[0]) + 1]
    assert isinstance(after_step, Fused)
    final = events[-1]
    assert isinstance(final, Final)
    trace = final.uncertainty.query_expansions
    assert [e.expanded for e in trace] == steps[0].queries
    assert all(e.original == query and e.strategy == "code_pattern" for e in trace)
    documents = [h.document_id for h in final.hits]
    assert len(documents) == len(set(documents)), "merged without duplicates"
    gaps = {g.kind: g for g in final.uncertainty.semantic_gaps}
    assert gaps["identifiers"].mitigation == "code_pattern"
    assert (gaps["identifiers"].miss_likelihood.kind, gaps["identifiers"].miss_likelihood.reason) == (
        "absent",
        "uncalibrated",
    )
    if final.uncertainty.miss_rate.kind == "derived":
        # The loop's running recall credits what it added below the head; the stated miss rate
        # is about the arms' result.
        assert steps[0].estimated_recall.value >= 1 - final.uncertainty.miss_rate.value

    off = list(client.retrieve("demo", query, top_k=5, expansion=ExpansionOptions(max_iterations=0)))
    assert not any(isinstance(e, Expansion) for e in off)
    assert off[-1].uncertainty.query_expansions == []


def _session_processes(session_id: int) -> dict[int, tuple[str, int]]:
    """pid -> (command line, niceness) of the processes in a session."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                fields = stat.read().rsplit(")", 1)[1].split()
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone meanwhile
        # After the command: state, ppid, pgrp, session, …, nice is the 17th field.
        if int(fields[3]) == session_id:
            found[int(entry)] = (command, int(fields[16]))
    return found


def test_strategy_workers_run_at_the_orchestrators_priority(stack, client, demo_collection):
    """Ray would start them at niceness 15; they serve a Retrieve's arms."""
    processes = _session_processes(stack.orchestrator.pid)
    workers = [nice for command, nice in processes.values() if command.startswith("ray::StrategyWorker")]
    assert len(workers) == stack.settings.retrieval.strategy_workers
    assert workers == [processes[stack.orchestrator.pid][1]] * len(workers)
