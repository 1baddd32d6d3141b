"""The event oneofs of the public API's messages, shared by the client's exhaustiveness tests."""

from google.protobuf.descriptor import OneofDescriptor


def is_synthetic(oneof: OneofDescriptor) -> bool:
    """A proto3 `optional` field's own oneof."""
    return len(oneof.fields) == 1 and oneof.name == f"_{oneof.fields[0].name}"


def oneof_cases(message_type) -> list[str]:
    """The cases of `message_type`'s one real oneof (a stream's events)."""
    (event,) = [o for o in message_type.DESCRIPTOR.oneofs if not is_synthetic(o)]
    return [field.name for field in event.fields]
