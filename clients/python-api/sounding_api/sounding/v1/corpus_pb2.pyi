import datetime

from sounding_api.buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sounding_api.sounding.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Collection(_message.Message):
    __slots__ = ("name", "description", "create_time", "embedding_model", "embedding_dimension", "document_count", "chunk_count", "fts_indexed_chunk_count", "graph_entity_count", "graph_edge_count", "graph_current")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    FTS_INDEXED_CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ENTITY_COUNT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_EDGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_CURRENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    create_time: _timestamp_pb2.Timestamp
    embedding_model: str
    embedding_dimension: int
    document_count: int
    chunk_count: int
    fts_indexed_chunk_count: int
    graph_entity_count: int
    graph_edge_count: int
    graph_current: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., embedding_model: _Optional[str] = ..., embedding_dimension: _Optional[int] = ..., document_count: _Optional[int] = ..., chunk_count: _Optional[int] = ..., fts_indexed_chunk_count: _Optional[int] = ..., graph_entity_count: _Optional[int] = ..., graph_edge_count: _Optional[int] = ..., graph_current: _Optional[bool] = ...) -> None: ...

class CreateCollectionRequest(_message.Message):
    __slots__ = ("name", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class CreateCollectionResponse(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: Collection
    def __init__(self, collection: _Optional[_Union[Collection, _Mapping]] = ...) -> None: ...

class GetCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetCollectionResponse(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: Collection
    def __init__(self, collection: _Optional[_Union[Collection, _Mapping]] = ...) -> None: ...

class ListCollectionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCollectionsResponse(_message.Message):
    __slots__ = ("collections", "next_page_token")
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[Collection]
    next_page_token: str
    def __init__(self, collections: _Optional[_Iterable[_Union[Collection, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteCollectionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IngestDocumentsRequest(_message.Message):
    __slots__ = ("collection", "documents")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    documents: _containers.RepeatedCompositeFieldContainer[_common_pb2.Document]
    def __init__(self, collection: _Optional[str] = ..., documents: _Optional[_Iterable[_Union[_common_pb2.Document, _Mapping]]] = ...) -> None: ...

class IngestDocumentsResponse(_message.Message):
    __slots__ = ("batch_index", "batch_documents", "batch_chunks", "total_documents", "total_chunks", "elapsed_seconds")
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    BATCH_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    BATCH_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    batch_index: int
    batch_documents: int
    batch_chunks: int
    total_documents: int
    total_chunks: int
    elapsed_seconds: float
    def __init__(self, batch_index: _Optional[int] = ..., batch_documents: _Optional[int] = ..., batch_chunks: _Optional[int] = ..., total_documents: _Optional[int] = ..., total_chunks: _Optional[int] = ..., elapsed_seconds: _Optional[float] = ...) -> None: ...
