"""The client's decoding of Retrieve events, from the messages the gateway builds."""

import pytest
from sounding.core.fusion import Contribution
from sounding.core.provenance import Provenance
from sounding.gateway.convert import retrieval as convert
from sounding.gateway.convert.inquiry import inquire_response
from sounding.inquiry.protocol import STOPPING_REASONS, AnswerEvent
from sounding.retrieval import protocol as p
from sounding_client import ArmRank, Fused, Hit, InquiryAnswer
from sounding_client._convert import Hits, inquiry_event, retrieve_event
from sounding_client._requests import retrieve_request

pytestmark = pytest.mark.unit


def fused_event() -> p.FusedEvent:
    return p.FusedEvent(
        [
            p.FusedHit("a", "a#0", 0.032, [Contribution("dense", 1, 0.8), Contribution("lexical", 2, 7.5)]),
            p.FusedHit("b", "b#1", 0.016, [Contribution("lexical", 1, 9.0)], title="B", text="bee"),
            p.FusedHit("c", "c#0", 0.015, [Contribution("dense", 3, 0.4)], metadata={"year": "1999"}),
        ],
        ["dense", "lexical"],
    )


def test_fused_hits_survive_the_round_trip_through_protobuf():
    event = retrieve_event(convert.retrieve_response(fused_event()))
    assert isinstance(event, Fused) and event.arms == ["dense", "lexical"]
    assert event.hits == [
        Hit(
            "a",
            "a#0",
            pytest.approx(0.032),
            "",
            "",
            [ArmRank("dense", 1, pytest.approx(0.8)), ArmRank("lexical", 2, 7.5)],
        ),
        Hit("b", "b#1", pytest.approx(0.016), "bee", "B", [ArmRank("lexical", 1, 9.0)]),
        Hit(
            "c",
            "c#0",
            pytest.approx(0.015),
            "",
            "",
            [ArmRank("dense", 3, pytest.approx(0.4))],
            {"year": "1999"},
        ),
    ]


def test_hits_are_decoded_once_on_first_use_and_behave_as_a_sequence():
    message = convert.retrieve_response(fused_event())
    hits = retrieve_event(message).hits
    assert isinstance(hits, Hits)
    assert len(hits) == 3 and hits._hits is None  # counting does not decode
    first = hits[0]
    assert hits._hits is not None and hits[0] is first  # decoded once, then kept
    assert [h.document_id for h in hits] == ["a", "b", "c"]
    assert [h.document_id for h in hits[1:]] == ["b", "c"]
    assert hits != [first] and hits != "abc"
    assert repr(hits).startswith("[Hit(document_id='a'")
    message.fused.hits[0].document_id = "changed"  # decoded hits no longer depend on the message
    assert hits[0].document_id == "a"


def test_an_event_without_hits_compares_equal_to_an_empty_list():
    event = retrieve_event(convert.retrieve_response(p.FusedEvent([], ["lexical"])))
    assert event.hits == [] and len(event.hits) == 0 and not list(event.hits)


@pytest.mark.parametrize("reason", STOPPING_REASONS)
def test_every_stopping_reason_reaches_the_client_by_name(reason):
    event = AnswerEvent("s", "NOT_ENOUGH_INFO", Provenance.deterministic(0.4, "x"), reason, False, [], [], [])
    answer = inquiry_event(inquire_response(event))
    assert isinstance(answer, InquiryAnswer) and answer.stopping_reason == reason


def test_a_stopping_reason_newer_than_the_client_is_named_not_fatal():
    confidence = Provenance.deterministic(0.9, "x")
    message = inquire_response(
        AnswerEvent("s", "SUPPORT", confidence, "confidence_reached", False, [], [], [])
    )
    message.answer.stopping_reason = 99  # an open enum: a later server may send values unknown here
    answer = inquiry_event(message)
    assert isinstance(answer, InquiryAnswer) and answer.stopping_reason == "unknown_99"


@pytest.mark.parametrize(("fusion", "received"), [(None, ""), ("min_max", "min_max"), ("rrf", "rrf")])
def test_a_requested_fusion_reaches_the_service_as_named(fusion, received):
    request = retrieve_request("c", "q", 10, (), 0.0, False, None, fusion=fusion)
    assert convert.retrieve_query(request, "default", None).fusion == received


def test_an_unknown_fusion_is_refused_before_sending():
    with pytest.raises(ValueError, match="fusion"):
        retrieve_request("c", "q", 10, (), 0.0, False, None, fusion="borda")
