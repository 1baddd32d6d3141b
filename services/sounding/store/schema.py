"""Table names and Arrow schemas."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sounding.store.tenancy import ResourceRef

COLLECTIONS_TABLE = "collections"
SESSIONS_TABLE = "inquiry_sessions"
SESSION_SETUPS_TABLE = "inquiry_session_setups"
CHUNKS_PREFIX = "chunks__"
TEXT_INDEX = "search_text_idx"
TEXT_COLUMN = "search_text"

COLLECTIONS_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("description", pa.string()),
        ("create_time_us", pa.int64()),
        ("embedding_model", pa.string()),
        ("embedding_dimension", pa.int32()),
        ("chunk_words", pa.int32()),
        ("chunk_overlap_words", pa.int32()),
    ]
)


# One row per inquiry session, written when it starts: what stays fixed (hypotheses, questions).
SESSION_SETUPS_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("domain", pa.string()),
        ("setup_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)

# Append-only: one row per saved step; a session's state is its row with the highest step.
SESSIONS_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("step", pa.int64()),
        ("domain", pa.string()),
        ("state_json", pa.string()),
        ("update_time_us", pa.int64()),
    ]
)


def chunks_table(collection: ResourceRef) -> str:
    return CHUNKS_PREFIX + collection.key


def chunks_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("document_id", pa.string()),
            ("chunk_index", pa.int32()),
            ("title", pa.string()),
            ("text", pa.string()),
            # Title and chunk text: what is embedded and full-text indexed.
            ("search_text", pa.string()),
            ("metadata", pa.map_(pa.string(), pa.string())),
            ("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def chunk_id(document_id: str, index: int) -> str:
    return f"{document_id}#{index}"


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def chunk_table(rows: list[dict], vectors: np.ndarray, dimension: int) -> pa.Table:
    """A batch's chunk rows (every chunks column but the vector) with their vectors, as written."""
    chunks = chunks_schema(dimension)
    return pa.Table.from_pylist(rows, chunks.remove(chunks.get_field_index("vector"))).append_column(
        chunks.field("vector"), pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension)
    )


def vector_matrix(column: pa.ChunkedArray) -> np.ndarray:
    """A column of fixed-size vectors as a (rows x dimension) matrix ((0, 0) when empty)."""
    vectors = column.combine_chunks()
    if len(vectors) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    return vectors.values.to_numpy(zero_copy_only=False).reshape(len(vectors), vectors.type.list_size)
