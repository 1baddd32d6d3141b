"""Retrieve's messages: the request as a RetrieveQuery, each streamed event as a RetrieveResponse."""

from __future__ import annotations

from sounding_api.sounding.v1 import common_pb2, sounding_pb2

from sounding.core.fusion import MIN_MAX, RRF
from sounding.core.provenance import Provenance
from sounding.retrieval import protocol as p
from sounding.store.tenancy import ResourceRef

FUSION_METHODS = {
    sounding_pb2.FUSION_METHOD_UNSPECIFIED: "",
    sounding_pb2.FUSION_METHOD_MIN_MAX: MIN_MAX,
    sounding_pb2.FUSION_METHOD_RRF: RRF,
}
FUSION_ENUMS = {name: value for value, name in FUSION_METHODS.items()}


def retrieve_query(
    request: sounding_pb2.RetrieveRequest, tenant: str, timeout_s: float | None
) -> p.RetrieveQuery:
    """The tenant's query (README, "Security")."""
    return p.RetrieveQuery(
        collection=ResourceRef.named(tenant, request.collection, "collection"),
        query=request.query,
        top_k=request.top_k,
        arms=tuple(request.arms),
        fusion=FUSION_METHODS[request.fusion],
        fusion_k=request.fusion_k,
        omit_text=request.omit_text,
        synthesis_confidence=(
            request.synthesis_confidence if request.HasField("synthesis_confidence") else None
        ),
        timeout_s=timeout_s,
        expansion=p.ExpansionOptions(
            min_recall=(request.expansion.min_recall if request.expansion.HasField("min_recall") else None),
            max_iterations=(
                request.expansion.max_iterations if request.expansion.HasField("max_iterations") else None
            ),
            budget=request.expansion.budget if request.expansion.HasField("budget") else None,
            strategies=tuple(request.expansion.strategies),
        ),
        learned_ranking=not request.without_learned_ranking,
    )


def confidence(value: Provenance) -> common_pb2.Confidence:
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
                inputs=dict(value.inputs),
            )
        )
    return common_pb2.Confidence(absent=common_pb2.Absent(reason=value.reason))


def _add_hits(repeated, hits: list[p.FusedHit]) -> None:
    # Hits and ranks are added in place and optional fields set only when present: this runs
    # for every hit of every Fused and Final event, and takes a third of the time of building
    # each message from keywords.
    add_hit = repeated.add
    for hit in hits:
        message = add_hit(document_id=hit.document_id, chunk_id=hit.chunk_id, score=hit.score)
        add_rank = message.contributions.add
        for c in hit.contributions:
            add_rank(arm=c.arm, rank=c.rank, score=c.score)
        if hit.text:
            message.text = hit.text
        if hit.title:
            message.title = hit.title
        if hit.metadata:
            message.metadata.update(hit.metadata)


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
                mode=event.mode,
                query_adapter_version=event.query_adapter_version,
                fusion=FUSION_ENUMS[event.fusion],
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
                cost_ms=result.cost_ms,
            )
        )
    if isinstance(event, p.FusedEvent):
        response = sounding_pb2.RetrieveResponse(fused=sounding_pb2.Fused(arms=event.arms))
        _add_hits(response.fused.hits, event.hits)
        return response
    if isinstance(event, p.ExpansionEvent):
        return sounding_pb2.RetrieveResponse(
            expansion=sounding_pb2.Expansion(
                iteration=event.iteration,
                strategy=event.strategy,
                gap=event.gap,
                query=event.queries[0] if event.queries else "",
                new_hits=event.new_hits,
                queries=event.queries,
                result_count=event.result_count,
                estimated_recall=confidence(event.estimated_recall),
            )
        )
    u = event.uncertainty
    response = sounding_pb2.RetrieveResponse(
        final=sounding_pb2.Final(
            retrieval_id=event.retrieval_id,
            uncertainty=sounding_pb2.RetrievalUncertainty(
                miss_rate=confidence(u.miss_rate),
                coverage_estimate=confidence(u.coverage_estimate),
                query_expansions=[
                    sounding_pb2.QueryExpansion(
                        original=e.original,
                        expanded=e.expanded,
                        strategy=e.strategy,
                        result_count=e.result_count,
                        found_unique_results=e.found_unique_results,
                    )
                    for e in u.query_expansions
                ],
                estimated_recall=confidence(u.estimated_recall),
                query_difficulty=confidence(u.query_difficulty),
                corpus_coverage=confidence(u.corpus_coverage),
                semantic_gaps=[
                    sounding_pb2.SemanticGap(
                        kind=g.kind,
                        description=g.description,
                        severity=g.severity,
                        mitigation=g.mitigation,
                        miss_likelihood=confidence(g.miss_likelihood),
                    )
                    for g in u.semantic_gaps
                ],
            ),
            confidence=confidence(event.confidence),
            latency_ms=event.latency_ms,
            failed_arms=[
                sounding_pb2.ArmFailure(arm=f.arm, code=f.code, message=f.message) for f in event.failed_arms
            ],
        )
    )
    _add_hits(response.final.hits, event.hits)
    return response
