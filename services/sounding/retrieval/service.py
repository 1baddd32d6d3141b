"""RetrievalService: validate, embed and analyse the query, plan, run arms in parallel, fuse,
and stream the result.

Events, in order: a PlanEvent (the arms the caller asked for, or those the strategy selector
chose, with their scores); a StrategyResultEvent per arm as it lands (with a FusedEvent once
more than one arm has landed); an ExpansionEvent and a FusedEvent per iteration of the
expansion loop (`retrieval.iterative`); then the FinalEvent with the result's uncertainty.
Fusion weighs each arm by the selector's predicted reward. If the consumer goes away (client
cancel or deadline) the outstanding arms are cancelled. An arm that fails, or runs past
`arm_timeout_s`, is left out: the others' result stands and the Final event names the arm and
why (so does a failed step of the expansion loop, which then stops); the retrieval fails only
when every arm failed, with the first failure's code. After the Final event, what each arm found
is handed to the tenant's learning service, for Observe.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from sounding.core.entities import extract_entities
from sounding.core.expansion import Gap, detect_gaps
from sounding.core.fusion import DEFAULT_RRF_K, MIN_MAX, RRF, Fusion
from sounding.core.uncertainty import MissRateSignals
from sounding.models.client import ModelsClient
from sounding.retrieval.fusion import fuse_hits
from sounding.retrieval.iterative import LoopInputs, LoopSettings, LoopState, run_loop
from sounding.retrieval.protocol import (
    ArmFailure,
    ArmRequest,
    ArmResult,
    Executor,
    ExpansionOptions,
    FinalEvent,
    FusedEvent,
    FusedHit,
    Plan,
    PlanEvent,
    PoolReader,
    QueryAdapter,
    RetrievalLearner,
    RetrieveEvent,
    RetrieveQuery,
    StrategyResultEvent,
)
from sounding.retrieval.strategies import STRATEGIES
from sounding.retrieval.uncertainty import (
    conservative_confidence,
    loop_recall,
    stated_confidence,
)
from sounding.retrieval.uncertainty import uncertainty as stated_uncertainty
from sounding.retrieval.validation import validate
from sounding.runtime import telemetry
from sounding.settings.config import ExpansionSettings
from sounding.settings.limits import RetrieveLimits
from sounding.store.collections import CollectionStats, Store
from sounding.store.graph import GraphStore
from sounding.store.learning import RetrievalRecord
from sounding.store.tenancy import ResourceRef

T = TypeVar("T")


@dataclass(frozen=True)
class RetrievalConfig:
    """The expansion loop's defaults, the fusion of a request that names none (`fusion_k` is
    RRF's constant when RRF is asked for without one), and the deployment's limits on a
    Retrieve."""

    expansion: ExpansionSettings = field(default_factory=ExpansionSettings)
    fusion: str = MIN_MAX
    fusion_k: float = DEFAULT_RRF_K
    limits: RetrieveLimits = field(default_factory=RetrieveLimits)


class RetrievalService:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        models: ModelsClient,
        graphs: GraphStore,
        config: RetrievalConfig,
    ):
        self._store = store
        self._executor = executor
        self._models = models
        self._graphs = graphs
        self._config = config

    def _fusion(self, query: RetrieveQuery, adapter: QueryAdapter | None) -> Fusion:
        """The fusion the request names, RRF if it sets only `fusion_k`, else the one validated
        with the query adapter in use, else the deployment's."""
        default = adapter.fusion if adapter else self._config.fusion
        method = query.fusion or (RRF if query.fusion_k else default)
        return Fusion(method, query.fusion_k or self._config.fusion_k)

    def _loop_settings(self, options: ExpansionOptions) -> LoopSettings:
        defaults = self._config.expansion
        return LoopSettings(
            min_recall=defaults.min_recall if options.min_recall is None else options.min_recall,
            max_iterations=(
                defaults.max_iterations if options.max_iterations is None else options.max_iterations
            ),
            budget=defaults.budget if options.budget is None else options.budget,
            strategies=options.strategies or tuple(defaults.strategies),
            queries_per_step=defaults.queries_per_step,
            fusion_weight=defaults.fusion_weight,
            protected_head=defaults.protected_head,
        )

    async def retrieve(
        self, query: RetrieveQuery, learning: RetrievalLearner
    ) -> AsyncGenerator[RetrieveEvent, None]:
        """The query's events, on the collection of the query's tenant; `learning` is that
        tenant's (its selector plans the arms, its history and calibration state the miss rate,
        and it remembers the retrieval for Observe). Stages: plan, arms, measure, expand, final."""
        started = time.perf_counter()
        validate(query, self._config.limits)
        info = await self._store.get_collection(query.collection)
        adapter = (
            learning.query_adapters.of(query.collection, info.create_time_us)
            if query.learned_ranking
            else None
        )
        run = _Run(query, learning, adapter, self._fusion(query, adapter), started)
        try:
            planned = await self._plan(run)
            version = adapter.version if adapter else 0
            yield PlanEvent(
                run.retrieval_id, planned.plan.arms, planned.plan.mode, version, run.fusion.method
            )
            async for event in self._arms(run, planned.plan.weights):
                yield event
            measured = _measure(run, planned)
            async for event in self._expand(run, planned, measured):
                yield event
            yield await self._final(run, planned, measured)
        finally:
            await run.cancel_outstanding()

    async def _plan(self, run: _Run) -> _Planned:
        """Embeds the query and plans the arms. The embedding is asked for first; requested arms
        that do not search with it start meanwhile, those that do as soon as it is here, and the
        chosen arms once planned (before the Plan event is written, which waits on the stream)."""
        query = run.query
        embedded = run.background(self._models.embed([query.query], timeout=query.timeout_s))
        stats = run.background(self._store.stats(query.collection))
        early = ArmRequest(query.collection, query.query, query.top_k, query.timeout_s, flow=run.flow)
        self._start(run, early, [arm for arm in query.arms if not STRATEGIES[arm].uses_query_vector])
        embedding = np.asarray((await embedded)[0], dtype=np.float32)
        collection_stats = await stats  # read while the query was embedded
        request = ArmRequest(
            query.collection,
            query.query,
            query.top_k,
            query.timeout_s,
            embedding if run.adapter is None else run.adapter.search_vector(embedding),
            collection_stats.version,
            run.flow,
        )
        self._start(run, request, query.arms)
        await asyncio.sleep(0)  # the started arms send their requests before planning runs
        graph_entities = await self._graphs.entity_names(query.collection)
        phrases = extract_entities(query.query)
        mentioned = sum(entity in graph_entities for entity in phrases)
        context = run.learning.features(query.query, embedding, mentioned)
        plan = run.learning.plan(context, query.arms)
        if run.adapter is not None:
            plan = plan.reweighted(run.adapter.fusion_weights)
        self._start(run, request, plan.chosen)
        return _Planned(embedding, collection_stats, phrases, graph_entities, context, plan)

    def _start(self, run: _Run, request: ArmRequest, arms) -> None:
        running = set(run.pending.values())
        for arm in arms:
            if arm not in running:
                run.pending[asyncio.ensure_future(self._arm(arm, request, run.carrier))] = arm

    async def _arms(self, run: _Run, weights: Mapping[str, float]) -> AsyncGenerator[RetrieveEvent, None]:
        """Each arm's result as it lands, fused with those before it; fails with the first
        failure's error when no arm landed."""
        while run.pending:
            done, _ = await asyncio.wait(run.pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                run.pending.pop(task)
                result = task.result()
                if isinstance(result, ArmFailure):
                    run.failed.append(result)
                    continue
                run.landed[result.arm] = result
                yield StrategyResultEvent(result)
                if len(run.landed) > 1:
                    run.fused = run.fuse(run.landed, weights)
                    yield FusedEvent(run.fused, list(run.landed))
        if not run.landed:
            raise run.failed[0].error()
        if len(run.landed) == 1:
            run.fused = run.fuse(run.landed, weights)
            yield FusedEvent(run.fused, list(run.landed))

    async def _expand(
        self, run: _Run, planned: _Planned, measured: _Measured
    ) -> AsyncGenerator[RetrieveEvent, None]:
        """The expansion loop (`retrieval.iterative`): an Expansion and a Fused event per step."""
        query = run.query
        calibration = run.learning.miss_rate_calibration
        inputs = LoopInputs(
            query=query.query,
            collection=query.collection,
            top_k=query.top_k,
            timeout_s=query.timeout_s,
            query_vector=planned.embedding,
            gaps=measured.gaps,
            landed=run.landed,
            weights=planned.plan.weights,
            fusion=run.fusion,
            recall=lambda miss_rate: loop_recall(miss_rate, calibration),
            refusal=self._gate(run),
            flow=run.flow,
        )
        settings = self._loop_settings(query.expansion)
        loop = measured.loop
        async for expansion in run_loop(
            loop, inputs, settings, self._executor, run.carrier, self._config.limits.arm_timeout_s
        ):
            yield expansion
            yield FusedEvent(loop.fused, [*run.landed, *loop.rankings])
        run.fused = loop.fused
        run.failed.extend(loop.failures)

    def _gate(self, run: _Run) -> Callable[[str], str]:
        """Why a step of a strategy should not run now (`core.expansion_gate`), the time left
        being the request's deadline and, unless the request sets expansion options, the default
        latency budget, both counted from the start of the call."""
        query = run.query
        requested = query.expansion.requested
        budget_ms = math.inf if requested else self._config.expansion.latency_budget_ms
        deadline_ms = math.inf if query.timeout_s is None else query.timeout_s * 1000
        rng = np.random.default_rng(int(run.retrieval_id, 16))
        gate = run.learning.expansion_gate

        def refusal(strategy: str) -> str:
            remaining_ms = min(budget_ms, deadline_ms) - (time.perf_counter() - run.started) * 1000
            return gate.refusal(query.collection.key, strategy, remaining_ms, rng, requested)

        return refusal

    async def _final(self, run: _Run, planned: _Planned, measured: _Measured) -> FinalEvent:
        """The result with its text, its uncertainty and confidence; what ran is remembered."""
        query, learning, plan = run.query, run.learning, planned.plan
        fused = run.fused if query.omit_text else await self._with_text(query.collection, run.fused)
        calibration = learning.miss_rate_calibration
        uncertainty = stated_uncertainty(
            planned.stats,
            measured.signals,
            measured.loop,
            measured.gaps,
            run.landed.get("dense"),
            calibration,
        )
        confidence = conservative_confidence(query, uncertainty, learning.confidence_calibration)
        learning.remember(
            RetrievalRecord(
                retrieval_id=run.retrieval_id,
                collection=query.collection.key,
                query_index=plan.query_index,
                mode=plan.mode,
                context=planned.context,
                embedding=planned.embedding,
                arms={
                    arm: {
                        "document_ids": [h.document_id for h in result.hits],
                        "latency_ms": result.latency_ms,
                        "cost_ms": result.cost_ms,
                        "exploration": any(a.exploration for a in plan.arms if a.arm == arm),
                    }
                    for arm, result in run.landed.items()
                },
                arm_scores={arm: [h.score for h in result.hits] for arm, result in run.landed.items()},
                fusion=run.fusion.method,
                stated_miss_rate=measured.signals.miss_rate(),
                stated_confidence=stated_confidence(confidence),
                expansions=tuple(measured.loop.steps),
            )
        )
        return FinalEvent(
            retrieval_id=run.retrieval_id,
            hits=fused,
            uncertainty=uncertainty,
            confidence=confidence,
            latency_ms=(time.perf_counter() - run.started) * 1000,
            failed_arms=run.failed,
        )

    async def query_adapter_source(self, collection: ResourceRef) -> tuple[ResourceRef, int, PoolReader]:
        """For Calibrate(QUERY_ADAPTER): the collection, its creation time and a reader of its
        embeddings (`Store.vector_pool`). NotFound for an unknown collection."""
        info = await self._store.get_collection(collection)
        return collection, info.create_time_us, functools.partial(self._store.vector_pool, collection)

    async def _arm(self, arm: str, request: ArmRequest, carrier) -> ArmResult | ArmFailure:
        """The arm's result, or why it has none (its error, or `arm_timeout_s` passed)."""
        timeout = self._config.limits.arm_timeout_s
        try:
            async with asyncio.timeout(timeout):
                return await self._executor.run(arm, request, carrier)
        except Exception as error:
            return ArmFailure.of(arm, error, timeout)

    async def _with_text(self, collection: ResourceRef, hits: list[FusedHit]) -> list[FusedHit]:
        rows = await self._store.fetch_chunks(collection, [h.chunk_id for h in hits])
        return [
            FusedHit(
                document_id=h.document_id,
                chunk_id=h.chunk_id,
                score=h.score,
                contributions=h.contributions,
                title=rows[h.chunk_id]["title"],
                text=rows[h.chunk_id]["text"],
                metadata=dict(rows[h.chunk_id]["metadata"] or ()),
            )
            for h in hits
            if h.chunk_id in rows
        ]


@dataclass
class _Run:
    """A Retrieve in flight: its identity, the tasks it started, what its arms found, and the
    result fused so far."""

    query: RetrieveQuery
    learning: RetrievalLearner
    adapter: QueryAdapter | None
    fusion: Fusion
    started: float  # time.perf_counter() when the call began
    retrieval_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    carrier: Mapping[str, str] = field(default_factory=telemetry.inject)
    pending: dict[asyncio.Future[ArmResult | ArmFailure], str] = field(default_factory=dict)
    landed: dict[str, ArmResult] = field(default_factory=dict)
    failed: list[ArmFailure] = field(default_factory=list)
    fused: list[FusedHit] = field(default_factory=list)
    _background: list[asyncio.Future[Any]] = field(default_factory=list)

    @property
    def flow(self) -> str:
        return f"retrieve:{self.retrieval_id}"

    def background(self, awaitable: Awaitable[T]) -> asyncio.Future[T]:
        """`awaitable` started now, cancelled with the run's arms if the run ends first."""
        future = asyncio.ensure_future(awaitable)
        self._background.append(future)
        return future

    def fuse(self, rankings: Mapping[str, ArmResult], weights: Mapping[str, float]) -> list[FusedHit]:
        return fuse_hits(rankings, weights, self.fusion, self.query.top_k)

    async def cancel_outstanding(self) -> None:
        """Cancels what is still running (a consumer that went away: client cancel, deadline)."""
        started: list[asyncio.Future[Any]] = [*self.pending, *self._background]
        for task in started:
            task.cancel()
        await asyncio.gather(*started, return_exceptions=True)


@dataclass(frozen=True)
class _Planned:
    """What planning leaves: the query's embedding, the collection's statistics, the entities
    it mentions, the selector's context and its plan."""

    embedding: np.ndarray
    stats: CollectionStats
    phrases: list[str]
    graph_entities: frozenset[str]
    context: np.ndarray
    plan: Plan


@dataclass(frozen=True)
class _Measured:
    """What the landed arms say the result may have missed: the miss-rate signals, the semantic
    gaps, and the expansion loop's state, starting at the stated miss rate."""

    signals: MissRateSignals
    gaps: list[Gap]
    loop: LoopState


def _measure(run: _Run, planned: _Planned) -> _Measured:
    query, landed = run.query.query, run.landed
    dense, lexical = landed.get("dense"), landed.get("lexical")
    separation = lexical or dense
    signals = MissRateSignals.measure(
        query,
        [h.score for h in dense.hits] if dense else [],
        {arm: [h.document_id for h in result.hits] for arm, result in landed.items()},
        run.learning.miss_history.miss_rate(planned.embedding),
        [h.score for h in separation.hits] if separation else [],
    )
    gaps = detect_gaps(
        query, planned.phrases, planned.graph_entities, signals.disagreement, signals.near_threshold
    )
    return _Measured(signals, gaps, LoopState(run.fused, signals.miss_rate()))
