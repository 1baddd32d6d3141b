from sounding_api.buf.validate import validate_pb2 as _validate_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tool(_message.Message):
    __slots__ = ("name", "description", "parameters_json", "version", "exemplar_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EXEMPLAR_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    version: int
    exemplar_count: int
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ..., version: _Optional[int] = ..., exemplar_count: _Optional[int] = ...) -> None: ...

class PutToolsRequest(_message.Message):
    __slots__ = ("toolset", "tools")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, toolset: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ...) -> None: ...

class PutToolsResponse(_message.Message):
    __slots__ = ("version", "tool_count")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    version: int
    tool_count: int
    def __init__(self, version: _Optional[int] = ..., tool_count: _Optional[int] = ...) -> None: ...

class DeleteToolsRequest(_message.Message):
    __slots__ = ("toolset", "names", "forget_exemplars")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    FORGET_EXEMPLARS_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    names: _containers.RepeatedScalarFieldContainer[str]
    forget_exemplars: bool
    def __init__(self, toolset: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., forget_exemplars: _Optional[bool] = ...) -> None: ...

class DeleteToolsResponse(_message.Message):
    __slots__ = ("version", "tool_count")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    version: int
    tool_count: int
    def __init__(self, version: _Optional[int] = ..., tool_count: _Optional[int] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ("toolset", "page_size", "page_token")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    page_size: int
    page_token: str
    def __init__(self, toolset: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools", "next_page_token", "version")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    next_page_token: str
    version: int
    def __init__(self, tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class RouteToolRequest(_message.Message):
    __slots__ = ("toolset", "request", "top_k", "offered_tools")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    OFFERED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    request: str
    top_k: int
    offered_tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, toolset: _Optional[str] = ..., request: _Optional[str] = ..., top_k: _Optional[int] = ..., offered_tools: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolScore(_message.Message):
    __slots__ = ("name", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    score: float
    def __init__(self, name: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class RouteToolResponse(_message.Message):
    __slots__ = ("candidates", "top1", "margin", "ok", "version")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    TOP1_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[ToolScore]
    top1: str
    margin: float
    ok: bool
    version: int
    def __init__(self, candidates: _Optional[_Iterable[_Union[ToolScore, _Mapping]]] = ..., top1: _Optional[str] = ..., margin: _Optional[float] = ..., ok: _Optional[bool] = ..., version: _Optional[int] = ...) -> None: ...

class GetToolMetricsRequest(_message.Message):
    __slots__ = ("toolset", "window")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    window: int
    def __init__(self, toolset: _Optional[str] = ..., window: _Optional[int] = ...) -> None: ...

class ToolAccuracyWindow(_message.Message):
    __slots__ = ("first_sequence", "last_sequence", "labelled", "accuracy")
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LABELLED_FIELD_NUMBER: _ClassVar[int]
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    first_sequence: int
    last_sequence: int
    labelled: int
    accuracy: float
    def __init__(self, first_sequence: _Optional[int] = ..., last_sequence: _Optional[int] = ..., labelled: _Optional[int] = ..., accuracy: _Optional[float] = ...) -> None: ...

class GetToolMetricsResponse(_message.Message):
    __slots__ = ("version", "tool_count", "events", "processed", "flagged_fallback", "flagged_disagreement", "labels_free", "labels_teacher", "labels_trusted", "teacher_dropped", "accuracy", "accuracy_windows", "exemplars", "dropped_since_start", "refreshes_since_start", "mean_refresh_seconds", "flagged_share", "untrusted_exemplars_route")
    class ExemplarsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_DISAGREEMENT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FREE_FIELD_NUMBER: _ClassVar[int]
    LABELS_TEACHER_FIELD_NUMBER: _ClassVar[int]
    LABELS_TRUSTED_FIELD_NUMBER: _ClassVar[int]
    TEACHER_DROPPED_FIELD_NUMBER: _ClassVar[int]
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    ACCURACY_WINDOWS_FIELD_NUMBER: _ClassVar[int]
    EXEMPLARS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_SINCE_START_FIELD_NUMBER: _ClassVar[int]
    REFRESHES_SINCE_START_FIELD_NUMBER: _ClassVar[int]
    MEAN_REFRESH_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_SHARE_FIELD_NUMBER: _ClassVar[int]
    UNTRUSTED_EXEMPLARS_ROUTE_FIELD_NUMBER: _ClassVar[int]
    version: int
    tool_count: int
    events: int
    processed: int
    flagged_fallback: int
    flagged_disagreement: int
    labels_free: int
    labels_teacher: int
    labels_trusted: int
    teacher_dropped: int
    accuracy: float
    accuracy_windows: _containers.RepeatedCompositeFieldContainer[ToolAccuracyWindow]
    exemplars: _containers.ScalarMap[str, int]
    dropped_since_start: int
    refreshes_since_start: int
    mean_refresh_seconds: float
    flagged_share: float
    untrusted_exemplars_route: bool
    def __init__(self, version: _Optional[int] = ..., tool_count: _Optional[int] = ..., events: _Optional[int] = ..., processed: _Optional[int] = ..., flagged_fallback: _Optional[int] = ..., flagged_disagreement: _Optional[int] = ..., labels_free: _Optional[int] = ..., labels_teacher: _Optional[int] = ..., labels_trusted: _Optional[int] = ..., teacher_dropped: _Optional[int] = ..., accuracy: _Optional[float] = ..., accuracy_windows: _Optional[_Iterable[_Union[ToolAccuracyWindow, _Mapping]]] = ..., exemplars: _Optional[_Mapping[str, int]] = ..., dropped_since_start: _Optional[int] = ..., refreshes_since_start: _Optional[int] = ..., mean_refresh_seconds: _Optional[float] = ..., flagged_share: _Optional[float] = ..., untrusted_exemplars_route: _Optional[bool] = ...) -> None: ...
