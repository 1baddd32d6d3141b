"""Request bytes decoded leniently: a message that does not parse becomes an `Undecodable` naming
the field where decoding failed, answered INVALID_ARGUMENT instead of gRPC's bare INTERNAL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor

from sounding.runtime import errors


@dataclass(frozen=True)
class Undecodable:
    """A request message that did not parse."""

    type_name: str
    field: str
    reason: str

    def error(self, prefix: str = "") -> errors.InvalidArgument:
        where = f"{prefix}{self.field}" if self.field else prefix.rstrip(".")
        return errors.InvalidArgument(
            f"the request is not a valid {self.type_name}: {self.reason}"
            + (f" (at {where})" if where else ""),
            reason="UNDECODABLE_REQUEST",
            field=where or None,
        )


def lenient_decoder(message_class) -> Callable[[bytes], Any]:
    def decode(data: bytes):
        try:
            return message_class.FromString(data)
        except Exception as error:  # DecodeError, or recursion too deep
            return Undecodable(
                message_class.DESCRIPTOR.full_name,
                locate_bad_field(message_class.DESCRIPTOR, data),
                str(error),
            )

    return decode


# Fields `locate_bad_field` reads at most: it runs as the request is decoded, on the event loop.
LOCATE_MAX_FIELDS = 4096


def locate_bad_field(
    message: descriptor.Descriptor, data: bytes | memoryview, depth: int = 0, budget: list | None = None
) -> str:
    """The path of the first field of `data` that does not decode as `message` says (a string
    that is not UTF-8, a truncated value), e.g. `documents[3].title`; '' if none is found within
    the first LOCATE_MAX_FIELDS fields."""
    budget = [LOCATE_MAX_FIELDS] if budget is None else budget
    view = memoryview(data)  # slices of it copy nothing
    counts: dict[int, int] = {}
    position = 0
    name = ""
    try:
        while position < len(view):
            budget[0] -= 1
            if budget[0] < 0:
                return ""
            key, position = _varint(view, position)
            number, wire_type = key >> 3, key & 7
            field = message.fields_by_number.get(number)
            name = field.name if field else f"#{number}"
            if field is not None and field.is_repeated and not _is_map(field):
                name = f"{name}[{counts.get(number, 0)}]"
            counts[number] = counts.get(number, 0) + 1
            if wire_type == 0:
                _, position = _varint(view, position)
            elif wire_type == 1:
                position += 8
            elif wire_type == 5:
                position += 4
            elif wire_type == 2:
                length, position = _varint(view, position)
                value = view[position : position + length]
                if len(value) < length:
                    return name
                position += length
                if field is not None and field.type == field.TYPE_STRING:
                    str(value, "utf-8")
                elif field is not None and field.message_type is not None:
                    if depth >= 32:
                        return name
                    inner = locate_bad_field(field.message_type, value, depth + 1, budget)
                    if inner:
                        return f"{name}.{inner}"
            else:
                return name
            if position > len(view):
                return name
    except UnicodeDecodeError:
        return name
    except Exception:
        return ""
    return ""


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    """The base-128 varint at `position` and the position after it (protobuf's wire format)."""
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _is_map(field: descriptor.FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry
