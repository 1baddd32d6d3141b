"""Every field of what the server sends reaches the Python client, end to end: each server type
the gateway converts into a public message is built with every field set (one element in each
collection), converted by the gateway's converter, sent through the wire format and decoded by the
client. Then, one field at a time, the object is built again with only that field changed, and
what the client decodes must change too; a field lost on the way fails here, named by its path.

The types come from the server's event unions and the converters' arguments, the fields from the
types, and every public converter of sounding.gateway.convert that returns a message must have a
case here: a new event type, field or converter is checked without being named. The message the
gateway builds must have every field set too, so a field added to the protos but left unfilled
fails as well. (test_decoding_is_exhaustive checks the message -> client half on its own.)"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Union, get_args, get_origin, get_type_hints

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from sounding.core.fusion import FUSION_METHODS
from sounding.core.provenance import Provenance
from sounding.core.tool_routing import Route
from sounding.corpus.service import IngestProgress
from sounding.gateway.convert import corpus, inquiry, learning, retrieval, tools
from sounding.inquiry import protocol as inquiry_protocol
from sounding.learning.corpus_inquiry import CorpusInquiryMetrics
from sounding.learning.metrics import StrategyMetrics
from sounding.learning.protocol import CalibrationProgress, CalibrationReport, ObserveResult
from sounding.retrieval import protocol as retrieval_protocol
from sounding.store.collections import CollectionInfo, CollectionStats
from sounding.tools.protocol import ToolInfo, ToolMetrics
from sounding_api.sounding.v1 import common_pb2, corpus_pb2, sounding_pb2, tools_pb2
from sounding_client import _convert

from .oneofs import is_synthetic, oneof_cases

pytestmark = pytest.mark.unit

CONVERTER_MODULES = (corpus, inquiry, learning, retrieval, tools)
# A changed number is this much larger than the one it replaces.
CHANGE = 100_000
# Server fields that do not reach the client, and why.
NOT_SENT = {
    "AskEvent.runners_up[0].cost": "a runner-up is sent as a ScoredQuestion: id, text, gain, score",
    "AskEvent.runners_up[0].exploration_bonus": "a runner-up is sent as a ScoredQuestion",
    "CollectionInfo.ref.tenant": "the caller's own tenant: a client names its collections alone",
    "CollectionInfo.chunk_words": "how the server chunks, not part of a Collection",
    "CollectionInfo.chunk_overlap_words": "how the server chunks, not part of a Collection",
    "CollectionStats.version": "the chunks table's version the counts were read at",
    "CorpusInquiryMetrics.prediction.total_outcomes": "not part of CorpusInquiryMetrics",
}
# Message fields the gateway leaves unset, and why.
NOT_FILLED = {
    "strategy_result.hits.text": "an arm's hits are ChunkHits: ids and a score",
    "strategy_result.hits.title": "an arm's hits are ChunkHits",
    "strategy_result.hits.contributions": "an arm's hits are ChunkHits",
    "strategy_result.hits.metadata": "an arm's hits are ChunkHits",
    "report.plot_png": "deprecated: the report's curves carry the data",
}


class Values:
    """The leaves of one built object, drawn in order: each a value of its own (true for a flag),
    but another one for the `changed`-th draw. `paths` names each draw. A Provenance is built of
    `confidence_kind`."""

    def __init__(self, confidence_kind: str = "measured", changed: int | None = None):
        self.changed = changed
        self.confidence_kind = confidence_kind
        self.paths: list[str] = []

    def leaf(self, path: str, kind: type) -> object:
        n = 1001 + len(self.paths)
        changed = len(self.paths) == self.changed
        self.paths.append(path)
        if kind is bool:
            return not changed
        n += CHANGE if changed else 0
        if kind is str:
            return f"s{n}"  # also a valid tenant and collection name
        if kind is int:
            return n
        if kind is float:
            return n + 0.5  # exact in float32, and unlike any integer drawn
        raise TypeError(f"{path}: no values for {kind}")

    def choice(self, path: str, choices: Sequence[object]) -> object:
        """The first of `choices`; the second when this draw is the changed one."""
        changed = len(self.paths) == self.changed
        self.paths.append(path)
        return choices[1 if changed else 0]


def built(kind, path: str, values: Values):
    """A `kind` with every field set, from its type hints (SHAPES where they do not say)."""
    origin, arguments = get_origin(kind), get_args(kind)
    if kind is Provenance:
        return provenance(path, values)
    if origin is Literal:
        return values.choice(path, arguments)
    if origin in (Union, types.UnionType):
        (present,) = [a for a in arguments if a is not type(None)]
        return built(present, path, values)
    if origin in (list, Sequence):
        return [built(arguments[0], f"{path}[0]", values)]
    if origin is tuple:
        if arguments[-1] is Ellipsis:
            return (built(arguments[0], f"{path}[0]", values),)
        return tuple(built(a, f"{path}[{i}]", values) for i, a in enumerate(arguments))
    if origin in (dict, Mapping):
        return {built(arguments[0], f"{path}.key", values): built(arguments[1], f"{path}.value", values)}
    if dataclasses.is_dataclass(kind) or hasattr(kind, "_fields"):
        hints = get_type_hints(kind)
        names = (
            [f.name for f in dataclasses.fields(kind) if f.init]
            if dataclasses.is_dataclass(kind)
            else kind._fields
        )
        return kind(
            **{
                name: SHAPES[f"{kind.__name__}.{name}"](f"{path}.{name}", values)
                if f"{kind.__name__}.{name}" in SHAPES
                else built(hints[name], f"{path}.{name}", values)
                for name in names
            }
        )
    return values.leaf(path, kind)


def provenance(path: str, values: Values) -> Provenance:
    """A Provenance of `values.confidence_kind` with the fields its case of Confidence carries."""
    kind = values.confidence_kind
    carried = common_pb2.Confidence.DESCRIPTOR.fields_by_name[kind].message_type.fields
    hints = get_type_hints(Provenance)
    return Provenance(kind, **{f.name: built(hints[f.name], f"{path}.{f.name}", values) for f in carried})


def homogeneity(path: str, values: Values) -> dict[str, float | bool]:
    """The llm domain's readings, keyed by the Homogeneity message's fields."""
    return {
        f.name: values.leaf(f"{path}.{f.name}", bool if f.type == FieldDescriptor.TYPE_BOOL else float)
        for f in sounding_pb2.Homogeneity.DESCRIPTOR.fields
    }


def prediction_windows(path: str, values: Values) -> dict[str, dict[str, float]]:
    """The windows GetStrategyMetrics reports."""
    return {
        window: {"information_gain_mae": values.leaf(f"{path}.{window}.information_gain_mae", float)}
        for window in ("last_10", "last_100")
    }


def stopping_reason(path: str, values: Values) -> str:
    """One of the reasons InquiryAnswer's enum names."""
    return str(values.choice(path, inquiry_protocol.STOPPING_REASONS))


def fusion(path: str, values: Values) -> str:
    """One of the fusion methods Plan's enum names."""
    return str(values.choice(path, FUSION_METHODS))


# Fields whose values their type hints do not say.
SHAPES: dict[str, Callable[[str, Values], object]] = {
    "AnswerEvent.stopping_reason": stopping_reason,
    "PlanEvent.fusion": fusion,
    "BeliefEvent.homogeneity": homogeneity,
    "PredictionMetrics.windows": prediction_windows,
}


@dataclass(frozen=True)
class Case:
    """A converter the gateway answers with, the server types it takes, and the client's decoder
    of the message it returns."""

    takes: tuple[type, ...]
    convert: Callable[..., Message]
    message_type: type[Message]
    decode: Callable[[Message], object]
    confidence_kind: str = "measured"

    @property
    def name(self) -> str:
        if self.takes == (Provenance,):
            return f"Provenance.{self.confidence_kind}"
        return "+".join(kind.__name__ for kind in self.takes)

    def arguments(self, values: Values) -> list[object]:
        """The converter's arguments, built; each named by its type (a number by its parameter)."""
        parameters = inspect.signature(self.convert).parameters
        return [
            built(kind, kind.__name__ if kind not in (int, float, str) else parameter, values)
            for kind, parameter in zip(self.takes, parameters, strict=True)
        ]

    def round_trip(self, values: Values) -> object:
        """What the client decodes of what the gateway makes of the built arguments."""
        message = self.convert(*self.arguments(values))
        return self.decode(self.message_type.FromString(message.SerializeToString()))


def events(union, convert, message_type, decode) -> list[Case]:
    """A case for each member of an event union."""
    return [Case((kind,), convert, message_type, decode) for kind in get_args(union)]


CASES = [
    *events(
        retrieval_protocol.RetrieveEvent,
        retrieval.retrieve_response,
        sounding_pb2.RetrieveResponse,
        _convert.retrieve_event,
    ),
    *events(
        inquiry_protocol.InquiryEvent,
        inquiry.inquire_response,
        sounding_pb2.InquireResponse,
        _convert.inquiry_event,
    ),
    *(
        Case((kind,), learning.calibrate_response, sounding_pb2.CalibrateResponse, _convert.calibrate_event)
        for kind in (CalibrationProgress, CalibrationReport)
    ),
    *(
        Case((Provenance,), retrieval.confidence, common_pb2.Confidence, _convert.confidence, kind)
        for kind in oneof_cases(common_pb2.Confidence)
    ),
    Case((ObserveResult,), learning.observe_response, sounding_pb2.ObserveResponse, _convert.observe_result),
    Case(
        (StrategyMetrics, CorpusInquiryMetrics),
        learning.strategy_metrics,
        sounding_pb2.GetStrategyMetricsResponse,
        _convert.strategy_metrics,
    ),
    Case(
        (CorpusInquiryMetrics,),
        learning.corpus_inquiry_metrics,
        sounding_pb2.CorpusInquiryMetrics,
        _convert.corpus_inquiry_metrics,
    ),
    Case((CollectionInfo, CollectionStats), corpus.collection, corpus_pb2.Collection, _convert.collection),
    Case((IngestProgress,), corpus.ingest_progress, corpus_pb2.IngestDocumentsResponse, _convert.progress),
    Case((ToolInfo,), tools.tool, tools_pb2.Tool, _convert.tool),
    Case((Route, int), tools.route_response, tools_pb2.RouteToolResponse, _convert.tool_route),
    Case((ToolMetrics,), tools.metrics_response, tools_pb2.GetToolMetricsResponse, _convert.tool_metrics),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_every_field_the_server_sends_reaches_the_client(case: Case):
    sent = Values(case.confidence_kind)
    decoded = case.round_trip(sent)
    lost, stale = [], []
    for index, path in enumerate(sent.paths):
        changed = Values(case.confidence_kind, changed=index)
        arrived = case.round_trip(changed) != decoded
        assert changed.paths == sent.paths, "the builder is not deterministic"
        if not arrived and path not in NOT_SENT:
            lost.append(path)
        if arrived and path in NOT_SENT:
            stale.append(path)
    assert sent.paths and not lost, f"{case.name}: fields the client never sees: {lost}"
    assert not stale, f"{case.name}: NOT_SENT names fields that do arrive: {stale}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_gateway_fills_every_field_of_its_message(case: Case):
    message = case.convert(*case.arguments(Values(case.confidence_kind)))
    unset = [path for path in unset_fields(message) if path not in NOT_FILLED]
    assert not unset, f"{case.name}: fields the gateway leaves unset: {unset}"


def test_every_field_excused_from_filling_is_left_unset():
    unset = {path for case in CASES for path in unset_fields(case.convert(*case.arguments(Values())))}
    assert set(NOT_FILLED) <= unset, f"NOT_FILLED names fields the gateway fills: {set(NOT_FILLED) - unset}"


def unset_fields(message: Message, path: str = "") -> list[str]:
    """The paths of `message`'s fields left at their default (of a oneof, the case set only)."""
    unset = []
    for field in message.DESCRIPTOR.fields:
        oneof = field.containing_oneof
        if oneof is not None and not is_synthetic(oneof) and message.WhichOneof(oneof.name) != field.name:
            continue
        name, value = f"{path}{field.name}", getattr(message, field.name)
        if field.is_repeated:
            if not value:
                unset.append(name)
            elif field.type == FieldDescriptor.TYPE_MESSAGE and not field.message_type.GetOptions().map_entry:
                unset += unset_fields(value[0], f"{name}.")
        elif field.type == FieldDescriptor.TYPE_MESSAGE or field.has_presence:
            if not message.HasField(field.name):
                unset.append(name)
            elif field.type == FieldDescriptor.TYPE_MESSAGE and not _well_known(field):
                unset += unset_fields(value, f"{name}.")
        elif value == field.default_value:
            unset.append(name)
    return unset


def _well_known(field: FieldDescriptor) -> bool:
    """A google.protobuf type (a Timestamp): set as a whole, any of its fields may be zero."""
    return field.message_type.full_name.startswith("google.protobuf.")


STREAMS = [sounding_pb2.RetrieveResponse, sounding_pb2.InquireResponse, sounding_pb2.CalibrateResponse]


@pytest.mark.parametrize("message_type", STREAMS, ids=lambda message_type: message_type.__name__)
def test_every_event_a_stream_declares_is_built_from_a_server_type(message_type):
    built_cases = set()
    for case in CASES:
        if case.message_type is message_type:
            built_cases.add(case.convert(*case.arguments(Values())).WhichOneof("event"))
    assert built_cases == set(oneof_cases(message_type))


def test_every_converter_to_a_message_has_a_case():
    converters = {
        f"{module.__name__}.{name}"
        for module in CONVERTER_MODULES
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if function.__module__ == module.__name__
        and not name.startswith("_")
        and "_pb2." in str(function.__annotations__.get("return", ""))
    }
    covered = {f"{case.convert.__module__}.{case.convert.__name__}" for case in CASES}
    assert converters and converters <= covered, f"converters without a case: {converters - covered}"
