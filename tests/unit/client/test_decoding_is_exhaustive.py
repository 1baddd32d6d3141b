"""Every field the server can send reaches the Python client: for each event of each stream
(every case of the responses' `event` oneofs) and each metrics response, a message with every
field set to a value of its own (nested messages and one element of each repeated field too) is
decoded, and each of those values must appear in what the client returns. A field the client
forgets to decode fails here, named by its path."""

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2
from sounding_client import _convert

from .oneofs import is_synthetic, oneof_cases

pytestmark = pytest.mark.unit

F = FieldDescriptor
# Sent but not decoded, and why.
NOT_DECODED = {
    "expansion.query": "the first of `queries`, which the client keeps",
    "report.plot_png": "deprecated: the report's curves carry the data",
}


def filled(message: Message, counter: Iterator[int], path: str = "") -> dict[str, object]:
    """Sets every field of `message` (the first case of each oneof but `chosen`'s) to a value of
    its own; returns {field path: value} of the numbers and strings set. Booleans are set true and
    enums to their last value, which are not unique and so not traced."""
    traced: dict[str, object] = {}
    taken_oneofs: set[str] = set()
    for field in message.DESCRIPTOR.fields:
        oneof = field.containing_oneof
        if oneof is not None and not is_synthetic(oneof):
            if oneof.name in taken_oneofs:
                continue
            taken_oneofs.add(oneof.name)
        name = f"{path}{field.name}"
        repeated = field.is_repeated
        if field.type == F.TYPE_MESSAGE:
            if field.message_type.full_name == "google.protobuf.Timestamp":
                seconds, micros = next(counter), next(counter)
                getattr(message, field.name).FromMicroseconds(seconds * 1_000_000 + micros)
                traced[f"{name}.seconds"], traced[f"{name}.nanos"] = seconds, micros * 1000
                continue
            if field.message_type.GetOptions().map_entry:
                key, value = next(counter), next(counter)
                getattr(message, field.name)[_scalar(field.message_type.fields_by_name["key"], key)] = (
                    _scalar(field.message_type.fields_by_name["value"], value)
                )
                traced[f"{name}.key"] = _scalar(field.message_type.fields_by_name["key"], key)
                traced[f"{name}.value"] = _scalar(field.message_type.fields_by_name["value"], value)
                continue
            child = getattr(message, field.name).add() if repeated else getattr(message, field.name)
            traced |= filled(child, counter, f"{name}.")
            continue
        value = _scalar(field, next(counter))
        if repeated:
            getattr(message, field.name).append(value)
        else:
            setattr(message, field.name, value)
        if field.type not in (F.TYPE_BOOL, F.TYPE_ENUM):
            traced[name] = value
    return traced


def _scalar(field: FieldDescriptor, n: int):
    if field.type == F.TYPE_STRING:
        return f"s{n}"
    if field.type == F.TYPE_BYTES:
        return f"b{n}".encode()
    if field.type == F.TYPE_BOOL:
        return True
    if field.type == F.TYPE_ENUM:
        return field.enum_type.values[-1].number
    if field.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return n + 0.5  # exact in float32 at these sizes, and unlike any integer set
    return n


def leaves(value, seen: set[int] | None = None) -> Iterator[object]:
    """Every number and string reachable from a decoded value."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, str | bytes | int | float):
        yield value
    elif isinstance(value, datetime):
        yield int(value.timestamp())
        yield value.microsecond * 1000
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from leaves(getattr(value, field.name), seen)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield key
            yield from leaves(item, seen)
    elif isinstance(value, list | tuple) or hasattr(value, "__iter__"):
        for item in value:
            yield from leaves(item, seen)


CASES: list[tuple[str, type[Message], str | None, Callable]] = [
    *(
        (f"Retrieve.{c}", sounding_pb2.RetrieveResponse, c, _convert.retrieve_event)
        for c in oneof_cases(sounding_pb2.RetrieveResponse)
    ),
    *(
        (f"Inquire.{c}", sounding_pb2.InquireResponse, c, _convert.inquiry_event)
        for c in oneof_cases(sounding_pb2.InquireResponse)
    ),
    *(
        (f"Calibrate.{c}", sounding_pb2.CalibrateResponse, c, _convert.calibrate_event)
        for c in oneof_cases(sounding_pb2.CalibrateResponse)
    ),
    ("GetStrategyMetrics", sounding_pb2.GetStrategyMetricsResponse, None, _convert.strategy_metrics),
    ("Observe", sounding_pb2.ObserveResponse, None, _convert.observe_result),
    ("Collection", corpus_pb2.Collection, None, _convert.collection),
    ("IngestDocuments", corpus_pb2.IngestDocumentsResponse, None, _convert.progress),
    ("Tool", tools_pb2.Tool, None, _convert.tool),
    ("RouteTool", tools_pb2.RouteToolResponse, None, _convert.tool_route),
    ("GetToolMetrics", tools_pb2.GetToolMetricsResponse, None, _convert.tool_metrics),
]


@pytest.mark.parametrize("name,message_type,case,decode", CASES, ids=[c[0] for c in CASES])
def test_every_field_sent_reaches_the_client(name, message_type, case, decode):
    message = message_type()
    counter = itertools.count(1001)
    if case is None:
        traced = filled(message, counter)
    else:
        traced = {f"{case}.{k}": v for k, v in filled(getattr(message, case), counter).items()}
    decoded = decode(message_type.FromString(message.SerializeToString()))
    found = set(leaves(decoded))
    missing = [path for path, value in traced.items() if value not in found and path not in NOT_DECODED]
    assert traced and not missing, f"{name}: fields the client does not decode: {missing}"
