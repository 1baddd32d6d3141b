"""The strategy-worker protocol carries every field of the retrieval dataclasses both ways."""

import numpy as np
import pytest
from sounding.api.sounding.worker.v1 import worker_pb2
from sounding.retrieval import wire
from sounding.retrieval.protocol import ArmRequest, ArmResult, ExpansionRequest, ExpansionResult
from sounding.store.reader import ChunkHit
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit
DOCS = ResourceRef("acme", "docs")


def _through_the_wire(message):
    return type(message).FromString(message.SerializeToString())


def test_an_arm_call_and_its_outcome_round_trip():
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    request = ArmRequest(DOCS, "what causes rain", 50, 1.5, vector, 7, "flow-1")
    call = _through_the_wire(wire.arm_call("dense", request, {"traceparent": "00-abc"}))
    decoded = wire.arm_request(call.run_arm)
    assert call.run_arm.arm == "dense" and dict(call.trace_carrier) == {"traceparent": "00-abc"}
    assert call.run_arm.collection == "acme.docs"
    assert (decoded.collection, decoded.query, decoded.limit, decoded.timeout_s) == (
        DOCS,
        "what causes rain",
        50,
        1.5,
    )
    assert (decoded.collection_version, decoded.flow) == (7, "flow-1")
    np.testing.assert_array_equal(decoded.query_vector, vector)

    result = ArmResult(
        "dense", [ChunkHit("d1", "d1#0", 0.75), ChunkHit("d2", "d2#3", np.float32(0.5))], 3.25, "text", 1.5
    )
    back = wire.arm_result(_through_the_wire(wire.arm_outcome(result)))
    assert back == result
    assert all(isinstance(hit, ChunkHit) for hit in back.hits)


def test_absent_optionals_stay_absent():
    request = ArmRequest(DOCS, "q", 10)
    decoded = wire.arm_request(_through_the_wire(wire.arm_call("lexical", request, {})).run_arm)
    assert decoded == request
    empty = ArmResult("lexical", [], 0.5)
    assert wire.arm_result(_through_the_wire(wire.arm_outcome(empty))) == empty


def test_an_expansion_call_and_its_outcome_round_trip():
    vector = np.ones(8, dtype=np.float32)
    request = ExpansionRequest(DOCS, "q", "graph", 3, 20, None, vector, "f")
    decoded = wire.expansion_request(_through_the_wire(wire.expansion_call(request, {})).expand)
    assert (decoded.collection, decoded.strategy, decoded.queries, decoded.limit, decoded.timeout_s) == (
        DOCS,
        "graph",
        3,
        20,
        None,
    )
    np.testing.assert_array_equal(decoded.query_vector, vector)

    result = ExpansionResult("graph", ["a", "b"], [[ChunkHit("d", "d#0", 1.0)], []], 9.0)
    assert wire.expansion_result(_through_the_wire(wire.expansion_outcome(result))) == result


def test_a_call_naming_no_tenants_collection_is_refused_by_the_worker():
    call = worker_pb2.ArmCall(arm="dense", collection="docs", query="q", limit=1)
    with pytest.raises(ValueError):
        wire.arm_request(call)


def test_no_reply_is_mistaken_for_another_kind():
    reply = worker_pb2.WorkerReply(calls_in_flight=0)
    assert reply.WhichOneof("result") == "calls_in_flight"
