import asyncio

import numpy as np
import pytest
from sounding.core.expansion import DEFAULT_STRATEGIES
from sounding.core.expansion_gate import ExpansionStep
from sounding.core.fusion import MIN_MAX, RRF, min_max_fusion, weighted_rrf
from sounding.core.provenance import Provenance
from sounding.learning.query_adapter import QueryAdapter
from sounding.learning.service import LearningConfig, LearningService
from sounding.retrieval.protocol import (
    ArmResult,
    ExpansionOptions,
    ExpansionResult,
    FinalEvent,
    FusedEvent,
    PlanEvent,
    RetrieveQuery,
    StrategyResultEvent,
)
from sounding.retrieval.service import RetrievalConfig, RetrievalService
from sounding.retrieval.validation import validate
from sounding.runtime import errors
from sounding.settings.config import ExpansionSettings
from sounding.settings.limits import RetrieveLimits
from sounding.store.collections import CollectionInfo, CollectionStats
from sounding.store.reader import ChunkHit
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit
CREATED_US = 1_700_000_000_000_000
C = ResourceRef("default", "c")


class FakeStore:
    def __init__(self):
        self.collections = {C}

    async def get_collection(self, name):
        if name not in self.collections:
            raise errors.NotFound("no such collection", field="collection")
        return CollectionInfo(name, "", CREATED_US, "m", 4, 200, 20)

    async def stats(self, name):
        return CollectionStats(document_count=3, chunk_count=4, fts_indexed_chunk_count=3)

    async def fetch_chunks(self, name, chunk_ids):
        return {c: {"title": "t", "text": f"text of {c}", "metadata": [("k", "v")]} for c in chunk_ids}


class FakeExecutor:
    """Arms answer after the given delays with fixed rankings (a `held` arm only once `release`d
    too); records cancellations."""

    def __init__(self, delays, rankings, failing=(), held=()):
        self.delays, self.rankings, self.failing = delays, rankings, set(failing)
        self.held = {arm: asyncio.Event() for arm in held}
        self.cancelled: list[str] = []
        self.expansions: list[str] = []
        self.vectors: dict[str, list[float] | None] = {}

    async def run(self, arm, request, trace_carrier):
        self.vectors[arm] = None if request.query_vector is None else list(request.query_vector)
        try:
            if arm in self.held:
                await self.held[arm].wait()
            await asyncio.sleep(self.delays[arm])
        except asyncio.CancelledError:
            self.cancelled.append(arm)
            raise
        if arm in self.failing:
            raise errors.Unavailable(f"{arm} failed")
        hits = [ChunkHit(d, f"{d}#0", 1.0 / (i + 1)) for i, d in enumerate(self.rankings[arm])]
        return ArmResult(arm, hits[: request.limit], self.delays[arm] * 1000)

    async def expand(self, request, trace_carrier):
        """No expansion finds anything here (the loop's own tests are in test_iterative)."""
        self.expansions.append(request.strategy)
        return ExpansionResult(request.strategy, [], [], 0.0)

    def release(self, arm):
        self.held[arm].set()


class FakeModels:
    async def embed(self, texts, timeout=None):
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]


class FakeGraphs:
    async def entity_names(self, collection):
        return frozenset({"q"})


class FakeLog:
    def __init__(self):
        self.retrievals: list = []

    async def append_retrievals(self, records):
        self.retrievals.extend(records)


class TenantRetrieval:
    """A RetrievalService with the learning service of the tenant its queries are for."""

    def __init__(self, service: RetrievalService, learning: LearningService):
        self.service, self.learning = service, learning

    def retrieve(self, query):
        return self.service.retrieve(query, self.learning)


def service_over(executor, log=None, models=None, limits=RetrieveLimits()) -> TenantRetrieval:
    learning = LearningService(log or FakeLog(), LearningConfig(("dense", "lexical")))
    service = RetrievalService(
        FakeStore(), executor, models or FakeModels(), FakeGraphs(), RetrievalConfig(limits=limits)
    )
    return TenantRetrieval(service, learning)


async def _collect(service, query):
    return [event async for event in service.retrieve(query)]


def test_streams_plan_results_in_landing_order_fused_then_final():
    executor = FakeExecutor(
        {"dense": 0.05, "lexical": 0.0}, {"dense": ["a", "b"], "lexical": ["b", "c"]}, held=["dense"]
    )

    async def collect():  # dense lands only once lexical's result is out, however slow the machine
        events = []
        async for event in service_over(executor).retrieve(RetrieveQuery(C, "q", 3, fusion=RRF)):
            events.append(event)
            if isinstance(event, StrategyResultEvent):
                executor.release("dense")
        return events

    events = asyncio.run(asyncio.wait_for(collect(), 60))  # a stream that waits for dense fails
    kinds = [type(e) for e in events]
    assert kinds == [PlanEvent, StrategyResultEvent, StrategyResultEvent, FusedEvent, FinalEvent]
    assert [e.result.arm for e in events if isinstance(e, StrategyResultEvent)] == [
        "lexical",
        "dense",
    ]
    final = events[-1]
    assert [h.document_id for h in final.hits][0] == "b"  # found by both arms: first by RRF
    assert final.hits[0].text == "text of b#0" and final.hits[0].metadata == {"k": "v"}
    assert final.uncertainty.corpus_coverage.kind == "deterministic"
    assert final.uncertainty.corpus_coverage.value == pytest.approx(0.75)
    miss_rate = final.uncertainty.miss_rate
    assert miss_rate.kind == "derived" and 0.0 <= miss_rate.value <= 0.9
    assert miss_rate.inputs["arm_disagreement"] == pytest.approx(1 - 1 / 3)  # {a, b} vs {b, c}
    assert miss_rate.value == pytest.approx(
        0.3 * miss_rate.inputs["tail_density"]
        + miss_rate.inputs["near_threshold"]
        + 0.3 * miss_rate.inputs["historical_miss_rate"]
        + 0.1 * miss_rate.inputs["query_complexity"]
        + 0.1 * miss_rate.inputs["arm_disagreement"]
        + 0.3 * miss_rate.inputs["score_flatness"]
    )
    assert miss_rate.inputs["score_flatness"] == pytest.approx(1 / 2)  # lexical: scores 1, 1/2
    assert final.uncertainty.estimated_recall == Provenance.absent("uncalibrated")
    assert final.confidence.kind == "absent"  # the request carried no synthesis confidence


def test_the_conservative_confidence_discounts_synthesis_by_the_miss_rate():
    executor = FakeExecutor({"dense": 0.0, "lexical": 0.0}, {"dense": ["a"], "lexical": ["a"]})
    events = asyncio.run(_collect(service_over(executor), RetrieveQuery(C, "q", 3, synthesis_confidence=0.8)))
    final = events[-1]
    miss_rate = final.uncertainty.miss_rate.value
    assert final.confidence.kind == "derived"
    assert final.confidence.value == pytest.approx(0.8 * (1 - miss_rate))
    assert final.confidence.inputs == {"synthesis_confidence": 0.8, "miss_rate": miss_rate}
    assert events[0].retrieval_id == final.retrieval_id
    assert [(a.arm, a.chosen, a.reason) for a in events[0].arms] == [
        ("dense", True, "cold_start"),
        ("lexical", True, "cold_start"),
    ]


def test_what_each_arm_found_is_remembered_for_observe():
    executor = FakeExecutor({"dense": 0.0, "lexical": 0.0}, {"dense": ["a", "b"], "lexical": ["c"]})
    log = FakeLog()

    async def run():
        service = service_over(executor, log)
        events = await _collect(service, RetrieveQuery(C, "q", 3, arms=("dense", "lexical")))
        await service.learning.remembered.wait_written()
        return events

    events = asyncio.run(run())
    (record,) = log.retrievals
    assert record.retrieval_id == events[-1].retrieval_id
    assert record.mode == "requested" and record.query_index == -1
    assert {arm: ran["document_ids"] for arm, ran in record.arms.items()} == {
        "dense": ["a", "b"],
        "lexical": ["c"],
    }


def test_a_failed_arm_is_named_in_the_final_and_the_others_result_stands():
    executor = FakeExecutor(
        {"dense": 0.0, "lexical": 0.01}, {"dense": ["a"], "lexical": ["b", "c"]}, failing={"dense"}
    )
    events = asyncio.run(_collect(service_over(executor), RetrieveQuery(C, "q", 3)))
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert [h.document_id for h in final.hits] == ["b", "c"]
    assert [(f.arm, f.code) for f in final.failed_arms] == [("dense", "UNAVAILABLE")]
    assert [e.result.arm for e in events if isinstance(e, StrategyResultEvent)] == ["lexical"]


def test_an_arm_past_its_timeout_is_dropped_and_cancelled():
    # dense would answer only long after its timeout; lexical answers at once, well within it.
    executor = FakeExecutor({"dense": 3600.0, "lexical": 0.0}, {"dense": ["a"], "lexical": ["b"]})
    service = service_over(executor, limits=RetrieveLimits(arm_timeout_s=2.0))
    final = asyncio.run(_collect(service, RetrieveQuery(C, "q", 3)))[-1]
    assert [h.document_id for h in final.hits] == ["b"]
    assert [(f.arm, f.code) for f in final.failed_arms] == [("dense", "DEADLINE_EXCEEDED")]
    assert executor.cancelled == ["dense"]


def test_the_retrieval_fails_only_when_every_arm_failed():
    executor = FakeExecutor({"dense": 0.0, "lexical": 0.0}, {}, failing={"dense", "lexical"})
    with pytest.raises(errors.Unavailable):
        asyncio.run(_collect(service_over(executor), RetrieveQuery(C, "q", 3)))


def test_a_consumer_going_away_cancels_outstanding_arms():
    executor = FakeExecutor({"dense": 10.0, "lexical": 10.0}, {"dense": [], "lexical": []})

    async def consume_plan_then_leave():
        stream = service_over(executor).retrieve(RetrieveQuery(C, "q", 3))
        assert isinstance(await anext(stream), PlanEvent)
        task = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.01)
        task.cancel()  # what grpc.aio does to the handler when the client cancels
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(consume_plan_then_leave())
    assert sorted(executor.cancelled) == ["dense", "lexical"]


@pytest.mark.parametrize(
    "query,field",
    [
        (RetrieveQuery(C, "x" * 5000, 10), "query"),
        (RetrieveQuery(C, "q", 1001), "top_k"),
        (RetrieveQuery(C, "q", 10, arms=("telepathy",)), "arms"),
        (RetrieveQuery(C, "q", 10, fusion_k=1e9), "fusion_k"),
        (RetrieveQuery(C, "q", 10, fusion="borda"), "fusion"),
        (RetrieveQuery(C, "q", 10, fusion=MIN_MAX, fusion_k=10), "fusion_k"),
        (RetrieveQuery(C, "q", 10, expansion=ExpansionOptions(budget=51)), "expansion.budget"),
        (
            RetrieveQuery(C, "q", 10, expansion=ExpansionOptions(strategies=("guess",))),
            "expansion.strategies",
        ),
    ],
)
def test_requests_beyond_the_limits_or_naming_unknown_strategies_name_the_field(query, field):
    with pytest.raises(errors.InvalidArgument) as raised:
        validate(query)
    assert raised.value.field == field


@pytest.mark.parametrize(
    "fusion,fusion_k,expected",
    [
        ("", 0.0, lambda r: min_max_fusion(r)),
        (MIN_MAX, 0.0, lambda r: min_max_fusion(r)),
        (RRF, 0.0, lambda r: weighted_rrf(r, k=60)),
        ("", 10.0, lambda r: weighted_rrf(r, k=10)),
        (RRF, 10.0, lambda r: weighted_rrf(r, k=10)),
    ],
)
def test_the_final_ranking_is_the_requested_fusion_min_max_by_default(fusion, fusion_k, expected):
    rankings = {"dense": ["a", "b", "c", "d"], "lexical": ["d", "c", "e"]}
    service = service_over(FakeExecutor({"dense": 0, "lexical": 0}, rankings))
    query = RetrieveQuery(C, "q", 5, arms=("dense", "lexical"), fusion=fusion, fusion_k=fusion_k)
    events = asyncio.run(_collect(service, query))
    plan, final = events[0], events[-1]
    assert isinstance(plan, PlanEvent) and isinstance(final, FinalEvent)
    assert plan.fusion == (fusion or (RRF if fusion_k else MIN_MAX))
    # FakeExecutor scores an arm's i-th hit 1 / (i + 1).
    scored = {arm: [(d, 1.0 / (i + 1)) for i, d in enumerate(ids)] for arm, ids in rankings.items()}
    assert [(h.document_id, h.score) for h in final.hits] == [
        (item.key, pytest.approx(item.score)) for item in expected(scored)
    ]


def test_unknown_collection_is_not_found():
    service = service_over(FakeExecutor({}, {}))
    with pytest.raises(errors.NotFound):
        asyncio.run(_collect(service, RetrieveQuery(ResourceRef("default", "missing"), "q", 3)))


def test_requested_arms_that_need_no_embedding_start_while_it_is_computed():
    order: list[str] = []

    class SlowModels(FakeModels):
        async def embed(self, texts, timeout=None):
            await asyncio.sleep(0.05)
            order.append("embedded")
            return await super().embed(texts, timeout)

    class RecordingExecutor(FakeExecutor):
        async def run(self, arm, request, trace_carrier):
            order.append(f"{arm} ({'with' if request.query_vector is not None else 'without'} vector)")
            return await super().run(arm, request, trace_carrier)

    executor = RecordingExecutor({"dense": 0.0, "lexical": 0.0}, {"dense": ["a"], "lexical": ["b"]})
    service = service_over(executor, models=SlowModels())
    asyncio.run(_collect(service, RetrieveQuery(C, "q", 3, arms=("dense", "lexical"))))
    assert order == ["lexical (without vector)", "embedded", "dense (with vector)"]


class OneAdapter:
    """The adapters of a learner that deployed one for collection "c": it swaps the first two axes
    and triples the dense arm's fusion weight, validated with `fusion`."""

    def __init__(self, fusion: str = RRF):
        self.fusion = fusion

    def of(self, collection, create_time_us):
        if (collection, create_time_us) != (C, CREATED_US):
            return None
        swap = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
        return QueryAdapter(7, swap, CREATED_US, dense_fusion_weight=3.0, fusion=self.fusion)


def test_the_arms_search_with_the_deployed_adapter_unless_the_request_opts_out():
    executor = FakeExecutor({"dense": 0.0, "lexical": 0.0}, {"dense": ["a"], "lexical": ["a"]})
    tenant = service_over(executor)
    tenant.learning.query_adapters = OneAdapter()
    events = asyncio.run(_collect(tenant, RetrieveQuery(C, "q", 3, arms=("dense", "lexical"))))
    assert events[0].query_adapter_version == 7
    assert {a.arm: a.fusion_weight for a in events[0].arms} == {"dense": 3.0, "lexical": 1.0}
    assert executor.vectors["dense"] == pytest.approx([0.0, 1.0, 0.0, 0.0])
    remembered = tenant.learning.remembered.unwritten[-1]
    assert list(remembered.embedding) == pytest.approx([1.0, 0.0, 0.0, 0.0]), "outcomes learn from the base"
    base = RetrieveQuery(C, "q", 3, arms=("dense", "lexical"), learned_ranking=False)
    events = asyncio.run(_collect(tenant, base))
    assert events[0].query_adapter_version == 0
    assert {a.arm: a.fusion_weight for a in events[0].arms} == {"dense": 1.0, "lexical": 1.0}
    assert executor.vectors["dense"] == pytest.approx([1.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("validated", [RRF, MIN_MAX])
def test_with_an_adapter_a_request_naming_no_fusion_gets_the_one_validated_with_it(validated):
    rankings = {"dense": ["a", "b", "c", "d"], "lexical": ["d", "c", "e"]}
    scored = {arm: [(d, 1.0 / (i + 1)) for i, d in enumerate(ids)] for arm, ids in rankings.items()}
    fused = {
        RRF: [i.key for i in weighted_rrf(scored, {"dense": 3.0})],
        MIN_MAX: [i.key for i in min_max_fusion(scored, {"dense": 3.0})],
    }
    assert fused[RRF] != fused[MIN_MAX]

    def final(fusion: str = "", learned_ranking: bool = True) -> list[str]:
        tenant = service_over(FakeExecutor({"dense": 0.0, "lexical": 0.0}, rankings))
        tenant.learning.query_adapters = OneAdapter(validated)
        query = RetrieveQuery(
            C, "q", 5, arms=("dense", "lexical"), fusion=fusion, learned_ranking=learned_ranking
        )
        events = asyncio.run(_collect(tenant, query))
        assert events[0].fusion == (fusion or (validated if learned_ranking else MIN_MAX))
        remembered = tenant.learning.remembered.unwritten[-1]
        assert remembered.arm_scores == {arm: [s for _, s in hits] for arm, hits in scored.items()}
        assert remembered.fusion == events[0].fusion
        return [h.document_id for h in events[-1].hits]

    assert final() == fused[validated]
    other = MIN_MAX if validated == RRF else RRF
    assert final(fusion=other) == fused[other]
    # Without the adapter the weights are 1 and the fusion the deployment's.
    assert final(learned_ranking=False) == [i.key for i in min_max_fusion(scored)]


def test_the_default_request_expands_only_where_outcomes_show_that_steps_pay():
    def steps_asked(learn: bool, expansion: ExpansionOptions = ExpansionOptions()) -> list[str]:
        executor = FakeExecutor({"dense": 0.0, "lexical": 0.0}, {"dense": ["a"], "lexical": ["b"]})
        tenant = service_over(executor)
        # the deployment's default asks for full recall and its latency budget cannot run out
        # however slow the machine: only the gate's evidence can hold the loop back
        tenant.service = RetrievalService(
            FakeStore(),
            executor,
            FakeModels(),
            FakeGraphs(),
            RetrievalConfig(expansion=ExpansionSettings(min_recall=1.0, latency_budget_ms=1e9)),
        )
        if learn:
            gate = tenant.learning.expansion_gate
            for strategy in DEFAULT_STRATEGIES:
                gate.step_latency.measured(strategy, 1.0)
                for _ in range(50):
                    gate.learn(C.key, [ExpansionStep(strategy, ("x",), 1.0)], used=["x"])
        asyncio.run(_collect(tenant, RetrieveQuery(C, "q", 3, expansion=expansion)))
        return executor.expansions

    assert steps_asked(learn=False) == []  # no outcomes for the collection: nothing to go on
    assert steps_asked(learn=False, expansion=ExpansionOptions(max_iterations=2)) != []  # asked for
    assert steps_asked(learn=True) != []  # steps that surfaced used documents
