"""Documents as a client sends them: their limits (`CorpusLimits`), checked before anything of a
batch is chunked or embedded, and their chunk rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sounding.core.chunking import chunk_words
from sounding.runtime import errors
from sounding.settings.limits import CorpusLimits
from sounding.store import schema
from sounding.store.collections import CollectionInfo


@dataclass(frozen=True)
class DocumentIn:
    id: str
    text: str
    title: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


def validate_batch(documents: Sequence[DocumentIn], limits: CorpusLimits = CorpusLimits()) -> None:
    """The deployment's limits and unique ids (the rules Document declares, such as a non-empty
    text, are checked before: `validation`). Every problem names the document's index in the
    batch, e.g. `documents[3].text`."""
    if len(documents) > limits.max_documents_per_batch:
        raise errors.InvalidArgument(
            f"at most {limits.max_documents_per_batch} documents per batch", field="documents"
        )
    seen: dict[str, int] = {}
    for index, document in enumerate(documents):
        where = f"documents[{index}]"
        if len(document.id) > limits.max_document_id_chars:
            raise errors.InvalidArgument(
                f"{where}.id must be at most {limits.max_document_id_chars} characters", field=f"{where}.id"
            )
        if document.id in seen:
            raise errors.InvalidArgument(
                f"{where}.id repeats documents[{seen[document.id]}].id {document.id[:64]!r}",
                field=f"{where}.id",
            )
        seen[document.id] = index
        if len(document.title) > limits.max_title_chars:
            raise errors.InvalidArgument(
                f"{where}.title is {len(document.title)} characters; at most {limits.max_title_chars}",
                field=f"{where}.title",
            )
        if len(document.text) > limits.max_text_chars:
            raise errors.InvalidArgument(
                f"{where}.text is {len(document.text)} characters; at most {limits.max_text_chars}",
                field=f"{where}.text",
            )
        if len(document.metadata) > limits.max_metadata_entries:
            raise errors.InvalidArgument(
                f"{where}.metadata has {len(document.metadata)} entries; "
                f"at most {limits.max_metadata_entries}",
                field=f"{where}.metadata",
            )
        for key, value in document.metadata.items():
            too_long = (
                len(key) > limits.max_metadata_key_chars or len(value) > limits.max_metadata_value_chars
            )
            if too_long:
                raise errors.InvalidArgument(
                    f"{where}.metadata keys are at most {limits.max_metadata_key_chars} characters, values "
                    f"at most {limits.max_metadata_value_chars}",
                    field=f"{where}.metadata",
                )


def chunk_rows(documents: Sequence[DocumentIn], info: CollectionInfo, limits: CorpusLimits) -> list[dict]:
    """The chunk rows of a validated batch (without vectors), within the chunk limits."""
    rows: list[dict] = []
    for index, document in enumerate(documents):
        metadata = dict(document.metadata)
        chunks = chunk_words(document.text, info.chunk_words, info.chunk_overlap_words)
        if len(chunks) > limits.max_chunks_per_document:
            raise errors.InvalidArgument(
                f"documents[{index}].text makes {len(chunks)} chunks; "
                f"at most {limits.max_chunks_per_document}",
                field=f"documents[{index}].text",
            )
        for chunk in chunks:
            rows.append(
                {
                    "chunk_id": schema.chunk_id(document.id, chunk.index),
                    "document_id": document.id,
                    "chunk_index": chunk.index,
                    "title": document.title,
                    "text": chunk.text,
                    "search_text": f"{document.title} {chunk.text}".strip(),
                    "metadata": metadata,
                }
            )
        if len(rows) > limits.max_chunks_per_batch:
            raise errors.InvalidArgument(
                f"the batch makes more than {limits.max_chunks_per_batch} chunks (at documents[{index}]); "
                "send fewer documents per batch",
                field="documents",
            )
    return rows
