"""The calls' request messages, from the client's arguments and types."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from sounding_api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2, tools_pb2

from sounding_client import inquiry
from sounding_client import types as t
from sounding_client._convert import CALIBRATION_TARGETS, FUSION_METHODS

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
    fusion: str | None = None,
) -> sounding_pb2.RetrieveRequest:
    if fusion not in FUSION_METHODS:
        raise ValueError(f"fusion must be 'min_max', 'rrf' or None, got {fusion!r}")
    request = sounding_pb2.RetrieveRequest(
        collection=collection,
        query=query,
        top_k=top_k,
        arms=list(arms),
        fusion_k=fusion_k,
        omit_text=omit_text,
        without_learned_ranking=not learned_ranking,
        fusion=FUSION_METHODS[fusion],
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
) -> Iterator[sounding_pb2.ObserveRequest]:
    """The stream's messages: the observations in order, in batches of at most OBSERVE_BATCH of
    them and about OBSERVE_BATCH_BYTES each (one message per observation would cost far more).
    The observations are checked at once (ValueError); each message is built when the stream
    takes it, so the first is on its way while the others are built."""
    outcomes = list(outcomes)
    for outcome in outcomes:
        if isinstance(outcome, t.RetrievalOutcome) and outcome.feedback not in _FEEDBACK:
            raise ValueError(f"feedback must be one of {sorted(_FEEDBACK)}")
    return _batches(outcomes)


def _batches(
    outcomes: list[t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse],
) -> Iterator[sounding_pb2.ObserveRequest]:
    """Each observation is written in place into its batch (building it apart and copying it in
    would cost twice)."""
    request, size = sounding_pb2.ObserveRequest(), 0
    items = request.batch.observations
    for outcome in outcomes:
        if len(items) >= OBSERVE_BATCH:
            yield request
            request, size = sounding_pb2.ObserveRequest(), 0
            items = request.batch.observations
        item = items.add()
        _fill(item, outcome)
        size += item.ByteSize()
        if size > OBSERVE_BATCH_BYTES and len(items) > 1:  # the batch is full without it: it opens the next
            moved = sounding_pb2.Observation()
            moved.CopyFrom(item)
            del items[-1]
            yield request
            request, size = sounding_pb2.ObserveRequest(), moved.ByteSize()
            items = request.batch.observations
            items.append(moved)
    if items:
        yield request


def _fill(item: sounding_pb2.Observation, outcome: t.RetrievalOutcome | t.InquiryOutcome | t.ToolUse) -> None:
    if isinstance(outcome, t.ToolUse):
        use = item.tool_use
        use.toolset, use.request, use.used_tool = outcome.toolset, outcome.request, outcome.used_tool
        use.offered_tools.extend(outcome.offered_tools)
        if outcome.success is not None:
            use.success = outcome.success
    elif isinstance(outcome, t.InquiryOutcome):
        inquired = item.inquiry_outcome
        inquired.session_id, inquired.ground_truth = outcome.session_id, outcome.ground_truth
    else:
        message = item.retrieval_outcome
        message.retrieval_id = outcome.retrieval_id
        message.used_document_ids.extend(outcome.used_document_ids)
        message.feedback = _FEEDBACK[outcome.feedback]
        message.found_missing_content = outcome.found_missing_content
        message.missed_document_ids.extend(outcome.missed_document_ids)
        if outcome.agent_success is not None:
            message.agent_success = outcome.agent_success


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
