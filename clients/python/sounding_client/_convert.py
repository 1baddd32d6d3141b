"""Responses (protobuf) -> the client's typed results, and a failed call -> SoundingError."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC

import grpc
from google.rpc import error_details_pb2, status_pb2
from sounding_api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2, tools_pb2

from sounding_client import inquiry
from sounding_client import types as t

# The trailing metadata carrying a status's details (gRPC's rich error model).
STATUS_DETAILS_KEY = "grpc-status-details-bin"


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
            FUSIONS[message.plan.fusion],
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


_REASONS = {
    v.number: v.name.removeprefix("STOPPING_REASON_").lower()
    for v in sounding_pb2.StoppingReason.DESCRIPTOR.values
}


def inquiry_event(message: sounding_pb2.InquireResponse) -> inquiry.InquiryEvent:
    kind = message.WhichOneof("event")
    if kind == "belief":
        b = message.belief
        return inquiry.Belief(
            b.session_id,
            b.turn,
            b.entropy_bits,
            b.normalized_uncertainty,
            [inquiry.ScoredHypothesis(h.id, h.description, h.probability) for h in b.top_hypotheses],
            b.unknown_mass,
            b.current_answer,
            (
                inquiry.Homogeneity(
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
                inquiry.StopSignal(s.rule, s.score, s.threshold, s.answers, s.calibration_version, s.answer)
                for s in b.stop_signals
            ],
        )
    if kind == "ask":
        a = message.ask
        return inquiry.Ask(
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
                inquiry.ScoredQuestion(
                    r.question_id, r.question, r.expected_information_gain, r.cost_adjusted_score
                )
                for r in a.runners_up
            ],
        )
    if kind == "answer":
        a = message.answer
        return inquiry.InquiryAnswer(
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
        return inquiry.Evidence(
            session_id=e.session_id,
            turn=e.turn,
            question_id=e.question_id,
            query=e.query,
            strategy=e.strategy,
            hits=[inquiry.EvidenceHit(h.document_id, h.chunk_id, h.score, h.new) for h in e.hits],
            sentences=[
                inquiry.EvidenceSentence(s.document_id, s.text, s.entailment, s.contradiction)
                for s in e.sentences
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


def observe_result(response: sounding_pb2.ObserveResponse) -> t.ObserveResult:
    return t.ObserveResult(
        response.recorded,
        [t.RejectedObservation(r.index, r.code, r.message) for r in response.rejected],
    )


# A Retrieve's `fusion`: None for the deployment's.
FUSION_METHODS = {
    None: sounding_pb2.FUSION_METHOD_UNSPECIFIED,
    "min_max": sounding_pb2.FUSION_METHOD_MIN_MAX,
    "rrf": sounding_pb2.FUSION_METHOD_RRF,
}
# A Plan's fusion by its enum value ("" where the server did not say).
FUSIONS = {value: name or "" for name, value in FUSION_METHODS.items()}

CALIBRATION_TARGETS = {
    "bandit": sounding_pb2.CALIBRATION_TARGET_BANDIT,
    "miss_rate": sounding_pb2.CALIBRATION_TARGET_MISS_RATE,
    "stop_threshold": sounding_pb2.CALIBRATION_TARGET_STOP_THRESHOLD,
    "confidence": sounding_pb2.CALIBRATION_TARGET_CONFIDENCE,
    "query_adapter": sounding_pb2.CALIBRATION_TARGET_QUERY_ADAPTER,
}
_TARGET_NAMES = {v: k for k, v in CALIBRATION_TARGETS.items()}


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
        untrusted_exemplars_route=r.untrusted_exemplars_route,
    )
