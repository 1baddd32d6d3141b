from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkerCall(_message.Message):
    __slots__ = ("call_id", "trace_carrier", "run_arm", "expand", "forget", "calls_in_flight", "cancel")
    class TraceCarrierEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_CARRIER_FIELD_NUMBER: _ClassVar[int]
    RUN_ARM_FIELD_NUMBER: _ClassVar[int]
    EXPAND_FIELD_NUMBER: _ClassVar[int]
    FORGET_FIELD_NUMBER: _ClassVar[int]
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    trace_carrier: _containers.ScalarMap[str, str]
    run_arm: ArmCall
    expand: ExpansionCall
    forget: ForgetCall
    calls_in_flight: CallsInFlightCall
    cancel: CancelCall
    def __init__(self, call_id: _Optional[int] = ..., trace_carrier: _Optional[_Mapping[str, str]] = ..., run_arm: _Optional[_Union[ArmCall, _Mapping]] = ..., expand: _Optional[_Union[ExpansionCall, _Mapping]] = ..., forget: _Optional[_Union[ForgetCall, _Mapping]] = ..., calls_in_flight: _Optional[_Union[CallsInFlightCall, _Mapping]] = ..., cancel: _Optional[_Union[CancelCall, _Mapping]] = ...) -> None: ...

class ArmCall(_message.Message):
    __slots__ = ("arm", "collection", "query", "limit", "timeout_s", "query_vector", "collection_version", "flow")
    ARM_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_VERSION_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    arm: str
    collection: str
    query: str
    limit: int
    timeout_s: float
    query_vector: bytes
    collection_version: int
    flow: str
    def __init__(self, arm: _Optional[str] = ..., collection: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., timeout_s: _Optional[float] = ..., query_vector: _Optional[bytes] = ..., collection_version: _Optional[int] = ..., flow: _Optional[str] = ...) -> None: ...

class ExpansionCall(_message.Message):
    __slots__ = ("collection", "query", "strategy", "queries", "limit", "timeout_s", "query_vector", "flow")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    strategy: str
    queries: int
    limit: int
    timeout_s: float
    query_vector: bytes
    flow: str
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., strategy: _Optional[str] = ..., queries: _Optional[int] = ..., limit: _Optional[int] = ..., timeout_s: _Optional[float] = ..., query_vector: _Optional[bytes] = ..., flow: _Optional[str] = ...) -> None: ...

class ForgetCall(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class CallsInFlightCall(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CancelCall(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Hits(_message.Message):
    __slots__ = ("document_ids", "chunk_ids", "scores")
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    scores: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, document_ids: _Optional[_Iterable[str]] = ..., chunk_ids: _Optional[_Iterable[str]] = ..., scores: _Optional[_Iterable[float]] = ...) -> None: ...

class ArmOutcome(_message.Message):
    __slots__ = ("arm", "hits", "latency_ms", "generated_text", "cached_decode_ms")
    ARM_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TEXT_FIELD_NUMBER: _ClassVar[int]
    CACHED_DECODE_MS_FIELD_NUMBER: _ClassVar[int]
    arm: str
    hits: Hits
    latency_ms: float
    generated_text: str
    cached_decode_ms: float
    def __init__(self, arm: _Optional[str] = ..., hits: _Optional[_Union[Hits, _Mapping]] = ..., latency_ms: _Optional[float] = ..., generated_text: _Optional[str] = ..., cached_decode_ms: _Optional[float] = ...) -> None: ...

class ExpansionOutcome(_message.Message):
    __slots__ = ("strategy", "queries", "hits", "latency_ms")
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    strategy: str
    queries: _containers.RepeatedScalarFieldContainer[str]
    hits: _containers.RepeatedCompositeFieldContainer[Hits]
    latency_ms: float
    def __init__(self, strategy: _Optional[str] = ..., queries: _Optional[_Iterable[str]] = ..., hits: _Optional[_Iterable[_Union[Hits, _Mapping]]] = ..., latency_ms: _Optional[float] = ...) -> None: ...

class Forgotten(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerError(_message.Message):
    __slots__ = ("code", "reason", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: str
    message: str
    field: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class WorkerReply(_message.Message):
    __slots__ = ("call_id", "arm", "expansion", "forgotten", "calls_in_flight", "error")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ARM_FIELD_NUMBER: _ClassVar[int]
    EXPANSION_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    arm: ArmOutcome
    expansion: ExpansionOutcome
    forgotten: Forgotten
    calls_in_flight: int
    error: WorkerError
    def __init__(self, call_id: _Optional[int] = ..., arm: _Optional[_Union[ArmOutcome, _Mapping]] = ..., expansion: _Optional[_Union[ExpansionOutcome, _Mapping]] = ..., forgotten: _Optional[_Union[Forgotten, _Mapping]] = ..., calls_in_flight: _Optional[int] = ..., error: _Optional[_Union[WorkerError, _Mapping]] = ...) -> None: ...
