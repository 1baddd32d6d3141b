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
import time
import uuid
from collections.abc import AsyncGenerator, Mapping
from operator import attrgetter
from typing import Any

import numpy as np

from sounding import errors, telemetry
from sounding.config import ExpansionSettings
from sounding.core.entities import extract_entities
from sounding.core.expansion import STRATEGIES as EXPANSION_STRATEGIES
from sounding.core.expansion import detect_gaps
from sounding.core.fusion import DEFAULT_RRF_K, weighted_rrf
from sounding.core.uncertainty import MissRateSignals
from sounding.limits import RetrieveLimits
from sounding.models.client import ModelsClient
from sounding.retrieval.iterative import LoopSettings, LoopState, run_loop
from sounding.retrieval.protocol import (
    ArmFailure,
    ArmRequest,
    ArmResult,
    Executor,
    ExpansionOptions,
    FinalEvent,
    FusedEvent,
    FusedHit,
    PlanEvent,
    PoolReader,
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
from sounding.store.collections import Store
from sounding.store.graph import GraphStore
from sounding.store.learning import RetrievalRecord
from sounding.store.tenancy import ResourceRef


def validate(query: RetrieveQuery, limits: RetrieveLimits = RetrieveLimits()) -> None:
    """The deployment's limits and the names this service knows (the rules RetrieveRequest
    declares, such as a non-empty query and unique arms, are checked before: `validation`)."""
    if len(query.query) > limits.max_query_chars:
        raise errors.InvalidArgument(
            f"query is longer than {limits.max_query_chars} characters", field="query"
        )
    if query.top_k > limits.max_top_k:
        raise errors.InvalidArgument(
            f"top_k must be at most {limits.max_top_k}, got {query.top_k}", field="top_k"
        )
    unknown = sorted(set(query.arms) - set(STRATEGIES))
    if unknown:
        raise errors.InvalidArgument(f"unknown arms {unknown}; known: {sorted(STRATEGIES)}", field="arms")
    if query.fusion_k > limits.max_fusion_k:
        raise errors.InvalidArgument(
            f"fusion_k must be at most {limits.max_fusion_k:g} (0 for the default)", field="fusion_k"
        )
    options = query.expansion
    if options.max_iterations is not None and options.max_iterations > limits.max_expansion_iterations:
        raise errors.InvalidArgument(
            f"max_iterations must be at most {limits.max_expansion_iterations}",
            field="expansion.max_iterations",
        )
    if options.budget is not None and options.budget > limits.max_expansion_budget:
        raise errors.InvalidArgument(
            f"budget must be at most {limits.max_expansion_budget}", field="expansion.budget"
        )
    unknown = sorted(set(options.strategies) - set(EXPANSION_STRATEGIES))
    if unknown:
        raise errors.InvalidArgument(
            f"unknown expansion strategies {unknown}; known: {list(EXPANSION_STRATEGIES)}",
            field="expansion.strategies",
        )


class RetrievalService:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        models: ModelsClient,
        graphs: GraphStore,
        expansion: ExpansionSettings = ExpansionSettings(),
        default_fusion_k: float = DEFAULT_RRF_K,
        limits: RetrieveLimits = RetrieveLimits(),
    ):
        self._limits = limits
        self._store = store
        self._executor = executor
        self._models = models
        self._graphs = graphs
        self._default_fusion_k = default_fusion_k
        self._expansion = expansion

    def _loop_settings(self, options: ExpansionOptions) -> LoopSettings:
        defaults = self._expansion
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
        and it remembers the retrieval for Observe)."""
        started = time.perf_counter()
        validate(query, self._limits)
        collection = query.collection
        info = await self._store.get_collection(collection)
        adapter = (
            learning.query_adapters.of(collection, info.create_time_us) if query.learned_ranking else None
        )
        retrieval_id = uuid.uuid4().hex
        flow = f"retrieve:{retrieval_id}"
        carrier = telemetry.inject()
        # The query's embedding is asked for first; requested arms that do not search with it
        # start meanwhile, those that do as soon as it is here, chosen arms once planned.
        embedded = asyncio.ensure_future(self._models.embed([query.query], timeout=query.timeout_s))
        stats = asyncio.ensure_future(self._store.stats(collection))
        early = ArmRequest(collection, query.query, query.top_k, query.timeout_s, flow=flow)
        pending = {
            asyncio.ensure_future(self._arm(arm, early, carrier)): arm
            for arm in query.arms
            if not STRATEGIES[arm].uses_query_vector
        }
        landed: dict[str, ArmResult] = {}
        failed: list[ArmFailure] = []
        fusion_k = query.fusion_k or self._default_fusion_k
        fused: list[FusedHit] = []
        try:
            embedding = np.asarray((await embedded)[0], dtype=np.float32)
            collection_stats = await stats  # read while the query was embedded
            request = ArmRequest(
                collection,
                query.query,
                query.top_k,
                query.timeout_s,
                embedding if adapter is None else adapter.search_vector(embedding),
                collection_stats.version,
                flow,
            )

            def start(arms):
                running = set(pending.values())
                pending.update(
                    {
                        asyncio.ensure_future(self._arm(arm, request, carrier)): arm
                        for arm in arms
                        if arm not in running
                    }
                )

            start(query.arms)
            await asyncio.sleep(0)  # the started arms send their requests before planning runs
            graph_entities = await self._graphs.entity_names(collection)
            phrases = extract_entities(query.query)
            mentioned = sum(entity in graph_entities for entity in phrases)
            context = learning.features(query.query, embedding, mentioned)
            plan = learning.plan(context, query.arms)
            if adapter is not None:
                plan = plan.reweighted(adapter.fusion_weights)
            # Chosen arms start before the Plan event is written (writing waits on the stream).
            start(plan.chosen)
            yield PlanEvent(retrieval_id, plan.arms, plan.mode, adapter.version if adapter else 0)

            weights = plan.weights
            while pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    pending.pop(task)
                    result = task.result()
                    if isinstance(result, ArmFailure):
                        failed.append(result)
                        continue
                    landed[result.arm] = result
                    yield StrategyResultEvent(result)
                    if len(landed) > 1:
                        fused = _fuse(landed, weights, fusion_k, query.top_k)
                        yield FusedEvent(fused, list(landed))
            if not landed:
                raise failed[0].error()
            if len(landed) == 1:
                fused = _fuse(landed, weights, fusion_k, query.top_k)
                yield FusedEvent(fused, list(landed))

            dense, lexical = landed.get("dense"), landed.get("lexical")
            separation = lexical or dense
            signals = MissRateSignals.measure(
                query.query,
                [h.score for h in dense.hits] if dense else [],
                {arm: [h.document_id for h in result.hits] for arm, result in landed.items()},
                learning.miss_history.miss_rate(embedding),
                [h.score for h in separation.hits] if separation else [],
            )
            gaps = detect_gaps(
                query.query, phrases, graph_entities, signals.disagreement, signals.near_threshold
            )
            calibration = learning.miss_rate_calibration
            loop = LoopState(fused, signals.miss_rate())
            async for expansion in run_loop(
                state=loop,
                query=query.query,
                collection=collection,
                top_k=query.top_k,
                timeout_s=query.timeout_s,
                query_vector=embedding,
                gaps=gaps,
                settings=self._loop_settings(query.expansion),
                landed=landed,
                weights=weights,
                executor=self._executor,
                carrier=carrier,
                fuse=lambda rankings, w: _fuse(rankings, w, fusion_k, query.top_k),
                recall=lambda miss_rate: loop_recall(miss_rate, calibration),
                flow=flow,
                step_timeout_s=self._limits.arm_timeout_s,
            ):
                yield expansion
                yield FusedEvent(loop.fused, [*landed, *loop.rankings])
            fused = loop.fused
            failed.extend(loop.failures)
            if not query.omit_text:
                fused = await self._with_text(collection, fused)
            uncertainty = stated_uncertainty(collection_stats, signals, loop, gaps, dense, calibration)
            stated_miss_rate = signals.miss_rate()
            confidence = conservative_confidence(query, uncertainty, learning.confidence_calibration)
            learning.remember(
                RetrievalRecord(
                    retrieval_id=retrieval_id,
                    collection=collection.key,
                    query_index=plan.query_index,
                    mode=plan.mode,
                    context=context,
                    embedding=embedding,
                    arms={
                        arm: {
                            "document_ids": [h.document_id for h in result.hits],
                            "latency_ms": result.latency_ms,
                            "cost_ms": result.cost_ms,
                            "exploration": any(a.exploration for a in plan.arms if a.arm == arm),
                        }
                        for arm, result in landed.items()
                    },
                    stated_miss_rate=stated_miss_rate,
                    stated_confidence=stated_confidence(confidence),
                )
            )
            yield FinalEvent(
                retrieval_id=retrieval_id,
                hits=fused,
                uncertainty=uncertainty,
                confidence=confidence,
                latency_ms=(time.perf_counter() - started) * 1000,
                failed_arms=failed,
            )
        finally:
            started_tasks: list[asyncio.Task[Any]] = [*pending, stats, embedded]
            for task in started_tasks:
                task.cancel()
            await asyncio.gather(*started_tasks, return_exceptions=True)

    async def query_adapter_source(self, collection: ResourceRef) -> tuple[ResourceRef, int, PoolReader]:
        """For Calibrate(QUERY_ADAPTER): the collection, its creation time and a reader of its
        embeddings (`Store.vector_pool`). NotFound for an unknown collection."""
        info = await self._store.get_collection(collection)
        return collection, info.create_time_us, functools.partial(self._store.vector_pool, collection)

    async def _arm(self, arm: str, request: ArmRequest, carrier) -> ArmResult | ArmFailure:
        """The arm's result, or why it has none (its error, or `arm_timeout_s` passed)."""
        timeout = self._limits.arm_timeout_s
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


def _fuse(
    landed: Mapping[str, ArmResult], weights: Mapping[str, float], fusion_k: float, top_k: int
) -> list[FusedHit]:
    """Weighted RRF over documents; each document is represented by its best-ranked chunk (on a
    tie, that of the arm that landed first)."""
    rankings = {arm: [(h.document_id, h.score) for h in r.hits] for arm, r in landed.items()}
    chunks = {arm: {h.document_id: h.chunk_id for h in r.hits} for arm, r in landed.items()}
    fused = []
    for item in weighted_rrf(rankings, weights, k=fusion_k, limit=top_k):
        best = min(item.contributions, key=attrgetter("rank"))
        fused.append(FusedHit(item.key, chunks[best.arm][item.key], item.score, item.contributions))
    return fused
