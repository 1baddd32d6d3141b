from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClusterMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLUSTER_METHOD_UNSPECIFIED: _ClassVar[ClusterMethod]
    CLUSTER_METHOD_EXACT: _ClassVar[ClusterMethod]
    CLUSTER_METHOD_EMBEDDING: _ClassVar[ClusterMethod]
    CLUSTER_METHOD_ENTAILMENT: _ClassVar[ClusterMethod]
CLUSTER_METHOD_UNSPECIFIED: ClusterMethod
CLUSTER_METHOD_EXACT: ClusterMethod
CLUSTER_METHOD_EMBEDDING: ClusterMethod
CLUSTER_METHOD_ENTAILMENT: ClusterMethod

class EmbedRequest(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, texts: _Optional[_Iterable[str]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("vectors", "count", "dimension", "model")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    vectors: bytes
    count: int
    dimension: int
    model: str
    def __init__(self, vectors: _Optional[bytes] = ..., count: _Optional[int] = ..., dimension: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("messages", "max_new_tokens", "temperature", "top_p", "seed", "stop", "cache_scope")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    CACHE_SCOPE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    cache_scope: str
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., max_new_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., seed: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., cache_scope: _Optional[str] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("text", "finish_reason", "completion_tokens", "model", "cached_decode_ms")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CACHED_DECODE_MS_FIELD_NUMBER: _ClassVar[int]
    text: str
    finish_reason: str
    completion_tokens: int
    model: str
    cached_decode_ms: float
    def __init__(self, text: _Optional[str] = ..., finish_reason: _Optional[str] = ..., completion_tokens: _Optional[int] = ..., model: _Optional[str] = ..., cached_decode_ms: _Optional[float] = ...) -> None: ...

class EntailRequest(_message.Message):
    __slots__ = ("pairs",)
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    pairs: _containers.RepeatedCompositeFieldContainer[TextPair]
    def __init__(self, pairs: _Optional[_Iterable[_Union[TextPair, _Mapping]]] = ...) -> None: ...

class TextPair(_message.Message):
    __slots__ = ("premise", "hypothesis")
    PREMISE_FIELD_NUMBER: _ClassVar[int]
    HYPOTHESIS_FIELD_NUMBER: _ClassVar[int]
    premise: str
    hypothesis: str
    def __init__(self, premise: _Optional[str] = ..., hypothesis: _Optional[str] = ...) -> None: ...

class EntailResponse(_message.Message):
    __slots__ = ("results", "model")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[Entailment]
    model: str
    def __init__(self, results: _Optional[_Iterable[_Union[Entailment, _Mapping]]] = ..., model: _Optional[str] = ...) -> None: ...

class Entailment(_message.Message):
    __slots__ = ("entailment", "neutral", "contradiction")
    ENTAILMENT_FIELD_NUMBER: _ClassVar[int]
    NEUTRAL_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTION_FIELD_NUMBER: _ClassVar[int]
    entailment: float
    neutral: float
    contradiction: float
    def __init__(self, entailment: _Optional[float] = ..., neutral: _Optional[float] = ..., contradiction: _Optional[float] = ...) -> None: ...

class ClusterRequest(_message.Message):
    __slots__ = ("texts", "method", "distance_threshold")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    method: ClusterMethod
    distance_threshold: float
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., method: _Optional[_Union[ClusterMethod, str]] = ..., distance_threshold: _Optional[float] = ...) -> None: ...

class ClusterResponse(_message.Message):
    __slots__ = ("labels", "clusters")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedScalarFieldContainer[int]
    clusters: int
    def __init__(self, labels: _Optional[_Iterable[int]] = ..., clusters: _Optional[int] = ...) -> None: ...
