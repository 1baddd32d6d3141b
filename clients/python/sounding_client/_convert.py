"""protobuf <-> the client's typed results."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC

import grpc
from google.rpc import error_details_pb2, status_pb2
from sounding_api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2, tools_pb2

from sounding_client import types as t

# The trailing metadata carrying a status's details (gRPC's rich error model).
STATUS_DETAILS_KEY = "grpc-status-details-bin"

DocumentLike = common_pb2.Document | Mapping[str, object]


def document(value: DocumentLike) -> common_pb2.Document:
    if isinstance(value, common_pb2.Document):
        return value
    metadata = value.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"a document's metadata is a mapping, not {type(metadata).__name__}")
    return common_pb2.Document(
        id=str(value.get("id", value.get("_id", ""))),
        text=str(value.get("text", "")),
        title=str(value.get("title", "") or ""),
        metadata={str(k): str(v) for k, v in metadata.items()},
    )


def ingest_requests(
    collection: str, documents: Iterable[DocumentLike], batch_size: int
) -> Iterator[corpus_pb2.IngestDocumentsRequest]:
    batch: list[common_pb2.Document] = []
    for value in documents:
        batch.append(document(value))
        if len(batch) == batch_size:
            yield corpus_pb2.IngestDocumentsRequest(collection=collection, documents=batch)
            batch = []
    if batch:
        yield corpus_pb2.IngestDocumentsRequest(collection=collection, documents=batch)


def retrieve_request(
    collection: str,
    query: str,
    top_k: int,
    arms: Iterable[str],
    fusion_k: float,
    omit_text: bool,
    synthesis_confidence: float | None,
    expansion: t.ExpansionOptions | None = None,
    learned_ranking: bool = True,
) -> sounding_pb2.RetrieveRequest:
    request = sounding_pb2.RetrieveRequest(
        collection=collection,
        query=query,
        top_k=top_k,
        arms=list(arms),
        fusion_k=fusion_k,
        omit_text=omit_text,
        without_learned_ranking=not learned_ranking,
    )
    if synthesis_confidence is not None:
        request.synthesis_confidence = synthesis_confidence
    if expansion is not None:
        if expansion.min_recall is not None:
            request.expansion.min_recall = expansion.min_recall
        if expansion.max_iterations is not None:
            request.expansion.max_iterations = expansion.max_iterations
        if expansion.budget is not None:
            request.expansion.budget = expansion.budget
        request.expansion.strategies.extend(expansion.strategies)
    return request


def confidence(message: common_pb2.Confidence) -> t.Confidence:
    kind = message.WhichOneof("provenance") or "absent"
    if kind == "absent":
        return t.Confidence("absent", reason=message.absent.reason)
    if kind == "deterministic":
        d = message.deterministic
        return t.Confidence("deterministic", value=d.value, reason=d.reason)
    if kind == "derived":
        d = message.derived
        return t.Confidence("derived", value=d.value, formula=d.formula, inputs=dict(d.inputs))
    m = message.measured
    return t.Confidence(
        "measured",
        value=m.value,
        calibration_version=m.calibration_version,
        sample_size=m.sample_size,
        inputs=dict(m.inputs),
    )


def hit(message: sounding_pb2.Hit) -> t.Hit:
    # Positional arguments and no copy of an empty map: this runs for every hit of every event.
    metadata = message.metadata
    return t.Hit(
        message.document_id,
        message.chunk_id,
        message.score,
        message.text,
        message.title,
        [t.ArmRank(c.arm, c.rank, c.score) for c in message.contributions],
        dict(metadata) if metadata else {},
    )


class Hits(Sequence[t.Hit]):
    """An event's hits, decoded from the response on first use: a caller that reads only the
    Final event's hits pays nothing for those of the events before it."""

    __slots__ = ("_messages", "_hits")

    def __init__(self, messages: Sequence[sounding_pb2.Hit]):
        self._messages: Sequence[sounding_pb2.Hit] | None = messages
        self._hits: list[t.Hit] | None = None

    def _decoded(self) -> list[t.Hit]:
        if self._hits is None:
            self._hits = [hit(m) for m in self._messages or ()]
            self._messages = None
        return self._hits

    def __getitem__(self, index):
        return self._decoded()[index]

    def __len__(self) -> int:
        return len(self._decoded() if self._messages is None else self._messages)

    def __iter__(self) -> Iterator[t.Hit]:
        return iter(self._decoded())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return self._decoded() == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self._decoded())


def retrieve_event(message: sounding_pb2.RetrieveResponse) -> t.RetrieveEvent:
    kind = message.WhichOneof("event")
    if kind == "plan":
        return t.Plan(
            message.plan.retrieval_id,
            [
                t.PlannedArm(a.arm, a.chosen, a.score, a.exploration, a.fusion_weight, a.reason)
                for a in message.plan.arms
            ],
            message.plan.mode,
            message.plan.query_adapter_version,
        )
    if kind == "strategy_result":
        r = message.strategy_result
        return t.StrategyResult(r.arm, Hits(r.hits), r.latency_ms, r.generated_text, r.cost_ms)
    if kind == "fused":
        return t.Fused(Hits(message.fused.hits), list(message.fused.arms))
    if kind == "expansion":
        e = message.expansion
        return t.Expansion(
            e.iteration,
            e.strategy,
            e.gap,
            list(e.queries),
            e.new_hits,
            e.result_count,
            confidence(e.estimated_recall),
        )
    if kind == "final":
        f = message.final
        u = f.uncertainty
        return t.Final(
            retrieval_id=f.retrieval_id,
            hits=Hits(f.hits),
            uncertainty=t.Uncertainty(
                miss_rate=confidence(u.miss_rate),
                coverage_estimate=confidence(u.coverage_estimate),
                estimated_recall=confidence(u.estimated_recall),
                query_difficulty=confidence(u.query_difficulty),
                corpus_coverage=confidence(u.corpus_coverage),
                query_expansions=[
                    t.QueryExpansion(
                        e.original, e.expanded, e.strategy, e.result_count, e.found_unique_results
                    )
                    for e in u.query_expansions
                ],
                semantic_gaps=[
                    t.SemanticGap(
                        g.kind, g.description, g.severity, g.mitigation, confidence(g.miss_likelihood)
                    )
                    for g in u.semantic_gaps
                ],
            ),
            confidence=confidence(f.confidence),
            latency_ms=f.latency_ms,
            failed_arms=[t.ArmFailure(a.arm, a.code, a.message) for a in f.failed_arms],
        )
    raise ValueError(f"unknown Retrieve event {kind!r}")


def _optional(message, name: str):
    """An optional scalar field's value, None when unset."""
    return getattr(message, name) if message.HasField(name) else None


def collection(message: corpus_pb2.Collection) -> t.Collection:
    return t.Collection(
        name=message.name,
        description=message.description,
        embedding_model=message.embedding_model,
        embedding_dimension=message.embedding_dimension,
        document_count=message.document_count,
        chunk_count=message.chunk_count,
        fts_indexed_chunk_count=message.fts_indexed_chunk_count,
        graph_entity_count=message.graph_entity_count,
        graph_edge_count=message.graph_edge_count,
        graph_current=message.graph_current,
        create_time=message.create_time.ToDatetime(tzinfo=UTC) if message.HasField("create_time") else None,
    )


def progress(message: corpus_pb2.IngestDocumentsResponse) -> t.IngestProgress:
    return t.IngestProgress(
        batch_index=message.batch_index,
        batch_documents=message.batch_documents,
        batch_chunks=message.batch_chunks,
        total_documents=message.total_documents,
        total_chunks=message.total_chunks,
        elapsed_seconds=message.elapsed_seconds,
    )


def _status(rpc_error: grpc.RpcError) -> status_pb2.Status:
    """The google.rpc.Status the server attached (empty if none)."""
    trailing: Iterable[tuple[str, str | bytes]] = getattr(rpc_error, "trailing_metadata", lambda: ())() or ()
    for key, value in trailing:
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            return status_pb2.Status.FromString(value)
    return status_pb2.Status()


def error(rpc_error: grpc.RpcError) -> t.SoundingError:
    """A gRPC failure as a SoundingError carrying the google.rpc details."""
    reason, violations, metadata = "", [], {}
    for detail in _status(rpc_error).details:
        info, bad = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
        if detail.Unpack(info):  # False when the detail is of another type
            reason, metadata = info.reason, dict(info.metadata)
        elif detail.Unpack(bad):
            violations = [t.FieldViolation(v.field, v.description) for v in bad.field_violations]
    return t.SoundingError(rpc_error.code(), rpc_error.details() or "", reason, violations, metadata)


def inquiry_start(
    domain: str,
    policy: t.InquiryPolicy,
    hypotheses: Iterable[t.Hypothesis],
    questions: Iterable[t.Question],
    domain_parameters: Mapping[str, str],
    context: str = "",
) -> sounding_pb2.InquireRequest:
    proto_policy = sounding_pb2.InquiryPolicy(
        question_selection=policy.question_selection,
        stop_rule=policy.stop_rule,
        cost_sensitivity=policy.cost_sensitivity,
        exploration_weight=policy.exploration_weight,
        max_turns=policy.max_turns,
        target_confidence=policy.target_confidence,
        cost_budget=policy.cost_budget,
    )
    if policy.seed is not None:
        proto_policy.seed = policy.seed
    if policy.min_information_gain is not None:
        proto_policy.min_information_gain = policy.min_information_gain
    return sounding_pb2.InquireRequest(
        start=sounding_pb2.InquiryStart(
            domain=domain,
            domain_parameters=dict(domain_parameters),
            hypotheses=[
                sounding_pb2.Hypothesis(id=h.id, description=h.description, prior=h.prior) for h in hypotheses
            ],
            questions=[
                sounding_pb2.CandidateQuestion(id=q.id, text=q.text, cost=q.cost, outcomes=q.outcomes)
                for q in questions
            ],
            policy=proto_policy,
            context=context,
        )
    )


def inquiry_resume(session_id: str) -> sounding_pb2.InquireRequest:
    return sounding_pb2.InquireRequest(resume=sounding_pb2.InquiryResume(session_id=session_id))


def inquiry_observation(question_id: str, answer: str) -> sounding_pb2.InquireRequest:
    return sounding_pb2.InquireRequest(
        observation=sounding_pb2.InquiryObservation(question_id=question_id, answer=answer)
    )


_REASONS = {
    v.number: v.name.removeprefix("STOPPING_REASON_").lower()
    for v in sounding_pb2.StoppingReason.DESCRIPTOR.values
}


def inquiry_event(message: sounding_pb2.InquireResponse) -> t.InquiryEvent:
    kind = message.WhichOneof("event")
    if kind == "belief":
        b = message.belief
        return t.Belief(
            b.session_id,
            b.turn,
            b.entropy_bits,
            b.normalized_uncertainty,
            [t.ScoredHypothesis(h.id, h.description, h.probability) for h in b.top_hypotheses],
            b.unknown_mass,
            b.current_answer,
            (
                t.Homogeneity(
                    b.homogeneity.p_max,
                    b.homogeneity.mean_pairwise_similarity,
                    b.homogeneity.effective_rank,
                    b.homogeneity.exact_repetition_rate,
                    b.homogeneity.trigram_jaccard,
                    _optional(b.homogeneity, "prompt_sensitivity"),
                    _optional(b.homogeneity, "simulator_surprise"),
                    _optional(b.homogeneity, "simulator_overlap"),
                )
                if b.HasField("homogeneity")
                else None
            ),
            b.homogeneity_bucket,
            [
                t.StopSignal(s.rule, s.score, s.threshold, s.answers, s.calibration_version, s.answer)
                for s in b.stop_signals
            ],
        )
    if kind == "ask":
        a = message.ask
        return t.Ask(
            a.session_id,
            a.turn,
            a.question_id,
            a.question,
            a.expected_information_gain,
            a.cost,
            a.cost_adjusted_score,
            a.exploration_bonus,
            a.rationale,
            [
                t.ScoredQuestion(
                    r.question_id, r.question, r.expected_information_gain, r.cost_adjusted_score
                )
                for r in a.runners_up
            ],
        )
    if kind == "answer":
        a = message.answer
        return t.InquiryAnswer(
            a.session_id,
            a.answer,
            confidence(a.confidence),
            _REASONS.get(a.stopping_reason, f"unknown_{a.stopping_reason}"),
            a.forced,
            list(a.trace.entropy_bits),
            list(a.trace.predicted_gain),
            list(a.trace.actual_gain),
        )
    if kind == "evidence":
        e = message.evidence
        return t.Evidence(
            session_id=e.session_id,
            turn=e.turn,
            question_id=e.question_id,
            query=e.query,
            strategy=e.strategy,
            hits=[t.EvidenceHit(h.document_id, h.chunk_id, h.score, h.new) for h in e.hits],
            sentences=[
                t.EvidenceSentence(s.document_id, s.text, s.entailment, s.contradiction) for s in e.sentences
            ],
            sentences_read=e.sentences_read,
            outcome=e.outcome,
            strongest_entailment=e.strongest_entailment,
            strongest_contradiction=e.strongest_contradiction,
            reached=e.reached,
            predicted_reach=e.predicted_reach,
            expected_information_gain=e.expected_information_gain,
            actual_information_gain=e.actual_information_gain,
            latency_ms=e.latency_ms,
            target_chance=e.target_chance,
        )
    raise ValueError(f"unknown Inquire event {kind!r}")


_FEEDBACK = {
    "": sounding_pb2.FEEDBACK_UNSPECIFIED,
    "helpful": sounding_pb2.FEEDBACK_HELPFUL,
    "not_helpful": sounding_pb2.FEEDBACK_NOT_HELPFUL,
}


def observe_request(
    outcome: t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse,
) -> sounding_pb2.ObserveRequest:
    if isinstance(outcome, t.ToolUse):
        use = sounding_pb2.ToolUseEvent(
            toolset=outcome.toolset,
            request=outcome.request,
            used_tool=outcome.used_tool,
            offered_tools=list(outcome.offered_tools),
        )
        if outcome.success is not None:
            use.success = outcome.success
        return sounding_pb2.ObserveRequest(tool_use=use)
    if isinstance(outcome, t.InquiryOutcome):
        return sounding_pb2.ObserveRequest(
            inquiry_outcome=sounding_pb2.InquiryOutcome(
                session_id=outcome.session_id, ground_truth=outcome.ground_truth
            )
        )
    if outcome.feedback not in _FEEDBACK:
        raise ValueError(f"feedback must be one of {sorted(_FEEDBACK)}")
    message = sounding_pb2.RetrievalOutcome(
        retrieval_id=outcome.retrieval_id,
        used_document_ids=list(outcome.used_document_ids),
        feedback=_FEEDBACK[outcome.feedback],
        found_missing_content=outcome.found_missing_content,
        missed_document_ids=list(outcome.missed_document_ids),
    )
    if outcome.agent_success is not None:
        message.agent_success = outcome.agent_success
    return sounding_pb2.ObserveRequest(retrieval_outcome=message)


def observe_result(response: sounding_pb2.ObserveResponse) -> t.ObserveResult:
    return t.ObserveResult(
        response.recorded,
        [t.RejectedObservation(r.index, r.code, r.message) for r in response.rejected],
    )


CALIBRATION_TARGETS = {
    "bandit": sounding_pb2.CALIBRATION_TARGET_BANDIT,
    "miss_rate": sounding_pb2.CALIBRATION_TARGET_MISS_RATE,
    "stop_threshold": sounding_pb2.CALIBRATION_TARGET_STOP_THRESHOLD,
    "confidence": sounding_pb2.CALIBRATION_TARGET_CONFIDENCE,
    "query_adapter": sounding_pb2.CALIBRATION_TARGET_QUERY_ADAPTER,
}
_TARGET_NAMES = {v: k for k, v in CALIBRATION_TARGETS.items()}


def calibrate_request(target: str, **options) -> sounding_pb2.CalibrateRequest:
    if target not in CALIBRATION_TARGETS:
        raise ValueError(f"target must be one of {sorted(CALIBRATION_TARGETS)}")
    states = [
        sounding_pb2.CalibrationState(score=s.score, error=s.error, stated_confidence=s.stated_confidence)
        for s in options.pop("states", ())
    ]
    return sounding_pb2.CalibrateRequest(target=CALIBRATION_TARGETS[target], states=states, **options)


def calibrate_event(message: sounding_pb2.CalibrateResponse) -> t.CalibrateEvent:
    if message.WhichOneof("event") == "progress":
        return t.CalibrationProgress(message.progress.stage, message.progress.fraction)
    r = message.report
    return t.CalibrationReport(
        _TARGET_NAMES.get(r.target, ""),
        r.version,
        r.sample_size,
        r.deployed,
        r.summary,
        dict(r.diagnostics),
        tuple(t.CalibrationCurve(c.name, c.x_label, c.y_label, tuple(c.x), tuple(c.y)) for c in r.curves),
    )


def strategy_metrics(message: sounding_pb2.GetStrategyMetricsResponse) -> t.StrategyMetrics:
    return t.StrategyMetrics(
        [
            t.ArmMetrics(
                a.arm,
                a.selection_rate,
                a.contribution_rate,
                a.mean_latency_ms,
                a.mean_reward,
                a.exploration_share,
                a.runs,
                a.observed_runs,
                a.mean_cost_ms,
            )
            for a in message.arms
        ],
        message.selection_entropy_bits,
        message.cumulative_regret,
        message.planned_retrievals,
        message.observations,
        list(message.pruned_arms),
        message.selector_version,
        corpus_inquiry_metrics(message.corpus_inquiry),
    )


def corpus_inquiry_metrics(m: sounding_pb2.CorpusInquiryMetrics) -> t.CorpusInquiryMetrics:
    return t.CorpusInquiryMetrics(
        queries=m.queries,
        observed_sessions=m.observed_sessions,
        information_gain_mae=m.information_gain_mae,
        information_gain_mae_last_10=m.information_gain_mae_last_10,
        information_gain_mae_last_100=m.information_gain_mae_last_100,
        reach_mae=m.reach_mae,
        reach_accuracy=m.reach_accuracy,
        cost_mae_ms=m.cost_mae_ms,
        strategies={s.strategy: (s.queries, s.mean_information_gain) for s in m.strategies},
    )


def put_tools_request(toolset: str, tools: Iterable[t.Tool]) -> tools_pb2.PutToolsRequest:
    return tools_pb2.PutToolsRequest(
        toolset=toolset,
        tools=[
            tools_pb2.Tool(name=x.name, description=x.description, parameters_json=x.parameters_json)
            for x in tools
        ],
    )


def tool(message: tools_pb2.Tool) -> t.Tool:
    return t.Tool(
        message.name, message.description, message.parameters_json, message.version, message.exemplar_count
    )


def tool_route(response: tools_pb2.RouteToolResponse) -> t.ToolRoute:
    return t.ToolRoute(
        tuple((c.name, c.score) for c in response.candidates),
        response.top1,
        response.margin,
        response.ok,
        response.version,
    )


def tool_metrics(r: tools_pb2.GetToolMetricsResponse) -> t.ToolMetrics:
    return t.ToolMetrics(
        version=r.version,
        tool_count=r.tool_count,
        events=r.events,
        processed=r.processed,
        flagged_fallback=r.flagged_fallback,
        flagged_disagreement=r.flagged_disagreement,
        labels_free=r.labels_free,
        labels_teacher=r.labels_teacher,
        labels_trusted=r.labels_trusted,
        teacher_dropped=r.teacher_dropped,
        accuracy=r.accuracy,
        accuracy_windows=tuple(
            t.ToolAccuracyWindow(w.first_sequence, w.last_sequence, w.labelled, w.accuracy)
            for w in r.accuracy_windows
        ),
        exemplars=dict(r.exemplars),
        dropped_since_start=r.dropped_since_start,
        refreshes_since_start=r.refreshes_since_start,
        mean_refresh_seconds=r.mean_refresh_seconds,
        flagged_share=r.flagged_share,
    )
