"""Domain objects <-> protobuf messages."""

from __future__ import annotations

from google.protobuf import timestamp_pb2
from sounding_client.api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2

from sounding import errors
from sounding.config import ObserveLimits
from sounding.core.provenance import Provenance
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
        expansion=p.ExpansionOptions(
            min_recall=(request.expansion.min_recall if request.expansion.HasField("min_recall") else None),
            max_iterations=(
                request.expansion.max_iterations if request.expansion.HasField("max_iterations") else None
            ),
            budget=request.expansion.budget if request.expansion.HasField("budget") else None,
            strategies=tuple(request.expansion.strategies),
        ),
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
        graph_entity_count=stats.graph_entity_count,
        graph_edge_count=stats.graph_edge_count,
        graph_current=stats.graph_current,
    )


def documents(request: corpus_pb2.IngestDocumentsRequest) -> list[DocumentIn]:
    return [
        DocumentIn(id=d.id, text=d.text, title=d.title, metadata=dict(d.metadata)) for d in request.documents
    ]


def inquiry_request(message: sounding_pb2.InquireRequest, max_start_bytes: int):
    """An InquireRequest as the inquiry service's request type."""
    from sounding.inquiry import protocol as q
    from sounding.inquiry.service import ObservationRequest, ResumeRequest

    kind = message.WhichOneof("message")
    if kind == "start" and message.start.ByteSize() > max_start_bytes:
        raise errors.InvalidArgument(
            f"start is {message.start.ByteSize()} bytes; at most {max_start_bytes}", field="start"
        )
    if kind == "resume":
        return ResumeRequest(message.resume.session_id)
    if kind == "observation":
        return ObservationRequest(message.observation.question_id, message.observation.answer)
    if kind is None:
        return None
    start = message.start
    p = start.policy
    return q.Start(
        domain=start.domain,
        domain_parameters=dict(start.domain_parameters),
        hypotheses=tuple(q.HypothesisIn(h.id, h.description, h.prior) for h in start.hypotheses),
        questions=tuple(q.QuestionIn(c.id, c.text, c.cost, dict(c.outcomes)) for c in start.questions),
        context=start.context,
        policy=q.Policy(
            question_selection=p.question_selection or "eig",
            stop_rule=p.stop_rule or "default",
            cost_sensitivity=p.cost_sensitivity if p.HasField("cost_sensitivity") else 1.0,
            exploration_weight=p.exploration_weight,
            max_turns=p.max_turns or 25,
            target_confidence=p.target_confidence or 0.95,
            cost_budget=p.cost_budget or float("inf"),
            seed=p.seed if p.HasField("seed") else None,
            min_information_gain=(
                p.min_information_gain if p.HasField("min_information_gain") else q.MIN_INFORMATION_GAIN
            ),
        ),
    )


_STOPPING_REASONS = {
    "confidence_reached": sounding_pb2.STOPPING_REASON_CONFIDENCE_REACHED,
    "budget_exhausted": sounding_pb2.STOPPING_REASON_BUDGET_EXHAUSTED,
    "max_queries_reached": sounding_pb2.STOPPING_REASON_MAX_QUERIES_REACHED,
    "diminishing_returns": sounding_pb2.STOPPING_REASON_DIMINISHING_RETURNS,
    "no_viable_queries": sounding_pb2.STOPPING_REASON_NO_VIABLE_QUERIES,
}


def _scored_question(question) -> sounding_pb2.ScoredQuestion:
    return sounding_pb2.ScoredQuestion(
        question_id=question.question_id,
        question=question.question,
        expected_information_gain=question.expected_information_gain,
        cost_adjusted_score=question.cost_adjusted_score,
    )


def inquire_response(event) -> sounding_pb2.InquireResponse:
    from sounding.inquiry import protocol as q

    if isinstance(event, q.BeliefEvent):
        return sounding_pb2.InquireResponse(
            belief=sounding_pb2.Belief(
                session_id=event.session_id,
                turn=event.turn,
                entropy_bits=event.entropy_bits,
                normalized_uncertainty=event.normalized_uncertainty,
                top_hypotheses=[
                    sounding_pb2.ScoredHypothesis(
                        id=h.id, description=h.description, probability=h.probability
                    )
                    for h in event.top_hypotheses
                ],
                unknown_mass=event.unknown_mass,
                current_answer=event.current_answer,
                homogeneity=sounding_pb2.Homogeneity(**event.homogeneity) if event.homogeneity else None,
                homogeneity_bucket=event.homogeneity_bucket,
                stop_signals=[
                    sounding_pb2.StopSignal(
                        rule=signal.rule,
                        score=signal.score,
                        threshold=signal.threshold,
                        answers=signal.answers,
                        calibration_version=signal.calibration_version,
                    )
                    for signal in event.stop_signals
                ],
            )
        )
    if isinstance(event, q.AskEvent):
        c = event.chosen
        return sounding_pb2.InquireResponse(
            ask=sounding_pb2.Ask(
                session_id=event.session_id,
                turn=event.turn,
                question_id=c.question_id,
                question=c.question,
                expected_information_gain=c.expected_information_gain,
                cost=c.cost,
                cost_adjusted_score=c.cost_adjusted_score,
                exploration_bonus=c.exploration_bonus,
                rationale=event.rationale,
                runners_up=[_scored_question(r) for r in event.runners_up],
            )
        )
    return sounding_pb2.InquireResponse(
        answer=sounding_pb2.InquiryAnswer(
            session_id=event.session_id,
            answer=event.answer,
            confidence=confidence(event.confidence),
            stopping_reason=_STOPPING_REASONS[event.stopping_reason],
            forced=event.forced,
            trace=sounding_pb2.InquiryTrace(
                entropy_bits=event.entropy_path,
                predicted_gain=event.predicted_gains,
                actual_gain=event.actual_gains,
            ),
        )
    )


_FEEDBACK = {
    sounding_pb2.FEEDBACK_UNSPECIFIED: "",
    sounding_pb2.FEEDBACK_HELPFUL: "helpful",
    sounding_pb2.FEEDBACK_NOT_HELPFUL: "not_helpful",
}


def observation(message: sounding_pb2.ObserveRequest, index: int, limits: ObserveLimits):
    """A RetrievalOutcome or InquiryOutcome, or a Rejected entry for an observation that is
    malformed, over a limit, or of a kind this deployment cannot record."""
    from sounding.learning.inquiry import InquiryOutcome
    from sounding.learning.service import Rejected, RetrievalOutcome

    kind = message.WhichOneof("observation")
    if kind == "inquiry_outcome":
        o = message.inquiry_outcome
        if len(o.session_id) > limits.max_id_chars or len(o.ground_truth) > limits.max_ground_truth_chars:
            return Rejected(
                index,
                "INVALID_ARGUMENT",
                f"inquiry_outcome: session_id is at most {limits.max_id_chars} characters and "
                f"ground_truth at most {limits.max_ground_truth_chars}",
            )
        return InquiryOutcome(o.session_id, o.ground_truth)
    if kind != "retrieval_outcome":
        what = kind or "an empty observation"
        return Rejected(index, "UNIMPLEMENTED" if kind else "INVALID_ARGUMENT", f"{what} is not recorded yet")
    o = message.retrieval_outcome
    for name, ids in (
        ("used_document_ids", o.used_document_ids),
        ("missed_document_ids", o.missed_document_ids),
    ):
        if len(ids) > limits.max_document_ids or any(len(i) > limits.max_id_chars for i in ids):
            return Rejected(
                index,
                "INVALID_ARGUMENT",
                f"retrieval_outcome.{name}: at most {limits.max_document_ids} ids of at most "
                f"{limits.max_id_chars} characters",
            )
    if len(o.retrieval_id) > limits.max_id_chars:
        return Rejected(
            index, "INVALID_ARGUMENT", f"retrieval_outcome.retrieval_id is longer than {limits.max_id_chars}"
        )
    if o.feedback not in _FEEDBACK:
        return Rejected(index, "INVALID_ARGUMENT", f"unknown feedback value {o.feedback}")
    return RetrievalOutcome(
        retrieval_id=o.retrieval_id,
        used_document_ids=tuple(o.used_document_ids),
        feedback=_FEEDBACK[o.feedback],
        agent_success=o.agent_success if o.HasField("agent_success") else None,
        found_missing_content=o.found_missing_content,
        missed_document_ids=tuple(o.missed_document_ids),
    )


def observe_response(result) -> sounding_pb2.ObserveResponse:
    return sounding_pb2.ObserveResponse(
        recorded=result.recorded,
        rejected=[
            sounding_pb2.RejectedObservation(index=r.index, code=r.code, message=r.message)
            for r in result.rejected
        ],
    )


def calibration_target(request: sounding_pb2.CalibrateRequest) -> int:
    if request.target not in sounding_pb2.CalibrationTarget.values() or (
        request.target == sounding_pb2.CALIBRATION_TARGET_UNSPECIFIED
    ):
        raise errors.InvalidArgument("target must be set to a known calibration target", field="target")
    return request.target


_TARGETS = {
    "bandit": sounding_pb2.CALIBRATION_TARGET_BANDIT,
    "miss_rate": sounding_pb2.CALIBRATION_TARGET_MISS_RATE,
    "stop_threshold": sounding_pb2.CALIBRATION_TARGET_STOP_THRESHOLD,
}


def stop_threshold_request(request: sounding_pb2.CalibrateRequest, max_inline_states: int):
    from sounding.learning.inquiry import InlineState, StopThresholdRequest

    if len(request.states) > max_inline_states:
        raise errors.InvalidArgument(f"at most {max_inline_states} states", field="states")
    return StopThresholdRequest(
        task=request.task,
        regime=request.regime or "normal",
        bucket=request.bucket,
        stop_rule=request.stop_rule or "robust_mi_risk",
        delta=request.risk or 0.1,
        alpha=request.alpha or 0.05,
        states=tuple(
            InlineState(s.score, s.error, s.stated_confidence if s.HasField("stated_confidence") else None)
            for s in request.states
        ),
    )


def calibrate_response(event) -> sounding_pb2.CalibrateResponse:
    from sounding.learning.service import CalibrationProgress

    if isinstance(event, CalibrationProgress):
        return sounding_pb2.CalibrateResponse(
            progress=sounding_pb2.CalibrationProgress(stage=event.stage, fraction=event.fraction)
        )
    return sounding_pb2.CalibrateResponse(
        report=sounding_pb2.CalibrationReport(
            target=_TARGETS[event.target],
            version=str(event.version),
            sample_size=event.sample_size,
            deployed=event.deployed,
            summary=event.summary,
            diagnostics=event.diagnostics,
            plot_png=event.plot_png,
        )
    )


def strategy_metrics(metrics) -> sounding_pb2.GetStrategyMetricsResponse:
    return sounding_pb2.GetStrategyMetricsResponse(
        arms=[
            sounding_pb2.ArmMetrics(
                arm=m.arm,
                selection_rate=m.selection_rate,
                contribution_rate=m.contribution_rate,
                mean_latency_ms=m.mean_latency_ms,
                mean_cost_ms=m.mean_cost_ms,
                mean_reward=m.mean_reward,
                exploration_share=m.exploration_share,
                runs=m.runs,
                observed_runs=m.observed_runs,
            )
            for m in metrics.arms
        ],
        selection_entropy_bits=metrics.selection_entropy_bits,
        cumulative_regret=metrics.cumulative_regret,
        planned_retrievals=metrics.planned_retrievals,
        observations=metrics.observations,
        pruned_arms=metrics.pruned_arms,
        selector_version=metrics.selector_version,
    )
