"""Observe's, Calibrate's and GetStrategyMetrics' messages."""

from __future__ import annotations

from sounding_api.sounding.v1 import sounding_pb2

from sounding.learning.inquiry import InquiryOutcome
from sounding.learning.protocol import Rejected, RetrievalOutcome
from sounding.runtime import errors
from sounding.settings.limits import ObserveLimits
from sounding.tools.protocol import ToolUse

_FEEDBACK = {
    sounding_pb2.FEEDBACK_UNSPECIFIED: "",
    sounding_pb2.FEEDBACK_HELPFUL: "helpful",
    sounding_pb2.FEEDBACK_NOT_HELPFUL: "not_helpful",
}


def observations(message: sounding_pb2.ObserveRequest, first: int, limits: ObserveLimits) -> list:
    """The observations one Observe message carries (a batch of them, or one), numbered in the
    stream from `first`: each a RetrievalOutcome, InquiryOutcome or ToolUse, or a Rejected entry
    for one that is malformed or over a limit."""
    items = message.batch.observations if message.WhichOneof("observation") == "batch" else (message,)
    # An outcome of at most this many bytes holds no id longer than max_id_chars (a character
    # takes at least a byte) and no more than max_document_ids ids (an id takes at least two).
    small = min(limits.max_id_chars, 2 * limits.max_document_ids)
    converted: list = []
    for index, item in enumerate(items, first):
        if item.WhichOneof("observation") != "retrieval_outcome":
            converted.append(_observation(item, index, limits))
            continue
        o = item.retrieval_outcome
        problem = _outcome_problem(o, limits) if o.ByteSize() > small else ""
        converted.append(
            Rejected(index, "INVALID_ARGUMENT", problem)
            if problem
            else RetrievalOutcome(
                retrieval_id=o.retrieval_id,
                used_document_ids=tuple(o.used_document_ids),
                feedback=_FEEDBACK[o.feedback],
                agent_success=o.agent_success if o.HasField("agent_success") else None,
                found_missing_content=o.found_missing_content,
                missed_document_ids=tuple(o.missed_document_ids),
            )
        )
    return converted


def _outcome_problem(o: sounding_pb2.RetrievalOutcome, limits: ObserveLimits) -> str:
    for name, ids in (
        ("used_document_ids", o.used_document_ids),
        ("missed_document_ids", o.missed_document_ids),
    ):
        if len(ids) > limits.max_document_ids or max(map(len, ids), default=0) > limits.max_id_chars:
            return (
                f"retrieval_outcome.{name}: at most {limits.max_document_ids} ids of at most "
                f"{limits.max_id_chars} characters"
            )
    if len(o.retrieval_id) > limits.max_id_chars:
        return f"retrieval_outcome.retrieval_id is longer than {limits.max_id_chars}"
    return ""


def _observation(
    message: sounding_pb2.Observation | sounding_pb2.ObserveRequest, index: int, limits: ObserveLimits
):
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
    if kind == "tool_use":
        u = message.tool_use
        return ToolUse(
            toolset=u.toolset,
            request=u.request,
            used_tool=u.used_tool,
            offered_tools=tuple(u.offered_tools),
            success=u.success if u.HasField("success") else None,
        )
    return Rejected(index, "INVALID_ARGUMENT", "an empty observation: set one of its kinds")


def observe_response(result) -> sounding_pb2.ObserveResponse:
    return sounding_pb2.ObserveResponse(
        recorded=result.recorded,
        rejected=[
            sounding_pb2.RejectedObservation(index=r.index, code=r.code, message=r.message)
            for r in result.rejected
        ],
    )


_TARGETS = {
    "bandit": sounding_pb2.CALIBRATION_TARGET_BANDIT,
    "miss_rate": sounding_pb2.CALIBRATION_TARGET_MISS_RATE,
    "confidence": sounding_pb2.CALIBRATION_TARGET_CONFIDENCE,
    "stop_threshold": sounding_pb2.CALIBRATION_TARGET_STOP_THRESHOLD,
    "query_adapter": sounding_pb2.CALIBRATION_TARGET_QUERY_ADAPTER,
}


def stop_threshold_request(request: sounding_pb2.CalibrateRequest, max_inline_states: int):
    from sounding.inquiry.llm.domain import DEFAULT_STOP_RULE
    from sounding.learning.inquiry import InlineState, StopThresholdRequest

    if len(request.states) > max_inline_states:
        raise errors.InvalidArgument(f"at most {max_inline_states} states", field="states")
    return StopThresholdRequest(
        task=request.task,
        regime=request.regime or "normal",
        bucket=request.bucket,
        stop_rule=request.stop_rule or DEFAULT_STOP_RULE,
        delta=request.risk or 0.1,
        alpha=request.alpha or 0.05,
        states=tuple(
            InlineState(s.score, s.error, s.stated_confidence if s.HasField("stated_confidence") else None)
            for s in request.states
        ),
        one_state_per_session=request.one_state_per_session,
        # The request's validation admits "", "fixed_sequence" and "largest_prefix".
        threshold_rule="largest_prefix" if request.threshold_rule == "largest_prefix" else "fixed_sequence",
    )


def calibrate_response(event) -> sounding_pb2.CalibrateResponse:
    from sounding.learning.protocol import CalibrationProgress

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
            curves=[
                sounding_pb2.CalibrationCurve(name=c.name, x_label=c.x_label, y_label=c.y_label, x=c.x, y=c.y)
                for c in event.curves
            ],
        )
    )


def corpus_inquiry_metrics(metrics) -> sounding_pb2.CorpusInquiryMetrics:
    prediction = metrics.prediction
    windows = prediction.windows
    return sounding_pb2.CorpusInquiryMetrics(
        queries=metrics.queries,
        observed_sessions=metrics.observed_sessions,
        information_gain_mae=prediction.information_gain_mae,
        information_gain_mae_last_10=windows.get("last_10", {}).get("information_gain_mae", 0.0),
        information_gain_mae_last_100=windows.get("last_100", {}).get("information_gain_mae", 0.0),
        reach_mae=metrics.reach_mae,
        reach_accuracy=prediction.result_type_accuracy,
        cost_mae_ms=prediction.cost_mae,
        strategies=[
            sounding_pb2.StrategyGain(strategy=name, queries=count, mean_information_gain=gain)
            for name, (count, gain) in metrics.strategies.items()
        ],
    )


def strategy_metrics(metrics, corpus_inquiry) -> sounding_pb2.GetStrategyMetricsResponse:
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
        corpus_inquiry=corpus_inquiry_metrics(corpus_inquiry),
    )
