import pytest
from sounding_client import InquiryOutcome, RetrievalOutcome, ToolUse, _requests

pytestmark = pytest.mark.unit


def observations(requests):
    return [item for request in requests for item in request.batch.observations]


def test_observations_go_in_order_in_batches_of_at_most_the_batch_size():
    outcomes = [
        RetrievalOutcome(f"r{i}", ("d1",)) if i % 3 else ToolUse("tools", f"request {i}", "search")
        for i in range(2 * _requests.OBSERVE_BATCH + 5)
    ]
    outcomes.append(InquiryOutcome("s1", "the answer"))
    requests = list(_requests.observe_requests(outcomes))
    assert [len(r.batch.observations) for r in requests] == [_requests.OBSERVE_BATCH] * 2 + [6]
    sent = observations(requests)
    assert [item.WhichOneof("observation") for item in sent[:4]] == [
        "tool_use",
        "retrieval_outcome",
        "retrieval_outcome",
        "tool_use",
    ]
    assert sent[1].retrieval_outcome.retrieval_id == "r1" and sent[-1].inquiry_outcome.session_id == "s1"


def test_a_batch_is_closed_before_it_grows_past_the_byte_budget():
    long_ids = tuple(f"document-{i:06d}" for i in range(1000))
    outcomes = [RetrievalOutcome(f"r{i}", long_ids) for i in range(200)]
    requests = list(_requests.observe_requests(outcomes))
    assert len(requests) > 1 and all(r.ByteSize() <= _requests.OBSERVE_BATCH_BYTES + 100 for r in requests)
    assert [o.retrieval_outcome.retrieval_id for o in observations(requests)] == [f"r{i}" for i in range(200)]


def test_no_observations_make_no_message():
    assert list(_requests.observe_requests([])) == []
