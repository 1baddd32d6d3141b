"""RetrievalService: validate, embed and analyse the query, plan, run arms in parallel, fuse,
and stream the result.

Events, in order: a PlanEvent (the arms the caller asked for, or those the strategy selector
chose, with their scores); a StrategyResultEvent per arm as it lands (with a FusedEvent once
more than one arm has landed); then the FinalEvent. Fusion weighs each arm by the selector's
predicted reward. If the consumer goes away (client cancel or deadline) the outstanding arms are
cancelled. An arm's failure cancels the others and fails the retrieval with that arm's error.
After the Final event, what each arm found is handed to the learning service, for Observe.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import numpy as np

from sounding import errors, telemetry
from sounding.core.entities import extract_entities
from sounding.core.fusion import DEFAULT_RRF_K, weighted_rrf
from sounding.core.uncertainty import FORMULA as MISS_RATE_FORMULA
from sounding.core.uncertainty import MissRateSignals
from sounding.learning.calibration import MissRateCalibration
from sounding.learning.service import LearningService
from sounding.models.client import ModelsClient
from sounding.retrieval.protocol import (
    ArmRequest,
    ArmResult,
    Executor,
    FinalEvent,
    FusedEvent,
    FusedHit,
    PlanEvent,
    Provenance,
    RetrieveEvent,
    RetrieveQuery,
    StrategyResultEvent,
    Uncertainty,
)
from sounding.retrieval.strategies import STRATEGIES
from sounding.store.collections import Store
from sounding.store.graph import GraphStore
from sounding.store.learning import RetrievalRecord

MAX_QUERY_CHARS = 4096
MAX_TOP_K = 1000
NOT_YET_ESTIMATED = "not_estimated: this deployment does not estimate it yet"
UNCALIBRATED = "uncalibrated"


def validate(query: RetrieveQuery) -> None:
    if not query.collection:
        raise errors.InvalidArgument("collection must be set", field="collection")
    if not query.query.strip():
        raise errors.InvalidArgument("query must not be empty", field="query")
    if len(query.query) > MAX_QUERY_CHARS:
        raise errors.InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", field="query")
    if not 1 <= query.top_k <= MAX_TOP_K:
        raise errors.InvalidArgument(f"top_k must be in [1, {MAX_TOP_K}], got {query.top_k}", field="top_k")
    unknown = sorted(set(query.arms) - set(STRATEGIES))
    if unknown:
        raise errors.InvalidArgument(f"unknown arms {unknown}; known: {sorted(STRATEGIES)}", field="arms")
    if len(set(query.arms)) != len(query.arms):
        raise errors.InvalidArgument("arms must not repeat", field="arms")
    if query.fusion_k < 0:
        raise errors.InvalidArgument("fusion_k must be positive (0 for the default)", field="fusion_k")
    if query.synthesis_confidence is not None and not 0.0 <= query.synthesis_confidence <= 1.0:
        raise errors.InvalidArgument("synthesis_confidence must be in [0, 1]", field="synthesis_confidence")


class RetrievalService:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        models: ModelsClient,
        learning: LearningService,
        graphs: GraphStore,
        default_fusion_k: float = DEFAULT_RRF_K,
    ):
        self._store = store
        self._executor = executor
        self._models = models
        self._learning = learning
        self._graphs = graphs
        self._default_fusion_k = default_fusion_k

    async def retrieve(self, query: RetrieveQuery) -> AsyncIterator[RetrieveEvent]:
        started = time.perf_counter()
        validate(query)
        await self._store.get_collection(query.collection)
        retrieval_id = uuid.uuid4().hex
        carrier = telemetry.inject()
        stats = asyncio.ensure_future(self._store.stats(query.collection))
        # Requested arms that do not use the query's embedding start while it is computed.
        early = ArmRequest(query.collection, query.query, query.top_k, query.timeout_s)
        pending = {
            asyncio.ensure_future(self._executor.run(arm, early, carrier)): arm
            for arm in query.arms
            if not STRATEGIES[arm].uses_query_vector
        }
        landed: dict[str, ArmResult] = {}
        fusion_k = query.fusion_k or self._default_fusion_k
        fused: list[FusedHit] = []
        try:
            embedding = np.asarray(
                (await self._models.embed([query.query], timeout=query.timeout_s))[0], dtype=np.float32
            )
            graph_entities = await self._graphs.entity_names(query.collection)
            mentioned = sum(entity in graph_entities for entity in extract_entities(query.query))
            context = self._learning.features(query.query, embedding, mentioned)
            plan = self._learning.plan(context, query.arms)
            yield PlanEvent(retrieval_id, plan.arms)

            weights = plan.weights
            request = ArmRequest(query.collection, query.query, query.top_k, query.timeout_s, embedding)
            running = set(pending.values())
            pending.update(
                {
                    asyncio.ensure_future(self._executor.run(arm, request, carrier)): arm
                    for arm in plan.chosen
                    if arm not in running
                }
            )
            while pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    pending.pop(task)
                    result = task.result()  # an arm's error propagates; `finally` cancels the rest
                    landed[result.arm] = result
                    yield StrategyResultEvent(result)
                    fused = _fuse(landed, weights, fusion_k, query.top_k)
                    if len(landed) > 1:
                        yield FusedEvent(fused, list(landed))
            if len(landed) == 1:
                yield FusedEvent(fused, list(landed))
            if not query.omit_text:
                fused = await self._with_text(query.collection, fused)
            uncertainty, stated_miss_rate = _uncertainty(
                await stats, query.query, landed, self._learning.miss_rate_calibration
            )
            self._learning.remember(
                RetrievalRecord(
                    retrieval_id,
                    query.collection,
                    plan.query_index,
                    plan.mode,
                    context,
                    embedding,
                    {
                        arm: {
                            "document_ids": [h.document_id for h in result.hits],
                            "latency_ms": result.latency_ms,
                            "exploration": any(a.exploration for a in plan.arms if a.arm == arm),
                        }
                        for arm, result in landed.items()
                    },
                    stated_miss_rate,
                )
            )
            yield FinalEvent(
                retrieval_id=retrieval_id,
                hits=fused,
                uncertainty=uncertainty,
                confidence=_conservative_confidence(query, uncertainty),
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        finally:
            for task in [*pending, stats]:
                task.cancel()
            await asyncio.gather(*pending, stats, return_exceptions=True)

    async def _with_text(self, collection: str, hits: list[FusedHit]) -> list[FusedHit]:
        rows = await self._store.fetch_chunks(collection, [h.chunk_id for h in hits])
        return [
            FusedHit(
                document_id=h.document_id,
                chunk_id=h.chunk_id,
                score=h.score,
                contributions=h.contributions,
                title=rows[h.chunk_id]["title"],
                text=rows[h.chunk_id]["text"],
                metadata=json.loads(rows[h.chunk_id]["metadata_json"] or "{}"),
            )
            for h in hits
            if h.chunk_id in rows
        ]


def _fuse(
    landed: dict[str, ArmResult], weights: dict[str, float], fusion_k: float, top_k: int
) -> list[FusedHit]:
    """Weighted RRF over documents; each document is represented by its best-ranked chunk."""
    rankings = {arm: [(h.document_id, h.score) for h in r.hits] for arm, r in landed.items()}
    best_chunk: dict[str, tuple[int, str]] = {}
    for result in landed.values():
        for rank, hit in enumerate(result.hits, start=1):
            current = best_chunk.get(hit.document_id)
            if current is None or rank < current[0]:
                best_chunk[hit.document_id] = (rank, hit.chunk_id)
    return [
        FusedHit(
            document_id=item.key,
            chunk_id=best_chunk[item.key][1],
            score=item.score,
            contributions=item.contributions,
        )
        for item in weighted_rrf(rankings, weights, k=fusion_k, limit=top_k)
    ]


def _uncertainty(
    stats, query: str, landed: dict[str, ArmResult], calibration: MissRateCalibration | None
) -> tuple[Uncertainty, float]:
    """The uncertainty and the uncalibrated miss rate. Corpus coverage is deterministic (index
    statistics). The miss rate is the spec's heuristic over the dense arm's similarity scores and
    the arms' rankings: derived, with its inputs, until Calibrate(MISS_RATE) has fitted it to
    outcomes; then it and the estimated recall are measured (calibration version, sample size).
    Without a calibration, recall is absent(uncalibrated); difficulty always is, so far."""
    if stats.chunk_count == 0:
        coverage = Provenance.deterministic(0.0, "the collection holds no chunks")
    else:
        coverage = Provenance.deterministic(
            stats.fts_indexed_chunk_count / stats.chunk_count,
            "share of chunks embedded and full-text indexed (every ingested chunk is embedded)",
        )
    dense = landed.get("dense")
    signals = MissRateSignals.measure(
        query,
        [h.score for h in dense.hits] if dense else [],
        {arm: [h.document_id for h in result.hits] for arm, result in landed.items()},
    )
    stated = signals.miss_rate()
    uncalibrated = Provenance.absent(UNCALIBRATED)
    miss_rate = Provenance("derived", value=stated, formula=MISS_RATE_FORMULA, inputs=signals.inputs())
    recall = uncalibrated
    if calibration is not None:
        version, size = str(calibration.version), calibration.sample_size
        miss_rate = Provenance(
            "measured", value=calibration.miss_rate(stated), calibration_version=version, sample_size=size
        )
        if calibration.recall is not None:
            recall = Provenance(
                "measured",
                value=calibration.recall(1.0 - stated),
                calibration_version=version,
                sample_size=size,
            )
    uncertainty = Uncertainty(
        miss_rate=miss_rate,
        coverage_estimate=Provenance.absent(NOT_YET_ESTIMATED),
        estimated_recall=recall,
        query_difficulty=uncalibrated,
        corpus_coverage=coverage,
    )
    return uncertainty, stated


def _conservative_confidence(query: RetrieveQuery, uncertainty: Uncertainty) -> Provenance:
    """synthesis × (1 − miss_rate), derived, with both inputs (retrieval-uncertainty spec)."""
    if query.synthesis_confidence is None:
        return Provenance.absent("no synthesis_confidence in the request")
    miss_rate = uncertainty.miss_rate.value
    return Provenance(
        "derived",
        value=query.synthesis_confidence * (1 - miss_rate),
        formula="synthesis_confidence * (1 - miss_rate)",
        inputs={"synthesis_confidence": query.synthesis_confidence, "miss_rate": miss_rate},
    )
