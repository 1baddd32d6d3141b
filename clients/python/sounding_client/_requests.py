"""The calls' request messages, from the client's arguments and types."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from sounding_api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2, tools_pb2

from sounding_client import inquiry
from sounding_client import types as t
from sounding_client._convert import CALIBRATION_TARGETS

# An Observe stream's messages carry at most this many observations, of about this many bytes.
OBSERVE_BATCH = 1000
OBSERVE_BATCH_BYTES = 1 << 20

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


def inquiry_start(
    domain: str,
    policy: inquiry.InquiryPolicy,
    hypotheses: Iterable[inquiry.Hypothesis],
    questions: Iterable[inquiry.Question],
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


_FEEDBACK = {
    "": sounding_pb2.FEEDBACK_UNSPECIFIED,
    "helpful": sounding_pb2.FEEDBACK_HELPFUL,
    "not_helpful": sounding_pb2.FEEDBACK_NOT_HELPFUL,
}


def observe_requests(
    outcomes: Iterable[t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse],
) -> list[sounding_pb2.ObserveRequest]:
    """The stream's messages: the observations in order, in batches of at most OBSERVE_BATCH of
    them and about OBSERVE_BATCH_BYTES each (one message per observation would cost far more)."""
    requests: list[sounding_pb2.ObserveRequest] = []
    batch: list[sounding_pb2.Observation] = []
    size = 0
    for outcome in outcomes:
        item = _observation(outcome)
        if batch and (len(batch) >= OBSERVE_BATCH or size + item.ByteSize() > OBSERVE_BATCH_BYTES):
            requests.append(
                sounding_pb2.ObserveRequest(batch=sounding_pb2.ObservationBatch(observations=batch))
            )
            batch, size = [], 0
        batch.append(item)
        size += item.ByteSize()
    if batch:
        requests.append(sounding_pb2.ObserveRequest(batch=sounding_pb2.ObservationBatch(observations=batch)))
    return requests


def _observation(outcome: t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse) -> sounding_pb2.Observation:
    if isinstance(outcome, t.ToolUse):
        use = sounding_pb2.ToolUseEvent(
            toolset=outcome.toolset,
            request=outcome.request,
            used_tool=outcome.used_tool,
            offered_tools=list(outcome.offered_tools),
        )
        if outcome.success is not None:
            use.success = outcome.success
        return sounding_pb2.Observation(tool_use=use)
    if isinstance(outcome, t.InquiryOutcome):
        return sounding_pb2.Observation(
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
    return sounding_pb2.Observation(retrieval_outcome=message)


def calibrate_request(target: str, **options) -> sounding_pb2.CalibrateRequest:
    if target not in CALIBRATION_TARGETS:
        raise ValueError(f"target must be one of {sorted(CALIBRATION_TARGETS)}")
    states = [
        sounding_pb2.CalibrationState(score=s.score, error=s.error, stated_confidence=s.stated_confidence)
        for s in options.pop("states", ())
    ]
    return sounding_pb2.CalibrateRequest(target=CALIBRATION_TARGETS[target], states=states, **options)


def put_tools_request(toolset: str, tools: Iterable[t.Tool]) -> tools_pb2.PutToolsRequest:
    return tools_pb2.PutToolsRequest(
        toolset=toolset,
        tools=[
            tools_pb2.Tool(name=x.name, description=x.description, parameters_json=x.parameters_json)
            for x in tools
        ],
    )
