"""SoundingError <-> gRPC status with google.rpc details (ErrorInfo, BadRequest)."""

from __future__ import annotations

from typing import cast

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from sounding.runtime import errors

DOMAIN = "sounding.dev"
# Status messages and field paths are clipped to these lengths (a message can quote client data,
# and trailers have a size limit of their own).
MAX_MESSAGE_CHARS = 1024
MAX_FIELD_CHARS = 256


def to_status(error: errors.SoundingError) -> grpc.Status:
    message = _clip(error.message, MAX_MESSAGE_CHARS)
    field = _clip(error.field or "", MAX_FIELD_CHARS)
    details = []
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN)
    if field:
        info.metadata["field"] = field
    details.append(info)
    if field and error.code == "INVALID_ARGUMENT":
        violations = error.violations or [errors.FieldViolation(field, message)]
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=_clip(v.field, MAX_FIELD_CHARS),
                        description=_clip(v.description, MAX_MESSAGE_CHARS),
                    )
                    for v in violations
                ]
            )
        )
    packed = []
    for detail in details:
        holder = any_pb2.Any()
        holder.Pack(detail)
        packed.append(holder)
    status = status_pb2.Status(code=getattr(code_pb2, error.code), message=message, details=packed)
    return rpc_status.to_status(status)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def abort(context: grpc.aio.ServicerContext, error: errors.SoundingError) -> None:
    await context.abort_with_status(to_status(error))  # pyright: ignore[reportAttributeAccessIssue]  # typeshed's grpc.aio stub lacks it


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: errors.FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.DeadlineExceeded,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
    grpc.StatusCode.UNAUTHENTICATED: errors.Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
}


def from_rpc_error(error: grpc.RpcError, what: str) -> errors.SoundingError:
    """A failed internal call as a domain error (UNAVAILABLE stays UNAVAILABLE, and so on)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    kind = _BY_CODE.get(code, errors.SoundingError)
    detail = error.details() if hasattr(error, "details") else str(error)
    return kind(
        f"{what}: {detail}",
        reason=f"{code.name}" if kind is errors.SoundingError else None,
        field=_violated_field(error),
    )


def _violated_field(error: grpc.RpcError) -> str | None:
    """The field named by the first BadRequest violation in the error's status details."""
    try:
        status = rpc_status.from_call(cast(grpc.Call, error))  # a call's error is its Call too
    except (AttributeError, ValueError):  # not a call's error, or details that contradict it
        return None
    for holder in status.details if status is not None else ():
        request = error_details_pb2.BadRequest()
        if holder.Unpack(request):  # False when the detail is of another type
            if request.field_violations:
                return request.field_violations[0].field
    return None
