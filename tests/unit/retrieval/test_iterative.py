import asyncio

import numpy as np
import pytest
from sounding.core.expansion import Gap
from sounding.core.fusion import RRF, Fusion
from sounding.core.provenance import Provenance
from sounding.retrieval.fusion import fuse_hits
from sounding.retrieval.iterative import LoopInputs, LoopSettings, LoopState, run_loop
from sounding.retrieval.protocol import ArmResult, ExpansionResult
from sounding.store.reader import ChunkHit
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit

C = ResourceRef("default", "c")
GAPS = [
    Gap("vocabulary_mismatch", "missing words", 0.9, "synonym"),
    Gap("broad_terms", "broad", 0.5, "hyponym"),
    Gap("arm_disagreement", "disagree", 0.3, "related_concept"),
]


def hits(*documents):
    return [ChunkHit(d, f"{d}#0", 1.0 / (i + 1)) for i, d in enumerate(documents)]


class FakeExecutor:
    """Each strategy's expanded queries find the given documents; records what was asked."""

    def __init__(self, found):
        self.found = found
        self.requests = []

    async def expand(self, request, trace_carrier):
        self.requests.append(request)
        documents = self.found.get(request.strategy, [])[: request.queries]
        return ExpansionResult(
            request.strategy,
            [f"{request.query} ({request.strategy} {i})" for i in range(len(documents))],
            [hits(*d) for d in documents],
            1.0,
        )


def run(found, miss_rate, settings, top_k=4, refusal=lambda strategy: ""):
    landed = {"dense": ArmResult("dense", hits("a", "b", "c"), 1.0)}
    state = LoopState(fuse_hits(landed, {"dense": 1.0}, Fusion(RRF, 60), top_k), miss_rate)
    executor = FakeExecutor(found)

    async def collect():
        return [
            e
            async for e in run_loop(
                state,
                LoopInputs(
                    query="q",
                    collection=C,
                    top_k=top_k,
                    timeout_s=None,
                    query_vector=np.ones(4, dtype=np.float32),
                    gaps=GAPS,
                    landed=landed,
                    weights={"dense": 1.0},
                    fusion=Fusion(RRF, 60),
                    recall=lambda m: Provenance("derived", value=1 - m),
                    refusal=refusal,
                ),
                settings,
                executor,
                {},
            )
        ]

    return asyncio.run(collect()), state, executor


def settings(**overrides):
    values = dict(
        min_recall=0.7,
        max_iterations=3,
        budget=5,
        strategies=("synonym", "hyponym", "related_concept"),
        queries_per_step=2,
        fusion_weight=0.5,
        protected_head=0,
    )
    return LoopSettings(**{**values, **overrides})


def test_merging_keeps_each_document_once_and_credits_the_expanded_query():
    events, state, _ = run({"synonym": [["b", "d"], ["d", "a"]]}, 0.5, settings(max_iterations=1))
    documents = [h.document_id for h in state.fused]
    assert sorted(documents) == ["a", "b", "c", "d"] and len(set(documents)) == len(documents)
    d = next(h for h in state.fused if h.document_id == "d")
    assert {c.arm for c in d.contributions} == {"synonym#1.1", "synonym#1.2"}
    (event,) = events
    assert (event.strategy, event.gap, event.new_hits, event.result_count) == (
        "synonym",
        "missing words",
        1,
        3,
    )
    assert [e.found_unique_results for e in state.expansions] == [True, True]
    assert state.miss_rate == pytest.approx(0.5 * (1 - 1 / 4))
    assert event.estimated_recall.value == pytest.approx(1 - state.miss_rate)


def test_the_loop_does_not_start_when_recall_is_already_enough():
    events, state, executor = run({"synonym": [["d"]]}, 0.2, settings())
    assert events == [] and executor.requests == [] and state.stop_reason == "recall_reached"


def test_the_loop_stops_once_recall_is_reached():
    # Each step adds one of four: miss 0.4 -> 0.3 (recall 0.7) after the first.
    events, state, _ = run({"synonym": [["d"]], "hyponym": [["e"]]}, 0.4, settings())
    assert len(events) == 1 and state.stop_reason == "recall_reached"


def test_the_loop_stops_after_max_iterations():
    found = {"synonym": [["a"]], "hyponym": [["b"]], "related_concept": [["c"]]}
    events, state, _ = run(found, 0.8, settings(max_iterations=2))
    assert [e.strategy for e in events] == ["synonym", "hyponym"] and state.stop_reason == "max_iterations"


def test_the_loop_stops_when_the_budget_is_spent():
    found = {"synonym": [["x"], ["y"]], "hyponym": [["z"], ["w"]], "related_concept": [["v"]]}
    events, state, executor = run(found, 0.9, settings(budget=3), top_k=10)
    assert [r.queries for r in executor.requests] == [2, 1]  # the last step gets what is left
    assert len(state.expansions) == 3 and state.stop_reason == "budget_spent"


def test_a_strategy_that_expands_nothing_costs_no_iteration():
    events, state, executor = run({"hyponym": [["d"]]}, 0.8, settings(max_iterations=1))
    assert [r.strategy for r in executor.requests] == ["synonym", "hyponym"]
    assert [e.iteration for e in events] == [1] and events[0].strategy == "hyponym"


def test_the_loop_ends_when_no_strategy_is_left():
    events, state, _ = run({"synonym": [["a"]]}, 0.9, settings(strategies=("synonym",)))
    assert len(events) == 1 and state.stop_reason == "no_strategy_left"


def test_the_protected_head_keeps_its_order_and_new_documents_join_below_it():
    found = {"synonym": [["d"], ["d"]]}
    events, state, _ = run(found, 0.9, settings(max_iterations=1, protected_head=2), top_k=3)
    # d (two expanded queries, half weight each) outranks c (the arm's third) below the head
    assert [h.document_id for h in state.fused] == ["a", "b", "d"]
    assert events[0].new_hits == 1


def test_each_step_records_its_strategy_and_the_documents_it_brought_into_the_result():
    found = {"synonym": [["b", "d"]], "hyponym": [["e"]]}
    _, state, _ = run(found, 0.9, settings(max_iterations=2), top_k=10)
    assert [(s.strategy, s.added_document_ids) for s in state.steps] == [
        ("synonym", ("d",)),
        ("hyponym", ("e",)),
    ]
    assert all(s.latency_ms >= 0 for s in state.steps)


def test_a_refused_strategy_is_passed_over_for_the_next_gaps():
    refused = {"synonym": "no_expected_gain"}
    found = {"synonym": [["d"]], "hyponym": [["e"]]}
    events, state, executor = run(
        found, 0.9, settings(max_iterations=1), refusal=lambda s: refused.get(s, "")
    )
    assert [r.strategy for r in executor.requests] == ["hyponym"]
    assert [e.strategy for e in events] == ["hyponym"] and state.stop_reason == "max_iterations"


def test_when_every_strategy_is_refused_the_loop_stops_with_the_refusal():
    events, state, executor = run({"synonym": [["d"]]}, 0.9, settings(), refusal=lambda s: "latency_budget")
    assert events == [] and executor.requests == [] and state.steps == []
    assert state.stop_reason == "latency_budget"
