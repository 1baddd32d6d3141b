"""Inquire's messages: requests as the inquiry service's types, its events as InquireResponses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import json_format
from sounding_api.sounding.v1 import sounding_pb2

from sounding.gateway.convert import retrieval
from sounding.runtime import errors

if TYPE_CHECKING:
    from sounding.inquiry.service import InquiryRequest


def inquiry_request(message: sounding_pb2.InquireRequest, max_start_bytes: int) -> InquiryRequest | None:
    """An InquireRequest as the inquiry service's request type (None: it names none)."""
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
    unset = q.Policy()  # what a field the message leaves unset (or zero) means
    return q.Start(
        domain=start.domain,
        domain_parameters=dict(start.domain_parameters),
        hypotheses=tuple(q.HypothesisIn(h.id, h.description, h.prior) for h in start.hypotheses),
        questions=tuple(q.QuestionIn(c.id, c.text, c.cost, dict(c.outcomes)) for c in start.questions),
        context=start.context,
        policy=q.Policy(
            question_selection=p.question_selection or unset.question_selection,
            stop_rule=p.stop_rule or unset.stop_rule,
            cost_sensitivity=p.cost_sensitivity if p.HasField("cost_sensitivity") else unset.cost_sensitivity,
            exploration_weight=p.exploration_weight,
            max_turns=p.max_turns or unset.max_turns,
            target_confidence=p.target_confidence or unset.target_confidence,
            cost_budget=p.cost_budget or unset.cost_budget,
            seed=p.seed if p.HasField("seed") else unset.seed,
            min_information_gain=(
                p.min_information_gain if p.HasField("min_information_gain") else unset.min_information_gain
            ),
        ),
    )


_STOPPING_REASONS = {
    "confidence_reached": sounding_pb2.STOPPING_REASON_CONFIDENCE_REACHED,
    "budget_exhausted": sounding_pb2.STOPPING_REASON_BUDGET_EXHAUSTED,
    "max_queries_reached": sounding_pb2.STOPPING_REASON_MAX_QUERIES_REACHED,
    "diminishing_returns": sounding_pb2.STOPPING_REASON_DIMINISHING_RETURNS,
    "no_viable_queries": sounding_pb2.STOPPING_REASON_NO_VIABLE_QUERIES,
    "target_out_of_reach": sounding_pb2.STOPPING_REASON_TARGET_OUT_OF_REACH,
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
                homogeneity=(
                    json_format.ParseDict(event.homogeneity, sounding_pb2.Homogeneity())
                    if event.homogeneity
                    else None
                ),
                homogeneity_bucket=event.homogeneity_bucket,
                stop_signals=[
                    sounding_pb2.StopSignal(
                        rule=signal.rule,
                        score=signal.score,
                        threshold=signal.threshold,
                        answers=signal.answers,
                        calibration_version=signal.calibration_version,
                        answer=signal.answer,
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
    if isinstance(event, q.EvidenceEvent):
        return sounding_pb2.InquireResponse(
            evidence=sounding_pb2.Evidence(
                session_id=event.session_id,
                turn=event.turn,
                question_id=event.question_id,
                query=event.query,
                strategy=event.strategy,
                hits=[
                    sounding_pb2.EvidenceHit(
                        document_id=h.document_id, chunk_id=h.chunk_id, score=h.score, new=h.new
                    )
                    for h in event.hits
                ],
                sentences=[
                    sounding_pb2.EvidenceSentence(
                        document_id=s.document_id,
                        text=s.text,
                        entailment=s.entailment,
                        contradiction=s.contradiction,
                    )
                    for s in event.sentences
                ],
                sentences_read=event.sentences_read,
                outcome=event.outcome,
                strongest_entailment=event.strongest_entailment,
                strongest_contradiction=event.strongest_contradiction,
                reached=event.reached,
                predicted_reach=event.predicted_reach,
                expected_information_gain=event.predicted_gain,
                actual_information_gain=event.actual_gain,
                latency_ms=event.latency_ms,
                target_chance=event.target_chance,
            )
        )
    return sounding_pb2.InquireResponse(
        answer=sounding_pb2.InquiryAnswer(
            session_id=event.session_id,
            answer=event.answer,
            confidence=retrieval.confidence(event.confidence),
            stopping_reason=_STOPPING_REASONS[event.stopping_reason],
            forced=event.forced,
            trace=sounding_pb2.InquiryTrace(
                entropy_bits=event.entropy_path,
                predicted_gain=event.predicted_gains,
                actual_gain=event.actual_gains,
            ),
        )
    )
