import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sounding.runtime import errors
from sounding.serving.grpc_errors import to_status

pytestmark = pytest.mark.unit


def _details(status: grpc.Status):
    trailing = dict(status.trailing_metadata)
    from google.rpc import status_pb2

    decoded = status_pb2.Status.FromString(trailing[rpc_status.GRPC_DETAILS_METADATA_KEY])
    out = {}
    for detail in decoded.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest):
            if detail.Is(kind.DESCRIPTOR):
                message = kind()
                detail.Unpack(message)
                out[kind.__name__] = message
    return decoded, out


def test_invalid_argument_carries_error_info_and_field_violation():
    status = to_status(errors.InvalidArgument("top_k must be in [1, 1000]", field="top_k"))
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    decoded, details = _details(status)
    assert decoded.message == "top_k must be in [1, 1000]"
    assert details["ErrorInfo"].reason == "INVALID_ARGUMENT"
    assert details["ErrorInfo"].metadata["field"] == "top_k"
    assert [v.field for v in details["BadRequest"].field_violations] == ["top_k"]


def test_not_found_has_a_reason_and_no_field_violation():
    status = to_status(errors.NotFound("gone", reason="COLLECTION_NOT_FOUND", field="collection"))
    assert status.code == grpc.StatusCode.NOT_FOUND
    _, details = _details(status)
    assert details["ErrorInfo"].reason == "COLLECTION_NOT_FOUND"
    assert "BadRequest" not in details


def test_a_message_quoting_client_data_is_clipped():
    status = to_status(errors.InvalidArgument("bad: " + "x" * 100_000, field="f" * 10_000))
    decoded, details = _details(status)
    assert len(decoded.message) <= 1024 and decoded.message.startswith("bad: x")
    assert len(details["BadRequest"].field_violations[0].field) <= 256
