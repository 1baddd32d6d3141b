"""Domain objects <-> protobuf messages."""

from __future__ import annotations

from google.protobuf import timestamp_pb2

from sounding.api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2
from sounding.corpus.service import DocumentIn
from sounding.retrieval import protocol as p
from sounding.store.collections import CollectionInfo, CollectionStats


def retrieve_query(request: sounding_pb2.RetrieveRequest, timeout_s: float | None) -> p.RetrieveQuery:
    return p.RetrieveQuery(
        collection=request.collection,
        query=request.query,
        top_k=request.top_k,
        arms=tuple(request.arms),
        fusion_k=request.fusion_k,
        omit_text=request.omit_text,
        synthesis_confidence=(
            request.synthesis_confidence if request.HasField("synthesis_confidence") else None
        ),
        timeout_s=timeout_s,
    )


def confidence(value: p.Provenance) -> common_pb2.Confidence:
    if value.kind == "deterministic":
        return common_pb2.Confidence(
            deterministic=common_pb2.Deterministic(value=value.value, reason=value.reason)
        )
    if value.kind == "derived":
        return common_pb2.Confidence(
            derived=common_pb2.Derived(value=value.value, formula=value.formula, inputs=dict(value.inputs))
        )
    if value.kind == "measured":
        return common_pb2.Confidence(
            measured=common_pb2.Measured(
                value=value.value,
                calibration_version=value.calibration_version,
                sample_size=value.sample_size,
            )
        )
    return common_pb2.Confidence(absent=common_pb2.Absent(reason=value.reason))


def _hit(hit: p.FusedHit) -> sounding_pb2.Hit:
    return sounding_pb2.Hit(
        document_id=hit.document_id,
        chunk_id=hit.chunk_id,
        text=hit.text,
        title=hit.title,
        score=hit.score,
        contributions=[
            sounding_pb2.ArmRank(arm=c.arm, rank=c.rank, score=c.score) for c in hit.contributions
        ],
        metadata=dict(hit.metadata),
    )


def retrieve_response(event: p.RetrieveEvent) -> sounding_pb2.RetrieveResponse:
    if isinstance(event, p.PlanEvent):
        return sounding_pb2.RetrieveResponse(
            plan=sounding_pb2.Plan(
                retrieval_id=event.retrieval_id,
                arms=[
                    sounding_pb2.PlannedArm(
                        arm=a.arm,
                        chosen=a.chosen,
                        score=a.score,
                        exploration=a.exploration,
                        fusion_weight=a.fusion_weight,
                        reason=a.reason,
                    )
                    for a in event.arms
                ],
            )
        )
    if isinstance(event, p.StrategyResultEvent):
        result = event.result
        return sounding_pb2.RetrieveResponse(
            strategy_result=sounding_pb2.StrategyResult(
                arm=result.arm,
                hits=[
                    sounding_pb2.Hit(document_id=h.document_id, chunk_id=h.chunk_id, score=h.score)
                    for h in result.hits
                ],
                latency_ms=result.latency_ms,
                generated_text=result.generated_text,
            )
        )
    if isinstance(event, p.FusedEvent):
        return sounding_pb2.RetrieveResponse(
            fused=sounding_pb2.Fused(hits=[_hit(h) for h in event.hits], arms=event.arms)
        )
    u = event.uncertainty
    return sounding_pb2.RetrieveResponse(
        final=sounding_pb2.Final(
            retrieval_id=event.retrieval_id,
            hits=[_hit(h) for h in event.hits],
            uncertainty=sounding_pb2.RetrievalUncertainty(
                miss_rate=confidence(u.miss_rate),
                coverage_estimate=confidence(u.coverage_estimate),
                query_expansions=u.query_expansions,
                estimated_recall=confidence(u.estimated_recall),
                query_difficulty=confidence(u.query_difficulty),
                corpus_coverage=confidence(u.corpus_coverage),
            ),
            confidence=confidence(event.confidence),
            latency_ms=event.latency_ms,
        )
    )


def collection(info: CollectionInfo, stats: CollectionStats) -> corpus_pb2.Collection:
    created = timestamp_pb2.Timestamp()
    created.FromMicroseconds(info.create_time_us)
    return corpus_pb2.Collection(
        name=info.name,
        description=info.description,
        create_time=created,
        embedding_model=info.embedding_model,
        embedding_dimension=info.embedding_dimension,
        document_count=stats.document_count,
        chunk_count=stats.chunk_count,
        fts_indexed_chunk_count=stats.fts_indexed_chunk_count,
    )


def documents(request: corpus_pb2.IngestDocumentsRequest) -> list[DocumentIn]:
    return [
        DocumentIn(id=d.id, text=d.text, title=d.title, metadata=dict(d.metadata)) for d in request.documents
    ]
