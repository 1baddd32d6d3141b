"""CorpusService's messages: collections, documents and ingest progress."""

from __future__ import annotations

from google.protobuf import timestamp_pb2
from sounding_api.sounding.v1 import corpus_pb2

from sounding.corpus.documents import DocumentIn
from sounding.corpus.service import IngestProgress
from sounding.store.collections import CollectionInfo, CollectionStats


def collection(info: CollectionInfo, stats: CollectionStats) -> corpus_pb2.Collection:
    created = timestamp_pb2.Timestamp()
    created.FromMicroseconds(info.create_time_us)
    return corpus_pb2.Collection(
        name=info.name,
        description=info.description,
        create_time=created,
        embedding_model=info.embedding_model,
        embedding_dimension=info.embedding_dimension,
        document_count=stats.document_count,
        chunk_count=stats.chunk_count,
        fts_indexed_chunk_count=stats.fts_indexed_chunk_count,
        graph_entity_count=stats.graph_entity_count,
        graph_edge_count=stats.graph_edge_count,
        graph_current=stats.graph_current,
    )


def documents(request: corpus_pb2.IngestDocumentsRequest) -> list[DocumentIn]:
    return [
        DocumentIn(id=d.id, text=d.text, title=d.title, metadata=dict(d.metadata)) for d in request.documents
    ]


def ingest_progress(progress: IngestProgress) -> corpus_pb2.IngestDocumentsResponse:
    return corpus_pb2.IngestDocumentsResponse(
        batch_index=progress.batch_index,
        batch_documents=progress.batch_documents,
        batch_chunks=progress.batch_chunks,
        total_documents=progress.total_documents,
        total_chunks=progress.total_chunks,
        elapsed_seconds=progress.elapsed_seconds,
    )
