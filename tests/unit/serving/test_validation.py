"""sounding.serving.validation: the rules the public protos declare, as protovalidate applies them."""

from types import SimpleNamespace

import pytest
from sounding.runtime import errors
from sounding.serving import validation
from sounding_api.sounding.v1 import common_pb2, corpus_pb2
from sounding_api.sounding.v1 import sounding_pb2 as pb

pytestmark = pytest.mark.unit

NAN = float("nan")


def start(**fields) -> pb.InquireRequest:
    return pb.InquireRequest(start=pb.InquiryStart(domain="hypotheses", **fields))


@pytest.mark.parametrize(
    "message,fields",
    [
        (corpus_pb2.CreateCollectionRequest(name="Has Space"), ["name"]),
        (corpus_pb2.GetCollectionRequest(name="a" * 65), ["name"]),
        (corpus_pb2.DeleteCollectionRequest(name=""), ["name"]),
        (corpus_pb2.ListCollectionsRequest(page_size=-1), ["page_size"]),
        (corpus_pb2.IngestDocumentsRequest(collection="c"), ["documents"]),
        (
            corpus_pb2.IngestDocumentsRequest(
                collection="-lead",
                documents=[common_pb2.Document(id="a", text="x"), common_pb2.Document(id="", text=" \n")],
            ),
            ["collection", "documents[1].id", "documents[1].text"],
        ),
        (
            corpus_pb2.IngestDocumentsRequest(documents=[common_pb2.Document(id="a#1", text="x")]),
            ["documents[0].id"],
        ),
        (pb.RetrieveRequest(collection="c", query="   ", top_k=10), ["query"]),
        (pb.RetrieveRequest(collection="c", query="q", top_k=0), ["top_k"]),
        (pb.RetrieveRequest(collection="c", query="q", top_k=1, arms=["dense", "dense"]), ["arms"]),
        (pb.RetrieveRequest(collection="c", query="q", top_k=1, fusion_k=NAN), ["fusion_k"]),
        (pb.RetrieveRequest(collection="c", query="q", top_k=1, fusion_k=float("inf")), ["fusion_k"]),
        (
            pb.RetrieveRequest(collection="c", query="q", top_k=1, synthesis_confidence=1.5),
            ["synthesis_confidence"],
        ),
        (
            pb.RetrieveRequest(
                collection="c",
                query="q",
                top_k=1,
                expansion=pb.ExpansionOptions(
                    min_recall=-0.1, max_iterations=-1, budget=0, strategies=["a", "a"]
                ),
            ),
            ["expansion.min_recall", "expansion.max_iterations", "expansion.budget", "expansion.strategies"],
        ),
        (start(hypotheses=[pb.Hypothesis(id="h", prior=NAN)]), ["start.hypotheses[0].prior"]),
        (
            start(questions=[pb.CandidateQuestion(id="q"), pb.CandidateQuestion(id="r", cost=-1)]),
            ["start.questions[1].cost"],
        ),
        (start(policy=pb.InquiryPolicy(cost_sensitivity=NAN)), ["start.policy.cost_sensitivity"]),
        (
            start(policy=pb.InquiryPolicy(exploration_weight=float("inf"))),
            ["start.policy.exploration_weight"],
        ),
        (start(policy=pb.InquiryPolicy(cost_budget=NAN)), ["start.policy.cost_budget"]),
        (start(policy=pb.InquiryPolicy(seed=-1)), ["start.policy.seed"]),
        (start(policy=pb.InquiryPolicy(target_confidence=1.5)), ["start.policy.target_confidence"]),
        (pb.InquireRequest(resume=pb.InquiryResume()), ["resume.session_id"]),
        (
            pb.ObserveRequest(retrieval_outcome=pb.RetrievalOutcome(retrieval_id="r", feedback=7)),
            ["retrieval_outcome.feedback"],
        ),
        (pb.CalibrateRequest(), ["target"]),
        (pb.CalibrateRequest(target=9), ["target"]),
        (
            pb.CalibrateRequest(target=pb.CALIBRATION_TARGET_STOP_THRESHOLD, risk=1.0, alpha=-0.5),
            ["risk", "alpha"],
        ),
        (
            pb.CalibrateRequest(
                target=pb.CALIBRATION_TARGET_STOP_THRESHOLD,
                states=[pb.CalibrationState(score=0.1), pb.CalibrationState(score=NAN, stated_confidence=2)],
            ),
            ["states[1].score", "states[1].stated_confidence"],
        ),
    ],
)
def test_a_message_breaking_declared_rules_names_each_violated_field(message, fields):
    with pytest.raises(errors.InvalidArgument) as raised:
        validation.check(message)
    assert [v.field for v in raised.value.violations] == fields
    assert raised.value.field == fields[0]
    assert all(v.description for v in raised.value.violations)


@pytest.mark.parametrize(
    "message",
    [
        corpus_pb2.CreateCollectionRequest(name="beir-scifact_1"),
        corpus_pb2.ListCollectionsRequest(),
        corpus_pb2.IngestDocumentsRequest(documents=[common_pb2.Document(id="a", text="x", title="")]),
        pb.RetrieveRequest(
            collection="c", query=" q ", top_k=1000, expansion=pb.ExpansionOptions(max_iterations=0)
        ),
        start(policy=pb.InquiryPolicy(), hypotheses=[pb.Hypothesis(id="h", prior=1e308)]),
        pb.InquireRequest(observation=pb.InquiryObservation(question_id="q", answer="")),
        # Observations are judged one by one (an empty one is rejected at its stream position).
        pb.ObserveRequest(),
        pb.CalibrateRequest(target=pb.CALIBRATION_TARGET_MISS_RATE),
    ],
)
def test_messages_within_the_rules_pass(message):
    validation.check(message)


def test_list_items_and_map_entries_are_named_by_their_index_and_key():
    def element(name, subscript=None):
        return SimpleNamespace(field_name=name, subscript=subscript)

    path = SimpleNamespace(
        elements=[
            element("start"),
            element("questions", SimpleNamespace(field="index", value=3)),
            element("outcomes", SimpleNamespace(field="string_key", value='h"1')),
        ]
    )
    assert validation.field_path(path) == 'start.questions[3].outcomes["h\\"1"]'


def test_a_message_breaking_many_rules_names_the_first_ones_and_counts_the_rest():
    hypotheses = [pb.Hypothesis(id=f"h{i}", prior=-1) for i in range(validation.MAX_VIOLATIONS + 5)]
    with pytest.raises(errors.InvalidArgument) as raised:
        validation.check(start(hypotheses=hypotheses))
    assert len(raised.value.violations) == validation.MAX_VIOLATIONS
    assert raised.value.message.endswith("; and 5 more fields")
