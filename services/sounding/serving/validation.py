"""The rules a request's protos declare (`buf.validate`: lengths, patterns, ranges, defined enum
values, unique items), checked by protovalidate on every request message the servers decode
(`rpc.service_handler`). The limits a deployment configures (`sounding.settings.limits`) stay with the
services that apply them.
"""

from __future__ import annotations

import json

import protovalidate
from google.protobuf.message import Message

from sounding.runtime import errors

# A request can break many rules (every item of a long list); the error names the first ones.
MAX_VIOLATIONS = 20


def check(message: Message) -> None:
    """INVALID_ARGUMENT naming the violated fields (the first MAX_VIOLATIONS), as paths within
    the message (a streamed request's too), when `message` breaks a rule its proto declares."""
    found = protovalidate.collect_violations(message)
    if not found:
        return
    by_field: dict[str, list[str]] = {}  # a field can break several rules (NaN: range and finite)
    for violation in found:
        by_field.setdefault(field_path(violation.proto.field), []).append(violation.proto.message)
    violations = [
        errors.FieldViolation(field, " and ".join(descriptions))
        for field, descriptions in list(by_field.items())[:MAX_VIOLATIONS]
    ]
    summary = "; ".join(f"{v.field}: {v.description}" for v in violations)
    if len(by_field) > MAX_VIOLATIONS:
        summary += f"; and {len(by_field) - MAX_VIOLATIONS} more fields"
    raise errors.InvalidArgument(summary, violations=violations)


def field_path(path) -> str:
    """A protovalidate FieldPath as Sounding names fields: `documents[3].text`,
    `start.questions[0].outcomes["h1"]`."""
    parts = []
    for element in path.elements:
        name = element.field_name
        subscript = element.subscript
        if subscript is not None:
            key = subscript.value
            name += f"[{json.dumps(key) if subscript.field == 'string_key' else key}]"
        parts.append(name)
    return ".".join(parts)
