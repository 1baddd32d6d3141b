from sounding_api.buf.validate import validate_pb2 as _validate_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Confidence(_message.Message):
    __slots__ = ("absent", "deterministic", "derived", "measured")
    ABSENT_FIELD_NUMBER: _ClassVar[int]
    DETERMINISTIC_FIELD_NUMBER: _ClassVar[int]
    DERIVED_FIELD_NUMBER: _ClassVar[int]
    MEASURED_FIELD_NUMBER: _ClassVar[int]
    absent: Absent
    deterministic: Deterministic
    derived: Derived
    measured: Measured
    def __init__(self, absent: _Optional[_Union[Absent, _Mapping]] = ..., deterministic: _Optional[_Union[Deterministic, _Mapping]] = ..., derived: _Optional[_Union[Derived, _Mapping]] = ..., measured: _Optional[_Union[Measured, _Mapping]] = ...) -> None: ...

class Absent(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Deterministic(_message.Message):
    __slots__ = ("value", "reason")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    value: float
    reason: str
    def __init__(self, value: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class Derived(_message.Message):
    __slots__ = ("value", "formula", "inputs")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FORMULA_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    value: float
    formula: str
    inputs: _containers.ScalarMap[str, float]
    def __init__(self, value: _Optional[float] = ..., formula: _Optional[str] = ..., inputs: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Measured(_message.Message):
    __slots__ = ("value", "calibration_version", "sample_size", "inputs")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_VERSION_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    value: float
    calibration_version: str
    sample_size: int
    inputs: _containers.ScalarMap[str, float]
    def __init__(self, value: _Optional[float] = ..., calibration_version: _Optional[str] = ..., sample_size: _Optional[int] = ..., inputs: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("id", "text", "title", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    title: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., title: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
