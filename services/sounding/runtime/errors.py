"""Domain errors. The gateway turns them into gRPC statuses with google.rpc details.

Each carries a canonical gRPC code name, an UPPER_SNAKE reason (ErrorInfo) and, for bad input,
the offending fields (BadRequest field violations).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import NamedTuple


class FieldViolation(NamedTuple):
    field: str
    description: str


class SoundingError(Exception):
    code = "INTERNAL"
    default_reason = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        field: str | None = None,
        violations: Sequence[FieldViolation] = (),
    ):
        """`field` names the offending field; `violations`, when there are several, each with its
        own description (`field` defaults to the first's)."""
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.field = field or (violations[0].field if violations else None)
        self.violations = tuple(violations)


class InvalidArgument(SoundingError):
    code = "INVALID_ARGUMENT"
    default_reason = "INVALID_ARGUMENT"


class NotFound(SoundingError):
    code = "NOT_FOUND"
    default_reason = "NOT_FOUND"


class AlreadyExists(SoundingError):
    code = "ALREADY_EXISTS"
    default_reason = "ALREADY_EXISTS"


class FailedPrecondition(SoundingError):
    code = "FAILED_PRECONDITION"
    default_reason = "FAILED_PRECONDITION"


class Unavailable(SoundingError):
    code = "UNAVAILABLE"
    default_reason = "UNAVAILABLE"


class DeadlineExceeded(SoundingError):
    code = "DEADLINE_EXCEEDED"
    default_reason = "DEADLINE_EXCEEDED"


class ResourceExhausted(SoundingError):
    code = "RESOURCE_EXHAUSTED"
    default_reason = "RESOURCE_EXHAUSTED"


class Unauthenticated(SoundingError):
    code = "UNAUTHENTICATED"
    default_reason = "UNAUTHENTICATED"


class PermissionDenied(SoundingError):
    code = "PERMISSION_DENIED"
    default_reason = "PERMISSION_DENIED"


class Unimplemented(SoundingError):
    code = "UNIMPLEMENTED"
    default_reason = "UNIMPLEMENTED"


def collection_not_found(name: str) -> NotFound:
    return NotFound(f"collection {name!r} does not exist", reason="COLLECTION_NOT_FOUND", field="collection")


def collection_exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"collection {name!r} already exists", field="name")


def of_code(code: str, message: str, *, reason: str | None = None, field: str | None = None) -> SoundingError:
    """The domain error for a canonical code name (a plain SoundingError, INTERNAL, for a code
    without a class of its own, which keeps the name as its reason)."""
    kinds = {kind.code: kind for kind in SoundingError.__subclasses__()}
    kind = kinds.get(code, SoundingError)
    return kind(message, reason=reason or (code if kind is SoundingError else None), field=field)


def internal(what: str, error: BaseException) -> SoundingError:
    """An unexpected failure as INTERNAL: its traceback goes to the log under an incident id,
    and the caller is told only the id."""
    incident = uuid.uuid4().hex[:12]
    logging.getLogger("sounding").error("%s failed (incident %s)", what, incident, exc_info=error)
    return SoundingError(f"internal error (incident {incident})")
